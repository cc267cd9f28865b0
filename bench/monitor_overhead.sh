#!/usr/bin/env bash
# Side-by-side monitor cost on the GPU machine, one call: gpumon (1 s and 10 ms sampling),
# nvtop and nvitop (1 s refresh), all four at once for 60 s, each in its own 120x40
# pseudo-terminal, watching the same GPU and processes. Reports CPU % of one core (user+system
# of the monitor process) and peak RSS (VmHWM) via bench/ptyrun.py.
# usage: bench/monitor_overhead.sh [SECONDS]   (needs peers/ from ../shared/peers/fetch-peers.sh)
set -euo pipefail
secs=${1:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
gpumon=$here/target/release/gpumon
nv=/tmp/nv; mkdir -p $nv /tmp/site
for f in "$here"/peers/deb/*.deb; do dpkg -x "$f" $nv; done
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$here"/peers/whl/*.whl 2>/dev/null || true
python3 "$here/scripts/gpu/hold.py" 8 $((secs + 40)) bench >/dev/null &
holder=$!
sleep 8
export TERM=xterm-256color LANG=C.UTF-8
run() { python3 "$here/bench/ptyrun.py" "$secs" --size 120x40 -- "$@"; }
echo "date: $(date -u +%F) host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
tmp=$(mktemp -d)
run "$gpumon" --interval 1s > $tmp/1 &
run env LD_LIBRARY_PATH=$nv/usr/lib/x86_64-linux-gnu:$nv/lib/x86_64-linux-gnu $nv/usr/bin/nvtop -d 10 > $tmp/2 &
run env PYTHONPATH=/tmp/site python3 -m nvitop --interval 1 > $tmp/3 &
run "$gpumon" --interval 10ms > $tmp/4 &
wait $(jobs -p | grep -v "^$holder$") 2>/dev/null
cat $tmp/1 $tmp/2 $tmp/3 $tmp/4
kill $holder 2>/dev/null || true
