#!/usr/bin/env bash
# Builds the static release archives of `ferry`, one per target, into dist/:
#
#     scripts/dist.sh                      # the three targets below
#     scripts/dist.sh aarch64-unknown-linux-musl
#
# Each dist/ferry-<version>-<target>.tar.gz holds the stripped static binary, README.md, an
# example configuration (packaging/node.toml), the systemd unit (packaging/ferry.service), shell
# completions for bash, zsh and fish and the man page ferry.1 (both generated from the binary's
# clap definitions), and SHA256SUMS of those files; dist/SHA256SUMS lists the archives.
#
# Tools come from the registries and are installed when missing (scripts/cross-tools.sh):
# rustup's targets, Zig (PyPI's `ziglang`) as the cross C compiler and linker, cargo-zigbuild.
# FERRY_DIST_PROFILE picks the cargo profile (default `dist`: fat LTO, stripped).
#
# The x86-64 binary, when built on x86-64, is laid out from a profile of a node (valgrind's
# callgrind, installed with apt-get when missing): built once with symbols, run by
# scripts/link-order.sh, then linked again by lld with the functions that starting and idling
# run placed together, so that an idle node keeps less of the binary resident
# (docs/performance.md, "Footprint"). The aarch64 binary is laid out the same way from a run
# under qemu-aarch64-static (Debian's qemu-user-static) when it is installed
# (scripts/link-order-qemu.sh); the armv7 one is not yet. FERRY_DIST_LINK_ORDER=0 skips that (a
# plain build).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cross-tools.sh
. scripts/cross-tools.sh

profile=${FERRY_DIST_PROFILE:-dist}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf)
fi
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || { echo "dist.sh: no version in Cargo.toml" >&2; exit 1; }
target_dir=${CARGO_TARGET_DIR:-target}
out=dist
mkdir -p "$out"

ensure_zigbuild

# Completions and the man page are the same for every target: generated once, by a binary that
# runs here (the x86-64 build when it is among the targets, else a debug host build).
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
host_ferry=

# The link of the ordered builds (x86-64, aarch64): by lld (Zig's linker takes no symbol order), not position-independent
# as Zig's static link already was (code for a fixed address also leaves the constant tables
# that hold pointers in the read-only data, instead of relocated data), the order file's missing
# names (code an edit removed) not warned about.
layout_args=(-C relocation-model=static -C linker=rust-lld -C linker-flavor=ld.lld
    -C link-arg=--no-warn-symbol-ordering)

ensure_valgrind() {
    command -v valgrind >/dev/null 2>&1 && return
    cross_log "installing valgrind (Debian) for the link order"
    apt-get install -y --no-install-recommends valgrind >&2 ||
        { apt-get update >&2 && apt-get install -y --no-install-recommends valgrind >&2; }
}

# Builds a binary laid out by a profile (see above): the x86-64 one profiled by callgrind, the
# aarch64 one by QEMU (scripts/link-order-qemu.sh) when qemu-aarch64-static is installed.
build_ordered() {
    local target=$1
    local bin="$target_dir/$target/$profile/ferry"
    ensure_target "$target"
    cross_log "building ferry $version for $target with symbols, to profile its link order"
    cargo-zigbuild rustc --target "$target" --locked --profile "$profile" -p ferry --bin ferry \
        -- "${layout_args[@]}" -C strip=none
    # Kept beside the binary, to see what the order was made of.
    cp "$bin" "$bin.profiled"
    case $target in
        x86_64-*) ensure_valgrind; scripts/link-order.sh "$bin.profiled" "$bin.link-order" ;;
        aarch64-*)
            # The native node bravo that the profiled one peers with.
            [ -x "$target_dir/release/ferry" ] || cargo build --release --locked -p ferry
            FOOTPRINT_NATIVE="$target_dir/release/ferry" scripts/link-order-qemu.sh \
                qemu-aarch64-static "$bin.profiled" "$bin.link-order"
            ;;
    esac
    # The order's content goes into its name: cargo relinks when the arguments change, not when
    # a file they name does (with one name, a new order would reuse the last build's link).
    local order
    order="$(realpath "$bin.link-order")-$(sha256sum "$bin.link-order" | cut -c1-16)"
    rm -f "$bin".link-order-*
    cp "$bin.link-order" "$order"
    cross_log "linking ferry $version for $target in that order"
    cargo-zigbuild rustc --target "$target" --locked --profile "$profile" -p ferry --bin ferry \
        -- "${layout_args[@]}" -C link-arg=--symbol-ordering-file="$order"
}

for target in "${targets[@]}"; do
    if [ "${FERRY_DIST_LINK_ORDER:-1}" != 0 ] && [ "$(uname -m)" = x86_64 ] &&
        { [ "$target" = x86_64-unknown-linux-musl ] ||
            { [ "$target" = aarch64-unknown-linux-musl ] &&
                command -v qemu-aarch64-static >/dev/null; }; }; then
        build_ordered "$target"
    else
        cross_log "building ferry $version for $target (profile $profile)"
        zigbuild "$target" --locked --profile "$profile" -p ferry
    fi
    bin="$target_dir/$target/$profile/ferry"
    [ -x "$bin" ] || { echo "dist.sh: $bin was not built" >&2; exit 1; }
    if [ "$target" = x86_64-unknown-linux-musl ] && [ "$(uname -m)" = x86_64 ]; then
        host_ferry=$bin
    fi
done

if [ -z "$host_ferry" ]; then
    # The clap definitions are the same in any profile: the quickest build does.
    cross_log "building a host ferry (debug) to generate completions and the man page"
    cargo build --locked -p ferry
    host_ferry="$target_dir/debug/ferry"
fi
"$host_ferry" completions bash >"$generated/ferry.bash"
"$host_ferry" completions zsh >"$generated/_ferry"
"$host_ferry" completions fish >"$generated/ferry.fish"
"$host_ferry" manpage >"$generated/ferry.1"
for f in ferry.bash _ferry ferry.fish ferry.1; do
    [ -s "$generated/$f" ] || { echo "dist.sh: $f came out empty" >&2; exit 1; }
done

for target in "${targets[@]}"; do
    name="ferry-$version-$target"
    stage="$out/$name"
    rm -rf "$stage"
    mkdir -p "$stage/completions" "$stage/man"
    install -m 0755 "$target_dir/$target/$profile/ferry" "$stage/ferry"
    install -m 0644 README.md "$stage/README.md"
    install -m 0644 packaging/node.toml "$stage/node.toml"
    install -m 0644 packaging/ferry.service "$stage/ferry.service"
    install -m 0644 "$generated/ferry.bash" "$generated/_ferry" "$generated/ferry.fish" \
        "$stage/completions/"
    install -m 0644 "$generated/ferry.1" "$stage/man/ferry.1"
    sums=$(cd "$stage" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum)
    printf '%s\n' "$sums" >"$stage/SHA256SUMS"
    # Reproducible archives: fixed order, owner and times (those of the last commit).
    mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" \
        -C "$out" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"
    rm -rf "$stage"
    size=$(stat -c %s "$target_dir/$target/$profile/ferry")
    cross_log "$out/$name.tar.gz (binary $size bytes)"
done

(cd "$out" && find . -maxdepth 1 -name 'ferry-*.tar.gz' -printf '%P\n' | LC_ALL=C sort |
    xargs sha256sum >SHA256SUMS)
cross_log "done: $(cd "$out" && ls)"
