# shellcheck shell=bash
# Sourced by scripts/dist.sh, .ci/arm.sh and .ci/package.sh: installs the cross-build tools when
# they are missing, from the registries only. Zig (the `ziglang` wheel from PyPI) is the C
# compiler and linker for the musl targets, so the C the workspace carries (SQLite, bundled by
# libsqlite3-sys; ring's assembly and C) cross-compiles without a cross gcc; cargo-zigbuild
# (crates.io) drives it. Tools go into $FERRY_TOOLS (default ~/.cache/ferry-tools), as CI's
# dtnd does.

FERRY_TOOLS=${FERRY_TOOLS:-$HOME/.cache/ferry-tools}
# Pinned so that a release is rebuilt with the same tools.
ZIGLANG_VERSION=0.17.1
CARGO_ZIGBUILD_VERSION=0.24.1
CARGO_DEB_VERSION=3.8.0

cross_log() { printf '==> %s\n' "$*" >&2; }

# Puts cargo-zigbuild on PATH and makes sure it finds zig (cargo-zigbuild runs
# `python3 -m ziglang` when no `zig` is on PATH).
ensure_zigbuild() {
    if ! command -v zig >/dev/null 2>&1 && ! python3 -m ziglang version >/dev/null 2>&1; then
        cross_log "installing zig (ziglang $ZIGLANG_VERSION from PyPI)"
        python3 -m pip install --quiet "ziglang==$ZIGLANG_VERSION" ||
            python3 -m pip install --quiet --break-system-packages "ziglang==$ZIGLANG_VERSION"
    fi
    local root="$FERRY_TOOLS/cargo-zigbuild-$CARGO_ZIGBUILD_VERSION"
    if [ ! -x "$root/bin/cargo-zigbuild" ]; then
        cross_log "installing cargo-zigbuild $CARGO_ZIGBUILD_VERSION into $root"
        cargo install cargo-zigbuild --version "$CARGO_ZIGBUILD_VERSION" --locked --root "$root"
    fi
    export PATH="$root/bin:$PATH"
}

# Puts cargo-deb on PATH.
ensure_cargo_deb() {
    local root="$FERRY_TOOLS/cargo-deb-$CARGO_DEB_VERSION"
    if [ ! -x "$root/bin/cargo-deb" ]; then
        cross_log "installing cargo-deb $CARGO_DEB_VERSION into $root"
        cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked --root "$root"
    fi
    export PATH="$root/bin:$PATH"
}

# Adds the standard library of target $1 to the pinned toolchain. Where rustup has none for this
# toolchain (1.95.0 ships no armv7-unknown-linux-musleabihf std), std is built from the
# toolchain's own rust-src instead: sets BUILD_STD_ARGS to the cargo arguments that do that
# (RUSTC_BOOTSTRAP lets the pinned stable compiler take -Zbuild-std), else to nothing.
ensure_target() {
    local target=$1
    BUILD_STD_ARGS=()
    if rustup target list --installed | grep -qx "$target"; then
        return
    fi
    if rustup target add "$target" >&2; then
        return
    fi
    cross_log "rustup has no standard library for $target: building it from rust-src"
    rustup component add rust-src >&2
    BUILD_STD_ARGS=("-Zbuild-std=std,panic_abort")
}

# Runs `cargo zigbuild` for target $1 with the rest of the arguments (those of one package with
# one binary), building std from source where ensure_target said so. Without rustup's std there
# are no self-contained musl start files and libc in the sysroot either: the final link then
# takes Zig's (-C link-self-contained=no, given to that link alone through `cargo rustc`, so the
# dependencies' builds do not change).
zigbuild() {
    local target=$1
    shift
    ensure_target "$target"
    if [ ${#BUILD_STD_ARGS[@]} -gt 0 ]; then
        RUSTC_BOOTSTRAP=1 cargo-zigbuild rustc --target "$target" "${BUILD_STD_ARGS[@]}" "$@" \
            -- -C link-self-contained=no
    else
        cargo zigbuild --target "$target" "$@"
    fi
}
