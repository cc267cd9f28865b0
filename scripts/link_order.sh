#!/usr/bin/env bash
# Remake scripts/link-order.txt: the functions a live `gpumon watch` runs, which build.rs has
# the linker put first in the binary's code (issue 21, item 4: resident memory).
#
# 1. The release build, but with its symbols kept (`cargo rustc ... -C strip=none`: the
#    profile, and so every function's name, stays that of the stripped release build; a
#    build with CARGO_PROFILE_RELEASE_STRIP=false would hash its names differently), runs
#    under valgrind's callgrind in a 120x40 pseudo-terminal against the fake NVML
#    (bench/fake_nvml.c), at 100 ms and at 1 s, SECONDS each: every function it enters.
# 2. Those of them that are functions of the binary, sorted, are the list.
# 3. A release build again, with the list (the one step 1 left in target/ is unstripped).
# Needs valgrind, gcc and python3; about 10 minutes on 2 cores. Remake it after changes that
# move much code between the watch and the rest (a new view, a new dependency, a new
# toolchain): a stale list is only less effective (build.rs).
# usage: scripts/link_order.sh [SECONDS per run, default 45]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
work=$(mktemp -d)
mkdir -p "$work/nvml"
gcc -O2 -shared -fPIC -o "$work/nvml/libnvidia-ml.so.1" bench/fake_nvml.c
GPUMON_NO_LINK_ORDER=1 cargo rustc --release --locked --bin gpumon -- -C strip=none
cp target/release/gpumon "$work/gpumon-sym"
for iv in 100ms 1s; do
    LD_LIBRARY_PATH="$work/nvml" python3 - "${1:-45}" valgrind --tool=callgrind --demangle=no \
        --callgrind-out-file="$work/cg.$iv" "$work/gpumon-sym" --interval "$iv" <<'PY'
import fcntl, os, pty, select, signal, struct, sys, termios, time
secs = float(sys.argv[1]); args = sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"; os.execvp(args[0], args)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
end = time.time() + secs
while time.time() < end:
    if select.select([fd], [], [], 0.2)[0]:
        try: os.read(fd, 65536)
        except OSError: break
os.kill(pid, signal.SIGTERM); os.waitpid(pid, 0)
PY
done
nm "$work/gpumon-sym" | awk '$2 ~ /[tT]/ {print $3}' | sort -u > "$work/text"
grep -hE '^c?fn=\([0-9]+\) ' "$work"/cg.* | sed -E 's/^c?fn=\([0-9]+\) //' | sort -u > "$work/ran"
comm -12 "$work/ran" "$work/text" > scripts/link-order.txt
echo "link_order: $(wc -l < "$work/ran") functions ran, $(wc -l < scripts/link-order.txt) of the binary"
rm -rf "$work"
cargo build --release --locked --bin gpumon
