#!/usr/bin/env bash
# The whole test suite: Rust (workspace: gpumon + the LD_PRELOAD interposer), the Python
# companion, and both installs. Needs cargo and python3 (with venv); tmux- and
# Prometheus-, Chromium-, man- and fish-based tests skip when those are missing unless
# GPUMON_REQUIRE_TMUX / _PROMETHEUS / _CHROMIUM / _MAN / _FISH are set, and so do the W&B /
# TensorBoard ones without those packages (_WANDB / _TENSORBOARD); the aarch64 wheel is
# skipped without its rustup target unless GPUMON_REQUIRE_AARCH64 is (.ci/run sets them all).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import pytest" 2>/dev/null; then
    python3 -m pip install -q --user pytest 2>/dev/null || python3 -m pip install -q pytest
fi
cargo test --workspace --locked
python3 -m pytest -q python/tests
# The two ways users install gpumon, used as a user would from outside the tree: `cargo
# install` (scripts/install_check.sh) and the Python wheel in a fresh venv
# (scripts/wheel_check.sh; it pip-installs maturin into a venv of its own, and also builds
# the aarch64 wheel and the sdist). Between them, the published crate built the way
# distributions build it: vendored, offline (scripts/offline_check.sh).
scripts/install_check.sh
scripts/offline_check.sh
scripts/wheel_check.sh
