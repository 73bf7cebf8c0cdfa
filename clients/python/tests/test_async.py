"""The asyncio client against the same nodes: the node's routes, bundles (streamed file,
take, subscription), calls in each mode with many in flight at once, watching, and its
errors."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import AsyncClientFor, Pair
from nodes import free_port

from ferry_client import CallFailed, File, NotFound, Timeout, Unreachable


@pytest.mark.asyncio
async def test_node_routes(pair: Pair, aclient_for: AsyncClientFor) -> None:
    alpha = aclient_for(pair.alpha)
    status, peers, routes, procs = await asyncio.gather(
        alpha.status(), alpha.peers(), alpha.routes(), alpha.procedures()
    )
    assert status.node_id == "dtn://alpha/" and [p.node_id for p in peers] == ["dtn://bravo/"]
    assert any(r.destination == "dtn://bravo/" for r in routes)
    assert [p.name for p in procs] == ["ferry.procedures", "null"]
    assert isinstance(await alpha.bundles(), list) and isinstance(await alpha.keys(), list)
    assert "ferry_" in await alpha.metrics()


@pytest.mark.asyncio
async def test_bundles(pair: Pair, aclient_for: AsyncClientFor, tmp_path: Path) -> None:
    alpha, bravo = aclient_for(pair.alpha), aclient_for(pair.bravo)
    data = hashlib.sha256(b"a").digest() * 50_000
    src = tmp_path / "file.bin"
    src.write_bytes(data)
    sent = await alpha.send_file("dtn://bravo/async-files", src)
    assert sent.size == len(data)
    [b] = await bravo.receive("async-files", wait=30, payload=False)
    out = tmp_path / "out.bin"
    await bravo.save_payload("async-files", b.seq, out)
    assert out.read_bytes() == data
    await bravo.ack("async-files", b.seq)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(3):
            yield bytes([i]) * 1000

    await alpha.send_stream("dtn://bravo/async-take", chunks())
    await alpha.send("dtn://bravo/async-take", "second")
    async with bravo.take("async-take", timeout=20) as b:
        assert b.payload == b"\x00" * 1000 + b"\x01" * 1000 + b"\x02" * 1000
    async with bravo.take("async-take", timeout=20) as b:
        assert b.text == "second"
    with pytest.raises(Timeout):
        async with bravo.take("async-take", timeout=0.3):
            pass

    async with bravo.subscribe("async-sub") as sub:
        for text in ("a", "b", "c"):
            await alpha.send("dtn://bravo/async-sub", text)
        got = [await sub.next(timeout=20) for _ in range(3)]
        assert [b.text for b in got] == ["a", "b", "c"]
        for b in got:
            await sub.ack(b)
        with pytest.raises(Timeout):
            await sub.next(timeout=0.3)


@pytest.mark.asyncio
async def test_many_calls_in_flight(pair: Pair, aclient_for: AsyncClientFor) -> None:
    alpha = aclient_for(pair.alpha)
    # Four at once: bravo admits at most four executions ("running < 4"), and one sum.
    replies = await asyncio.gather(
        *(alpha.run("bravo", "echo", f"call {i}", timeout=60) for i in range(2)),
        alpha.run("any", "sum", 2, 3, timeout=60),
        alpha.run("bravo", "types", 1, 2.5, False, "t", timeout=60),
    )
    assert [r.text for r in replies] == ["call 0", "call 1", "5\n", "1|2.5|false|t|"]
    made = await alpha.call("all", "echo", "all of you", deadline="3s", transport="datagram")
    done = await alpha.wait(made.id, timeout=30)
    assert [r.text for r in done.results()] == ["all of you"]
    reply = await alpha.run("bravo", "checksum", File.from_bytes(b"abc", "abc"), b"xy")
    [f] = reply.files
    assert await alpha.file(f.hash) == b"abc"


@pytest.mark.asyncio
async def test_watch_cancel_forget(pair: Pair, aclient_for: AsyncClientFor) -> None:
    alpha = aclient_for(pair.alpha)
    made = await alpha.call("bravo", "slow", 1)
    states = [c.state async for c in alpha.watch(made.id, timeout=30)]
    assert states[0] == "waiting" and states[-1] == "succeeded"
    assert (await alpha.result(made.id)).text.startswith("slept 1 s")
    slow = await alpha.call("bravo", "slow", 30)
    with pytest.raises(Timeout):
        await alpha.wait(slow.id, timeout=0.3)
    assert (await alpha.cancel(slow.id)).state == "cancelled"
    with pytest.raises(CallFailed) as e:
        await alpha.result(slow.id, timeout=5)
    assert e.value.code == "cancelled"
    await alpha.forget(slow.id)
    with pytest.raises(NotFound):
        await alpha.get_call(slow.id)
    assert slow.id not in [c.id for c in await alpha.calls()]


@pytest.mark.asyncio
async def test_errors(pair: Pair, aclient_for: AsyncClientFor) -> None:
    class Gone:
        api = f"127.0.0.1:{free_port()}"
        token = "t"

    with pytest.raises(Unreachable):
        await aclient_for(Gone, timeout=5).status()
    with pytest.raises(NotFound):
        async for _ in aclient_for(pair.alpha).watch("0" * 32):
            pass
    with pytest.raises(CallFailed) as e:
        await aclient_for(pair.alpha).run("bravo", "nope", timeout=30)
    assert e.value.code == "not_offered"
