#!/usr/bin/env bash
# CUDA_VISIBLE_DEVICES on a machine with 2+ GPUs: processes with it in each form, each
# holding a distinct amount on each of its devices and printing which physical card (UUID)
# each logical device is. gpumon records them; snapshot --json is checked against that truth.
# usage: scripts/gpu/multi_gpu_cvd.sh OUTDIR
set -uo pipefail
O=${1:?outdir}; B=$PWD/target/release/gpumon; S=$PWD/scripts/gpu
mkdir -p "$O"; D=$(mktemp -d /tmp/gpumon-cvd.XXXXXX); chmod 700 "$D"
export PYTHONPATH=$PWD/python GPUMON_DIR=$D PYTHONUNBUFFERED=1
mapfile -t U < <(nvidia-smi --query-gpu=uuid --format=csv,noheader)
n=${#U[@]}; echo "GPUs: $n"
[ "$n" -ge 2 ] || { echo "needs 2+ GPUs"; exit 0; }
"$B" record -o "$O/multi_gpu_cvd.jsonl" --interval 500ms --socket-dir "$D" --duration 40s 2>"$O/rec.err" &
rec=$!
sleep 1
H="$O/truth.jsonl"; : > "$H"
CUDA_VISIBLE_DEVICES=1 python3 $S/hold.py 1.0 30 cvd_1 --companion >> "$H" &
CUDA_VISIBLE_DEVICES=1,0 python3 $S/hold.py 1.25 30 cvd_10 --step 0.25 --companion >> "$H" &
CUDA_VISIBLE_DEVICES=${U[1]},${U[0]} python3 $S/hold.py 1.75 30 cvd_uuid --step 0.25 --companion >> "$H" &
CUDA_VISIBLE_DEVICES=${U[1]:0:10} python3 $S/hold.py 2.25 30 cvd_uuidprefix --companion >> "$H" &
CUDA_VISIBLE_DEVICES=1,0 CUDA_DEVICE_ORDER=PCI_BUS_ID python3 $S/hold.py 2.5 30 cvd_10_pci --step 0.25 --companion >> "$H" &
python3 $S/hold.py 3.0 30 cvd_unset --step 0.25 >> "$H" &
CUDA_VISIBLE_DEVICES=1 XLA_PYTHON_CLIENT_PREALLOCATE=false python3 -c "
import os, json, time, gpumon; gpumon.start()
import jax, jax.numpy as jnp
x = jnp.ones((int(1.1*2**30)//4,), jnp.float32).block_until_ready()
d = jax.devices()[0]
print(json.dumps({'tag':'jax_cvd_1','pid':os.getpid(),'logical':0,'uuid':None,'bytes':x.nbytes,'cvd':'1','order':None, 'jax_stats': d.memory_stats().get('bytes_in_use')}), flush=True)
time.sleep(26)" >> "$H" 2>"$O/jax.err" &
sleep 18
"$B" snapshot --json > "$O/snapshot.json"
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader > "$O/smi_apps.txt"
python3 - "$O" <<'PY'
import json, sys
O = sys.argv[1]
snap = json.load(open(f"{O}/snapshot.json"))
truth = [json.loads(l) for l in open(f"{O}/truth.jsonl") if l.startswith("{")]
uuid_to_idx = {g["uuid"]: g["index"] for g in snap["gpus"]}
bad = 0
for t in truth:
    if not t.get("uuid"):
        continue
    g = next(g for g in snap["gpus"] if g["uuid"] == t["uuid"])
    p = next((p for p in g["processes"] if p["pid"] == t["pid"]), None)
    got = p and p["logical_index"]
    ok = got == t["logical"]
    bad += not ok
    print(f"{t['tag']:16} pid {t['pid']} phys GPU{uuid_to_idx[t['uuid']]} truth cuda:{t['logical']} gpumon {got!r} uncertain={p and p['mapping_uncertain']!r} used={p and p['used_memory_bytes']} -> {'OK' if ok else 'WRONG'}")
print("mapping mismatches:", bad)
PY
wait $rec
wait
"$B" replay --headless "$O/multi_gpu_cvd.jsonl" && echo "replay ok"
