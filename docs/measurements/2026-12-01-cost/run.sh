#!/bin/bash
# The companion's and the monitor's cost, one device call: the monitor side by side (in the
# background, during the small model's A/B), then the companion A/B + direct bound on the small model and on BERT-base.
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv
  python3 -c "import torch,transformers,numpy;print(torch.__version__,transformers.__version__,numpy.__version__)"
  nproc; uname -r; python3 -V; } > $OUT/env.txt 2>&1
( sleep 25; GPUMON=$PWD/gpumon-new GPUMON_BASE=$PWD/gpumon-base HOLD=$PWD/scripts/gpu/hold.py \
    bash bench/monitor_overhead.sh 90 > $OUT/monitor_overhead_90s.txt 2>&1 ) &
mon=$!
# The one-call process list must list what the wrapper's two calls listed (hold.py's pid).
( sleep 45; for b in base new; do echo "== gpumon-$b snapshot"; ./gpumon-$b snapshot 2>&1 | head -40; done > $OUT/snapshot.txt 2>&1 ) &
timeout 240 python3 bench/companion_overhead.py --workload mlp --rounds 650 --out $OUT/mlp.json > $OUT/mlp.txt 2>&1
wait $mon
timeout 230 python3 bench/companion_overhead.py --workload bert --rounds 270 --out $OUT/bert.json > $OUT/bert.txt 2>&1
head -60 $OUT/snapshot.txt | cut -c1-160
for f in monitor_overhead_90s mlp bert; do echo "== $f"; grep -v "^gpumon selftime" $OUT/$f.txt | tail -22 | cut -c1-230; done
