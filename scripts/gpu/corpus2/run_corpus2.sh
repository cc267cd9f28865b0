#!/usr/bin/env bash
# The second alert corpus (tests/corpus2/) and the bundled demo recording, on a machine with two
# GPUs, in one command of under ten minutes:
#   1. demo (DEMO_S): one `gpumon record` of both GPUs; GPU 0 an LM leaking across epochs,
#      GPU 1 a run whose cache fragments under a cap           -> demo.gpumon.jsonl
#   2. corpus (CORPUS_S): every scenario of scenario2.py and leak.cu at once, one recorder
#      per GPU (its own socket directory: companion data of that GPU's runs only; NVML data
#      of both)                                                 -> corpus2_gpu0/1.jsonl
#   3. bench/companion_overhead.py, short (the companion's cost) -> bench.json
# Ground truth of every run (its own knowledge, never gpumon's output) -> truth2.jsonl.
# Recordings go straight to $OUT, so a run stopped at its limit still returns them.
# CORPUS_DRY=1 (with short DEMO_S/CORPUS_S/BENCH_S): scenarios with --dry-run, to check the
# plumbing on a machine without a GPU.
#
# usage (on the GPU machine):  D=.dev-alerts scripts/gpu/corpus2/run_corpus2.sh
#   $D/bin/gpumon, $D/bin/libgpumon_preload.so, $D/python (the companion package),
#   $D/corpus2 (this folder), $D/bench; writes into $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
D=${D:-.dev-alerts}
D=$(cd "$D" && pwd)
B=$D/bin/gpumon
S=$D/corpus2
DEMO_S=${DEMO_S:-170}
CORPUS_S=${CORPUS_S:-310}
BENCH_S=${BENCH_S:-55}
W=$(mktemp -d /tmp/corpus2.XXXXXX)
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
export PYTHONPATH=$D/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 \
       TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       HF_DATASETS_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
       NVSHMEM_DISABLE_NVLS=1 GPUMON_PRELOAD=$D/bin/libgpumon_preload.so
[ -x "$B" ] || { echo "no gpumon at $B"; exit 2; }
nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader
( timeout 120 nvcc -O2 -o "$W/leak" "$S/leak.cu" -ldl >"$W/nvcc.log" 2>&1; echo "nvcc rc=$?" >>"$W/nvcc.log" ) &
NVCC=$!

# ------------------------------------------------------------------ 1. demo
mkdir -m 700 "$W/sock_demo"
say "demo: recording ${DEMO_S}s"
timeout $((DEMO_S + 15)) "$B" record -o "$OUT/demo.gpumon.jsonl" --interval 1s \
    --socket-dir "$W/sock_demo" --duration "$DEMO_S" >"$W/rec_demo.log" 2>&1 &
REC_DEMO=$!
sleep 1
for pair in "demo_leak 0" "demo_frag 1"; do
    set -- $pair
    CUDA_VISIBLE_DEVICES=$2 GPUMON_DIR=$W/sock_demo GPUMON_SNAPSHOT_S=2 \
        timeout -k 3 $((DEMO_S - 2)) python3 "$S/scenario2.py" --name "$1" --seconds $((DEMO_S - 8)) ${CORPUS_DRY:+--dry-run} \
        >"$W/$1.out" 2>"$W/$1.err" &
done
sleep $((DEMO_S / 3)); nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/smi demo: /'
wait $REC_DEMO; say "demo recorder rc=$?"
wait   # demo scenarios and nvcc
cat "$W/nvcc.log"

# ------------------------------------------------------------------ 2. corpus
C0=$(date +%s)
END=$((C0 + CORPUS_S))
for g in 0 1; do
    mkdir -m 700 "$W/sock_g$g"
    timeout $((CORPUS_S + 15)) "$B" record -o "$OUT/corpus2_gpu$g.jsonl" --interval 1s \
        --socket-dir "$W/sock_g$g" --duration "$CORPUS_S" >"$W/rec_g$g.log" 2>&1 &
    eval "REC$g=\$!"
done
sleep 1
launch() {  # launch NAME GPU SECONDS [ENV=VALUE...]
    local name=$1 gpu=$2 secs=$3; shift 3
    env CUDA_VISIBLE_DEVICES=$gpu GPUMON_DIR=$W/sock_g$gpu "$@" timeout -k 3 $((secs + 25)) \
        python3 "$S/scenario2.py" --name "$name" --seconds "$secs" ${CORPUS_DRY:+--dry-run} \
        >"$W/$name.out" 2>"$W/$name.err" &
}
native() {  # native NAME GPU SECONDS ARGS... (through `gpumon run`: the interposer only)
    local name=$1 gpu=$2 secs=$3; shift 3
    env CUDA_VISIBLE_DEVICES=$gpu GPUMON_DIR=$W/sock_g$gpu GPUMON_DISABLE=1 ${NATIVE_ENV:-} \
        timeout -k 3 $((secs + 20)) "$B" run -- "$W/leak" --name "$name" --seconds "$secs" "$@" \
        >"$W/$name.out" 2>"$W/$name.err" &
}
wait_grab() { for _ in $(seq 1 60); do grep -q '"type":"grabbed"' "$W/$1.out" 2>/dev/null && break; sleep 0.5; done
              say "$1: $(grep -h '"type":"grabbed"' "$W/$1.out" | cut -c1-120 || echo NOT grabbed)"; }
# grab-alls first, while the cards are empty
launch jax_grab_default 0 $((CORPUS_S - 15))
launch jax_grab_half 1 130 XLA_PYTHON_CLIENT_MEM_FRACTION=0.5
GRAB_HALF=$!
wait_grab jax_grab_default; wait_grab jax_grab_half
S_RUN=$((END - $(date +%s) - 12)); [ "$S_RUN" -lt 30 ] && S_RUN=30
say "corpus: runs of ${S_RUN}s"
# GPU 0
launch metric_list_leak 0 $S_RUN
launch clean_gpt2_trainer 0 $S_RUN
launch frag_fill 0 $S_RUN
launch clean_nvml_only 0 $S_RUN GPUMON_DISABLE=1
launch nvml_only_leak 0 $S_RUN GPUMON_DISABLE=1
launch cupy_epochs_leak 0 $S_RUN
launch cpu_only_epochs 0 $S_RUN
# GPU 1
launch vit_cache_leak 1 $S_RUN
launch clean_vit 1 $S_RUN
launch gpt2_trainer_leak 1 $S_RUN
launch jax_leak 1 $S_RUN XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.01
launch clean_flax_prealloc 1 $S_RUN XLA_PYTHON_CLIENT_MEM_FRACTION=0.06
launch frag_varsize 1 $S_RUN
launch clean_capped_varsize 1 $S_RUN
wait $NVCC 2>/dev/null
if [ -x "$W/leak" ]; then
    native native_leak 0 $S_RUN --step-ms 500 --leak-mib 6 --onset-s 20
    native native_leak_epochs 1 $S_RUN --step-ms 500 --leak-mib 6 --onset-epoch 10 --epoch-steps 4
    NATIVE_ENV=GPUMON_EPOCH_SIGNAL=USR2 native clean_native 1 $S_RUN --step-ms 500
    ( # epoch markers from a shell: `kill -USR2 PID` every 2 s (the pid the program printed)
      for _ in $(seq 1 40); do p=$(grep -ho '"pid":[0-9]*' "$W/clean_native.out" 2>/dev/null | head -1 | cut -d: -f2)
          [ -n "$p" ] && break; sleep 0.5; done
      n=0; while [ -n "${p:-}" ] && kill -0 "$p" 2>/dev/null; do sleep 2; kill -USR2 "$p" 2>/dev/null && n=$((n + 1)); done
      echo "{\"type\":\"signals\",\"scenario\":\"clean_native\",\"pid\":${p:-0},\"sent\":$n}" >"$W/clean_native_signals.out" ) &
else
    say "leak.cu did not build: native scenarios skipped"
fi
( wait $GRAB_HALF 2>/dev/null; while kill -0 $GRAB_HALF 2>/dev/null; do sleep 0.5; done
  left=$((END - $(date +%s) - 10)); [ "$left" -lt 20 ] && left=20; say "torch_cache_grab: ${left}s"
  launch torch_cache_grab 1 $left ) &
sleep $((CORPUS_S / 6)); nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/smi corpus+50s: /'
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader | sed 's/^/smi gpu: /'
wait $REC0; wait $REC1; say "corpus recorders done"
sleep 3
# ------------------------------------------------------------------ outputs
python3 - "$W" "$W/truth2.jsonl" <<'EOF'
import glob, json, os, sys
w, dst = sys.argv[1], sys.argv[2]
with open(dst, "w") as out:
    for f in sorted(glob.glob(os.path.join(w, "*.out"))):
        for line in open(f, errors="replace"):
            line = line.strip()
            if line.startswith("{"):
                out.write(line + "\n")
    for f in sorted(glob.glob(os.path.join(w, "*.err")) + glob.glob(os.path.join(w, "*.log"))):
        name = os.path.basename(f).rsplit(".", 1)[0]
        out.write(json.dumps({"type": "log", "scenario": name,
                              "tail": open(f, errors="replace").read()[-3000:]}) + "\n")
for line in open(dst):
    r = json.loads(line)
    if r["type"] == "truth":
        keys = ("epochs", "leak_onset_epoch", "oom_epoch", "oom_t_ms", "leak_onset_t_ms", "steps", "error")
        print("truth", r["scenario"], "pid", r["pid"], "ok", r.get("ok"),
              {k: r[k] for k in keys if r.get(k) is not None})
EOF
for f in "$W"/*.err "$W"/rec_*.log; do echo "== $(basename "$f")"; tail -n 3 "$f" | cut -c1-300; done
cp "$W/truth2.jsonl" "$OUT/"
# ------------------------------------------------------------------ 3. bench
say "bench"
CUDA_VISIBLE_DEVICES=0 timeout -k 3 "$BENCH_S" python3 "$D/bench/companion_overhead.py" \
    --steps 30 --rounds 4 --epoch-every 15 --epoch-calls 8 --out "$W/bench.json" >"$W/bench.log" 2>&1
say "bench rc=$?"; tail -n 14 "$W/bench.log"

[ -f "$W/bench.json" ] && cp "$W/bench.json" "$OUT/"
cp "$W/bench.log" "$OUT/bench.log" 2>/dev/null
ls -l "$OUT"
say "total"
