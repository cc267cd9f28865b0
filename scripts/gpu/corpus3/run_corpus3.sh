#!/usr/bin/env bash
# The third alert corpus (tests/corpus3/): every scenario of scenario3.py at once on one H200,
# one `gpumon record` capturing them all (companion data of every run, NVML of the card).
#   corpus3.jsonl   the recording
#   truth3.jsonl    ground truth written by each run itself (never gpumon's output)
# usage (on the GPU machine):  D=.dev-signals scripts/gpu/corpus3/run_corpus3.sh
#   $D/bin/gpumon, $D/python (the companion package), $D/corpus3 (this folder); writes into $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
D=$(cd "${D:-.dev-signals}" && pwd)
B=$D/bin/gpumon
S=$D/corpus3
REC_S=${REC_S:-250}
W=$(mktemp -d /tmp/corpus3.XXXXXX)
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
export PYTHONPATH=$D/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 \
       NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
       GPUMON_SNAPSHOT_S=2
[ -x "$B" ] || { echo "no gpumon at $B"; exit 2; }
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader
mkdir -m 700 "$W/sock"
timeout $((REC_S + 15)) "$B" record -o "$OUT/corpus3.jsonl" --interval 1s \
    --socket-dir "$W/sock" --duration "${REC_S}s" >"$W/rec.log" 2>&1 &
REC=$!
sleep 1
kill -0 $REC 2>/dev/null || { echo "recorder died:"; cat "$W/rec.log"; exit 3; }
NAMES=$(python3 -c "import sys; sys.path.insert(0, '$S'); import scenario3; print(' '.join(sorted(scenario3.SCENARIOS)))")
for name in $NAMES; do
    env GPUMON_DIR=$W/sock timeout -k 3 $((REC_S - 2)) \
        python3 "$S/scenario3.py" --name "$name" --seconds $((REC_S - 10)) \
        >"$W/$name.out" 2>"$W/$name.err" &
done
sleep 60; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/smi: /'
wait $REC; say "recorder rc=$?"
wait
python3 - "$W" "$OUT/truth3.jsonl" <<'PY'
import glob, json, os, sys
w, dst = sys.argv[1], sys.argv[2]
with open(dst, "w") as out:
    for f in sorted(glob.glob(os.path.join(w, "*.out"))):
        for line in open(f, errors="replace"):
            line = line.strip()
            try:
                json.loads(line)
            except ValueError:
                continue
            out.write(line + "\n")
    for f in sorted(glob.glob(os.path.join(w, "*.err")) + glob.glob(os.path.join(w, "*.log"))):
        out.write(json.dumps({"type": "log", "scenario": os.path.basename(f).rsplit(".", 1)[0],
                              "tail": open(f, errors="replace").read()[-2000:]}) + "\n")
for line in open(dst):
    r = json.loads(line)
    if r.get("type") == "truth":
        print("truth", r["scenario"], r["pid"], r.get("ok"), r.get("epochs"),
              {k: r.get(k) for k in ("oom_epoch", "oom_stats", "oom_holes_fitting",
                                       "oom_largest_free", "error") if r.get(k) is not None})
PY
for f in "$W"/*.err; do echo "== $(basename "$f")"; tail -n 3 "$f" | cut -c1-300; done
tail -n 5 "$W/rec.log"
gzip -k "$OUT/corpus3.jsonl"; ls -l "$OUT"; say total
