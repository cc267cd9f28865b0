"""Hugging Face `transformers` Trainer callback.

    trainer = Trainer(..., callbacks=[gpumon.hf.GpumonTrainerCallback()])

Subclasses `transformers.TrainerCallback` when transformers is installed;
importable (and testable) without it.
"""

import gpumon

try:
    from transformers import TrainerCallback as _Base
except Exception:  # not installed, or broken: the hooks work the same
    _Base = object


def _completed_epoch(state):
    # state.epoch is a float counting epochs done (1.0 after the first).
    e = getattr(state, "epoch", None)
    if e is None:
        return None
    return max(0, int(round(float(e))) - 1)


class GpumonTrainerCallback(_Base):
    def __init__(self, **start_kwargs):
        gpumon.start(**start_kwargs)

    def on_train_begin(self, args, state, control, **kwargs):
        gpumon.mark("train", kind="train_begin", step=getattr(state, "global_step", None))

    def on_epoch_begin(self, args, state, control, **kwargs):
        gpumon.mark("epoch", kind="epoch_begin", step=getattr(state, "global_step", None))

    def on_epoch_end(self, args, state, control, **kwargs):
        gpumon.epoch(_completed_epoch(state), step=getattr(state, "global_step", None))

    def on_evaluate(self, args, state, control, **kwargs):
        gpumon.mark("eval", kind="eval_end", step=getattr(state, "global_step", None))

    def on_save(self, args, state, control, **kwargs):
        gpumon.mark("checkpoint", kind="checkpoint", step=getattr(state, "global_step", None))

    def on_train_end(self, args, state, control, **kwargs):
        gpumon.mark("train", kind="train_end", step=getattr(state, "global_step", None))
