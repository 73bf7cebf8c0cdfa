"""Procedures served by Python functions (``@node.procedure``) over ``/v1/providers``, called
from another node: parameters of every type, files both ways, the node's limits (timeout,
output, allow-list), name conflicts, a provider that disappears, one that reconnects mid-call,
and the serving node killed and restarted mid-call. Every test counts the function's runs:
no call ever runs twice."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import AsyncClientFor, ClientFor, wait_for_peer
from nodes import Node, example_rpc_section, wait_until

from ferry_client import (
    CallContext,
    CallFailed,
    Client,
    Conflict,
    File,
    ReceivedFile,
    Result,
)

GRACE = 2


class Net:
    """``alpha`` serves from Python (its provider grace cut to 2 s) and runs the example
    procedures; ``bravo`` calls it."""

    def __init__(self, directory: Path) -> None:
        self.alpha = Node(
            directory,
            "alpha",
            config=example_rpc_section().replace(
                "[rpc]\n", f'[rpc]\nprovider_grace = "{GRACE}s"\n', 1
            ),
        )
        self.bravo = Node(directory, "bravo", peers=(self.alpha.tcpcl,))
        wait_for_peer(self.bravo, "dtn://alpha/")


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    n = Net(tmp_path)
    try:
        yield n
    finally:
        for node in (n.bravo, n.alpha):
            if node.process is not None:
                node.stop()


class Serving:
    """A client's provider serving in a thread until stopped."""

    def __init__(self, client: Client, *, reconnect: bool = True) -> None:
        self.client = client
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve, args=(reconnect,), daemon=True)
        self.thread.start()
        assert self.ready.wait(20) and not self.errors, f"not registered: {self.errors}"

    def _serve(self, reconnect: bool) -> None:
        try:
            self.client.serve(stop=self.stop, reconnect=reconnect, ready=self.ready)
        except BaseException as e:  # noqa: BLE001 (handed to the test)
            self.errors.append(e)
            self.ready.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive()


def test_a_python_function_serves_calls_from_another_node_with_every_type_and_files(
    net: Net, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(net.alpha), client_for(net.bravo)
    runs: list[tuple[Any, ...]] = []

    @alpha.procedure("aerial", max_output=1 << 20)
    def aerial(
        zoom: int, ratio: float, colour: bool, area: str, raw: bytes, picture: ReceivedFile
    ) -> Result:
        """Takes a picture of an area."""
        runs.append((zoom, ratio, colour, area, raw, picture))
        return Result(
            value=f"zoom {zoom} of {area}",
            files=[("shot.jpg", picture.content[::-1]), ("meta/info.txt", b"ok")],
        )

    @alpha.procedure()
    def double(n: int) -> dict[str, int]:
        return {"double": 2 * n}

    serving = Serving(alpha)
    try:
        procedures = {p.name: p for p in alpha.procedures()}
        assert procedures["aerial"].served_by == "application"
        assert procedures["aerial"].connected is True
        assert [(p.name, p.type) for p in procedures["aerial"].parameters] == [
            ("zoom", "int"),
            ("ratio", "float"),
            ("colour", "bool"),
            ("area", "text"),
            ("raw", "bytes"),
            ("picture", "file"),
        ]
        assert procedures["aerial"].description == "Takes a picture of an area."
        assert procedures["double"].returns == "json"

        image = bytes(range(256)) * 40
        reply = bravo.run(
            "alpha",
            "aerial",
            3,
            0.5,
            True,
            "north; $(rm -rf /)",
            b"\x00\xff",
            File.from_bytes(image, "in.jpg"),
            timeout=60,
        )
        assert reply.text == "zoom 3 of north; $(rm -rf /)"
        assert sorted(f.name for f in reply.files) == ["meta/info.txt", "shot.jpg"]
        shot = next(f for f in reply.files if f.name == "shot.jpg")
        assert bravo.file(shot.hash) == image[::-1]
        assert runs == [
            (3, 0.5, True, "north; $(rm -rf /)", b"\x00\xff", ReceivedFile("in.jpg", image))
        ]
        assert bravo.run("alpha", "double", 21, timeout=30).text == '{"double": 42}'
        executions = {p.name: p.executions for p in alpha.procedures()}
        assert executions["aerial"] == 1 and executions["double"] == 1
    finally:
        serving.close()


def test_the_node_holds_a_provided_procedure_to_its_timeout_output_limit_and_allow_list(
    net: Net, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(net.alpha), client_for(net.bravo)
    cancelled = threading.Event()
    runs = {"dawdle": 0, "big": 0, "only": 0, "broken": 0}

    @alpha.procedure(timeout=1.0)
    def dawdle(call: CallContext) -> str:
        runs["dawdle"] += 1
        if call.cancelled.wait(20):
            cancelled.set()
        return "too late"

    @alpha.procedure(max_output=100)
    def big() -> bytes:
        runs["big"] += 1
        return b"x" * 101

    @alpha.procedure(allow=["ab" * 32])
    def only() -> str:
        runs["only"] += 1
        return "secret"

    @alpha.procedure()
    def broken(n: int) -> str:
        runs["broken"] += 1
        raise ValueError(f"cannot do {n}")

    serving = Serving(alpha)
    try:
        with pytest.raises(CallFailed) as e:
            bravo.run("alpha", "dawdle", timeout=30)
        assert e.value.code == "timed_out", e.value
        assert cancelled.wait(5), "the provider was told to cancel"

        with pytest.raises(CallFailed) as e:
            bravo.run("alpha", "big", timeout=30)
        assert e.value.code == "output_too_large", e.value

        with pytest.raises(CallFailed) as e:
            bravo.run("alpha", "only", timeout=30)
        assert e.value.code == "not_allowed", e.value

        with pytest.raises(CallFailed) as e:
            bravo.run("alpha", "broken", 7, timeout=30)
        assert e.value.code == "execution_failed", e.value
        assert e.value.stderr_tail == "ValueError: cannot do 7"

        with pytest.raises(CallFailed) as e:
            bravo.run("alpha", "broken", "seven", timeout=30)
        assert e.value.code == "bad_arguments", e.value
        assert runs == {"dawdle": 1, "big": 1, "only": 0, "broken": 1}
    finally:
        serving.close()


def test_a_name_served_already_is_refused(net: Net, client_for: ClientFor) -> None:
    first, second, third = (client_for(net.alpha) for _ in range(3))

    @first.procedure("shared")
    def shared() -> str:
        return "first"

    serving = Serving(first)
    try:

        @second.procedure("shared")
        def again() -> str:
            return "second"

        with pytest.raises(Conflict, match="another connected provider"):
            second.serve(reconnect=False)

        @third.procedure("echo")  # an executable of alpha's configuration
        def echo(text: str) -> str:
            return text

        with pytest.raises(Conflict, match="configuration"):
            third.serve(reconnect=False)
        assert client_for(net.bravo).run("alpha", "shared", timeout=30).text == "first"
    finally:
        serving.close()


def test_a_provider_that_disappears_mid_call_ends_the_call_without_running_it_again(
    net: Net, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(net.alpha), client_for(net.bravo)
    started = threading.Event()
    runs = []

    @alpha.procedure(timeout=30)
    def hang(call: CallContext) -> str:
        runs.append(call.job)
        started.set()
        time.sleep(GRACE + 3)
        return "never read"

    serving = Serving(alpha, reconnect=False)
    made = bravo.call("alpha", "hang", deadline="1m")
    assert started.wait(20)
    serving.stop.set()  # the application goes away while the call runs
    with pytest.raises(CallFailed) as e:
        bravo.result(made.id, timeout=30)
    assert e.value.code == "result_lost", e.value
    assert "did not come back" in (e.value.detail or ""), e.value.detail
    assert len(runs) == 1
    names = {p.name for p in alpha.procedures()}
    assert "hang" not in names, "withdrawn after the grace"
    serving.thread.join(20)


def test_a_provider_that_reconnects_mid_call_still_answers_it_once(
    net: Net, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(net.alpha), client_for(net.bravo)
    started, release = threading.Event(), threading.Event()
    runs = []

    @alpha.procedure(timeout=30)
    def wait_a_bit(n: int) -> str:
        runs.append(n)
        started.set()
        release.wait(20)
        return f"done {n}"

    serving = Serving(alpha)
    try:
        made = bravo.call("alpha", "wait_a_bit", 5, deadline="1m")
        assert started.wait(20)
        # The connection breaks; the serving loop makes it again and says it still runs the call.
        alpha.provider._connection.close()
        wait_until(
            "the provider registered again",
            10,
            lambda: alpha.provider.registered is not None and alpha.provider.registered["claimed"],
        )
        release.set()
        assert bravo.result(made.id, timeout=30).text == "done 5"
        assert runs == [5]
        wait_until("the result was kept", 10, lambda: not alpha.provider.outbox.held)
    finally:
        serving.close()


def test_the_serving_node_killed_mid_call_gets_the_result_after_its_restart(
    net: Net, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(net.alpha), client_for(net.bravo)
    started = threading.Event()
    runs = []

    @alpha.procedure(timeout=60)
    def survey(area: str) -> str:
        runs.append(area)
        started.set()
        time.sleep(3)
        return f"surveyed {area}"

    serving = Serving(alpha)
    try:
        made = bravo.call("alpha", "survey", "ridge", deadline="2m", transport="dtn")
        assert started.wait(30)
        net.alpha.kill()  # SIGKILL: no goodbye, the call's record is all that is left
        time.sleep(0.5)
        net.alpha.start()
        reply = bravo.result(made.id, timeout=90)
        assert reply.text == "surveyed ridge"
        registered = alpha.provider.registered
        assert registered is not None and len(registered["claimed"]) == 1, registered
        assert runs == ["ridge"], "it ran once"
        call = bravo.get_call(made.id)
        assert call.state == "succeeded" and len(call.replies) == 1
    finally:
        serving.close()


@pytest.mark.asyncio
async def test_an_asyncio_provider_serves_coroutines_and_plain_functions(
    net: Net, aclient_for: AsyncClientFor
) -> None:
    alpha, bravo = aclient_for(net.alpha), aclient_for(net.bravo)

    @alpha.procedure()
    async def greet(name: str) -> str:
        await asyncio.sleep(0.01)
        return f"hello {name}"

    @alpha.procedure()
    def add(a: int, b: int) -> str:
        return str(a + b)

    ready = asyncio.Event()
    task = asyncio.create_task(alpha.serve(ready=ready))
    try:
        await asyncio.wait_for(ready.wait(), 20)
        replies = await asyncio.gather(
            bravo.run("alpha", "greet", "field", timeout=30),
            bravo.run("alpha", "add", 2, 40, timeout=30),
        )
        assert [r.text for r in replies] == ["hello field", "42"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_the_example_application_serves_its_procedures(net: Net, client_for: ClientFor) -> None:
    import os
    import subprocess
    import sys

    from nodes import REPO

    bravo = client_for(net.bravo)
    app = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "providers" / "field_camera.py")],
        env={**os.environ, "FERRY_API": net.alpha.api, "FERRY_API_TOKEN": net.alpha.token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        alpha = client_for(net.alpha)
        wait_until(
            "the example registered",
            20,
            lambda: "snapshot" in {p.name for p in alpha.procedures()},
        )
        reply = bravo.run("alpha", "snapshot", 8, "north", timeout=30)
        assert reply.text.startswith("north: 8x8 taken for dtn://bravo/ at ")
        [picture] = reply.files
        assert picture.name == "snapshot.pgm"
        assert bravo.file(picture.hash).startswith(b"P5\n8 8\n255\n")
        report = bravo.run("alpha", "status_report", timeout=30)
        assert set(json.loads(report.text)) == {"load", "uptime_s"}
        with pytest.raises(CallFailed) as e:
            bravo.run("alpha", "snapshot", 0, "north", timeout=30)
        assert e.value.code == "execution_failed"
        assert "size must be 1 to 1000" in (e.value.stderr_tail or "")
    finally:
        app.terminate()
        app.wait(10)


def test_the_serving_node_stopped_mid_call_answers_server_stopped_and_cancels(
    net: Net, client_for: ClientFor
) -> None:
    alpha, bravo = client_for(net.alpha), client_for(net.bravo)
    started, cancelled = threading.Event(), threading.Event()

    @alpha.procedure(timeout=60)
    def long_job(call: CallContext) -> str:
        started.set()
        if call.cancelled.wait(30):
            cancelled.set()
        return "finished anyway"

    serving = Serving(alpha, reconnect=False)
    try:
        made = bravo.call("alpha", "long_job", deadline="1m")
        assert started.wait(30)
        assert net.alpha.stop() == 0  # SIGTERM: the node answers its running calls first
        with pytest.raises(CallFailed) as e:
            bravo.result(made.id, timeout=30)
        assert e.value.code == "server_stopped", e.value
        assert cancelled.wait(5), "the application was told to cancel"
    finally:
        serving.stop.set()
        serving.thread.join(20)
