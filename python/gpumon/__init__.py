"""gpumon companion: live allocator state from inside PyTorch, JAX and
TensorFlow programs, for the gpumon terminal monitor.

    import gpumon
    gpumon.start()
    ...
    gpumon.epoch()
    gpumon.log_to("wandb")   # optional: the series in W&B / TensorBoard too

Nothing here ever raises into the program or waits on gpumon.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING, Any, Optional, Sequence

from ._proto import PROTOCOL_VERSION

if TYPE_CHECKING:
    from ._companion import Companion

# Cargo.toml is the one source of the version; a Rust test (src/launch.rs) fails when this
# line disagrees with it, and the wheel takes its version from Cargo.toml.
__version__ = "0.1.0"

__all__ = ["start", "stop", "epoch", "mark", "log_to", "companion", "__version__",
           "PROTOCOL_VERSION"]

_lock = threading.Lock()
_instance: Optional[Companion] = None
# What log_to() asked for before start(): handed to the companion when it starts.
_pending_loggers: Optional[object] = None


def start(
    sample_hz: Optional[float] = None,
    snapshot_s: Optional[float] = None,
    epoch_gc: Optional[bool] = None,
    detail: Optional[str] = None,
    sock_dir: Optional[str] = None,
    log_to: Any = None,
) -> bool:
    """Start the companion (idempotent). Returns True when gpumon can connect.
    Frameworks are picked up whenever the program starts using them. `log_to`: a target
    or a list of them for `log_to()` ("wandb", "tensorboard=DIR", a SummaryWriter), taken
    also when the companion already runs."""
    global _instance
    if os.environ.get("GPUMON_DISABLE") == "1":
        return False
    if log_to is not None:
        _log_to(log_to if isinstance(log_to, (list, tuple)) else [log_to], None, None)
    try:
        with _lock:
            if _instance is not None:
                return _instance.thread is not None
            from . import _companion as mod
            c = mod.Companion(mod.Config(sample_hz, snapshot_s, epoch_gc, detail, sock_dir))
            if _pending_loggers is not None:
                c.set_loggers(_pending_loggers)
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


def log_to(*targets: object, every_s: Optional[float] = None,
           alerts_jsonl: Optional[str] = None) -> bool:
    """Also log gpumon's allocator series (allocated, reserved, free in the pool, largest
    free block, fragmentation index per device), each epoch's floor and peak, OOMs and
    alerts to Weights & Biases and/or TensorBoard. Targets:

    * ``"wandb"``: the active ``wandb.run`` whenever there is one (or pass a run);
    * a SummaryWriter the program already has (torch.utils.tensorboard or tensorboardX);
    * ``"tensorboard"`` or ``"tensorboard=DIR"``: a SummaryWriter gpumon opens in DIR
      (default runs/gpumon, runs/gpumon/rankN for a rank) with the class the program imports.

    Points are written at each epoch end, at an OOM, and every ``every_s`` seconds
    (default 30; GPUMON_LOG_EVERY_S), never per allocation: TensorBoard by the
    companion's thread, W&B (whose log is not thread-safe) on the program's thread in
    epoch(), mark() and stop().
    ``alerts_jsonl``: the file a monitor writes with ``--alerts-jsonl FILE``; this
    process's alerts in it are logged too (GPUMON_ALERTS_JSONL). Without targets, logging
    stops. GPUMON_LOG_TO="wandb,tensorboard=DIR" asks for the same without a code change.
    Returns True when at least one target was taken."""
    return _log_to(targets, every_s, alerts_jsonl)


def _log_to(targets: Sequence[object], every_s: Optional[float],
            alerts_jsonl: Optional[str]) -> bool:
    global _pending_loggers
    if os.environ.get("GPUMON_DISABLE") == "1":
        return False
    try:
        from . import _loggers
        lg = _loggers.Loggers(targets, every_s=every_s, alerts_jsonl=alerts_jsonl)
        with _lock:
            _pending_loggers = lg if lg else None
            c = _instance
        if c is not None:
            c.set_loggers(lg)
        return bool(lg)
    except Exception as e:
        _warn(e)
        return False


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
    global _instance, _lock, _pending_loggers
    _lock = threading.Lock()
    # A W&B run or a SummaryWriter belongs to the parent.
    _pending_loggers = None
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
