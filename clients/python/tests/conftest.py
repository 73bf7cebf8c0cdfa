"""Fixtures: real ``ferry node`` processes (tests/nodes.py) and clients whose every request is
checked against crates/daemon/openapi.yaml (tests/openapi_check.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from nodes import Node, example_rpc_section, extra_procedures, wait_until  # noqa: E402
from openapi_check import AsyncCheckedTransport, CheckedTransport, SpecChecker  # noqa: E402

from ferry_client import AsyncClient, Client  # noqa: E402


@pytest.fixture(scope="session")
def checker() -> SpecChecker:
    return SpecChecker()


@pytest.fixture(autouse=True)
def no_spec_violations(checker: SpecChecker) -> Iterator[None]:
    """Fails a test that made a request the description does not describe, even if the test
    caught the exception."""
    before = len(checker.violations)
    yield
    assert checker.violations[before:] == [], "requests not in openapi.yaml"


ClientFor = Callable[..., Client]


@pytest.fixture
def client_for(checker: SpecChecker) -> Iterator[ClientFor]:
    """``client_for(node, **kwargs)``: a checked sync client of ``node``'s API."""
    made: list[Client] = []

    def make(node: Node, **kwargs: object) -> Client:
        kwargs.setdefault("token", node.token)
        c = Client(
            node.api,
            transport=CheckedTransport(checker),
            websocket_hook=checker.check_upgrade,
            **kwargs,  # type: ignore[arg-type]
        )
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


AsyncClientFor = Callable[..., AsyncClient]


@pytest_asyncio.fixture
async def aclient_for(checker: SpecChecker) -> AsyncIterator[AsyncClientFor]:
    made: list[AsyncClient] = []

    def make(node: Node, **kwargs: object) -> AsyncClient:
        kwargs.setdefault("token", node.token)
        c = AsyncClient(
            node.api,
            transport=AsyncCheckedTransport(checker),
            websocket_hook=checker.check_upgrade,
            **kwargs,  # type: ignore[arg-type]
        )
        made.append(c)
        return c

    yield make
    for c in made:
        await c.aclose()


def wait_for_peer(node: Node, peer: str, limit: float = 20.0) -> None:
    import httpx

    def has() -> bool:
        r = httpx.get(
            f"http://{node.api}/v1/peers",
            headers={"Authorization": f"Bearer {node.token}"},
            timeout=5,
        )
        return any(p["node_id"] == peer for p in r.json())

    wait_until(f"{peer} is a neighbour of {node.name}", limit, has, node.log())


class Pair:
    """``bravo`` serves the example procedures (examples/node.toml) and the tests' own
    (tests/procedures/); ``alpha`` serves nothing and has a TCPCL session to bravo."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.bravo = Node(directory, "bravo", config=example_rpc_section() + extra_procedures())
        self.alpha = Node(directory, "alpha", peers=(self.bravo.tcpcl,))
        wait_for_peer(self.alpha, "dtn://bravo/")
        wait_for_peer(self.bravo, "dtn://alpha/")

    def stop(self) -> None:
        for node in (self.alpha, self.bravo):
            if node.process is not None:
                node.stop()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    p = Pair(tmp_path_factory.mktemp("pair"))
    try:
        yield p
    finally:
        p.stop()
