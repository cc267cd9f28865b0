#!/usr/bin/env python3
"""Cost of the gpumon companion on a real training loop (GPU machine).

HF transformers BERT-base built from BertConfig() (random weights, no
download), random token batches, bf16 autocast, AdamW. Four modes are run in
rounds in one process, in a new random order each round (seeded), so drift
(clocks, thermals, neighbours) favours no mode:

  off_a    no companion
  off_b    no companion again: off_b against off_a is the noise floor (A/A)
  default  companion at default settings, with a monitor connected
  max      companion at GPUMON_DETAIL=max (20 Hz samples, a block-map
           snapshot every second, cost-bounded), monitor connected

The monitor is a separate process reading every line, as gpumon would (the
companion does nothing while nobody watches, so an unwatched run costs only
the per-epoch bookkeeping). Reports median step time per mode, slowdown
against the mean of the two `off` runs of the same round (median and
[min, max] over rounds, next to the A/A noise floor), the companion thread's
CPU time, what one gpumon.epoch() costs under each GPUMON_EPOCH_GC setting
(auto, full, off), and the cost of one snapshot + reduction on the real BERT
block map.

    PYTHONPATH=python python3 bench/companion_overhead.py [--steps 400] [--rounds 4] [--out bench.json]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

MONITOR = r"""
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"v":1,"type":"hello","role":"monitor","min_v":1,"max_v":1,"client":"bench"}\n')
n = 0; nbytes = 0
sys.stdout.write("connected\n"); sys.stdout.flush()
while True:
    d = s.recv(1 << 16)
    if not d: break
    n += d.count(b"\n"); nbytes += len(d)
sys.stdout.write("%d %d\n" % (n, nbytes)); sys.stdout.flush()
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100, help="steps per mode per round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--epoch-every", type=int, default=50, help="gpumon.epoch() every N steps")
    ap.add_argument("--seed", type=int, default=13, help="seed of the per-round random order")
    ap.add_argument("--epoch-gc", default="auto", help="GPUMON_EPOCH_GC for the loop: auto, full, off")
    ap.add_argument("--epoch-calls", type=int, default=10, help="gpumon.epoch() calls per gc setting")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch
    from transformers import BertConfig, BertForMaskedLM

    import gpumon
    from gpumon import _frag

    dev = torch.device("cuda")
    torch.manual_seed(0)
    cfg = BertConfig()
    model = BertForMaskedLM(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    use_bf16 = args.dtype == "bf16"

    def batch():
        ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=dev)
        return ids, ids.clone()

    def step():
        ids, labels = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(20):
        step()
    torch.cuda.synchronize()

    sock_dir = tempfile.mkdtemp(prefix="gpumon-bench-")
    os.chmod(sock_dir, 0o700)
    # off_a and off_b are the same mode (no companion): their difference is the noise
    # floor of this machine and loop, printed next to every slowdown.
    modes = ["off_a", "off_b", "default", "max"]
    times = {m: [] for m in modes}
    per_round = {m: [] for m in modes}   # median step time of each round
    cpu = {"default": 0.0, "max": 0.0}
    lines = {"default": 0, "max": 0}
    epoch_cost = {m: [] for m in modes}
    wall = {"default": 0.0, "max": 0.0}
    rng = random.Random(args.seed)
    orders = []
    for r in range(args.rounds):
        # A fresh random order each round: a fixed rotation lets a drift (clocks warming,
        # a neighbour's load) favour whichever mode tends to run later.
        order = modes[:]
        rng.shuffle(order)
        orders.append(order)
        for mode in order:
            mon = None
            on = mode in ("default", "max")
            if on:
                gpumon.start(detail=mode, sock_dir=sock_dir, epoch_gc=args.epoch_gc)
                c = gpumon.companion()
                mon = subprocess.Popen([sys.executable, "-c", MONITOR, c.path],
                                       stdout=subprocess.PIPE, text=True)
                assert mon.stdout.readline().strip() == "connected"
                time.sleep(0.5)  # hello, history, detection settle
                cpu0 = c.cpu_s
                t_mode = time.perf_counter()
            rt = []
            for i in range(args.steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                rt.append(time.perf_counter() - t0)
                if (i + 1) % args.epoch_every == 0:
                    e0 = time.perf_counter()
                    gpumon.epoch()
                    epoch_cost[mode].append(time.perf_counter() - e0)
            times[mode] += rt
            per_round[mode].append(statistics.median(rt))
            if on:
                c = gpumon.companion()
                time.sleep(0.05)
                cpu[mode] += c.cpu_s - cpu0
                wall[mode] += time.perf_counter() - t_mode
                gpumon.stop("bench round")
                out = mon.communicate(timeout=10)[0].split()
                lines[mode] += int(out[0]) if out else 0

    # What one gpumon.epoch() costs under each GPUMON_EPOCH_GC setting, in this process
    # (the model, transformers and torch loaded: the object graph a full gc walks).
    gc_cost = {}
    for gmode in ("auto", "full", "off"):
        gpumon.start(sock_dir=sock_dir, epoch_gc=gmode)
        ts = []
        for _ in range(args.epoch_calls):
            step()
            torch.cuda.synchronize()
            e0 = time.perf_counter()
            gpumon.epoch()
            ts.append(time.perf_counter() - e0)
        gpumon.stop("bench gc")
        gc_cost[gmode] = {"median_ms": statistics.median(ts) * 1e3, "max_ms": max(ts) * 1e3,
                          "calls": len(ts)}

    # One snapshot of the real block map, with the reduction the companion does.
    snaps = []
    n_blocks = n_segs = 0
    for _ in range(20):
        t0 = time.perf_counter()
        try:
            segs = torch.cuda.memory_snapshot(include_traces=False)
            kw = "include_traces=False"
        except TypeError:
            segs = torch.cuda.memory_snapshot()
            kw = "plain"
        f = _frag.reduce_torch_snapshot(segs, torch.cuda.current_device())
        snaps.append(time.perf_counter() - t0)
        n_segs = len(segs)
        n_blocks = sum(len(s.get("blocks", ())) for s in segs)

    med = {m: statistics.median(v) * 1e3 for m, v in times.items()}

    def ratios(m):
        # per round: this mode against the mean of the two `off` runs of the same round
        return [100 * (x / ((a + b) / 2) - 1)
                for x, a, b in zip(per_round[m], per_round["off_a"], per_round["off_b"])]

    def spread(v):
        v = sorted(v)
        return {"median": statistics.median(v), "min": v[0], "max": v[-1],
                "iqr": (v[(3 * len(v)) // 4] - v[len(v) // 4]) if len(v) >= 4 else None}

    aa = [100 * (b / a - 1) for a, b in zip(per_round["off_a"], per_round["off_b"])]
    res = {
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "batch": args.batch, "seq": args.seq, "dtype": args.dtype, "seed": args.seed,
        "orders": orders,
        "steps_per_mode": {m: len(v) for m, v in times.items()},
        "median_step_ms": med,
        "noise_floor_pct": spread(aa),
        "slowdown_pct": {m: spread(ratios(m)) for m in ("default", "max")},
        "companion_cpu_s": cpu, "companion_cpu_pct_of_wall": {
            m: 100 * cpu[m] / wall[m] if wall[m] else None for m in cpu},
        "lines_received": lines,
        "epoch_call_ms_median": {m: statistics.median(v) * 1e3 if v else None
                                 for m, v in epoch_cost.items()},
        "epoch_call_by_gc_setting": gc_cost,
        "snapshot": {"call": kw, "segments": n_segs, "blocks": n_blocks,
                     "median_ms": statistics.median(snaps) * 1e3,
                     "max_ms": max(snaps) * 1e3, "F": _frag.frag_index(f["free_total"], f["largest_free"])},
    }
    print()
    print("round orders (random, seed %d): %s" % (args.seed, " | ".join(",".join(o) for o in orders)))
    print("mode      steps  median step   slowdown vs off (median [min, max] over rounds)   companion CPU   lines")
    for m in modes:
        if m in ("default", "max"):
            sd = res["slowdown_pct"][m]
            sl = "%+.2f %% [%+.2f, %+.2f]" % (sd["median"], sd["min"], sd["max"])
            cp = "%.2f s (%.2f %%)" % (cpu[m], res["companion_cpu_pct_of_wall"][m] or 0)
        else:
            sl, cp = "", ""
        print("%-8s %6d  %9.2f ms  %-44s %-15s %s" % (m, len(times[m]), med[m], sl, cp,
                                                     lines.get(m, "")))
    nf = res["noise_floor_pct"]
    print("noise floor (A/A: off_b vs off_a): %+.2f %% [%+.2f, %+.2f]: slowdowns inside this "
          "range are not measurable here" % (nf["median"], nf["min"], nf["max"]))
    print("gpumon.epoch() median in the loop: %s ms" % {m: None if v is None else round(v, 2)
                                                     for m, v in res["epoch_call_ms_median"].items()})
    print("gpumon.epoch() by GPUMON_EPOCH_GC: %s" % {k: "%.2f ms (max %.2f)" % (v["median_ms"], v["max_ms"])
                                                    for k, v in gc_cost.items()})
    print("snapshot (%s) of the BERT block map: %d segments, %d blocks: median %.2f ms, max %.2f ms"
          % (kw, n_segs, n_blocks, res["snapshot"]["median_ms"], res["snapshot"]["max_ms"]))
    worst = max(abs(nf["min"]), abs(nf["max"]))
    print("default slowdown %+.2f %% against a noise floor of +-%.2f %%: %s" % (
        res["slowdown_pct"]["default"]["median"], worst,
        "below the noise floor" if abs(res["slowdown_pct"]["default"]["median"]) <= worst
        else ("MET (< 0.5 %)" if res["slowdown_pct"]["default"]["median"] < 0.5 else "NOT MET")))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
