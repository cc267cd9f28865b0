"""Keras callback: Keras 3 on any backend, tf.keras, and tf_keras (Keras 2, used by
TensorFlow when TF_USE_LEGACY_KERAS is set).

    model.fit(..., callbacks=[gpumon.keras.GpumonCallback()])
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import gpumon
from gpumon._callback_base import callback_base, start_given


def _legacy_keras() -> bool:
    # Exactly TensorFlow's own test (tensorflow/python/util/lazy_loader.py): with it,
    # `tf.keras` is tf_keras, whose CallbackList calls methods Keras 3's base lacks
    # (`_implements_train_batch_hooks`), so the base must come from tf_keras.
    return os.environ.get("TF_USE_LEGACY_KERAS", None) in ("true", "True", "1")


if _legacy_keras():
    _Base = callback_base("tf_keras", "keras", "tf_keras", "tf_keras")
else:
    _Base = callback_base("keras", "tensorflow.keras", "tensorflow", "keras")


class GpumonCallback(_Base):  # type: ignore[misc, valid-type]
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
        if _Base is not object:
            super(GpumonCallback, self).__init__()
        start_given(sample_hz=sample_hz, snapshot_s=snapshot_s, epoch_gc=epoch_gc,
                    detail=detail, sock_dir=sock_dir, log_to=log_to)

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        gpumon.mark("train", kind="train_begin")

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        gpumon.mark("epoch", kind="epoch_begin", epoch=epoch)

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        # Keras passes the 0-based index of the epoch that just finished.
        gpumon.epoch(epoch)

    def on_test_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        gpumon.mark("eval", kind="eval_begin")

    def on_test_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        gpumon.mark("eval", kind="eval_end")

    def on_train_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        gpumon.mark("train", kind="train_end")
