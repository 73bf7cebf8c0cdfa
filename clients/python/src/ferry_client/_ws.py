"""What the sync and asyncio WebSocket channels share: the upgrade request and the messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from websockets.exceptions import InvalidStatus

from . import models as m
from .errors import ApiError, FerryError, ProtocolError, error_from_body

#: Called with each decoded message a WebSocket brings, before it is read.
MessageCheck = Callable[[Any], None]
#: Called with each WebSocket upgrade request before it is made; it may return a check for
#: the messages (the tests check both against the OpenAPI description, as they check the HTTP
#: requests and answers).
WebSocketHook = Callable[[httpx.Request], "MessageCheck | None"]


def no_check(value: Any) -> None:
    pass


def upgrade_request(base_url: str, path: str, token: str | None) -> tuple[str, dict[str, str]]:
    """The ``ws://`` URL and the headers of an upgrade to ``path``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    scheme = "wss" if base_url.startswith("https:") else "ws"
    return scheme + base_url[base_url.index(":") :] + path, headers


def as_http_request(base_url: str, path: str, headers: dict[str, str]) -> httpx.Request:
    return httpx.Request("GET", base_url + path, headers=headers)


def refused(e: InvalidStatus) -> FerryError:
    """The API error an upgrade was refused with."""
    status = e.response.status_code
    try:
        body = json.loads(e.response.body or b"")
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    return error_from_body(body, status) or ProtocolError(f"WebSocket refused: HTTP {status}")


def decode(message: str | bytes) -> Any:
    try:
        return json.loads(message)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"a WebSocket message that is not JSON: {e}") from None


def error_in(value: Any) -> ApiError | None:
    """The error a message holds, if it holds one rather than a bundle or a call."""
    if isinstance(value, dict) and "seq" not in value and "id" not in value:
        return error_from_body(value)
    return None


def received(message: str | bytes, check: MessageCheck = no_check) -> m.Received:
    value = decode(message)
    check(value)
    error = error_in(value)
    if error is not None:
        raise error
    return m.Received.from_json(value)


def call(message: str | bytes, check: MessageCheck = no_check) -> m.Call:
    value = decode(message)
    check(value)
    error = error_in(value)
    if error is not None:
        raise error
    return m.Call.from_json(value)


def ack_message(seq: int) -> str:
    return json.dumps({"ack": seq})
