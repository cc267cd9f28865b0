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
