#!/usr/bin/env bash
# Remake scripts/link-order.txt: the functions a live `gpumon watch` runs, which build.rs has
# the linker put first in the binary's code (issue 21, item 4: resident memory).
#
# 1. The release build, but with its symbols kept (RUSTFLAGS="-C strip=none", in a target
#    directory of its own), runs under valgrind's callgrind in a 120x40 pseudo-terminal
#    against the fake NVML (bench/fake_nvml.c), at 100 ms and at 1 s, SECONDS each: every
#    function it enters, in two dumps: the first WARM seconds (starting and the first
#    frames), and the rest (the loop as it runs for hours). The names must be those of the
#    real release build (`cargo build --release`), hashes included: cargo leaves RUSTFLAGS
#    out of the hashes (-C metadata) but not the arguments of `cargo rustc -- ARGS` nor a
#    changed profile (CARGO_PROFILE_RELEASE_STRIP). The list made by `cargo rustc --bin
#    gpumon -- -C strip=none` matched 290 of its 1,084 names in the release build: only
#    functions of the dependencies were ordered (`--check` counts them; rustc 1.95, cargo
#    1.95).
# 2. Those of them that are functions of the binary are the list: first, sorted, those the
#    running loop entered; then, sorted, those only starting entered. Starting's code then
#    lies in pages of its own, which `runner::startup_pages` gives back once the first frame
#    is drawn and which nothing faults in again (the kernel maps 64 KiB around a touched
#    page, so code of both kinds mixed kept nearly all of it resident).
# 3. A release build again, with the list.
# Needs valgrind, gcc and python3; about 10 minutes on 2 cores (the first run builds the
# dependencies once more, for target/link-order). Remake it after changes that move much
# code between the watch and the rest (a new view, a new dependency, a new toolchain): a
# stale list is only less effective (build.rs).
# usage: scripts/link_order.sh [SECONDS per run, default 45] [WARM, default 8]
#        scripts/link_order.sh --check   how many of the list's names the release build has
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = --check ]; then
    GPUMON_LINK_MAP="$work/map" cargo build --release --locked
    grep -oE ':\(\.text\.[^)]*\)$' "$work/map" | sed -E 's/^:\(\.text\.(unlikely\.)?//; s/\)$//' |
        sort -u > "$work/built"
    sort -u scripts/link-order.txt > "$work/list"
    echo "link_order: $(comm -12 "$work/list" "$work/built" | wc -l) of the list's" \
        "$(wc -l < "$work/list") functions are in the release build"
    exit 0
fi
mkdir -p "$work/nvml"
gcc -O2 -shared -fPIC -o "$work/nvml/libnvidia-ml.so.1" bench/fake_nvml.c
GPUMON_NO_LINK_ORDER=1 RUSTFLAGS="-C strip=none" cargo build --release --locked \
    --target-dir target/link-order
cp target/link-order/release/gpumon "$work/gpumon-sym"
for iv in 100ms 1s; do
    LD_LIBRARY_PATH="$work/nvml" python3 - "${1:-45}" "${2:-8}" valgrind --tool=callgrind \
        --demangle=no --callgrind-out-file="$work/cg.$iv" "$work/gpumon-sym" --interval "$iv" <<'PY'
import fcntl, os, pty, select, signal, struct, subprocess, sys, termios, time
secs, warm = float(sys.argv[1]), float(sys.argv[2]); args = sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"; os.execvp(args[0], args)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
start = time.time(); dumps = [start + warm, start + secs]
while dumps:
    if time.time() >= dumps[0]:
        # Each dump holds what ran since the one before: starting, then the loop.
        subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True)
        dumps.pop(0)
        continue
    if select.select([fd], [], [], 0.2)[0]:
        try: os.read(fd, 65536)
        except OSError: break
os.kill(pid, signal.SIGTERM); os.waitpid(pid, 0)
PY
done
nm "$work/gpumon-sym" | awk '$2 ~ /[tT]/ {print $3}' | sort -u > "$work/text"
ran() { grep -hE '^c?fn=\([0-9]+\) ' "$@" | sed -E 's/^c?fn=\([0-9]+\) //' | sort -u; }
ran "$work"/cg.*.2 | comm -12 - "$work/text" > "$work/loop"
ran "$work"/cg.* | comm -12 - "$work/text" | comm -23 - "$work/loop" > "$work/start"
cat "$work/loop" "$work/start" > scripts/link-order.txt
echo "link_order: $(wc -l < "$work/loop") functions the loop ran, then $(wc -l < "$work/start")" \
    "only starting ran"
cargo build --release --locked
