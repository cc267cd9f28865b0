"""PyTorch Lightning callback.

    trainer = L.Trainer(callbacks=[gpumon.lightning.GpumonLightningCallback()])

Lightning checks callbacks against its own base class, and `lightning` and
`pytorch_lightning` have different ones: the base is taken from whichever the
program already imported (else whichever is installed, else none).
"""

import gpumon
from gpumon._callback_base import callback_base


_Base = callback_base("lightning.pytorch", "pytorch_lightning", "pytorch_lightning", "lightning")


class GpumonLightningCallback(_Base):
    def __init__(self, **start_kwargs):
        gpumon.start(**start_kwargs)

    def on_train_start(self, trainer, pl_module):
        gpumon.mark("train", kind="train_begin", step=getattr(trainer, "global_step", None))

    def on_train_epoch_start(self, trainer, pl_module):
        gpumon.mark("epoch", kind="epoch_begin", epoch=getattr(trainer, "current_epoch", None))

    def on_train_epoch_end(self, trainer, pl_module):
        gpumon.epoch(getattr(trainer, "current_epoch", None), step=getattr(trainer, "global_step", None))

    def on_validation_epoch_start(self, trainer, pl_module):
        gpumon.mark("eval", kind="eval_begin", step=getattr(trainer, "global_step", None))

    def on_validation_epoch_end(self, trainer, pl_module):
        gpumon.mark("eval", kind="eval_end", step=getattr(trainer, "global_step", None))

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        gpumon.mark("checkpoint", kind="checkpoint", step=getattr(trainer, "global_step", None))

    def on_train_end(self, trainer, pl_module):
        gpumon.mark("train", kind="train_end", step=getattr(trainer, "global_step", None))

    def on_exception(self, trainer, pl_module, exception):
        gpumon.mark(type(exception).__name__, kind="mark", step=getattr(trainer, "global_step", None))
