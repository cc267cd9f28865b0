#!/usr/bin/env bash
# What the merged tree shows live on one H200, for the closing notes: two data-parallel jobs
# (mp.spawn with a leaking rank, torchrun with a constant extra on rank 0) and a growing
# working set that resets PyTorch's peak counter every epoch, watched by the tree's gpumon
# in tmux at 80x24 and 120x40 (captures of the overview, the alerts panel and the jobs), and
# recorded.  usage (on the GPU machine):  D=devbin scripts/gpu/final_check.sh
set -uo pipefail
OUT=${OUT:?set OUT}
R=$(pwd)
D=$(cd "${D:-devbin}" && pwd)
B=$D/gpumon
S=${S:-150}
W=$(mktemp -d /tmp/final.XXXXXX)
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPUMON_SNAPSHOT_S=2 NCCL_NVLS_ENABLE=0
mkdir -m 700 "$W/sock"; mkdir -p "$W/keep/cap"
timeout $((S + 10)) "$B" record -o "$W/keep/final.gpumon.jsonl.gz" --interval 250ms \
    --socket-dir "$W/sock" --duration "${S}s" >"$W/rec.log" 2>&1 &
REC=$!
for size in 80x24 120x40; do
    tmux new-session -d -s "live$size" -x ${size%x*} -y ${size#*x} \
        "$B --socket-dir $W/sock --interval 1s; sleep 600"
done
J=$R/scripts/gpu/jobs/job.py
run() { local name=$1; shift; env GPUMON_DIR=$W/sock PYTHONPATH=$R/python timeout -k 3 $((S - 5)) "$@" >"$W/$name.out" 2>"$W/$name.err" & }
run spawn_leak python3 "$J" --spawn 2 --epochs $((S - 30)) --port 29521 --seed 7 --leak-rank 1 --leak-mib 24 --leak-from 10
run torchrun_extra python3 -m torch.distributed.run --nproc-per-node 3 --master-port 29522 "$J" --epochs $((S - 30)) --seed 8 --extra-rank 0 --extra-mib 512
run ws_reset python3 "$R/scripts/gpu/corpus4/scenario4.py" --name v_ws_reset_peak --seconds $((S - 10))
cap() {  # name, keys before the capture (for the 120x40 pane)
    local name=$1; shift
    tmux capture-pane -p -t live80x24 >"$W/keep/cap/${name}_80x24.txt"
    for k in "$@"; do tmux send-keys -t live120x40 "$k"; sleep 0.5; done
    sleep 1; tmux capture-pane -p -t live120x40 >"$W/keep/cap/${name}_120x40.txt"
}
sleep 70; cap t70_overview; say overview
tmux send-keys -t live80x24 J; sleep 1; cap t72_jobs J; say jobs
sleep 3; cap t75_alerts Escape a; tmux send-keys -t live120x40 Escape; say alerts
sleep 40; cap t115_overview; tmux send-keys -t live120x40 a; sleep 1; cap t116_alerts; tmux send-keys -t live120x40 Escape
wait $REC; say "recorder rc=$?"
wait
tmux kill-server 2>/dev/null
for f in "$W"/*.out; do cp "$f" "$W/keep/"; done
for f in "$W"/*.err "$W/rec.log"; do echo "== $(basename "$f")"; tail -n 3 "$f" | cut -c1-200; done > "$W/keep/logs.txt"
tar czf "$OUT/final.tar.gz" -C "$W" keep; ls -l "$OUT"; say total
