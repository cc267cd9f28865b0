#!/usr/bin/env bash
# What is known about aarch64 (GH200 and other Grace nodes), reproducibly: builds the aarch64
# wheel (scripts/build_wheel.sh: zig cross-links the binary and the embedded interposer, and
# checks both are AArch64 and need at most glibc 2.17), or takes the one GPUMON_SMOKE_WHEEL
# names, then runs the monitor under qemu-user: --version, demo list, a headless replay whose
# CSV must equal the host build's, serve --replay with /healthz, gzip and promtool (when
# installed), and the embedded interposer preloaded into the aarch64 binary (it loads and
# initialises; nothing calls CUDA). No GPU, no NVML and no driver interception are exercised:
# that needs real hardware. The release workflow runs it on a version tag, on the release
# wheel (.github/workflows/release.yml, job aarch64); .ci/run builds and checks the wheel
# (scripts/wheel_check.sh) but runs nothing under qemu.
#
# Needs: rustup target add aarch64-unknown-linux-gnu; apt install qemu-user libc6-arm64-cross;
# a host build (cargo build) for the reference CSV.
# Usage: scripts/aarch64_smoke.sh [OUT_DIR]      (default: target/aarch64-smoke)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-target/aarch64-smoke}")
mkdir -p "$out"
host_bin=${GPUMON_HOST_BIN:-target/debug/gpumon}
[ -x "$host_bin" ] || { echo "aarch64_smoke: build the host binary first (cargo build)" >&2; exit 1; }
command -v qemu-aarch64 >/dev/null || { echo "aarch64_smoke: qemu-aarch64 missing (apt install qemu-user)" >&2; exit 1; }
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
[ -e "$QEMU_LD_PREFIX/lib/ld-linux-aarch64.so.1" ] || { echo "aarch64_smoke: no aarch64 glibc in $QEMU_LD_PREFIX (apt install libc6-arm64-cross)" >&2; exit 1; }

if [ -n "${GPUMON_SMOKE_WHEEL:-}" ]; then
    wheel=$GPUMON_SMOKE_WHEEL
    python3 scripts/wheel_glibc.py "$wheel"
else
    GPUMON_WHEEL_TARGET=aarch64-unknown-linux-gnu GPUMON_WHEEL_PROFILE=${GPUMON_WHEEL_PROFILE:-wheel-check} \
        scripts/build_wheel.sh "$out/wheels"
    wheel=$(ls -t "$out"/wheels/gpumon_memory-*_aarch64.whl | head -1)
fi
case $wheel in *_aarch64.whl) ;; *) echo "aarch64_smoke: $wheel is not an aarch64 wheel" >&2; exit 1 ;; esac
python3 - "$wheel" "$out/gpumon" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/gpumon"))
    open(sys.argv[2], "wb").write(z.read(name))
PY
chmod +x "$out/gpumon"
arm() { HOME="$out/home" qemu-aarch64 "$out/gpumon" "$@"; }
mkdir -p "$out/home"
arm --version
arm demo list >/dev/null
# The interposer the binary carries, cut out of it (where wheel_glibc.py finds it), preloaded
# into an aarch64 program, the binary itself: the loader accepts it and its initialiser runs.
# (Not through `gpumon run`: qemu-user runs no foreign child, and it redirects the paths of
# files it creates into QEMU_LD_PREFIX.)
lib=$out/libgpumon_preload.so
python3 - "$out/gpumon" "$lib" <<'PY'
import sys
sys.path.insert(0, "scripts")
import wheel_glibc
data = open(sys.argv[1], "rb").read()
off = data.find(b"\x7fELF", 1)
while off != -1 and wheel_glibc.elf_size(data, off) is None:
    off = data.find(b"\x7fELF", off + 1)
if off == -1:
    sys.exit("aarch64_smoke: no interposer inside the binary")
open(sys.argv[2], "wb").write(data[off : off + wheel_glibc.elf_size(data, off)])
PY
preloaded=$(HOME="$out/home" qemu-aarch64 -E "LD_PRELOAD=$lib" -E LD_DEBUG=files "$out/gpumon" --version 2>&1)
grep -q "calling init: $lib" <<<"$preloaded" || { echo "aarch64_smoke: the interposer did not load: $preloaded" >&2; exit 1; }
echo "aarch64_smoke: the embedded interposer ($(wc -c <"$lib") bytes) loads into an aarch64 process"
demo=assets/demo.gpumon.jsonl.gz
arm replay --headless --speed max --csv "$out/arm.csv" "$demo"
HOME="$out/home" "$host_bin" replay --headless --speed max --csv "$out/host.csv" "$demo"
cmp "$out/host.csv" "$out/arm.csv"
echo "aarch64_smoke: replay CSV equals the host's ($(wc -l <"$out/arm.csv") lines)"

port=${GPUMON_SMOKE_PORT:-19465}
# Not through arm(): $! would be the subshell running the function, and killing it would
# leave qemu serving after the script.
HOME="$out/home" qemu-aarch64 "$out/gpumon" serve --replay "$demo" --listen "127.0.0.1:$port" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "localhost:$port/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "localhost:$port/healthz"
curl -sf -H 'Accept-Encoding: gzip' -D - -o /dev/null "localhost:$port/metrics" | grep -qi '^content-encoding: gzip'
if command -v promtool >/dev/null; then
    curl -sf --compressed "localhost:$port/metrics" | promtool check metrics
fi
echo "aarch64_smoke: ok (AArch64, glibc <= 2.17, the monitor runs and the interposer loads under qemu; GPU paths and driver interception untested)"
