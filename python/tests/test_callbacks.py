import importlib
import os
import subprocess
import sys
import types

import pytest

import gpumon


@pytest.fixture
def recorded(monkeypatch):
    calls = []
    monkeypatch.setattr(gpumon, "start", lambda **kw: calls.append(("start", kw)) or True)
    monkeypatch.setattr(gpumon, "epoch", lambda n=None, step=None: calls.append(("epoch", n, step)))
    monkeypatch.setattr(gpumon, "mark", lambda label, kind="mark", epoch=None, step=None:
                        calls.append((kind, label, epoch, step)))
    return calls


def _fake_base_module(monkeypatch, name, attr):
    base = type(attr, (object,), {"fake_base": True})
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        mod = types.ModuleType(".".join(parts[:i]))
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
        if i > 1:
            setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], mod)
    setattr(sys.modules[name], attr, base)
    return base


def test_hf_callback_subclasses_trainer_callback_and_counts_epochs(monkeypatch, recorded):
    base = _fake_base_module(monkeypatch, "transformers", "TrainerCallback")
    hf = importlib.reload(importlib.import_module("gpumon.hf"))
    cb = hf.GpumonTrainerCallback(sample_hz=2)
    assert isinstance(cb, base)
    state = types.SimpleNamespace(epoch=1.0, global_step=100)
    cb.on_train_begin(None, state, None)
    cb.on_epoch_end(None, state, None)
    state.epoch = 2.0
    cb.on_epoch_end(None, state, None, model=object())
    cb.on_evaluate(None, state, None, metrics={})
    cb.on_save(None, state, None)
    cb.on_train_end(None, state, None)
    assert recorded == [("start", {"sample_hz": 2}), ("train_begin", "train", None, 100),
                        ("epoch", 0, 100), ("epoch", 1, 100), ("eval_end", "eval", None, 100),
                        ("checkpoint", "checkpoint", None, 100), ("train_end", "train", None, 100)]


def test_hf_callback_without_transformers(monkeypatch, recorded):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    hf = importlib.reload(importlib.import_module("gpumon.hf"))
    assert hf._Base is object
    cb = hf.GpumonTrainerCallback()
    cb.on_epoch_end(None, types.SimpleNamespace(epoch=None, global_step=0), None)
    assert ("epoch", None, 0) in recorded


def test_lightning_callback_prefers_the_imported_package(monkeypatch, recorded):
    monkeypatch.setitem(sys.modules, "lightning", None)
    base = _fake_base_module(monkeypatch, "pytorch_lightning.callbacks", "Callback")
    lt = importlib.reload(importlib.import_module("gpumon.lightning"))
    cb = lt.GpumonLightningCallback()
    assert isinstance(cb, base)
    trainer = types.SimpleNamespace(current_epoch=3, global_step=77)
    cb.on_train_epoch_start(trainer, None)
    cb.on_train_epoch_end(trainer, None)
    cb.on_validation_epoch_end(trainer, None)
    cb.on_save_checkpoint(trainer, None, {})
    cb.on_exception(trainer, None, MemoryError())
    assert recorded[1:] == [("epoch_begin", "epoch", 3, None), ("epoch", 3, 77),
                            ("eval_end", "eval", None, 77), ("checkpoint", "checkpoint", None, 77),
                            ("mark", "MemoryError", None, 77)]


def test_keras_callback(monkeypatch, recorded):
    base = _fake_base_module(monkeypatch, "keras.callbacks", "Callback")
    kr = importlib.reload(importlib.import_module("gpumon.keras"))
    cb = kr.GpumonCallback()
    assert isinstance(cb, base)
    cb.on_train_begin()
    cb.on_epoch_end(0, logs={"loss": 1.0})
    cb.on_epoch_end(1)
    cb.on_test_begin()
    cb.on_test_end()
    assert [c[:2] for c in recorded[1:]] == [("train_begin", "train"), ("epoch", 0), ("epoch", 1),
                                             ("eval_begin", "eval"), ("eval_end", "eval")]


def test_keras_callback_without_keras(monkeypatch, recorded):
    monkeypatch.setitem(sys.modules, "keras", None)
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    kr = importlib.reload(importlib.import_module("gpumon.keras"))
    assert kr._Base is object
    kr.GpumonCallback().on_epoch_end(4)
    assert ("epoch", 4, None) in recorded


def test_public_api_never_raises(monkeypatch):
    class Broken(object):
        def epoch(self, *a):
            raise RuntimeError("boom")

        def mark(self, *a):
            raise RuntimeError("boom")

    monkeypatch.setattr(gpumon, "_instance", Broken())
    gpumon.epoch()
    gpumon.mark("x")


def test_start_is_idempotent(tmp_path, monkeypatch):
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    monkeypatch.setattr(gpumon, "_instance", None)
    assert gpumon.start(sock_dir=str(d))
    first = gpumon.companion()
    assert gpumon.start(sock_dir=str(d))
    assert gpumon.companion() is first
    assert len(os.listdir(str(d))) == 1
    gpumon.stop()
    assert os.listdir(str(d)) == []


PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIM = os.path.join(PKG, "gpumon", "_shim")


def test_shim_starts_companion_and_chains_to_the_programs_sitecustomize(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
    sockd = tmp_path / "sock"
    sockd.mkdir(mode=0o700)
    code = ("import os, gpumon, sitecustomize\n"
            "c = gpumon.companion()\n"
            "print(os.environ.get('USER_SITECUSTOMIZE'), c is not None and c.thread is not None,\n"
            "      os.path.basename(c.path), sitecustomize.__file__.endswith('user/sitecustomize.py'))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM, PKG, str(user)]), GPUMON_DIR=str(sockd))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    ran, started, sock, own = out.stdout.split()
    assert ran == "ran" and started == "True" and own == "True"
    assert sock.endswith(".sock")
    assert os.listdir(str(sockd)) == [], "socket removed at exit"


def test_shim_without_a_program_sitecustomize(tmp_path):
    sockd = tmp_path / "sock"
    sockd.mkdir(mode=0o700)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM, PKG]), GPUMON_DIR=str(sockd))
    out = subprocess.run([sys.executable, "-c", "import gpumon; print(gpumon.companion() is not None)"],
                         env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_shim_error_in_program_sitecustomize_is_reported_like_without_gpumon(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("raise ValueError('theirs')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM, PKG, str(user)]),
               GPUMON_DIR=str(tmp_path))
    os.chmod(str(tmp_path), 0o700)
    out = subprocess.run([sys.executable, "-c", "print('program ran')"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "program ran"
    assert "sitecustomize" in out.stderr and "theirs" in out.stderr


def test_callbacks_are_typed_with_explicit_options():
    # A `mypy --strict` training script may call them (no-untyped-call otherwise), and the
    # options are `gpumon.start`'s, by name, not hidden behind **kwargs.
    import inspect

    from gpumon import hf, keras as kr, lightning as lt

    start = inspect.signature(gpumon.start)
    for cls in (hf.GpumonTrainerCallback, lt.GpumonLightningCallback, kr.GpumonCallback):
        init = inspect.signature(cls.__init__)
        opts = [p for p in init.parameters.values() if p.name != "self"]
        assert [p.name for p in opts] == list(start.parameters), cls
        assert all(p.kind is p.KEYWORD_ONLY and p.annotation is not p.empty for p in opts), cls
        for name, fn in vars(cls).items():
            if callable(fn) and (name.startswith("on_") or name == "__init__"):
                sig = inspect.signature(fn)
                assert sig.return_annotation is None or sig.return_annotation == "None", (cls, name)
                assert all(p.annotation is not p.empty for p in sig.parameters.values()
                           if p.name != "self"), (cls, name)
