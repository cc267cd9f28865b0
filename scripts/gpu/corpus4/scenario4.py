#!/usr/bin/env python3
"""The foresight corpus: runs built to test *when* memory runs out, each writing its own
memory behaviour as ground truth to stdout (never reading gpumon's output). The harness
(Run: cap, stats, block map, epoch end) is corpus3's.

    PYTHONPATH=python GPUMON_DIR=/tmp/s python3 scripts/gpu/corpus4/scenario4.py --name NAME [--seconds S]

Mechanisms (SCENARIOS holds every number):

  workset    a working set that grows each epoch (by `grow` of itself, or `grow_mib`) under
             a cap, on a fixed floor with a small ring of statistics: the step's peak, not
             the floor, meets the cap.
  transient  one large request per epoch, allocated and freed at once (never alive when a
             block map is read), under a cap that leaves less than it above reserved: it is
             served from its own freed hole. With `eat_at`, a small tensor is kept while that
             hole is free: the next request fits nowhere (OOM). Without, it survives.
  randwalk   a cache of `entries` tensors of random size, `swap` replaced per epoch: the
             floor is a trendless random walk for hundreds of epochs.
  server     an inference loop without epochs or markers: requests of random batch and
             length through a small transformer; from `onset_s`, one request in `keep_every`
             keeps `keep_mib` for good.
  leak       corpus3's training-like loop with a leak from `onset` (`leak_mib` per epoch).
  pinned     corpus3's second fragmentation mechanism (kept tensors pinning holes).
"""

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus3"))
import scenario3 as h  # noqa: E402  (the harness: Run, emit, log, left)

MiB = 1 << 20

SCENARIOS = {
    # growing working sets: the peak meets the cap
    "ws_geo_4pct": dict(kind="workset", cap_mib=4096, base_mib=600, ws_mib=300, grow=0.04,
                        epoch_s=0.9, seed=3),
    "ws_geo_2pct": dict(kind="workset", cap_mib=6144, base_mib=1500, ws_mib=700, grow=0.022,
                        epoch_s=0.7, seed=5),
    "ws_linear": dict(kind="workset", cap_mib=3072, base_mib=900, ws_mib=400, grow_mib=28,
                      epoch_s=0.8, seed=7),
    "ws_clean": dict(kind="workset", cap_mib=5120, base_mib=1200, ws_mib=900, grow=0.0,
                     epoch_s=0.6, seed=9),
    # the transient request under a cap
    "tr_eaten": dict(kind="transient", base_mib=900, r_mib=512, room_mib=200, acts_mib=96,
                     eat_at=45, eat_mib=64, epoch_s=0.8, seed=11, ring=12),
    "tr_eaten_b": dict(kind="transient", base_mib=1400, r_mib=1024, room_mib=400, acts_mib=160,
                       eat_at=38, eat_mib=100, epoch_s=0.9, seed=13, ring=12),
    "tr_survive": dict(kind="transient", base_mib=700, r_mib=384, room_mib=100, acts_mib=64,
                       eat_at=None, eat_mib=0, epoch_s=0.3, seed=15, ring=0),
    "tr_room": dict(kind="transient", base_mib=800, r_mib=512, room_mib=900, acts_mib=96,
                    eat_at=None, eat_mib=0, epoch_s=0.5, seed=17, ring=12),
    # trendless floors over hundreds of epochs
    "rw_cache_a": dict(kind="randwalk", entries=40, lo_mib=4, hi_mib=40, swap=1, acts_mib=200,
                       epoch_s=0.25, seed=21),
    "rw_cache_b": dict(kind="randwalk", entries=90, lo_mib=2, hi_mib=16, swap=3, acts_mib=120,
                       epoch_s=0.3, seed=23, r_mib=320, cap_mib=4096),
    # servers without epochs
    "srv_leak_2": dict(kind="server", keep_mib=1, keep_every=2, onset_s=15, rate=5.0, seed=31),
    "srv_leak_6": dict(kind="server", keep_mib=3, keep_every=2, onset_s=30, rate=4.0, seed=33),
    "srv_clean": dict(kind="server", keep_mib=0, keep_every=1, onset_s=0, rate=5.0, seed=35),
    "srv_clean_b": dict(kind="server", keep_mib=0, keep_every=1, onset_s=0, rate=3.0, seed=37,
                        max_batch=48),
    # marked leaks
    "leak_mark_3": dict(kind="leak", leak_mib=3, onset=12, epoch_s=0.6, batch=320),
    "leak_mark_10": dict(kind="leak", leak_mib=10, onset=20, epoch_s=0.7, batch=192),
    # fragmentation by pins, other sizes than corpus3's
    "pinned_c": dict(kind="pinned", base_mib=700, r_mib=200, wide=6, spare_mib=40,
                     pin_frac=0.5, pin_every=7, epoch_s=0.8),
}

# A second batch, recorded after the rules were tuned on the first, as a held-out check:
# other sizes, caps, rates and seeds, and transient requests that are never alive when a
# block map is read (`touch`: False).
SCENARIOS.update({
    "h5_ws_geo_3": dict(kind="workset", cap_mib=5120, base_mib=1000, ws_mib=450, grow=0.03,
                        epoch_s=0.6, seed=41),
    "h5_ws_lin": dict(kind="workset", cap_mib=4096, base_mib=1200, ws_mib=600, grow_mib=35,
                      epoch_s=0.6, seed=43),
    "h5_tr_hidden_eaten": dict(kind="transient", base_mib=1100, r_mib=640, room_mib=150,
                               acts_mib=80, eat_at=40, eat_mib=90, epoch_s=0.5, seed=45,
                               ring=0, touch=False),
    "h5_tr_hidden_survive": dict(kind="transient", base_mib=500, r_mib=256, room_mib=60,
                                 acts_mib=40, eat_at=None, eat_mib=0, epoch_s=0.25, seed=47,
                                 ring=0, touch=False),
    "h5_rw": dict(kind="randwalk", entries=70, lo_mib=3, hi_mib=25, swap=2, acts_mib=150,
                  epoch_s=0.2, seed=49),
    "h5_srv_leak_3": dict(kind="server", keep_mib=2, keep_every=2, onset_s=25, rate=3.5, seed=51),
    "h5_srv_clean": dict(kind="server", keep_mib=0, keep_every=1, onset_s=0, rate=6.0, seed=53),
    "h5_leak_mark_5": dict(kind="leak", leak_mib=5, onset=15, epoch_s=0.5, batch=256),
})

# Checks of one behaviour each, not corpus runs.
SCENARIOS.update({
    # resets PyTorch's peak counter every epoch, as programs that print their own epoch
    # peak do: the companion must still report each epoch's peak
    "v_ws_reset_peak": dict(kind="workset", cap_mib=3072, base_mib=500, ws_mib=250, grow=0.04,
                            epoch_s=0.5, seed=61, reset_peak=True),
})


def mk(run, mib):
    return run.torch.empty(int(mib * MiB), dtype=run.torch.uint8, device="cuda")


def stats_ring(run, ring, rng, n=24):
    ring.append(mk(run, rng.uniform(0.5, 2.0)))
    if len(ring) > n:
        ring.pop(0)


def workset(run, sc, truth):
    rng = random.Random(sc["seed"])
    cap = run.cap(sc["cap_mib"] * MiB)
    base = mk(run, sc["base_mib"])
    base.zero_()
    ring = []
    truth.update(cap=cap, grow=sc.get("grow"), grow_mib=sc.get("grow_mib"))
    e = 0
    while h.left() > 3:
        ws = sc["ws_mib"] * (1 + sc.get("grow", 0.0)) ** e + sc.get("grow_mib", 0) * e
        t0 = time.time()
        if sc.get("reset_peak"):
            run.torch.cuda.reset_peak_memory_stats()
        for _ in range(3):
            # activations of one step: a few tensors in the working set's proportions
            acts = [mk(run, ws * f) for f in (0.4, 0.3, 0.2, 0.1)]
            run.work(acts[0], sc["epoch_s"] / 6)
            del acts
        stats_ring(run, ring, rng)
        time.sleep(max(0.0, sc["epoch_s"] - (time.time() - t0)))
        run.epoch_end(e, working_set_mib=round(ws, 1))
        e += 1
    return e


def transient(run, sc, truth):
    rng = random.Random(sc["seed"])
    r = sc["r_mib"] * MiB
    base = mk(run, sc["base_mib"])
    base.zero_()
    ring = []
    # activations of the step are served first; the request comes at the epoch's end
    first = [mk(run, sc["acts_mib"] * f) for f in (0.5, 0.3, 0.2)]
    del first
    reserved = run.stats()["reserved"]
    cap = run.cap(reserved + r + sc["room_mib"] * MiB)
    truth.update(cap=cap, request=r, eat_at=sc["eat_at"])
    kept = []
    e = 0
    while h.left() > 3:
        t0 = time.time()
        for _ in range(3):
            acts = [mk(run, sc["acts_mib"] * f) for f in (0.5, 0.3, 0.2)]
            run.work(acts[0], sc["epoch_s"] / 8)
            del acts
        if sc["ring"]:
            stats_ring(run, ring, rng, n=sc["ring"])
        x = run.torch.empty(r, dtype=run.torch.uint8, device="cuda")
        if sc.get("touch", True):
            run.work(x, sc["epoch_s"] / 8)
        else:
            x[: 1 << 20].fill_(1)  # used and freed at once, as a one-shot gather is
        del x
        if sc["eat_at"] is not None and e >= sc["eat_at"]:
            # made while the request's hole is free and larger than every other
            # cached hole (the activations'): best fit puts it in the request's
            kept.append(mk(run, sc["eat_mib"]))
        time.sleep(max(0.0, sc["epoch_s"] - (time.time() - t0)))
        fit, largest = run.holes(r)
        run.epoch_end(e, holes_fitting=fit, largest_free=largest)
        e += 1
    return e


def randwalk(run, sc, truth):
    rng = random.Random(sc["seed"])
    if sc.get("cap_mib"):
        truth.update(cap=run.cap(sc["cap_mib"] * MiB))
    cache = [mk(run, rng.uniform(sc["lo_mib"], sc["hi_mib"])) for _ in range(sc["entries"])]
    e = 0
    while h.left() > 3:
        t0 = time.time()
        acts = [mk(run, sc["acts_mib"] * f) for f in (0.5, 0.3, 0.2)]
        run.work(acts[0], sc["epoch_s"] / 4)
        del acts
        for _ in range(sc["swap"]):
            cache.pop(rng.randrange(len(cache)))
            cache.append(mk(run, rng.uniform(sc["lo_mib"], sc["hi_mib"])))
        if sc.get("r_mib"):
            x = mk(run, sc["r_mib"])
            del x
        time.sleep(max(0.0, sc["epoch_s"] - (time.time() - t0)))
        run.epoch_end(e, cache_mib=round(sum(c.numel() for c in cache) / MiB, 1))
        e += 1
    return e


def server(run, sc, truth):
    torch = run.torch
    rng = random.Random(sc["seed"])
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True).cuda().eval()
    kept = {}
    n = 0
    t_last = time.time()
    truth.update(onset_s=sc["onset_s"], keep_mib=sc["keep_mib"], keep_every=sc["keep_every"])
    with torch.no_grad():
        while h.left() > 3:
            b = rng.randint(1, sc.get("max_batch", 32))
            s = rng.choice((32, 64, 96, 128, 192, 256))
            x = torch.randn(b, s, 512, device="cuda")
            y = layer(x)
            torch.cuda.synchronize()
            n += 1
            since = time.time() - h.T_START
            if sc["keep_mib"] and since >= sc["onset_s"] and n % sc["keep_every"] == 0:
                kept[n] = mk(run, sc["keep_mib"])
            del x, y
            if time.time() - t_last >= 10:
                t_last = time.time()
                st = run.stats()
                h.emit(dict(type="server", t_s=round(since, 1), requests=n,
                            kept_mib=len(kept) * sc["keep_mib"], allocated=st["allocated"],
                            reserved=st["reserved"]))
            time.sleep(rng.expovariate(sc["rate"]))
    return 0


def main():
    h.T_START = time.time()
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=240.0)
    h.ARGS = ap.parse_args()
    h.ARGS.stop_at = h.T_START + h.ARGS.seconds
    sc = SCENARIOS[h.ARGS.name]
    truth = dict(type="truth", config=sc, t_start_ms=int(h.T_START * 1000))
    run = h.Run(sc)
    h.emit(dict(type="start", t_ms=h.now_ms(), total=run.total))
    fn = {"workset": workset, "transient": transient, "randwalk": randwalk, "server": server,
          "leak": h.leak, "pinned": h.pinned}[sc["kind"]]
    try:
        truth["epochs"] = fn(run, sc, truth)
        truth["ok"] = True
    except Exception as ex:
        truth["ok"] = False
        truth["error"] = "%s: %s" % (type(ex).__name__, str(ex)[:600])
        if h.is_oom(ex):
            e = run.rows[-1]["epoch"] + 1 if run.rows else 0
            truth.update(oom_epoch=e, oom_t_ms=h.now_ms(), oom_stats=run.stats())
            h.log("OOM in epoch", e)
            end = min(h.ARGS.stop_at, time.time() + 4.0)
            while time.time() < end:
                time.sleep(0.25)
        else:
            h.log("failed:", truth["error"])
    truth["rows"] = run.rows
    h.emit(truth)
    if run.gm:
        run.gm.stop()


if __name__ == "__main__":
    main()
