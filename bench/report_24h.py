#!/usr/bin/env python3
"""A 24-hour recording for `gpumon report`'s benchmark (bench/report_24h.sh).

86,400 ticks at 1 s on 2 GPUs, 8 processes (4 per GPU) each with a PyTorch companion
sampling once a second: allocated/reserved samples, an epoch every 5 minutes (floor and
peak), a free-block snapshot every minute. The run has a story so the page has one: PID
1001 leaks 8 MiB per epoch, PID 1006's cache fragments until a fragmentation OOM at hour
20 kills it, the rest are steady with noise and a daily rhythm.

usage: bench/report_24h.py OUT.gpumon.jsonl [HOURS]
"""
import json
import math
import random
import sys

MIB = 1 << 20
GIB = 1 << 30
TOTAL = 150_754_820_096
T0 = 1_800_000_000_000
EPOCH_S = 300
FRAG_S = 60


def main():
    path = sys.argv[1]
    hours = float(sys.argv[2]) if len(sys.argv) > 2 else 24.0
    ticks = int(hours * 3600)
    rnd = random.Random(7)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    gpus = [
        {"index": i, "name": "NVIDIA H200", "uuid": f"GPU-0000000{i}-bench",
         "pci_bus_id": f"00000000:00:0{6 + i}.0", "memory_total": TOTAL}
        for i in range(2)
    ]
    pids = list(range(1000, 1008))
    gpu_of = {p: (0 if p < 1004 else 1) for p in pids}
    dead_at = {1006: int(20 * 3600)}  # the fragmentation OOM
    with open(path, "w") as f:
        w = f.write
        w(dumps({"type": "header", "v": 1, "format": "gpumon", "host": "bench", "started": T0,
                 "interval_ms": 1000, "gpus": gpus, "gpumon_version": "bench"}) + "\n")
        w(dumps({"type": "procs", "t": T0, "procs": [
            {"pid": p, "user": "bench", "name": "python3", "cmdline": f"python3 train.py --rank {p - 1000}",
             "env_readable": True, "cuda_visible_devices": str(gpu_of[p])} for p in pids]}) + "\n")
        for p in pids:
            g = gpus[gpu_of[p]]
            w(dumps({"type": "companion", "t": T0 + 200, "pid": p, "msg": {
                "type": "hello", "role": "companion", "pid": p, "framework": "torch",
                "framework_version": "2.11.0+cu130", "allocator": "native", "settings": {},
                "policy": "PyTorch caching allocator (native)",
                "devices": [{"dev": 0, "uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"],
                             "name": g["name"], "total": TOTAL}],
                "cuda_visible_devices": str(gpu_of[p]),
                "capabilities": ["stats", "peaks", "oom_events", "epochs", "free_blocks", "largest_free"],
                "sample_hz": 1, "snapshot_s": 60, "started": T0}}) + "\n")
            w(dumps({"type": "companion", "t": T0 + 200, "pid": p,
                     "msg": {"type": "history", "t": T0 + 200, "done": True}}) + "\n")
        for s in range(ticks):
            t = T0 + s * 1000
            epoch = s // EPOCH_S
            procs = {0: [], 1: []}
            for p in pids:
                if p in dead_at and s > dead_at[p]:
                    continue
                k = p - 1000
                base = (6 + k) * GIB
                leak = 8 * MIB * epoch if p == 1001 else 0
                frag = int(2 * GIB * min(1.0, s / dead_at[1006])) if p == 1006 else 0
                wave = int(0.6 * GIB * (1 + math.sin(2 * math.pi * (s % EPOCH_S) / EPOCH_S + k)))
                allocated = base + leak + wave + rnd.randrange(64) * MIB
                reserved = base + leak + int(1.4 * GIB) + frag
                used = reserved + 600 * MIB
                procs[gpu_of[p]].append({"pid": p, "kind": "compute", "used": used})
                w(dumps({"type": "companion", "t": t + 300, "pid": p, "msg": {
                    "type": "sample", "t": t + 300, "dev": 0, "allocated": allocated,
                    "reserved": reserved, "peak_allocated": base + leak + int(1.2 * GIB),
                    "peak_reserved": reserved, "limit": 20 * GIB, "num_alloc_retries": 0,
                    "num_ooms": 0}}) + "\n")
                if s % EPOCH_S == EPOCH_S - 1:
                    w(dumps({"type": "companion", "t": t + 400, "pid": p, "msg": {
                        "type": "epoch", "t": t + 400, "epoch": epoch, "dev": 0,
                        "floor": base + leak, "peak": base + leak + int(1.2 * GIB),
                        "reserved": reserved, "start_t": t - EPOCH_S * 1000}}) + "\n")
                if s % FRAG_S == 30:
                    free = reserved - allocated
                    largest = max(MIB, free // (8 if p == 1006 else 2))
                    hist = [[20, 40, 40 * MIB], [24, 6, 96 * MIB], [27, 2, 256 * MIB],
                            [29, 1, min(largest, 1023 * MIB)]]
                    w(dumps({"type": "companion", "t": t + 500, "pid": p, "msg": {
                        "type": "frag", "t": t + 500, "dev": 0, "free_total": free,
                        "largest_free": largest, "n_free_blocks": 49, "n_segments": 60,
                        "largest_block": largest, "hist": hist, "source": "snapshot",
                        "cost_us": 300}}) + "\n")
                if p in dead_at and s == dead_at[p]:
                    free = reserved - allocated
                    w(dumps({"type": "companion", "t": t + 600, "pid": p, "msg": {
                        "type": "event", "t": t + 600, "kind": "oom", "dev": 0,
                        "requested": 640 * MIB, "limit": 20 * GIB, "device_free": 200 * MIB,
                        "free_total": free, "largest_free": 634 * MIB}}) + "\n")
                    w(dumps({"type": "companion", "t": t + 700, "pid": p,
                             "msg": {"type": "bye", "t": t + 700, "reason": "exception"}}) + "\n")
                    w(dumps({"type": "companion", "t": t + 800, "pid": p,
                             "msg": {"type": "disconnected", "reason": "closed"}}) + "\n")
            tick = {"type": "tick", "t": t, "gpus": []}
            for i in range(2):
                used = sum(q["used"] for q in procs[i])
                tick["gpus"].append({"index": i, "mem": {"total": TOTAL, "used": used,
                                     "free": TOTAL - used, "reserved": 0},
                                     "util": 90, "procs": procs[i]})
            w(dumps(tick) + "\n")


if __name__ == "__main__":
    main()
