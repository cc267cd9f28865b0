#!/usr/bin/env bash
# The foresight corpus and the job corpus, recorded at once on one H200, and what
# gpumon.epoch() costs BERT-base processes sharing that busy card (the companion at HEAD~
# in $D/py_old against the tree's, two processes each).
#   corpus4.jsonl.gz  every scenario4.py run (companions in one socket directory)
#   jobs.jsonl.gz     four data-parallel jobs of scripts/gpu/jobs/job.py (another directory)
#   truth4.jsonl, truth_jobs.jsonl, epoch_cost.jsonl
# usage (on the GPU machine):  D=devbin scripts/gpu/corpus4/run_corpus4.sh
set -uo pipefail
OUT=${OUT:?set OUT}
R=$(pwd)
D=$(cd "${D:-devbin}" && pwd)
B=$D/gpumon
REC_S=${REC_S:-330}
W=$(mktemp -d /tmp/corpus4.XXXXXX)
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 GPUMON_SNAPSHOT_S=2 NCCL_NVLS_ENABLE=0 \
       TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version --format=csv,noheader
mkdir -m 700 "$W/sock" "$W/jsock"
timeout $((REC_S + 20)) "$B" record -o "$W/corpus4.jsonl" --interval 200ms \
    --socket-dir "$W/sock" --duration "${REC_S}s" >"$W/rec.log" 2>&1 &
REC=$!
timeout $((REC_S + 20)) "$B" record -o "$W/jobs.jsonl" --interval 250ms \
    --socket-dir "$W/jsock" --duration "${REC_S}s" >"$W/recj.log" 2>&1 &
RECJ=$!
sleep 1
S=$R/scripts/gpu/corpus4
NAMES=$(python3 -c "import sys; sys.path.insert(0, '$S'); import scenario4; print(' '.join(sorted(scenario4.SCENARIOS)))")
for name in $NAMES; do
    env GPUMON_DIR=$W/sock PYTHONPATH=$R/python timeout -k 3 $((REC_S - 5)) \
        python3 "$S/scenario4.py" --name "$name" --seconds $((REC_S - 15)) \
        >"$W/$name.out" 2>"$W/$name.err" &
done
J=$R/scripts/gpu/jobs/job.py
EP=$((REC_S - 60))
jobrun() { local name=$1; shift; env GPUMON_DIR=$W/jsock PYTHONPATH=$R/python timeout -k 3 $((REC_S - 5)) "$@" >"$W/job_$name.out" 2>"$W/job_$name.err" & }
jobrun spawn_clean python3 "$J" --spawn 2 --epochs $EP --port 29511 --seed 1
jobrun spawn_leak python3 "$J" --spawn 2 --epochs $EP --port 29512 --seed 2 --leak-rank 1 --leak-mib 24 --leak-from 10
jobrun torchrun_extra python3 -m torch.distributed.run --nproc-per-node 3 --master-port 29513 "$J" --epochs $EP --seed 3 --extra-rank 0 --extra-mib 512
jobrun torchrun_leak0 python3 -m torch.distributed.run --nproc-per-node 2 --master-port 29514 "$J" --epochs $EP --seed 4 --leak-rank 0 --leak-mib 12 --leak-from 20 --batch 384
sleep 45
say "epoch cost: two BERT processes of each companion"
for tag in old new old new; do
    if [ $tag = old ]; then PP=$D/py_old; else PP=$R/python; fi
    env GPUMON_DIR=$W/sock PYTHONPATH=$PP timeout -k 3 $((REC_S - 60)) \
        python3 "$R/bench/epoch_cost.py" --epochs 60 --steps 6 --tag $tag \
        >>"$W/epoch_cost.jsonl" 2>>"$W/epoch_cost.err" &
done
sleep 30; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/smi: /'
wait $REC; say "recorder rc=$?"; wait $RECJ; say "job recorder rc=$?"
wait
say "all done"
collect() {  # truth lines of the *.out files matching $1 into $2
    python3 - "$W" "$1" "$2" <<'PY'
import glob, json, os, sys
w, pat, dst = sys.argv[1:]
with open(dst, "w") as out:
    for f in sorted(glob.glob(os.path.join(w, pat))):
        for line in open(f, errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            r.setdefault("file", os.path.basename(f))
            out.write(json.dumps(r, separators=(",", ":")) + "\n")
PY
}
cd "$W"
mkdir -p keep
collect "[!j]*.out" keep/truth4.jsonl
collect "job_*.out" keep/truth_jobs.jsonl
cp epoch_cost.jsonl epoch_cost.err keep/ 2>/dev/null
for f in *.err rec.log recj.log; do echo "== $f"; tail -n 4 "$f" | cut -c1-300; done > keep/logs.txt
gzip -c corpus4.jsonl > keep/corpus4.jsonl.gz; gzip -c jobs.jsonl > keep/jobs.jsonl.gz
python3 - keep/truth4.jsonl <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "truth":
        print("truth", r.get("scenario"), r.get("pid"), r.get("ok"), r.get("epochs"),
              {k: r.get(k) for k in ("oom_epoch", "error") if r.get(k) is not None})
PY
python3 -c "
import json
for l in open('keep/epoch_cost.jsonl'):
    r=json.loads(l); r.pop('calls_ms'); print(r)
" 2>&1
tar czf "$OUT/c4.tar.gz" keep; ls -l keep "$OUT"; say total
