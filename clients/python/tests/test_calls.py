"""Remote procedure calls from alpha to bravo in every mode and transport, with parameters of
every type and files both ways; detach, wait, result, cancel, forget, and watching a call."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from conftest import ClientFor, Pair

from ferry_client import CallFailed, File, NotFound, Timeout


def test_an_explicit_call_returns_its_value_exactly(pair: Pair, client_for: ClientFor) -> None:
    alpha = client_for(pair.alpha)
    bravo = client_for(pair.bravo)
    runs_before = {p.name: p.executions for p in bravo.procedures()}["echo"]
    tricky = "over the link; $(uname) 'quotes' \\n ünïcode"
    reply = alpha.run("bravo", "echo", tricky, timeout=30)
    # The server counts the run as its procedure's.
    assert {p.name: p.executions for p in bravo.procedures()}["echo"] == runs_before + 1
    # And lists the call among those it served, the latest deadline first.
    latest = bravo.served()[0]
    assert (latest.caller, latest.procedure, latest.mode, latest.state) == (
        "dtn://alpha/",
        "echo",
        "explicit",
        "answered",
    ), latest
    assert latest.deadline_ms > 0 and len(latest.id) == 32
    assert reply.ok and reply.value == tricky.encode() and reply.text == tricky
    assert reply.server == "dtn://bravo/" and reply.via == "stream"
    assert reply.server_key == client_for(pair.bravo).status().public_key


def test_parameters_of_every_type(pair: Pair, client_for: ClientFor, tmp_path: Path) -> None:
    alpha = client_for(pair.alpha)
    reply = alpha.run("dtn://bravo/", "types", -7, 0.5, True, "text:int:3", timeout=30)
    assert reply.text == "-7|0.5|true|text:int:3|"

    # A file (streamed from disk into the body as base64) and bytes; the file comes back.
    data = hashlib.sha256(b"seed").digest() * 40_000 + b"tail"
    src = tmp_path / "param.bin"
    src.write_bytes(data)
    blob = bytes(range(256)) * 3
    reply = alpha.run("bravo", "checksum", File(src), blob, timeout=60)
    digest, size = reply.text.split()
    assert digest == hashlib.sha256(data).hexdigest() and int(size) == len(blob)
    [copy] = reply.files
    assert copy.name == "copy.bin" and copy.size == len(data) and copy.arrived
    [saved] = alpha.save_files(reply, tmp_path / "out")
    assert saved.read_bytes() == data
    assert alpha.file(copy.hash) == data

    # From memory, named.
    reply = alpha.run("bravo", "checksum", File.from_bytes(b"small", "s.txt"), b"", timeout=30)
    assert reply.text.split() == [hashlib.sha256(b"small").hexdigest(), "0"]


def test_a_result_file_comes_as_the_server_makes_it(
    pair: Pair, client_for: ClientFor, tmp_path: Path
) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    remote = alpha.run("bravo", "photo", 300, timeout=60)
    local = bravo.run("bravo", "photo", 300, timeout=60)
    assert remote.text == "photo.pgm: 300x300 greyscale, 321429 bytes\n"
    assert local.via == "local"
    [here] = alpha.save_files(remote, tmp_path / "alpha")
    [there] = bravo.save_files(local, tmp_path / "bravo")
    assert here.name == "photo.pgm" and here.stat().st_size == 321_429
    assert here.read_bytes() == there.read_bytes()


def test_any_and_all(pair: Pair, client_for: ClientFor) -> None:
    alpha = client_for(pair.alpha)
    # alpha serves nothing but null, so bravo is the one server.
    assert alpha.run("any", "sum", 19, 23, timeout=30).text == "42\n"
    made = alpha.call("all", "echo", "who is there?", deadline="4s")
    assert made.target == "all" and made.state == "waiting"
    # Followed reply by reply: answered as soon as there is more than none.
    first = alpha.wait(made.id, replies=0, timeout=20)
    assert [r.server for r in first.replies] == ["dtn://bravo/"]
    done = alpha.wait(made.id, timeout=30)
    assert done.finished
    assert [(r.server, r.text) for r in done.results()] == [("dtn://bravo/", "who is there?")]


@pytest.mark.parametrize("transport", ["stream", "datagram", "dtn", "auto"])
def test_each_transport(pair: Pair, client_for: ClientFor, transport: str) -> None:
    alpha = client_for(pair.alpha)
    call = alpha.call_and_wait(
        "bravo", "sum", 1, 2, transport=transport, timeout=60  # type: ignore[arg-type]
    )
    assert call.transport == transport and call.state == "succeeded", call
    reply = call.result()
    assert reply.text == "3\n"
    assert reply.via == (transport if transport != "auto" else "stream")
    assert call.timeline and call.timeline[-1].text.startswith("succeeded")


def test_failures_carry_their_stable_codes(pair: Pair, client_for: ClientFor) -> None:
    alpha = client_for(pair.alpha)
    with pytest.raises(CallFailed) as e:
        alpha.run("bravo", "nope", timeout=30)
    assert e.value.code == "not_offered" and e.value.server == "dtn://bravo/"
    assert e.value.call.state == "failed"

    with pytest.raises(CallFailed) as e:
        alpha.run("bravo", "photo", 0, timeout=30)
    assert e.value.code == "execution_failed" and e.value.exit_status == 2
    assert "SIZE must be 1 to 1000" in (e.value.stderr_tail or "")

    with pytest.raises(CallFailed) as e:
        alpha.run("bravo", "echo", File.from_bytes(b"x", "x.txt"), timeout=30)
    assert e.value.code == "bad_arguments"

    with pytest.raises(CallFailed) as e:
        alpha.run("bravo", "photo", 10, requirements="has(gps)", timeout=30)
    assert e.value.code == "predicate_failed" and "has(gps)" in (e.value.detail or "")


def test_detach_wait_cancel_and_forget(pair: Pair, client_for: ClientFor) -> None:
    alpha, bravo = client_for(pair.alpha), client_for(pair.bravo)
    made = alpha.call("bravo", "slow", 30, deadline="2m")
    assert len(made.id) == 32 and made.state == "waiting"
    assert made.id in [c.id for c in alpha.calls()]
    with pytest.raises(Timeout) as e:
        alpha.wait(made.id, timeout=0.5)
    assert e.value.call is not None and e.value.call.state == "waiting"
    with pytest.raises(Timeout):
        alpha.result(made.id, timeout=0.5)
    # Once bravo runs it, cancelling stops the execution there.
    _wait_running(bravo, 1)
    cancelled = alpha.cancel(made.id)
    assert cancelled.state == "cancelled"
    with pytest.raises(CallFailed) as failed:
        alpha.result(made.id, timeout=5)
    assert failed.value.code == "cancelled"
    _wait_running(bravo, 0)
    assert alpha.get_call(made.id).timeline[-1].text.startswith("cancelled")
    alpha.forget(made.id)
    with pytest.raises(NotFound):
        alpha.get_call(made.id)


def _wait_running(client: object, n: int) -> None:
    from nodes import wait_until

    wait_until(
        f"{n} executions running",
        20,
        lambda: client.status().rpc.running == n,  # type: ignore[attr-defined]
    )


def test_watching_a_call_shows_each_change_until_it_ends(
    pair: Pair, client_for: ClientFor
) -> None:
    alpha = client_for(pair.alpha)
    made = alpha.call("bravo", "slow", 1)
    seen = list(alpha.watch(made.id, timeout=30))
    assert seen[0].state == "waiting" and seen[-1].state == "succeeded"
    assert all(not c.finished for c in seen[:-1])
    assert len(seen) >= 2 and seen[-1].result().text.startswith("slept 1 s")
    # Each message is news, and timelines only grow.
    lengths = [len(c.timeline) for c in seen]
    assert lengths == sorted(lengths) and len(set(map(repr, seen))) == len(seen)
    # A finished call is shown once, and the socket closed.
    assert [c.state for c in alpha.watch(made.id, timeout=10)] == ["succeeded"]
