#!/usr/bin/env bash
# Builds the Debian package of `ferry` with cargo-deb (metadata: [package.metadata.deb] in
# crates/ferry/Cargo.toml), installing cargo-deb when it is missing:
#
#     scripts/deb.sh                                     # this machine's target, profile dist
#     scripts/deb.sh --target aarch64-unknown-linux-musl # a static arm64 package (cargo-zigbuild)
#     FERRY_DEB_PROFILE=dev scripts/deb.sh               # what CI's package test packages
#
# Prints the path of the .deb on its last line. The binary is built first, then the man page
# and completions are generated from it (by the binary itself where it runs here, else by a host
# build), then cargo-deb packages them without building again.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cross-tools.sh
. scripts/cross-tools.sh

profile=${FERRY_DEB_PROFILE:-dist}
target=
if [ "${1:-}" = --target ]; then
    target=${2:?--target needs a target}
fi
target_dir=${CARGO_TARGET_DIR:-target}
# Cargo's output directory of the profile.
profile_dir=$profile
[ "$profile" != dev ] || profile_dir=debug

ensure_cargo_deb
if [ -n "$target" ]; then
    ensure_zigbuild
    cross_log "building ferry for $target (profile $profile)"
    zigbuild "$target" --locked --profile "$profile" -p ferry
    out_dir="$target_dir/$target/$profile_dir"
else
    cross_log "building ferry (profile $profile)"
    cargo build --locked --profile "$profile" -p ferry
    out_dir="$target_dir/$profile_dir"
fi

# A binary that runs here, to generate the man page and completions from its clap definitions.
generator="$out_dir/ferry"
if ! "$generator" --version >/dev/null 2>&1; then
    # The clap definitions are the same in any profile: the quickest build does.
    cargo build --locked -p ferry
    generator="$target_dir/debug/ferry"
fi
mkdir -p "$out_dir/generated"
"$generator" manpage | gzip -n -9 >"$out_dir/generated/ferry.1.gz"
"$generator" completions bash >"$out_dir/generated/ferry.bash"
"$generator" completions zsh >"$out_dir/generated/_ferry"
"$generator" completions fish >"$out_dir/generated/ferry.fish"

args=(-p ferry --no-build --profile "$profile" --output "$target_dir/debian/")
[ -z "$target" ] || args+=(--target "$target")
cross_log "packaging"
cargo deb "${args[@]}" | tail -n 1
