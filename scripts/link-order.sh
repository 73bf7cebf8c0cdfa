#!/usr/bin/env bash
# Writes the order in which the linker should lay out `ferry`'s functions, found by running a
# node: what starting and idling execute first, then what carrying bundles and calls adds.
#
#     scripts/link-order.sh BINARY ORDER_FILE
#
# BINARY is an unstripped `ferry` (the profiled build; its symbol names are the linker's). The
# node runs under valgrind's callgrind in the scenario of scripts/footprint.sh: alpha (profiled)
# peers with bravo, bravo stops, alpha idles FERRY_ORDER_IDLE seconds (20); callgrind's counts
# are dumped; then alpha is given FERRY_ORDER_BUNDLES bundles (20) and FERRY_ORDER_CALLS calls
# (5) for bravo and stops. ORDER_FILE lists every function callgrind saw run (mangled symbol
# names, one a line): those of start and idle first (with tokio's task completion functions,
# see below), then the others, each group in the binary's own order. scripts/dist.sh passes it to lld (--symbol-ordering-file), so the code an
# idle node keeps mapped sits together instead of spread over the whole text segment (the
# kernel maps a binary's pages 64 KiB around each page a fault touches: docs/performance.md,
# "Footprint"). Functions not listed keep their place after the listed ones.
set -euo pipefail

[ $# -eq 2 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1
out=$2
idle=${FERRY_ORDER_IDLE:-20}
bundles=${FERRY_ORDER_BUNDLES:-20}
calls=${FERRY_ORDER_CALLS:-5}
command -v valgrind >/dev/null || { echo "link-order.sh: needs valgrind" >&2; exit 1; }
[ -x "$bin" ] || { echo "link-order.sh: $bin is not an executable" >&2; exit 1; }
[ "$(nm "$bin" 2>/dev/null | wc -l)" -gt 1000 ] ||
    { echo "link-order.sh: $bin has no symbols (stripped?)" >&2; exit 1; }
bin=$(realpath "$bin")

# shellcheck source=scripts/nodes.sh
. "$(dirname "$0")/nodes.sh"
nodes_workspace

# Under callgrind a node starts slowly.
node_start_limit=300

nodes_start bravo "$bin" --
bravo_pid=$pid
bravo_tcpcl=$tcpcl
nodes_start alpha valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.out" \
    "$bin" -- --peer "$bravo_tcpcl"
alpha_pid=$pid
alpha_api=$api
peered() { "$bin" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 120 peered || fail "alpha never saw bravo"
kill "$bravo_pid"
wait "$bravo_pid" 2>/dev/null || true
gone() { ! "$bin" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 120 gone || fail "alpha still sees bravo"
sleep "$idle"
# The first dump: start and idle (valgrind's pid is alpha's).
(cd "$work" && callgrind_control -d "$alpha_pid" >/dev/null 2>&1)

head -c 1024 /dev/zero | tr '\0' x >"$work/payload"
for _ in $(seq "$bundles"); do
    "$bin" send dtn://bravo/inbox --file "$work/payload" --api "$alpha_api" >/dev/null
done
for _ in $(seq "$calls"); do
    "$bin" call dtn://bravo/ echo waiting --detach --api "$alpha_api" >/dev/null
done
sleep 2
kill -TERM "$alpha_pid"
wait "$alpha_pid" 2>/dev/null || true
for f in "$work/cg.out.1" "$work/cg.out"; do [ -s "$f" ] || fail "callgrind wrote no $f"; done

# Each profile's functions (callgrind compresses a repeated name to its "(id)"), in the
# binary's address order within each group; a name only once.
# "name size address" of each function (assembly's symbols have no size).
nm -n -S -t d "$bin" | awk 'NF == 4 && $3 ~ /^[tTwW]$/ { print $4, $2, $1 }
    NF == 3 && $2 ~ /^[tTwW]$/ { print $3, 0, $1 }' >"$work/symbols"
# Code callgrind names by its address (assembly without a size: the thread start, .init) is
# the function of the symbol at or below that address; what valgrind calls "(below main)" is
# musl's __libc_start_main and its second stage.
resolve() {
    awk 'NR == FNR { name[NR] = $1; at[NR] = $3 + 0; n = NR; next }
        /^\(below main\)$/ { print "__libc_start_main"; print "libc_start_main_stage2"; next }
        /^0x/ {
            x = 0
            for (i = 3; i <= length($0); i++)
                x = x * 16 + index("0123456789abcdef", tolower(substr($0, i, 1))) - 1
            best = ""
            for (i = 1; i <= n && at[i] <= x; i++) best = name[i]
            if (best != "") print best
            next
        }
        { print }' "$work/symbols" -
}
ran() {
    awk '/^c?fn=\(/ {
            id = $1; sub(/^c?fn=/, "", id); name = substr($0, index($0, ")") + 2)
            if (name != "") names[id] = name
            if ($0 ~ /^fn=/) seen[id] = 1
        }
        END { for (id in seen) print names[id] }' "$1" | resolve
}
# Valgrind runs one thread at a time, so a race a native run takes one way goes the other way
# here: which of a tokio task's completion functions run (dealloc, drop_join_handle_slow, ...)
# depends on whether the task or its handle finishes first. A native node ran some that
# callgrind never saw, each mapping a 64 KiB window of cold code (docs/performance.md,
# "Footprint"), so those of every task type (≈60 KiB in all) join start and idle.
{
    ran "$work/cg.out.1"
    awk '$1 ~ /^_ZN5tokio7runtime4task(3raw|7harness)/ { print $1 }' "$work/symbols"
} | sort -u >"$work/idle"
ran "$work/cg.out" | sort -u | comm -23 - "$work/idle" >"$work/busy"
# "name size" of the group's functions.
pick() { awk 'NR == FNR { want[$0] = 1; next } $1 in want && !done[$1]++' "$1" "$work/symbols"; }
pick "$work/idle" >"$work/idle.sized"
pick "$work/busy" >"$work/busy.sized"
cut -d' ' -f1 "$work/idle.sized" "$work/busy.sized" >"$out"
kib() { awk '{ s += $2 } END { printf "%d functions, %.0f KiB", NR, s / 1024 }' "$1"; }
echo "link-order.sh: $(kib "$work/idle.sized") at start and idle;" \
    "$(kib "$work/busy.sized") more carrying bundles and calls; $(wc -l <"$out") names in $out" >&2
