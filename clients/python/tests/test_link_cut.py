"""A link cut mid-call, and the calling node restarted mid-call: the call goes on, its result
arrives exactly once, and the procedure ran once.

As crates/daemon/tests/integration/rpc.rs does it: alpha reaches bravo only through a relay
that can be cut; alpha calls bravo's ``slow``; once bravo acknowledged it, the link is cut, the
result is ready while it is down, bravo keeps it; the link comes back, and the result comes by
dtn."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import AsyncClientFor, ClientFor, wait_for_peer
from nodes import Node, example_rpc_section, wait_until
from relay import Relay

from ferry_client import Call, Reply


class Linked:
    def __init__(self, directory: Path) -> None:
        self.bravo = Node(directory, "bravo", config=example_rpc_section())
        self.relay = Relay(self.bravo.tcpcl)
        self.alpha = Node(directory, "alpha", peers=(self.relay.port,))
        wait_for_peer(self.alpha, "dtn://bravo/")


@pytest.fixture
def linked(tmp_path: Path) -> Iterator[Linked]:
    net = Linked(tmp_path)
    try:
        yield net
    finally:
        net.relay.close()
        for node in (net.alpha, net.bravo):
            if node.process is not None:
                node.stop()


@pytest.mark.asyncio
async def test_a_link_cut_mid_call_still_brings_the_result_once(
    linked: Linked, aclient_for: AsyncClientFor
) -> None:
    alpha, bravo = aclient_for(linked.alpha), aclient_for(linked.bravo)
    executions = (await bravo.status()).rpc.executions
    made = await alpha.call("bravo", "slow", 3, deadline="2m")
    seen: list[Call] = []

    async def follow() -> None:
        # The watcher on alpha's API lives through the cut: the link is between the nodes.
        async for call in alpha.watch(made.id, timeout=90):
            seen.append(call)

    watcher = asyncio.create_task(follow())
    deadline = time.monotonic() + 30
    while not (await alpha.get_call(made.id)).acks:
        assert time.monotonic() < deadline, "bravo did not acknowledge the call"
        await asyncio.sleep(0.05)

    linked.relay.cut()
    while await alpha.peers():
        assert time.monotonic() < deadline + 30, "alpha did not notice the cut"
        await asyncio.sleep(0.05)
    # The result is ready while the link is down: bravo keeps it, alpha's call waits.
    while (await bravo.status()).rpc.running:
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    waiting = await alpha.get_call(made.id)
    assert waiting.state == "waiting" and waiting.replies == []
    assert any("path lost" in t.text for t in waiting.timeline), waiting.timeline

    linked.relay.restore()
    reply = await alpha.result(made.id, timeout=90)
    await asyncio.wait_for(watcher, 30)
    _exactly_once(await alpha.get_call(made.id), reply)
    assert reply.via == "dtn"
    assert seen[-1].state == "succeeded" and len(seen[-1].replies) == 1
    assert (await bravo.status()).rpc.executions == executions + 1, "it ran once"


def test_the_calling_node_restarted_mid_call_still_gets_the_result_once(
    linked: Linked, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(linked.alpha), client_for(linked.bravo)
    executions = bravo.status().rpc.executions
    made = alpha.call("bravo", "slow", 3, deadline="2m")
    wait_until("bravo runs it", 30, lambda: bravo.status().rpc.running == 1)

    # A waiter in another thread, blocked on alpha's API, while alpha stops and starts again.
    answers: list[Reply | BaseException] = []

    def waiter() -> None:
        try:
            answers.append(alpha.result(made.id, timeout=90))
        except BaseException as e:  # noqa: BLE001 (handed to the test thread)
            answers.append(e)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.3)
    assert linked.alpha.stop() == 0
    time.sleep(1.0)
    linked.alpha.start()
    thread.join(timeout=100)
    assert not thread.is_alive(), "the waiter did not return"
    [reply] = answers
    assert isinstance(reply, Reply), reply
    _exactly_once(alpha.get_call(made.id), reply)
    assert bravo.status().rpc.executions == executions + 1, "it ran once"


def _exactly_once(call: Call, reply: Reply) -> None:
    assert call.state == "succeeded", call
    assert len(call.replies) == 1, call.replies
    assert call.replies[0] == reply
    assert reply.server == "dtn://bravo/" and reply.text.startswith("slept 3 s")
    results = [t.text for t in call.timeline if t.text.startswith("result from")]
    assert len(results) == 1, call.timeline
