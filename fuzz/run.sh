#!/usr/bin/env bash
# Build the fuzz targets and run each for a bounded time; prints libFuzzer's
# execution counts (docs/fuzzing.md records them).
#   fuzz/run.sh [SECONDS_PER_TARGET]   (default 60)
# Uses `cargo fuzz` when installed (RUSTC_BOOTSTRAP=1 makes it work on stable);
# otherwise builds with the same coverage flags by hand (with --target, as
# cargo fuzz does, so build scripts are not instrumented). No sanitizer (the
# equivalent of `cargo fuzz -s none`): the code under test is safe Rust.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
targets=(wire_decode recording_reader http_request report_reader)
export RUSTC_BOOTSTRAP=1
# recording_reader and report_reader write each input to a temp file: in memory it runs ~3x faster.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
if cargo fuzz --version >/dev/null 2>&1; then
    for t in "${targets[@]}"; do cargo fuzz build -s none -O "$t"; done
    bin=target/x86_64-unknown-linux-gnu/release
else
    RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions" \
        cargo build --release --bins --target x86_64-unknown-linux-gnu
    bin=target/x86_64-unknown-linux-gnu/release
fi
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    "$bin/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" -max_total_time="$secs" \
        -max_len=65536 -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|stat::peak_rss_mb|ERROR|panicked|crash-" | sed "s/^/$t: /"
done
