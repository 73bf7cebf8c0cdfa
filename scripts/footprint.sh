#!/usr/bin/env bash
# Measures the footprint of a `ferry` binary: its size, and the resident set of a `ferry node`
# idle and then carrying bundles and calls it cannot deliver yet.
#
#     scripts/footprint.sh target/x86_64-unknown-linux-musl/dist/ferry [more binaries...]
#
# For each binary: alpha (the node measured) and bravo start on loopback and peer; bravo stops,
# so alpha knows it but cannot reach it. Then alpha is measured idle, after BUNDLES bundles of
# SIZE bytes for bravo (each waits in alpha's store), and after CALLS calls to bravo that wait
# for bravo (`ferry call --detach`). Resident figures are /proc/PID/status: VmRSS (all resident
# pages), RssAnon (heap and stacks: what the node itself allocated), RssFile (pages of the binary
# and other mapped files), VmHWM (the peak), all in MiB. Environment: FOOTPRINT_BUNDLES (1000),
# FOOTPRINT_SIZE (1024), FOOTPRINT_CALLS (100), FOOTPRINT_SETTLE (seconds before each reading,
# 5).
set -euo pipefail

[ $# -ge 1 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bundles=${FOOTPRINT_BUNDLES:-1000}
size=${FOOTPRINT_SIZE:-1024}
calls=${FOOTPRINT_CALLS:-100}
settle=${FOOTPRINT_SETTLE:-5}

# shellcheck source=scripts/nodes.sh
. "$(dirname "$0")/nodes.sh"
nodes_workspace

kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
mb() { awk -v k="$1" 'BEGIN { printf "%.2f", k / 1024 }'; }


reading() {
    local label=$1 pid=$2
    sleep "$settle"
    printf '  %-34s VmRSS %6s MiB  RssAnon %6s  RssFile %6s  VmHWM %6s  threads %s\n' \
        "$label" "$(mb "$(kib "$pid" VmRSS)")" "$(mb "$(kib "$pid" RssAnon)")" \
        "$(mb "$(kib "$pid" RssFile)")" "$(mb "$(kib "$pid" VmHWM)")" "$(kib "$pid" Threads)"
}

echo "footprint.sh on $(uname -m), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ):" \
    "$bundles bundles of $size bytes, $calls calls"
for bin in "$@"; do
    [ -x "$bin" ] || fail "$bin is not an executable"
    rm -rf "${work:?}"/alpha* "${work:?}"/bravo*
    echo "$bin: $(stat -c %s "$bin") bytes ($(mb $(($(stat -c %s "$bin") / 1024))) MB)," \
        "$("$bin" --version)"

    nodes_start bravo "$bin" --
    bravo_pid=$pid
    nodes_start alpha "$bin" -- --peer "$tcpcl"
    alpha_pid=$pid
    alpha_api=$api
    peered() { "$bin" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
    wait_for 30 peered || fail "alpha never saw bravo"
    kill "$bravo_pid"
    wait "$bravo_pid" 2>/dev/null || true
    gone() { ! "$bin" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
    wait_for 30 gone || fail "alpha still sees bravo"

    reading "idle (one known node, unreachable)" "$alpha_pid"

    head -c "$size" /dev/zero | tr '\0' x >"$work/payload"
    for _ in $(seq "$bundles"); do
        "$bin" send dtn://bravo/inbox --file "$work/payload" --api "$alpha_api" >/dev/null
    done
    held=$("$bin" bundles --api "$alpha_api" --json | grep -o '"dtn://bravo/inbox"' | wc -l)
    [ "$held" -ge "$bundles" ] || fail "alpha holds $held bundles for bravo, not $bundles"
    reading "carrying $bundles bundles" "$alpha_pid"

    for _ in $(seq "$calls"); do
        "$bin" call dtn://bravo/ echo waiting --detach --api "$alpha_api" >/dev/null
    done
    waiting=$("$bin" calls --api "$alpha_api" --json | grep -c '"state": "waiting"' || true)
    [ "$waiting" -ge "$calls" ] || fail "alpha lists $waiting calls to bravo, not $calls"
    reading "+ $calls pending calls" "$alpha_pid"

    kill "$alpha_pid"
    wait "$alpha_pid" 2>/dev/null || true
done
