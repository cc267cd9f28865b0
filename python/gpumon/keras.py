"""Keras callback (Keras 3 on any backend, or tf.keras).

    model.fit(..., callbacks=[gpumon.keras.GpumonCallback()])
"""

import gpumon
from gpumon._callback_base import callback_base


_Base = callback_base("keras", "tensorflow.keras", "tensorflow", "keras")


class GpumonCallback(_Base):
    def __init__(self, **start_kwargs):
        if _Base is not object:
            super(GpumonCallback, self).__init__()
        gpumon.start(**start_kwargs)

    def on_train_begin(self, logs=None):
        gpumon.mark("train", kind="train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        gpumon.mark("epoch", kind="epoch_begin", epoch=epoch)

    def on_epoch_end(self, epoch, logs=None):
        # Keras passes the 0-based index of the epoch that just finished.
        gpumon.epoch(epoch)

    def on_test_begin(self, logs=None):
        gpumon.mark("eval", kind="eval_begin")

    def on_test_end(self, logs=None):
        gpumon.mark("eval", kind="eval_end")

    def on_train_end(self, logs=None):
        gpumon.mark("train", kind="train_end")
