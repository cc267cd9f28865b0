#!/usr/bin/env python3
"""What `gpumon.epoch()` costs the training loop: a BERT-base masked-LM training process
(random weights, no download) that times every `gpumon.epoch()` call. Run several at once
on one card, with a monitor connected, to measure it on a busy card.

    PYTHONPATH=python python3 bench/epoch_cost.py --epochs 40 --steps 6 --tag new
Prints one JSON line: the calls' median, p90 and max in ms.
"""

import argparse
import json
import os
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--tag", default="")
    ap.add_argument("--jitter-mib", type=float, default=0.0,
                    help="a metric tensor of random size up to this, replaced each epoch: "
                         "the floor moves as a real run's does")
    a = ap.parse_args()
    import torch
    from transformers import BertConfig, BertForMaskedLM
    import gpumon
    gpumon.start()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    calls, steps_ms = [], []
    metric = None
    gen = torch.Generator().manual_seed(os.getpid())
    for e in range(a.epochs):
        for _ in range(a.steps):
            t0 = time.perf_counter()
            ids = torch.randint(0, 30522, (a.batch, a.seq), device="cuda")
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            steps_ms.append((time.perf_counter() - t0) * 1e3)
        if a.jitter_mib:
            n = int(torch.rand(1, generator=gen).item() * a.jitter_mib * (1 << 20)) + 512
            metric = torch.empty(n, dtype=torch.uint8, device="cuda")
        t0 = time.perf_counter()
        gpumon.epoch(e)
        calls.append((time.perf_counter() - t0) * 1e3)
    import gc
    t0 = time.perf_counter()
    gc.collect()
    full_gc_ms = (time.perf_counter() - t0) * 1e3
    del metric
    calls_s = sorted(calls[1:])
    print(json.dumps(dict(
        type="epoch_cost", tag=a.tag, pid=os.getpid(), gpumon=os.path.dirname(gpumon.__file__),
        epochs=a.epochs, jitter_mib=a.jitter_mib, full_gc_ms=round(full_gc_ms, 2), median_ms=round(statistics.median(calls_s), 3),
        p90_ms=round(calls_s[int(0.9 * (len(calls_s) - 1))], 3), max_ms=round(max(calls_s), 3),
        step_median_ms=round(statistics.median(steps_ms), 2), calls_ms=[round(c, 3) for c in calls])),
        flush=True)
    gpumon.stop()


if __name__ == "__main__":
    main()
