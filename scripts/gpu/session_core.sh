#!/usr/bin/env bash
# GPU-machine session for the core monitor: real recordings for assets/ and tests/fixtures/,
# the snapshot-vs-nvidia-smi check, and the monitor overhead benchmark.
# usage (from the repo root on the GPU machine): scripts/gpu/session_core.sh; results in $OUT.
set -uo pipefail
B=$PWD/target/release/gpumon
S=$PWD/scripts/gpu
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.used,memory.reserved,memory.total,driver_version --format=csv | tee "$OUT/smi.txt"
$B snapshot --json > "$OUT/snapshot_idle.json"; echo "snapshot rc=$?"
$B snapshot --bogus; echo "bad flag rc=$?"
# 1. idle card
$B record -o "$OUT/idle.jsonl" --duration 15s --interval 1s
# 2. PyTorch growing and shrinking, with a second process seeing the card through a UUID
#    and a third with CUDA_VISIBLE_DEVICES=0 and PCI order.
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
$B record -o "$OUT/torch_grow_shrink.jsonl" --duration 80s --interval 500ms &
rec=$!
sleep 2
python3 $S/grow_shrink.py 70 2 24 >> "$OUT/logs.txt" 2>&1 &
CUDA_VISIBLE_DEVICES=${uuid:0:12} python3 $S/hold.py 3 40 uuid-proc >> "$OUT/logs.txt" 2>&1 &
sleep 20
CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID python3 $S/hold.py 5 30 int-proc >> "$OUT/logs.txt" 2>&1 &
sleep 10
python3 $S/compare_smi.py "$B" | tee "$OUT/compare_smi.txt"
echo "compare rc=${PIPESTATUS[0]}"
$B snapshot --json > "$OUT/snapshot_busy.json"
wait $rec
wait
# 3. monitor overhead, side by side
bench/monitor_overhead.sh 60 | tee "$OUT/overhead.txt"
