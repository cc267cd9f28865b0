#!/usr/bin/env python3
"""The second alert corpus (tests/corpus2/): runs built differently from the first one
(scripts/gpu/corpus/scenario.py), so rules tuned on one can be checked on the other.

    PYTHONPATH=python GPUMON_DIR=/tmp/s python3 scripts/gpu/corpus2/scenario2.py --name vit_cache_leak \
        [--seconds S] [--dry-run]

Every scenario knows its own memory behaviour (onset, rate, cap, what it asks for) and
writes it as ground truth to stdout ({"type": "start"|"truth"|...}); it never reads
gpumon's output. Scenarios (SCENARIOS holds every number):

  vit_cache_leak      a small VisionTransformer (torchvision) on random images; from epoch
                      `onset` a feature cache keyed by sample id keeps 6 x 8 MiB per epoch
                      (a growing cache); capped so it dies inside the run.
  gpt2_trainer_leak   GPT-2 (GPT2Config, random weights) through HF Trainer with gpumon's
                      callback; from epoch `onset` a "train accuracy" forward pass with
                      grad enabled keeps its logits in a list: each keeps its whole graph
                      alive (retained graphs).
  metric_list_leak    ResNet-18 on random 64x64 images; a metric keeps every batch's
                      probabilities on the GPU in a Python list from epoch 0.
  jax_leak            Flax MLP, PREALLOCATE=false under a MEM_FRACTION limit; from epoch
                      `onset` a copy of the parameters is kept every epoch ("EMA history").
  cupy_epochs_leak    CuPy (no framework the companion can read) calling gpumon.epoch();
                      from epoch `onset` 24 MiB per epoch kept. The floor must come from NVML.
  cpu_only_epochs     numpy only, gpumon.epoch() every second: the recording must still
                      hold epoch records.
  nvml_only_leak      PyTorch without a companion (GPUMON_DISABLE=1), no markers: leaks
                      16 MiB/s from `onset_s` under a cap.
  clean_nvml_only     the same loop without the leak.
  clean_gpt2_trainer  gpt2_trainer_leak without the leak (eval every 5 epochs).
  clean_vit           vit without the leak, batch sizes varying per epoch, eval spikes.
  clean_flax_prealloc Flax CNN, JAX preallocation ON with MEM_FRACTION 0.06 (a small pool,
                      mostly used): no grab-all.
  jax_grab_default    JAX with its default preallocation (75 % of the card), a small MLP.
  jax_grab_half       JAX with XLA_PYTHON_CLIENT_MEM_FRACTION=0.5.
  torch_cache_grab    PyTorch: a preprocessing phase fills ~70 GiB, frees it (the cache
                      keeps it), then trains a small model.
  frag_fill           PyTorch under a 4 GiB cap: from epoch `fill_from` a bucket cache
                      fills 384 MiB per epoch with 2 MiB blocks and keeps one in ten; a
                      64 MiB buffer rebuilt every epoch stops fitting once the cap is reached.
  frag_varsize        PyTorch under a 1.5 GiB cap, variable request sizes (1-9 MiB
                      activations per step), an LRU "sample cache" of random-size entries,
                      and an eval every 5 epochs that needs one 160 MiB block.
  clean_capped_varsize frag_varsize without the LRU cache (everything freed): never OOMs.
  frag_curriculum(_b) PyTorch under a cap: a burst of 1-4 MiB blocks (one in eight kept)
                      leaves the cache in holes; a contiguous buffer rebuilt every epoch
                      grows (a curriculum): retries, then an OOM with the cache mostly free.
  demo_leak / demo_frag  the bundled demo recording: a GPT-2 style LM leaking 96 MiB per
                      epoch from epoch 3 (kept hidden states and an un-detached loss sum),
                      and frag_fill under a 6 GiB cap filling 80 MiB per epoch.

Native CUDA scenarios live in leak.cu (run through `gpumon run`).
--dry-run replaces the frameworks with counters, to check control flow and truth records
on a machine without a GPU.
"""

import argparse
import gc
import json
import os
import random
import sys
import time

MiB = 1 << 20
GiB = 1 << 30

SCENARIOS = {
    "vit_cache_leak": dict(kind="vit", cap_gib=2.5, onset=8, piece_mib=8, pieces=6, epoch_steps=12,
                           epoch_s=2.5),
    "clean_vit": dict(kind="vit", cap_gib=4.0, epoch_steps=12, vary_batch=True, eval_every=5,
                      epoch_s=2.5),
    "gpt2_trainer_leak": dict(kind="gpt2", cap_gib=3.0, onset=6, examples=1024, batch=16),
    "clean_gpt2_trainer": dict(kind="gpt2", cap_gib=3.0, examples=1024, batch=16, eval_every=5),
    "metric_list_leak": dict(kind="resnet", cap_gib=2.0, onset=0, epoch_steps=40, batch=128,
                             epoch_s=2.0),
    "jax_leak": dict(kind="flax_mlp", onset=5, env_note="PREALLOCATE=false, MEM_FRACTION=0.015"),
    "clean_flax_prealloc": dict(kind="flax_cnn", env_note="PREALLOCATE default, MEM_FRACTION=0.06"),
    "jax_grab_default": dict(kind="jax_small", env_note="no XLA_* variable: preallocates 75%"),
    "jax_grab_half": dict(kind="jax_small", env_note="XLA_PYTHON_CLIENT_MEM_FRACTION=0.5"),
    "torch_cache_grab": dict(kind="torch_grab", phase_gib=70.0, piece_gib=1.0),
    "cupy_epochs_leak": dict(kind="cupy", onset=5, leak_mib=24, work_mib=256),
    "cpu_only_epochs": dict(kind="cpu", epochs=12),
    "nvml_only_leak": dict(kind="mlp_markerless", cap_gib=3.5, onset_s=30.0, leak_mib_s=16),
    "clean_nvml_only": dict(kind="mlp_markerless", cap_gib=2.0),
    "frag_fill": dict(kind="frag_fill", cap_gib=4.0, fill_from=10, fill_mib=384, block_mib=2,
                      keep_every=10, buffer_mib=64),
    # the bundled demo recording (both GPUs, one ~3-minute `gpumon record`)
    "demo_leak": dict(kind="lm", cap_gib=14.0, onset=3, leak_mib=96, epoch_s=2.0,
                      eval_every=5, ckpt_every=10),
    "demo_frag": dict(kind="frag_fill", cap_gib=6.0, fill_from=5, fill_mib=80, block_mib=2,
                      keep_every=10, buffer_mib=64),
    # curriculum: a contiguous per-step buffer that grows every epoch, after a burst of
    # 1-4 MiB blocks (one in eight kept) filled the cap's memory with holes
    "frag_curriculum": dict(kind="frag_curriculum", cap_gib=3.0, burst_at=5, leave_mib=768,
                            keep_every=8, t0_mib=32, t_step_mib=24, epoch_s=1.5),
    "frag_curriculum_b": dict(kind="frag_curriculum", cap_gib=5.0, burst_at=8, leave_mib=1280,
                              keep_every=6, t0_mib=96, t_step_mib=24, epoch_s=2.0),
    "demo_frag2": dict(kind="frag_curriculum", cap_gib=6.0, burst_at=5, leave_mib=1024,
                       keep_every=8, t0_mib=64, t_step_mib=8, epoch_s=2.2),
    "frag_varsize": dict(kind="frag_varsize", cap_gib=1.5, lru=96, eval_mib=160, eval_every=5),
    "clean_capped_varsize": dict(kind="frag_varsize", cap_gib=1.5, lru=0, eval_mib=160,
                                 eval_every=5),
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


class Companion:
    """gpumon's companion when the scenario has one (GPUMON_DISABLE=1 turns it off)."""

    def __init__(self, dry):
        # also in --dry-run: no framework is readable then, so every epoch is marked without
        # a floor (the path of a framework gpumon cannot read), which checks the plumbing end to end
        self.gm = None
        if os.environ.get("GPUMON_DISABLE") != "1":
            import gpumon
            self.gm = gpumon
            log("gpumon.start() ->", gpumon.start())

    def epoch(self, n):
        if self.gm:
            self.gm.epoch(n)

    def mark(self, label, epoch=None):
        if self.gm:
            self.gm.mark(label, epoch=epoch)

    def stop(self):
        if self.gm:
            self.gm.stop()


def is_oom(ex):
    s = "%s %s" % (type(ex).__name__, ex)
    return ("OutOfMemory" in s or "out of memory" in s or "RESOURCE_EXHAUSTED" in s
            or "MemoryError" in s or "OUT_OF_MEMORY" in s)


def oom_record(e, ex, **kw):
    r = dict(oom_epoch=e, oom_t_ms=now_ms(), oom_message=str(ex)[:700])
    r.update(kw)
    return r


def linger(truth):
    """Stay alive a few seconds after an OOM (so gpumon sees the process), then exit."""
    end = min(ARGS.stop_at, time.time() + 4.0)
    while time.time() < end:
        time.sleep(0.25)


# ------------------------------------------------------------------------------- torch


def torch_setup(cap_gib):
    import torch
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    if cap_gib:
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * GiB / total), 0)
    torch.manual_seed(1234)
    return torch, total


def torch_stats(torch):
    st = torch.cuda.memory_stats()
    return dict(allocated=st.get("allocated_bytes.all.current"),
                reserved=st.get("reserved_bytes.all.current"),
                retries=st.get("num_alloc_retries"),
                inactive_split=st.get("inactive_split_bytes.all.current"),
                peak=st.get("allocated_bytes.all.peak"))


class EpochLog:
    """Per-epoch truth measured by the scenario itself (its own allocator counters)."""

    def __init__(self):
        self.rows = []

    def add(self, e, **kw):
        row = dict(epoch=e, t_ms=now_ms())
        row.update({k: v for k, v in kw.items() if v is not None})
        self.rows.append(row)
        if e < 3 or e % 10 == 0:
            log("epoch", e, json.dumps(row))


def run_vit(sc, comp, truth):
    if ARGS.dry_run:
        return dry_epochs(sc, comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    from torchvision.models import VisionTransformer
    dev = torch.device("cuda:0")
    model = VisionTransformer(image_size=96, patch_size=16, num_layers=6, num_heads=8,
                              hidden_dim=384, mlp_dim=1536, num_classes=100).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    onset = sc.get("onset")
    piece = sc.get("piece_mib", 0) * MiB
    cache = {}  # sample id -> cached features: the growing cache
    rng = random.Random(7)
    log_ = EpochLog()
    truth.update(cap_bytes=int(sc["cap_gib"] * GiB), total_bytes=total, leak_onset_epoch=onset,
                 leak_bytes_per_epoch=piece * sc.get("pieces", 0) if onset is not None else 0)
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        bs = rng.choice([48, 64, 96]) if sc.get("vary_batch") else 64
        if e == 0:
            bs = 32
        try:
            for step in range(sc["epoch_steps"]):
                x = torch.randn(bs, 3, 96, 96, device=dev)
                y = torch.randint(0, 100, (bs,), device=dev)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if onset is not None and e >= onset and step < sc["pieces"]:
                    # features of one "sample" kept for reuse, never evicted
                    cache[(e, step)] = torch.empty(piece // 2, dtype=torch.bfloat16, device=dev)
            torch.cuda.synchronize()
            if sc.get("eval_every") and e > 0 and e % sc["eval_every"] == 0:
                comp.mark("eval", epoch=e)
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    model(torch.randn(256, 3, 96, 96, device=dev)).float().softmax(-1).sum().item()
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, **torch_stats(torch))
            log("OOM in epoch", e, str(ex)[:200])
            break
        time.sleep(max(0.0, sc["epoch_s"] - (time.time() - t0)))  # a data loader's pace
        gc.collect()
        log_.add(e, batch=bs, steps=sc["epoch_steps"], dur_s=round(time.time() - t0, 3),
                 kept=len(cache), **torch_stats(torch))
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


def finish(truth, log_, oom):
    truth.update(epochs=len(log_.rows), per_epoch=log_.rows)
    if oom:
        truth.update(oom)
        linger(truth)


class GpuCounter:
    """--dry-run stand-in: an allocator that only counts."""

    def __init__(self, cap):
        self.cap = cap
        self.live = 0

    def take(self, n):
        if self.live + n > self.cap:
            raise MemoryError("fake out of memory asking %d" % n)
        self.live += n


def dry_epochs(sc, comp, truth):
    g = GpuCounter(int(sc.get("cap_gib", 1) * GiB))
    log_ = EpochLog()
    e = 0
    oom = None
    while left() > 0:
        time.sleep(0.05)
        try:
            if sc.get("onset") is not None and e >= sc["onset"]:
                g.take(sc.get("leak_mib", 48) * MiB)
        except MemoryError as ex:
            oom = oom_record(e, ex)
            break
        log_.add(e, allocated=g.live)
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


def run_gpt2(sc, comp, truth):
    if ARGS.dry_run:
        return dry_epochs(sc, comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
    import gpumon.hf
    cfg = GPT2Config(vocab_size=8192, n_positions=256, n_embd=256, n_layer=4, n_head=4)
    model = GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(3)
    data = [{"input_ids": ids, "labels": ids}
            for ids in torch.randint(0, 8192, (sc["examples"], 128), generator=g)]
    onset = sc.get("onset")
    log_ = EpochLog()
    kept = []  # the metric history that keeps graphs alive
    state = {"epoch": 0, "oom": None, "t0": time.time()}

    class Truth(TrainerCallback):
        def on_epoch_end(self, args, st, control, **kw):
            e = state["epoch"]
            if onset is not None and e >= onset:
                # "train accuracy" on one batch, with grad on (the bug): the logits keep
                # the whole forward graph alive as long as they sit in the list
                m = kw["model"]
                ids = data[0]["input_ids"].unsqueeze(0).repeat(sc["batch"], 1).to(m.device)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    kept.append(m(input_ids=ids).logits)
            torch.cuda.synchronize()
            log_.add(e, dur_s=round(time.time() - state["t0"], 3), kept=len(kept), **torch_stats(torch))
            state["t0"] = time.time()
            state["epoch"] = e + 1
            if left() <= 0:
                control.should_training_stop = True

        def on_evaluate(self, args, st, control, **kw):
            pass

    class LeakyTrainer(Trainer):
        pass

    args = TrainingArguments(output_dir="/tmp/gpt2_%d" % os.getpid(), per_device_train_batch_size=sc["batch"],
                             num_train_epochs=10000, logging_strategy="no", save_strategy="no",
                             report_to="none", bf16=True, dataloader_num_workers=0,
                             eval_strategy="epoch" if sc.get("eval_every") else "no",
                             per_device_eval_batch_size=64, disable_tqdm=True, seed=3)
    # The gpumon callback comes after the truth callback, so the floor it records
    # includes this epoch's kept logits.
    trainer = LeakyTrainer(model=model, args=args, train_dataset=data,
                           eval_dataset=data[:128] if sc.get("eval_every") else None,
                           callbacks=[Truth(), gpumon.hf.GpumonTrainerCallback()])
    truth.update(cap_bytes=int(sc["cap_gib"] * GiB), total_bytes=total, leak_onset_epoch=onset,
                 steps_per_epoch=sc["examples"] // sc["batch"],
                 note="leak per epoch = one kept forward graph (logits + activations of batch %d x 128)" % sc["batch"])
    try:
        trainer.train()
    except Exception as ex:
        if not is_oom(ex):
            raise
        state["oom"] = oom_record(state["epoch"], ex, **torch_stats(torch))
        log("OOM in epoch", state["epoch"], str(ex)[:200])
    finish(truth, log_, state["oom"])


def run_resnet(sc, comp, truth):
    if ARGS.dry_run:
        return dry_epochs(sc, comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    from torchvision.models import resnet18
    dev = torch.device("cuda:0")
    model = resnet18(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    preds = []  # the metric's state: every batch's probabilities, on the GPU
    log_ = EpochLog()
    bs = sc["batch"]
    truth.update(cap_bytes=int(sc["cap_gib"] * GiB), total_bytes=total, leak_onset_epoch=sc["onset"],
                 leak_bytes_per_epoch=sc["epoch_steps"] * bs * 1000 * 4)
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        try:
            for _ in range(sc["epoch_steps"]):
                x = torch.randn(bs, 3, 64, 64, device=dev).to(memory_format=torch.channels_last)
                y = torch.randint(0, 1000, (bs,), device=dev)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = model(x)
                    loss = torch.nn.functional.cross_entropy(logits, y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                preds.append(logits.detach().float().softmax(-1))
            torch.cuda.synchronize()
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, **torch_stats(torch))
            log("OOM in epoch", e, str(ex)[:200])
            break
        # a data loader's pace: epochs of about epoch_s seconds
        time.sleep(max(0.0, sc["epoch_s"] - (time.time() - t0)))
        gc.collect()
        log_.add(e, dur_s=round(time.time() - t0, 3), kept=len(preds), **torch_stats(torch))
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


def run_lm(sc, comp, truth):
    """A GPT-2 style LM in a plain PyTorch loop (the demo's leaking run)."""
    if ARGS.dry_run:
        return dry_epochs(sc, comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    from transformers import GPT2Config, GPT2LMHeadModel
    dev = torch.device("cuda:0")
    model = GPT2LMHeadModel(GPT2Config(vocab_size=16384, n_positions=512, n_embd=512, n_layer=6,
                                       n_head=8)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(2)
    onset, per = sc["onset"], sc["leak_mib"] * MiB
    kept, running = [], None
    log_ = EpochLog()
    truth.update(cap_bytes=int(sc["cap_gib"] * GiB), total_bytes=total, leak_onset_epoch=onset,
                 leak_bytes_per_epoch=per)
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        try:
            while time.time() - t0 < sc["epoch_s"]:
                ids = torch.randint(0, 16384, (16, rng.choice([128, 192, 256])), device=dev)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if e >= onset:
                    running = loss if running is None else running + loss  # never .item()
            if e >= onset:
                # "cache" of hidden states kept for an analysis that never runs
                kept.append(torch.empty(per // 2, dtype=torch.bfloat16, device=dev))
            torch.cuda.synchronize()
            if e > 0 and e % sc["eval_every"] == 0:
                comp.mark("eval", epoch=e)
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    model(input_ids=torch.randint(0, 16384, (64, 256), device=dev)).logits.float().mean().item()
            if e > 0 and e % sc["ckpt_every"] == 0:
                comp.mark("checkpoint", epoch=e)
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, **torch_stats(torch))
            log("OOM in epoch", e, str(ex)[:200])
            break
        gc.collect()
        log_.add(e, dur_s=round(time.time() - t0, 3), kept=len(kept), **torch_stats(torch))
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


def run_mlp_markerless(sc, comp, truth):
    """No epoch markers (the loop has epochs, gpumon is not told): NVML only."""
    if ARGS.dry_run:
        truth.update(note="dry run")
        return
    torch, total = torch_setup(sc["cap_gib"])
    dev = torch.device("cuda:0")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(5)
    onset_s = sc.get("onset_s")
    rate = sc.get("leak_mib_s", 0) * MiB
    leak = []
    leaked = 0
    t_start = time.time()
    truth.update(cap_bytes=int(sc["cap_gib"] * GiB), total_bytes=total, t_train_start_ms=int(t_start * 1000))
    if onset_s is not None:
        truth.update(leak_onset_t_ms=int((t_start + onset_s) * 1000), leak_bytes_per_s=rate)
    rows = []
    oom = None
    next_row = time.time()
    while left() > 0:
        try:
            bs = rng.choice([256, 512, 1024, 2048])
            x = torch.randn(bs, 1024, device=dev)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if onset_s is not None:
                due = rate * max(0.0, time.time() - t_start - onset_s)
                while leaked + 4 * MiB <= due:
                    leak.append(torch.empty(MiB, dtype=torch.float32, device=dev))
                    leaked += 4 * MiB
            torch.cuda.synchronize()
            time.sleep(0.02)
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(None, ex, t_s=round(time.time() - t_start, 2), leaked=leaked,
                             **torch_stats(torch))
            log("OOM", str(ex)[:200])
            break
        if time.time() >= next_row:
            next_row += 5.0
            rows.append(dict(t_ms=now_ms(), leaked=leaked, **torch_stats(torch)))
    truth.update(samples=rows, leaked_total=leaked)
    if oom:
        truth.update(oom)
        linger(truth)


def run_torch_grab(sc, comp, truth):
    if ARGS.dry_run:
        truth.update(note="dry run")
        return
    torch, total = torch_setup(None)
    dev = torch.device("cuda:0")
    free0, _ = torch.cuda.mem_get_info(0)
    want = min(int(sc["phase_gib"] * GiB), free0 - 20 * GiB)
    comp.mark("preprocess")
    parts = []
    while sum(p.numel() for p in parts) < want:
        parts.append(torch.empty(int(sc["piece_gib"] * GiB), dtype=torch.uint8, device=dev).fill_(1))
    held = sum(p.numel() for p in parts)
    del parts  # freed, but PyTorch's cache keeps every segment
    torch.cuda.synchronize()
    truth.update(total_bytes=total, free_at_start=free0, phase_bytes=held, grab_t_ms=now_ms(),
                 reserved_after_phase=torch.cuda.memory_reserved(),
                 policy="PyTorch caching allocator keeps the preprocessing phase's segments")
    emit(dict(type="grabbed", grab_bytes=held, t_ms=now_ms()))
    comp.mark("train")
    model = torch.nn.Linear(2048, 2048).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    log_ = EpochLog()
    e = 0
    while left() > 0:
        t_end = time.time() + 2.0
        while time.time() < t_end:
            loss = model(torch.randn(512, 2048, device=dev)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            time.sleep(0.01)
        torch.cuda.synchronize()
        log_.add(e, **torch_stats(torch))
        comp.epoch(e)
        e += 1
    truth.update(grab_end_t_ms=now_ms())
    finish(truth, log_, None)


def run_frag_fill(sc, comp, truth):
    """Bucket cache filled progressively from `fill_from`: 2 MiB blocks from 20 MiB
    segments, nine in ten freed, so each segment keeps one block and 18 MiB holes; the
    64 MiB buffer rebuilt each epoch (new copy made before the old is dropped) needs a
    contiguous 64 MiB that no hole has once reserved reaches the cap."""
    if ARGS.dry_run:
        return dry_epochs(dict(sc, onset=sc["fill_from"], leak_mib=sc["fill_mib"] // 10), comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    dev = torch.device("cuda:0")
    cap = int(sc["cap_gib"] * GiB)
    w1 = torch.randn(256, 512, device=dev, requires_grad=True)
    w2 = torch.randn(512, 256, device=dev, requires_grad=True)
    opt = torch.optim.AdamW([w1, w2], lr=1e-4)
    buf = torch.empty(sc["buffer_mib"] * MiB, dtype=torch.uint8, device=dev)
    kept = []
    log_ = EpochLog()
    truth.update(cap_bytes=cap, total_bytes=total, request_bytes=sc["buffer_mib"] * MiB,
                 fill_from=sc["fill_from"])
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        try:
            nb = buf.clone()  # the new copy exists before the old one is dropped
            buf = nb
            del nb
            if e >= sc["fill_from"]:
                blocks = [torch.empty(sc["block_mib"] * MiB, dtype=torch.uint8, device=dev)
                          for _ in range(sc["fill_mib"] // sc["block_mib"])]
                kept.extend(blocks[::sc["keep_every"]])
                del blocks
            t_end = t0 + 2.0
            while time.time() < t_end:
                x = torch.randn(128, 256, device=dev)
                loss = ((x @ w1).relu() @ w2).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                time.sleep(0.005)
            torch.cuda.synchronize()
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, request=sc["buffer_mib"] * MiB, **torch_stats(torch),
                             **frag_state(torch))
            log("OOM in epoch", e, str(ex)[:200])
            break
        gc.collect()
        log_.add(e, kept=len(kept), dur_s=round(time.time() - t0, 3), **torch_stats(torch),
                 **frag_state(torch))
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


def run_frag_curriculum(sc, comp, truth):
    """A burst of 1-4 MiB blocks at epoch `burst_at` fills the cap up to `leave_mib`, one in
    `keep_every` kept: the cache holds ~(cap - leave) in holes of at most ~18 MiB. A
    contiguous buffer (a curriculum's per-step buffer) is rebuilt every epoch `t_step_mib`
    larger, the new one made before the old is dropped. Each rebuild needs a fresh segment;
    near the cap the allocator frees the old buffer's cached segment and retries
    (num_alloc_retries rises), until the buffer fits in no hole and not in what the cap
    leaves: an OOM with most of the cache free in pieces."""
    if ARGS.dry_run:
        return dry_epochs(dict(sc, onset=sc["burst_at"], leak_mib=sc["t_step_mib"]), comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    dev = torch.device("cuda:0")
    cap = int(sc["cap_gib"] * GiB)
    rng = random.Random(21)
    w1 = torch.randn(256, 512, device=dev, requires_grad=True)
    w2 = torch.randn(512, 256, device=dev, requires_grad=True)
    opt = torch.optim.AdamW([w1, w2], lr=1e-4)
    size = sc["t0_mib"] * MiB
    buf = torch.empty(size, dtype=torch.uint8, device=dev)
    kept = []
    log_ = EpochLog()
    truth.update(cap_bytes=cap, total_bytes=total, burst_at=sc["burst_at"],
                 t0_bytes=size, t_step_bytes=sc["t_step_mib"] * MiB)
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        try:
            if e == sc["burst_at"]:
                comp.mark("bucket_cache_fill", epoch=e)
                blocks = []
                leave = sc["leave_mib"] * MiB
                while torch.cuda.memory_reserved() + 20 * MiB + leave <= cap:
                    blocks.append(torch.empty(rng.randint(1 * MiB, 4 * MiB), dtype=torch.uint8, device=dev))
                kept = blocks[::sc["keep_every"]]
                n = len(blocks)
                del blocks
                torch.cuda.synchronize()
                truth.update(burst_t_ms=now_ms(), burst_blocks=n, burst_kept=len(kept),
                             burst_state=dict(torch_stats(torch), **frag_state(torch)))
            if e > 0:
                size += sc["t_step_mib"] * MiB
                nb = torch.empty(size, dtype=torch.uint8, device=dev)  # new before old dropped
                nb[:1].fill_(1)
                buf = nb
                del nb
            t_end = t0 + sc["epoch_s"]
            while time.time() < t_end:
                x = torch.randn(128, 256, device=dev)
                loss = ((x @ w1).relu() @ w2).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                time.sleep(0.005)
            torch.cuda.synchronize()
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, request=size, **torch_stats(torch), **frag_state(torch))
            log("OOM in epoch", e, str(ex)[:200])
            break
        gc.collect()
        log_.add(e, request=size, kept=len(kept), dur_s=round(time.time() - t0, 3),
                 **torch_stats(torch), **frag_state(torch))
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


def frag_state(torch):
    """T and L from the block map, as the scenario sees it (not gpumon's reading)."""
    free_total = largest = 0
    for seg in torch.cuda.memory_snapshot():
        for b in seg.get("blocks", ()):
            if b.get("state") == "inactive":
                free_total += b["size"]
                largest = max(largest, b["size"])
    return dict(free_total=free_total, largest_free=largest)


def run_frag_varsize(sc, comp, truth):
    """Variable request sizes under a cap: per step eight activations of 1-9 MiB, an LRU
    'sample cache' of random-size entries that outlive the step (when `lru` > 0), and every
    `eval_every` epochs one eval buffer of `eval_mib` that needs a single block."""
    if ARGS.dry_run:
        return dry_epochs(dict(sc, leak_mib=0), comp, truth)
    torch, total = torch_setup(sc["cap_gib"])
    dev = torch.device("cuda:0")
    cap = int(sc["cap_gib"] * GiB)
    rng = random.Random(11)
    lru = []
    log_ = EpochLog()
    truth.update(cap_bytes=cap, total_bytes=total, request_bytes=sc["eval_mib"] * MiB,
                 lru_entries=sc["lru"])
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        try:
            for _ in range(40):
                acts = [torch.empty(rng.randint(1, 9) * MiB + rng.randint(0, 1023) * 512,
                                    dtype=torch.uint8, device=dev) for _ in range(8)]
                if sc["lru"]:
                    lru.append(torch.empty(rng.randint(1, 9) * MiB + rng.randint(0, 1023) * 512,
                                           dtype=torch.uint8, device=dev))
                    if len(lru) > sc["lru"]:
                        lru.pop(rng.randrange(len(lru) // 2))  # an old entry, not the oldest
                del acts
                time.sleep(0.04)
            if e > 0 and e % sc["eval_every"] == 0:
                comp.mark("eval", epoch=e)
                ev = torch.empty(sc["eval_mib"] * MiB, dtype=torch.uint8, device=dev)
                del ev
            torch.cuda.synchronize()
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, request=sc["eval_mib"] * MiB, **torch_stats(torch),
                             **frag_state(torch))
            log("OOM in epoch", e, str(ex)[:200])
            break
        log_.add(e, lru=len(lru), dur_s=round(time.time() - t0, 3), **torch_stats(torch),
                 **frag_state(torch))
        comp.epoch(e)
        e += 1
    finish(truth, log_, oom)


# ------------------------------------------------------------------------------- JAX


def jax_mem(dev):
    try:
        st = dev.memory_stats() or {}
    except Exception:
        st = {}
    return dict(in_use=st.get("bytes_in_use"), pool=st.get("pool_bytes"), limit=st.get("bytes_limit"),
                peak=st.get("peak_bytes_in_use"), largest_free=st.get("largest_free_block_bytes"))


def run_flax(sc, comp, truth):
    if ARGS.dry_run:
        return dry_epochs(sc, comp, truth)
    import jax
    import jax.numpy as jnp
    import flax.linen as nn
    dev = jax.devices()[0]
    kind = sc["kind"]
    if kind == "flax_cnn":
        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.relu(nn.Conv(64, (3, 3))(x))
                x = nn.relu(nn.Conv(128, (3, 3), strides=2)(x))
                x = nn.relu(nn.Conv(128, (3, 3), strides=2)(x))
                return nn.Dense(10)(x.mean(axis=(1, 2)))
        shape = (128, 32, 32, 3)
    else:
        class Net(nn.Module):
            @nn.compact
            def __call__(self, x):
                for w in (2048, 2048):
                    x = nn.gelu(nn.Dense(w)(x))
                return nn.Dense(10)(x)
        shape = (256, 512)
    net = Net()
    key = jax.random.PRNGKey(0)
    params = net.init(key, jnp.zeros(shape))

    def loss_fn(p, x, y):
        logits = net.apply(p, x)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    @jax.jit
    def step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g), loss

    onset = sc.get("onset")
    history = []  # "EMA history": a full copy of the parameters per epoch
    pbytes = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(params))
    truth.update(param_bytes=pbytes, leak_onset_epoch=onset,
                 leak_bytes_per_epoch=pbytes if onset is not None else 0, env_note=sc.get("env_note"),
                 settings={k: v for k, v in os.environ.items() if k.startswith("XLA_")})
    log_ = EpochLog()
    e = 0
    oom = None
    while left() > 0:
        t0 = time.time()
        try:
            for _ in range(30):
                key, k1, k2 = jax.random.split(key, 3)
                x = jax.random.normal(k1, shape)
                y = jax.random.randint(k2, (shape[0],), 0, 10)
                params, loss = step(params, x, y)
            loss.block_until_ready()
            if onset is not None and e >= onset:
                history.append(jax.tree_util.tree_map(lambda a: a + 0, params))
                jax.tree_util.tree_leaves(history[-1])[0].block_until_ready()
            time.sleep(max(0.0, 2.0 - (time.time() - t0)))
        except Exception as ex:
            if not is_oom(ex):
                raise
            oom = oom_record(e, ex, **jax_mem(dev))
            log("OOM in epoch", e, str(ex)[:200])
            break
        gc.collect()
        log_.add(e, kept=len(history), dur_s=round(time.time() - t0, 3), **jax_mem(dev))
        comp.epoch(e)
        e += 1
    truth.update(limit=jax_mem(dev).get("limit"))
    finish(truth, log_, oom)


def run_jax_small(sc, comp, truth):
    """A small MLP under JAX's preallocation: uses tens of MiB of the pool it took."""
    if ARGS.dry_run:
        emit(dict(type="grabbed", grab_bytes=0, t_ms=now_ms()))
        return dry_epochs(sc, comp, truth)
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    key = jax.random.PRNGKey(1)
    w = jax.random.normal(key, (1024, 1024)) * 0.01

    @jax.jit
    def step(w, x):
        g = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return w - 1e-2 * g

    m = jax_mem(dev)
    truth.update(env_note=sc.get("env_note"), pool_at_start=m.get("pool"), limit=m.get("limit"),
                 settings={k: v for k, v in os.environ.items() if k.startswith("XLA_")},
                 grab_t_ms=now_ms())
    emit(dict(type="grabbed", grab_bytes=m.get("pool") or m.get("limit"), t_ms=now_ms()))
    log_ = EpochLog()
    e = 0
    while left() > 0:
        t_end = time.time() + 2.0
        while time.time() < t_end:
            key, k1 = jax.random.split(key)
            w = step(w, jax.random.normal(k1, (512, 1024)))
            time.sleep(0.02)
        w.block_until_ready()
        log_.add(e, **jax_mem(dev))
        comp.epoch(e)
        e += 1
    truth.update(grab_end_t_ms=now_ms())
    finish(truth, log_, None)


# ------------------------------------------------------------------------------- others


def run_cupy(sc, comp, truth):
    """CuPy without its memory pool (cudaMalloc per array): NVML sees exactly what the
    program holds. The companion cannot read CuPy, so epoch records carry no floor."""
    if ARGS.dry_run:
        return dry_epochs(sc, comp, truth)
    import cupy as cp
    cp.cuda.set_allocator(None)
    onset = sc["onset"]
    kept = []
    log_ = EpochLog()
    truth.update(leak_onset_epoch=onset, leak_bytes_per_epoch=sc["leak_mib"] * MiB)
    e = 0
    while left() > 0:
        t0 = time.time()
        a = cp.random.random(sc["work_mib"] * MiB // 8)
        for _ in range(20):
            a = cp.sqrt(a * a + 1.0)
        float(a.sum())
        del a
        if e >= onset:
            kept.append(cp.ones(sc["leak_mib"] * MiB // 8))
        cp.cuda.Device().synchronize()
        time.sleep(max(0.0, 2.0 - (time.time() - t0)))
        free, total = cp.cuda.runtime.memGetInfo()
        log_.add(e, kept_bytes=len(kept) * sc["leak_mib"] * MiB, card_free=free)
        comp.epoch(e)
        e += 1
    finish(truth, log_, None)


def run_cpu(sc, comp, truth):
    log_ = EpochLog()
    for e in range(sc["epochs"]):
        if left() <= 0:
            break
        sum(i * i for i in range(200000))  # some CPU work; no GPU is touched
        time.sleep(1.0)
        log_.add(e)
        comp.epoch(e)
    finish(truth, log_, None)


RUNNERS = {"lm": run_lm, "vit": run_vit, "gpt2": run_gpt2, "resnet": run_resnet, "flax_mlp": run_flax,
           "flax_cnn": run_flax, "jax_small": run_jax_small, "torch_grab": run_torch_grab,
           "cupy": run_cupy, "cpu": run_cpu, "mlp_markerless": run_mlp_markerless,
           "frag_fill": run_frag_fill, "frag_curriculum": run_frag_curriculum, "frag_varsize": run_frag_varsize}


def main():
    global ARGS, T_START
    T_START = time.time()
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True, choices=sorted(SCENARIOS))
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--dry-run", action="store_true")
    ARGS = ap.parse_args()
    ARGS.stop_at = T_START + ARGS.seconds
    sc = SCENARIOS[ARGS.name]
    emit(dict(type="start", t_ms=now_ms(), cmdline=sys.argv, config=sc,
              cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
              companion=os.environ.get("GPUMON_DISABLE") != "1",
              settings={k: v for k, v in os.environ.items()
                        if k.startswith(("XLA_", "PYTORCH_", "GPUMON_"))}))
    truth = dict(type="truth", config=sc, t_start_ms=int(T_START * 1000))
    comp = Companion(ARGS.dry_run)
    try:
        RUNNERS[sc["kind"]](sc, comp, truth)
        truth["ok"] = True
    except Exception as ex:
        import traceback
        traceback.print_exc()
        truth.update(ok=False, error="%s: %s" % (type(ex).__name__, str(ex)[:700]))
    truth["t_end_ms"] = now_ms()
    emit(truth)
    comp.stop()
    log("done", "ok" if truth.get("ok") else "FAILED")


ARGS = None
T_START = time.time()

if __name__ == "__main__":
    main()
