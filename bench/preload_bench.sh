#!/usr/bin/env bash
# Overhead of libgpumon_preload.so per cuMemAlloc/cuMemFree pair.
#   bench/preload_bench.sh            stand-in libcuda (any machine, gcc)
#   bench/preload_bench.sh --real     real driver on GPU 0 (needs libcuda)
# Uses $GPUMON_PRELOAD, else target/release/libgpumon_preload.so.
# Prints best-of-5 ns per pair without and with the hook, and the difference
# per call (a pair is two calls).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lib="${GPUMON_PRELOAD:-$root/target/release/libgpumon_preload.so}"
[[ -f "$lib" ]] || { echo "missing $lib (cargo build --release -p gpumon-preload)" >&2; exit 1; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
n="${N:-2000000}"
if [[ "${1:-}" == "--real" ]]; then
    n="${N:-200000}"
    cc -O2 -DREAL_CUDA -o "$work/bench" "$root/bench/preload_bench.c" -lcuda
else
    cc -shared -fPIC -O2 -Wl,-soname,libcuda.so.1 -o "$work/libcuda.so.1" "$root/preload/tests/c/fake_cuda.c"
    cc -O2 -o "$work/bench" "$root/bench/preload_bench.c" -L"$work" -l:libcuda.so.1 -Wl,-rpath,"$work"
fi
mkdir -m 700 "$work/sock"
base="$("$work/bench" "$n")"
hook="$(GPUMON_DIR="$work/sock" LD_PRELOAD="$lib" "$work/bench" "$n")"
echo "without hook: $base"
echo "with hook:    $hook"
python3 - "$base" "$hook" <<'PY'
import sys
parse = lambda s: dict(kv.split("=") for kv in s.split())
a, b = parse(sys.argv[1]), parse(sys.argv[2])
print(f"{'path':<20}{'pair ns':>10}{'hooked':>10}{'added/call':>12}")
for k in a:
    x, y = float(a[k]), float(b[k])
    print(f"{k.replace('_ns',''):<20}{x:>10.1f}{y:>10.1f}{(y-x)/2:>12.1f}")
PY
