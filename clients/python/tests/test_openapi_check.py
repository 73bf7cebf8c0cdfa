"""The check itself: a request crates/daemon/openapi.yaml does not describe fails, before it
reaches the node (so the other tests' passing means each of their requests is described)."""

from __future__ import annotations

import httpx
import pytest

from conftest import Pair
from openapi_check import CheckedTransport, SpecChecker, SpecViolation

from ferry_client import Client
from ferry_client._core import Op, json_body


@pytest.fixture
def own() -> SpecChecker:
    # Its own checker: the violations made here on purpose are not the session's.
    return SpecChecker()


def _client(pair: Pair, checker: SpecChecker) -> Client:
    return Client(
        pair.alpha.api,
        token=pair.alpha.token,
        transport=CheckedTransport(checker),
        websocket_hook=checker.check_upgrade,
    )


@pytest.mark.parametrize(
    "op",
    [
        Op("GET", "/v1/nothing"),
        Op("DELETE", "/v1/status"),
        Op("GET", "/v1/calls/" + "0" * 32 + "/wait", params={"timeout": "1s", "bogus": "1"}),
        Op("GET", "/v1/endpoints/inbox/bundles", params={"max": "5000"}),
        Op("GET", "/v1/calls/not-an-id"),
        Op("POST", "/v1/calls", body=json_body({"target": 3, "procedure": "echo"})),
        Op("POST", "/v1/calls", body=json_body({"target": "b", "procedure": "e", "params": [{"txt": "x"}]})),
        Op("POST", "/v1/bundles", body=json_body({"payload": "no destination"})),
    ],
    ids=lambda op: f"{op.method} {op.path} {op.params}",
)
def test_an_undescribed_request_fails(pair: Pair, own: SpecChecker, op: Op) -> None:
    with _client(pair, own) as client:
        with pytest.raises(SpecViolation):
            client._run(op)
    assert len(own.violations) == 1 and own.checked == []


def test_a_described_request_passes_and_is_counted(pair: Pair, own: SpecChecker) -> None:
    with _client(pair, own) as client:
        client.status()
        client.receive("inbox", max_bundles=5, wait=0.1, payload=False)
    assert own.violations == [] and len(own.checked) == 2


def test_a_websocket_upgrade_and_its_messages_are_checked(own: SpecChecker) -> None:
    with pytest.raises(SpecViolation):
        own.check_upgrade(httpx.Request("GET", "http://127.0.0.1:1/v1/status"))
    check = own.check_upgrade(
        httpx.Request(
            "GET",
            "http://127.0.0.1:1/v1/endpoints/inbox/subscribe",
            headers={"Authorization": "Bearer x"},
        )
    )
    bundle = {
        "seq": 1,
        "id": "dtn://a/-1-0",
        "source": "dtn://a/",
        "destination": "dtn://b/x",
        "created_ms": 1,
        "expiry_ms": 2,
        "size": 0,
    }
    check(bundle)
    check({"code": "bad_request", "message": "expected {\"ack\": seq}"})
    with pytest.raises(SpecViolation):
        check({**bundle, "seq": "one"})
    with pytest.raises(SpecViolation):
        check({"code": "no_such_code", "message": "?"})
