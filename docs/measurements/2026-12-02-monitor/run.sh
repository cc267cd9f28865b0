#!/bin/bash
# The monitor's cost, second pass: every monitor side by side (bench/monitor_overhead.sh, 90 s),
# with main's binary (d64cab1) as base; beside it, per-thread CPU of the new and the base
# binary at 1 s and 100 ms (bench/threads.py), the new binary linked without the function
# order (RSS of the order alone), and the mappings of the new binary and of the poller
# (smaps, where the resident memory is).
# Run from the repository root on the GPU machine, binaries in devbin/ (or BIN=dir):
#   OUT=dir bash docs/measurements/2026-12-02-monitor/run.sh
set -u
export TERM=xterm-256color LANG=C.UTF-8
bin=${BIN:-$PWD/devbin}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; uname -r; id -u; ls /proc | grep -c '^[0-9]'; } > $OUT/env.txt 2>&1
( sleep 20
  for iv in 1s 100ms; do
    python3 bench/threads.py 60 5 $bin/gpumon-new --interval $iv > $OUT/threads_new_$iv.txt 2>&1 &
    python3 bench/threads.py 60 5 $bin/gpumon-base --interval $iv > $OUT/threads_base_$iv.txt 2>&1 &
  done
  python3 bench/ptyrun.py 60 --size 120x40 --warm 5 -- $bin/gpumon-noorder --interval 100ms > $OUT/noorder_100ms.txt 2>&1 &
  sleep 40
  for p in $(pgrep -f "^$bin/gpumon-new --interval 100ms" | head -1) $(pgrep -f "^/tmp/nvml_poll 100$" | head -1); do
    { cat /proc/$p/cmdline | tr '\0' ' '; echo; grep -E 'VmHWM|VmRSS|RssAnon|RssFile|Threads' /proc/$p/status; cat /proc/$p/smaps; } > $OUT/smaps_$p.txt 2>&1
  done
  wait ) &
GPUMON=$bin/gpumon-new GPUMON_BASE=$bin/gpumon-base HOLD=$PWD/scripts/gpu/hold.py bash bench/monitor_overhead.sh 90 > $OUT/monitor_overhead_90s.txt 2>&1
wait
ls /proc | grep -c '^[0-9]' >> $OUT/env.txt
cat $OUT/env.txt $OUT/monitor_overhead_90s.txt $OUT/noorder_100ms.txt; for f in $OUT/threads_*; do echo "== $f"; cat $f; done
for f in $OUT/smaps_*; do echo "== $f"; head -8 $f; done
