#!/usr/bin/env bash
# `cargo install` gives a complete gpumon: the interposer and the demo recording travel inside
# the binary (src/embed.rs). Installs into a temporary root and uses the installed binary from
# outside the source tree, with a fresh cache.
#
# `--debug` and the workspace's target directory keep this to seconds after `cargo test`
# (a release install is fat-LTO: minutes on a small CI machine); what is checked, that the
# installed file needs nothing from the tree, does not depend on the profile.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
session="gpumon-install-check-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$work"' EXIT
start=$(date +%s)

cargo install --quiet --locked --debug --path . --root "$work/inst" --target-dir "$root/target"
bin=$work/inst/bin/gpumon

# What the installed binary asks of the system it runs on: no glibc symbol version newer than
# a plain Rust program linked here needs (the start files and the standard library take
# GLIBC_2.34 from a glibc 2.34 or newer), and no newer loader's feature (packed relocations,
# DT_RELR): such a binary would refuse to start on an older system of the same cluster. The
# interposer embedded in it is read too. Nor the system libm: a call of it (f64::exp, ln,
# powf...) keeps its pages in a watch's resident set; gpumon uses the libm crate. (The wheel is
# held to glibc 2.17:
# scripts/wheel_check.sh.) build.rs passes the linker nothing that depends on the profile
# (tests/it/packaging.rs), so this debug install is linked as a release install is.
printf 'fn main() { std::thread::spawn(|| println!("plain")).join().unwrap(); }\n' > "$work/plain.rs"
"${RUSTC:-rustc}" -O -o "$work/plain" "$work/plain.rs"
python3 scripts/wheel_glibc.py --elf "$bin" --baseline "$work/plain"
cd "$work"
export XDG_CACHE_HOME="$work/cache" HOME="$work/home"
mkdir -p "$HOME"

# The interposer `gpumon run` preloads is a file that exists.
lib=$("$bin" run -- sh -c 'echo "$LD_PRELOAD"' | cut -d: -f1)
case "$lib" in
    "$XDG_CACHE_HOME"/gpumon/*/libgpumon_preload.so) ;;
    *) echo "install: LD_PRELOAD is '$lib', not the embedded interposer in the cache"; exit 1 ;;
esac
[ -f "$lib" ] || { echo "install: $lib does not exist"; exit 1; }
head -c 4 "$lib" | grep -q ELF || { echo "install: $lib is not a shared library"; exit 1; }

# The demo plays from the binary alone: no GPUMON_DEMO, no assets/ beside it.
unset GPUMON_DEMO
tmux new-session -d -s "$session" -x 100 -y 30 "$bin demo; sleep 30"
screen=""
for _ in $(seq 1 50); do
    screen=$(tmux capture-pane -p -t "$session" || true)
    if grep -q "DEMO REPLAY" <<<"$screen"; then
        break
    fi
    sleep 0.2
done
grep -q "DEMO REPLAY" <<<"$screen" || { echo "install: demo did not play:"; echo "$screen"; exit 1; }
echo "install check: ok ($(( $(date +%s) - start )) s)"
