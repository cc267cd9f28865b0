#!/bin/bash
# The one companion-cost target 2026-12-03-cost left open: BERT-base's watched A/B upper
# bound <= 1 %. Only the modes that decide it (off, its A/A off2, watched) so each gets 2.5
# times the rounds of 12-03's five-mode run in one device call; the A/B stops after the round
# that passes MAX_S so that the time limit still leaves a result.
# From the repository root:  OUT=dir bash docs/measurements/2026-12-04-bert/run.sh
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
res=$OUT/bert; mkdir -p $res
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv
  python3 -c "import torch,transformers,numpy;print(torch.__version__,transformers.__version__,numpy.__version__)"
  nproc; uname -r; python3 -V; git rev-parse HEAD 2>/dev/null; } > $res/env.txt 2>&1
timeout ${BERT_S:-585} python3 bench/companion_overhead.py --workload bert --modes off,off2,watched \
  --rounds 5000 --max-seconds ${MAX_S:-500} --skip-probe --out $res/bert.json > $res/bert.txt 2>&1
echo "rc $?" >> $res/bert.txt
grep -v "^gpumon selftime" $res/bert.txt | tail -14 | cut -c1-230
tar czf $OUT/bert.tgz -C $OUT bert
