"""What the API answers, as typed, immutable values (crates/daemon/openapi.yaml, components).

Every ``from_json`` takes the decoded JSON of one object and raises :class:`ProtocolError` if a
required field is missing or of the wrong type; fields the API may add later are ignored.
Times are milliseconds since the DTN epoch (2000-01-01T00:00:00Z) as the API gives them;
:func:`dtn_ms_to_datetime` turns one into a :class:`datetime.datetime`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import CallFailed, ProtocolError

#: The DTN epoch: 2000-01-01T00:00:00Z.
DTN_EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)

_T = TypeVar("_T")


def dtn_ms_to_datetime(ms: int) -> _dt.datetime:
    """A time of the API (ms since the DTN epoch) as an aware UTC datetime."""
    return DTN_EPOCH + _dt.timedelta(milliseconds=ms)


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def _get(d: dict[str, Any], key: str, kind: type[_T], what: str) -> _T:
    if key not in d:
        raise ProtocolError(f"{what}: no {key!r} in {d!r}")
    return _check(d[key], kind, f"{what}.{key}")


def _opt(d: dict[str, Any], key: str, kind: type[_T], what: str) -> _T | None:
    value = d.get(key)
    if value is None:
        return None
    return _check(value, kind, f"{what}.{key}")


def _check(value: Any, kind: type[_T], what: str) -> _T:
    # bool is an int in Python; the API never means one as the other.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"{what}: expected {kind.__name__}, got {value!r}")
    return value


def _strs(d: dict[str, Any], key: str, what: str) -> list[str]:
    items = _get(d, key, list, what)
    return [_check(v, str, f"{what}.{key}[]") for v in items]


def _b64(text: str | None, what: str) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ProtocolError(f"{what}: not base64: {e}") from None


def parse_list(value: Any, item: Any, what: str) -> list[Any]:
    """A JSON array of objects, each through ``item`` (a ``from_json``)."""
    if not isinstance(value, list):
        raise ProtocolError(f"{what}: expected an array, got {type(value).__name__}")
    return [item(v) for v in value]


@dataclass(frozen=True, slots=True)
class Counters:
    """Bundle counters of a node."""

    bundles_received: int
    bundles_sent: int
    bytes_sent: int
    delivered: int
    duplicates: int
    dropped: int

    @classmethod
    def from_json(cls, value: Any) -> Counters:
        d = _obj(value, "Counters")
        return cls(**{k: _get(d, k, int, "Counters") for k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class RpcCounters:
    """Remote procedure call counters of a node."""

    calls_made: int
    calls_accepted: int
    calls_rejected: int
    executions: int
    duplicates: int
    forged: int
    untrusted_notices: int
    running: int
    key_mismatches: int = 0
    calls_in_memory: int = 0
    served_in_memory: int = 0
    #: Bytes of call parameters and result files the node holds, of ``file_budget``.
    file_bytes: int = 0
    file_budget: int = 0

    @classmethod
    def from_json(cls, value: Any) -> RpcCounters:
        d = _obj(value, "RpcCounters")
        required = (
            "calls_made",
            "calls_accepted",
            "calls_rejected",
            "executions",
            "duplicates",
            "forged",
            "untrusted_notices",
            "running",
        )
        values = {k: _get(d, k, int, "RpcCounters") for k in required}
        for k in (
            "key_mismatches",
            "calls_in_memory",
            "served_in_memory",
            "file_bytes",
            "file_budget",
        ):
            values[k] = _opt(d, k, int, "RpcCounters") or 0
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Status:
    """``GET /v1/status``: the node, its store and its counters."""

    node_id: str
    version: str
    uptime_s: int
    strategy: str
    peers: int
    stored_bundles: int
    stored_bytes: int
    store_quota: int
    inbox_bundles: int
    counters: Counters
    listening: list[str]
    public_key: str
    rpc: RpcCounters

    @classmethod
    def from_json(cls, value: Any) -> Status:
        d = _obj(value, "Status")
        w = "Status"
        return cls(
            node_id=_get(d, "node_id", str, w),
            version=_get(d, "version", str, w),
            uptime_s=_get(d, "uptime_s", int, w),
            strategy=_get(d, "strategy", str, w),
            peers=_get(d, "peers", int, w),
            stored_bundles=_get(d, "stored_bundles", int, w),
            stored_bytes=_get(d, "stored_bytes", int, w),
            store_quota=_get(d, "store_quota", int, w),
            inbox_bundles=_get(d, "inbox_bundles", int, w),
            counters=Counters.from_json(d.get("counters")),
            listening=_strs(d, "listening", w),
            public_key=_get(d, "public_key", str, w),
            rpc=RpcCounters.from_json(d.get("rpc")),
        )


@dataclass(frozen=True, slots=True)
class Peer:
    """A neighbour with a convergence-layer session now."""

    node_id: str
    cla: list[str]
    address: str
    outbound: bool
    up_s: int
    queued_bytes: int
    #: Where the peer listens for TCPCL sessions, if known (``address`` of a session the peer
    #: opened has an ephemeral port).
    listen_address: str | None = None

    @classmethod
    def from_json(cls, value: Any) -> Peer:
        d = _obj(value, "Peer")
        return cls(
            node_id=_get(d, "node_id", str, "Peer"),
            cla=_strs(d, "cla", "Peer"),
            address=_get(d, "address", str, "Peer"),
            outbound=_get(d, "outbound", bool, "Peer"),
            up_s=_get(d, "up_s", int, "Peer"),
            queued_bytes=_get(d, "queued_bytes", int, "Peer"),
            listen_address=_opt(d, "listen_address", str, "Peer"),
        )


@dataclass(frozen=True, slots=True)
class Route:
    """A route: over the mesh to a node reachable now (``via == "mesh"``), or the contact plan's
    earliest journey to a node the mesh does not reach now (``via == "plan"``, with when it
    departs and arrives, DTN milliseconds)."""

    destination: str
    next_hop: str
    hops: int
    via: str = "mesh"
    departs_ms: int | None = None
    arrives_ms: int | None = None

    @classmethod
    def from_json(cls, value: Any) -> Route:
        d = _obj(value, "Route")
        return cls(
            destination=_get(d, "destination", str, "Route"),
            next_hop=_get(d, "next_hop", str, "Route"),
            hops=_get(d, "hops", int, "Route"),
            via=_get(d, "via", str, "Route"),
            departs_ms=_opt(d, "departs_ms", int, "Route"),
            arrives_ms=_opt(d, "arrives_ms", int, "Route"),
        )


@dataclass(frozen=True, slots=True)
class StoredBundle:
    """A bundle in the node's store; ``retention`` is ``carried``, ``must-deliver`` or
    ``originated``."""

    id: str
    destination: str
    size: int
    expiry_ms: int
    retention: str

    @classmethod
    def from_json(cls, value: Any) -> StoredBundle:
        d = _obj(value, "StoredBundle")
        w = "StoredBundle"
        return cls(
            id=_get(d, "id", str, w),
            destination=_get(d, "destination", str, w),
            size=_get(d, "size", int, w),
            expiry_ms=_get(d, "expiry_ms", int, w),
            retention=_get(d, "retention", str, w),
        )


@dataclass(frozen=True, slots=True)
class SendReply:
    """A sent bundle: its id and payload size."""

    id: str
    size: int

    @classmethod
    def from_json(cls, value: Any) -> SendReply:
        d = _obj(value, "SendReply")
        return cls(id=_get(d, "id", str, "SendReply"), size=_get(d, "size", int, "SendReply"))


@dataclass(frozen=True, slots=True)
class Received:
    """A bundle waiting for a local endpoint.

    ``seq`` is its place in the endpoint's inbox: what an acknowledgement names. ``payload`` is
    None when it was listed without payloads.
    """

    seq: int
    id: str
    source: str
    destination: str
    created_ms: int
    expiry_ms: int
    size: int
    payload: bytes | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        """The payload as UTF-8 text (``UnicodeDecodeError`` if it is not)."""
        if self.payload is None:
            raise ValueError("listed without its payload")
        return self.payload.decode()

    @classmethod
    def from_json(cls, value: Any) -> Received:
        d = _obj(value, "Received")
        w = "Received"
        return cls(
            seq=_get(d, "seq", int, w),
            id=_get(d, "id", str, w),
            source=_get(d, "source", str, w),
            destination=_get(d, "destination", str, w),
            created_ms=_get(d, "created_ms", int, w),
            expiry_ms=_get(d, "expiry_ms", int, w),
            size=_get(d, "size", int, w),
            payload=_b64(_opt(d, "payload_base64", str, w), "Received.payload_base64"),
        )


@dataclass(frozen=True, slots=True)
class Report:
    """A status report about a bundle this node sent: ``status`` is ``received``,
    ``forwarded``, ``delivered`` or ``deleted``; ``from_node`` is the API's ``from`` (the node
    that reported), renamed since ``from`` is a Python keyword."""

    bundle: str
    from_node: str
    status: str
    at_ms: int
    arrived_ms: int
    reason: int

    @classmethod
    def from_json(cls, value: Any) -> Report:
        d = _obj(value, "Report")
        return cls(
            bundle=_get(d, "bundle", str, "Report"),
            from_node=_get(d, "from", str, "Report"),
            status=_get(d, "status", str, "Report"),
            at_ms=_get(d, "at_ms", int, "Report"),
            arrived_ms=_get(d, "arrived_ms", int, "Report"),
            reason=_get(d, "reason", int, "Report"),
        )


@dataclass(frozen=True, slots=True)
class ResultFile:
    """A result file: fetched by ``hash`` once ``arrived``; ``received`` counts the bytes here
    while it arrives in pieces."""

    name: str
    hash: str
    size: int
    arrived: bool
    received: int | None = None

    @classmethod
    def from_json(cls, value: Any) -> ResultFile:
        d = _obj(value, "ResultFile")
        w = "ResultFile"
        return cls(
            name=_get(d, "name", str, w),
            hash=_get(d, "hash", str, w),
            size=_get(d, "size", int, w),
            arrived=_get(d, "arrived", bool, w),
            received=_opt(d, "received", int, w),
        )


@dataclass(frozen=True, slots=True)
class Reply:
    """A server's result (``ok``) or refusal of a call.

    A result has ``value`` (the procedure's output, byte for byte), ``files`` and ``run_ms``; a
    refusal has ``code`` (a stable failure code), ``detail`` and, for a failed execution,
    ``exit_status`` and ``stderr_tail``. ``via`` says how it came: ``datagram``, ``stream``,
    ``dtn`` or ``local``.
    """

    server: str
    server_key: str
    at_ms: int
    via: str
    ok: bool
    value: bytes | None = field(default=None, repr=False)
    value_text: str | None = None
    files: list[ResultFile] = field(default_factory=list)
    run_ms: int | None = None
    code: str | None = None
    detail: str | None = None
    exit_status: int | None = None
    stderr_tail: str | None = None

    @property
    def text(self) -> str:
        """The value as text (``ValueError`` for a refusal or a value that is not UTF-8)."""
        if self.value_text is None:
            raise ValueError("this reply has no text value")
        return self.value_text

    @classmethod
    def from_json(cls, value: Any) -> Reply:
        d = _obj(value, "Reply")
        w = "Reply"
        return cls(
            server=_get(d, "server", str, w),
            server_key=_get(d, "server_key", str, w),
            at_ms=_get(d, "at_ms", int, w),
            via=_get(d, "via", str, w),
            ok=_get(d, "ok", bool, w),
            value=_b64(_opt(d, "value_base64", str, w), "Reply.value_base64"),
            value_text=_opt(d, "value_text", str, w),
            files=parse_list(d.get("files", []), ResultFile.from_json, "Reply.files"),
            run_ms=_opt(d, "run_ms", int, w),
            code=_opt(d, "code", str, w),
            detail=_opt(d, "detail", str, w),
            exit_status=_opt(d, "exit_status", int, w),
            stderr_tail=_opt(d, "stderr_tail", str, w),
        )


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One line of a call's timeline; ``offset_ms`` is the time since the call was made."""

    at_ms: int
    offset_ms: int
    text: str

    def __str__(self) -> str:
        return f"+{self.offset_ms / 1000:.3f}s  {self.text}"

    @classmethod
    def from_json(cls, value: Any) -> TimelineEntry:
        d = _obj(value, "TimelineEntry")
        w = "TimelineEntry"
        return cls(
            at_ms=_get(d, "at_ms", int, w),
            offset_ms=_get(d, "offset_ms", int, w),
            text=_get(d, "text", str, w),
        )


#: The states a call ends in.
FINISHED_STATES = frozenset({"succeeded", "failed", "expired", "cancelled"})


@dataclass(frozen=True, slots=True)
class Call:
    """A call this node made, as it stands.

    ``target`` is ``any``, ``all`` or the server's node id; ``state`` is ``waiting``,
    ``succeeded``, ``failed``, ``expired`` or ``cancelled``. ``replies`` are results and
    refusals in order of arrival; ``timeline`` is empty in lists.
    """

    id: str
    procedure: str
    target: str
    transport: str
    state: str
    created_ms: int
    deadline_ms: int
    acks: list[str]
    replies: list[Reply]
    timeline: list[TimelineEntry] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Whether the call is over (not ``waiting``)."""
        return self.state != "waiting"

    def results(self) -> list[Reply]:
        """The results (not refusals), in order of arrival."""
        return [r for r in self.replies if r.ok]

    def result(self) -> Reply:
        """The first result: an explicit call's, an any-mode call's winner.

        Raises :class:`CallFailed` (with the refusal's code) if the call ended without one,
        and ``ValueError`` if it has none yet and is still waiting.
        """
        for reply in self.replies:
            if reply.ok:
                return reply
        if self.finished:
            raise CallFailed(self)
        raise ValueError(f"call {self.id} is still waiting")

    def arrived_files(self) -> int:
        """How many result files have arrived, over all replies."""
        return sum(1 for r in self.replies for f in r.files if f.arrived)

    @classmethod
    def from_json(cls, value: Any) -> Call:
        d = _obj(value, "Call")
        w = "Call"
        return cls(
            id=_get(d, "id", str, w),
            procedure=_get(d, "procedure", str, w),
            target=_get(d, "target", str, w),
            transport=_get(d, "transport", str, w),
            state=_get(d, "state", str, w),
            created_ms=_get(d, "created_ms", int, w),
            deadline_ms=_get(d, "deadline_ms", int, w),
            acks=_strs(d, "acks", w),
            replies=parse_list(d.get("replies"), Reply.from_json, "Call.replies"),
            timeline=parse_list(d.get("timeline", []), TimelineEntry.from_json, "Call.timeline"),
        )


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter of a procedure: its type, and its name where the procedure declares one."""

    type: str
    name: str | None = None

    @classmethod
    def from_json(cls, value: Any) -> Parameter:
        d = _obj(value, "Parameter")
        return cls(type=_get(d, "type", str, "Parameter"), name=_opt(d, "name", str, "Parameter"))


@dataclass(frozen=True, slots=True)
class Procedure:
    """A procedure the node serves: parameters, concurrency, its own predicate, and who serves
    it (``program``, ``application`` or ``node``)."""

    name: str
    params: list[str]
    max_concurrent: int
    restricted: bool
    description: str | None = None
    require: str | None = None
    #: How many times the node started the procedure's program (or handed a call to its
    #: application) since the node started.
    executions: int = 0
    parameters: list[Parameter] = field(default_factory=list)
    #: What its value is (``text``, ``bytes``, ``json``), where declared.
    returns: str | None = None
    served_by: str = "program"
    #: For an application's procedure: whether the application is connected now.
    connected: bool | None = None

    @classmethod
    def from_json(cls, value: Any) -> Procedure:
        d = _obj(value, "Procedure")
        w = "Procedure"
        return cls(
            name=_get(d, "name", str, w),
            params=_strs(d, "params", w),
            max_concurrent=_get(d, "max_concurrent", int, w),
            restricted=_get(d, "restricted", bool, w),
            description=_opt(d, "description", str, w),
            require=_opt(d, "require", str, w),
            executions=_opt(d, "executions", int, w) or 0,
            parameters=[Parameter.from_json(p) for p in d.get("parameters") or []],
            returns=_opt(d, "returns", str, w),
            served_by=_opt(d, "served_by", str, w) or "program",
            connected=_opt(d, "connected", bool, w),
        )


@dataclass(frozen=True, slots=True)
class Served:
    """A call the node serves or served (``GET /v1/served``), from what it keeps in memory,
    the latest deadline first."""

    id: str
    caller: str
    mode: str
    procedure: str
    #: When the call stops mattering, ms since the DTN epoch (the caller's clock).
    deadline_ms: int
    #: ``waiting_files``, ``running``, ``answered`` or ``skipped``.
    state: str
    acked: bool

    @classmethod
    def from_json(cls, value: Any) -> Served:
        d = _obj(value, "Served")
        w = "Served"
        return cls(
            id=_get(d, "id", str, w),
            caller=_get(d, "caller", str, w),
            mode=_get(d, "mode", str, w),
            procedure=_get(d, "procedure", str, w),
            deadline_ms=_get(d, "deadline_ms", int, w),
            state=_get(d, "state", str, w),
            acked=_get(d, "acked", bool, w),
        )


@dataclass(frozen=True, slots=True)
class PresentedKey:
    """Another key that messages naming a node were lately signed with (and dropped for)."""

    key: str
    first_seen_ms: int
    last_seen_ms: int
    messages: int

    @classmethod
    def from_json(cls, value: Any) -> PresentedKey:
        d = _obj(value, "PresentedKey")
        w = "PresentedKey"
        return cls(
            key=_get(d, "key", str, w),
            first_seen_ms=_get(d, "first_seen_ms", int, w),
            last_seen_ms=_get(d, "last_seen_ms", int, w),
            messages=_get(d, "messages", int, w),
        )


@dataclass(frozen=True, slots=True)
class Key:
    """The key this node knows for another node, and how it came to know it."""

    node: str
    key: str
    source: str
    since_ms: int | None = None
    presented: PresentedKey | None = None

    @classmethod
    def from_json(cls, value: Any) -> Key:
        d = _obj(value, "Key")
        presented = d.get("presented")
        return cls(
            node=_get(d, "node", str, "Key"),
            key=_get(d, "key", str, "Key"),
            source=_get(d, "source", str, "Key"),
            since_ms=_opt(d, "since_ms", int, "Key"),
            presented=None if presented is None else PresentedKey.from_json(presented),
        )
