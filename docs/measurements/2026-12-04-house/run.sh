#!/bin/bash
# The monitor side by side with nvtop and nvitop at a 1 s refresh, after the link order,
# packed relocations, start-up page return and fmt::fixed were dropped (docs/performance.md).
# Targets: gpumon at most 0.1x nvtop's CPU and at most nvtop's peak RSS; the ratios against
# the bare NVML poller (bench/nvml_poll.c) are reported, not targets.
#
# On the GPU machine, from the repository root, with
#   devbin/gpumon      this tree's `cargo build --release --locked` (target/release/gpumon)
#   devbin/gpumon-kit  optional: a release build of main from before the drop, run beside it
#                      at 1 s and 100 ms (what the dropped pieces were worth, same rounds)
#   peers/             /work/shared/peers/fetch-peers.sh peers (nvtop, nvitop)
# run:  bash docs/measurements/2026-12-04-house/run.sh
# Each round is bench/monitor_overhead.sh: every monitor at once, each in its own 120x40
# pseudo-terminal, watching the same card while one process holds 8 GiB; CPU is on-CPU time
# from schedstat after 5 s of warm-up, RSS is peak RSS (VmHWM). SECS per round (default 75)
# and ROUNDS (default 2) take about 3.5 minutes in all. Raw output and house.tgz go to OUT
# (default: $OUT, else /tmp/house).
set -u
cd "$(dirname "$0")/../../.."
bin=${BIN:-$PWD/devbin}
out=${OUT:-/tmp/house}
res=$out/house
secs=${SECS:-75}
rounds=${ROUNDS:-2}
mkdir -p "$res"
[ -x "$bin/gpumon" ] || { echo "run.sh: no $bin/gpumon"; exit 1; }
[ -d peers/deb ] || echo "run.sh: no peers/ (fetch-peers.sh): nvtop and nvitop will be missing"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; uname -r
  ldd --version | head -1; "$bin/gpumon" --version; sha256sum "$bin"/gpumon*; } > "$res/env.txt" 2>&1
for r in $(seq 1 "$rounds"); do
  base=()
  [ -x "$bin/gpumon-kit" ] && base=(GPUMON_BASE="$bin/gpumon-kit")
  env GPUMON="$bin/gpumon" "${base[@]}" PEERS="$PWD/peers" HOLD="$PWD/scripts/gpu/hold.py" \
    bash bench/monitor_overhead.sh "$secs" > "$res/r$r-monitor_overhead_${secs}s.txt" 2>&1
done
cat "$res/env.txt"
python3 - "$res" <<'PY' | tee "$res/summary.txt"
import pathlib, re, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob("r*-monitor_overhead_*s.txt"))
rounds = []  # per round: name -> (CPU s, peak RSS kB)
for f in runs:
    got = {}
    for line in f.read_text().splitlines():
        m = re.match(r"RESULT (\S+) .* cpu ([\d.]+)s .*peak_rss (\d+) kB", line)
        if m:
            ns = re.search(r"sched_cpu ([\d.]+)s", line)  # per-thread on-CPU ns: finer than ticks
            got[m.group(1)] = (float(ns.group(1) if ns else m.group(2)), int(m.group(3)))
    rounds.append(got)
names = ["gpumon_1s", "nvtop_1s", "nvitop_1s", "base_1s", "poll_1s",
         "gpumon_100ms", "base_100ms", "poll_100ms", "poll_100ms_AA", "gpumon_10ms"]
def col(n, i):
    return " ".join("-" if n not in r else (f"{r[n][0]:.4f}" if i == 0 else str(r[n][1])) for r in rounds)
print(f"{len(rounds)} rounds; per round: CPU s on-CPU, peak RSS kB")
for n in names:
    if any(n in r for r in rounds):
        print(f"{n:<14} CPU {col(n, 0):<30} RSS {col(n, 1)}")
def both(a, b):
    return [r for r in rounds if a in r and b in r]
def cpu_ratio(text, a, b, target=""):
    rs = both(a, b)
    if not rs:
        print(f"{text}: missing")
        return
    per = " ".join(f"{r[a][0] / r[b][0]:.3f}" for r in rs)
    pooled = sum(r[a][0] for r in rs) / sum(r[b][0] for r in rs)
    print(f"{text}: pooled {pooled:.3f}, per round {per}{target}")
def rss_diff(text, a, b, target=""):
    rs = both(a, b)
    print(f"{text}: {[r[a][1] - r[b][1] for r in rs] if rs else 'missing'}{target}")
cpu_ratio("gpumon 1 s / nvtop 1 s CPU", "gpumon_1s", "nvtop_1s", " (target <= 0.1)")
rss_diff("gpumon 1 s peak RSS - nvtop 1 s (kB)", "gpumon_1s", "nvtop_1s", " (target <= 0)")
cpu_ratio("gpumon 1 s / nvitop 1 s CPU", "gpumon_1s", "nvitop_1s")
rss_diff("gpumon 1 s peak RSS - nvitop 1 s (kB)", "gpumon_1s", "nvitop_1s")
cpu_ratio("reported: gpumon 1 s / bare poller 1 s CPU", "gpumon_1s", "poll_1s")
cpu_ratio("reported: gpumon 100 ms / bare poller 100 ms CPU", "gpumon_100ms", "poll_100ms")
rss_diff("reported: gpumon 100 ms peak RSS - bare poller 100 ms (kB)", "gpumon_100ms", "poll_100ms")
if any("base_1s" in r for r in rounds):
    cpu_ratio("gpumon 1 s / gpumon-kit 1 s CPU", "gpumon_1s", "base_1s")
    rss_diff("gpumon 1 s peak RSS - gpumon-kit 1 s (kB)", "gpumon_1s", "base_1s")
    rss_diff("gpumon 100 ms peak RSS - gpumon-kit 100 ms (kB)", "gpumon_100ms", "base_100ms")
PY
tar czf "$out/house.tgz" -C "$out" house
