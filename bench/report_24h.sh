#!/usr/bin/env bash
# `gpumon report` on a 24-hour recording (86,400 ticks at 1 s, 2 GPUs, 8 processes with a
# PyTorch companion each: bench/report_24h.py) with the release build: wall time, peak RSS
# and the page's size. Target: under 5 s and 300 MB. Also prints the same for the bundled
# recordings. Not a timed test: figures go to the README.
# usage: bench/report_24h.sh [HOURS]   (builds the release binary if needed;
#        GPUMON=path/to/gpumon times that binary instead, e.g. an older build to compare)
set -euo pipefail
cd "$(dirname "$0")/.."
hours=${1:-24}
bin=${GPUMON:-./target/release/gpumon}
[ -n "${GPUMON:-}" ] || cargo build --release -q
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
python3 bench/report_24h.py "$W/run.gpumon.jsonl" "$hours"
printf '%s: %s lines, %s MB\n' "${hours} h recording" "$(wc -l < "$W/run.gpumon.jsonl")" \
    "$(( $(stat -c %s "$W/run.gpumon.jsonl") / 1000000 ))"
# CPU (user) is the figure that transfers between machines; wall time depends on the load.
run() {
    /usr/bin/time -f "%U %e %M" -o "$W/time" "$bin" report "$1" -o "$W/page.html" 2>/dev/null
    read -r user secs kb < "$W/time"
    printf '%-40s CPU %6.2f s  wall %6.2f s  peak RSS %4d MB  page %5d kB\n' "$(basename "$1")" \
        "$user" "$secs" $((kb / 1024)) $(( $(stat -c %s "$W/page.html") / 1000 ))
}
for i in 1 2 3; do run "$W/run.gpumon.jsonl"; done
for f in assets/*.gpumon.jsonl.gz; do run "$f"; done
