"""The model layer the sync and asyncio clients share: what each operation asks (method, path,
query, body) and how its answer is read. No I/O happens here except reading the files a body
streams, chunk by chunk, when the client sends it.

A body that carries a file is never read whole into memory: the raw send streams the file
(``Content-Length`` from its size), and a call's file parameters are base64-encoded chunk by
chunk into the JSON body as it is sent (its length is known beforehand, since base64 of n bytes
is 4·⌈n/3⌉ characters).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as _dt
import json
import math
import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, Union
from urllib.parse import quote

import httpx

from .errors import FerryError, ProtocolError, error_from_body

#: A duration: text the node parses (``"90s"``, ``"2h"``, ``"1500ms"``), seconds, or a
#: timedelta.
Duration = Union[str, int, float, _dt.timedelta]
#: The bundle classes: store-carry-forward, or real time (best effort / reliable).
BundleClass = Literal["dtn", "datagram", "stream"]
#: How a call travels (docs/rpc.md, "Transports and timers").
Transport = Literal["auto", "datagram", "stream", "dtn"]
#: A file to send: a path, or an open binary file (read from its current position).
FileSource = Union[str, "os.PathLike[str]", IO[bytes]]

#: Bytes read from a file at a time (a multiple of 3, so each chunk is whole base64).
CHUNK = 3 * 64 * 1024
#: The longest the node waits in one long poll (its own limit).
MAX_SERVER_WAIT = 300.0
#: How much longer than a long poll the client waits for its answer.
SLACK = 15.0


def seconds(d: Duration) -> float:
    """A duration in seconds (text in the node's units: ms, s, m/min, h, d)."""
    if isinstance(d, _dt.timedelta):
        return d.total_seconds()
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return float(d)
    if isinstance(d, str):
        units = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
        text = d.strip()
        number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = text[len(number) :].strip() or "s"
        if unit in units:
            try:
                return float(number) * units[unit]
            except ValueError:
                pass
    raise ValueError(f"not a duration: {d!r}")


def duration_text(d: Duration) -> str:
    """A duration as the node reads it: text as given, a number or timedelta in ms."""
    if isinstance(d, str):
        return d
    ms = round(seconds(d) * 1000)
    if ms < 0:
        raise ValueError(f"a negative duration: {d!r}")
    return f"{ms}ms"


def segment(text: str) -> str:
    """One path segment: an endpoint or node id percent-encoded whole (``/`` and ``:``
    too)."""
    return quote(text, safe="")


# ---------------------------------------------------------------------------------------------
# Bodies


@dataclass(frozen=True)
class _FilePiece:
    """A file's bytes, raw or as base64, read when the body is sent."""

    source: FileSource
    size: int
    b64: bool

    @property
    def length(self) -> int:
        return 4 * math.ceil(self.size / 3) if self.b64 else self.size


Piece = Union[bytes, _FilePiece]


def _open(source: FileSource) -> tuple[IO[bytes], bool]:
    if isinstance(source, (str, os.PathLike)):
        return open(source, "rb"), True
    return source, False


def file_size(source: FileSource) -> int:
    """Bytes left to read in ``source`` (a path, or a seekable file from its position)."""
    if isinstance(source, (str, os.PathLike)):
        return os.stat(source).st_size
    try:
        here = source.tell()
        end = source.seek(0, os.SEEK_END)
        source.seek(here)
        return end - here
    except (OSError, ValueError) as e:
        raise ValueError(f"a file to send must be seekable (its size is sent first): {e}") from e


def _read_exact(f: IO[bytes], n: int) -> bytes:
    """Up to n bytes, fewer only at the end of the file."""
    out = f.read(n)
    while 0 < len(out) < n:
        more = f.read(n - len(out))
        if not more:
            break
        out += more
    return out


def _piece_chunks(piece: _FilePiece) -> Iterator[bytes]:
    f, owned = _open(piece.source)
    try:
        left = piece.size
        while left > 0:
            chunk = _read_exact(f, min(CHUNK, left))
            if not chunk:
                raise FerryError(f"{_name(piece.source)} shrank while it was being sent")
            left -= len(chunk)
            yield base64.b64encode(chunk) if piece.b64 else chunk
    finally:
        if owned:
            f.close()


@dataclass(frozen=True)
class Body:
    """A request body: pieces of bytes and files, of a length known before it is sent."""

    pieces: tuple[Piece, ...]
    content_type: str

    @property
    def length(self) -> int:
        return sum(len(p) if isinstance(p, bytes) else p.length for p in self.pieces)

    @property
    def streamed(self) -> bool:
        """Whether it holds a file (sent chunk by chunk) rather than only bytes."""
        return any(isinstance(p, _FilePiece) for p in self.pieces)

    def whole(self) -> bytes:
        """The body whole (only for one without files)."""
        assert not self.streamed
        return b"".join(p for p in self.pieces if isinstance(p, bytes))

    def iter_sync(self) -> Iterator[bytes]:
        for piece in self.pieces:
            if isinstance(piece, bytes):
                yield piece
            else:
                yield from _piece_chunks(piece)

    async def iter_async(self) -> AsyncIterator[bytes]:
        # File reads go to a thread, so a large file does not stall the event loop.
        for piece in self.pieces:
            if isinstance(piece, bytes):
                yield piece
                continue
            chunks = _piece_chunks(piece)
            while True:
                chunk = await asyncio.to_thread(next, chunks, None)
                if chunk is None:
                    break
                yield chunk


def json_body(value: Any) -> Body:
    return Body((json.dumps(value, separators=(",", ":")).encode(),), "application/json")


def raw_file_body(source: FileSource) -> Body:
    size = file_size(source)
    return Body((_FilePiece(source, size, b64=False),), "application/octet-stream")


# ---------------------------------------------------------------------------------------------
# Call parameters


@dataclass(frozen=True)
class File:
    """A file parameter of a call: a path or an open binary file, or bytes in memory.

    ``name`` is a hint for the server (default the file's name). A path or file is read chunk
    by chunk as the call is sent.
    """

    source: FileSource | bytes
    name: str | None = None

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> File:
        return cls(bytes(data), name)

    def display_name(self) -> str:
        if self.name:
            return self.name
        if isinstance(self.source, bytes):
            return "file"
        return _name(self.source)


def _name(source: FileSource) -> str:
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name
    return Path(str(getattr(source, "name", "file"))).name


#: A call parameter: text, an int (64-bit), a float, a bool, bytes, or a :class:`File`.
Param = Union[str, int, float, bool, bytes, bytearray, memoryview, File]

_I64 = (-(2**63), 2**63 - 1)


def _marker(nonce: str, i: int) -> str:
    # Where file i's base64 goes: a string with NULs (escaped as \u0000 in the JSON) and a
    # random nonce, which no other text of the body holds (checked: it is found exactly once).
    return f"\x00ferry-file-{nonce}-{i}\x00"


def call_body(spec: dict[str, Any], params: Sequence[Param]) -> Body:
    """The JSON body of ``POST /v1/calls``: ``spec`` plus ``params``, each file's content
    base64-encoded as the body is sent."""
    nonce = secrets.token_hex(8)
    files: list[_FilePiece | bytes] = []
    encoded: list[dict[str, Any]] = []
    for i, p in enumerate(params, 1):
        if isinstance(p, bool):
            encoded.append({"bool": p})
        elif isinstance(p, int):
            if not _I64[0] <= p <= _I64[1]:
                raise ValueError(f"parameter {i}: {p} does not fit 64 bits")
            encoded.append({"int": p})
        elif isinstance(p, float):
            encoded.append({"float": p})
        elif isinstance(p, str):
            encoded.append({"text": p})
        elif isinstance(p, (bytes, bytearray, memoryview)):
            encoded.append({"bytes": base64.b64encode(bytes(p)).decode()})
        elif isinstance(p, File):
            if isinstance(p.source, bytes):
                content: _FilePiece | bytes = base64.b64encode(p.source)
            else:
                content = _FilePiece(p.source, file_size(p.source), b64=True)
            encoded.append({"file": {"name": p.display_name(), "base64": _marker(nonce, len(files))}})
            files.append(content)
        else:
            raise TypeError(f"parameter {i}: {type(p).__name__} is not a call parameter")
    text = json.dumps({**spec, "params": encoded}, separators=(",", ":"))
    pieces: list[Piece] = []
    for i, content in enumerate(files):
        escaped = json.dumps(_marker(nonce, i))[1:-1]
        if text.count(escaped) != 1:
            raise ValueError("a parameter holds the body's file marker")
        before, _, text = text.partition(escaped)
        pieces.append(before.encode())
        pieces.append(content)
    pieces.append(text.encode())
    return Body(tuple(pieces), "application/json")


def call_spec(
    target: str,
    procedure: str,
    *,
    requirements: str | None,
    transport: Transport | None,
    deadline: Duration | None,
    ack_timeout: Duration | None,
    result_timeout: Duration | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"target": target, "procedure": procedure}
    if requirements is not None:
        spec["requirements"] = requirements
    if transport is not None:
        spec["transport"] = transport
    for key, value in (
        ("deadline", deadline),
        ("ack_timeout", ack_timeout),
        ("result_timeout", result_timeout),
    ):
        if value is not None:
            spec[key] = duration_text(value)
    return spec


# ---------------------------------------------------------------------------------------------
# Requests and answers


@dataclass
class Op:
    """One request of the API and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], Any] = field(default=lambda r: None)
    params: dict[str, str] = field(default_factory=dict)
    body: Body | None = None
    #: How long to wait for the answer (a long poll's wait plus slack), else the client's.
    read_timeout: float | None = None

    def headers(self) -> dict[str, str]:
        if self.body is None:
            return {}
        return {"Content-Type": self.body.content_type, "Content-Length": str(self.body.length)}


def raise_for_error(response: httpx.Response) -> None:
    """The API error of an answer that is not a success, as its exception."""
    if response.is_success:
        return
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    error = error_from_body(body, response.status_code)
    if error is None:
        raise ProtocolError(
            f"HTTP {response.status_code} without an API error body: {response.text[:200]!r}"
        )
    raise error


def read_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"the answer is not JSON: {e}") from None


def parsed(read: Callable[[Any], Any]) -> Callable[[httpx.Response], Any]:
    """An answer's parser: its JSON through ``read``."""
    return lambda response: read(read_json(response))


def send_params(
    destination: str,
    source: str | None,
    lifetime: Duration | None,
    bundle_class: BundleClass | None,
    report: bool,
    priority: int | None,
) -> dict[str, Any]:
    """The options of a send (JSON fields, or query parameters of the raw send)."""
    options: dict[str, Any] = {"destination": destination}
    if source is not None:
        options["source"] = source
    if lifetime is not None:
        options["lifetime"] = duration_text(lifetime)
    if bundle_class is not None:
        options["class"] = bundle_class
    if report:
        options["report"] = True
    if priority is not None:
        if priority not in (0, 1, 2):
            raise ValueError(f"priority is 0, 1 or 2, not {priority}")
        options["priority"] = priority
    return options


def query(options: dict[str, Any]) -> dict[str, str]:
    """Options as query parameters (booleans as true/false)."""
    return {
        k: ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in options.items()
    }


def wait_text(wait: float) -> str:
    """A long poll's wait for the node, in whole milliseconds within its limit."""
    return f"{max(0, round(min(wait, MAX_SERVER_WAIT) * 1000))}ms"


def stream_chunks_sync(chunks: Iterable[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError(f"a stream yields bytes, not {type(chunk).__name__}")
        yield bytes(chunk)
