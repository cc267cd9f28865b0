#!/usr/bin/env python3
"""A data-parallel job on one card, for gpumon's job view: DDP over `gloo` (several ranks
may share a GPU), an MLP trained on random batches, an epoch marked on every rank. Either
started by torch.multiprocessing.spawn (`--spawn N`) or run as one rank of torchrun.
Each rank prints one truth line per epoch (allocated after gc, the epoch peak).

    python3 job.py --spawn 2 --leak-rank 1 --leak-mib 24 --epochs 120
    torchrun --nproc-per-node 3 job.py --extra-rank 0 --extra-mib 512 --epochs 120
"""

import argparse
import gc
import json
import os
import sys
import time


def rank_main(rank, world, a):
    import torch
    import torch.distributed as dist
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    import gpumon
    gpumon.start()
    torch.manual_seed(a.seed + rank)
    d = a.width
    model = torch.nn.Sequential(*[torch.nn.Linear(d, d) for _ in range(4)]).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)
    kept = []
    extra = (torch.empty(a.extra_mib << 20, dtype=torch.uint8, device="cuda")
             if rank == a.extra_rank and a.extra_mib else None)
    for e in range(a.epochs):
        t0 = time.time()
        for s in range(a.steps):
            # the last batch of an epoch is smaller (a dataset that does not divide evenly)
            b = a.batch if s < a.steps - 1 else a.batch // 3 + 7 * rank
            x = torch.randn(b, d, device="cuda")
            loss = ddp(x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if rank == a.leak_rank and e >= a.leak_from:
            # rank-0-only style work: outputs kept for a log that is never flushed
            kept.append(torch.empty(a.leak_mib << 20, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        gc.collect()
        print(json.dumps(dict(type="rank_epoch", rank=rank, pid=os.getpid(), epoch=e,
                              allocated=torch.cuda.memory_allocated(),
                              peak=torch.cuda.max_memory_allocated(),
                              kept_mib=len(kept) * a.leak_mib)), flush=True)
        gpumon.epoch(e)
        time.sleep(max(0.0, a.epoch_s - (time.time() - t0)))
    del extra
    dist.barrier()
    dist.destroy_process_group()
    gpumon.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spawn", type=int, default=0, help="start N ranks by mp.spawn")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--epoch-s", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--leak-rank", type=int, default=-1)
    ap.add_argument("--leak-mib", type=int, default=0)
    ap.add_argument("--leak-from", type=int, default=10)
    ap.add_argument("--extra-rank", type=int, default=-1)
    ap.add_argument("--extra-mib", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=29511)
    a = ap.parse_args()
    if a.spawn:
        import torch.multiprocessing as mp
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(a.port)
        mp.spawn(rank_main, args=(a.spawn, a), nprocs=a.spawn, join=True)
    else:
        rank_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a)


if __name__ == "__main__":
    sys.exit(main())
