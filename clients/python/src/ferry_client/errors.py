"""The exceptions of the client.

Everything the client raises for a reason of the node, the network or a call is a
:class:`FerryError`:

- :class:`ApiError` the node refused the request. ``code`` is the API's stable error code
  (docs/api.md, "Errors"), ``status`` the HTTP status. Each code has a subclass
  (:class:`NotFound`, :class:`NoRoute`, …), so ``except NoRoute`` reads as the code does.
- :class:`Unreachable` no answer: the node is not running, not listening there, or the
  connection broke before the answer (also a :class:`ConnectionError`).
- :class:`Timeout` a bounded wait ended without what was waited for (also a
  :class:`TimeoutError`).
- :class:`CallFailed` a call ended without a result: refused, failed, expired or cancelled.
  A call's own failures are not HTTP errors (the API answers them 201 with the call), so this
  carries the refusal's stable code (``not_offered``, ``execution_failed``, …; docs/rpc.md,
  "Failure codes") and the call.
- :class:`ProtocolError` the node answered something the API does not describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Call


class FerryError(Exception):
    """Base of every error of the client."""


class ApiError(FerryError):
    """The node answered with an API error (a JSON ``{"code", "message"}``)."""

    code: str
    message: str
    status: int

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class BadRequest(ApiError):
    """``bad_request`` (400): a malformed body, query or parameter."""


class BadEndpoint(ApiError):
    """``bad_endpoint`` (400): an endpoint id that does not parse, or not of this node."""


class Unauthorized(ApiError):
    """``unauthorized`` (401): no token, or a wrong one."""


class ForbiddenHost(ApiError):
    """``forbidden_host`` (403): a Host header the node does not accept."""


class ForbiddenOrigin(ApiError):
    """``forbidden_origin`` (403): a web page of another origin."""


class NotFound(ApiError):
    """``not_found`` (404): no such route, bundle, call, file or key."""


class MethodNotAllowed(ApiError):
    """``method_not_allowed`` (405)."""


class NoRoute(ApiError):
    """``no_route`` (409): a real-time send or call to a node with no path now."""


class Conflict(ApiError):
    """``conflict``: a procedure name is served already (by another application or an
    executable of the node's configuration)."""


class PayloadTooLarge(ApiError):
    """``payload_too_large`` (413): a body above its route's limit."""


class UnsupportedMediaType(ApiError):
    """``unsupported_media_type`` (415)."""


class InternalError(ApiError):
    """``internal`` (500): the node failed (it logs why)."""


class ShuttingDown(ApiError):
    """``shutting_down`` (503): the node is stopping."""


class StoreFull(ApiError):
    """``store_full`` (507): the store's quota or the RPC file budget has no room."""


#: The subclass for each stable code; another code is a plain :class:`ApiError`.
ERROR_CODES: dict[str, type[ApiError]] = {
    "bad_request": BadRequest,
    "bad_endpoint": BadEndpoint,
    "unauthorized": Unauthorized,
    "forbidden_host": ForbiddenHost,
    "forbidden_origin": ForbiddenOrigin,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "no_route": NoRoute,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "internal": InternalError,
    "shutting_down": ShuttingDown,
    "store_full": StoreFull,
}


#: The HTTP status of each stable code, as the node answers it.
STATUS_OF_CODE: dict[str, int] = {
    "bad_request": 400,
    "bad_endpoint": 400,
    "unauthorized": 401,
    "forbidden_host": 403,
    "forbidden_origin": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "no_route": 409,
    "conflict": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "internal": 500,
    "shutting_down": 503,
    "store_full": 507,
}


def api_error(code: str, message: str, status: int) -> ApiError:
    """The exception for an API error body."""
    return ERROR_CODES.get(code, ApiError)(code, message, status)


def error_from_body(body: Any, status: int | None = None) -> ApiError | None:
    """The exception for a decoded JSON error body, or None if it is not one. Without
    ``status`` (an error sent on a WebSocket), the code's own."""
    if (
        isinstance(body, dict)
        and isinstance(body.get("code"), str)
        and isinstance(body.get("message"), str)
    ):
        code: str = body["code"]
        return api_error(code, body["message"], status or STATUS_OF_CODE.get(code, 500))
    return None


class Unreachable(FerryError, ConnectionError):
    """No answer from the node: not running, not there, or the connection broke."""


class Timeout(FerryError, TimeoutError):
    """A bounded wait ended without what it waited for.

    ``call`` is the call as it stood then, for a wait on a call (else None).
    """

    call: Call | None

    def __init__(self, message: str, call: Call | None = None) -> None:
        super().__init__(message)
        self.call = call


class CallFailed(FerryError):
    """A call ended without a result.

    ``code`` is the stable code of the first refusal (``not_offered``, ``bad_arguments``,
    ``predicate_failed``, ``not_allowed``, ``execution_failed``, ``timed_out``,
    ``output_too_large``, ``expired``, ``cancelled``, ``internal``, ``result_lost``,
    ``server_stopped``), or the call's state (``expired``, ``cancelled``, ``failed``) when no
    server answered. ``server``, ``detail``, ``exit_status`` and ``stderr_tail`` come from that
    refusal.
    """

    call: Call
    code: str
    server: str | None
    detail: str | None
    exit_status: int | None
    stderr_tail: str | None

    def __init__(self, call: Call) -> None:
        refusal = next((r for r in call.replies if not r.ok), None)
        self.call = call
        self.code = (refusal.code if refusal else None) or call.state
        self.server = refusal.server if refusal else None
        self.detail = refusal.detail if refusal else None
        self.exit_status = refusal.exit_status if refusal else None
        self.stderr_tail = refusal.stderr_tail if refusal else None
        text = f"call {call.id} ({call.procedure} on {call.target}) {call.state}: {self.code}"
        if self.server:
            text += f" from {self.server}"
        if self.detail:
            text += f": {self.detail}"
        if self.stderr_tail:
            text += f"\n{self.stderr_tail.rstrip()}"
        super().__init__(text)


class ProtocolError(FerryError):
    """The node answered something the API does not describe."""
