#!/usr/bin/env python3
"""A field application serving procedures from Python: run it beside a `ferry node`, and any
node that can reach this one may call `snapshot` and `status_report` on it, by any transport,
through any disruption.

    pip install ./clients/python
    ferry node &                                   # this node, API on 127.0.0.1:4550
    python3 examples/providers/field_camera.py     # serves until Ctrl-C
    # from another node:
    ferry call dtn://camera/ snapshot 64 north -o pictures/
    ferry procedures camera --stubs python -o camera_stubs.py

The node gives these functions every guarantee an executable procedure has: a call runs at most
once (even if the node restarts while it runs: this program reconnects and hands in the result),
the declared timeout and output limit hold, and callers outside `allow` (if set) are refused.
"""

from __future__ import annotations

import os
import time

from ferry_client import CallContext, Client, Result

node = Client(os.environ.get("FERRY_API"))


@node.procedure(timeout=30, max_output=4 << 20, max_concurrent=2)
def snapshot(size: int, area: str, call: CallContext) -> Result:
    """Takes a SIZE x SIZE greyscale picture of AREA; returns it as snapshot.pgm."""
    if not 1 <= size <= 1000:
        raise ValueError(f"size must be 1 to 1000, not {size}")
    rows = []
    for y in range(size):
        if call.cancelled.is_set():  # the node's timeout passed, or the caller cancelled
            raise TimeoutError("cancelled while drawing")
        rows.append(bytes((x * 255 // max(size - 1, 1) + y) % 256 for x in range(size)))
    picture = f"P5\n{size} {size}\n255\n".encode() + b"".join(rows)
    return Result(
        value=f"{area}: {size}x{size} taken for {call.caller} at {time.strftime('%H:%M:%S')}",
        files=[("snapshot.pgm", picture)],
    )


@node.procedure(returns="json")
def status_report() -> dict[str, object]:
    """This device's state: its load and how long it has been up."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return {"load": os.getloadavg()[0], "uptime_s": round(uptime)}


if __name__ == "__main__":
    print(f"serving {', '.join(node.provider.declared)} on {node.url} (Ctrl-C stops)")
    try:
        node.serve()
    except KeyboardInterrupt:
        pass
