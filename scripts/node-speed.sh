#!/usr/bin/env bash
# Compares the speed of `ferry` binaries as nodes: two nodes of each binary on loopback, alpha
# and bravo (peered over TCPCLv4), measured in rounds that alternate the binaries, so that a
# build change (a profile, a link order) is judged against its reference in the same run.
#
#     scripts/node-speed.sh [--rounds N] BINARY...
#
# Each round and binary, a fresh pair of nodes and:
# - bulk: one bundle of FERRY_SPEED_MB MiB (64) sent through alpha's API to bravo's inbox; from
#   the send until it waits in bravo's inbox; MB/s.
# - ping: FERRY_SPEED_PINGS (200) sequential `ferry ping`s alpha→bravo's echo, 10 ms apart;
#   the p50 round trip.
# - calls: FERRY_SPEED_CALLS (50) sequential `ferry call dtn://bravo/ echo` (each its own CLI
#   process, waiting for the result; bravo runs /bin/echo for each); ms per call.
# For each part also the CPU time the two node processes spent on it (utime + stime from
# /proc), per item: the figure least moved by the host's load. Ends with each binary's median
# over the rounds.
set -euo pipefail

rounds=3
if [ "${1:-}" = --rounds ]; then rounds=$2; shift 2; fi
[ $# -ge 1 ] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
mb=${FERRY_SPEED_MB:-64}
pings=${FERRY_SPEED_PINGS:-200}
calls=${FERRY_SPEED_CALLS:-50}

# shellcheck source=scripts/nodes.sh
. "$(dirname "$0")/nodes.sh"
nodes_workspace
# The procedure the calls call: /bin/echo, as a process per call.
node_config_extra=$(printf '[[rpc.procedure]]\nname = "echo"\nparams = ["text"]\nexec = "/bin/echo"\n')

now_ms() { date +%s%3N; }
# CPU milliseconds (user + system) of the processes given.
cpu_ms() {
    local t=0 pid
    for pid in "$@"; do
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$pid/stat")))
    done
    echo $((t * 1000 / $(getconf CLK_TCK)))
}


head -c $((mb << 20)) /dev/urandom >"$work/bulk"
echo "node-speed.sh on $(uname -m), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ): $rounds rounds;" \
    "bulk $mb MiB, $pings pings, $calls calls"
printf '%-5s %-50s %9s %9s %10s %9s %10s %9s\n' round binary "bulk MB/s" "cpu ms" \
    "ping p50" "cpu ms" "ms/call" "cpu ms"
results=$work/results
for round in $(seq "$rounds"); do
    for bin in "$@"; do
        rm -rf "${work:?}"/alpha* "${work:?}"/bravo*
        nodes_start bravo "$bin" --
        bravo_pid=$pid bravo_api=$api
        nodes_start alpha "$bin" -- --peer "$tcpcl"
        alpha_pid=$pid alpha_api=$api
        peered() { "$bin" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
        wait_for 30 peered || fail "alpha never saw bravo"

        holds() { "$bin" status --api "$bravo_api" --json | grep -q '"inbox_bundles": 1\b'; }
        c0=$(cpu_ms "$alpha_pid" "$bravo_pid") t0=$(now_ms)
        "$bin" send dtn://bravo/inbox --file "$work/bulk" --api "$alpha_api" >/dev/null
        wait_for 120 holds || fail "bravo never held the bulk bundle"
        t1=$(now_ms) c1=$(cpu_ms "$alpha_pid" "$bravo_pid")
        bulk_rate=$(awk -v b=$((mb << 20)) -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", b / ms / 1000 }')
        bulk_cpu=$((c1 - c0))

        c0=$(cpu_ms "$alpha_pid" "$bravo_pid")
        p50=$("$bin" ping dtn://bravo/ -c "$pings" -i 10ms --api "$alpha_api" |
            sed -n 's|^rtt min/avg/p50/max = [^/]*/[^/]*/\([^/]*\)/.*|\1|p')
        [ -n "$p50" ] || fail "ping gave no round trips"
        c1=$(cpu_ms "$alpha_pid" "$bravo_pid")
        ping_cpu=$(awk -v c=$((c1 - c0)) -v n="$pings" 'BEGIN { printf "%.3f", c / n }')

        c0=$(cpu_ms "$alpha_pid" "$bravo_pid") t0=$(now_ms)
        for _ in $(seq "$calls"); do
            "$bin" call dtn://bravo/ echo speed --api "$alpha_api" >/dev/null 2>&1
        done
        t1=$(now_ms) c1=$(cpu_ms "$alpha_pid" "$bravo_pid")
        call_ms=$(awk -v ms=$((t1 - t0)) -v n="$calls" 'BEGIN { printf "%.1f", ms / n }')
        call_cpu=$(awk -v c=$((c1 - c0)) -v n="$calls" 'BEGIN { printf "%.2f", c / n }')

        printf '%-5s %-50s %9s %9s %10s %9s %10s %9s\n' "$round" "$bin" "$bulk_rate" \
            "$bulk_cpu" "$p50" "$ping_cpu" "$call_ms" "$call_cpu"
        echo "$bin $bulk_rate $bulk_cpu $p50 $ping_cpu $call_ms $call_cpu" >>"$results"
        kill "$alpha_pid" "$bravo_pid"
        wait "$alpha_pid" "$bravo_pid" 2>/dev/null || true
    done
done
echo "medians:"
for bin in "$@"; do
    line=$bin
    for col in 2 3 4 5 6 7; do
        line+=" $(awk -v b="$bin" -v c="$col" '$1 == b { print $c }' "$results" | sort -g |
            awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
    done
    # shellcheck disable=SC2086 # the figures are words
    printf '%-5s %-50s %9s %9s %10s %9s %10s %9s\n' "" $line
done
