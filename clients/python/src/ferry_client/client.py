"""The blocking client: :class:`Client`. :mod:`ferry_client.aio` is the same API for asyncio."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from . import _ops, _ws
from . import models as m
from ._config import base_url, find_token
from ._core import (
    BundleClass,
    Duration,
    FileSource,
    Op,
    Param,
    Transport,
    raise_for_error,
    seconds,
    stream_chunks_sync,
)
from .errors import FerryError, ShuttingDown, Timeout, Unreachable
from .provider import Provider


def _transport_error(e: Exception, what: str) -> FerryError:
    if isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
        return Unreachable(f"{what}: the node does not answer: {e}")
    if isinstance(e, httpx.TimeoutException):
        return Timeout(f"{what}: no answer in time: {e}")
    if isinstance(e, ConnectionClosed):
        return Unreachable(f"{what}: the connection closed: {e}")
    if isinstance(e, (httpx.TransportError, OSError)):
        return Unreachable(f"{what}: the connection broke: {e}")
    return FerryError(f"{what}: {e}")


class Client:
    """A node's local API, blocking.

    ``api`` is ``host:port`` or ``http://host:port`` (default ``FERRY_API``, else
    ``127.0.0.1:4550``); ``token`` the API token (default: found as the ``ferry`` commands find
    it). ``timeout`` bounds each request that is not a long poll (a long poll is bounded by its
    own wait). ``transport`` replaces httpx's (tests wrap it); ``websocket_hook`` sees every
    WebSocket upgrade before it is made, and may return a check for each decoded message.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        api: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        websocket_hook: _ws.WebSocketHook | None = None,
    ) -> None:
        self.url = base_url(api)
        self.token = token if token is not None else find_token(self.url)
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )
        self._websocket_hook = websocket_hook
        self._provider: Provider | None = None

    def close(self) -> None:
        self._http.close()

    # ---- serving procedures

    @property
    def provider(self) -> Provider:
        """The functions this client serves (:mod:`ferry_client.provider`)."""
        if self._provider is None:
            self._provider = Provider(self)
        return self._provider

    @property
    def procedure(self) -> Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]:
        """``@node.procedure(name, *, description, timeout, max_output, max_concurrent,
        idempotent, allow, require, returns)`` decorates a function this node serves once
        :meth:`serve` runs (:meth:`ferry_client.provider.Provider.procedure`). Its parameters'
        annotations declare the procedure's (``int``, ``float``, ``bool``, ``str``, ``bytes``,
        ``ReceivedFile``); ``timeout`` (seconds) and ``max_output`` (bytes) hold it."""
        return self.provider.procedure

    def serve(
        self,
        *,
        stop: threading.Event | None = None,
        reconnect: bool = True,
        ready: threading.Event | None = None,
    ) -> None:
        """Serves the decorated functions until ``stop`` is set (see
        :meth:`ferry_client.provider.Provider.serve`)."""
        self.provider.serve(stop=stop, reconnect=reconnect, ready=ready)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- requests

    def _request(self, op: Op, *, stream: bool = False) -> httpx.Response:
        content: Any = None
        if op.body is not None:
            content = op.body.iter_sync() if op.body.streamed else op.body.whole()
        timeout = httpx.Timeout(self.timeout, read=op.read_timeout or self.timeout)
        request = self._http.build_request(
            op.method,
            op.path,
            params=op.params or None,
            content=content,
            headers=op.headers(),
            timeout=timeout,
        )
        try:
            return self._http.send(request, stream=stream)
        except httpx.HTTPError as e:
            raise _transport_error(e, f"{op.method} {op.path}") from e

    def _run(self, op: Op) -> Any:
        response = self._request(op)
        raise_for_error(response)
        return op.parse(response)

    def _download(self, op: Op, path: str | os.PathLike[str]) -> int:
        """Streams an answer into ``path`` (through ``path.part``, renamed once whole)."""
        target = Path(path)
        part = target.with_name(target.name + ".part")
        response = self._request(op, stream=True)
        try:
            if not response.is_success:
                response.read()
                raise_for_error(response)
            written = 0
            with open(part, "wb") as f:
                for chunk in response.iter_bytes():
                    f.write(chunk)
                    written += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(part, target)
            return written
        except httpx.HTTPError as e:
            raise _transport_error(e, f"{op.method} {op.path}") from e
        finally:
            response.close()
            part.unlink(missing_ok=True)

    def _websocket(self, path: str) -> tuple[ClientConnection, _ws.MessageCheck]:
        """An open WebSocket to ``path`` and the check its messages go through."""
        url, headers = _ws.upgrade_request(self.url, path, self.token)
        check: _ws.MessageCheck | None = None
        if self._websocket_hook is not None:
            check = self._websocket_hook(_ws.as_http_request(self.url, path, headers))
        try:
            connection = connect(
                url,
                additional_headers=headers,
                open_timeout=self.timeout,
                close_timeout=2,
                max_size=None,
            )
        except InvalidStatus as e:
            raise _ws.refused(e) from None
        except (OSError, TimeoutError) as e:
            raise _transport_error(e, f"WebSocket {path}") from e
        # The caller owns it and closes it; entering it says so (websockets 17.1 warns about a
        # connection that was never entered).
        return connection.__enter__(), check or _ws.no_check

    # ---- the node

    def status(self) -> m.Status:
        """The node's id, uptime, counters, store use, listening addresses and key."""
        result: m.Status = self._run(_ops.status())
        return result

    def peers(self) -> list[m.Peer]:
        """Neighbours with a convergence-layer session now."""
        result: list[m.Peer] = self._run(_ops.peers())
        return result

    def routes(self) -> list[m.Route]:
        """Real-time (mesh) routes to nodes reachable now."""
        result: list[m.Route] = self._run(_ops.routes())
        return result

    def bundles(self) -> list[m.StoredBundle]:
        """Bundles in the store: originated, carried for others, waiting to be delivered."""
        result: list[m.StoredBundle] = self._run(_ops.bundles())
        return result

    def reports(self, bundle: str | None = None) -> list[m.Report]:
        """Status reports received about bundles this node sent (only ``bundle``'s if given)."""
        result: list[m.Report] = self._run(_ops.reports(bundle))
        return result

    def procedures(self) -> list[m.Procedure]:
        """The procedures this node serves."""
        result: list[m.Procedure] = self._run(_ops.procedures())
        return result

    def served(self) -> list[m.Served]:
        """The calls this node serves or served that it keeps in memory, the latest deadline
        first."""
        result: list[m.Served] = self._run(_ops.served())
        return result

    def keys(self) -> list[m.Key]:
        """The keys this node knows for other nodes (and keys they presented lately)."""
        result: list[m.Key] = self._run(_ops.keys())
        return result

    def accept_key(self, node: str, key: str | None = None) -> m.Key:
        """Accepts ``key`` (64 hex digits) for ``node``; without one, the key it presented."""
        result: m.Key = self._run(_ops.accept_key(node, key))
        return result

    def forget_key(self, node: str) -> None:
        """Forgets ``node``'s key; the next signed message naming it teaches it again."""
        self._run(_ops.forget_key(node))

    def metrics(self) -> str:
        """The node's counters and gauges, Prometheus text."""
        result: str = self._run(_ops.metrics())
        return result

    def openapi(self) -> str:
        """The API's OpenAPI description (YAML), as the node serves it."""
        result: str = self._run(_ops.openapi())
        return result

    # ---- bundles

    def send(
        self,
        destination: str,
        payload: str | bytes,
        *,
        source: str | None = None,
        lifetime: Duration | None = None,
        bundle_class: BundleClass | None = None,
        report: bool = False,
        priority: int | None = None,
    ) -> m.SendReply:
        """Sends a bundle with ``payload`` (text, or bytes as they are) to ``destination``;
        answered once it is durable in the store (or sent, for the real-time classes)."""
        options = (source, lifetime, bundle_class, report, priority)
        op = (
            _ops.send_text(destination, payload, *options)
            if isinstance(payload, str)
            else _ops.send_bytes(destination, payload, *options)
        )
        result: m.SendReply = self._run(op)
        return result

    def send_file(
        self,
        destination: str,
        file: FileSource,
        *,
        source: str | None = None,
        lifetime: Duration | None = None,
        bundle_class: BundleClass | None = None,
        report: bool = False,
        priority: int | None = None,
    ) -> m.SendReply:
        """Sends a file (a path, or a seekable binary file from its position) as a bundle's
        payload, streamed: it is never read whole into memory."""
        op = _ops.send_file(destination, file, source, lifetime, bundle_class, report, priority)
        result: m.SendReply = self._run(op)
        return result

    def send_stream(
        self,
        destination: str,
        chunks: Iterable[bytes],
        *,
        size: int | None = None,
        source: str | None = None,
        lifetime: Duration | None = None,
        bundle_class: BundleClass | None = None,
        report: bool = False,
        priority: int | None = None,
    ) -> m.SendReply:
        """Sends the bytes ``chunks`` yields as one bundle's payload, as they come. With
        ``size`` the node can refuse a payload above its limit before any is sent."""
        op = _ops.send_raw(destination, None, source, lifetime, bundle_class, report, priority)
        headers = {"Content-Type": "application/octet-stream"}
        if size is not None:
            headers["Content-Length"] = str(size)
        request = self._http.build_request(
            "POST", op.path, params=op.params, content=stream_chunks_sync(chunks), headers=headers
        )
        try:
            response = self._http.send(request)
        except httpx.HTTPError as e:
            raise _transport_error(e, f"POST {op.path}") from e
        raise_for_error(response)
        result: m.SendReply = op.parse(response)
        return result

    def receive(
        self,
        endpoint: str,
        *,
        max_bundles: int = 100,
        wait: Duration | None = None,
        payload: bool = True,
    ) -> list[m.Received]:
        """Bundles waiting for a local endpoint (``inbox`` or a full endpoint id of this node),
        oldest first. Nothing is taken: :meth:`ack` takes one. With ``wait``, waits that long
        for a first bundle (``[]`` if none came)."""
        if wait is None:
            result: list[m.Received] = self._run(_ops.receive(endpoint, max_bundles, None, payload))
            return result
        deadline = time.monotonic() + seconds(wait)
        while True:
            left = max(0.0, deadline - time.monotonic())
            got: list[m.Received] = self._run(_ops.receive(endpoint, max_bundles, left, payload))
            if got or left <= 0 or time.monotonic() >= deadline:
                return got

    def payload(self, endpoint: str, seq: int) -> bytes:
        """A waiting bundle's payload."""
        result: bytes = self._run(_ops.payload(endpoint, seq))
        return result

    def save_payload(self, endpoint: str, seq: int, path: str | os.PathLike[str]) -> int:
        """Streams a waiting bundle's payload into ``path`` (synced, then renamed into place);
        its size. Acknowledge it afterwards."""
        return self._download(_ops.payload(endpoint, seq), path)

    def ack(self, endpoint: str, seq: int) -> None:
        """Takes bundle ``seq`` out of the endpoint's inbox, durably, once the application has
        it safely."""
        self._run(_ops.ack(endpoint, seq))

    @contextmanager
    def take(self, endpoint: str, *, timeout: Duration = 30.0) -> Iterator[m.Received]:
        """The oldest bundle waiting for ``endpoint`` (waiting up to ``timeout`` for one), to
        use in a ``with`` block: it is acknowledged when the block ends normally, and stays in
        the inbox if the block raises. :class:`Timeout` if none came."""
        got = self.receive(endpoint, max_bundles=1, wait=timeout)
        if not got:
            raise Timeout(f"no bundle for {endpoint} within {seconds(timeout):g} s")
        yield got[0]
        self.ack(endpoint, got[0].seq)

    def subscribe(self, endpoint: str) -> Subscription:
        """Every bundle waiting and arriving for ``endpoint``, pushed over a WebSocket; each
        stays in the inbox until :meth:`Subscription.ack`."""
        ws, check = self._websocket(_ops.subscribe_path(endpoint))
        return Subscription(ws, endpoint, check)

    # ---- calls

    def call(
        self,
        target: str,
        procedure: str,
        *params: Param,
        requirements: str | None = None,
        transport: Transport | None = None,
        deadline: Duration | None = None,
        ack_timeout: Duration | None = None,
        result_timeout: Duration | None = None,
    ) -> m.Call:
        """Makes a call and returns at once with it, once it is durable (detached): follow it
        with :meth:`wait`, :meth:`result` or :meth:`watch`.

        ``target`` is a node (``bravo`` or ``dtn://bravo/``: explicit), ``any`` (the first
        server that can; first result wins) or ``all`` (every server until the deadline).
        ``params`` are text, ints, floats, bools, bytes and :class:`File` s.
        """
        op = _ops.make_call(
            target,
            procedure,
            params,
            requirements=requirements,
            transport=transport,
            deadline=deadline,
            ack_timeout=ack_timeout,
            result_timeout=result_timeout,
            wait=None,
        )
        result: m.Call = self._run(op)
        return result

    def call_and_wait(
        self,
        target: str,
        procedure: str,
        *params: Param,
        timeout: Duration = 60.0,
        requirements: str | None = None,
        transport: Transport | None = None,
        deadline: Duration | None = None,
        ack_timeout: Duration | None = None,
        result_timeout: Duration | None = None,
    ) -> m.Call:
        """Makes a call and waits (up to ``timeout``) until it ends: the finished call, in one
        request when it ends within the node's long-poll limit. :class:`Timeout` if it has not
        ended by then (the call goes on in the node)."""
        limit = seconds(timeout)
        started = time.monotonic()
        op = _ops.make_call(
            target,
            procedure,
            params,
            requirements=requirements,
            transport=transport,
            deadline=deadline,
            ack_timeout=ack_timeout,
            result_timeout=result_timeout,
            wait=limit,
        )
        call: m.Call = self._run(op)
        if call.finished:
            return call
        return self.wait(call.id, timeout=max(0.0, limit - (time.monotonic() - started)))

    def run(
        self,
        target: str,
        procedure: str,
        *params: Param,
        timeout: Duration = 60.0,
        with_files: bool = True,
        requirements: str | None = None,
        transport: Transport | None = None,
        deadline: Duration | None = None,
        ack_timeout: Duration | None = None,
        result_timeout: Duration | None = None,
    ) -> m.Reply:
        """Makes a call and returns its result (the first, for ``any``), with its files arrived
        unless ``with_files`` is false. :class:`CallFailed` with the refusal's code if it ended
        without one; :class:`Timeout` if none came within ``timeout``."""
        limit = seconds(timeout)
        started = time.monotonic()
        call = self.call(
            target,
            procedure,
            *params,
            requirements=requirements,
            transport=transport,
            deadline=deadline,
            ack_timeout=ack_timeout,
            result_timeout=result_timeout,
        )
        left = max(0.0, limit - (time.monotonic() - started))
        return self.result(call.id, timeout=left, with_files=with_files)

    def calls(self) -> list[m.Call]:
        """The calls this node made that it keeps in memory, oldest first, without
        timelines."""
        result: list[m.Call] = self._run(_ops.calls())
        return result

    def get_call(self, call_id: str) -> m.Call:
        """One call with its timeline (finished ones until an hour after they ended)."""
        result: m.Call = self._run(_ops.get_call(call_id))
        return result

    def wait(
        self,
        call_id: str,
        *,
        timeout: Duration = 60.0,
        replies: int | None = None,
        files: int | None = None,
        reconnect: bool = True,
    ) -> m.Call:
        """Waits until the call ends, or has more than ``replies`` replies, or more than
        ``files`` arrived result files; the call then. :class:`Timeout` (holding the call as it
        stood) if that did not happen within ``timeout``.

        With ``reconnect`` a node that stops answering meanwhile (restarted, or stopping) is
        asked again until the timeout: the call survives its node's restart.
        """
        deadline = time.monotonic() + seconds(timeout)
        last: m.Call | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"call {call_id} did not end within {seconds(timeout):g} s", last)
            try:
                last = self._run(_ops.wait_call(call_id, left, replies, files))
            except (Unreachable, ShuttingDown):
                if not reconnect:
                    raise
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            assert last is not None
            if _ops.wait_done(last, replies, files):
                return last

    def result(
        self, call_id: str, *, timeout: Duration = 60.0, with_files: bool = True
    ) -> m.Reply:
        """The call's result (the first, for ``any``; see :meth:`Call.results` for ``all``),
        waiting up to ``timeout`` for it and, unless ``with_files`` is false, for its files.
        :class:`CallFailed` if the call ended without one."""
        deadline = time.monotonic() + seconds(timeout)
        call = self.get_call(call_id)
        while not _ops.result_ready(call, with_files):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"no result of call {call_id} within {seconds(timeout):g} s", call)
            if call.finished:
                # Result files travel apart and may come after the call succeeded; the node's
                # wait answers a finished call at once, so look again shortly.
                time.sleep(min(0.1, left))
                call = self.get_call(call_id)
                continue
            try:
                call = self.wait(
                    call_id,
                    timeout=left,
                    replies=len(call.replies),
                    files=call.arrived_files(),
                )
            except Timeout as e:
                e.call = e.call or call
                raise
        return call.result()

    def cancel(self, call_id: str) -> m.Call:
        """Cancels the call; its servers are told and stop a running execution."""
        result: m.Call = self._run(_ops.cancel(call_id))
        return result

    def forget(self, call_id: str) -> None:
        """Forgets the call; replies that arrive later are ignored."""
        self._run(_ops.forget(call_id))

    def watch(self, call_id: str, *, timeout: Duration | None = None) -> Iterator[m.Call]:
        """The call now and after every change, over a WebSocket, until it is finished (the
        last one yielded is). :class:`Timeout` if it has not finished within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + seconds(timeout)
        ws, check = self._websocket(_ops.watch_path(call_id))
        with ws:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"call {call_id} did not finish within {seconds(timeout or 0):g} s")
                try:
                    message = ws.recv(timeout=left)
                except TimeoutError:
                    continue
                except ConnectionClosedOK:
                    return
                except ConnectionClosed as e:
                    raise _transport_error(e, f"watching call {call_id}") from e
                call = _ws.call(message, check)
                yield call
                if call.finished:
                    return

    def file(self, hash_: str) -> bytes:
        """A file this node holds (a result's or a parameter's) by its BLAKE3 hash."""
        result: bytes = self._run(_ops.file(hash_))
        return result

    def save_file(self, hash_: str, path: str | os.PathLike[str]) -> int:
        """Streams a file this node holds into ``path``; its size."""
        return self._download(_ops.file(hash_), path)

    def save_files(self, reply: m.Reply, directory: str | os.PathLike[str]) -> list[Path]:
        """Saves a result's arrived files into ``directory`` under their names (made safe:
        no directories); the paths written."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for f in reply.files:
            if not f.arrived:
                continue
            path = out / _safe_name(f.name)
            self.save_file(f.hash, path)
            written.append(path)
        return written


def _safe_name(name: str) -> str:
    base = os.path.basename(name.replace("\\", "/"))
    return base if base not in ("", ".", "..") else "file"


class Subscription:
    """Bundles pushed to an endpoint's subscriber (``GET …/subscribe``).

    Each bundle waiting or arriving comes once per subscription, at most 64 ahead of the
    acknowledgements; :meth:`ack` takes one out of the inbox, and what is not acknowledged
    stays for the next subscriber. Iterate it, or call :meth:`next` with a timeout.
    """

    def __init__(
        self, ws: ClientConnection, endpoint: str, check: _ws.MessageCheck = _ws.no_check
    ) -> None:
        self._ws = ws
        self._check = check
        self.endpoint = endpoint

    def next(self, timeout: Duration | None = None) -> m.Received:
        """The next bundle; :class:`Timeout` if none came within ``timeout``."""
        limit = None if timeout is None else seconds(timeout)
        try:
            message = self._ws.recv(timeout=limit)
        except TimeoutError:
            raise Timeout(f"no bundle for {self.endpoint} within {limit:g} s") from None
        except ConnectionClosed as e:
            raise _transport_error(e, f"subscription to {self.endpoint}") from e
        return _ws.received(message, self._check)

    def ack(self, bundle: m.Received | int) -> None:
        """Takes a bundle (or its ``seq``) out of the inbox: the application has it safely."""
        seq = bundle if isinstance(bundle, int) else bundle.seq
        try:
            self._ws.send(_ws.ack_message(seq))
        except ConnectionClosed as e:
            raise _transport_error(e, f"subscription to {self.endpoint}") from e

    def __iter__(self) -> Iterator[m.Received]:
        while True:
            try:
                yield self.next()
            except Unreachable:
                return

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["Client", "Subscription"]
