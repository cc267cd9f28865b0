#!/usr/bin/env bash
# Builds the release wheel for PyPI: manylinux2014 (glibc 2.17: Ubuntu 18.04+, RHEL/Rocky 7+,
# Amazon Linux 2), so it installs on the older clusters GPU jobs run on. A plain
# `maturin build` links against this machine's glibc (manylinux_2_34 on a current distro),
# and `auditwheel repair` cannot lower that afterwards. zig's linker carries the old glibc's
# symbol stubs, so `--zig` builds it here without the manylinux container; the interposer
# embedded in the binary is linked the same way (build.rs's nested cargo inherits the linker
# maturin sets). Then scripts/wheel_glibc.py checks the wheel's tags and the glibc symbol
# versions of the binary and of the interposer inside it, which auditwheel cannot see.
#
# Usage: scripts/build_wheel.sh [OUT_DIR]        (default: target/wheels)
#   GPUMON_WHEEL_PROFILE=dev   a quicker unoptimised build (CI: same linking, same check)
#   GPUMON_WHEEL_TARGET=aarch64-unknown-linux-gnu   another architecture (rustup target needed)
#   GPUMON_WHEEL_COMPAT=manylinux_2_28               another floor
# Nothing is published: upload the wheel yourself (`twine upload`, or the release workflow).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-target/wheels}")
profile=${GPUMON_WHEEL_PROFILE:-release}
compat=${GPUMON_WHEEL_COMPAT:-manylinux2014}
start=$(date +%s)

# maturin and zig in a venv of their own (the system Python may be externally managed, PEP
# 668), kept between runs; ziglang is zig as a wheel, pinned to what maturin supports.
venv=$(realpath -m "${GPUMON_WHEEL_VENV:-target/wheel-venv}")
if [ ! -x "$venv/bin/maturin" ] || ! "$venv/bin/python" -c 'import ziglang' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q "maturin>=1.7,<2" ziglang
fi
export PATH="$venv/bin:$PATH"

args=(build --zig --compatibility "$compat" --profile "$profile" -o "$out")
[ -n "${GPUMON_WHEEL_TARGET:-}" ] && args+=(--target "$GPUMON_WHEEL_TARGET")
mkdir -p "$out"
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
maturin "${args[@]}"
wheel=$(find "$out" -maxdepth 1 -name 'gpumon_memory-*.whl' -newer "$stamp" | head -1)
[ -n "$wheel" ] || { echo "build_wheel: maturin wrote no wheel into $out" >&2; exit 1; }

max=2.17
case $compat in
manylinux_*) max=$(sed -E 's/manylinux_([0-9]+)_([0-9]+)/\1.\2/' <<<"$compat") ;;
esac
python3 scripts/wheel_glibc.py "$wheel" --max-glibc "$max"
echo "build_wheel: $wheel ($profile, $(( $(date +%s) - start )) s)"
