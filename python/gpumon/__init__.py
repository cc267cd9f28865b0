"""gpumon companion: live allocator state from inside PyTorch, JAX and
TensorFlow programs, for the gpumon terminal monitor.

    import gpumon
    gpumon.start()
    ...
    gpumon.epoch()

Nothing here ever raises into the program or waits on gpumon.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING, Optional

from ._proto import PROTOCOL_VERSION

if TYPE_CHECKING:
    from ._companion import Companion

# Cargo.toml is the one source of the version; a Rust test (src/launch.rs) fails when this
# line disagrees with it, and the wheel takes its version from Cargo.toml.
__version__ = "0.1.0"

__all__ = ["start", "stop", "epoch", "mark", "companion", "__version__", "PROTOCOL_VERSION"]

_lock = threading.Lock()
_instance: Optional[Companion] = None


def start(
    sample_hz: Optional[float] = None,
    snapshot_s: Optional[float] = None,
    epoch_gc: Optional[bool] = None,
    detail: Optional[str] = None,
    sock_dir: Optional[str] = None,
) -> bool:
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


def stop(reason: str = "stop") -> None:
    """Say goodbye to watching monitors and remove the socket."""
    global _instance
    try:
        with _lock:
            c, _instance = _instance, None
        if c is not None:
            c.stop(reason)
    except Exception as e:
        _warn(e)


def epoch(n: Optional[int] = None, step: Optional[int] = None) -> None:
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


def mark(
    label: object, kind: str = "mark", epoch: Optional[int] = None, step: Optional[int] = None
) -> None:
    """A phase marker on gpumon's chart: eval, checkpoint, anything."""
    c = _instance
    try:
        if c is not None:
            c.mark(str(label), kind, epoch, step)
    except Exception as e:
        _warn(e)


def companion() -> Optional[Companion]:
    """The running companion, for tests and benchmarks (None when stopped)."""
    return _instance


def _warn(e: BaseException) -> None:
    try:
        from ._companion import _say
        _say("gpumon: %r (ignored)" % (e,))
    except Exception:
        pass


def _after_fork_in_child() -> None:
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


def _at_exit() -> None:
    stop("exit")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
