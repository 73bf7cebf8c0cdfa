#!/usr/bin/env bash
# The Python client, clients/python (ferry-client): installed into a fresh venv as a user
# would (`pip install ./clients/python[test]`), `mypy --strict` on the package, then its pytest
# suite against real `ferry node` processes on loopback, every request the client makes
# checked against crates/daemon/openapi.yaml, and the web dashboard in headless chromium
# (tests/test_dashboard.py; screenshots in $FERRY_SCREENSHOTS, default tests/screenshots/).
# The nodes are the debug binary `cargo test` built (built here if absent). Called by .ci/run
# after the Rust tests. Measured on the 2-core CI machine with pip's cache warm: 2 min 14 s to
# 2 min 16 s in all, pytest 52 s of it (before the dashboard's tests).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

log "python client (clients/python)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "python3 is $(python3 --version 2>&1); the client needs 3.11 or later" >&2
    exit 1
}
ferry="${FERRY_BIN:-${CARGO_TARGET_DIR:-target}/debug/ferry}"
if [ ! -x "$ferry" ]; then
    cargo build -p ferry --locked
fi
ferry=$(realpath "$ferry")

venv_dir=$(mktemp -d)
trap 'rm -rf "$venv_dir"' EXIT
python3 -m venv "$venv_dir/venv"
py="$venv_dir/venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check "./clients/python[test]"

cd clients/python
log "mypy --strict (the package and its tests)"
"$py" -m mypy --strict src/ferry_client tests
log "pytest (clients/python/tests, FERRY_BIN=$ferry)"
FERRY_BIN="$ferry" "$py" -m pytest -q -p no:cacheprovider tests
