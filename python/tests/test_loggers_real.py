"""A companion run writing gpumon's series into a real TensorBoard event file and a real W&B
offline run, both read back. Skipped with a line saying so where tensorboard/tensorboardX or
wandb is not installed, unless GPUMON_REQUIRE_TENSORBOARD=1 / GPUMON_REQUIRE_WANDB=1 (CI sets
both and installs them) makes a missing package a failure."""

import glob
import json
import os
import struct
import sys
import time

import pytest

from fakes import GIB, MIB
from gpumon import _loggers


def _imported(name):
    try:
        return __import__(name, fromlist=["_"]), None
    except Exception as e:
        return None, e


# Imported while collecting, before a test puts the fake torch in sys.modules: tensorboardX
# reads `torch.Tensor` as it is imported when torch is there.
_MODULES = {n: _imported(n) for n in (
    "tensorboardX", "tensorboard.backend.event_processing.event_accumulator", "wandb")}


def _need(names, env):
    mods = []
    for n in names:
        mod, err = _MODULES[n]
        if mod is None:
            if os.environ.get(env) == "1":
                pytest.fail("%s=1 (CI) but %s cannot be imported: %r" % (env, n, err))
            pytest.skip("%s is not installed (set %s=1 to require it)" % (n, env))
        mods.append(mod)
    return mods


def _until(pred, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("not within %.1fs" % timeout)


def _run(companion, fake_torch, targets, alerts):
    """Three epochs whose floor grows 1 GiB each, an alert for this process in the monitor's
    file, then an OOM, as a training process that leaks would."""
    c = companion()
    with open(alerts, "w") as f:
        f.write(json.dumps({
            "time": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "change": "raised", "epoch": 1, "kind": "growth", "severity": "warning",
            "pid": c.pid, "gpu": 0, "summary": "leak +1.0G/ep",
            "message": "allocated grows 1.00 GiB per epoch", "evidence": {"basis": "floors"},
        }) + "\n")
    c.set_loggers(_loggers.Loggers(targets, every_s=3600, alerts_jsonl=alerts))
    _until(lambda: fake_torch.observer is not None and c.loggers.next_due > 0)
    for _ in range(3):
        c.epoch()
        fake_torch.alloc += GIB
    fake_torch.observer(0, 8 * GIB, 4 * GIB, 100 * MIB)
    _until(lambda: c.loggers.ooms == 1)
    c.stop("test end")
    return c


def test_tensorboard_event_files_hold_the_series(companion, fake_torch, tmp_path, monkeypatch):
    tbx, ea = _need(["tensorboardX", "tensorboard.backend.event_processing.event_accumulator"],
                    "GPUMON_REQUIRE_TENSORBOARD")
    # The program's own writer, passed in, and one gpumon opens with the class the program
    # imports: torch.utils.tensorboard's when the program has it (here a stand-in module
    # that hands out tensorboardX's class, as the real one would hand out its own).
    mine = tbx.SummaryWriter(log_dir=str(tmp_path / "program"))
    made = []

    class TorchWriter(tbx.SummaryWriter):
        def __init__(self, *a, **kw):
            made.append(kw.get("log_dir"))
            super(TorchWriter, self).__init__(*a, **kw)

    tut = type(sys)("torch.utils.tensorboard")
    tut.SummaryWriter = TorchWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", tut)
    own_dir = str(tmp_path / "gpumon")
    _run(companion, fake_torch, [mine, "tensorboard=" + own_dir], str(tmp_path / "alerts.jsonl"))
    mine.close()
    assert made == [own_dir]

    for d in (tmp_path / "program", tmp_path / "gpumon"):
        acc = ea.EventAccumulator(str(d), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        for t in ("allocated_bytes", "reserved_bytes", "pool_free_bytes", "largest_free_bytes",
                  "fragmentation", "epoch_floor_bytes", "epoch_peak_bytes"):
            assert "gpumon/dev0/" + t in tags, (d, sorted(tags))
        floors = [(e.step, e.value) for e in acc.Scalars("gpumon/dev0/epoch_floor_bytes")]
        assert floors == [(0, GIB), (1, 2 * GIB), (2, 3 * GIB)]
        frag = acc.Scalars("gpumon/dev0/fragmentation")[-1].value
        assert frag == pytest.approx(1 - 1 / 500.0, rel=1e-6)
        assert acc.Scalars("gpumon/dev0/largest_free_bytes")[-1].value == 18 * MIB
        assert [e.value for e in acc.Scalars("gpumon/ooms")] == [1]
        assert [e.value for e in acc.Scalars("gpumon/alert/growth")] == [2]
        texts = {t: [e.tensor_proto.string_val[0].decode() for e in acc.Tensors(t)]
                 for t in acc.Tags()["tensors"]}
        alerts = next(v for k, v in texts.items() if k.startswith("gpumon/alerts"))
        assert alerts == ["raised warning growth (GPU 0): allocated grows 1.00 GiB per epoch"]
        oom = next(v for k, v in texts.items() if k.startswith("gpumon/oom"))
        assert "8.00 GiB requested" in oom[0]


def _wandb_records(path):
    """The records of a W&B run file (.wandb): a header (":W&B", magic, version), then
    records in 32 KiB blocks, each with a 7-byte head (CRC, length, type: full, first,
    middle, last) as in LevelDB's log format, which W&B's own reader follows."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = open(path, "rb").read()
    assert data[:4] == b":W&B", data[:7]
    block, pos, out, part = 32768, 7, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += left
            continue
        body = data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind == 1:
            out.append(body)
        elif kind == 2:
            part = body
        elif kind == 3:
            part += body
        elif kind == 4:
            out.append(part + body)
    recs = []
    for b in out:
        r = pb.Record()
        r.ParseFromString(b)
        recs.append(r)
    return recs


def test_a_wandb_offline_run_holds_the_series(companion, fake_torch, tmp_path, monkeypatch):
    (wandb,) = _need(["wandb"], "GPUMON_REQUIRE_WANDB")
    for k, v in (("WANDB_MODE", "offline"), ("WANDB_SILENT", "true"),
                 ("WANDB_DIR", str(tmp_path)), ("WANDB_DISABLE_GIT", "true")):
        monkeypatch.setenv(k, v)
    run = wandb.init(project="gpumon-test", dir=str(tmp_path), settings=wandb.Settings(
        x_disable_stats=True, console="off"))
    try:
        # The program logs its loss at each step; gpumon's rows join them.
        for i in range(2):
            run.log({"loss": 1.0 / (i + 1)})
        _run(companion, fake_torch, ["wandb"], str(tmp_path / "alerts.jsonl"))
        run.log({"loss": 0.25})
    finally:
        run.finish()
    (path,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    # W&B's service process writes the file behind finish(): its last record is `exit`.
    records = []

    def complete():
        try:
            records[:] = _wandb_records(path)
        except Exception:  # a record still being written
            return False
        return any(r.WhichOneof("record_type") == "exit" for r in records)

    _until(complete, timeout=30)
    rows, summary = [], {}
    for r in records:
        kind = r.WhichOneof("record_type")
        if kind == "history":
            rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                         for i in r.history.item})
        elif kind == "summary":
            for i in r.summary.update:
                summary[i.key or "/".join(i.nested_key)] = json.loads(i.value_json)
    # The program's steps are untouched: 0, 1, 2, one per wandb.log of its own.
    assert [row["_step"] for row in rows] == [0, 1, 2]
    merged = {}
    for row in rows:
        merged.update(row)
    assert merged["gpumon/dev0/epoch_floor_bytes"] == 3 * GIB
    assert merged["gpumon/dev0/largest_free_bytes"] == 18 * MIB
    assert merged["gpumon/dev0/fragmentation"] == pytest.approx(1 - 1 / 500.0)
    assert merged["gpumon/ooms"] == 1 and merged["gpumon/alert/growth"] == 2
    assert "gpumon/dev0/allocated_bytes" in rows[2] and rows[2]["loss"] == 0.25
    assert summary["gpumon/alerts"].startswith("raised warning growth (GPU 0)")
    assert "8.00 GiB requested" in summary["gpumon/oom"]
