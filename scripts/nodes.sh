# shellcheck shell=bash
# Shared by the scripts that start `ferry node`s and wait on them (.ci/arm.sh, .ci/package.sh,
# scripts/footprint.sh, footprint-qemu.sh, node-speed.sh, link-order.sh): their scratch
# directory, bounded waits, and failing with the nodes' logs. Sourced, not run; the caller keeps its nodes' logs as
# "$work"/*.log.

# Makes the scratch directory "$work" for the nodes the caller starts (their process ids go in
# the array pids); on exit they are stopped and it is removed. Their API token copies land in it
# (XDG_RUNTIME_DIR), and no configuration file of the user's leaks in (XDG_CONFIG_HOME).
nodes_workspace() {
    work=$(mktemp -d)
    pids=()
    trap nodes_cleanup EXIT
    export XDG_RUNTIME_DIR="$work" XDG_CONFIG_HOME="$work"
}

nodes_cleanup() {
    # A node started through a shell function (.ci/arm.sh's runners) is the child of the
    # subshell whose pid was kept: the children are stopped first, or they outlive the script.
    for pid in "${pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}

# Starts a node named $1 on loopback, run by the words up to `--` (the binary, or a wrapper such
# as valgrind and the binary) with the node arguments after it, in "$work" (configuration
# "$work/$1.toml", ending with "$node_config_extra" if set; data "$work/$1"; log "$work/$1.log").
# Waits up to "$node_start_limit" seconds (30) for it; sets pid, api and tcpcl.
nodes_start() {
    local name=$1
    shift
    local run=()
    while [ "$1" != -- ]; do
        run+=("$1")
        shift
    done
    shift
    # The node runs in "$work": a relative path to the binary would not lead there.
    if [[ ${run[0]} == */* ]]; then run[0]=$(realpath "${run[0]}"); fi
    mkdir -p "$work/$name"
    printf 'node_id = "dtn://%s/"\ndata_dir = "%s"\n%s' "$name" "$work/$name" \
        "${node_config_extra:-}" >"$work/$name.toml"
    (cd "$work" && exec "${run[@]}" node --config "$work/$name.toml" --no-discovery --udp "" \
        --tcpcl 127.0.0.1:0 --api 127.0.0.1:0 "$@" 2>"$work/$name.log") &
    pid=$!
    pids+=("$pid")
    wait_for "${node_start_limit:-30}" grep -q "running: tcpcl" "$work/$name.log" ||
        fail "$name did not start"
    # shellcheck disable=SC2034 # for the caller
    api=$(sed -n 's|.*, api http://\([0-9.:]*\)\..*|\1|p' "$work/$name.log")
    # shellcheck disable=SC2034 # for the caller
    tcpcl=$(sed -n 's/.* running: tcpcl \([0-9.:]*\), api.*/\1/p' "$work/$name.log")
}

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
