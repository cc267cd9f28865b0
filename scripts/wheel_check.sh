#!/usr/bin/env bash
# Build the Python wheel the way releases are built (scripts/build_wheel.sh: manylinux2014
# through `maturin --zig`, then its glibc and architecture check of the binary and of the
# interposer embedded in it), install it into a fresh venv and use it as a user would:
# `gpumon --version`, `gpumon run -- python -c 'import gpumon'`, and the installed companion
# reporting to the installed binary through a socket. Then the other two things a release
# uploads: the aarch64 wheel, cross-built by the same script and checked the same way (it
# cannot run here), and the sdist (scripts/build_sdist.sh), from which a wheel is built,
# installed into another fresh venv and run.
#
# The CI wheels are built with the `wheel-check` profile (Cargo.toml: unoptimised, no debug
# info); the release profile is fat-LTO and would add minutes on a small machine. What is
# checked here, the wheels' tags, the glibc symbol versions and the architecture of every
# binary in them, and that their parts find each other, does not depend on the profile. zig
# builds for an explicit target, so each wheel compiles the tree once more (measured on 2
# cores shared with other builds: x86-64 93 s of CPU, aarch64 115 s). The wheel from the
# sdist is built natively with the dev profile into the workspace's target directory, where
# scripts/install_check.sh left the same dependencies built: only gpumon and its interposer
# compile. The aarch64 wheel needs the rustup target aarch64-unknown-linux-gnu: without it
# that part is skipped with a line saying so, unless GPUMON_REQUIRE_AARCH64=1 (.ci/run
# installs the target and sets it). Release wheels: scripts/build_wheel.sh (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'kill "${rec_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
start=$(date +%s)

want=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

# What every installed wheel must do (run outside the source tree): its version from the
# command and from `python -m gpumon` (python/gpumon/__main__.py: the same installed binary,
# also with the venv's bin/ off PATH, as in a notebook started from elsewhere), and under
# `gpumon run` the companion starts inside the program and the interposer file exists.
runs_installed() {
    local venv=$1 what=$2 got out
    got=$("$venv/bin/gpumon" --version)
    [ "$got" = "gpumon $want" ] || { echo "$what: gpumon --version says '$got', want 'gpumon $want'"; exit 1; }
    got=$(env PATH=/usr/bin:/bin "$venv/bin/python" -m gpumon --version)
    [ "$got" = "gpumon $want" ] || { echo "$what: python -m gpumon --version says '$got', want 'gpumon $want'"; exit 1; }
    out=$(XDG_CACHE_HOME="$work/cache-$what" "$venv/bin/gpumon" run -- "$venv/bin/python" -c \
        'import os, gpumon; c = gpumon.companion(); print("companion", c is not None and c.thread is not None); print("preload", os.path.isfile(os.environ["LD_PRELOAD"].split(":")[0]))')
    echo "$out" | grep -qx "companion True" || { echo "$what: no companion under gpumon run: $out"; exit 1; }
    echo "$out" | grep -qx "preload True" || { echo "$what: interposer missing under gpumon run: $out"; exit 1; }
}

# maturin and zig in a venv of their own (build_wheel.sh); the wheel then goes into a
# second, fresh venv that holds nothing else.
GPUMON_WHEEL_VENV=$(realpath -m "${GPUMON_WHEEL_VENV:-$work/build}")
export GPUMON_WHEEL_VENV
GPUMON_WHEEL_PROFILE=wheel-check scripts/build_wheel.sh "$work/wheels"
python3 -m venv "$work/venv"
venv=$work/venv
"$venv/bin/python" -m pip install -q --no-index "$work"/wheels/gpumon_memory-*.whl

# Outside the source tree from here on, so nothing can come from it by accident.
cd "$work"
runs_installed "$venv" wheel
# The project URLs reach the installed metadata.
meta=$("$venv/bin/python" -c 'import importlib.metadata as m; print("\n".join(m.metadata("gpumon-memory").get_all("Project-URL") or []))')
for name in Documentation Source; do
    echo "$meta" | grep -q "^$name, https://" || { echo "wheel: no $name in Project-URL: $meta"; exit 1; }
done
# The Grafana dashboard and the Prometheus examples come with the install (in the binary).
"$venv/bin/gpumon" dashboard --write "$work/dash" >/dev/null
cmp "$work/dash/grafana-dashboard.json" "$root/assets/grafana-dashboard.json" \
    || { echo "wheel: gpumon dashboard differs from assets/grafana-dashboard.json"; exit 1; }
"$venv/bin/python" -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/dash/grafana-dashboard.json"
for f in prometheus.yml alert-rules.yml; do
    cmp "$work/dash/$f" "$root/assets/$f" || { echo "wheel: installed $f differs"; exit 1; }
done
py_ver=$("$venv/bin/python" -c 'import gpumon; print(gpumon.__version__)')
[ "$py_ver" = "$want" ] || { echo "wheel: gpumon.__version__ is $py_ver, want $want"; exit 1; }

# End to end: the installed package (not the source tree, not `gpumon run`'s copy) reports
# epochs to the installed binary, which records them.
mkdir -m 700 "$work/sock"
"$venv/bin/gpumon" record -o "$work/rec.gpumon.jsonl.gz" --interval 100ms --duration 20s --socket-dir "$work/sock" 2>"$work/rec.err" &
rec_pid=$!
GPUMON_TESTS="$root/python/tests" "$venv/bin/python" - "$work/sock" "$work/rec.gpumon.jsonl.gz" <<'EOF'
import os, sys, time, zlib
sys.path.append(os.environ["GPUMON_TESTS"])  # fakes.py only: a stand-in torch
from fakes import FakeTorch
ft = FakeTorch()
sys.modules["torch"] = ft.mod
import gpumon
assert "site-packages" in gpumon.__file__, gpumon.__file__
assert gpumon.start(sample_hz=20, epoch_gc=False, sock_dir=sys.argv[1])


def wait_for(text, count):
    deadline = time.time() + 15
    while time.time() < deadline:
        # Compressed and still being written: zlib reads what has been flushed.
        with open(sys.argv[2], "rb") as f:
            got = zlib.decompressobj(31).decompress(f.read()).decode()
        if got.count(text) >= count:
            return
        time.sleep(0.2)
    raise SystemExit("wheel: the recording never got %d x %s" % (count, text))


# Epochs live, as they happen: wait until the monitor has connected and said hello.
wait_for('"msg":{"type":"hello"', 1)
for _ in range(3):
    ft.alloc += 100 << 20
    gpumon.epoch()
wait_for('"msg":{"type":"epoch"', 3)
gpumon.stop("done")
EOF
kill -INT "$rec_pid"
wait "$rec_pid" || true
rec_pid=
epochs=$(gzip -dc "$work/rec.gpumon.jsonl.gz" | grep -c '"type":"epoch"' || true)
[ "$epochs" -ge 3 ] || { echo "wheel: recording has $epochs epochs, want 3"; cat "$work/rec.err"; exit 1; }
echo "wheel check: x86-64 ok ($(ls "$work"/wheels), $(( $(date +%s) - start )) s)"

# The sdist, and a wheel built from it as pip builds one where no wheel fits: natively, by
# maturin's build backend (the venv's, not one fetched from PyPI), with the dev profile.
cd "$root"
step=$(date +%s)
scripts/build_sdist.sh "$work/sdist"
PATH="$GPUMON_WHEEL_VENV/bin:$PATH" CARGO_TARGET_DIR="$root/target" MATURIN_PEP517_ARGS="--profile dev" \
    "$GPUMON_WHEEL_VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation --no-cache-dir \
    -w "$work/from-sdist" "$work/sdist/gpumon_memory-$want.tar.gz"
python3 -m venv "$work/venv-sdist"
"$work/venv-sdist/bin/python" -m pip install -q --no-index "$work"/from-sdist/gpumon_memory-*.whl
(cd "$work" && runs_installed "$work/venv-sdist" sdist)
echo "wheel check: sdist ok (a wheel built from it runs; $(( $(date +%s) - step )) s)"

# The aarch64 wheel: cross-built, then its tags, glibc needs and the architecture of the
# binary and of the interposer inside it (build_wheel.sh runs wheel_glibc.py).
step=$(date +%s)
if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
    GPUMON_WHEEL_TARGET=aarch64-unknown-linux-gnu GPUMON_WHEEL_PROFILE=wheel-check \
        scripts/build_wheel.sh "$work/wheels-aarch64"
    echo "wheel check: aarch64 ok ($(ls "$work"/wheels-aarch64), $(( $(date +%s) - step )) s)"
elif [ "${GPUMON_REQUIRE_AARCH64:-}" = 1 ]; then
    echo "wheel check: GPUMON_REQUIRE_AARCH64=1 but the rustup target aarch64-unknown-linux-gnu is not installed"
    exit 1
else
    echo "wheel check: aarch64 skipped (rustup target add aarch64-unknown-linux-gnu to build it)"
fi
echo "wheel check: ok ($(( $(date +%s) - start )) s)"
