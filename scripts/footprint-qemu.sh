#!/usr/bin/env bash
# Where an idle `ferry node` of another architecture keeps its binary's pages, run under
# qemu-user on this machine (for the aarch64 and armv7 release builds, which no device here runs
# natively):
#
#     scripts/footprint-qemu.sh qemu-aarch64-static target/aarch64-unknown-linux-musl/dist/ferry
#
# alpha (the foreign build, under QEMU) peers with bravo (target/release/ferry, or
# FOOTPRINT_NATIVE), bravo stops, alpha idles FOOTPRINT_SETTLE seconds (5); then alpha's
# /proc/PID/smaps is split into the guest binary's resident pages (what the binary's layout
# decides, comparable with RssFile of a native node: qemu-user maps the guest's segments from the
# file and its translator reads the code the guest runs) and QEMU's own memory (its translation
# cache, heap and binary), which a device would not have. The guest's own heap cannot be told
# apart from QEMU's anonymous memory and is not reported.
set -euo pipefail

[ $# -eq 2 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
qemu=$1
guest=$(realpath "$2")
native=$(realpath "${FOOTPRINT_NATIVE:-target/release/ferry}")
settle=${FOOTPRINT_SETTLE:-5}
command -v "$qemu" >/dev/null || { echo "footprint-qemu.sh: no $qemu" >&2; exit 1; }
[ -x "$native" ] || { echo "footprint-qemu.sh: no native ferry at $native" >&2; exit 1; }

# shellcheck source=scripts/nodes.sh
. "$(dirname "$0")/nodes.sh"
nodes_workspace
# Under QEMU a node starts in seconds, not milliseconds.
node_start_limit=120

nodes_start bravo "$native" --
bravo_pid=$pid
nodes_start alpha "$qemu" "$guest" -- --peer "$tcpcl"
alpha_pid=$pid
alpha_api=$api
peered() { "$native" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 60 peered || fail "alpha never saw bravo"
kill "$bravo_pid"
wait "$bravo_pid" 2>/dev/null || true
gone() { ! "$native" peers --api "$alpha_api" --json | grep -q 'dtn://bravo/'; }
wait_for 60 gone || fail "alpha still sees bravo"
sleep "$settle"

echo "footprint-qemu.sh, $(date -u +%Y-%m-%dT%H:%MZ): $guest ($(stat -c %s "$guest") bytes)" \
    "under $qemu, idle (one known node, unreachable)"
awk -v bin="$guest" '
    /^[0-9a-f]+-[0-9a-f]+ / { name = $6; perms = $2; size = 0; next }
    /^Size:/ { size = $2 }
    /^Rss:/ {
        if (name == bin) {
            seg[perms " " size] += $2; guest += $2
        } else if (name == "" && perms ~ /x/) tcg += $2
        else qemu += $2
    }
    END {
        printf "  guest binary, resident: %.2f MiB\n", guest / 1024
        for (s in seg) { split(s, p, " "); printf "    segment %s of %.2f MiB: %.2f MiB\n", p[1], p[2] / 1024, seg[s] / 1024 }
        printf "  QEMU translation cache %.2f MiB; everything else (QEMU and the guest heap) %.2f MiB\n", tcg / 1024, qemu / 1024
    }' "/proc/$alpha_pid/smaps"
