"""Each exception type from a real cause: API errors with their stable codes and statuses, an
unreachable node, a bounded wait that ends, a call that fails, an answer that is not the API's;
and where the client finds its address and token, as the ``ferry`` commands do."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ClientFor, Pair
from nodes import Node, free_port

import ferry_client
from ferry_client import (
    ApiError,
    BadEndpoint,
    BadRequest,
    CallFailed,
    Client,
    FerryError,
    File,
    NoRoute,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    StoreFull,
    Timeout,
    Unauthorized,
    Unreachable,
)


def test_api_errors_carry_code_message_and_status(pair: Pair, client_for: ClientFor) -> None:
    alpha = client_for(pair.alpha)
    cases: list[tuple[type[ApiError], str, int, object]] = [
        (NotFound, "not_found", 404, lambda: alpha.get_call("0" * 32)),
        (NotFound, "not_found", 404, lambda: alpha.file("ab" * 32)),
        (NotFound, "not_found", 404, lambda: alpha.ack("inbox", 999_999)),
        (BadEndpoint, "bad_endpoint", 400, lambda: alpha.receive("dtn://bravo/inbox")),
        (BadRequest, "bad_request", 400, lambda: alpha.call("bravo", "echo", deadline="soon")),
        (NoRoute, "no_route", 409, lambda: alpha.call("nowhere", "echo", transport="stream")),
        (
            NoRoute,
            "no_route",
            409,
            lambda: alpha.send("dtn://nowhere/x", "now", bundle_class="datagram"),
        ),
    ]
    for kind, code, status, action in cases:
        with pytest.raises(kind) as e:
            action()  # type: ignore[operator]
        assert (e.value.code, e.value.status) == (code, status), e.value
        assert e.value.message and isinstance(e.value, ApiError) and isinstance(e.value, FerryError)


def test_a_wrong_token_is_unauthorized(pair: Pair, client_for: ClientFor) -> None:
    with pytest.raises(Unauthorized) as e:
        client_for(pair.alpha, token="0" * 64).status()
    assert (e.value.code, e.value.status) == ("unauthorized", 401)
    # WebSockets too, refused before the upgrade.
    with pytest.raises(Unauthorized):
        client_for(pair.alpha, token="0" * 64).subscribe("inbox")
    with pytest.raises(NotFound):
        list(client_for(pair.alpha).watch("0" * 32))


def test_bodies_above_the_limit_and_budgets_without_room(
    tmp_path: Path, client_for: ClientFor
) -> None:
    config = '[api]\nmax_payload = "64KiB"\n[rpc]\nfile_budget = "32KiB"'
    node = Node(tmp_path, "small", config=config)
    try:
        small = client_for(node)
        # A call whose file parameter does not fit the file budget: nothing is kept.
        with pytest.raises(StoreFull) as full:
            small.call("small", "null", File.from_bytes(b"f" * (40 << 10), "big.bin"))
        assert (full.value.code, full.value.status) == ("store_full", 507)
        assert small.calls() == []
        with pytest.raises(PayloadTooLarge) as e:
            small.send("dtn://small/in", b"x" * (100 << 10))
        assert e.value.status == 413
        # A stream of unknown length is refused once it passes the limit.
        with pytest.raises(PayloadTooLarge):
            small.send_stream("dtn://small/in", (b"y" * 8192 for _ in range(20)))
        assert small.send("dtn://small/in", b"z" * (60 << 10)).size == 60 << 10
    finally:
        node.stop()


def test_a_node_that_is_not_there_is_unreachable(client_for: ClientFor, tmp_path: Path) -> None:
    class Gone:
        api = f"127.0.0.1:{free_port()}"
        token = "t"

    gone = client_for(Gone, timeout=5)
    with pytest.raises(Unreachable) as e:
        gone.status()
    assert isinstance(e.value, ConnectionError)
    with pytest.raises(Unreachable):
        gone.subscribe("inbox")
    # A wait that is told not to reconnect says so at once too.
    with pytest.raises(Unreachable):
        gone.wait("0" * 32, timeout=5, reconnect=False)
    # One that reconnects waits out its bound.
    with pytest.raises(Timeout):
        gone.wait("0" * 32, timeout=0.5)


def test_bounded_waits_end_in_timeout(pair: Pair, client_for: ClientFor) -> None:
    bravo = client_for(pair.bravo)
    with pytest.raises(Timeout) as e:
        with bravo.take("never", timeout=0.3):
            pass
    assert isinstance(e.value, TimeoutError)
    with bravo.subscribe("never") as sub:
        with pytest.raises(Timeout):
            sub.next(timeout=0.3)
    made = bravo.call("bravo", "slow", 5)
    with pytest.raises(Timeout):
        list(bravo.watch(made.id, timeout=0.5))
    with pytest.raises(Timeout):
        bravo.call_and_wait("bravo", "slow", 5, timeout=0.5)
    bravo.cancel(made.id)


def test_a_failed_call_is_call_failed(pair: Pair, client_for: ClientFor) -> None:
    alpha = client_for(pair.alpha)
    done = alpha.call_and_wait("bravo", "sum", "x", 1, timeout=30)
    assert done.state == "failed"
    with pytest.raises(CallFailed) as e:
        done.result()
    assert e.value.code == "bad_arguments" and e.value.call is done
    assert "bad_arguments" in str(e.value)
    # A call that ends unanswered carries its state as the code.
    made = alpha.call("nowhere", "echo", "x", deadline="1s")
    with pytest.raises(CallFailed) as e:
        alpha.result(made.id, timeout=30)
    assert e.value.code == "expired" and e.value.server is None


@pytest.fixture
def not_ferry() -> Iterator[str]:
    """An HTTP server that answers everything with a web page."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            body = b"<html>not ferry</html>"
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_answer_that_is_not_the_apis_is_a_protocol_error(
    not_ferry: str, client_for: ClientFor
) -> None:
    class Other:
        api = not_ferry
        token = "t"

    with pytest.raises(ProtocolError):
        client_for(Other).status()


def test_address_and_token_are_found_as_the_cli_finds_them(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    node = pair.alpha
    for name in ("FERRY_API", "FERRY_API_TOKEN", "XDG_RUNTIME_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no data directory of the user's
    assert Client(node.api).token is None
    # The copy `ferry node` left for its API's port under XDG_RUNTIME_DIR.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(node.directory))
    monkeypatch.setenv("FERRY_API", node.api)
    with Client() as found:
        assert found.url == f"http://{node.api}" and found.token == node.token
    # Without XDG_RUNTIME_DIR: the default data directory's copy, then its api-token.
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    (tmp_path / "data" / "ferry").mkdir(parents=True)
    (tmp_path / "data" / "ferry" / "api-token").write_text("from-the-data-dir\n")
    assert Client(node.api).token == "from-the-data-dir"
    # FERRY_API_TOKEN wins over every file; a token given wins over everything.
    monkeypatch.setenv("FERRY_API_TOKEN", " from-the-env ")
    assert Client(node.api).token == "from-the-env"
    assert Client(f"http://{node.api}/", token="given").token == "given"
    with pytest.raises(ValueError):
        Client("ftp://host:1")
    assert ferry_client.__version__
