#!/usr/bin/env bash
# Memory bound over uptime: generate synthetic recordings of 1 h, 24 h and 72 h at 1 s
# (1 GPU, 4 processes with changing usage), replay each headless and print gpumon's peak RSS.
# The model keeps fixed-size rings, so the three figures should be close.
# usage: bench/rss_bound.sh   (builds the release binary if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for hours in 1 24 72; do
    python3 - "$W/r$hours.jsonl" "$hours" <<'PY'
import json, math, sys
path, hours = sys.argv[1], int(sys.argv[2])
t0, total = 1_800_000_000_000, 150_754_820_096
with open(path, "w") as f:
    f.write(json.dumps({"type": "header", "v": 1, "format": "gpumon", "host": "synthetic", "started": t0,
                        "interval_ms": 1000, "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-synthetic",
                        "pci_bus_id": "00000000:00:06.0", "memory_total": total}]}) + "\n")
    f.write(json.dumps({"type": "procs", "t": t0, "procs": [{"pid": p, "name": "python", "cmdline": f"python train{p}.py", "env_readable": True} for p in range(1, 5)]}) + "\n")
    for s in range(hours * 3600):
        procs = [{"pid": p, "kind": "compute", "used": int((5 + p + math.sin(s / 300 + p)) * 2**30)} for p in range(1, 5)]
        used = sum(q["used"] for q in procs)
        f.write(json.dumps({"type": "tick", "t": t0 + s * 1000, "gpus": [{"index": 0, "mem": {"total": total, "used": used, "free": total - used, "reserved": 0}, "procs": procs}]}) + "\n")
PY
    rss=$( { /usr/bin/time -f "%M" ./target/release/gpumon replay --headless "$W/r$hours.jsonl" >/dev/null; } 2>&1 | tail -1)
    printf '%3d h recording (%6d ticks): peak RSS %6d kB\n' "$hours" $((hours * 3600)) "$rss"
done
