#!/usr/bin/env bash
# GPU-machine check of the optional process columns (SM%, CPU%, RSS, TIME): records a busy
# matmul loop, an idle holder and a CPU-bound one on one GPU, compares the recorded numbers
# with nvidia-smi pmon and ps, and keeps the recording (a real counterpart of
# tests/fixtures/peer_columns.jsonl) and a 200x60 capture of the columns.
# usage (repo root, release build; B=path overrides target/release/gpumon):
#   scripts/gpu/peer_columns.sh; results in $OUT.
set -uo pipefail
B=${B:-$PWD/target/release/gpumon}
S=$PWD/scripts/gpu
OUT=${OUT:-/tmp/peer_columns}
mkdir -p "$OUT"
$B record -o "$OUT/peer_columns.gpumon.jsonl" --duration 40s --interval 250ms &
rec=$!
sleep 2
# Busy: SM near 100 %; idle: memory only; CPU-bound: a host loop beside 1 GiB on the card.
python3 - > "$OUT/busy.txt" 2>&1 <<'PY' &
import torch, time
a = torch.randn(8192, 8192, device="cuda")
end = time.time() + 30
while time.time() < end:
    a = (a @ a).clamp_(-1, 1)
torch.cuda.synchronize()
PY
python3 $S/hold.py 2 30 idle > "$OUT/idle.txt" 2>&1 &
python3 - > "$OUT/cpu.txt" 2>&1 <<'PY' &
import torch, time
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
end = time.time() + 30
n = 0
while time.time() < end:
    n += 1
PY
sleep 15
nvidia-smi pmon -c 3 -s u | tee "$OUT/pmon.txt"
ps -o pid,pcpu,rss,etimes,cmd -C python3 | tee "$OUT/ps.txt"
# A capture of the columns while they run.
tmux new-session -d -s peercols -x 200 -y 60 "$B watch"
sleep 4
tmux capture-pane -p -t peercols > "$OUT/watch_200x60.txt"
tmux kill-session -t peercols
wait $rec
wait
# Every GPU process's samples carry the new fields; the busy one reads high SM, the idle one 0.
python3 - "$OUT/peer_columns.gpumon.jsonl" <<'PY' | tee "$OUT/check.txt"
import json, sys
last = {}
started = {}
for line in open(sys.argv[1]):
    f = json.loads(line)
    if f["type"] == "procs":
        for p in f["procs"]:
            started[p["pid"]] = p.get("started")
    if f["type"] == "tick":
        for g in f["gpus"]:
            for p in g.get("procs", []):
                last.setdefault(p["pid"], []).append(p)
for pid, samples in last.items():
    mid = samples[len(samples) // 2]
    print(pid, "sm", mid.get("sm_util"), "cpu", mid.get("cpu"), "rss", mid.get("rss"),
          "started", started.get(pid))
ok = all(any("sm_util" in s and "cpu" in s and "rss" in s for s in v) for v in last.values())
print("every process has sm_util, cpu, rss:", ok)
sys.exit(0 if ok else 1)
PY
echo "check rc=${PIPESTATUS[0]}"
