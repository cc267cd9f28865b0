#!/bin/bash
# How the binaries of this folder's runs were made (repository root, rustc 1.95.0, main at bda1cbf).
#   os: target/release/gpumon as built from main (opt-level "s", scripts/link-order.txt).
#   o2, o3: the same tree at opt-level 2 / 3, in target dirs of their own. The profile is in
#   cargo's -C metadata, so every crate hash, and with it every name in scripts/link-order.txt,
#   changes: translate.py carries the list over by demangled name (hashes dropped) from the
#   first build's linker map, and the binary is linked again with it (`cargo rustc` arguments
#   are not in the metadata: names stay).
set -eux
mkdir -p target/opt/bin
cp target/release/gpumon target/opt/bin/os; cp target/release/gpumon target/opt/bin/osAA
for o in 3 2; do
    CARGO_PROFILE_RELEASE_OPT_LEVEL=$o GPUMON_LINK_MAP=$PWD/target/opt/map-o$o.txt \
        cargo build --release --locked --bin gpumon --target-dir target/o$o
    python3 docs/measurements/2026-12-02-optlevel/translate.py scripts/link-order.txt \
        target/opt/map-o$o.txt > target/opt/order-o$o.txt
    GPUMON_NO_LINK_ORDER=1 CARGO_PROFILE_RELEASE_OPT_LEVEL=$o cargo rustc --release --locked \
        --bin gpumon --target-dir target/o$o -- \
        -C link-arg=-Wl,--symbol-ordering-file=$PWD/target/opt/order-o$o.txt \
        -C link-arg=-Wl,--no-warn-symbol-ordering
    cp target/o$o/release/gpumon target/opt/bin/o$o
done
