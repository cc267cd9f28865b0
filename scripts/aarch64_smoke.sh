#!/usr/bin/env bash
# What is known about aarch64 (GH200 and other Grace nodes), reproducibly: builds the aarch64
# wheel (scripts/build_wheel.sh: zig cross-links the binary and the embedded interposer, and
# checks both need at most glibc 2.17), then runs the monitor under qemu-user: --version,
# demo list, a headless replay whose CSV must equal the host build's, and serve --replay with
# /healthz, gzip and promtool (when installed). No GPU, no NVML and no interposer loading are
# exercised: that needs real hardware. The release workflow runs it on a version tag
# (.github/workflows/release.yml, job aarch64); .ci/run does not (a second full build).
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

GPUMON_WHEEL_TARGET=aarch64-unknown-linux-gnu GPUMON_WHEEL_PROFILE=${GPUMON_WHEEL_PROFILE:-dev} \
    CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/aarch64} scripts/build_wheel.sh "$out/wheels"
wheel=$(ls -t "$out"/wheels/gpumon_memory-*_aarch64.whl | head -1)
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
demo=assets/demo.gpumon.jsonl.gz
arm replay --headless --speed max --csv "$out/arm.csv" "$demo"
HOME="$out/home" "$host_bin" replay --headless --speed max --csv "$out/host.csv" "$demo"
cmp "$out/host.csv" "$out/arm.csv"
echo "aarch64_smoke: replay CSV equals the host's ($(wc -l <"$out/arm.csv") lines)"

port=${GPUMON_SMOKE_PORT:-19465}
arm serve --replay "$demo" --listen "127.0.0.1:$port" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "localhost:$port/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "localhost:$port/healthz"
curl -sf -H 'Accept-Encoding: gzip' -D - -o /dev/null "localhost:$port/metrics" | grep -qi '^content-encoding: gzip'
if command -v promtool >/dev/null; then
    curl -sf --compressed "localhost:$port/metrics" | promtool check metrics
fi
echo "aarch64_smoke: ok (built, glibc <= 2.17, monitor runs under qemu; GPU paths and the interposer untested)"
