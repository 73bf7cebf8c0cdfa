"""Each operation of the API as an :class:`Op` (method, path, query, body, how to read the
answer), built the same way for the sync and the asyncio client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import models as m
from ._core import (
    SLACK,
    Body,
    BundleClass,
    Duration,
    FileSource,
    Op,
    Param,
    Transport,
    call_body,
    call_spec,
    json_body,
    parsed,
    query,
    raw_file_body,
    segment,
    send_params,
    wait_text,
)


def _list(item: Any, what: str) -> Any:
    return parsed(lambda v: m.parse_list(v, item, what))


def status() -> Op:
    return Op("GET", "/v1/status", parsed(m.Status.from_json))


def peers() -> Op:
    return Op("GET", "/v1/peers", _list(m.Peer.from_json, "peers"))


def routes() -> Op:
    return Op("GET", "/v1/routes", _list(m.Route.from_json, "routes"))


def bundles() -> Op:
    return Op("GET", "/v1/bundles", _list(m.StoredBundle.from_json, "bundles"))


def reports(bundle: str | None) -> Op:
    params = {"bundle": bundle} if bundle is not None else {}
    return Op("GET", "/v1/reports", _list(m.Report.from_json, "reports"), params)


def procedures() -> Op:
    return Op("GET", "/v1/procedures", _list(m.Procedure.from_json, "procedures"))


def served() -> Op:
    return Op("GET", "/v1/served", _list(m.Served.from_json, "served calls"))


def keys() -> Op:
    return Op("GET", "/v1/keys", _list(m.Key.from_json, "keys"))


def accept_key(node: str, key: str | None) -> Op:
    body = json_body({"key": key} if key is not None else {})
    return Op("PUT", f"/v1/keys/{segment(node)}", parsed(m.Key.from_json), body=body)


def forget_key(node: str) -> Op:
    return Op("DELETE", f"/v1/keys/{segment(node)}")


def metrics() -> Op:
    return Op("GET", "/metrics", lambda r: r.text)


def openapi() -> Op:
    return Op("GET", "/v1/openapi.yaml", lambda r: r.text)


# Bundles


def send_text(
    destination: str,
    text: str,
    source: str | None,
    lifetime: Duration | None,
    bundle_class: BundleClass | None,
    report: bool,
    priority: int | None,
) -> Op:
    options = send_params(destination, source, lifetime, bundle_class, report, priority)
    return Op(
        "POST",
        "/v1/bundles",
        parsed(m.SendReply.from_json),
        body=json_body({**options, "payload": text}),
    )


def send_raw(
    destination: str,
    body: Body | None,
    source: str | None,
    lifetime: Duration | None,
    bundle_class: BundleClass | None,
    report: bool,
    priority: int | None,
) -> Op:
    """The raw send; ``body`` None for a stream the client sends itself."""
    options = send_params(destination, source, lifetime, bundle_class, report, priority)
    return Op("POST", "/v1/bundles/raw", parsed(m.SendReply.from_json), query(options), body)


def send_bytes(destination: str, data: bytes, *options: Any) -> Op:
    return send_raw(destination, Body((bytes(data),), "application/octet-stream"), *options)


def send_file(destination: str, source: FileSource, *options: Any) -> Op:
    return send_raw(destination, raw_file_body(source), *options)


def receive(endpoint: str, max_bundles: int, wait: float | None, payload: bool) -> Op:
    params = {"max": str(max_bundles)}
    if wait is not None:
        params["wait"] = wait_text(wait)
    if not payload:
        params["payload"] = "false"
    return Op(
        "GET",
        f"/v1/endpoints/{segment(endpoint)}/bundles",
        _list(m.Received.from_json, "received"),
        params,
        read_timeout=None if wait is None else min(wait, 300.0) + SLACK,
    )


def payload(endpoint: str, seq: int) -> Op:
    return Op(
        "GET", f"/v1/endpoints/{segment(endpoint)}/bundles/{seq}/payload", lambda r: r.content
    )


def ack(endpoint: str, seq: int) -> Op:
    return Op("DELETE", f"/v1/endpoints/{segment(endpoint)}/bundles/{seq}")


def subscribe_path(endpoint: str) -> str:
    return f"/v1/endpoints/{segment(endpoint)}/subscribe"


# Calls


def make_call(
    target: str,
    procedure: str,
    params: Sequence[Param],
    *,
    requirements: str | None,
    transport: Transport | None,
    deadline: Duration | None,
    ack_timeout: Duration | None,
    result_timeout: Duration | None,
    wait: float | None,
) -> Op:
    spec = call_spec(
        target,
        procedure,
        requirements=requirements,
        transport=transport,
        deadline=deadline,
        ack_timeout=ack_timeout,
        result_timeout=result_timeout,
    )
    return Op(
        "POST",
        "/v1/calls",
        parsed(m.Call.from_json),
        {"wait": wait_text(wait)} if wait is not None else {},
        call_body(spec, params),
        read_timeout=None if wait is None else min(wait, 300.0) + SLACK,
    )


def calls() -> Op:
    return Op("GET", "/v1/calls", _list(m.Call.from_json, "calls"))


def get_call(call_id: str) -> Op:
    return Op("GET", f"/v1/calls/{segment(call_id)}", parsed(m.Call.from_json))


def wait_call(call_id: str, wait: float, replies: int | None, files: int | None) -> Op:
    params = {"timeout": wait_text(wait)}
    if replies is not None:
        params["replies"] = str(replies)
    if files is not None:
        params["files"] = str(files)
    return Op(
        "GET",
        f"/v1/calls/{segment(call_id)}/wait",
        parsed(m.Call.from_json),
        params,
        read_timeout=min(wait, 300.0) + SLACK,
    )


def cancel(call_id: str) -> Op:
    return Op("POST", f"/v1/calls/{segment(call_id)}/cancel", parsed(m.Call.from_json))


def forget(call_id: str) -> Op:
    return Op("DELETE", f"/v1/calls/{segment(call_id)}")


def watch_path(call_id: str) -> str:
    return f"/v1/calls/{segment(call_id)}/watch"


def file(hash_: str) -> Op:
    return Op("GET", f"/v1/files/{segment(hash_)}", lambda r: r.content)


def wait_done(call: m.Call, replies: int | None, files: int | None) -> bool:
    """Whether ``call`` has what a wait for it waits for (as the node decides)."""
    return (
        call.finished
        or (replies is not None and len(call.replies) > replies)
        or (files is not None and call.arrived_files() > files)
    )


def result_ready(call: m.Call, with_files: bool) -> bool:
    """Whether a caller of ``result`` has its answer: a result (with its files arrived, if
    asked) or the call's end."""
    for reply in call.replies:
        if reply.ok:
            return not with_files or all(f.arrived for f in reply.files)
    return call.finished

