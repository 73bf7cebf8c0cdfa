#!/usr/bin/env bash
# Proves the Debian package works: builds it (scripts/deb.sh; around the debug binary CI's tests
# built already, since what is tested here is the package, not the code), installs it with
# dpkg -i, checks what it installed, starts the node as systemd would from the installed unit
# (its User, Group, WorkingDirectory, Environment, StateDirectory, RuntimeDirectory, UMask,
# NoNewPrivileges and ExecStart, read from the unit file; systemd itself does not run in CI), and
# makes an RPC call to it from a second node, and a client call to its API as the unit's user.
# At the end the package is purged and the user it created removed. Needs root. Called by
# .ci/run; runs alone too (`bash .ci/package.sh`).
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "package.sh: needs root (dpkg -i)" >&2; exit 1; }
if dpkg -s ferry >/dev/null 2>&1; then
    echo "package.sh: a ferry package is installed already; not touching it" >&2
    exit 1
fi
target_dir=${CARGO_TARGET_DIR:-target}
log() { printf '==> %s\n' "$*" >&2; }

deb=$(FERRY_DEB_PROFILE=dev scripts/deb.sh | tail -n 1)
[ -f "$deb" ] || { echo "package.sh: scripts/deb.sh made no package ('$deb')" >&2; exit 1; }
log "built $deb"
cargo build --locked -p ferry
client=$(realpath "$target_dir/debug/ferry")

work=$(mktemp -d)
chmod 755 "$work"
pids=()
user_existed=$(getent passwd ferry >/dev/null && echo yes || echo no)
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    dpkg --purge ferry >/dev/null 2>&1 || true
    if [ "$user_existed" = no ] && getent passwd ferry >/dev/null; then
        userdel ferry 2>/dev/null || true
    fi
    rm -rf "$work" /run/ferry
}
trap cleanup EXIT

# shellcheck source=scripts/nodes.sh
. scripts/nodes.sh

log "dpkg -i"
dpkg -i "$deb"
for f in /usr/bin/ferry /etc/ferry/node.toml /lib/systemd/system/ferry.service \
    /usr/share/man/man1/ferry.1.gz /usr/share/bash-completion/completions/ferry; do
    [ -s "$f" ] || fail "the package did not install $f"
done
grep -qx /etc/ferry/node.toml /var/lib/dpkg/info/ferry.conffiles ||
    fail "/etc/ferry/node.toml is not a conffile"
getent passwd ferry >/dev/null || fail "postinst created no user ferry"
/usr/bin/ferry --version
if command -v systemd-analyze >/dev/null 2>&1; then
    systemd-analyze verify /lib/systemd/system/ferry.service || fail "systemd-analyze verify"
fi

# What the unit says (last value of each key, as systemd takes it; Environment= accumulates).
unit=/lib/systemd/system/ferry.service
key() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
user=$(key User)
group=$(key Group)
exec_start=$(key ExecStart)
work_dir=$(key WorkingDirectory)
state_dir=/var/lib/$(key StateDirectory)
runtime_dir=/run/$(key RuntimeDirectory)
umask_value=$(key UMask)
mapfile -t environment < <(sed -n 's/^Environment=//p' "$unit")
[ "$(key NoNewPrivileges)" = yes ] || fail "the unit does not set NoNewPrivileges=yes"
[ "$(key ProtectSystem)" = strict ] || fail "the unit does not set ProtectSystem=strict"
case "$exec_start" in
*[\"\'\$\\]*) fail "ExecStart has quoting or variables this script does not expand: $exec_start" ;;
esac
if [ -z "$user" ] || [ -z "$exec_start" ] || [ "$state_dir" = /var/lib/ ]; then
    fail "the unit names no User, ExecStart or StateDirectory"
fi

# The administrator's edit of the conffile: this node stays on loopback in CI (ports of the
# kernel's choosing, no discovery beacons), gets a name, and serves one procedure.
sed -i -e 's/^listen = \["0.0.0.0:4556"\]/listen = ["127.0.0.1:0"]/' \
    -e 's/^listen = "0.0.0.0:4556"/listen = ""/' \
    -e 's/^listen = "127.0.0.1:4550"/listen = "127.0.0.1:0"/' \
    -e 's/^enabled = true/enabled = false/' \
    -e 's|^# node_id = .*|node_id = "dtn://packaged/"|' /etc/ferry/node.toml
cat >>/etc/ferry/node.toml <<'EOF'

[[rpc.procedure]]
name = "echo"
params = ["text"]
exec = "/bin/echo"
EOF
if ! grep -q '127.0.0.1:0' /etc/ferry/node.toml || ! grep -q 'enabled = false' /etc/ferry/node.toml ||
    grep -q '0\.0\.0\.0' /etc/ferry/node.toml; then
    fail "could not point the packaged configuration at loopback"
fi

# What systemd does before ExecStart: the directories, then the process as the user, in the
# working directory, with the unit's environment alone, its umask and no new privileges.
install -d -o "$user" -g "$group" -m "$(key StateDirectoryMode)" "$state_dir"
install -d -o "$user" -g "$group" -m "$(key RuntimeDirectoryMode)" "$runtime_dir"
log "starting the service's command as $user: $exec_start"
# shellcheck disable=SC2016,SC2086 # $1.. are sh's; ExecStart is split into words, as systemd does (no quotes, checked).
setpriv --reuid "$user" --regid "$group" --init-groups --no-new-privs \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${environment[@]}" \
    sh -c 'cd "$1" && umask "$2" && shift 2 && exec "$@"' sh "$work_dir" "$umask_value" \
    $exec_start 2>"$work/service.log" &
pids+=("$!")
wait_for 60 grep -q "running: tcpcl" "$work/service.log" || fail "the service did not start"
service_tcpcl=$(sed -n 's/.* running: tcpcl \([0-9.:]*\), api.*/\1/p' "$work/service.log")
service_api=$(sed -n 's|.*, api http://\([0-9.:]*\)\..*|\1|p' "$work/service.log")
if [ -z "$service_tcpcl" ] || [ -z "$service_api" ]; then fail "no addresses in the service's log"; fi
[ -s "$state_dir/identity" ] || fail "the service wrote no identity into $state_dir"
[ "$(stat -c %U "$state_dir/store.db")" = "$user" ] || fail "the store is not the user's"

log "a client call to its API as $user, finding the token where the unit leaves it"
status=$(setpriv --reuid "$user" --regid "$group" --init-groups \
    env -i PATH=/usr/bin:/bin "${environment[@]}" \
    /usr/bin/ferry status --api "$service_api" --json) || fail "ferry status as $user failed"
grep -q 'dtn://packaged/' <<<"$status" || fail "ferry status answered $status"

log "an RPC call to the service from another node"
cat >"$work/caller.toml" <<EOF
node_id = "dtn://caller/"
data_dir = "$work/caller"
EOF
XDG_RUNTIME_DIR="$work" XDG_CONFIG_HOME="$work" "$client" node --config "$work/caller.toml" \
    --no-discovery --udp "" --tcpcl 127.0.0.1:0 --api 127.0.0.1:0 --peer "$service_tcpcl" \
    2>"$work/caller.log" &
pids+=("$!")
wait_for 60 grep -q "running: tcpcl" "$work/caller.log" || fail "the caller did not start"
caller_api=$(sed -n 's|.*, api http://\([0-9.:]*\)\..*|\1|p' "$work/caller.log")
peered() { XDG_RUNTIME_DIR="$work" "$client" peers --api "$caller_api" --json | grep -q packaged; }
wait_for 60 peered || fail "the caller never saw the service as a peer"
got=$(XDG_RUNTIME_DIR="$work" "$client" call dtn://packaged/ echo "hello, service" \
    --api "$caller_api" --quiet --deadline 60s) || fail "the call to the service failed"
[ "$got" = "hello, service" ] || fail "the call returned '$got'"

log "the packaged node answered; purging the package"
