"""PyTorch Lightning callback.

    trainer = L.Trainer(callbacks=[gpumon.lightning.GpumonLightningCallback()])

Lightning checks callbacks against its own base class, and `lightning` and
`pytorch_lightning` have different ones: the base is taken from whichever the
program already imported (else whichever is installed, else none).
"""

from typing import Any, Optional

import gpumon
from gpumon._callback_base import callback_base, start_given


_Base = callback_base("lightning.pytorch", "pytorch_lightning", "pytorch_lightning", "lightning")


class GpumonLightningCallback(_Base):  # type: ignore[misc, valid-type]
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

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        gpumon.mark("train", kind="train_begin", step=getattr(trainer, "global_step", None))

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        gpumon.mark("epoch", kind="epoch_begin", epoch=getattr(trainer, "current_epoch", None))

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        gpumon.epoch(getattr(trainer, "current_epoch", None), step=getattr(trainer, "global_step", None))

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        gpumon.mark("eval", kind="eval_begin", step=getattr(trainer, "global_step", None))

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        gpumon.mark("eval", kind="eval_end", step=getattr(trainer, "global_step", None))

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
        gpumon.mark("checkpoint", kind="checkpoint", step=getattr(trainer, "global_step", None))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        gpumon.mark("train", kind="train_end", step=getattr(trainer, "global_step", None))

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        gpumon.mark(type(exception).__name__, kind="mark", step=getattr(trainer, "global_step", None))
