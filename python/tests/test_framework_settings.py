"""Framework details that depend on settings: which Keras base class the callback takes, and
which PyTorch allocator setting the companion reports."""

import importlib
import os
import sys
import types

import pytest

from gpumon import _sources


def _module(monkeypatch, name, **attrs):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        full = ".".join(parts[:i])
        if full not in sys.modules or not getattr(sys.modules[full], "_fake", False):
            mod = types.ModuleType(full)
            mod._fake = True
            monkeypatch.setitem(sys.modules, full, mod)
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], mod)
    for k, v in attrs.items():
        setattr(sys.modules[name], k, v)


class Keras3Callback(object):
    """Recorded from keras/src/callbacks/callback.py (Keras 3): the hooks, and no
    `_implements_*_batch_hooks` (Keras 3's CallbackList uses `utils.is_default` instead)."""

    def __init__(self):
        self.params = None
        self._model = None

    def on_epoch_end(self, epoch, logs=None):
        pass


class TfKerasCallback(object):
    """Recorded from tf_keras/src/callbacks.py (Keras 2): the base defines the batch-hook
    probes that its CallbackList calls on every callback."""

    def __init__(self):
        self.validation_data = None
        self.model = None

    def _implements_train_batch_hooks(self):
        return False

    def _implements_test_batch_hooks(self):
        return False

    def _implements_predict_batch_hooks(self):
        return False


class TfKerasCallbackList(object):
    """tf_keras's CallbackList.__init__: `self._should_call_train_batch_hooks = any(
    cb._implements_train_batch_hooks() for cb in self.callbacks)` (and test, predict)."""

    def __init__(self, callbacks):
        self.callbacks = callbacks
        self.train = any(cb._implements_train_batch_hooks() for cb in callbacks)
        self.test = any(cb._implements_test_batch_hooks() for cb in callbacks)
        self.predict = any(cb._implements_predict_batch_hooks() for cb in callbacks)


@pytest.fixture
def both_kerases(monkeypatch):
    monkeypatch.setattr("gpumon.start", lambda **kw: True)
    _module(monkeypatch, "keras.callbacks", Callback=Keras3Callback)
    _module(monkeypatch, "tf_keras.callbacks", Callback=TfKerasCallback,
            CallbackList=TfKerasCallbackList)


@pytest.mark.parametrize("flag", ["1", "true", "True"])
def test_legacy_flag_takes_the_tf_keras_base(monkeypatch, both_kerases, flag):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", flag)
    kr = importlib.reload(importlib.import_module("gpumon.keras"))
    cb = kr.GpumonCallback()
    assert isinstance(cb, TfKerasCallback)
    cbl = TfKerasCallbackList([cb])  # raised AttributeError with the Keras 3 base
    assert not (cbl.train or cbl.test or cbl.predict), "no per-batch cost"


@pytest.mark.parametrize("flag", [None, "0", "false", "yes"])
def test_without_the_flag_keras_3_is_the_base(monkeypatch, both_kerases, flag):
    if flag is None:
        monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    else:
        monkeypatch.setenv("TF_USE_LEGACY_KERAS", flag)
    kr = importlib.reload(importlib.import_module("gpumon.keras"))
    assert isinstance(kr.GpumonCallback(), Keras3Callback)


def test_legacy_flag_without_tf_keras_falls_back_to_keras(monkeypatch):
    monkeypatch.setattr("gpumon.start", lambda **kw: True)
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    monkeypatch.setitem(sys.modules, "tf_keras", None)
    _module(monkeypatch, "keras.callbacks", Callback=Keras3Callback)
    kr = importlib.reload(importlib.import_module("gpumon.keras"))
    assert isinstance(kr.GpumonCallback(), Keras3Callback)


@pytest.mark.parametrize("new,old,expected", [
    (None, None, ""),
    (None, "expandable_segments:True", "expandable_segments:True"),
    ("expandable_segments:True", None, "expandable_segments:True"),
    # Both set: PyTorch reads PYTORCH_ALLOC_CONF and ignores the deprecated name.
    ("expandable_segments:True", "expandable_segments:False", "expandable_segments:True"),
    ("expandable_segments:False", "expandable_segments:True", "expandable_segments:False"),
    ("", "expandable_segments:True", ""),
])
def test_pytorch_alloc_conf_precedence(monkeypatch, new, old, expected):
    for name, value in (("PYTORCH_ALLOC_CONF", new), ("PYTORCH_CUDA_ALLOC_CONF", old)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert _sources.alloc_conf() == expected


def test_policy_follows_the_allocator_not_the_environment(monkeypatch, fake_torch):
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "expandable_segments:False")
    src = _sources.TorchSource(fake_torch.mod)
    assert src.allocator() == "native"
    # `_set_allocator_settings("expandable_segments:True")` at run time: new segments say so.
    segs = fake_torch.mod.cuda.memory_snapshot()
    for s in segs:
        s["is_expandable"] = True
    fake_torch.mod.cuda.memory_snapshot = lambda include_traces=True: segs
    src.frag(0)
    assert src.allocator() == "expandable_segments"
    assert src.describe()["policy"] == "PyTorch: expandable_segments"


def test_real_keras_3_fit_calls_the_callback(monkeypatch):
    """Against the real Keras 3 when it is installed (skipped in CI, which has no Keras; ran
    with Keras 3.15.1 on the JAX CPU backend on 2026-11-30)."""
    monkeypatch.setenv("KERAS_BACKEND", os.environ.get("KERAS_BACKEND", "jax"))
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    keras = pytest.importorskip("keras")
    np = pytest.importorskip("numpy")
    calls = []
    monkeypatch.setattr("gpumon.start", lambda **kw: True)
    monkeypatch.setattr("gpumon.epoch", lambda n=None, step=None: calls.append(("epoch", n)))
    monkeypatch.setattr("gpumon.mark", lambda label, kind="mark", epoch=None, step=None:
                        calls.append((kind, epoch)))
    kr = importlib.reload(importlib.import_module("gpumon.keras"))
    assert kr._Base is keras.callbacks.Callback
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    m.compile("sgd", "mse")
    x, y = np.ones((16, 4)), np.ones((16, 1))
    m.fit(x, y, epochs=2, batch_size=8, validation_data=(x, y), callbacks=[kr.GpumonCallback()],
          verbose=0)
    assert [c for c in calls if c[0] == "epoch"] == [("epoch", 0), ("epoch", 1)]
    assert ("eval_end", None) in calls
