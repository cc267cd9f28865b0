"""A stand-in training program for gpumon's Rust channel tests: a fake torch
(so no GPU is needed), the real companion, some epochs and markers, then it
waits until stdin closes or it is killed.

    GPUMON_DIR=/some/0700/dir python3 fake_torch_program.py EPOCHS
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fakes import FakeTorch  # noqa: E402

ft = FakeTorch()
sys.modules["torch"] = ft.mod

import gpumon  # noqa: E402

assert gpumon.start(sample_hz=20, snapshot_s=0.5, epoch_gc=False)
for e in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    ft.alloc += 100 << 20
    gpumon.epoch()
    gpumon.mark("eval", kind="eval_end")
sys.stdout.write("ready %d\n" % gpumon.companion().pid)
sys.stdout.flush()
sys.stdin.read()
gpumon.stop("done")
