#!/usr/bin/env bash
# Builds the source distribution for PyPI (`maturin sdist`): what `pip install gpumon-memory`
# builds from on a platform no wheel covers (musl, another architecture), and what
# distributions that rebuild Python packages from source start from. It holds the crate as
# `cargo package` would (Cargo.toml `include`, the interposer's sources from
# preload-package/) plus pyproject.toml and the companion package, so a wheel built from it
# carries the binary, its embedded interposer and the companion, as the released wheels do.
#
# Then it checks the archive: one top directory, regular files only (the repository's
# links to the interposer and the protocol must arrive as files), the Python metadata's name
# and version, and every file `cargo package` would ship. scripts/wheel_check.sh builds a
# wheel from it and installs that.
#
# Usage: scripts/build_sdist.sh [OUT_DIR]        (default: target/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-target/wheels}")
ver=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

# maturin in the venv scripts/build_wheel.sh keeps (zig is not needed for an sdist).
venv=$(realpath -m "${GPUMON_WHEEL_VENV:-target/wheel-venv}")
if [ ! -x "$venv/bin/maturin" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q "maturin>=1.7,<2"
fi
mkdir -p "$out"
sdist=$out/gpumon_memory-$ver.tar.gz
rm -f "$sdist"
"$venv/bin/maturin" sdist -o "$out"
[ -f "$sdist" ] || { echo "build_sdist: maturin wrote no $sdist" >&2; exit 1; }

cargo package --list --quiet --offline --allow-dirty -p gpumon >"$out/.crate-files"
trap 'rm -f "$out/.crate-files"' EXIT
python3 - "$sdist" "$ver" "$out/.crate-files" <<'EOF'
import sys, tarfile
sdist, ver, listing = sys.argv[1:]
top = f"gpumon_memory-{ver}/"
problems = []
with tarfile.open(sdist) as t:
    members = t.getmembers()
    names = set()
    for m in members:
        if m.name == top.rstrip("/"):
            continue
        if not m.name.startswith(top) or ".." in m.name.split("/"):
            problems.append(f"{m.name}: outside {top}")
        if not (m.isfile() or m.isdir()):
            problems.append(f"{m.name}: not a regular file (a link of the repository must arrive as the file it names)")
        names.add(m.name[len(top):])
    pkg = t.extractfile(top + "PKG-INFO").read().decode()
meta = dict(l.split(": ", 1) for l in pkg.splitlines() if ": " in l and not l.startswith(" "))
if meta.get("Name") != "gpumon-memory" or meta.get("Version") != ver:
    problems.append(f"PKG-INFO says {meta.get('Name')} {meta.get('Version')}, want gpumon-memory {ver}")
need = {"pyproject.toml", "python/README.md", "python/gpumon/__init__.py", "python/gpumon/__main__.py"}
# cargo's own bookkeeping, which only a .crate has.
crate = {l for l in open(listing).read().split() if l not in ("Cargo.toml.orig", ".cargo_vcs_info.json")}
missing = sorted((need | crate) - names)
if missing:
    problems.append("missing: " + ", ".join(missing))
for p in problems:
    print(f"sdist check: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"sdist check: ok ({len(names)} files, the crate's {len(crate)} among them)")
EOF
echo "build_sdist: $sdist ($(du -k "$sdist" | cut -f1) kB)"
