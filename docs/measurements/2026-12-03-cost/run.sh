#!/bin/bash
# The companion's cost, on the GPU machine, one device call: the companion A/B and direct bound
# (bench/companion_overhead.py) of the companion as it is now (it reports the largest free and
# live blocks and recurring requests since 2026-12-01's run) on the small model (with the
# probe of each framework call) and on BERT-base, BERT with more rounds than 12-01's 270 so that
# its A/A interval can come within +-1 %. From the repository root:  OUT=dir bash .../run.sh
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
res=$OUT/cost; mkdir -p $res
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv
  python3 -c "import torch,transformers,numpy;print(torch.__version__,transformers.__version__,numpy.__version__)"
  nproc; uname -r; python3 -V; git rev-parse HEAD 2>/dev/null; } > $res/env.txt 2>&1
timeout ${MLP_S:-170} python3 bench/companion_overhead.py --workload mlp --rounds ${MLP_ROUNDS:-420} \
  --out $res/mlp.json > $res/mlp.txt 2>&1
timeout ${BERT_S:-390} python3 bench/companion_overhead.py --workload bert --rounds ${BERT_ROUNDS:-620} \
  --skip-probe --out $res/bert.json > $res/bert.txt 2>&1
for f in mlp bert; do echo "== $f"; grep -v "^gpumon selftime" $res/$f.txt | tail -24 | cut -c1-230; done
tar czf $OUT/cost.tgz -C $OUT cost
