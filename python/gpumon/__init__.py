"""gpumon companion: live allocator state from inside PyTorch, JAX and
TensorFlow programs, for the gpumon terminal monitor.

    import gpumon
    gpumon.start()
    ...
    gpumon.epoch()

Nothing here ever raises into the program or waits on gpumon.
"""

import atexit
import os
import threading

__version__ = "0.1.0"
PROTOCOL_VERSION = 1

_lock = threading.Lock()
_instance = None
_epochs_offline = -1


def start(sample_hz=None, snapshot_s=None, epoch_gc=None, detail=None, sock_dir=None):
    """Start the companion (idempotent). Returns True when gpumon can connect.
    Frameworks are picked up whenever the program starts using them."""
    global _instance
    if os.environ.get("GPUMON_DISABLE") == "1":
        return False
    try:
        with _lock:
            if _instance is not None:
                return _instance.thread is not None
            from . import _companion as mod
            c = mod.Companion(mod.Config(sample_hz, snapshot_s, epoch_gc, detail, sock_dir))
            _instance = c
            ok = c.start()
            if not ok and c.problem:
                mod._say(c.problem)
            return ok
    except Exception as e:
        _warn(e)
        return False


def stop(reason="stop"):
    """Say goodbye to watching monitors and remove the socket."""
    global _instance
    try:
        with _lock:
            c, _instance = _instance, None
        if c is not None:
            c.stop(reason)
    except Exception as e:
        _warn(e)


def epoch(n=None, step=None):
    """Mark the end of an epoch (`n`: the number just completed, counted
    automatically from 0 when omitted). Records the epoch's floor (allocated
    after gc) and peak per device; with no readable framework the epoch is
    still marked and gpumon reads the floor from NVML."""
    c = _instance
    try:
        if c is not None:
            c.epoch(n, step)
    except Exception as e:
        _warn(e)


def mark(label, kind="mark", epoch=None, step=None):
    """A phase marker on gpumon's chart: eval, checkpoint, anything."""
    c = _instance
    try:
        if c is not None:
            c.mark(str(label), kind, epoch, step)
    except Exception as e:
        _warn(e)


def companion():
    """The running companion, for tests and benchmarks (None when stopped)."""
    return _instance


def _warn(e):
    try:
        from ._companion import _say
        _say("gpumon: %r (ignored)" % (e,))
    except Exception:
        pass


def _after_fork_in_child():
    # The daemon thread did not survive the fork; the socket path belongs to
    # the parent. Forget the parent's companion without touching its files.
    global _instance, _lock
    _lock = threading.Lock()
    c = _instance
    _instance = None
    if c is not None and c.server is not None and c.server.listener is not None:
        try:
            c.server.listener.close()
        except Exception:
            pass


def _at_exit():
    stop("exit")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
