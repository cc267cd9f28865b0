"""Hugging Face `transformers` Trainer callback.

    trainer = Trainer(..., callbacks=[gpumon.hf.GpumonTrainerCallback()])

Subclasses `transformers.TrainerCallback` when transformers is installed;
importable (and testable) without it.
"""

from typing import Any, Optional

import gpumon
from gpumon._callback_base import start_given

try:
    from transformers import TrainerCallback as _Base  # type: ignore[import-not-found, unused-ignore]
except Exception:  # not installed, or broken: the hooks work the same
    _Base = object  # type: ignore[assignment, misc, unused-ignore]


def _completed_epoch(state: Any) -> Optional[int]:
    # state.epoch is a float counting epochs done (1.0 after the first).
    e = getattr(state, "epoch", None)
    if e is None:
        return None
    return max(0, int(round(float(e))) - 1)


class GpumonTrainerCallback(_Base):  # type: ignore[misc, valid-type, unused-ignore]
    def __init__(
        self,
        *,
        sample_hz: Optional[float] = None,
        snapshot_s: Optional[float] = None,
        epoch_gc: Optional[bool] = None,
        detail: Optional[str] = None,
        sock_dir: Optional[str] = None,
        log_to: Any = None,
    ) -> None:
        """Starts the companion with these options (`gpumon.start`'s; None: the default or
        the GPUMON_* environment variable); `log_to` also logs gpumon's series there
        (`gpumon.log_to`: "wandb", "tensorboard=DIR", a SummaryWriter, or a list)."""
        start_given(sample_hz=sample_hz, snapshot_s=snapshot_s, epoch_gc=epoch_gc,
                    detail=detail, sock_dir=sock_dir, log_to=log_to)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        gpumon.mark("train", kind="train_begin", step=getattr(state, "global_step", None))

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        gpumon.mark("epoch", kind="epoch_begin", step=getattr(state, "global_step", None))

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        gpumon.epoch(_completed_epoch(state), step=getattr(state, "global_step", None))

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        gpumon.mark("eval", kind="eval_end", step=getattr(state, "global_step", None))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        gpumon.mark("checkpoint", kind="checkpoint", step=getattr(state, "global_step", None))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        gpumon.mark("train", kind="train_end", step=getattr(state, "global_step", None))
