#!/bin/bash
# usage: local.sh OUTDIR SECS BIN_NAME... (binaries in target/opt/bin/NAME)
set -u
out=$1; secs=$2; shift 2
mkdir -p $out
export LD_LIBRARY_PATH=/tmp/mon2nvml TERM=xterm-256color LANG=C.UTF-8
for n in "$@"; do for iv in 1s 100ms; do
  python3 bench/threads.py $secs 5 target/opt/bin/$n --interval $iv > $out/threads_${n}_$iv.txt 2>&1 &
done; done
wait
for iv in 1s 100ms; do for n in "$@"; do printf '%-8s %-6s ' $n $iv; grep TOTAL $out/threads_${n}_$iv.txt; done; done
