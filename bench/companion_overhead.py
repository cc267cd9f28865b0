#!/usr/bin/env python3
"""Cost of the gpumon companion on a real training loop (GPU machine).

HF transformers BERT-base built from BertConfig() (random weights, no
download), random token batches, bf16 autocast, AdamW. Three modes are run in
interleaved rounds in one process, so drift (clocks, thermals) hits all alike:

  off      no companion
  default  companion at default settings, with a monitor connected
  max      companion at GPUMON_DETAIL=max (20 Hz samples, a block-map
           snapshot every second, cost-bounded), monitor connected

The monitor is a separate process reading every line, as gpumon would (the
companion does nothing while nobody watches, so an unwatched run costs only
the per-epoch bookkeeping). Reports median step time per mode, slowdown
against `off`, the companion thread's CPU time, and the cost of one
snapshot + reduction on the real BERT block map.

    PYTHONPATH=python python3 bench/companion_overhead.py [--steps 400] [--rounds 4] [--out bench.json]
"""

import argparse
import json
import os
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
    times = {"off": [], "default": [], "max": []}
    cpu = {"default": 0.0, "max": 0.0}
    lines = {"default": 0, "max": 0}
    epoch_cost = {"off": [], "default": [], "max": []}
    wall = {"default": 0.0, "max": 0.0}
    modes = ["off", "default", "max"]
    for r in range(args.rounds):
        order = modes[r % 3:] + modes[:r % 3]
        for mode in order:
            mon = None
            if mode != "off":
                gpumon.start(detail=mode if mode == "max" else "default", sock_dir=sock_dir,
                             epoch_gc=True)
                c = gpumon.companion()
                mon = subprocess.Popen([sys.executable, "-c", MONITOR, c.path],
                                       stdout=subprocess.PIPE, text=True)
                assert mon.stdout.readline().strip() == "connected"
                time.sleep(0.5)  # hello, history, detection settle
                cpu0 = c.cpu_s
                t_mode = time.perf_counter()
            for i in range(args.steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                times[mode].append(time.perf_counter() - t0)
                if (i + 1) % args.epoch_every == 0:
                    e0 = time.perf_counter()
                    gpumon.epoch()
                    epoch_cost[mode].append(time.perf_counter() - e0)
            if mode != "off":
                c = gpumon.companion()
                time.sleep(0.05)
                cpu[mode] += c.cpu_s - cpu0
                wall[mode] += time.perf_counter() - t_mode
                gpumon.stop("bench round")
                out = mon.communicate(timeout=10)[0].split()
                lines[mode] += int(out[0]) if out else 0

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
    res = {
        "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "batch": args.batch, "seq": args.seq, "dtype": args.dtype,
        "steps_per_mode": {m: len(v) for m, v in times.items()},
        "median_step_ms": med,
        "slowdown_pct": {m: (med[m] / med["off"] - 1) * 100 for m in ("default", "max")},
        "companion_cpu_s": cpu, "companion_cpu_pct_of_wall": {
            m: 100 * cpu[m] / wall[m] if wall[m] else None for m in cpu},
        "lines_received": lines,
        "epoch_call_ms_median": {m: statistics.median(v) * 1e3 if v else None
                                 for m, v in epoch_cost.items()},
        "snapshot": {"call": kw, "segments": n_segs, "blocks": n_blocks,
                     "median_ms": statistics.median(snaps) * 1e3,
                     "max_ms": max(snaps) * 1e3, "F": _frag.frag_index(f["free_total"], f["largest_free"])},
    }
    print()
    print("mode      steps  median step   slowdown   companion CPU   lines")
    for m in modes:
        sl = "" if m == "off" else "%+.2f %%" % res["slowdown_pct"][m]
        cp = "" if m == "off" else "%.2f s (%.2f %%)" % (cpu[m], res["companion_cpu_pct_of_wall"][m] or 0)
        print("%-8s %6d  %9.2f ms  %9s   %-15s %s" % (m, len(times[m]), med[m], sl, cp,
                                                     lines.get(m, "")))
    print("gpumon.epoch() median: %s ms" % {m: None if v is None else round(v, 2)
                                             for m, v in res["epoch_call_ms_median"].items()})
    print("snapshot (%s) of the BERT block map: %d segments, %d blocks: median %.2f ms, max %.2f ms"
          % (kw, n_segs, n_blocks, res["snapshot"]["median_ms"], res["snapshot"]["max_ms"]))
    print("goal: default slowdown < 0.5 %%: %s" % ("MET" if res["slowdown_pct"]["default"] < 0.5 else "NOT MET"))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
