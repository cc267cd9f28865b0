#!/usr/bin/env bash
# The first alert-quality corpus (tests/corpus/): every scenario of scenario.py at once on one
# GPU, each group recorded by its own `gpumon record` with its own socket directory.
#
# usage (repo root, GPU machine, release binary built):  scripts/gpu/corpus/run_corpus.sh
# writes into $OUT:
#   corpus_clean.jsonl  clean_bert, clean_unfreeze, clean_jax
#   corpus_leak.jsonl   slow_leak, tiny_leak, fast_leak, leak_no_markers, leak_nvml_only
#   corpus_frag.jsonl   frag_oom, grab_all
#   corpus_truth.jsonl  every scenario's ground truth ({"type":"start"|"grabbed"|"truth"}) plus
#                       one {"type":"log"} line per scenario and recorder (stderr tail)
# Each recording holds NVML data for every process on the card but companion data only for
# its own group: judge a pid only in its group's recording (truth lines carry group and pid).
# Wall clock: CORPUS_BUDGET_S (default 145) seconds in all. CORPUS_DRY=1: scenarios with
# --dry-run (no framework; checks the plumbing on a machine without a GPU).
set -uo pipefail
OUT=${OUT:?set OUT to the output directory}
B=${GPUMON_BIN:-$PWD/target/release/gpumon}
S=$PWD/scripts/gpu/corpus
BUDGET=${CORPUS_BUDGET_S:-145}
T0=$(date +%s)
REC_S=$((BUDGET - 3))               # recorders stop at T0 + REC_S
HOLD=$((T0 + REC_S - 1))            # grab_all lets go just before the recorders stop
DEADLINE=$((T0 + REC_S - 9))        # training loops stop; truth lines and exits follow
W=$(mktemp -d /tmp/gpumon-corpus.XXXXXX)
[ -x "$B" ] || { echo "no gpumon binary at $B" >&2; exit 2; }
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 \
       TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

recs=()
for g in clean leak frag; do
    mkdir -m 700 "$W/sock_$g"
    "$B" record -o "$OUT/corpus_$g.jsonl" --interval 500ms --socket-dir "$W/sock_$g" \
        --duration "${REC_S}s" >"$W/rec_$g.log" 2>&1 &
    recs+=($!)
done

pids=()
launch() {  # launch NAME GROUP [ENV=VALUE...]
    local name=$1 group=$2; shift 2
    env GPUMON_DIR="$W/sock_$group" "$@" timeout -k 3 $((REC_S + 1)) \
        python3 "$S/scenario.py" --name "$name" --deadline "$DEADLINE" --hold-until "$HOLD" ${CORPUS_DRY:+--dry-run} \
        >"$W/$name.out" 2>"$W/$name.err" &
    pids+=($!)
}

# grab_all first: it takes ~80 % of the card while the card is still empty, the rest then
# fit in what is left (their caps add up to well under the remaining ~26 GiB).
launch grab_all frag
for _ in $(seq 1 60); do
    grep -q '"type":"grabbed"' "$W/grab_all.out" 2>/dev/null && break
    sleep 0.5
done
echo "grab_all: $(grep -h '"type":"grabbed"' "$W/grab_all.out" || echo 'NOT grabbed yet') at +$(($(date +%s) - T0)) s"

launch clean_bert clean
launch clean_unfreeze clean
launch clean_jax clean XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.015
launch slow_leak leak
launch tiny_leak leak
launch fast_leak leak
launch leak_no_markers leak
launch leak_nvml_only leak GPUMON_DISABLE=1
launch frag_oom frag

sleep 30
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | sed 's/^/smi +30s: /'
for p in "${pids[@]}"; do wait "$p"; done
echo "scenarios done at +$(($(date +%s) - T0)) s"
for p in "${recs[@]}"; do wait "$p"; done
echo "recorders done at +$(($(date +%s) - T0)) s"

python3 - "$W" "$OUT/corpus_truth.jsonl" <<'EOF'
import glob, json, os, sys
w, dst = sys.argv[1], sys.argv[2]
with open(dst, "w") as out:
    for f in sorted(glob.glob(os.path.join(w, "*.out"))):
        for line in open(f):
            line = line.strip()
            if line.startswith("{"):
                out.write(line + "\n")
    for f in sorted(glob.glob(os.path.join(w, "*.err")) + glob.glob(os.path.join(w, "rec_*.log"))):
        name = os.path.basename(f).rsplit(".", 1)[0]
        text = open(f, errors="replace").read()
        out.write(json.dumps({"type": "log", "scenario": name, "tail": text[-4000:]}) + "\n")
for line in open(dst):
    r = json.loads(line)
    if r["type"] == "truth":
        keys = ("epochs", "leak_onset_epoch", "oom_epoch", "would_die_epoch_floor",
                "would_die_epoch_peak", "frag_epoch", "grab_bytes", "error")
        print("truth", r["scenario"], r["group"], "pid", r["pid"], "ok", r.get("ok"),
              {k: r[k] for k in keys if r.get(k) is not None})
EOF
for f in "$W"/*.err "$W"/rec_*.log; do echo "== $(basename "$f")"; tail -n 4 "$f"; done
ls -l "$OUT"
echo "total +$(($(date +%s) - T0)) s"
