#!/usr/bin/env python3
"""The third alert corpus (tests/corpus3/): runs built by mechanism, each knowing its own memory
behaviour and writing it as ground truth to stdout; it never reads gpumon's output.

    PYTHONPATH=python GPUMON_DIR=/tmp/s python3 scripts/gpu/corpus3/scenario3.py --name NAME [--seconds S]

Mechanisms (SCENARIOS holds every number):

  ownhole      fragmentation by a recurring request that fits only its own freed hole:
               under a cap that leaves less than R above reserved, a buffer of R bytes is
               made and freed every step, so each step is served from the hole the last
               one left. At epoch `split_at` a small tensor is kept while that hole is
               free: best fit puts it in the hole, the next R fits nowhere -> OOM with
               the cache mostly free and no retry before it.
  pinned       fragmentation by kept tensors pinning large cached blocks one by one: a first
               phase needs `wide` buffers of R at once (that many R holes stay cached, the
               cap leaves no room for more), then one per step, and every `pin_every` epochs
               a tensor kept for good lands in the next whole hole (the pieces earlier ones
               left are too small for it): the holes that fit R run out -> OOM.
  leak         a training-like loop (an MLP's weights and Adam-like state, transient
               activations, the last batch's output kept) that keeps `leak_mib` per epoch
               from epoch `onset` (0: from the first epoch).
  sched        the same loop without a leak, the batch size changing at `sched` epochs
               (the kept output and transients step with it).
  With `alloc_conf` the run sets PYTORCH_CUDA_ALLOC_CONF itself (expandable segments).
"""

import argparse
import json
import os
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

SCENARIOS = {
    # fragmentation, mechanism 1 (own hole)
    "frag_ownhole": dict(kind="ownhole", base_mib=768, r_mib=640, room_mib=320, split_at=34,
                         split_mib=8, epoch_s=1.0),
    "frag_ownhole_b": dict(kind="ownhole", base_mib=1024, r_mib=256, room_mib=96, split_at=45,
                           split_mib=24, epoch_s=0.8),
    # fragmentation, mechanism 2 (pins)
    "frag_pinned": dict(kind="pinned", base_mib=512, r_mib=256, wide=5, spare_mib=64,
                        pin_frac=0.55, pin_every=6, epoch_s=1.0),
    "frag_pinned_b": dict(kind="pinned", base_mib=640, r_mib=160, wide=4, spare_mib=48,
                          pin_frac=0.6, pin_every=8, epoch_s=0.9),
    # clean capped runs: the same shapes with room, or with expandable segments
    "clean_ownhole_room": dict(kind="ownhole", base_mib=768, r_mib=640, room_mib=1024,
                               split_at=10 ** 9, split_mib=8, epoch_s=1.0),
    "clean_expandable_cap": dict(kind="ownhole", base_mib=768, r_mib=640, room_mib=320,
                                 split_at=10 ** 9, split_mib=8, epoch_s=1.0,
                                 alloc_conf="expandable_segments:True"),
    # expandable segments under the same caps, with the same kept tensors: they pile up
    # (8 MiB an epoch, one pin every 6 epochs) until the cap, a leak, never fragmentation
    "expandable_ownhole": dict(kind="ownhole", base_mib=768, r_mib=640, room_mib=320,
                                     split_at=34, split_mib=8, epoch_s=1.0,
                                     alloc_conf="expandable_segments:True"),
    "expandable_pinned": dict(kind="pinned", base_mib=512, r_mib=256, wide=5,
                                    spare_mib=64, pin_frac=0.55, pin_every=6, epoch_s=1.0,
                                    alloc_conf="expandable_segments:True"),
    # slow leaks (exact floors)
    "slow_leak_1": dict(kind="leak", leak_mib=1, onset=5, epoch_s=0.8, batch=256),
    "slow_leak_2": dict(kind="leak", leak_mib=2, onset=8, epoch_s=0.8, batch=384),
    "slow_leak_3": dict(kind="leak", leak_mib=3, onset=10, epoch_s=0.8, batch=256),
    "slow_leak_4": dict(kind="leak", leak_mib=4, onset=5, epoch_s=0.8, batch=512),
    # leaks from epoch 0
    "leak_epoch0": dict(kind="leak", leak_mib=16, onset=0, epoch_s=1.0, batch=256),
    "leak_epoch0_b": dict(kind="leak", leak_mib=8, onset=0, epoch_s=1.0, batch=128,
                          sched={0: 64, 1: 128}),
    # batch-size schedules, clean
    "clean_sched": dict(kind="sched", onset=None, leak_mib=0, epoch_s=0.8, batch=128,
                        sched={0: 32, 1: 64, 2: 128, 20: 256, 40: 512, 60: 1024}),
    "clean_sched_b": dict(kind="sched", onset=None, leak_mib=0, epoch_s=0.8, batch=256,
                          sched={10: 512, 25: 1024, 45: 2048}),
}


def log(*a):
    print("[%s %.1f]" % (ARGS.name, time.time() - T_START), *a, file=sys.stderr, flush=True)


def emit(rec):
    rec = dict(rec)
    rec.setdefault("scenario", ARGS.name)
    rec.setdefault("pid", os.getpid())
    sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def now_ms():
    return int(time.time() * 1000)


def left():
    return ARGS.stop_at - time.time()


def is_oom(ex):
    s = "%s %s" % (type(ex).__name__, ex)
    return "OutOfMemory" in s or "out of memory" in s


class Run:
    def __init__(self, sc):
        if sc.get("alloc_conf"):
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = sc["alloc_conf"]
        import torch
        self.torch = torch
        torch.cuda.init()
        self.total = torch.cuda.get_device_properties(0).total_memory
        self.gm = None
        if os.environ.get("GPUMON_DISABLE") != "1":
            import gpumon
            self.gm = gpumon
            log("gpumon.start() ->", gpumon.start())
        self.rows = []

    def cap(self, cap_bytes):
        self.torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / self.total), 0)
        return cap_bytes

    def stats(self):
        st = self.torch.cuda.memory_stats()
        return dict(allocated=st.get("allocated_bytes.all.current"),
                    reserved=st.get("reserved_bytes.all.current"),
                    retries=st.get("num_alloc_retries"),
                    peak=st.get("allocated_bytes.all.peak"))

    def holes(self, r):
        """Free blocks that fit r, and the largest free block (the scenario's own view)."""
        fit, largest = 0, 0
        for seg in self.torch.cuda.memory_snapshot():
            for b in seg.get("blocks", ()):
                if b.get("state") == "inactive":
                    largest = max(largest, b["size"])
                    fit += b["size"] >= r
        return fit, largest

    def epoch_end(self, e, **kw):
        self.torch.cuda.synchronize()
        row = dict(epoch=e, t_ms=now_ms())
        row.update(self.stats())
        row.update(kw)
        self.rows.append(row)
        if self.gm:
            self.gm.epoch(e)

    def mib(self, n):
        return self.torch.empty(int(n * MiB), dtype=self.torch.uint8, device="cuda")

    def work(self, t, s):
        """Some real kernels on a tensor, for a share of the step."""
        end = time.time() + s
        v = t[: 64 * MiB].view(self.torch.float32) if t.numel() >= 64 * MiB else t.view(self.torch.float32)
        while time.time() < end:
            v.mul_(0.5).add_(1.0)
            self.torch.cuda.synchronize()
            time.sleep(0.01)


def ownhole(run, sc, truth):
    torch = run.torch
    r = sc["r_mib"] * MiB
    base = run.mib(sc["base_mib"])
    base.zero_()
    small = [run.mib(0.25) for _ in range(8)]  # small pool
    # reserved after the first step: base + R (+ the small segment); the cap leaves room_mib
    cap = run.cap((sc["base_mib"] + sc["r_mib"] + sc["room_mib"]) * MiB + 2 * MiB)
    truth.update(cap=cap, request=r, split_at=sc["split_at"])
    kept = []
    e = 0
    steps = 4
    while left() > 3:
        for s in range(steps):
            x = torch.empty(r, dtype=torch.uint8, device="cuda")
            run.work(x, sc["epoch_s"] / steps * 0.6)
            del x
            if e >= sc["split_at"] and s == 0:
                # a metric buffer made while the big hole is free: best fit puts it there
                kept.append(run.mib(sc["split_mib"]))
            time.sleep(sc["epoch_s"] / steps * 0.4)
        fit, largest = run.holes(r)
        run.epoch_end(e, holes_fitting=fit, largest_free=largest)
        e += 1
    return e


def pinned(run, sc, truth):
    """`wide` buffers of R at once in the first epochs leave that many R holes cached under
    a cap with `spare_mib` above them; then one buffer per step, and every `pin_every`
    epochs a kept tensor of `pin_frac` x R made while the step's buffer is live: best fit
    skips the pieces earlier pins left (too small) and pins the next whole hole."""
    torch = run.torch
    r = sc["r_mib"] * MiB
    p = int(sc["pin_frac"] * sc["r_mib"]) * MiB
    base = run.mib(sc["base_mib"])
    base.zero_()
    cap = run.cap((sc["base_mib"] + sc["wide"] * sc["r_mib"] + sc["spare_mib"]) * MiB + 2 * MiB)
    truth.update(cap=cap, request=r, pin=p)
    pins = []
    e = 0
    steps = 4
    while left() > 3:
        for s in range(steps):
            n = sc["wide"] if e < 2 else 1
            bufs = [torch.empty(r, dtype=torch.uint8, device="cuda") for _ in range(n)]
            if e >= sc["pin_every"] and e % sc["pin_every"] == 0 and s == 1:
                pins.append(run.mib(p / MiB))
            run.work(bufs[0], sc["epoch_s"] / steps * 0.6)
            del bufs
            time.sleep(sc["epoch_s"] / steps * 0.4)
        fit, largest = run.holes(r)
        run.epoch_end(e, holes_fitting=fit, largest_free=largest, pins=len(pins))
        e += 1
    return e


def leak(run, sc, truth):
    """An MLP-like loop: weights and Adam-like state, activations per batch, the last
    batch's output kept (it steps with the batch size), and the leak."""
    torch = run.torch
    d = 2048
    w = [torch.randn(d, d, device="cuda") * 0.01 for _ in range(4)]
    opt = []
    kept = []
    last = None
    e = 0
    steps = 6
    sched = {int(k): v for k, v in (sc.get("sched") or {}).items()}
    batch = sc["batch"]
    onset = sc.get("onset")
    truth.update(onset_epoch=onset, leak_mib=sc["leak_mib"])
    while left() > 3:
        batch = sched.get(e, batch)
        t0 = time.time()
        for s in range(steps):
            x = torch.randn(batch, d, device="cuda")
            for m in w:
                x = torch.relu(x @ m)
            loss = x.float().pow(2).mean()
            if not opt:
                opt = [torch.zeros_like(m) for m in w] + [torch.zeros_like(m) for m in w]
            for o in opt[: len(w)]:
                o.mul_(0.9)
            last = x[: batch // 2].clone()  # kept until the next step: floor follows batch
            del x, loss
        if onset is not None and e >= onset and sc["leak_mib"]:
            kept.append(run.mib(sc["leak_mib"]))
        time.sleep(max(0.0, sc["epoch_s"] - (time.time() - t0)))
        run.epoch_end(e, batch=batch, leaked=sum(k.numel() for k in kept))
        e += 1
    return e


def main():
    global ARGS, T_START
    T_START = time.time()
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=240.0)
    ARGS = ap.parse_args()
    ARGS.stop_at = T_START + ARGS.seconds
    sc = SCENARIOS[ARGS.name]
    truth = dict(type="truth", config=sc, t_start_ms=int(T_START * 1000))
    run = Run(sc)
    emit(dict(type="start", t_ms=now_ms(), total=run.total))
    fn = {"ownhole": ownhole, "pinned": pinned, "leak": leak, "sched": leak}[sc["kind"]]
    try:
        truth["epochs"] = fn(run, sc, truth)
        truth["ok"] = True
    except Exception as ex:  # the OOM is the truth of fragmentation runs
        truth["ok"] = False
        truth["error"] = "%s: %s" % (type(ex).__name__, str(ex)[:600])
        if is_oom(ex):
            st = run.stats()
            e = run.rows[-1]["epoch"] + 1 if run.rows else 0
            truth.update(oom_epoch=e, oom_t_ms=now_ms(), oom_stats=st)
            try:
                truth["oom_holes_fitting"], truth["oom_largest_free"] = run.holes(truth.get("request", 1))
            except Exception:
                pass
            log("OOM in epoch", e, st)
            end = min(ARGS.stop_at, time.time() + 4.0)
            while time.time() < end:
                time.sleep(0.25)
        else:
            log("failed:", truth["error"])
    truth["rows"] = run.rows
    emit(truth)
    if run.gm:
        run.gm.stop()


if __name__ == "__main__":
    main()
