#!/bin/bash
# usage: local2.sh OUTDIR SECS COPIES NAME... : COPIES copies of each binary at 1 s and 100 ms, all at once
set -u
out=$1; secs=$2; k=$3; shift 3
mkdir -p $out
export LD_LIBRARY_PATH=/tmp/mon2nvml TERM=xterm-256color LANG=C.UTF-8
for c in $(seq $k); do for n in "$@"; do for iv in 1s 100ms; do
  python3 bench/threads.py $secs 5 target/opt/bin/$n --interval $iv > $out/threads_${n}_${iv}_$c.txt 2>&1 &
done; done; done
wait
