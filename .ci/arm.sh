#!/usr/bin/env bash
# Proves the ARM build works: builds `ferry` for aarch64-unknown-linux-musl (static, through
# scripts/cross-tools.sh: Zig and cargo-zigbuild), runs it under Debian's qemu-user-static as
# node bravo beside a native x86-64 node alpha on loopback, and sends a bundle and makes an RPC
# call each way, with each side's own binary as the client. Fails on anything that does not
# arrive in time. Called by .ci/run; runs alone too (`bash .ci/arm.sh`).
#
# Profile ci-cross (Cargo.toml): a clean cross build every run, so chosen for build time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cross-tools.sh
. scripts/cross-tools.sh

target=aarch64-unknown-linux-musl
target_dir=${CARGO_TARGET_DIR:-target}
# The cross build shares nothing with CI's other builds, so it keeps a target directory of its
# own between runs on one machine, as the tools are kept: the registry's crates are built for
# aarch64 once, the workspace's own crates (whose paths change with each clone) every run.
# FERRY_CROSS_TARGET_DIR overrides it (a clean one measures a first run).
cross_target_dir=${FERRY_CROSS_TARGET_DIR:-${CARGO_TARGET_DIR:-$FERRY_TOOLS/target-cross}}

if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
    cross_log "installing qemu-user-static"
    apt-get update -qq && apt-get install -y -qq qemu-user-static >/dev/null
fi

ensure_zigbuild
cross_log "building ferry for $target (profile ci-cross)"
build_start=$SECONDS
CARGO_TARGET_DIR=$cross_target_dir zigbuild "$target" --locked --profile ci-cross -p ferry
cross_log "cross build: $((SECONDS - build_start)) s"
arm_bin="$cross_target_dir/$target/ci-cross/ferry"
cross_log "building the native ferry"
cargo build --locked -p ferry
x86_bin="$target_dir/debug/ferry"

# The binary really is a static aarch64 executable (so nothing here ran the x86-64 one twice).
header=$(od -An -tx1 -j18 -N2 "$arm_bin" | tr -d ' \n')
[ "$header" = b700 ] || { echo "arm.sh: $arm_bin is not an aarch64 ELF (e_machine $header)" >&2; exit 1; }
if LC_ALL=C readelf -l "$arm_bin" 2>/dev/null | grep -q INTERP; then
    echo "arm.sh: $arm_bin asks for a dynamic loader; it must be static" >&2
    exit 1
fi

# shellcheck source=scripts/nodes.sh
. scripts/nodes.sh
nodes_workspace

arm() { qemu-aarch64-static "$arm_bin" "$@"; }
x86() { "$x86_bin" "$@"; }

# A node whose configuration serves `echo` (examples/echo.sh, run natively by either node).
# Ports are the kernel's choice; the address line the node prints tells them.
start_node() {
    local name=$1 runner=$2
    shift 2
    cat >"$work/$name.toml" <<EOF
node_id = "dtn://$name/"
data_dir = "$work/$name"

[[rpc.procedure]]
name = "echo"
params = ["text"]
exec = "$PWD/examples/echo.sh"
timeout = "60s"
EOF
    "$runner" node --config "$work/$name.toml" --no-discovery --udp "" \
        --tcpcl 127.0.0.1:0 --api 127.0.0.1:0 "$@" 2>"$work/$name.log" &
    pids+=("$!")
    wait_for 60 grep -q "running: tcpcl" "$work/$name.log" || fail "$name did not start"
}
tcpcl_of() { sed -n 's/.* running: tcpcl \([0-9.:]*\), api.*/\1/p' "$work/$1.log"; }
api_of() { sed -n 's|.*, api http://\([0-9.:]*\)\..*|\1|p' "$work/$1.log"; }

cross_log "alpha: x86-64 node; bravo: aarch64 node under qemu"
start_node alpha x86
start_node bravo arm --peer "$(tcpcl_of alpha)"
alpha_api=$(api_of alpha)
bravo_api=$(api_of bravo)
if [ -z "$alpha_api" ] || [ -z "$bravo_api" ]; then fail "no API address in the nodes' logs"; fi
x86 --version
arm --version

peered() { x86 peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 60 peered || fail "alpha never saw bravo as a peer"

cross_log "bundles both ways"
x86 send dtn://bravo/inbox "from x86-64 to aarch64" --api "$alpha_api" >/dev/null
got=$(arm recv inbox --api "$bravo_api" --timeout 60s) || fail "bravo received nothing"
[ "$got" = "from x86-64 to aarch64" ] || fail "bravo received '$got'"
arm send dtn://alpha/inbox "from aarch64 to x86-64" --api "$bravo_api" >/dev/null
got=$(x86 recv inbox --api "$alpha_api" --timeout 60s) || fail "alpha received nothing"
[ "$got" = "from aarch64 to x86-64" ] || fail "alpha received '$got'"

cross_log "calls both ways"
got=$(x86 call dtn://bravo/ echo "x86-64 calls aarch64" --api "$alpha_api" --quiet \
    --deadline 120s) || fail "alpha's call to bravo failed"
[ "$got" = "x86-64 calls aarch64" ] || fail "alpha's call returned '$got'"
got=$(arm call dtn://alpha/ echo "aarch64 calls x86-64" --api "$bravo_api" --quiet \
    --deadline 120s) || fail "bravo's call to alpha failed"
[ "$got" = "aarch64 calls x86-64" ] || fail "bravo's call returned '$got'"

cross_log "ARM build under qemu: bundles and calls both ways arrived"
