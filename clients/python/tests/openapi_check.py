"""Every request the client makes in the tests, checked against the API's contract,
crates/daemon/openapi.yaml, with openapi-core: the path must match one of its templates and the
method one of that path's operations, the query and path parameters their schemas (no unknown
query parameter: the node refuses those too), the token must be presented as the security
scheme says, and a body must be of a media type the operation takes and match its schema.
Each answer is checked too: its status and, for JSON, its body against the operation's
responses.

:class:`CheckedTransport` and :class:`AsyncCheckedTransport` wrap httpx's transports; the
WebSocket upgrades go through :meth:`SpecChecker.check_upgrade` (the clients' websocket_hook),
and so does each message a WebSocket brings, against its schema.
A request the description does not describe raises :class:`SpecViolation` before it is sent,
and every violation is also recorded, so a test that swallowed one still fails at teardown.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from collections.abc import Callable
from typing import Any

import httpx
import yaml
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_schema_validator import OAS30Validator, validate
from werkzeug.datastructures import Headers, ImmutableMultiDict

from nodes import REPO

SPEC_PATH = REPO / "crates" / "daemon" / "openapi.yaml"
#: The servers' URL in the description; requests are checked as if sent there (the tests'
#: nodes listen on other ports).
SPEC_HOST = "http://127.0.0.1:4550"


class SpecViolation(AssertionError):
    """A request (or its answer) that crates/daemon/openapi.yaml does not describe."""


class _Request:
    """An httpx request as openapi-core reads one."""

    def __init__(self, request: httpx.Request, body: bytes | None) -> None:
        self.host_url = SPEC_HOST
        # The raw path: an endpoint id is one percent-encoded segment (%2F stays in it).
        self.path = request.url.raw_path.decode("ascii").split("?", 1)[0]
        self.method = request.method.lower()
        self.body = body
        self.content_type = request.headers.get("content-type", "").lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(list(request.url.params.multi_items())),
            header=Headers(list(request.headers.items())),
            cookie=ImmutableMultiDict(),
        )


class _Response:
    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        self.content_type = response.headers.get("content-type", "").lower()
        self.headers = Headers(list(response.headers.items()))
        self.data = response.content


class SpecChecker:
    """The description, and every request checked against it so far."""

    def __init__(self, path: Path = SPEC_PATH) -> None:
        self.spec: dict[str, Any] = yaml.safe_load(path.read_text())
        self.openapi = OpenAPI.from_dict(self.spec)
        self.checked: list[str] = []
        self.violations: list[str] = []
        self._lock = threading.Lock()

    def _fail(self, what: str, error: Exception) -> SpecViolation:
        detail = f"{what}: {type(error).__name__}: {error}"
        cause = getattr(error, "__cause__", None)
        if cause is not None:
            detail += f" ({cause})"
        with self._lock:
            self.violations.append(detail)
        return SpecViolation(f"not in crates/daemon/openapi.yaml: {detail}")

    def check_request(self, request: httpx.Request, body: bytes | None) -> None:
        what = f"{request.method} {request.url.raw_path.decode()}"
        try:
            self.openapi.validate_request(_Request(request, body))
        except Exception as e:  # openapi-core's errors have no common base worth naming
            raise self._fail(what, e) from e
        # openapi-core lets unknown query parameters through; the node refuses them.
        declared = self._query_parameters(request)
        unknown = sorted(set(request.url.params.keys()) - declared)
        if unknown:
            raise self._fail(what, ValueError(f"query parameters not described: {unknown}"))
        with self._lock:
            self.checked.append(what)

    def _query_parameters(self, request: httpx.Request) -> set[str]:
        path = request.url.raw_path.decode("ascii").split("?", 1)[0]
        for template, item in self.spec["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            if re.match(pattern, path):
                operation = item.get(request.method.lower(), {})
                params = item.get("parameters", []) + operation.get("parameters", [])
                return {p["name"] for p in map(self._resolve, params) if p["in"] == "query"}
        return set()

    def _resolve(self, value: dict[str, Any]) -> dict[str, Any]:
        ref = value.get("$ref")
        if ref is None:
            return value
        node: Any = self.spec
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        return dict(node)

    def check_response(self, request: httpx.Request, body: bytes | None, response: httpx.Response) -> None:
        what = f"{request.method} {request.url.raw_path.decode()} -> {response.status_code}"
        try:
            self.openapi.validate_response(_Request(request, body), _Response(response))
        except Exception as e:
            raise self._fail(what, e) from e

    def check_upgrade(self, request: httpx.Request) -> Callable[[Any], None]:
        """A WebSocket upgrade: a GET of a WebSocket route (its operation answers 101). The
        check it returns holds each message to what the route's description says it sends: a
        ``Received`` (subscribe) or a ``Call`` (watch), or an ``Error``."""
        self.check_request(request, None)
        path = request.url.raw_path.decode().split("?", 1)[0]
        if path.endswith("/subscribe"):
            schema = "Received"
        elif path.endswith("/watch"):
            schema = "Call"
        elif path == "/v1/providers":
            schema = "ProviderMessage"
        else:
            raise self._fail(f"GET {path}", ValueError("not a WebSocket route"))

        def check(value: Any) -> None:
            is_error = isinstance(value, dict) and "code" in value and "message" in value
            name = "Error" if is_error else schema
            try:
                self.check_schema(name, value)
            except Exception as e:
                raise self._fail(f"a message of GET {path}", e) from e

        return check

    def check_schema(self, name: str, value: Any) -> None:
        """``value`` against the description's ``components/schemas/<name>``."""
        root = {"$ref": f"#/components/schemas/{name}", "components": self.spec["components"]}
        validate(value, root, cls=OAS30Validator, check_schema=False)


def _body_for_check(request: httpx.Request) -> tuple[bytes | None, bool]:
    """The body to check, and whether it must be read first (a JSON body sent as a stream:
    a call with file parameters). A raw payload streamed from a file is not read (its schema
    is any bytes); the check sees a stand-in."""
    if isinstance(request.stream, httpx.ByteStream):
        return request.content, False
    if request.headers.get("content-type", "").startswith("application/json"):
        return None, True
    return b"<streamed payload>", False


class CheckedTransport(httpx.BaseTransport):
    def __init__(self, checker: SpecChecker) -> None:
        self.checker = checker
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body, must_read = _body_for_check(request)
        if must_read:
            body = request.read()
        self.checker.check_request(request, body or None)
        response = self.inner.handle_request(request)
        if _checkable(response):
            response.read()
            self.checker.check_response(request, body or None, response)
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncCheckedTransport(httpx.AsyncBaseTransport):
    def __init__(self, checker: SpecChecker) -> None:
        self.checker = checker
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body, must_read = _body_for_check(request)
        if must_read:
            body = await request.aread()
        self.checker.check_request(request, body or None)
        response = await self.inner.handle_async_request(request)
        if _checkable(response):
            await response.aread()
            self.checker.check_response(request, body or None, response)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _checkable(response: httpx.Response) -> bool:
    """JSON answers are checked against their schemas; a download (a payload or a file) is
    left to stream."""
    content_type = response.headers.get("content-type", "")
    return content_type.startswith("application/json") or response.status_code == 204

