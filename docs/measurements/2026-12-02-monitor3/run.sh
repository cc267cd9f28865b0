#!/bin/bash
# The monitor's cost, third pass, on the GPU machine: two rounds, each every monitor side by side
# (bench/monitor_overhead.sh, 90 s: gpumon new and base at 1 s and 100 ms, gpumon at 10 ms,
# the bare poller at 1 s and twice at 100 ms for the A/A floor) and, beside it, each
# thread's CPU of the new and the base binary at 1 s and 100 ms (bench/threads.py, 60 s).
# Round 1 also takes what is resident of gpumon-new at 100 ms and of the poller
# (bench/resident.py, /proc/PID/smaps). Binaries in BIN (default target/devbin):
# gpumon-new, gpumon-base (and gpumon-new.map, rust-lld's map of its link, for the
# sections and symbols of its resident blocks). From the repository root:  OUT=dir bash .../run.sh
# ROUNDS="copied evicted" (the default "1 2"): a round named `evicted` first drops the
# binaries from the page cache (POSIX_FADV_DONTNEED), so they are read back as after a
# reboot; otherwise they are as copied in (pages from the write). The kernel maps a whole
# page-cache folio on a fault, and folios made by a write and by read-ahead differ in size,
# so the binaries' resident pages differ between the two.
set -u
export TERM=xterm-256color LANG=C.UTF-8
bin=${BIN:-$PWD/target/devbin}
out=${OUT:?OUT is the output directory}
res=$out/${NAME:-monitor3}; mkdir -p $res
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; uname -r; id -u
  echo "processes $(ls /proc | grep -c '^[0-9]') owners $(ps -eo uid= | sort -u | wc -l)"
  ldd --version | head -1; } > $res/env.txt 2>&1
for round in ${ROUNDS:-1 2}; do
  if [ $round = evicted ]; then python3 -c 'import os,sys
for p in sys.argv[1:]:
    fd=os.open(p,os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)' $bin/gpumon-new $bin/gpumon-base; fi
  ( sleep 20
    for iv in 1s 100ms; do
      python3 bench/threads.py 60 5 $bin/gpumon-new --interval $iv > $res/r$round-threads_new_$iv.txt 2>&1 &
      python3 bench/threads.py 60 5 $bin/gpumon-base --interval $iv > $res/r$round-threads_base_$iv.txt 2>&1 &
    done
    sleep 40
    if [ $round = 1 ] || [ $round = evicted ]; then
      p=$(pgrep -f "^$bin/gpumon-new --interval 100ms" | head -1)
      q=$(pgrep -f "^/tmp/nvml_poll 100$" | head -1)
      map=(); [ -f $bin/gpumon-new.map ] && map=(--map gpumon-new=$bin/gpumon-new.map --folios gpumon-new)
      python3 bench/resident.py $p "${map[@]}" > $res/r$round-resident_new_100ms.txt 2>&1
      python3 bench/resident.py $q > $res/r$round-resident_poll_100ms.txt 2>&1
      for x in $p $q; do grep -E 'VmHWM|VmRSS|RssAnon|RssFile|Threads' /proc/$x/status > $res/status_$x.txt; cat /proc/$x/cmdline | tr '\0' ' ' >> $res/status_$x.txt; done
    fi
    wait ) &
  GPUMON=$bin/gpumon-new GPUMON_BASE=$bin/gpumon-base HOLD=$PWD/scripts/gpu/hold.py \
    bash bench/monitor_overhead.sh 90 > $res/r$round-monitor_overhead_90s.txt 2>&1
  wait
done
cat $res/env.txt
for r in ${ROUNDS:-1 2}; do echo "== round $r"; grep -vE '^RESULT' $res/r$r-monitor_overhead_90s.txt | tail -12; grep RESULT $res/r$r-monitor_overhead_90s.txt | cut -c1-160
  for f in $res/r$r-threads_*; do echo "-- $f"; cat $f; done; done
head -20 $res/r*-resident_new_100ms.txt $res/r*-resident_poll_100ms.txt
tar czf $out/${NAME:-monitor3}.tgz -C $out ${NAME:-monitor3}
