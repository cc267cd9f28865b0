#!/usr/bin/env bash
# The cluster view at scale, on one machine: NODES exporters (`gpumon serve --replay` of an
# 8-GPU node made from a real H200 recording, each under its own --node name) scraped by a
# real Prometheus every SCRAPE; `gpumon --prometheus` in a 200x60 tmux pane for SECS, next
# to a local `gpumon replay` of one such node (the local monitor's cost, side by side).
# Writes figures and screens into OUT.
#
#   bench/fleet/run.sh [OUT]   (NODES=128 SCRAPE=5s REFRESH=5s SECS=120 BIN=target/release/gpumon)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/fleet-bench}
NODES=${NODES:-128}
SCRAPE=${SCRAPE:-5s}
REFRESH=${REFRESH:-5s}
SECS=${SECS:-120}
BIN=${BIN:-target/release/gpumon}
BASE=${BASE:-21000}
rm -rf "$OUT" && mkdir -p "$OUT"
python3 bench/fleet/make_node.py assets/demo-leaks.gpumon.jsonl.gz "$OUT/node8.gpumon.jsonl" --until-s 60
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    tmux -L fleetbench kill-server 2>/dev/null || true
}
trap cleanup EXIT
targets=""
for i in $(seq 1 "$NODES"); do
    port=$((BASE + i))
    name=$(printf "gpu-%03d" "$i")
    "$BIN" serve --replay "$OUT/node8.gpumon.jsonl" --node "$name" --listen "127.0.0.1:$port" \
        >/dev/null 2>&1 &
    pids+=($!)
    targets+="'127.0.0.1:$port',"
done
cat >"$OUT/prometheus.yml" <<YML
global:
  scrape_interval: $SCRAPE
  scrape_timeout: 5s
scrape_configs:
  - job_name: gpumon
    static_configs:
      - targets: [${targets%,}]
YML
prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/data" \
    --web.listen-address=127.0.0.1:$((BASE)) --log.level=warn 2>"$OUT/prometheus.log" &
pids+=($!)
prom=127.0.0.1:$BASE
for _ in $(seq 1 120); do
    n=$(curl -s "http://$prom/api/v1/query?query=count(gpumon_up)" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null || echo 0)
    [ "$n" = "$NODES" ] && break
    sleep 1
done
echo "nodes up in Prometheus: $n of $NODES" | tee "$OUT/figures.txt"
series=$(curl -s -G --data-urlencode 'query=count({__name__=~"gpumon_.+"})' "http://$prom/api/v1/query" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
echo "gpumon series in Prometheus: $series" | tee -a "$OUT/figures.txt"
T="tmux -L fleetbench"
$T new-session -d -s fleet -x 200 -y 60 "env LANG=C.UTF-8 TERM=xterm-256color $BIN --prometheus http://$prom --prometheus-refresh $REFRESH; sleep 600"
$T new-session -d -s local -x 200 -y 60 "env LANG=C.UTF-8 TERM=xterm-256color $BIN replay --speed 1 $OUT/node8.gpumon.jsonl; sleep 600"
sleep 3
# The gpumon processes themselves, not the shells tmux started them from.
fpid=$(pgrep -f -- "^$BIN --prometheus http://$prom" | head -1)
lpid=$(pgrep -f -- "^$BIN replay --speed 1 $OUT/node8" | head -1)
echo "measuring PIDs $fpid (--prometheus) and $lpid (local replay)" | tee -a "$OUT/figures.txt"
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
c0f=$(cpu "$fpid"); c0l=$(cpu "$lpid")
: >"$OUT/rounds.txt"
for s in $(seq 1 "$SECS"); do
    sleep 1
    $T capture-pane -p -t fleet | sed -n 2p >>"$OUT/rounds.txt"
    [ "$s" = 20 ] && $T capture-pane -p -t fleet >"$OUT/screen-200x60.txt"
done
c1f=$(cpu "$fpid"); c1l=$(cpu "$lpid")
hwmf=$(awk '/VmHWM/{print $2}' "/proc/$fpid/status"); hwml=$(awk '/VmHWM/{print $2}' "/proc/$lpid/status")
rssf=$(awk '/VmRSS/{print $2}' "/proc/$fpid/status"); rssl=$(awk '/VmRSS/{print $2}' "/proc/$lpid/status")
python3 - "$OUT" "$SECS" "$ticks" "$c0f" "$c1f" "$c0l" "$c1l" "$hwmf" "$rssf" "$hwml" "$rssl" <<'PY' | tee -a "$OUT/figures.txt"
import re, statistics, sys
out, secs, ticks, c0f, c1f, c0l, c1l, hwmf, rssf, hwml, rssl = sys.argv[1:]
secs, ticks = int(secs), int(ticks)
took, size = [], []
for line in open(f"{out}/rounds.txt"):
    m = re.search(r"· (\d+) ms, ([\d.]+) (KiB|MiB|B)\b", line)
    if m:
        took.append(int(m.group(1)))
        size.append(float(m.group(2)) * {"B": 1 / 1024, "KiB": 1, "MiB": 1024}[m.group(3)])
q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))]
print(f"one refresh (as the summary line shows it, {len(took)} readings): "
      f"query time p50 {q(took, .5)} ms, p90 {q(took, .9)} ms, max {max(took)} ms; "
      f"on the wire p50 {q(size, .5):.0f} KiB")
f = (int(c1f) - int(c0f)) / ticks
l = (int(c1l) - int(c0l)) / ticks
print(f"gpumon --prometheus: CPU {f:.2f} s in {secs} s ({100 * f / secs:.2f} %), "
      f"RSS {int(rssf) / 1024:.1f} MB, peak {int(hwmf) / 1024:.1f} MB")
print(f"local gpumon replay of one 8-GPU node: CPU {l:.2f} s in {secs} s ({100 * l / secs:.2f} %), "
      f"RSS {int(rssl) / 1024:.1f} MB, peak {int(hwml) / 1024:.1f} MB")
PY
# What the queries cost Prometheus (its own /metrics: this Prometheus does not scrape itself).
curl -s "http://$prom/metrics" | grep -E '^prometheus_(engine_query_duration_seconds|http_request_duration_seconds_(sum|count)\{handler="/api/v1/query(_range)?"\})' |
    grep -E 'quantile="0.(5|9|99)"|_sum|_count' >"$OUT/prometheus-costs.txt" || true
cat "$OUT/prometheus-costs.txt" | tee -a "$OUT/figures.txt"
# One fleet answer as it travels, for a parse measurement without Prometheus.
curl -s -G -H 'Accept-Encoding: gzip' --data-urlencode \
    'query={__name__=~"gpumon_(info|up|gpu_info|gpu_up|gpu_memory_(total|used)_bytes|gpu_utilization_ratio|process_gpu_memory_used_bytes|alert|alert_exhaustion_seconds)"}' \
    "http://$prom/api/v1/query" -o "$OUT/fleet-answer.json.gz"
echo "fleet answer: $(stat -c %s "$OUT/fleet-answer.json.gz") bytes gzipped, $(gzip -dc "$OUT/fleet-answer.json.gz" | wc -c) inflated" | tee -a "$OUT/figures.txt"
# The screen a person works with at this scale: the worst first, a selector, a node opened.
$T send-keys -t fleet "/" ; sleep 0.3
$T send-keys -t fleet -l "node=gpu-00*"; $T send-keys -t fleet Enter; sleep 2
$T capture-pane -p -t fleet >"$OUT/screen-selected.txt"
$T send-keys -t fleet "/" Escape; sleep 1; $T send-keys -t fleet Enter; sleep 6
$T capture-pane -p -t fleet >"$OUT/screen-node.txt"
$T resize-window -t fleet -x 80 -y 24 2>/dev/null || true
$T send-keys -t fleet Escape; sleep 2
$T capture-pane -p -t fleet >"$OUT/screen-80x24.txt"
