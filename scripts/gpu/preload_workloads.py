"""Workloads for preload_check.sh. Each allocates, prints `CHECK {json}` with
the framework's own numbers, and waits for a line on stdin before going on,
so the checker can compare them with what the interposer reports."""
import json
import sys


def check(phase, **nums):
    print("CHECK " + json.dumps({"phase": phase, **nums}), flush=True)
    if not sys.stdin.readline():
        sys.exit(3)


def torch_run():
    import torch

    d = torch.device("cuda:0")

    def stats():
        return dict(
            reserved=torch.cuda.memory_reserved(d),
            peak_reserved=torch.cuda.max_memory_reserved(d),
            allocated=torch.cuda.memory_allocated(d),
            peak_allocated=torch.cuda.max_memory_allocated(d),
        )

    keep = [torch.empty(32 << 20, dtype=torch.uint8, device=d) for _ in range(40)]
    keep += [torch.empty(n, dtype=torch.uint8, device=d) for n in (1000, 300_000, 3 << 20, 7 << 20)]
    torch.cuda.synchronize()
    check("after_alloc", **stats())
    del keep[::2]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    check("after_free_empty_cache", **stats())
    big = torch.empty(1 << 30, dtype=torch.uint8, device=d)
    del big
    torch.cuda.synchronize()
    check("after_1gib_spike", **stats())


def jax_run():
    import jax
    import jax.numpy as jnp

    dev = jax.devices()[0]

    def stats():
        s = dev.memory_stats() or {}
        return dict(
            allocated=s.get("bytes_in_use"),
            peak_allocated=s.get("peak_bytes_in_use"),
            reserved=s.get("pool_bytes", s.get("bytes_reserved")),
            peak_reserved=s.get("peak_pool_bytes", s.get("peak_bytes_reserved")),
        )

    xs = [jnp.ones((8 << 20,), dtype=jnp.float32) for _ in range(10)]
    for x in xs:
        x.block_until_ready()
    check("after_alloc", **stats())
    del xs[::2]
    check("after_free", **stats())


def cupy_run():
    import cupy as cp

    pool = cp.get_default_memory_pool()

    def stats():
        return dict(reserved=pool.total_bytes(), allocated=pool.used_bytes())

    xs = [cp.empty(n, dtype=cp.uint8) for n in (1 << 20, 5 << 20, 33 << 20, 100 << 20, 512)]
    cp.cuda.Device(0).synchronize()
    check("after_alloc", **stats())
    del xs[1:3]
    pool.free_all_blocks()
    check("after_free_all_blocks", **stats())


if __name__ == "__main__":
    {"torch": torch_run, "jax": jax_run, "cupy": cupy_run}[sys.argv[1]]()
