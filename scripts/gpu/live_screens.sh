#!/usr/bin/env bash
# Live screens on a real H200 (what a person sees while runs leak, fragment and die): four
# `gpumon watch` in tmux at 40x12, 80x24, 120x40 and 200x60 beside a `gpumon record` of the
# same runs, captured before, at and after the OOMs, then a `gpumon report` of the recording.
# usage (on the GPU machine): D=.dev-live scripts/gpu/live_screens.sh   (writes $OUT/live.tgz)
#   $D/bin/gpumon (release build), $D/python (companion), scripts/gpu/corpus3/scenario3.py.
set -uo pipefail
OUT=${OUT:?set OUT}
D=$(cd "${D:-.dev-live}" && pwd)
B=$D/bin/gpumon
S=$PWD/scripts/gpu/corpus3
W=$(mktemp -d /tmp/live.XXXXXX); mkdir -m 700 $W/sock; mkdir $W/cap
export PYTHONPATH=$D/python PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPUMON_SNAPSHOT_S=2
T0=$(date +%s); say() { echo "[+$(($(date +%s) - T0))s] $*"; }
RUN_S=${RUN_S:-110}
timeout $((RUN_S + 20)) $B record -o $W/live.jsonl --format ndjson --interval 1s --socket-dir $W/sock \
    --duration ${RUN_S}s > $W/rec.log 2>&1 &
REC=$!
for sz in 40x12 80x24 120x40 200x60; do
    tmux new-session -d -s g$sz -x ${sz%x*} -y ${sz#*x} \
        "env LANG=C.UTF-8 TERM=xterm-256color GPUMON_DIR=$W/sock $B watch --socket-dir $W/sock; sleep 600"
done
sleep 1
PIDS=()
for name in frag_ownhole slow_leak_4 leak_epoch0 clean_sched clean_expandable_cap; do
    env GPUMON_DIR=$W/sock timeout -k 3 $((RUN_S - 5)) python3 $S/scenario3.py --name $name \
        --seconds $((RUN_S - 10)) > $W/$name.out 2> $W/$name.err &
    PIDS+=($!)
done
cap() { for sz in 40x12 80x24 120x40 200x60; do tmux capture-pane -p -t g$sz > $W/cap/$1_$sz.txt; \
        tmux capture-pane -e -p -t g$sz > $W/cap/$1_${sz}_ansi.txt; done; say "captured $1"; }
keys() { for sz in 40x12 80x24 120x40 200x60; do tmux send-keys -t g$sz "$@"; done; sleep 1; }
sleep 30; cap t30
keys a; cap t30_alerts; keys Escape
sleep 20; cap t50
keys Enter; cap t50_detail; keys Escape
sleep 25; cap t75
keys a; cap t75_alerts; keys Enter; cap t75_alerts_enter; keys Escape Escape
wait ${PIDS[@]}; say "runs ended"
sleep 3; cap end
keys a; cap end_alerts; keys Enter; cap end_alerts_enter; keys Escape Escape
keys s; cap end_sort1; keys s; cap end_sort2
wait $REC; say "recorder rc=$?"
for sz in 40x12 80x24 120x40 200x60; do tmux kill-session -t g$sz; done
/usr/bin/time -v $B report $W/live.jsonl -o $W/live.html > $W/report.log 2>&1; say "report rc=$?"
$B replay --headless $W/live.jsonl --alerts-jsonl $W/alerts.jsonl > $W/replay.log 2>&1
$B replay --headless $W/live.jsonl >> $W/replay.log 2>&1
for f in $W/*.err; do echo "== $(basename $f)"; tail -n 2 $f | cut -c1-200; done
cat $W/replay.log; tail -3 $W/rec.log
tar czf $OUT/live.tgz -C $W .
ls -la $OUT
