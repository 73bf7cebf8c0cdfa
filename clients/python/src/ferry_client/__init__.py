"""A Python client for Ferry's local HTTP/WebSocket API (docs/api.md).

:class:`Client` blocks; :class:`AsyncClient` is the same API for asyncio. Both return the typed
values of :mod:`ferry_client.models` and raise the exceptions of :mod:`ferry_client.errors`::

    from ferry_client import Client

    with Client("127.0.0.1:4550") as node:
        print(node.status().node_id)
        node.send("dtn://bravo/inbox", "hello bravo")
        print(node.run("bravo", "echo", "hello there").text)
"""

from .aio import AsyncClient, AsyncSubscription
from .client import Client, Subscription
from ._core import BundleClass, Duration, File, Param, Transport
from .errors import (
    ApiError,
    BadEndpoint,
    BadRequest,
    CallFailed,
    Conflict,
    FerryError,
    ForbiddenHost,
    ForbiddenOrigin,
    InternalError,
    MethodNotAllowed,
    NoRoute,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    ShuttingDown,
    StoreFull,
    Timeout,
    Unauthorized,
    Unreachable,
    UnsupportedMediaType,
)
from .provider import AsyncProvider, CallContext, Provider, ReceivedFile, Result
from .models import (
    Call,
    Counters,
    Key,
    Peer,
    PresentedKey,
    Procedure,
    Received,
    Reply,
    Report,
    ResultFile,
    Route,
    RpcCounters,
    Served,
    SendReply,
    Status,
    StoredBundle,
    TimelineEntry,
    dtn_ms_to_datetime,
)

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncProvider",
    "AsyncSubscription",
    "BadEndpoint",
    "BadRequest",
    "BundleClass",
    "Call",
    "CallContext",
    "CallFailed",
    "Client",
    "Conflict",
    "Counters",
    "Duration",
    "FerryError",
    "File",
    "ForbiddenHost",
    "ForbiddenOrigin",
    "InternalError",
    "Key",
    "MethodNotAllowed",
    "NoRoute",
    "NotFound",
    "Param",
    "PayloadTooLarge",
    "Peer",
    "PresentedKey",
    "Procedure",
    "ProtocolError",
    "Provider",
    "Received",
    "ReceivedFile",
    "Reply",
    "Report",
    "Result",
    "ResultFile",
    "Route",
    "RpcCounters",
    "Served",
    "SendReply",
    "ShuttingDown",
    "Status",
    "StoreFull",
    "StoredBundle",
    "Subscription",
    "TimelineEntry",
    "Timeout",
    "Transport",
    "Unauthorized",
    "Unreachable",
    "UnsupportedMediaType",
    "dtn_ms_to_datetime",
]
