"""Which `gpumon run` children count as helpers, from command lines recorded on Python 3.11
(multiprocessing) and from torch's own launchers."""

import sys
import threading
import types

import pytest

from gpumon import _helpers

PY = "/usr/bin/python3"


@pytest.mark.parametrize("argv,kind", [
    ([PY, "train.py", "--lr", "3e-4"], None),
    ([PY, "-m", "torch.distributed.run", "--nproc-per-node", "8", "train.py"], "launcher"),
    ([PY, "/venv/bin/torchrun", "--nproc-per-node", "8", "train.py"], "launcher"),
    ([PY, "-u", "train.py"], None),  # a rank torchrun started
    ([PY, "-B", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=6)",
      "--multiprocessing-fork"], "multiprocessing worker"),
    ([PY, "-B", "-c", "from multiprocessing.forkserver import main; main(3, 5, ['__main__'])"],
     "multiprocessing worker"),
    ([PY, "-B", "-c", "from multiprocessing.resource_tracker import main;main(3)"],
     "multiprocessing worker"),
    ([PY, "/venv/lib/python3.12/site-packages/torch/_inductor/compile_worker/__main__.py",
      "--workers=32", "--parent=4242"], "compile worker"),
    ([PY, "-c", "print('torchrun')"], None),
])
def test_helper_kind(argv, kind):
    assert _helpers.helper_kind(argv) == kind


def test_a_helper_starts_once_it_initialises_cuda(monkeypatch):
    monkeypatch.setattr(_helpers, "WAIT_POLL_S", 0.01)
    initialised = threading.Event()
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=initialised.is_set))
    monkeypatch.setitem(sys.modules, "torch", torch)
    started = threading.Event()
    t = _helpers.start_when_cuda_is_used(started.set)
    assert not started.wait(0.1), "no companion while CUDA is unused"
    initialised.set()
    assert started.wait(5)
    t.join(5)


def test_command_line_is_the_whole_one():
    argv = _helpers.command_line()
    assert argv and "python" in argv[0]
