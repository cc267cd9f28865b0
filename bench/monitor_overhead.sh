#!/usr/bin/env bash
# Side-by-side monitor cost on the GPU machine, one call: all monitors at once for SECONDS,
# each in its own 120x40 pseudo-terminal, watching the same GPU and processes:
#   gpumon at 1 s, 100 ms and 10 ms; nvtop and nvitop at 1 s (when PEERS holds them); and
#   the floor, bench/nvml_poll.c (only the NVML calls gpumon makes, at the same rates) at 1 s
#   and 100 ms, the 100 ms one twice: the two copies of one program (A/A) print the
#   measurement's noise floor. GPUMON_BASE=another gpumon binary runs it too at 1 s and
#   100 ms, for a before/after in the same run.
# Reports CPU % of one core (user+system of the monitor process) and peak RSS (VmHWM) via
# bench/ptyrun.py, then the ratios to the bare poller and to nvtop, each beside its target.
# usage: bench/monitor_overhead.sh [SECONDS]
#   GPUMON=path/to/gpumon (default target/release/gpumon), PEERS=dir from
#   ../shared/peers/fetch-peers.sh (default ./peers; skipped when absent)
set -euo pipefail
secs=${1:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
gpumon=${GPUMON:-$here/target/release/gpumon}
base=${GPUMON_BASE:-}
peers=${PEERS:-$here/peers}
hold=${HOLD:-$here/scripts/gpu/hold.py}
nv=/tmp/nv; mkdir -p $nv /tmp/site
have_peers=0
if [ -d "$peers/deb" ]; then
    have_peers=1
    for f in "$peers"/deb/*.deb; do dpkg -x "$f" $nv; done
    python3 -m pip install -q --no-index --no-deps --target /tmp/site "$peers"/whl/*.whl 2>/dev/null || true
fi
poll=/tmp/nvml_poll
gcc -O2 -o $poll "$here/bench/nvml_poll.c" -ldl
python3 "$hold" 8 $((secs + 45)) bench >/dev/null &
holder=$!
sleep 8
export TERM=xterm-256color LANG=C.UTF-8
tmp=$(mktemp -d)
run() { name=$1; shift; python3 "$here/bench/ptyrun.py" "$secs" --size 120x40 --warm 5 -- "$@" | sed "s/^RESULT/RESULT $name/" > "$tmp/$name"; }
echo "date: $(date -u +%F) host: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) secs: $secs"
run gpumon_1s "$gpumon" --interval 1s &
run gpumon_100ms "$gpumon" --interval 100ms &
run gpumon_10ms "$gpumon" --interval 10ms &
if [ -n "$base" ]; then
    run base_1s "$base" --interval 1s &
    run base_100ms "$base" --interval 100ms &
fi
if [ $have_peers = 1 ]; then
    run nvtop_1s env LD_LIBRARY_PATH=$nv/usr/lib/x86_64-linux-gnu:$nv/lib/x86_64-linux-gnu $nv/usr/bin/nvtop -d 10 &
    run nvitop_1s env PYTHONPATH=/tmp/site python3 -m nvitop --interval 1 &
fi
run poll_1s $poll 1000 &
run poll_100ms $poll 100 &
run poll_100ms_AA $poll 100 &
wait $(jobs -p | grep -v "^$holder$") 2>/dev/null || true
kill $holder 2>/dev/null || true
cat "$tmp"/*
python3 - "$tmp" <<'PY'
import re, sys, pathlib
r = {}
for f in pathlib.Path(sys.argv[1]).iterdir():
    text = f.read_text()
    m = re.search(r"cpu ([\d.]+)s .*peak_rss (\d+) kB", text)
    ns = re.search(r"sched_cpu ([\d.]+)s", text)  # per-thread on-CPU ns: finer than ticks
    if m: r[f.name] = (float(ns.group(1)) if ns else float(m.group(1)), int(m.group(2)))
def cpu(k): return r[k][0]
try:
    aa = abs(cpu("poll_100ms") - cpu("poll_100ms_AA"))
    print(f"noise floor (A/A, two nvml_poll 100 ms): {aa:.4f} s CPU")
    for who in ("gpumon", "base"):
        if f"{who}_1s" not in r:
            continue
        print(f"{who} 1 s / nvml_poll 1 s CPU: {cpu(who + '_1s') / max(cpu('poll_1s'), 1e-9):.2f} (target <= 3)")
        print(f"{who} 100 ms / nvml_poll 100 ms CPU: {cpu(who + '_100ms') / max(cpu('poll_100ms'), 1e-9):.2f} (target <= 1.5)")
        print(f"{who} 100 ms RSS - nvml_poll 100 ms RSS: {(r[who + '_100ms'][1] - r['poll_100ms'][1]) / 1024:.1f} MB (target <= 3)")
    if "nvtop_1s" in r:
        print(f"gpumon 1 s / nvtop 1 s CPU: {cpu('gpumon_1s') / max(cpu('nvtop_1s'), 1e-9):.2f} (target < 0.25)")
except KeyError as e:
    print("missing result", e)
PY
