#!/usr/bin/env bash
# The held-out batch (scenario4.py's h5_* runs), recorded after the rules were tuned, with
# the tree's gpumon watching them live in tmux (captures at 80x24 and 120x40), and
# gpumon.epoch()'s cost on BERT-base processes sharing the card: the HEAD~ companion
# ($D/py_old) against the tree's, with a floor that moves by up to 1 MiB.
# usage (on the GPU machine):  D=devbin scripts/gpu/corpus4/run_heldout5.sh
set -uo pipefail
OUT=${OUT:?set OUT}
R=$(pwd)
D=$(cd "${D:-devbin}" && pwd)
B=$D/gpumon
REC_S=${REC_S:-240}
W=$(mktemp -d /tmp/held5.XXXXXX)
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPUMON_SNAPSHOT_S=2 HF_HUB_OFFLINE=1
mkdir -m 700 "$W/sock"
mkdir -p "$W/keep/cap"
timeout $((REC_S + 20)) "$B" record -o "$W/keep/corpus5.gpumon.jsonl.gz" --interval 200ms \
    --socket-dir "$W/sock" --duration "${REC_S}s" >"$W/rec.log" 2>&1 &
REC=$!
for size in 80x24 120x40; do
    tmux new-session -d -s "live$size" -x ${size%x*} -y ${size#*x} \
        "GPUMON_DIR=$W/sock $B --socket-dir $W/sock --interval 1s; sleep 600"
done
sleep 1
S=$R/scripts/gpu/corpus4
NAMES=$(python3 -c "import sys; sys.path.insert(0, '$S'); import scenario4; print(' '.join(n for n in sorted(scenario4.SCENARIOS) if n.startswith('h5_')))")
for name in $NAMES; do
    env GPUMON_DIR=$W/sock PYTHONPATH=$R/python timeout -k 3 $((REC_S - 5)) \
        python3 "$S/scenario4.py" --name "$name" --seconds $((REC_S - 15)) \
        >"$W/$name.out" 2>"$W/$name.err" &
done
sleep 20
say "epoch cost, two BERT processes of each companion, floor moving up to 1 MiB"
for tag in old new old new; do
    if [ $tag = old ]; then PP=$D/py_old; else PP=$R/python; fi
    env GPUMON_DIR=$W/sock PYTHONPATH=$PP timeout -k 3 $((REC_S - 30)) \
        python3 "$R/bench/epoch_cost.py" --epochs 50 --steps 6 --jitter-mib 1 --tag $tag \
        >>"$W/keep/epoch_cost.jsonl" 2>>"$W/epoch_cost.err" &
done
for at in 60 120 180 225; do
    sleep $((at - ($(date +%s) - T0)))
    for size in 80x24 120x40; do tmux capture-pane -p -t "live$size" >"$W/keep/cap/${size}_t${at}.txt"; done
    tmux send-keys -t live120x40 a; sleep 1; tmux capture-pane -p -t live120x40 >"$W/keep/cap/alerts_120x40_t${at}.txt"; tmux send-keys -t live120x40 Escape
    say "captured at $at s"
done
wait $REC; say "recorder rc=$?"
wait
tmux kill-server 2>/dev/null
python3 - "$W" <<'PY'
import glob, json, os, sys
w = sys.argv[1]
with open(os.path.join(w, "keep", "truth5.jsonl"), "w") as out:
    for f in sorted(glob.glob(os.path.join(w, "h5_*.out"))):
        for line in open(f, errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("type") == "truth":
                print("truth", r.get("scenario"), r.get("pid"), r.get("ok"), r.get("epochs"), r.get("oom_epoch"))
            out.write(json.dumps(r, separators=(",", ":")) + "\n")
PY
for f in "$W"/*.err "$W/rec.log"; do echo "== $(basename "$f")"; tail -n 3 "$f" | cut -c1-200; done > "$W/keep/logs.txt"
python3 -c "
import json
for l in open('$W/keep/epoch_cost.jsonl'):
    r=json.loads(l); r.pop('calls_ms'); print(r)
"
tar czf "$OUT/held5.tar.gz" -C "$W" keep; ls -l "$OUT"; say total
