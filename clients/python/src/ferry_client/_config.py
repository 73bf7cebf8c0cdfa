"""Which node a client talks to and the token it presents, found as the ``ferry`` commands find
them (crates/ferry/src/api_token.rs, docs/api.md "Who may call").

Address: the one given, else ``FERRY_API``, else ``127.0.0.1:4550``.

Token: the one given, else ``FERRY_API_TOKEN``; else the copy ``ferry node`` leaves for its
API's port, ``$XDG_RUNTIME_DIR/ferry/api-tokens/<netns>-<port>`` (without an absolute
``XDG_RUNTIME_DIR``, ``api-tokens/`` under the default data directory); else the default data
directory's ``api-token`` (``$XDG_DATA_HOME/ferry``, else ``~/.local/share/ferry``).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

#: Where a node's API listens unless told otherwise.
DEFAULT_API = "127.0.0.1:4550"
#: The environment variable naming the API's address.
API_ENV = "FERRY_API"
#: The environment variable holding the token (it overrides every file).
TOKEN_ENV = "FERRY_API_TOKEN"
#: The token's file name in a data directory.
TOKEN_FILE = "api-token"


def base_url(api: str | None) -> str:
    """``http://host:port`` for ``api`` (``host:port`` or a URL), ``FERRY_API`` or the
    default."""
    text = (api or os.environ.get(API_ENV) or DEFAULT_API).strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an API address: {api!r} (give host:port or http://host:port)")
    return f"{parts.scheme}://{parts.netloc}"


def _absolute(name: str) -> Path | None:
    value = os.environ.get(name)
    if value and os.path.isabs(value):
        return Path(value)
    return None


def default_data_dir() -> Path | None:
    """The data directory of a node started without ``--data-dir``."""
    xdg = _absolute("XDG_DATA_HOME")
    if xdg is not None:
        return xdg / "ferry"
    home = _absolute("HOME")
    return home / ".local" / "share" / "ferry" if home is not None else None


def _copies_dir() -> Path | None:
    runtime = _absolute("XDG_RUNTIME_DIR")
    if runtime is not None:
        return runtime / "ferry" / "api-tokens"
    data = default_data_dir()
    return data / "api-tokens" if data is not None else None


def _netns() -> str:
    """The network namespace's inode number, as ``ferry node`` names its copy; 0 if unknown."""
    try:
        link = os.readlink("/proc/self/ns/net")
    except OSError:
        return "0"
    inner = link.partition("[")[2].partition("]")[0]
    return inner if inner.isdigit() else "0"


def find_token(url: str) -> str | None:
    """The token for the API at ``url`` (``http://host:port``), if one is found."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    candidates: list[Path] = []
    port = urlsplit(url).port
    copies = _copies_dir()
    if port is not None and copies is not None:
        candidates.append(copies / f"{_netns()}-{port}")
    data = default_data_dir()
    if data is not None:
        candidates.append(data / TOKEN_FILE)
    for path in candidates:
        try:
            token = path.read_text().strip()
        except OSError:
            continue
        if token:
            return token
    return None
