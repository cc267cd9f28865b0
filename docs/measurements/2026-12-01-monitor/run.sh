#!/bin/bash
# The monitor's cost: the monitor side by side (monitor_overhead.sh, 90 s) with main's binary as
# base; beside it, per-thread CPU of the new binary at 1 s and 100 ms (threads.py).
cd "$(dirname "$0")"
export TERM=xterm-256color LANG=C.UTF-8
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; uname -r; id -u; ls /proc | grep -c '^[0-9]'; } > $OUT/env.txt 2>&1
( sleep 20; for iv in 1s 100ms; do python3 bench/threads.py 60 5 ./gpumon-new --interval $iv > $OUT/threads_new_$iv.txt 2>&1 & python3 bench/threads.py 60 5 ./gpumon-base --interval $iv > $OUT/threads_base_$iv.txt 2>&1 & done; wait ) &
GPUMON=$PWD/gpumon-new GPUMON_BASE=$PWD/gpumon-base HOLD=$PWD/scripts/gpu/hold.py bash bench/monitor_overhead.sh 90 > $OUT/monitor_overhead_90s.txt 2>&1
wait
ls /proc | grep -c '^[0-9]' >> $OUT/env.txt
cat $OUT/env.txt $OUT/monitor_overhead_90s.txt; for f in $OUT/threads_*; do echo "== $f"; cat $f; done
