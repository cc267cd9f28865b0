"""A multiprocessing spawn child tells its program (its launcher's script and arguments) in
its hello: its own command line is the bootstrap, which names no script."""

import multiprocessing as mp
import os
import sys

from gpumon import _companion


def _child(q):
    q.put((_companion._cmdline(), _companion._program(_companion._cmdline())))


def test_a_spawn_child_names_its_parents_script():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    own, prog = q.get(timeout=60)
    p.join(30)
    assert "--multiprocessing-fork" in own
    assert prog is not None
    # The child's sys.argv is the parent's: pytest's own command line here.
    assert os.path.basename(sys.argv[0]) in prog
    assert prog.startswith(sys.executable)


def test_a_program_is_its_own_program():
    assert _companion._program("/usr/bin/python3 train.py --lr 3e-4") is None
