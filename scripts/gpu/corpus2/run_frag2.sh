#!/usr/bin/env bash
# Second pass of the second alert corpus: its fragmentation runs that end in a fragmentation OOM
# (frag_curriculum, frag_curriculum_b) and the bundled demo recording re-made with a
# GPU 1 run that fragments towards an OOM (demo_frag2), all at once:
#   demo2.gpumon.jsonl  one recorder, both GPUs: demo_leak (GPU 0), demo_frag2 (GPU 1)
#   corpus3.jsonl       its own socket directory: frag_curriculum (GPU 0), frag_curriculum_b (GPU 1)
#   truth3.jsonl        ground truth of every run
# usage: D=.dev-alerts scripts/gpu/corpus2/run_frag2.sh   (writes into $OUT)
set -uo pipefail
OUT=${OUT:?set OUT}
D=$(cd "${D:-.dev-alerts}" && pwd)
B=$D/bin/gpumon
S=$D/corpus2
REC_S=${REC_S:-165}
W=$(mktemp -d /tmp/frag2.XXXXXX)
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
export PYTHONPATH=$D/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 \
       TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -m 700 "$W/sock_demo" "$W/sock_f"
timeout $((REC_S + 15)) "$B" record -o "$OUT/demo2.gpumon.jsonl" --interval 1s \
    --socket-dir "$W/sock_demo" --duration "$REC_S" >"$W/rec_demo.log" 2>&1 &
R1=$!
timeout $((REC_S + 15)) "$B" record -o "$OUT/corpus3.jsonl" --interval 1s \
    --socket-dir "$W/sock_f" --duration "$REC_S" >"$W/rec_f.log" 2>&1 &
R2=$!
sleep 1
run() {  # run NAME GPU SOCKDIR [ENV...]
    local name=$1 gpu=$2 sock=$3; shift 3
    env CUDA_VISIBLE_DEVICES=$gpu GPUMON_DIR=$W/$sock "$@" timeout -k 3 $((REC_S + 5)) \
        python3 "$S/scenario2.py" --name "$name" --seconds $((REC_S - 8)) ${CORPUS_DRY:+--dry-run} \
        >"$W/$name.out" 2>"$W/$name.err" &
}
run demo_leak 0 sock_demo
run demo_frag2 1 sock_demo GPUMON_SNAPSHOT_S=2
run frag_curriculum 0 sock_f
run frag_curriculum_b 1 sock_f
sleep $((REC_S / 3)); nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/smi: /'
wait $R1; wait $R2; say "recorders done"
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
                              "tail": open(f, errors="replace").read()[-3000:]}) + "\n")
for line in open(dst):
    r = json.loads(line)
    if r.get("type") == "truth":
        print("truth", r["scenario"], r["pid"], r.get("ok"),
              {k: r.get(k) for k in ("epochs", "oom_epoch", "free_total", "largest_free", "retries",
                                       "request", "burst_blocks", "error") if r.get(k) is not None})
PY
for f in "$W"/*.err; do echo "== $(basename "$f")"; tail -n 4 "$f" | cut -c1-400; done
ls -l "$OUT"; say total
