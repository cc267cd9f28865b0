#!/usr/bin/env python3
"""One scenario of the first alert-quality corpus (tests/corpus/): a real training loop on the
GPU with the gpumon companion, whose memory behaviour is known in advance.

    PYTHONPATH=python GPUMON_DIR=/tmp/s python3 scripts/gpu/corpus/scenario.py --name slow_leak \
        [--deadline UNIX_S] [--seconds S] [--epoch-s 1.5] [--dry-run]

Scenarios (SCENARIOS below holds every number; run_corpus.sh runs them all at once on one card):
  clean_bert       HF BERT (BertConfig, random weights): warm-up, eval spike every 5 epochs,
                   variable sequence lengths, checkpoint every 10 epochs. Must never alert.
  clean_unfreeze   as clean_bert, bigger, encoder frozen until epoch 20: one step in the floor
                   (grads + AdamW state), not a trend. Must never alert.
  clean_jax        a JAX MLP (hand-written Adam), variable batches, eval spikes. Must never alert.
  slow_leak        clean_bert + from epoch `onset` an activation cache growing 32 MiB/epoch
                   (and an un-detached running loss). Cap 4 GiB: would die long after the run.
  tiny_leak        the same at 12 MiB/epoch (near the growth gates: a hard case).
  fast_leak        512 MiB/epoch from epoch 6 under an 8 GiB cap: dies (OOM) around epoch 20.
  leak_no_markers  a leak of 12 MiB/s from 20 s in, companion running, no epoch markers.
  leak_nvml_only   the same without the companion (NVML only).
  frag_oom         research note §6.3 scenario B: a 64 MiB table rebuilt every 20 epochs
                   (the new copy before the old is dropped); at epoch 22 a burst of 2 MiB
                   blocks fills the 2 GiB cap and 9 of 10 are freed, so the cache holds ~1.7 GiB
                   in 18 MiB holes; the rebuild at epoch 40 fails although T >> 64 MiB.
  grab_all         reserves ~80.3 % of the card in PyTorch's cache, uses ~1 GiB, holds it
                   until --hold-until.

Ground truth goes to stdout as JSON lines ({"type": "start"|"truth", "scenario": ...});
everything else goes to stderr. --dry-run replaces the framework with a counter model so
the control flow and the truth records can be checked on a machine without a GPU.
"""

import argparse
import gc
import json
import math
import os
import random
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

# Every number a label depends on. cap: torch.cuda.set_per_process_memory_fraction(cap/total).
SCENARIOS = {
    "clean_bert": dict(group="clean", kind="bert", cap_gib=2.5, hidden=256, layers=4),
    "clean_unfreeze": dict(group="clean", kind="bert", cap_gib=3.0, hidden=512, layers=4,
                           unfreeze_epoch=20),
    "clean_jax": dict(group="clean", kind="jax", mem_fraction=0.015),
    "slow_leak": dict(group="leak", kind="bert", cap_gib=4.0, hidden=256, layers=4,
                      onset=8, leak_mib=32),
    "tiny_leak": dict(group="leak", kind="bert", cap_gib=2.5, hidden=256, layers=4,
                      onset=10, leak_mib=12),
    "fast_leak": dict(group="leak", kind="bert", cap_gib=8.0, hidden=256, layers=4,
                      onset=6, leak_mib=512),
    "leak_no_markers": dict(group="leak", kind="bert", cap_gib=3.0, hidden=256, layers=4,
                            onset_s=20.0, leak_mib_s=12, markers=False),
    "leak_nvml_only": dict(group="leak", kind="bert", cap_gib=3.0, hidden=256, layers=4,
                           onset_s=20.0, leak_mib_s=12, markers=False, companion=False),
    "frag_oom": dict(group="frag", kind="frag", cap_gib=2.0, table_mib=64, refresh_every=20,
                     frag_epoch=22, block_mib=2, keep_every=10, margin_mib=24, linger_s=4.0),
    "grab_all": dict(group="frag", kind="grab", grab_frac=0.803, leave_gib=22.0, work_gib=1.0),
}

VOCAB = 8192
EVAL_EVERY = 5
CKPT_EVERY = 10
LEAK_PIECES = 8  # an epoch's leak is appended over its first 8 steps


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


# ---------------------------------------------------------------------------- companion


class Companion:
    def __init__(self, enabled, dry):
        self.on = enabled and not dry
        self.gm = None
        if self.on:
            import gpumon
            self.gm = gpumon
            ok = gpumon.start()
            log("gpumon.start() ->", ok, "GPUMON_DIR=%s" % os.environ.get("GPUMON_DIR"))

    def epoch(self, n):
        if self.gm:
            self.gm.epoch(n)

    def mark(self, label, epoch=None):
        if self.gm:
            self.gm.mark(label, epoch=epoch)

    def stop(self):
        if self.gm:
            self.gm.stop()


# ---------------------------------------------------------------------------- workloads


class TorchBert:
    """A small BertForMaskedLM built from BertConfig (random weights, no download)."""

    def __init__(self, sc, cap):
        import torch
        from transformers import BertConfig, BertForMaskedLM
        self.torch = torch
        self.dev = torch.device("cuda:0")
        torch.cuda.init()
        self.total = torch.cuda.get_device_properties(0).total_memory
        if cap:
            torch.cuda.set_per_process_memory_fraction(min(1.0, cap / self.total), 0)
        torch.manual_seed(os.getpid())
        h = sc["hidden"]
        cfg = BertConfig(vocab_size=VOCAB, hidden_size=h, num_hidden_layers=sc["layers"],
                         num_attention_heads=max(4, h // 64), intermediate_size=4 * h,
                         max_position_embeddings=512)
        self.model = BertForMaskedLM(cfg).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.leak = []          # the activation cache of the leaking scenarios
        self.running = None     # un-detached running loss (keeps tiny graph nodes alive)
        self.leaked = 0

    def set_encoder_trainable(self, on):
        for p in self.model.bert.encoder.parameters():
            p.requires_grad_(on)

    def train_step(self, bs, seq, keep_loss=False):
        torch = self.torch
        ids = torch.randint(0, VOCAB, (bs, seq), device=self.dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(input_ids=ids, labels=ids).loss
        peak = torch.cuda.memory_allocated()  # activations and logits live: the step's peak
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if keep_loss:  # the classic bug: summing losses without .item()/.detach()
            self.running = loss if self.running is None else self.running + loss
        return peak

    def eval_step(self, bs, seq):
        torch = self.torch
        ids = torch.randint(0, VOCAB, (bs, seq), device=self.dev)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            logits = self.model(input_ids=ids).logits
            acc = (logits.argmax(-1) == ids).float().mean().item()
        peak = torch.cuda.memory_allocated()
        del logits
        return peak, acc

    def checkpoint(self, path):
        self.torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict()}, path)

    def leak_bytes(self, n):
        """Append n bytes of 'cached activations' (bf16) to the leak list."""
        t = self.torch.empty(n // 2, dtype=self.torch.bfloat16, device=self.dev).normal_()
        self.leak.append(t)
        self.leaked += n

    def sync(self):
        self.torch.cuda.synchronize()

    def allocated(self):
        return self.torch.cuda.memory_allocated()

    def reserved(self):
        return self.torch.cuda.memory_reserved()

    def is_oom(self, e):
        return isinstance(e, self.torch.cuda.OutOfMemoryError)


class FakeBert:
    """Counter model of TorchBert for --dry-run."""

    def __init__(self, sc, cap):
        self.total = 150754820096
        self.cap = cap or self.total
        h = sc["hidden"]
        n_enc = sc["layers"] * (4 * h * h + 8 * h * h)
        n_emb = VOCAB * h + 512 * h
        self.params = 4 * (n_enc + n_emb)
        self.enc = 4 * n_enc
        self.trainable = self.params
        self.state = 0
        self.leak = []
        self.leaked = 0
        self.running = None

    def set_encoder_trainable(self, on):
        self.trainable = self.params if on else self.params - self.enc

    def _check(self, extra):
        if self.allocated() + extra > self.cap:
            raise MemoryError("fake OOM: %d bytes" % extra)

    def train_step(self, bs, seq, keep_loss=False):
        act = bs * seq * VOCAB * 6 + bs * seq * 256 * 40
        self._check(act)
        self.state = max(self.state, 2 * self.trainable)
        time.sleep(0.02)
        return self.allocated() + act

    def eval_step(self, bs, seq):
        act = bs * seq * VOCAB * 2
        self._check(act)
        return self.allocated() + act, 0.0

    def checkpoint(self, path):
        pass

    def leak_bytes(self, n):
        self._check(n)
        self.leak.append(n)
        self.leaked += n

    def sync(self):
        pass

    def allocated(self):
        return self.params + self.state + self.leaked

    def reserved(self):
        return self.allocated() + 64 * MiB

    def is_oom(self, e):
        return isinstance(e, MemoryError)


# ---------------------------------------------------------------------------- helpers


def would_die(floors, peaks, onset, rate, cap):
    """Epoch at which the epoch peak (and the floor) would reach the cap, by the leak's
    nominal rate from the measured values at the onset."""
    if rate <= 0 or not cap or onset >= len(floors):
        return None, None
    f0 = floors[onset - 1] if onset > 0 else floors[0]
    extra = sorted(p - f for p, f in zip(peaks[onset:], floors[onset:]) if p is not None)
    transient = extra[len(extra) // 2] if extra else 0
    # the leak adds `rate` during each epoch from `onset` on: floor_e = f0 + rate*(e-onset+1)
    die_floor = onset - 1 + (cap - f0) / rate
    die_peak = onset - 1 + (cap - f0 - transient) / rate
    return round(die_floor, 2), round(die_peak, 2)


def batch_shape(e, rng, sc):
    bs = 8 if e == 0 else 16 if e == 1 else 32   # warm-up: batch size ramps over epochs 0-1
    seq = rng.choice(range(32, 257, 16))         # variable sequence length per batch
    return bs, seq


# ---------------------------------------------------------------------------- scenarios


def run_bert(sc, comp, truth):
    cap = int(sc["cap_gib"] * GiB)
    W = (FakeBert if ARGS.dry_run else TorchBert)(sc, cap)
    truth.update(cap_bytes=cap, total_bytes=W.total, vocab=VOCAB, hidden=sc["hidden"],
                 layers=sc["layers"], eval_every=EVAL_EVERY, checkpoint_every=CKPT_EVERY)
    markers = sc.get("markers", True)
    onset = sc.get("onset")
    rate = sc.get("leak_mib", 0) * MiB
    onset_s = sc.get("onset_s")
    rate_s = sc.get("leak_mib_s", 0) * MiB
    unfreeze = sc.get("unfreeze_epoch")
    if unfreeze:
        W.set_encoder_trainable(False)
    rng = random.Random(os.getpid())
    ckpt = "/tmp/gpumon_corpus_%s_%d.pt" % (ARGS.name, os.getpid())
    floors, peaks, reserved, times, evals, ckpts, leaked = [], [], [], [], [], [], []
    t_train = time.time()
    truth["t_train_start_ms"] = int(t_train * 1000)
    if onset_s is not None:
        truth.update(leak_onset_t_ms=int((t_train + onset_s) * 1000), leak_bytes_per_s=rate_s)
    if onset is not None:
        truth.update(leak_onset_epoch=onset, leak_bytes_per_epoch=rate)
    if unfreeze:
        truth["unfreeze_epoch"] = unfreeze
    e = 0
    oom = None
    piece = rate // LEAK_PIECES if rate else 0
    while time.time() < ARGS.stop_at:
        if unfreeze and e == unfreeze:
            W.set_encoder_trainable(True)
        t_end = time.time() + ARGS.epoch_s
        peak, steps, leak_e = 0, 0, 0
        try:
            while True:
                bs, seq = batch_shape(e, rng, sc)
                leaking = onset is not None and e >= onset
                peak = max(peak, W.train_step(bs, seq, keep_loss=leaking))
                steps += 1
                if leaking and steps <= LEAK_PIECES:
                    W.leak_bytes(piece)
                    leak_e += piece
                if onset_s is not None and rate_s:
                    due = int(rate_s * max(0.0, time.time() - t_train - onset_s))
                    while W.leaked + 4 * MiB <= due:
                        W.leak_bytes(4 * MiB)
                if time.time() >= t_end and (not leaking or leak_e >= rate):
                    break
            W.sync()
        except Exception as ex:  # noqa: BLE001 - only an OOM is expected
            if not W.is_oom(ex):
                raise
            oom = dict(oom_epoch=e, oom_t_ms=now_ms(), oom_message=str(ex)[:600],
                       oom_allocated=W.allocated(), oom_reserved=W.reserved())
            log("OOM in epoch", e, str(ex)[:300])
            break
        gc.collect()
        W.sync()
        floors.append(W.allocated())
        reserved.append(W.reserved())
        peaks.append(peak)
        leaked.append(W.leaked)
        times.append(now_ms())
        if markers:
            comp.epoch(e)
        if e % 10 == 0 or e < 3:
            log("epoch %d floor %.0f MiB peak %.0f MiB reserved %.0f MiB leaked %.0f MiB steps %d"
                % (e, floors[-1] / MiB, peak / MiB, reserved[-1] / MiB, W.leaked / MiB, steps))
        if e > 0 and e % EVAL_EVERY == 0:
            if markers:
                comp.mark("eval", epoch=e)
            p, _acc = W.eval_step(64, 256)
            evals.append(dict(epoch=e, t_ms=now_ms(), peak=p))
        if e > 0 and e % CKPT_EVERY == 0:
            if markers:
                comp.mark("checkpoint", epoch=e)
            W.checkpoint(ckpt)
            ckpts.append(dict(epoch=e, t_ms=now_ms()))
        e += 1
    if oom:
        truth.update(oom)
        W.leak = []
        W.running = None
        gc.collect()
        time.sleep(min(3.0, max(0.0, ARGS.stop_at - time.time())))
    try:
        os.remove(ckpt)
    except OSError:
        pass
    truth.update(epochs=len(floors), epoch_times=times, floors=floors, peaks=peaks,
                 reserved=reserved, leaked=leaked, evals=evals, checkpoints=ckpts)
    if onset is not None:
        df, dp = would_die(floors, peaks, onset, rate, cap)
        truth.update(would_die_epoch_floor=df, would_die_epoch_peak=dp)
    if onset_s is not None and rate_s and floors:
        # floor at onset from the epochs before it (the internal 1.5 s epochs)
        before = [f for f, t in zip(floors, times) if t <= truth["leak_onset_t_ms"]] or floors[:1]
        base = before[-1]
        truth["would_die_t_ms"] = int(truth["leak_onset_t_ms"] + 1000 * (cap - base) / rate_s)


def run_jax(sc, comp, truth):
    if ARGS.dry_run:
        truth.update(cap_bytes=None, epochs=0, note="dry run: JAX skipped")
        return
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    truth.update(jax_version=jax.__version__, device=str(dev),
                 mem_fraction=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
                 preallocate=os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
    sizes = [512, 2048, 2048, 2048, 10]
    key = jax.random.PRNGKey(0)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (a, b)) / jnp.sqrt(a), jnp.zeros(b)))

    def fwd(p, x):
        for i, (w, b) in enumerate(p):
            x = x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16) + b
            x = x.astype(jnp.float32)
            if i < len(p) - 1:
                x = jax.nn.gelu(x)
        return x

    def loss_fn(p, x, y):
        lg = fwd(p, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(lg), y[:, None], 1))

    @jax.jit
    def update(p, m, v, t, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, m, g)
        v = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, v, g)
        p = jax.tree_util.tree_map(
            lambda w, a, b: w - 1e-3 * (a / (1 - 0.9 ** t)) / (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8),
            p, m, v)
        return p, m, v, loss

    evalf = jax.jit(lambda p, x: jnp.argmax(fwd(p, x), -1))
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    rng = random.Random(0)
    t = 0
    times, floors, peaks, evals = [], [], [], []

    def stats():
        try:
            return dev.memory_stats() or {}
        except Exception:
            return {}
    truth["t_train_start_ms"] = now_ms()
    e = 0
    while time.time() < ARGS.stop_at:
        t_end = time.time() + ARGS.epoch_s
        while time.time() < t_end:
            bs = 64 if e == 0 else rng.choice([128, 256, 512])
            key, k1, k2 = jax.random.split(key, 3)
            x = jax.random.normal(k1, (bs, sizes[0]))
            y = jax.random.randint(k2, (bs,), 0, sizes[-1])
            t += 1
            params, m, v, loss = update(params, m, v, t, x, y)
        loss.block_until_ready()
        gc.collect()
        st = stats()
        floors.append(st.get("bytes_in_use"))
        peaks.append(st.get("peak_bytes_in_use"))
        times.append(now_ms())
        comp.epoch(e)
        if e > 0 and e % EVAL_EVERY == 0:
            comp.mark("eval", epoch=e)
            key, k1 = jax.random.split(key)
            evalf(params, jax.random.normal(k1, (8192, sizes[0]))).block_until_ready()
            evals.append(dict(epoch=e, t_ms=now_ms()))
        if e % 10 == 0:
            log("epoch %d in use %s peak %s limit %s" % (e, floors[-1], peaks[-1],
                                                        st.get("bytes_limit")))
        e += 1
    truth.update(cap_bytes=stats().get("bytes_limit"), epochs=len(floors), epoch_times=times,
                 floors=floors, peaks_lifetime=peaks, evals=evals)


def reduce_snapshot():
    """T, L and the largest live block from PyTorch's block map (as the companion does)."""
    import torch
    from gpumon import _frag
    f = _frag.reduce_torch_snapshot(torch.cuda.memory_snapshot(), 0)
    return {k: f.get(k) for k in ("free_total", "largest_free", "largest_block", "n_segments",
                                  "n_free_blocks")}


def run_frag(sc, comp, truth):
    """Research note §6.3 scenario B inside a small training loop (small-pool tensors only)."""
    cap = int(sc["cap_gib"] * GiB)
    table_b = sc["table_mib"] * MiB
    blk = sc["block_mib"] * MiB
    dry = ARGS.dry_run
    if not dry:
        import torch
        dev = torch.device("cuda:0")
        torch.cuda.init()
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(cap / total, 0)
        torch.manual_seed(0)
        # a small MLP: every tensor < 1 MiB, so it lives in the small pool and leaves the
        # large-pool hole structure alone
        w1 = torch.randn(256, 512, device=dev, requires_grad=True)
        w2 = torch.randn(512, 256, device=dev, requires_grad=True)
        opt = torch.optim.AdamW([w1, w2], lr=1e-4)
        table = torch.empty(table_b // 4, dtype=torch.float32, device=dev).normal_()
        OOM = torch.cuda.OutOfMemoryError
    else:
        total = 150754820096
        OOM = MemoryError
        table = "table"
    truth.update(cap_bytes=cap, total_bytes=total, table_bytes=table_b, block_bytes=blk,
                 refresh_every=sc["refresh_every"], frag_epoch=sc["frag_epoch"],
                 keep_every=sc["keep_every"])
    kept, times, floors, reserved, refreshes = [], [], [], [], []
    truth["t_train_start_ms"] = now_ms()
    e = 0
    oom = None
    while time.time() < ARGS.stop_at:
        try:
            if e > 0 and e % sc["refresh_every"] == 0:
                comp.mark("table_rebuild", epoch=e)
                if dry:
                    if e > sc["frag_epoch"]:
                        raise MemoryError("fake: 64 MiB fits in no hole")
                else:
                    table = table.clone()  # the new copy is built while the old one is alive
                refreshes.append(dict(epoch=e, t_ms=now_ms()))
                log("table rebuilt at epoch", e)
            if e == sc["frag_epoch"]:
                comp.mark("bucket_cache_fill", epoch=e)
                if not dry:
                    blocks = []
                    margin = sc["margin_mib"] * MiB
                    while torch.cuda.memory_reserved() + 20 * MiB + margin <= cap:
                        blocks.append(torch.empty(blk, dtype=torch.uint8, device=dev))
                    kept = blocks[::sc["keep_every"]]
                    n = len(blocks)
                    del blocks
                    torch.cuda.synchronize()
                    fr = reduce_snapshot()
                    fr.update(n_blocks=n, n_kept=len(kept), allocated=torch.cuda.memory_allocated(),
                              reserved=torch.cuda.memory_reserved(),
                              device_avail=cap - torch.cuda.memory_reserved())
                else:
                    fr = dict(n_blocks=0)
                truth.update(frag_t_ms=now_ms(), frag_state=fr)
                log("fragmented:", json.dumps(fr))
            t_end = time.time() + ARGS.epoch_s
            while time.time() < t_end:
                if dry:
                    time.sleep(0.02)
                    continue
                x = torch.randn(128, 256, device=dev)
                loss = ((x @ w1).relu() @ w2).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        except OOM as ex:
            st = {} if dry else reduce_snapshot()
            oom = dict(oom_epoch=e, oom_t_ms=now_ms(), oom_message=str(ex)[:600],
                       oom_request=table_b, oom_state=st)
            log("OOM in epoch", e, str(ex)[:300])
            break
        gc.collect()
        times.append(now_ms())
        if not dry:
            torch.cuda.synchronize()
            floors.append(torch.cuda.memory_allocated())
            reserved.append(torch.cuda.memory_reserved())
        comp.epoch(e)
        e += 1
    if oom:
        truth.update(oom)
        end = min(ARGS.stop_at, time.time() + sc["linger_s"])
        while time.time() < end:  # alive a few seconds after the OOM, then exit
            time.sleep(0.25)
    truth.update(epochs=len(times), epoch_times=times, floors=floors, reserved=reserved,
                 refreshes=refreshes)


def run_grab(sc, comp, truth):
    if ARGS.dry_run:
        truth.update(grab_bytes=0, note="dry run")
        emit(dict(type="grabbed", grab_bytes=0))
        while time.time() < ARGS.hold_until:
            time.sleep(0.1)
        return
    import torch
    dev = torch.device("cuda:0")
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    free, _ = torch.cuda.mem_get_info(0)
    want = int(sc["grab_frac"] * total)
    grab = min(want, free - int(sc["leave_gib"] * GiB))
    big = torch.empty(grab, dtype=torch.uint8, device=dev)
    del big  # stays in PyTorch's cache: reserved, not allocated
    work = torch.randn(int(sc["work_gib"] * GiB) // 2, dtype=torch.bfloat16, device=dev)
    torch.cuda.synchronize()
    truth.update(total_bytes=total, free_at_start=free, grab_bytes=grab, wanted_bytes=want,
                 grab_t_ms=now_ms(), reserved=torch.cuda.memory_reserved(),
                 allocated=torch.cuda.memory_allocated(),
                 reserved_frac_of_total=round(torch.cuda.memory_reserved() / total, 4))
    emit(dict(type="grabbed", grab_bytes=grab, reserved=torch.cuda.memory_reserved(), t_ms=now_ms()))
    log("grabbed %.1f GiB of %.1f GiB (free was %.1f)" % (grab / GiB, total / GiB, free / GiB))
    m = work[: 4096 * 4096].view(4096, 4096)
    times = []
    e = 0
    while time.time() < ARGS.hold_until:
        t_end = min(time.time() + ARGS.epoch_s, ARGS.hold_until)
        while time.time() < t_end:
            (m @ m).sum().item()
            time.sleep(0.05)
        times.append(now_ms())
        comp.epoch(e)
        e += 1
    truth.update(grab_end_t_ms=now_ms(), epochs=len(times), epoch_times=times)


# ---------------------------------------------------------------------------- main


def main():
    global ARGS, T_START
    T_START = time.time()
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=100.0,
                    help="training time when --deadline is not given")
    ap.add_argument("--deadline", type=float, default=None,
                    help="Unix time at which training stops (run_corpus.sh sets one for all)")
    ap.add_argument("--hold-until", type=float, default=None,
                    help="grab_all: Unix time until which the memory is held")
    ap.add_argument("--epoch-s", type=float, default=1.5)
    ap.add_argument("--dry-run", action="store_true", help="no framework: a counter model")
    ARGS = ap.parse_args()
    ARGS.stop_at = ARGS.deadline if ARGS.deadline else T_START + ARGS.seconds
    if ARGS.hold_until is None:
        ARGS.hold_until = ARGS.stop_at
    sc = SCENARIOS[ARGS.name]
    emit(dict(type="start", group=sc["group"], t_ms=now_ms(), cmdline=sys.argv,
              config=sc, epoch_s=ARGS.epoch_s, gpumon_dir=os.environ.get("GPUMON_DIR"),
              companion=sc.get("companion", True), markers=sc.get("markers", True)))
    truth = dict(type="truth", group=sc["group"], config=sc, t_start_ms=int(T_START * 1000))
    comp = Companion(sc.get("companion", True), ARGS.dry_run)
    run = {"bert": run_bert, "jax": run_jax, "frag": run_frag, "grab": run_grab}[sc["kind"]]
    try:
        run(sc, comp, truth)
        truth["ok"] = True
    except Exception as ex:  # the truth line still goes out, saying what broke
        import traceback
        traceback.print_exc()
        truth.update(ok=False, error="%s: %s" % (type(ex).__name__, str(ex)[:600]))
    truth["t_end_ms"] = now_ms()
    emit(truth)
    comp.stop()
    log("done", "ok" if truth.get("ok") else "FAILED")


ARGS = None
T_START = time.time()

if __name__ == "__main__":
    main()
