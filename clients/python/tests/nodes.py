"""Real ``ferry node`` processes on loopback for the tests, as crates/ferry/tests/common/node.rs
runs them: a configuration file and a data directory in the test's own directory,
``XDG_CONFIG_HOME`` and ``XDG_RUNTIME_DIR`` pointing there (no file of the user's is read, the
token copy is left there), every address on 127.0.0.1, discovery off, every wait bounded.

The binary is ``FERRY_BIN``, else ``$CARGO_TARGET_DIR/debug/ferry``, else the workspace's
``target/debug/ferry``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[3]
#: How long a node may take to answer its API after it was started.
START_TIMEOUT = 20.0


def ferry_bin() -> Path:
    given = os.environ.get("FERRY_BIN")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    path = Path(given) if given else target / "debug" / "ferry"
    if not path.is_file():
        raise RuntimeError(
            f"no ferry binary at {path}: build it (cargo build -p ferry) or set FERRY_BIN"
        )
    return path


_port_lock = threading.Lock()
_next_port = [12_000 + (os.getpid() * 7919) % 7000]


def free_port() -> int:
    """A port free on 127.0.0.1 for TCP and UDP, below the ephemeral range (12000–18999, not
    the Rust tests' 20000–31999, so both may run at once)."""
    with _port_lock:
        for _ in range(7000):
            port = 12_000 + (_next_port[0] - 12_000) % 7000
            _next_port[0] += 1
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
                    t.bind(("127.0.0.1", port))
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on 127.0.0.1 in 12000..19000")


def example_rpc_section() -> str:
    """examples/node.toml's ``[rpc]`` section with its ``exec`` paths made absolute."""
    examples = REPO / "examples"
    text = (examples / "node.toml").read_text()
    start = text.index("\n[rpc]")
    return text[start:].replace('exec = "', f'exec = "{examples}/')


def extra_procedures() -> str:
    """Two procedures of the tests' own (tests/procedures/), for the parameter types the
    examples do not take: ``types`` (int, float, bool, text) and ``checksum`` (a file and
    bytes; the file comes back as a result file)."""
    here = Path(__file__).resolve().parent / "procedures"
    return f"""
[[rpc.procedure]]
name = "types"
params = ["int", "float", "bool", "text"]
exec = "{here}/types.sh"
timeout = "10s"

[[rpc.procedure]]
name = "checksum"
params = ["file", "bytes"]
exec = "{here}/checksum.sh"
timeout = "30s"
max_output = "16MiB"
"""


def wait_until(what: str, limit: float, done: Callable[[], Any], log: str = "") -> Any:
    """Polls ``done`` until it returns something true (returned), failing after ``limit``."""
    deadline = time.monotonic() + limit
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {limit} s: {what}\n{log}")
        time.sleep(0.05)


class Node:
    """A ``ferry node`` process named ``dtn://<name>/`` living in ``directory``."""

    def __init__(
        self,
        directory: Path,
        name: str,
        *,
        peers: tuple[int, ...] = (),
        config: str = "",
        keepalive: str | None = "1s",
    ) -> None:
        self.directory = directory
        self.name = name
        self.node_id = f"dtn://{name}/"
        self.data_dir = directory / name
        self.config_path = directory / f"{name}.toml"
        self.log_path = directory / f"{name}.log"
        self.config_path.write_text(
            f'node_id = "{self.node_id}"\ndata_dir = "{self.data_dir}"\n{config}\n'
        )
        self.tcpcl = free_port()
        self.api_port = free_port()
        self.api = f"127.0.0.1:{self.api_port}"
        self.args = [
            str(ferry_bin()),
            "node",
            "--config",
            str(self.config_path),
            "--tcpcl",
            f"127.0.0.1:{self.tcpcl}",
            "--api",
            self.api,
            "--udp",
            "",
            "--no-discovery",
        ]
        if keepalive:
            self.args += ["--keepalive", keepalive]
        for p in peers:
            self.args += ["--peer", f"127.0.0.1:{p}"]
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def token(self) -> str:
        return (self.data_dir / "api-token").read_text().strip()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["XDG_CONFIG_HOME"] = str(self.directory)
        env["XDG_RUNTIME_DIR"] = str(self.directory)
        env.pop("FERRY_API_TOKEN", None)
        return env

    def start(self) -> None:
        assert self.process is None, "already running"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_until(f"{self.name}'s API answers", START_TIMEOUT, self._answers, self.log())

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.process.returncode}\n{self.log()}")
        try:
            token = self.token
        except OSError:
            return False
        try:
            r = httpx.get(
                f"http://{self.api}/v1/status",
                headers={"Authorization": f"Bearer {token}"},
                timeout=2,
            )
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def stop(self) -> int:
        """SIGTERM, as an init system stops it; its exit status (within 10 s)."""
        assert self.process is not None, "not running"
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            raise AssertionError(f"{self.name} did not stop on SIGTERM\n{self.log()}") from None
        self.process = None
        return code

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None
