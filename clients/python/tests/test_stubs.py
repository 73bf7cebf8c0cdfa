"""Typed stubs (``ferry procedures NODE --stubs python``): written from another node's
declarations (its built-in ``ferry.procedures``, asked with a call), they pass ``mypy
--strict``, and their calls are futures: many are in flight at once and each brings its own
typed value."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from conftest import Pair
from nodes import ferry_bin

from ferry_client import Client


def write_stubs(pair: Pair, tmp_path: Path) -> Path:
    path = tmp_path / "bravo_stubs.py"
    done = subprocess.run(
        [str(ferry_bin()), "procedures", "bravo", "--stubs", "python", "-o", str(path)],
        env={**pair.alpha.env(), "FERRY_API": pair.alpha.api},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote stubs for" in done.stderr and "dtn://bravo/" in done.stderr, done.stderr
    return path


def test_stubs_for_another_node_are_typed_and_their_calls_fly_together(
    pair: Pair, tmp_path: Path
) -> None:
    path = write_stubs(pair, tmp_path)
    text = path.read_text()
    assert 'NODE = "dtn://bravo/"' in text
    assert "    def sum(self, a: int, b: int) -> Future[str]:" in text
    assert "    def echo(self, text: str) -> Future[str]:" in text
    assert "    def checksum(self, arg1: File, arg2: bytes) -> Future[Reply]:" in text
    assert "Adds two integers." in text
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    spec = importlib.util.spec_from_file_location("bravo_stubs", path)
    assert spec is not None and spec.loader is not None
    stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stubs)
    with Client(pair.alpha.api, token=pair.alpha.token) as client:
        with stubs.Stubs(client) as bravo:
            started = time.monotonic()
            # bravo runs at most 4 calls at once (its `accept`), 2 of slow, 4 of echo.
            slow = [bravo.slow(2) for _ in range(2)]
            echoes = [bravo.echo(f"#{i}") for i in range(2)]
            # The calls were made before any result came: all four were in flight together.
            assert not any(f.done() for f in slow)
            assert [f.result(timeout=60) for f in echoes] == ["#0", "#1"]
            assert all(f.result(timeout=60).startswith("slept 2 s on ") for f in slow)
            # The two calls of two seconds each ran side by side.
            assert time.monotonic() - started < 3.9
            assert [bravo.sum(i, 100).result(timeout=30) for i in range(3)] == [
                "100\n",
                "101\n",
                "102\n",
            ]
