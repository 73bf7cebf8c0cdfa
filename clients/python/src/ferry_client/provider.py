"""Serving procedures from Python: functions decorated with ``@node.procedure(...)`` answer calls
that reach this node, over the node's ``/v1/providers`` WebSocket (docs/api.md, "Serving
procedures from an application").

The node gives a provided procedure every guarantee an executable has: it admits calls
(allow-list, predicates, concurrency), hands each call over once, enforces the timeout and the
output limit, and keeps the answer in its outbox. This module's part of the bargain:

- a function's result is kept until the node says it is durable (``kept``), and sent again
  after a reconnection, so a node that restarts while a call runs still gets its answer;
- after a reconnection it tells the node which calls it still runs and which results it holds,
  so nothing is run twice;
- the parameters a function takes come from its signature: ``int``, ``float``, ``bool``,
  ``str`` (text), ``bytes`` and :class:`ReceivedFile` (a file parameter), in order; a parameter
  annotated :class:`CallContext` gets the call's context (caller, deadline, cancellation)
  instead, and is not declared;
- what it returns is the result: ``str`` (text), ``bytes``, anything JSON can write (sent as
  JSON text), or a :class:`Result` with files. An exception is the call's failure, its message
  the caller's ``stderr`` tail.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
import threading
import typing
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed

from . import _ws
from .errors import FerryError, ProtocolError, ShuttingDown, Unreachable, error_from_body

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client

log = logging.getLogger("ferry_client.provider")

PATH = "/v1/providers"


@dataclass(frozen=True, slots=True)
class ReceivedFile:
    """A ``file`` parameter as a procedure receives it."""

    name: str
    content: bytes


@dataclass(slots=True)
class Result:
    """A result with files: ``value`` (``str``, ``bytes`` or JSON-able) and ``files``, each a
    ``(name, content)`` pair or a path (sent under its file name)."""

    value: Any = b""
    files: list[tuple[str, bytes] | str | Path] = field(default_factory=list)


@dataclass(slots=True)
class CallContext:
    """The call a procedure runs for: its id, caller, deadline, and whether the node asked to
    stop (its timeout passed, the caller cancelled): a long procedure may look at
    ``cancelled`` and give up."""

    job: str
    call_id: str
    caller: str
    caller_key: str
    deadline_ms: int
    cancelled: threading.Event


_TYPES: dict[Any, str] = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "text",
    bytes: "bytes",
    ReceivedFile: "file",
}
_RETURNS: dict[Any, str] = {str: "text", bytes: "bytes", dict: "json", list: "json"}


@dataclass
class Declared:
    """A decorated function and what the node is told of it."""

    function: Callable[..., Any]
    declaration: dict[str, Any]
    #: The parameter that gets the :class:`CallContext`, if any.
    context: str | None
    params: list[tuple[str, str]]


def declare(
    function: Callable[..., Any],
    name: str | None,
    *,
    description: str | None,
    timeout: float,
    max_output: int,
    max_concurrent: int,
    idempotent: bool,
    allow: Iterable[str] | None,
    require: str | None,
    returns: str | None,
) -> Declared:
    """What ``function``'s signature declares."""
    hints = typing.get_type_hints(function)
    params: list[tuple[str, str]] = []
    context = None
    for p in inspect.signature(function).parameters.values():
        kind = hints.get(p.name)
        if kind is CallContext:
            context = p.name
            continue
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"{function.__name__}: parameter {p.name} must be positional")
        if kind not in _TYPES:
            raise TypeError(
                f"{function.__name__}: parameter {p.name} needs a type annotation of "
                "int, float, bool, str, bytes or ReceivedFile"
            )
        params.append((p.name, _TYPES[kind]))
    if returns is None:
        returns = _RETURNS.get(typing.get_origin(hints.get("return")) or hints.get("return"))
    declaration: dict[str, Any] = {
        "name": name or function.__name__,
        "params": [{"name": n, "type": t} for n, t in params],
        "timeout_ms": int(timeout * 1000),
        "max_output": max_output,
        "max_concurrent": max_concurrent,
        "idempotent": idempotent,
    }
    doc = description if description is not None else inspect.getdoc(function)
    if doc:
        declaration["description"] = doc
    if returns:
        declaration["returns"] = returns
    if allow is not None:
        declaration["allow"] = list(allow)
    if require:
        declaration["require"] = require
    return Declared(function, declaration, context, params)


def arguments(declared: Declared, call: dict[str, Any], context: CallContext) -> dict[str, Any]:
    """The function's keyword arguments for a ``call`` message."""
    args: dict[str, Any] = {}
    for (name, _), p in zip(declared.params, call["params"], strict=True):
        kind = p["type"]
        if kind == "bytes":
            args[name] = base64.b64decode(p["b64"])
        elif kind == "file":
            args[name] = ReceivedFile(p.get("file_name", ""), base64.b64decode(p["b64"]))
        elif kind == "float":
            args[name] = float(p["value"])
        else:
            args[name] = p["value"]
    if declared.context:
        args[declared.context] = context
    return args


def result_message(job: str, returned: Any) -> str:
    """The ``result`` message for what a function returned."""
    files: list[dict[str, str]] = []
    value = returned
    if isinstance(returned, Result):
        value = returned.value
        for f in returned.files:
            if isinstance(f, tuple):
                fname, content = f
            else:
                fname, content = Path(f).name, Path(f).read_bytes()
            files.append({"name": fname, "content_b64": base64.b64encode(content).decode()})
    body: dict[str, Any] = {"job": job, "files": files}
    if value is None:
        pass
    elif isinstance(value, str):
        body["value"] = value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        body["value_b64"] = base64.b64encode(bytes(value)).decode()
    else:
        body["value"] = json.dumps(value)
    return json.dumps({"result": body})


def fail_message(job: str, error: BaseException) -> str:
    return json.dumps({"fail": {"job": job, "message": f"{type(error).__name__}: {error}"}})


class _Outbox:
    """Calls running here and results not yet ``kept``: what a registration claims after a
    reconnection, and what is sent again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[str, CallContext] = {}
        self.held: dict[str, str] = {}

    def register_message(self, procedures: Iterable[Declared]) -> str:
        with self.lock:
            return json.dumps(
                {
                    "register": {
                        "procedures": [d.declaration for d in procedures],
                        "running": list(self.running),
                        "held": list(self.held),
                    }
                }
            )

    def finished(self, job: str, message: str) -> None:
        with self.lock:
            self.running.pop(job, None)
            self.held[job] = message

    def settled(self, job: str) -> None:
        with self.lock:
            self.held.pop(job, None)

    def cancel(self, job: str) -> None:
        with self.lock:
            context = self.running.get(job)
        if context is not None:
            context.cancelled.set()

    def context(self, job: str) -> CallContext:
        with self.lock:
            return self.running[job]

    def pending(self) -> list[str]:
        with self.lock:
            return list(self.held.values())


def _route(outbox: _Outbox, message: Any) -> dict[str, Any] | None:
    """Acts on one message from the node; a ``call`` is returned (its job noted as running)
    for the caller to run."""
    if "call" in message:
        call: dict[str, Any] = message["call"]
        with outbox.lock:
            outbox.running[call["job"]] = _context(call)
        return call
    if "cancel" in message:
        outbox.cancel(message["cancel"]["job"])
    elif "kept" in message:
        outbox.settled(message["kept"]["job"])
    elif "refused" in message:
        r = message["refused"]
        log.warning("the node refused the result of %s: %s", r["job"], r["reason"])
        outbox.settled(r["job"])
    elif "error" in message:
        error = error_from_body(message["error"])
        if error is not None and error.code == "shutting_down":
            raise ConnectionClosed(None, None)
        log.warning("the node said: %s", message["error"])
    return None


def _context(call: dict[str, Any]) -> CallContext:
    return CallContext(
        job=call["job"],
        call_id=call["call"],
        caller=call["caller"],
        caller_key=call["caller_key"],
        deadline_ms=call["deadline_ms"],
        cancelled=threading.Event(),
    )


def _registered(message: Any) -> dict[str, Any]:
    if isinstance(message, dict) and "registered" in message:
        registered: dict[str, Any] = message["registered"]
        return registered
    error = error_from_body(message.get("error")) if isinstance(message, dict) else None
    raise error or ProtocolError(f"an answer to register that is not one: {message!r}")


class _Procedures:
    """The decorator both clients offer, and the functions it collected."""

    def __init__(self) -> None:
        self.declared: dict[str, Declared] = {}

    def procedure(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        timeout: float = 60.0,
        max_output: int = 1 << 20,
        max_concurrent: int = 1,
        idempotent: bool = False,
        allow: Iterable[str] | None = None,
        require: str | None = None,
        returns: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
            d = declare(
                function,
                name,
                description=description,
                timeout=timeout,
                max_output=max_output,
                max_concurrent=max_concurrent,
                idempotent=idempotent,
                allow=allow,
                require=require,
                returns=returns,
            )
            self.declared[d.declaration["name"]] = d
            return function

        return decorate


class Provider(_Procedures):
    """Serves the decorated functions of a :class:`~ferry_client.Client` (blocking)."""

    def __init__(self, client: Client) -> None:
        super().__init__()
        self.client = client
        self.outbox = _Outbox()
        self._send_lock = threading.Lock()
        self._connection: Any = None
        #: The last registration's answer: the procedures served and the calls claimed.
        self.registered: dict[str, Any] | None = None

    def _send(self, message: str) -> bool:
        with self._send_lock:
            if self._connection is None:
                return False
            try:
                self._connection.send(message)
                return True
            except (ConnectionClosed, OSError):
                return False

    def serve(
        self,
        *,
        stop: threading.Event | None = None,
        reconnect: bool = True,
        ready: threading.Event | None = None,
    ) -> None:
        """Serves until ``stop`` is set (or, with ``reconnect=False``, until the connection
        ends). A lost connection is made again, with a backoff of up to 5 s; a refused
        registration (a name taken: :class:`~ferry_client.errors.Conflict`) raises.
        ``ready`` is set once registered."""
        if not self.declared:
            raise FerryError("no procedure to serve: decorate functions with @procedure first")
        stop = stop or threading.Event()
        workers = sum(d.declaration["max_concurrent"] for d in self.declared.values())
        backoff = 0.2
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ferry-procedure") as pool:
            while not stop.is_set():
                try:
                    connection, check = self.client._websocket(PATH)
                except (Unreachable, ShuttingDown, OSError):
                    if not reconnect:
                        raise
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                try:
                    connection.send(self.outbox.register_message(self.declared.values()))
                    answer = _ws.decode(connection.recv(timeout=30))
                    check(answer)
                    self.registered = _registered(answer)
                    backoff = 0.2
                    with self._send_lock:
                        self._connection = connection
                    for message in self.outbox.pending():
                        self._send(message)
                    if ready is not None:
                        ready.set()
                    self._read(connection, check, pool, stop)
                except (ConnectionClosed, OSError, TimeoutError) as e:
                    if not reconnect:
                        raise Unreachable(f"the provider's connection ended: {e}") from e
                finally:
                    with self._send_lock:
                        self._connection = None
                    connection.close()
                if not reconnect:
                    return
                if not stop.is_set():
                    stop.wait(backoff)

    def _read(
        self,
        connection: Any,
        check: _ws.MessageCheck,
        pool: ThreadPoolExecutor,
        stop: threading.Event,
    ) -> None:
        while not stop.is_set():
            try:
                raw = connection.recv(timeout=0.2)
            except TimeoutError:
                continue
            message = _ws.decode(raw)
            check(message)
            call = _route(self.outbox, message)
            if call is not None:
                pool.submit(self._run, call)

    def _run(self, call: dict[str, Any]) -> None:
        declared, job = self.declared.get(call["procedure"]), call["job"]
        try:
            if declared is None:
                raise LookupError(f"{call['procedure']} is not served here")
            returned = declared.function(**arguments(declared, call, self.outbox.context(job)))
            message = result_message(job, returned)
        except Exception as e:  # noqa: BLE001 (the caller learns it)
            message = fail_message(job, e)
        self.outbox.finished(job, message)
        self._send(message)


class AsyncProvider(_Procedures):
    """Serves the decorated functions of an :class:`~ferry_client.AsyncClient`: coroutine
    functions are awaited, plain ones run in a thread."""

    def __init__(self, client: AsyncClient) -> None:
        super().__init__()
        self.client = client
        self.outbox = _Outbox()
        self._connection: Any = None
        self.registered: dict[str, Any] | None = None

    async def _send(self, message: str) -> bool:
        if self._connection is None:
            return False
        try:
            await self._connection.send(message)
            return True
        except (ConnectionClosed, OSError):
            return False

    async def serve(self, *, reconnect: bool = True, ready: asyncio.Event | None = None) -> None:
        """Serves until cancelled (or, with ``reconnect=False``, until the connection ends)."""
        if not self.declared:
            raise FerryError("no procedure to serve: decorate functions with @procedure first")
        backoff = 0.2
        tasks: set[asyncio.Task[None]] = set()
        while True:
            try:
                connection, check = await self.client._websocket(PATH)
            except (Unreachable, ShuttingDown, OSError):
                if not reconnect:
                    raise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            try:
                await connection.send(self.outbox.register_message(self.declared.values()))
                answer = _ws.decode(await asyncio.wait_for(connection.recv(), 30))
                check(answer)
                self.registered = _registered(answer)
                backoff = 0.2
                self._connection = connection
                for message in self.outbox.pending():
                    await self._send(message)
                if ready is not None:
                    ready.set()
                async for raw in connection:
                    message = _ws.decode(raw)
                    check(message)
                    call = _route(self.outbox, message)
                    if call is not None:
                        task = asyncio.create_task(self._run(call))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
            except (ConnectionClosed, OSError, TimeoutError) as e:
                if not reconnect:
                    raise Unreachable(f"the provider's connection ended: {e}") from e
            finally:
                self._connection = None
                await connection.close()
            if not reconnect:
                return
            await asyncio.sleep(backoff)

    async def _run(self, call: dict[str, Any]) -> None:
        declared, job = self.declared.get(call["procedure"]), call["job"]
        try:
            if declared is None:
                raise LookupError(f"{call['procedure']} is not served here")
            args = arguments(declared, call, self.outbox.context(job))
            if inspect.iscoroutinefunction(declared.function):
                returned = await declared.function(**args)
            else:
                returned = await asyncio.to_thread(declared.function, **args)
            message = result_message(job, returned)
        except Exception as e:  # noqa: BLE001 (the caller learns it)
            message = fail_message(job, e)
        self.outbox.finished(job, message)
        await self._send(message)


__all__ = [
    "AsyncProvider",
    "CallContext",
    "Provider",
    "ReceivedFile",
    "Result",
]

