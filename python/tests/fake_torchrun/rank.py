"""One rank of the fake torchrun job: "uses CUDA" (a fake torch whose CUDA is initialised),
starts a DataLoader-style worker with the spawn start method that never touches CUDA, then
reports "ready PID" and waits for stdin to close."""

import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker(ready, stop):
    ready.set()
    stop.wait(60)


if __name__ == "__main__":
    from fakes import FakeTorch

    sys.modules["torch"] = FakeTorch().mod
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    w = ctx.Process(target=worker, args=(ready, stop), daemon=True)
    w.start()
    assert ready.wait(30), "worker did not start"
    sys.stdout.write("ready %d\n" % os.getpid())
    sys.stdout.flush()
    sys.stdin.read()
    stop.set()
    w.join(10)
