#!/usr/bin/env bash
# One GPU-machine call for the companion, the alert corpus, several GPUs and the monitor
# benchmark. Everything lands in $OUT/results.tgz (the machine returns few files).
# On a 2-GPU machine the corpus runs on GPU 1 and the companion checks on GPU 0.
set -uo pipefail
W=$(mktemp -d); mkdir -p $W/corpus $W/companion $W/cvd $W/bench
ngpu=$(nvidia-smi -L | wc -l); echo "GPUs: $ngpu"; nvidia-smi -L
corpus_gpu=$((ngpu > 1 ? 1 : 0))
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
(CUDA_VISIBLE_DEVICES=$corpus_gpu OUT=$W/corpus scripts/gpu/corpus/run_corpus.sh > $W/corpus/log.txt 2>&1) &
corpus=$!
(bench/monitor_overhead.sh 60 > $W/bench/overhead.txt 2>&1) &
bench=$!
(CUDA_VISIBLE_DEVICES=0 timeout 200 python3 scripts/gpu/companion_check.py --out $W/companion > $W/companion/check.txt 2>&1; echo "check rc=$?" >> $W/companion/check.txt) 
tail -5 $W/companion/check.txt
wait $corpus
tail -15 $W/corpus/log.txt
if [ "$ngpu" -gt 1 ]; then (timeout 80 scripts/gpu/multi_gpu_cvd.sh $W/cvd > $W/cvd/log.txt 2>&1) & cvd=$!; fi
(CUDA_VISIBLE_DEVICES=0 timeout 220 python3 bench/companion_overhead.py --out $W/companion/overhead.json > $W/companion/overhead.txt 2>&1; echo "bench rc=$?" >> $W/companion/overhead.txt)
wait $bench; [ -n "${cvd:-}" ] && wait $cvd
cat $W/bench/overhead.txt; tail -25 $W/companion/overhead.txt; cat $W/cvd/log.txt 2>/dev/null | tail -15
tar czf $OUT/results.tgz -C $W .
ls -la $OUT
