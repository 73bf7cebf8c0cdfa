"""Sending and receiving bundles between two nodes: text, bytes, files streamed both ways, a
stream of chunks; receiving by long poll, by ``take`` (acknowledged only after the block) and
by subscription (acknowledged one by one); the store and status reports."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from conftest import ClientFor, Pair
from nodes import wait_until

from ferry_client import Timeout


def _pattern(size: int, seed: int = 1) -> bytes:
    # Deterministic, not compressible, different per seed.
    out = bytearray()
    block = hashlib.sha256(seed.to_bytes(4, "big")).digest()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


def test_text_goes_to_another_node_and_is_taken_once(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    sent = alpha.send("dtn://bravo/text", "hello bravo", lifetime="2h", priority=2)
    assert sent.size == len("hello bravo") and sent.id.startswith("dtn://alpha/")
    got = bravo.receive("text", wait=20)
    assert [b.text for b in got] == ["hello bravo"]
    assert got[0].source == "dtn://alpha/" and got[0].destination == "dtn://bravo/text"
    assert got[0].id == sent.id
    # Reading takes nothing: it is still there, also by its full endpoint id.
    again = bravo.receive("dtn://bravo/text", payload=False)
    assert [(b.seq, b.payload) for b in again] == [(got[0].seq, None)]
    bravo.ack("text", got[0].seq)
    assert bravo.receive("text") == []


def test_bytes_arrive_byte_for_byte(pair: Pair, client_for: ClientFor, tmp_path: Path) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    data = bytes(range(256)) * 40 + b"\x00\xff"
    alpha.send("dtn://bravo/bytes", data, bundle_class="datagram")
    [b] = bravo.receive("bytes", wait=20)
    assert b.payload == data and b.size == len(data)
    assert bravo.payload("bytes", b.seq) == data
    out = tmp_path / "out.bin"
    assert bravo.save_payload("bytes", b.seq, out) == len(data)
    assert out.read_bytes() == data
    bravo.ack("bytes", b.seq)


def test_a_file_is_streamed_each_way(pair: Pair, client_for: ClientFor, tmp_path: Path) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    data = _pattern(3 << 20)
    src = tmp_path / "three-mib.bin"
    src.write_bytes(data)
    for sender, receiver, name in ((alpha, bravo, "bravo"), (bravo, alpha, "alpha")):
        sent = sender.send_file(f"dtn://{name}/files", src, lifetime=3600)
        assert sent.size == len(data)
        [b] = receiver.receive("files", wait=30, payload=False)
        out = tmp_path / f"to-{name}.bin"
        receiver.save_payload("files", b.seq, out)
        assert out.read_bytes() == data, f"the file reached {name} altered"
        assert not (tmp_path / f"to-{name}.bin.part").exists()
        receiver.ack("files", b.seq)
        assert receiver.receive("files") == []
    # An open file is sent from where it stands.
    with open(src, "rb") as f:
        f.seek(1000)
        assert alpha.send_file("dtn://bravo/files", f).size == len(data) - 1000
    with bravo.take("files", timeout=30) as b:
        assert bravo.payload("files", b.seq) == data[1000:]


def test_a_large_file_is_never_held_in_memory(
    pair: Pair, client_for: ClientFor, tmp_path: Path
) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    size = 24 << 20
    src = tmp_path / "large.bin"
    with open(src, "wb") as f:
        for i in range(size >> 20):
            f.write(_pattern(1 << 20, seed=i))
    tracemalloc.start()
    try:
        sent = alpha.send_file("dtn://bravo/large", src)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sent.size == size
    assert peak < 4 << 20, f"sending a {size >> 20} MiB file took {peak >> 20} MiB"
    [b] = bravo.receive("large", wait=60, payload=False)
    out = tmp_path / "large.out"
    tracemalloc.start()
    try:
        bravo.save_payload("large", b.seq, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"saving a {size >> 20} MiB payload took {peak >> 20} MiB"
    assert os.path.getsize(out) == size
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
    bravo.ack("large", b.seq)


def test_a_stream_of_chunks_is_one_bundle(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    chunks = [_pattern(70_000, seed=i) for i in range(5)]
    assert alpha.send_stream("dtn://bravo/stream", iter(chunks)).size == 350_000
    assert alpha.send_stream("dtn://bravo/stream", iter(chunks), size=350_000).size == 350_000
    got = bravo.receive("stream", wait=20)
    got += [] if len(got) == 2 else bravo.receive("stream", wait=20)
    assert [b.payload for b in got] == [b"".join(chunks)] * 2


def test_take_acknowledges_only_after_the_block(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    alpha.send("dtn://bravo/take", "first")
    alpha.send("dtn://bravo/take", "second")
    wait_until("two bundles at bravo", 20, lambda: len(bravo.receive("take")) == 2)

    class Crash(Exception):
        pass

    with pytest.raises(Crash):
        with bravo.take("take") as b:
            assert b.text == "first"
            raise Crash  # the application failed with it: it stays
    with bravo.take("take") as b:
        assert b.text == "first"
    with bravo.take("take") as b:
        assert b.text == "second"
    with pytest.raises(Timeout):
        with bravo.take("take", timeout=0.5):
            raise AssertionError("nothing is left to take")


def test_a_subscription_gets_every_bundle_and_keeps_the_unacknowledged(
    pair: Pair, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    alpha.send("dtn://bravo/sub", "one")
    with bravo.subscribe("sub") as sub:
        first = sub.next(timeout=20)
        assert first.text == "one"
        # Arriving while subscribed: pushed.
        alpha.send("dtn://bravo/sub", "two")
        alpha.send("dtn://bravo/sub", b"three")
        second, third = sub.next(timeout=20), sub.next(timeout=20)
        assert (second.text, third.payload) == ("two", b"three")
        sub.ack(first)
        sub.ack(third.seq)
        with pytest.raises(Timeout):
            sub.next(timeout=0.3)
    # "two" was never acknowledged: the next subscriber gets it, and only it.
    with bravo.subscribe("dtn://bravo/sub") as sub:
        again = sub.next(timeout=10)
        assert (again.seq, again.text) == (second.seq, "two")
        sub.ack(again)
        with pytest.raises(Timeout):
            sub.next(timeout=0.3)
    wait_until("the inbox is empty", 10, lambda: bravo.receive("sub") == [])


def test_the_store_holds_what_waits_and_reports_come_back(
    pair: Pair, client_for: ClientFor
) -> None:
    alpha = client_for(pair.alpha)
    waiting = alpha.send("dtn://nowhere/inbox", "for a node not met yet", lifetime="10m")
    stored = {b.id: b for b in alpha.bundles()}
    assert stored[waiting.id].destination == "dtn://nowhere/inbox"
    assert stored[waiting.id].retention == "originated"

    traced = alpha.send("dtn://bravo/traced", "report it", report=True)
    reports = wait_until(
        "a delivery report from bravo",
        20,
        lambda: [r for r in alpha.reports(traced.id) if r.status == "delivered"],
    )
    assert reports[0].from_node.startswith("dtn://bravo/") and reports[0].bundle == traced.id
