#!/usr/bin/env bash
# The published crate builds offline from `cargo vendor` output, as Debian, Fedora, Nix and
# corporate mirrors build it: `cargo package` at the root (the plain command a packager
# types), the .crate unpacked, its Cargo.lock vendored, a `.cargo/config.toml` source
# replacement with `net.offline`, then `cargo check --offline --frozen` with an empty
# CARGO_HOME, so nothing can come from the registry cache or the network. build.rs runs the
# nested interposer build there too (it builds a real library even under `cargo check`), and
# the library it embeds is checked to be one.
#
# `check`, not `build`: what is proven here is that everything resolves and the build script's
# nested build succeeds from vendored sources alone; the vendored crates are the registry's
# bytes (cargo verifies their checksums), and the suite compiles and links the same sources.
# Vendored crates live at other paths than the registry's, so cargo cannot reuse the suite's
# artifacts for them: this compiles (checks) the dependency tree once more, into
# target/offline-check, kept between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
base=$root/target/offline-check
unset GPUMON_PRELOAD_SO DOCS_RS CARGO_TARGET_DIR

# --allow-dirty: the working tree is what is checked (a clean clone in CI).
cargo package --quiet --locked --no-verify --allow-dirty
ver=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
crate=$root/target/package/gpumon-$ver.crate
[ -f "$crate" ] || { echo "offline: cargo package wrote no $crate" >&2; exit 1; }
# Only gpumon: a root-level `cargo package` once packaged the interposer's crate too.
extra=$(find target/package -maxdepth 1 -name '*.crate' -newer "$crate" ! -name "gpumon-$ver.crate")
[ -z "$extra" ] || { echo "offline: cargo package at the root packaged more than gpumon: $extra" >&2; exit 1; }

rm -rf "$base/src" "$base/home"
mkdir -p "$base/src" "$base/home"
tar -xzf "$crate" -C "$base/src"
src=$base/src/gpumon-$ver
cd "$src"
# The one step that may use the network (or this machine's registry cache).
cargo vendor --quiet --locked "$base/vendor" >/dev/null
mkdir -p .cargo
cat >.cargo/config.toml <<EOF
[source.crates-io]
replace-with = "vendored-sources"

[source.vendored-sources]
directory = "$base/vendor"

[net]
offline = true
EOF
CARGO_HOME=$base/home cargo check --quiet --offline --frozen --target-dir "$base/target"
for d in registry git; do
    [ ! -e "$base/home/$d" ] || { echo "offline: the build fetched into CARGO_HOME/$d" >&2; exit 1; }
done

# The interposer the packaged build.rs built from the vendored sources (newest, in case
# earlier runs left others).
lib=$(ls -t "$base"/target/debug/build/gpumon-*/out/libgpumon_preload.so | head -1)
head -c 4 "$lib" | grep -q ELF || { echo "offline: $lib is not a shared library" >&2; exit 1; }
echo "offline check: ok (gpumon-$ver.crate, $(ls "$base/vendor" | wc -l) vendored crates, $(( $(date +%s) - start )) s)"
