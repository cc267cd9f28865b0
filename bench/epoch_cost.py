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
    a = ap.parse_args()
    import torch
    from transformers import BertConfig, BertForMaskedLM
    import gpumon
    gpumon.start()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    calls, steps_ms = [], []
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
        t0 = time.perf_counter()
        gpumon.epoch(e)
        calls.append((time.perf_counter() - t0) * 1e3)
    calls_s = sorted(calls[1:])
    print(json.dumps(dict(
        type="epoch_cost", tag=a.tag, pid=os.getpid(), gpumon=os.path.dirname(gpumon.__file__),
        epochs=a.epochs, median_ms=round(statistics.median(calls_s), 3),
        p90_ms=round(calls_s[int(0.9 * (len(calls_s) - 1))], 3), max_ms=round(max(calls_s), 3),
        step_median_ms=round(statistics.median(steps_ms), 2), calls_ms=[round(c, 3) for c in calls])),
        flush=True)
    gpumon.stop()


if __name__ == "__main__":
    main()
