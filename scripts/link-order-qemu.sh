#!/usr/bin/env bash
# Writes the order in which the linker should lay out a foreign-architecture `ferry` (aarch64,
# armv7), found by running its node under qemu-user: what starting and idling execute first.
#
#     scripts/link-order-qemu.sh QEMU BINARY ORDER_FILE
#
# BINARY is an unstripped `ferry` for QEMU's architecture (its symbol names are the linker's).
# As in scripts/link-order.sh (callgrind, for the x86-64 build, which valgrind runs natively),
# alpha (BINARY, under QEMU) peers with bravo (target/release/ferry, or FOOTPRINT_NATIVE), bravo
# stops, and alpha idles FERRY_ORDER_IDLE seconds (20). QEMU logs each block of guest code it
# translates (`-d in_asm`), that is every block that ran, once; each block's function (the
# symbol at or below its address) goes into ORDER_FILE, in the binary's address order, with
# tokio's task completion functions (which of them run depends on races; see link-order.sh).
# scripts/dist.sh passes it to lld (--symbol-ordering-file), so that the code an idle node keeps
# mapped sits together (docs/performance.md, "Footprint").
set -euo pipefail

[ $# -eq 3 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
qemu=$1
bin=$(realpath "$2")
out=$3
native=$(realpath "${FOOTPRINT_NATIVE:-target/release/ferry}")
idle=${FERRY_ORDER_IDLE:-20}
command -v "$qemu" >/dev/null || { echo "link-order-qemu.sh: no $qemu" >&2; exit 1; }
[ -x "$native" ] || { echo "link-order-qemu.sh: no native ferry at $native" >&2; exit 1; }
[ "$(nm "$bin" 2>/dev/null | wc -l)" -gt 1000 ] ||
    { echo "link-order-qemu.sh: $bin has no symbols (stripped?)" >&2; exit 1; }

# shellcheck source=scripts/nodes.sh
. "$(dirname "$0")/nodes.sh"
nodes_workspace
# Under QEMU, translating as it goes, a node starts in seconds.
node_start_limit=120

nodes_start bravo "$native" --
bravo_pid=$pid
nodes_start alpha "$qemu" -d in_asm -D "$work/blocks.log" "$bin" -- --peer "$tcpcl"
alpha_pid=$pid
alpha_api=$api
peered() { "$native" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 60 peered || fail "alpha never saw bravo"
kill "$bravo_pid"
wait "$bravo_pid" 2>/dev/null || true
gone() { ! "$native" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 60 gone || fail "alpha still sees bravo"
sleep "$idle"
kill -TERM "$alpha_pid"
wait "$alpha_pid" 2>/dev/null || true
[ -s "$work/blocks.log" ] || fail "QEMU logged no blocks"

# The first address after each "IN:" line is a block's start, as a decimal number.
awk '/^IN:/ { want = 1; next }
    want && /^0x[0-9a-f]+:/ {
        x = 0; h = substr($1, 3, length($1) - 3)
        for (i = 1; i <= length(h); i++) x = x * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1
        printf "%.0f\n", x; want = 0 }' "$work/blocks.log" | sort -n -u >"$work/blocks"
# "address name" of each function, by address; then one pass over both sorted lists gives
# each block's function (the last symbol at or below it).
nm -n -t d "$bin" | awk 'NF == 3 && $2 ~ /^[tTwW]$/ { print $1 + 0, $3 }' >"$work/symbols"
awk 'NR == FNR { at[NR] = $1; name[NR] = $2; n = NR; next }
    { while (i < n && at[i + 1] <= $1) i++; if (i > 0 && !done[i]++) print name[i] }' \
    "$work/symbols" "$work/blocks" >"$work/ran"
{
    cat "$work/ran"
    awk '$2 ~ /^_ZN5tokio7runtime4task(3raw|7harness)/ { print $2 }' "$work/symbols"
} | awk '!seen[$0]++' >"$out"
echo "link-order-qemu.sh: $(wc -l <"$work/ran") functions ran at start and idle;" \
    "$(wc -l <"$out") names in $out" >&2
