"""The asyncio client: :class:`AsyncClient`, the same API as :class:`ferry_client.Client` with
coroutines, async iterators and async context managers, on the same model layer."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidStatus

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
)
from .client import _safe_name, _transport_error
from .errors import ShuttingDown, Timeout, Unreachable
from .provider import AsyncProvider


async def _chunks(chunks: AsyncIterable[bytes] | Iterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(chunks, AsyncIterable):
        async for chunk in chunks:
            yield bytes(chunk)
    else:
        for chunk in chunks:
            yield bytes(chunk)


class AsyncClient:
    """A node's local API, for asyncio. Arguments as for :class:`ferry_client.Client`
    (``transport`` an ``httpx.AsyncBaseTransport``). Use it as an async context manager, or
    await :meth:`aclose`."""

    def __init__(
        self,
        api: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        websocket_hook: _ws.WebSocketHook | None = None,
    ) -> None:
        self.url = base_url(api)
        self.token = token if token is not None else find_token(self.url)
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )
        self._websocket_hook = websocket_hook
        self._provider: AsyncProvider | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- serving procedures

    @property
    def provider(self) -> AsyncProvider:
        """The functions this client serves (:mod:`ferry_client.provider`)."""
        if self._provider is None:
            self._provider = AsyncProvider(self)
        return self._provider

    @property
    def procedure(self) -> Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]:
        """As :attr:`ferry_client.Client.procedure`; the function may be a coroutine function
        (awaited) or a plain one (run in a thread)."""
        return self.provider.procedure

    async def serve(self, *, reconnect: bool = True, ready: asyncio.Event | None = None) -> None:
        """Serves the decorated functions until cancelled."""
        await self.provider.serve(reconnect=reconnect, ready=ready)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- requests

    async def _request(self, op: Op, *, stream: bool = False) -> httpx.Response:
        content: Any = None
        if op.body is not None:
            content = op.body.iter_async() if op.body.streamed else op.body.whole()
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
            return await self._http.send(request, stream=stream)
        except httpx.HTTPError as e:
            raise _transport_error(e, f"{op.method} {op.path}") from e

    async def _run(self, op: Op) -> Any:
        response = await self._request(op)
        raise_for_error(response)
        return op.parse(response)

    async def _download(self, op: Op, path: str | os.PathLike[str]) -> int:
        target = Path(path)
        part = target.with_name(target.name + ".part")
        response = await self._request(op, stream=True)
        try:
            if not response.is_success:
                await response.aread()
                raise_for_error(response)
            written = 0
            with open(part, "wb") as f:
                async for chunk in response.aiter_bytes():
                    await asyncio.to_thread(f.write, chunk)
                    written += len(chunk)
                f.flush()
                await asyncio.to_thread(os.fsync, f.fileno())
            os.replace(part, target)
            return written
        except httpx.HTTPError as e:
            raise _transport_error(e, f"{op.method} {op.path}") from e
        finally:
            await response.aclose()
            part.unlink(missing_ok=True)

    async def _websocket(self, path: str) -> tuple[ClientConnection, _ws.MessageCheck]:
        """An open WebSocket to ``path`` and the check its messages go through."""
        url, headers = _ws.upgrade_request(self.url, path, self.token)
        check: _ws.MessageCheck | None = None
        if self._websocket_hook is not None:
            check = self._websocket_hook(_ws.as_http_request(self.url, path, headers))
        try:
            connection = await connect(
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
        return connection, check or _ws.no_check

    # ---- the node

    async def status(self) -> m.Status:
        """The node's id, uptime, counters, store use, listening addresses and key."""
        result: m.Status = await self._run(_ops.status())
        return result

    async def peers(self) -> list[m.Peer]:
        result: list[m.Peer] = await self._run(_ops.peers())
        return result

    async def routes(self) -> list[m.Route]:
        result: list[m.Route] = await self._run(_ops.routes())
        return result

    async def bundles(self) -> list[m.StoredBundle]:
        result: list[m.StoredBundle] = await self._run(_ops.bundles())
        return result

    async def reports(self, bundle: str | None = None) -> list[m.Report]:
        result: list[m.Report] = await self._run(_ops.reports(bundle))
        return result

    async def procedures(self) -> list[m.Procedure]:
        result: list[m.Procedure] = await self._run(_ops.procedures())
        return result

    async def served(self) -> list[m.Served]:
        result: list[m.Served] = await self._run(_ops.served())
        return result

    async def keys(self) -> list[m.Key]:
        result: list[m.Key] = await self._run(_ops.keys())
        return result

    async def accept_key(self, node: str, key: str | None = None) -> m.Key:
        result: m.Key = await self._run(_ops.accept_key(node, key))
        return result

    async def forget_key(self, node: str) -> None:
        await self._run(_ops.forget_key(node))

    async def metrics(self) -> str:
        result: str = await self._run(_ops.metrics())
        return result

    async def openapi(self) -> str:
        result: str = await self._run(_ops.openapi())
        return result

    # ---- bundles

    async def send(
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
        """See :meth:`ferry_client.Client.send`."""
        options = (source, lifetime, bundle_class, report, priority)
        op = (
            _ops.send_text(destination, payload, *options)
            if isinstance(payload, str)
            else _ops.send_bytes(destination, payload, *options)
        )
        result: m.SendReply = await self._run(op)
        return result

    async def send_file(
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
        """See :meth:`ferry_client.Client.send_file`; the file is read in a thread, chunk by
        chunk."""
        op = _ops.send_file(destination, file, source, lifetime, bundle_class, report, priority)
        result: m.SendReply = await self._run(op)
        return result

    async def send_stream(
        self,
        destination: str,
        chunks: AsyncIterable[bytes] | Iterable[bytes],
        *,
        size: int | None = None,
        source: str | None = None,
        lifetime: Duration | None = None,
        bundle_class: BundleClass | None = None,
        report: bool = False,
        priority: int | None = None,
    ) -> m.SendReply:
        """See :meth:`ferry_client.Client.send_stream`; ``chunks`` may be an async
        iterable."""
        op = _ops.send_raw(destination, None, source, lifetime, bundle_class, report, priority)
        headers = {"Content-Type": "application/octet-stream"}
        if size is not None:
            headers["Content-Length"] = str(size)
        request = self._http.build_request(
            "POST", op.path, params=op.params, content=_chunks(chunks), headers=headers
        )
        try:
            response = await self._http.send(request)
        except httpx.HTTPError as e:
            raise _transport_error(e, f"POST {op.path}") from e
        raise_for_error(response)
        result: m.SendReply = op.parse(response)
        return result

    async def receive(
        self,
        endpoint: str,
        *,
        max_bundles: int = 100,
        wait: Duration | None = None,
        payload: bool = True,
    ) -> list[m.Received]:
        """See :meth:`ferry_client.Client.receive`."""
        if wait is None:
            op = _ops.receive(endpoint, max_bundles, None, payload)
            result: list[m.Received] = await self._run(op)
            return result
        deadline = time.monotonic() + seconds(wait)
        while True:
            left = max(0.0, deadline - time.monotonic())
            op = _ops.receive(endpoint, max_bundles, left, payload)
            got: list[m.Received] = await self._run(op)
            if got or left <= 0 or time.monotonic() >= deadline:
                return got

    async def payload(self, endpoint: str, seq: int) -> bytes:
        result: bytes = await self._run(_ops.payload(endpoint, seq))
        return result

    async def save_payload(self, endpoint: str, seq: int, path: str | os.PathLike[str]) -> int:
        return await self._download(_ops.payload(endpoint, seq), path)

    async def ack(self, endpoint: str, seq: int) -> None:
        await self._run(_ops.ack(endpoint, seq))

    @asynccontextmanager
    async def take(self, endpoint: str, *, timeout: Duration = 30.0) -> AsyncIterator[m.Received]:
        """See :meth:`ferry_client.Client.take`: ``async with client.take("inbox") as b:``."""
        got = await self.receive(endpoint, max_bundles=1, wait=timeout)
        if not got:
            raise Timeout(f"no bundle for {endpoint} within {seconds(timeout):g} s")
        yield got[0]
        await self.ack(endpoint, got[0].seq)

    def subscribe(self, endpoint: str) -> AsyncSubscription:
        """See :meth:`ferry_client.Client.subscribe`: ``async with client.subscribe("inbox") as
        sub:`` (the WebSocket opens on entry)."""
        path = _ops.subscribe_path(endpoint)
        return AsyncSubscription(lambda: self._websocket(path), endpoint)

    # ---- calls

    async def call(
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
        """See :meth:`ferry_client.Client.call`."""
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
        result: m.Call = await self._run(op)
        return result

    async def call_and_wait(
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
        """See :meth:`ferry_client.Client.call_and_wait`."""
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
        call: m.Call = await self._run(op)
        if call.finished:
            return call
        return await self.wait(call.id, timeout=max(0.0, limit - (time.monotonic() - started)))

    async def run(
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
        """See :meth:`ferry_client.Client.run`."""
        limit = seconds(timeout)
        started = time.monotonic()
        call = await self.call(
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
        return await self.result(call.id, timeout=left, with_files=with_files)

    async def calls(self) -> list[m.Call]:
        result: list[m.Call] = await self._run(_ops.calls())
        return result

    async def get_call(self, call_id: str) -> m.Call:
        result: m.Call = await self._run(_ops.get_call(call_id))
        return result

    async def wait(
        self,
        call_id: str,
        *,
        timeout: Duration = 60.0,
        replies: int | None = None,
        files: int | None = None,
        reconnect: bool = True,
    ) -> m.Call:
        """See :meth:`ferry_client.Client.wait`."""
        deadline = time.monotonic() + seconds(timeout)
        last: m.Call | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"call {call_id} did not end within {seconds(timeout):g} s", last)
            try:
                last = await self._run(_ops.wait_call(call_id, left, replies, files))
            except (Unreachable, ShuttingDown):
                if not reconnect:
                    raise
                await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            assert last is not None
            if _ops.wait_done(last, replies, files):
                return last

    async def result(
        self, call_id: str, *, timeout: Duration = 60.0, with_files: bool = True
    ) -> m.Reply:
        """See :meth:`ferry_client.Client.result`."""
        deadline = time.monotonic() + seconds(timeout)
        call = await self.get_call(call_id)
        while not _ops.result_ready(call, with_files):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"no result of call {call_id} within {seconds(timeout):g} s", call)
            if call.finished:
                await asyncio.sleep(min(0.1, left))
                call = await self.get_call(call_id)
                continue
            try:
                call = await self.wait(
                    call_id,
                    timeout=left,
                    replies=len(call.replies),
                    files=call.arrived_files(),
                )
            except Timeout as e:
                e.call = e.call or call
                raise
        return call.result()

    async def cancel(self, call_id: str) -> m.Call:
        result: m.Call = await self._run(_ops.cancel(call_id))
        return result

    async def forget(self, call_id: str) -> None:
        await self._run(_ops.forget(call_id))

    async def watch(
        self, call_id: str, *, timeout: Duration | None = None
    ) -> AsyncIterator[m.Call]:
        """See :meth:`ferry_client.Client.watch`: ``async for call in client.watch(id):``."""
        deadline = None if timeout is None else time.monotonic() + seconds(timeout)
        ws, check = await self._websocket(_ops.watch_path(call_id))
        async with ws:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"call {call_id} did not finish within {seconds(timeout or 0):g} s")
                try:
                    message = await asyncio.wait_for(ws.recv(), left)
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

    async def file(self, hash_: str) -> bytes:
        result: bytes = await self._run(_ops.file(hash_))
        return result

    async def save_file(self, hash_: str, path: str | os.PathLike[str]) -> int:
        return await self._download(_ops.file(hash_), path)

    async def save_files(self, reply: m.Reply, directory: str | os.PathLike[str]) -> list[Path]:
        """See :meth:`ferry_client.Client.save_files`."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for f in reply.files:
            if not f.arrived:
                continue
            path = out / _safe_name(f.name)
            await self.save_file(f.hash, path)
            written.append(path)
        return written


class AsyncSubscription:
    """See :class:`ferry_client.Subscription`: ``async with client.subscribe("inbox") as sub:``,
    then ``async for bundle in sub:`` and ``await sub.ack(bundle)``."""

    def __init__(
        self,
        opener: Callable[[], Awaitable[tuple[ClientConnection, _ws.MessageCheck]]],
        endpoint: str,
    ) -> None:
        self._opener = opener
        self._ws: ClientConnection | None = None
        self._check: _ws.MessageCheck = _ws.no_check
        self.endpoint = endpoint

    async def open(self) -> AsyncSubscription:
        """Opens the WebSocket (``async with`` does)."""
        if self._ws is None:
            self._ws, self._check = await self._opener()
        return self

    async def _socket(self) -> ClientConnection:
        await self.open()
        assert self._ws is not None
        return self._ws

    async def next(self, timeout: Duration | None = None) -> m.Received:
        """The next bundle; :class:`Timeout` if none came within ``timeout``."""
        ws = await self._socket()
        limit = None if timeout is None else seconds(timeout)
        try:
            message = await asyncio.wait_for(ws.recv(), limit)
        except TimeoutError:
            raise Timeout(f"no bundle for {self.endpoint} within {limit:g} s") from None
        except ConnectionClosed as e:
            raise _transport_error(e, f"subscription to {self.endpoint}") from e
        return _ws.received(message, self._check)

    async def ack(self, bundle: m.Received | int) -> None:
        """Takes a bundle (or its ``seq``) out of the inbox: the application has it safely."""
        ws = await self._socket()
        seq = bundle if isinstance(bundle, int) else bundle.seq
        try:
            await ws.send(_ws.ack_message(seq))
        except ConnectionClosed as e:
            raise _transport_error(e, f"subscription to {self.endpoint}") from e

    def __aiter__(self) -> AsyncIterator[m.Received]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[m.Received]:
        while True:
            try:
                yield await self.next()
            except Unreachable:
                return

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._ws.close()

    async def __aenter__(self) -> AsyncSubscription:
        return await self.open()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
