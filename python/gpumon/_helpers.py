"""Which processes under `gpumon run` are helpers: processes a training job starts that do not
own GPU work of their own (multiprocessing workers such as DataLoader workers under spawn or
forkserver, the multiprocessing resource tracker, torch.compile's compile-worker pool, and the
torchrun launcher). They inherit the `sitecustomize` shim through PYTHONPATH like every other
Python process, but a companion in each would add a thread, a socket and a connection from
every watching gpumon for nothing.

A helper still gets a companion once it initialises CUDA itself (`torch.multiprocessing.spawn`
starts DDP ranks as multiprocessing children, and those ranks do use the GPU): the shim waits
for that instead of starting at once. Decided from the command line, which is all there is
while `sitecustomize` runs (`sys.argv` is not complete yet; `sys.orig_argv` is, from 3.10).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import List, Optional

# How often a waiting helper looks whether it has initialised CUDA; reading two booleans.
WAIT_POLL_S = 0.5


def command_line() -> List[str]:
    argv = getattr(sys, "orig_argv", None)
    if argv:
        return list(argv)
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return list(sys.argv)


def helper_kind(argv: List[str]) -> Optional[str]:
    """The kind of helper this command line starts, or None for a program of its own."""
    joined = " ".join(argv)
    if "--multiprocessing-fork" in argv or "from multiprocessing." in joined:
        return "multiprocessing worker"
    if "compile_worker" in joined and "_inductor" in joined:
        return "compile worker"
    for i, a in enumerate(argv[:3]):
        if os.path.basename(a) == "torchrun":
            return "launcher"
        if a == "-m" and i + 1 < len(argv) and argv[i + 1] in (
            "torch.distributed.run", "torch.distributed.launch"
        ):
            return "launcher"
    return None


def uses_cuda() -> bool:
    """Whether this process has initialised a GPU framework (never initialises one)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return True
        except Exception:
            pass
    xb = sys.modules.get("jax._src.xla_bridge")
    if xb is not None:
        try:
            if xb.backends_are_initialized():
                return True
        except Exception:
            pass
    return False


def start_when_cuda_is_used(start) -> threading.Thread:  # type: ignore[no-untyped-def]
    """A daemon thread that calls `start()` once this process uses CUDA."""

    def wait() -> None:
        while not uses_cuda():
            time.sleep(WAIT_POLL_S)
        start()

    t = threading.Thread(target=wait, name="gpumon-wait-for-cuda", daemon=True)
    t.start()
    return t
