#!/usr/bin/env bash
# Build the Python wheel the way releases are built (scripts/build_wheel.sh: manylinux2014
# through `maturin --zig`, then its glibc check of the binary and of the interposer embedded
# in it), install it into a fresh venv and use it as a user would: `gpumon --version`,
# `gpumon run -- python -c 'import gpumon'`, and the installed companion reporting to the
# installed binary through a socket.
#
# The CI wheel is built with the dev profile (the release profile is fat-LTO and would add
# minutes on a small machine); what is checked here, the wheel's tags, the glibc symbol
# versions it needs and that its parts find each other, does not depend on the profile. zig
# builds for an explicit target, so this compiles the tree once more (measured: 2 min 27 s of
# CPU, 4 min 31 s wall on 2 cores shared with other builds). Release wheels:
# scripts/build_wheel.sh (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'kill "${rec_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
start=$(date +%s)

# maturin and zig in a venv of their own (build_wheel.sh); the wheel then goes into a
# second, fresh venv that holds nothing else.
GPUMON_WHEEL_PROFILE=dev GPUMON_WHEEL_VENV=${GPUMON_WHEEL_VENV:-$work/build} \
    scripts/build_wheel.sh "$work/wheels"
python3 -m venv "$work/venv"
venv=$work/venv
"$venv/bin/python" -m pip install -q --no-index "$work"/wheels/gpumon_memory-*.whl

# Outside the source tree from here on, so nothing can come from it by accident.
cd "$work"
want=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
got=$("$venv/bin/gpumon" --version)
[ "$got" = "gpumon $want" ] || { echo "wheel: gpumon --version says '$got', want 'gpumon $want'"; exit 1; }
# `python -m gpumon` runs the same installed binary (python/gpumon/__main__.py), also with
# the venv's bin/ off PATH, as in a notebook started from elsewhere.
got=$(env PATH=/usr/bin:/bin "$venv/bin/python" -m gpumon --version)
[ "$got" = "gpumon $want" ] || { echo "wheel: python -m gpumon --version says '$got', want 'gpumon $want'"; exit 1; }
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

# `gpumon run`: the companion starts inside the program and the interposer file exists.
out=$(XDG_CACHE_HOME="$work/cache" "$venv/bin/gpumon" run -- "$venv/bin/python" -c \
    'import os, gpumon; c = gpumon.companion(); print("companion", c is not None and c.thread is not None); print("preload", os.path.isfile(os.environ["LD_PRELOAD"].split(":")[0]))')
echo "$out" | grep -qx "companion True" || { echo "wheel: no companion under gpumon run: $out"; exit 1; }
echo "$out" | grep -qx "preload True" || { echo "wheel: interposer missing under gpumon run: $out"; exit 1; }

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
echo "wheel check: ok ($(ls "$work"/wheels), $(( $(date +%s) - start )) s)"
