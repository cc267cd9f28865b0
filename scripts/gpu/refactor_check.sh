#!/usr/bin/env bash
# A refactor of the architecture (no behaviour change) on the real card, one call: the build
# before the refactor (OLD) and after it (NEW) side by side on the same live workload.
#   1. both TUIs at 100 ms for SECONDS in 120x40 pseudo-terminals, plus a second NEW (A/A: the
#      noise floor of the CPU figure), via bench/ptyrun.py;
#   2. both record the same 60 s of a PyTorch process with the companion (epochs, growth);
#   3. `snapshot --json` of both at the same moment, compared field by field;
#   4. NEW against nvidia-smi (compare_smi.py), NEW's live screen captured at 80x24, 120x40.
# usage (repo root, GPU machine): OLD=path NEW=path PYPKG=dir scripts/gpu/refactor_check.sh [SECONDS]
set -u
secs=${1:-60}
here=$(cd "$(dirname "$0")/../.." && pwd)
old=${OLD:?OLD=path/to/gpumon before}; new=${NEW:?NEW=path/to/gpumon after}
chmod +x "$old" "$new"
export PYTHONPATH=${PYPKG:?PYPKG=dir holding the gpumon Python package} TERM=xterm-256color LANG=C.UTF-8
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; tmux kill-session -t rc80 2>/dev/null; tmux kill-session -t rc120 2>/dev/null' EXIT
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$OUT/smi.txt"
# A training-like process: 1 GiB kept per epoch plus a transient, epochs marked.
python3 - > "$OUT/grower.log" 2>&1 <<'PY' &
import time, torch, gpumon
gpumon.start()
keep = []
for e in range(20):
    keep.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    scratch = torch.empty(512 << 20, dtype=torch.uint8, device="cuda"); del scratch
    time.sleep(4); gpumon.epoch()
time.sleep(30)
PY
pids+=($!)
python3 "$here/scripts/gpu/hold.py" 6 $((secs + 60)) refactor > /dev/null 2>&1 &
pids+=($!)
sleep 8
timeout $((secs + 20)) "$old" record -o "$OUT/old.jsonl" --duration 60s --interval 1s > "$OUT/old_record.log" 2>&1 &
pids+=($!)
timeout $((secs + 20)) "$new" record -o "$OUT/new.jsonl" --duration 60s --interval 1s > "$OUT/new_record.log" 2>&1 &
pids+=($!)
run() { name=$1; shift; python3 "$here/bench/ptyrun.py" "$secs" --size 120x40 -- "$@" | sed "s/^RESULT/RESULT $name/" > "$OUT/cpu_$name.txt"; }
run old_100ms "$old" --interval 100ms &
pids+=($!)
run new_100ms "$new" --interval 100ms &
pids+=($!)
run new_100ms_AA "$new" --interval 100ms &
pids+=($!)
sleep 20
"$old" snapshot --json > "$OUT/snap_old.json" & "$new" snapshot --json > "$OUT/snap_new.json"; wait $!
python3 "$here/scripts/gpu/compare_smi.py" "$new" > "$OUT/compare_smi.txt" 2>&1; echo "compare rc=$?" >> "$OUT/compare_smi.txt"
tmux new-session -d -s rc80 -x 80 -y 24 "$new --interval 1s"
tmux new-session -d -s rc120 -x 120 -y 40 "$new --interval 1s"
sleep 12
tmux capture-pane -p -t rc80 > "$OUT/live_80x24.txt"
tmux capture-pane -p -t rc120 > "$OUT/live_120x40.txt"
tmux send-keys -t rc120 Enter; sleep 3
tmux capture-pane -p -t rc120 > "$OUT/live_120x40_detail.txt"
tmux kill-session -t rc80; tmux kill-session -t rc120
wait "${pids[2]}" "${pids[3]}" "${pids[4]}" "${pids[5]}" "${pids[6]}" 2>/dev/null
cat "$OUT"/cpu_*.txt > "$OUT/cpu.txt"
python3 - "$OUT" <<'PY' > "$OUT/compare.txt" 2>&1
"""Old vs new: snapshot fields that must agree, and what each recording holds."""
import collections, json, sys
out = sys.argv[1]
a, b = (json.load(open(f"{out}/snap_{n}.json")) for n in ("old", "new"))
VOLATILE = {"time", "t", "timestamp", "now", "started", "gpumon_version"}
def flat(x, p=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k not in VOLATILE:
                yield from flat(v, f"{p}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from flat(v, f"{p}[{i}]")
    else:
        yield p, x
fa, fb = dict(flat(a)), dict(flat(b))
diff = [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
MIB = 2**20
big = [d for d in diff if not (isinstance(d[1], (int, float)) and isinstance(d[2], (int, float)) and abs(d[1] - d[2]) <= MIB)]
print(f"snapshot fields: {len(fa)} old, {len(fb)} new; differ: {len(diff)}; differ by more than 1 MiB or in kind: {len(big)}")
for d in big[:40]:
    print("  ", *d)
for n in ("old", "new"):
    kinds = collections.Counter()
    for line in open(f"{out}/{n}.jsonl"):
        try:
            f = json.loads(line)
        except ValueError:
            kinds["<bad line>"] += 1
            continue
        k = f.get("type", "?")
        if k == "companion":
            k += ":" + f.get("msg", {}).get("type", "?")
        kinds[k] += 1
    print(n, dict(sorted(kinds.items())))
PY
cat "$OUT/compare.txt" "$OUT/cpu.txt" "$OUT/compare_smi.txt"
