#!/usr/bin/env bash
# Driver-level numbers from libgpumon_preload.so vs the workloads' own, on a GPU
# machine (CUDA 13, PyTorch, JAX, CuPy, nvcc; no network, no Rust needed).
#   scripts/gpu/preload_check.sh [OUT_DIR]
# Needs target/release/libgpumon_preload.so built elsewhere and carried here,
# or $GPUMON_PRELOAD. Writes fixtures (every protocol message, JSONL) and the
# raw results to OUT_DIR (default $OUT or /tmp/gpumon-preload-check), prints
# a table, then the hook's overhead against the real driver. ~2 minutes.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${GPUMON_PRELOAD:-$root/target/release/libgpumon_preload.so}"
out="${1:-${OUT:-/tmp/gpumon-preload-check}}"
[[ -f "$lib" ]] || { echo "missing $lib" >&2; exit 1; }
mkdir -p "$out/fixtures"
export GPUMON_DIR="$out/sock"; mkdir -p -m 700 "$GPUMON_DIR"; chmod 700 "$GPUMON_DIR"
here="$root/scripts/gpu"
results="$out/results.jsonl"; : > "$results"
py="${PYTHON:-python3}"

run() {  # name, env..., -- cmd...
    local name="$1"; shift
    local envs=()
    while [[ "$1" != "--" ]]; do envs+=("$1"); shift; done; shift
    echo "== $name" >&2
    timeout 120 env "${envs[@]}" GPUMON_CHECK_PRELOAD="$lib" "$py" "$here/preload_check.py" \
        "$name" "$out/fixtures/$name.jsonl" "$@" >> "$results" \
        || echo "!! $name failed (see above)" >&2
}

nvcc -O2 -o "$out/preload_check_c" "$here/preload_check.cu" && \
    run cuda_c X=1 -- "$out/preload_check_c"
run torch_native -u PYTORCH_CUDA_ALLOC_CONF -- "$py" "$here/preload_workloads.py" torch
run torch_expandable PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- "$py" "$here/preload_workloads.py" torch
run torch_async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- "$py" "$here/preload_workloads.py" torch
run jax XLA_PYTHON_CLIENT_PREALLOCATE=false -- "$py" "$here/preload_workloads.py" jax
run cupy X=1 -- "$py" "$here/preload_workloads.py" cupy

"$py" - "$results" <<'PY'
import json, sys
MiB = 1 << 20
def f(v): return "-" if v is None else f"{v / MiB:.2f}"
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'workload':<17}{'phase':<24}{'what':<15}{'own MiB':>11}{'driver MiB':>12}  match")
for r in rows:
    own, drv = r["own"], r["driver"]
    for k in ("allocated", "reserved", "peak_allocated", "peak_reserved"):
        if k not in own:
            continue
        d = drv.get(k)
        # cudaMallocAsync: the framework's "reserved" is the driver pool's reserve.
        if r["workload"] == "torch_async" and k == "reserved":
            d = drv.get("pool_reserved")
        # Caching allocators: the driver sees segments, so only reserved can match.
        segments = r["workload"] in ("torch_native", "torch_expandable", "jax")
        if own[k] is None or (segments and k in ("allocated", "peak_allocated")):
            ok = "n/a"
        else:
            ok = "yes" if d == own[k] else f"NO ({(d or 0) - own[k]:+d} B)"
        print(f"{r['workload']:<17}{r['phase']:<24}{k:<15}{f(own[k]):>11}{f(d):>12}  {ok}")
PY
echo "fixtures: $out/fixtures" >&2
echo "== overhead against the real driver" >&2
N="${N:-20000}" "$root/bench/preload_bench.sh" --real
