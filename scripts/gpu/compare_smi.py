"""Compare `gpumon snapshot --json` with nvidia-smi while processes hold memory.

usage: python3 compare_smi.py PATH/TO/gpumon
Exits non-zero when any value differs by more than 1 MiB.
"""
import json, subprocess, sys

gpumon = sys.argv[1]
MIB = 2**20

def smi(args):
    out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True).stdout
    return [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()]

gpu_rows = smi(["--query-gpu=index,memory.used,memory.total"])
app_rows = smi(["--query-compute-apps=pid,used_memory"])
snap = json.loads(subprocess.run([gpumon, "snapshot", "--json"], capture_output=True, text=True, check=True).stdout)
bad = 0
for idx, used, total in gpu_rows:
    g = next(g for g in snap["gpus"] if g["index"] == int(idx))
    gu, gt = g["memory"]["used_bytes"] / MIB, g["memory"]["total_bytes"] / MIB
    ok = abs(gu - float(used)) <= 1 and abs(gt - float(total)) <= 1
    bad += not ok
    print(f"GPU {idx}: nvidia-smi used {used} MiB total {total} MiB | gpumon used {gu:.1f} MiB total {gt:.1f} MiB -> {'OK' if ok else 'MISMATCH'}")
procs = {p["pid"]: p for g in snap["gpus"] for p in g["processes"]}
for pid, used in app_rows:
    p = procs.get(int(pid))
    gu = None if p is None or p["used_memory_bytes"] is None else p["used_memory_bytes"] / MIB
    ok = gu is not None and abs(gu - float(used)) <= 1
    bad += not ok
    print(f"pid {pid}: nvidia-smi {used} MiB | gpumon {gu} MiB, logical {p and p['logical_index']} cvd {p and p['cuda_visible_devices']} -> {'OK' if ok else 'MISMATCH'}")
sys.exit(1 if bad else 0)
