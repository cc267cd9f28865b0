#!/usr/bin/env python3
"""What the gpumon companion costs a training step, measured two ways (GPU machine).

1. The direct bound (GPUMON_SELFTIME, python/gpumon/_selftime.py): the companion thread
   times how long it holds the GIL on each wake-up and every framework call it makes.
   The training thread can only wait on the companion while the companion holds the GIL
   (or an allocator lock taken inside a call made under it), so hold time over wall time
   bounds the slowdown, per mode, whatever the machine's noise.
2. An A/B that resolves well under 1 % on a drifting machine: ONE companion and ONE
   monitor (a separate process reading every line) for the whole run; the mode is
   switched at run time between blocks of a few synchronised steps, in a new random
   order each round, for hundreds of rounds:
     off      the companion thread parked (blocked on an Event: no GIL, no calls)
     off2     the same again: off2 against off is the A/A interval (the noise floor)
     loaded   running, as when no monitor is connected (live count forced to 0)
     watched  running, a monitor connected, default detail (4 Hz samples, 10 s snapshots)
     max      GPUMON_DETAIL=max (20 Hz samples, 1 s snapshots)
   Every switch passes through the parked state, and each running mode's timers get a
   random phase, so each block sees the work its mode does per unit of time on average.
   The peak-block-map limiter is re-armed each block (worst case: a new in-epoch high
   at every chance). Per round, each mode's mean step time is paired with `off` of the
   same round; the mean log-ratio over rounds gets a bootstrap 95 % interval, printed
   beside the A/A one. Each step is timed by host wall clock and by CUDA events.
3. What each framework call costs the training thread when made from another thread:
   the call repeated from a helper thread at a fixed rate during blocks of real steps,
   alternated with blocks where that thread sleeps; and whether the call waits for the
   device (made while a ~0.3 s kernel is queued).

    PYTHONPATH=python python3 bench/companion_overhead.py --workload bert --out bert.json
    PYTHONPATH=python python3 bench/companion_overhead.py --workload mlp --out mlp.json
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

MONITOR = r"""
import socket, sys
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

MODES = ["off", "off2", "loaded", "watched", "max"]
DETAIL = {"watched": (4.0, 10.0), "max": (20.0, 1.0), "loaded": (4.0, 10.0)}


def build(args, torch):
    dev = torch.device("cuda")
    torch.manual_seed(0)
    if args.workload == "bert":
        from transformers import BertConfig, BertForMaskedLM
        cfg = BertConfig()
        model = BertForMaskedLM(cfg).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step
    # A small MLP: many small kernels, so the step is bound by the host thread that
    # launches them, where a GIL taken away shows at once.
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(args.mlp_batch, args.width, device=dev)
    y = torch.randint(0, 10, (args.mlp_batch,), device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def boot(logs, reps=10000, seed=7):
    """Mean of paired log-ratios -> (% estimate, 95 % bootstrap interval, median %)."""
    import numpy as np
    x = np.asarray(logs, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(reps, len(x)))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    pc = lambda v: float(100 * (math.exp(v) - 1))
    return {"pct": pc(x.mean()), "lo": pc(lo), "hi": pc(hi),
            "median_pct": pc(float(np.median(x))), "n": int(len(x))}


def first_differences(seq, col, reps=2000, seed=7):
    """Step time drifts slowly (block-to-block correlation 0.75-0.87 on the H200), so the
    sharpest contrast is between neighbouring blocks: least squares of the difference of
    each block's log step time from the block before on the difference of their mode
    indicators (`off` the reference). Bootstrap over rounds (each with the differences
    ending in it). Returns {mode: {pct, lo, hi}}."""
    import numpy as np
    y = np.log([s[col] for s in seq])
    rounds = np.array([s[0] for s in seq])
    X = np.zeros((len(seq), len(MODES) - 1))
    for i, s in enumerate(seq):
        j = MODES.index(s[1])
        if j:
            X[i, j - 1] = 1
    dy, dX, rr = y[1:] - y[:-1], X[1:] - X[:-1], rounds[1:]
    beta = np.linalg.lstsq(dX, dy, rcond=None)[0]
    groups = [np.where(rr == k)[0] for k in range(rounds.max() + 1)]
    rng = np.random.default_rng(seed)
    bs = []
    for _ in range(reps):
        pick = np.concatenate([groups[k] for k in rng.integers(0, len(groups), len(groups))])
        bs.append(np.linalg.lstsq(dX[pick], dy[pick], rcond=None)[0])
    lo, hi = np.quantile(np.array(bs), [0.025, 0.975], axis=0)
    pc = lambda v: float(100 * (math.exp(v) - 1))
    return {m: {"pct": pc(beta[j]), "lo": pc(lo[j]), "hi": pc(hi[j])}
            for j, m in enumerate(MODES[1:])}


class Switch(object):
    """Runtime control of one running companion: park it, or run it as one mode."""

    def __init__(self, c):
        self.c = c
        self.gate = threading.Event()
        self.gate.set()
        self.parked = threading.Event()
        self.polling = threading.Event()
        self.unwatched = False
        srv = c.server
        orig_poll = srv.poll
        orig_live = srv.live_count
        st = c.selftime
        sw = self

        def poll(timeout):
            if not sw.gate.is_set():
                t = time.perf_counter()
                sw.parked.set()
                sw.gate.wait()
                sw.parked.clear()
                if st is not None:  # parked is idle, not a GIL hold
                    d = time.perf_counter() - t
                    st.idle_s += d
                    st._idle_in_wake += d
                return False
            sw.polling.set()
            return orig_poll(timeout)

        srv.poll = poll
        srv.live_count = lambda: 0 if sw.unwatched else orig_live()

    def park(self):
        self.gate.clear()
        self.c._poke()
        if not self.parked.wait(1.0):
            raise RuntimeError("companion did not park")

    def run(self, mode, rng):
        """Called parked; leaves the companion running as `mode`."""
        c = self.c
        hz, snap = DETAIL[mode]
        c.cfg.sample_hz, c.cfg.snapshot_s = hz, snap
        self.unwatched = mode == "loaded"
        c.live = 0 if self.unwatched else 1
        now = time.monotonic()
        c._next_sample = now + rng.random() / hz
        c._next_snap = now + rng.random() * snap
        c._next_detect = now + rng.random() * 1.0
        now_ms = int(time.time() * 1000)
        with c._lock:
            c._epoch_max.clear()
        lim = 1000 * snap / 2
        c._peak_frag_t = {d: now_ms - rng.random() * lim for d in (0,)}
        self.polling.clear()
        self.gate.set()
        # Let the wake-up that the unpark causes finish before the block is timed.
        self.polling.wait(0.1)


def st_counts(st):
    return (st.hold_s, st.wakeups, {k: (v[0], v[1], v[3]) for k, v in st.calls.items()})


def ab(args, torch, step, c, sw):
    rng = random.Random(args.seed)
    per = {m: [] for m in MODES}       # per round: mean wall step (s)
    per_gpu = {m: [] for m in MODES}   # per round: mean CUDA-event step (ms)
    wall_in = {m: 0.0 for m in MODES}
    hold_in = {m: 0.0 for m in MODES}
    wakes_in = {m: 0 for m in MODES}
    calls_in = {m: {} for m in MODES}
    orders = []
    seq = []  # (round, mode, wall ms, gpu ms) in the order run
    st = c.selftime
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(args.block_steps)]
    t_ab = time.monotonic()
    for r in range(args.rounds):
        if args.max_seconds and time.monotonic() - t_ab > args.max_seconds:
            args.rounds = r  # the report says how many rounds ran
            break
        order = MODES[:]
        rng.shuffle(order)
        orders.append("".join(m[0] if m != "off2" else "2" for m in order))
        for mode in order:
            sw.park()
            if mode not in ("off", "off2"):
                sw.run(mode, rng)
            torch.cuda.synchronize()
            h0 = st_counts(st)
            t_block = time.perf_counter()
            wall = 0.0
            for i in range(args.block_steps):
                t0 = time.perf_counter()
                ev[i][0].record()
                step()
                ev[i][1].record()
                ev[i][1].synchronize()
                wall += time.perf_counter() - t0
            dt = time.perf_counter() - t_block
            h1 = st_counts(st)
            gpu = sum(a.elapsed_time(b) for a, b in ev)
            per[mode].append(wall / args.block_steps)
            per_gpu[mode].append(gpu / args.block_steps)
            seq.append((r, mode, round(1e3 * wall / args.block_steps, 4), round(gpu / args.block_steps, 4)))
            wall_in[mode] += dt
            hold_in[mode] += h1[0] - h0[0]
            wakes_in[mode] += h1[1] - h0[1]
            for k, (n, tot, slow) in h1[2].items():
                n0, tot0, slow0 = h0[2].get(k, (0, 0.0, 0))
                a = calls_in[mode].setdefault("%s@%s" % k, [0, 0.0, 0])
                a[0] += n - n0
                a[1] += tot - tot0
                a[2] += slow - slow0
    sw.park()
    res = {"orders_first10": orders[:10], "modes": {}}
    fd = (first_differences(seq, 2), first_differences(seq, 3))
    for m in MODES:
        d = {"median_step_ms": 1e3 * statistics.median(per[m]),
             "mean_step_ms": 1e3 * statistics.fmean(per[m]),
             "median_gpu_step_ms": statistics.median(per_gpu[m]),
             "blocks": len(per[m]), "steps": len(per[m]) * args.block_steps,
             "wall_s": wall_in[m]}
        if m != "off":
            d["ab_wall"] = boot([math.log(x / y) for x, y in zip(per[m], per["off"])])
            d["ab_gpu"] = boot([math.log(x / y) for x, y in zip(per_gpu[m], per_gpu["off"])])
            d["fd_wall"] = fd[0][m]
            d["fd_gpu"] = fd[1][m]
        d["direct"] = {"hold_ms": 1e3 * hold_in[m], "wakeups": wakes_in[m],
                       "hold_pct_of_wall": 100 * hold_in[m] / wall_in[m] if wall_in[m] else None,
                       "hold_us_per_step": 1e6 * hold_in[m] / d["steps"],
                       "calls": {k: {"n": v[0], "total_ms": 1e3 * v[1], "slow": v[2]}
                                 for k, v in sorted(calls_in[m].items()) if v[0]}}
        res["modes"][m] = d
    res["raw_sequence"] = seq
    return res


def probe(args, torch, step, src):
    """Each framework call, from another thread: cost to the training thread, and
    whether it waits for the device."""
    out = {}
    calls = {
        "memory_stats": (lambda: torch._C._cuda_memoryStats(0), 0.002),
        "companion_sample": (src.sample, 0.002),
        "memory_snapshot+reduce": (lambda: src.frag(0), 0.02),
        "device_count+is_initialized": (lambda: (torch.cuda.device_count(),
                                                 torch.cuda.is_initialized()), 0.002),
    }
    # (a) does it wait for the device? queue ~0.3 s of kernel, call from a thread.
    sync = {}
    for name, (fn, _) in calls.items():
        torch.cuda.synchronize()
        torch.cuda._sleep(int(args.sleep_cycles))
        box = {}

        def call():
            t = time.perf_counter()
            fn()
            box["s"] = time.perf_counter() - t
            box["pending_after"] = not torch.cuda.current_stream(0).query()

        th = threading.Thread(target=call)
        th.start()
        th.join()
        torch.cuda.synchronize()
        sync[name] = {"call_ms": 1e3 * box["s"], "kernel_still_running_after": box["pending_after"]}
    # how long is the queued kernel, for scale
    torch.cuda.synchronize()
    t = time.perf_counter()
    torch.cuda._sleep(int(args.sleep_cycles))
    torch.cuda.synchronize()
    out["queued_kernel_ms"] = 1e3 * (time.perf_counter() - t)
    out["waits_for_device"] = sync
    # (b) cost to the training thread
    cost = {}
    for name, (fn, every) in calls.items():
        on = threading.Event()
        stop = threading.Event()
        count = [0]

        def hammer():
            while not stop.is_set():
                if on.is_set():
                    fn()
                    count[0] += 1
                time.sleep(every)

        th = threading.Thread(target=hammer, daemon=True)
        th.start()
        rows = {True: [], False: []}
        n_on = 0
        for b in range(args.probe_blocks * 2):
            state = (b % 4) in (1, 2)  # ABBA
            torch.cuda.synchronize()
            c0 = count[0]
            if state:
                on.set()
            t0 = time.perf_counter()
            for _ in range(args.block_steps):
                step()
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            on.clear()
            if state:
                n_on += count[0] - c0
            rows[state].append(dt)
        stop.set()
        th.join()
        pair = [math.log(a / b) for a, b in zip(rows[True], rows[False])]
        dt_on, dt_off = sum(rows[True]), sum(rows[False])
        cost[name] = {"calls": n_on, "every_ms": 1e3 * every,
                      "slowdown": boot(pair),
                      "us_per_call": 1e6 * (dt_on - dt_off) / n_on if n_on else None}
    out["cost_to_training_thread"] = cost
    return out


def epoch_cost(args, torch, step, gpumon, sock_dir):
    res = {}
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
        res[gmode] = {"median_ms": statistics.median(ts) * 1e3, "max_ms": max(ts) * 1e3}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["bert", "mlp"], default="bert")
    ap.add_argument("--rounds", type=int, default=240)
    ap.add_argument("--block-steps", type=int, default=None, help="default: bert 3, mlp 10")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--mlp-batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--probe-blocks", type=int, default=12)
    ap.add_argument("--sleep-cycles", type=float, default=6e8)
    ap.add_argument("--epoch-calls", type=int, default=8)
    ap.add_argument("--skip-probe", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--modes", default=",".join(MODES),
                    help="modes to alternate, `off` (the reference) first; fewer modes give "
                         "each more rounds in the same time")
    ap.add_argument("--max-seconds", type=float, default=0,
                    help="end the A/B after the round that passes this many seconds, so a "
                         "time limit still leaves a result")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if modes[0] != "off" or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
        ap.error("--modes: distinct modes from %s, `off` first" % ",".join(MODES))
    MODES[:] = modes
    if args.block_steps is None:
        args.block_steps = 3 if args.workload == "bert" else 10

    import torch
    os.environ["GPUMON_SELFTIME"] = "1"
    import gpumon

    step = build(args, torch)
    for _ in range(30):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    print("%s: %.2f ms per step, %d steps per block, %d rounds of %d modes" % (
        args.workload, 50 * (time.perf_counter() - t), args.block_steps, args.rounds,
        len(MODES)), flush=True)

    sock_dir = tempfile.mkdtemp(prefix="gpumon-bench-")
    os.chmod(sock_dir, 0o700)
    assert gpumon.start(sock_dir=sock_dir)
    c = gpumon.companion()
    mon = subprocess.Popen([sys.executable, "-c", MONITOR, c.path], stdout=subprocess.PIPE, text=True)
    assert mon.stdout.readline().strip() == "connected"
    t_end = time.time() + 5
    while time.time() < t_end and not (c.live and any(s.ready() for s in c.sources)):
        step()
        time.sleep(0.05)
    time.sleep(1.2)  # detection, the hello again with the framework
    sw = Switch(c)
    res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
           "python": sys.version.split()[0], "switchinterval_s": sys.getswitchinterval(),
           "args": vars(args)}
    res["ab"] = ab(args, torch, step, c, sw)
    res["selftime_whole_run"] = c.selftime.report()
    src = next(s for s in c.sources if s.name == "torch")
    sw.gate.set()
    gpumon.stop("bench")
    out = mon.communicate(timeout=10)[0].split()
    res["monitor_lines"] = int(out[0]) if out else None
    if not args.skip_probe:
        res["probe"] = probe(args, torch, step, src)
    res["epoch_call_by_gc"] = epoch_cost(args, torch, step, gpumon, sock_dir)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    report(res, args)


def report(res, args):
    print()
    print("%s on %s, torch %s: %d rounds x %d steps per block" % (
        args.workload, res["gpu"], res["torch"], args.rounds, args.block_steps))
    print("A/B against `off` (the companion parked), %, 95 % bootstrap interval over rounds; "
          "`off2` is the A/A. paired: same-round blocks; adjacent: neighbouring-block differences")
    print("mode     median step  gpu step   paired wall               adjacent wall             "
          "adjacent gpu-event        direct bound (GIL held/wall)  wake-ups  slow calls")
    iv = lambda a: "" if a is None else "%+.2f [%+.2f, %+.2f]" % (a["pct"], a["lo"], a["hi"])
    for m in MODES:
        d = res["ab"]["modes"][m]
        slow = sum(v["slow"] for v in d["direct"]["calls"].values())
        print("%-8s %8.3f ms %8.3f ms   %-25s %-25s %-25s %8.4f %% (%6.1f us/step)  %6d  %d" % (
            m, d["median_step_ms"], d["median_gpu_step_ms"], iv(d.get("ab_wall")),
            iv(d.get("fd_wall")), iv(d.get("fd_gpu")),
            d["direct"]["hold_pct_of_wall"] or 0, d["direct"]["hold_us_per_step"],
            d["direct"]["wakeups"], slow))
    w = res["selftime_whole_run"]["hold_us_per_wakeup"]
    print("hold per wake-up (whole run): mean %.0f us, p99 %.0f us, max %.0f us" % (
        w["mean"] or 0, w["p99"] or 0, w["max"] or 0))
    for m in [m for m in ("watched", "max") if m in MODES]:
        print("calls in %s: %s" % (m, json.dumps(res["ab"]["modes"][m]["direct"]["calls"])))
    if "probe" in res:
        p = res["probe"]
        print("queued kernel %.0f ms; framework calls made meanwhile from another thread:" % p["queued_kernel_ms"])
        for k, v in p["waits_for_device"].items():
            print("  %-28s %8.3f ms  kernel still running after: %s" % (k, v["call_ms"], v["kernel_still_running_after"]))
        print("cost to the training thread of each call made from another thread:")
        for k, v in p["cost_to_training_thread"].items():
            s = v["slowdown"]
            print("  %-28s every %4.0f ms, %6d calls: slowdown %+.2f %% [%+.2f, %+.2f], %s us per call" % (
                k, v["every_ms"], v["calls"], s["pct"], s["lo"], s["hi"],
                "%.1f" % v["us_per_call"] if v["us_per_call"] is not None else "-"))
    print("gpumon.epoch() by GPUMON_EPOCH_GC: %s" % {k: "%.2f ms (max %.2f)" % (v["median_ms"], v["max_ms"])
                                                    for k, v in res["epoch_call_by_gc"].items()})


if __name__ == "__main__":
    main()
