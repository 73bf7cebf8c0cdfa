# shellcheck shell=bash
# Shared by the scripts that start `ferry node`s and wait on them (.ci/arm.sh, .ci/package.sh,
# scripts/footprint.sh): bounded waits, and failing with the nodes' logs. Sourced, not run; the
# caller keeps its nodes' logs as "$work"/*.log.

# Waits up to $1 seconds until the command after it succeeds; 1 if it never did.
wait_for() {
    local limit=$1
    shift
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# Says what failed (prefixed with the script's name), shows the end of every log in "$work",
# and exits 1.
fail() {
    echo "${0##*/}: $*" >&2
    # shellcheck disable=SC2154 # the caller's directory of logs
    for log in "$work"/*.log; do
        [ -e "$log" ] || continue
        echo "--- $log" >&2
        tail -n 30 "$log" >&2 || true
    done
    exit 1
}
