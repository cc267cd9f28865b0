"""gpumon's series into W&B and TensorBoard (gpumon.log_to), against writers that record what
they are given: what is logged, when, and that a failing target costs the program nothing.
test_loggers_real.py does the same into real event files and a real W&B run."""

import json
import os
import sys
import threading
import time
import types

import pytest

import gpumon
from conftest import Mon
from fakes import GIB, MIB
from gpumon import _companion, _loggers


class Writer(object):
    """A SummaryWriter's methods, keeping every call."""

    def __init__(self, log_dir=None, fail=False):
        self.log_dir = log_dir
        self.scalars = []
        self.texts = []
        self.flushed = 0
        self.closed = False
        self.fail = fail

    def add_scalar(self, tag, value, global_step=None, walltime=None):
        if self.fail:
            raise OSError("disk full")
        self.scalars.append((tag, value, global_step, walltime))

    def add_text(self, tag, text, global_step=None, walltime=None):
        self.texts.append((tag, text, global_step))

    def flush(self):
        self.flushed += 1

    def close(self):
        self.closed = True

    def series(self, tag):
        return [(step, v) for t, v, step, _ in self.scalars if t == tag]


class Run(object):
    def __init__(self):
        self.rows = []
        self.summary = {}
        self.threads = set()

    def log(self, row, commit=None, step=None):
        self.rows.append((dict(row), commit, step))
        self.threads.add(threading.current_thread())


def until(pred, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("not within %.1fs" % timeout)


@pytest.fixture
def fake_wandb(monkeypatch):
    run = Run()
    mod = types.ModuleType("wandb")
    mod.run = run
    monkeypatch.setitem(sys.modules, "wandb", mod)
    return mod


def test_a_companion_logs_its_series_floors_peaks_and_ooms(companion, fake_torch, fake_wandb):
    w = Writer()
    c = companion()
    c.set_loggers(_loggers.Loggers([w, "wandb"], every_s=3600))
    until(lambda: fake_torch.observer is not None)
    # The first tick (the series as logging starts), before the epochs move them.
    until(lambda: w.series("gpumon/dev0/allocated_bytes"))
    c.epoch()
    fake_torch.alloc += GIB
    c.epoch()
    # The allocator's OOM observer: device, requested, allocated, free on the device.
    fake_torch.observer(0, 4 * GIB, 3 * GIB, 200 * MIB)
    until(lambda: w.series("gpumon/ooms"))
    c.stop("test end")

    assert w.series("gpumon/dev0/epoch_floor_bytes") == [(0, GIB), (1, 2 * GIB)]
    # The lifetime peak moved before epoch 0 only, and no monitor sampled epoch 1.
    assert w.series("gpumon/dev0/epoch_peak_bytes") == [(0, 2 * GIB)]
    # The series at start (the first tick) and at each epoch end.
    alloc = [v for _, v in w.series("gpumon/dev0/allocated_bytes")]
    assert alloc[-2:] == [GIB, 2 * GIB]
    assert w.series("gpumon/dev0/reserved_bytes")[-1][1] == 10 * GIB
    # The fake block map: 500 free holes of 18 MiB.
    assert w.series("gpumon/dev0/pool_free_bytes")[-1][1] == 500 * 18 * MIB
    assert w.series("gpumon/dev0/largest_free_bytes")[-1][1] == 18 * MIB
    assert w.series("gpumon/dev0/fragmentation")[-1][1] == pytest.approx(1 - 1 / 500.0)
    assert w.series("gpumon/ooms") == [(w.series("gpumon/ooms")[0][0], 1)]
    (tag, text, _), = w.texts
    assert tag == "gpumon/oom" and "4.00 GiB requested" in text and "200.00 MiB free on the device" in text
    # The program's writer is flushed, never closed: it is the program's.
    assert w.flushed >= 1 and not w.closed
    # W&B: the same series, always joined to the program's next row, never a step of their
    # own, and only ever from the program's thread (W&B's log is not thread-safe).
    assert fake_wandb.run.threads == {threading.current_thread()}
    rows = fake_wandb.run.rows
    assert rows and all(commit is False and step is None for _, commit, step in rows)
    logged = {}
    for row, _, _ in rows:
        logged.update(row)
    assert logged["gpumon/dev0/epoch_floor_bytes"] == 2 * GIB
    assert logged["gpumon/ooms"] == 1
    assert "4.00 GiB requested" in fake_wandb.run.summary["gpumon/oom"]


def test_nothing_is_logged_or_imported_unless_asked(companion, fake_torch, monkeypatch):
    monkeypatch.delenv("GPUMON_LOG_TO", raising=False)
    before = set(sys.modules)
    c = companion()
    c.epoch()
    until(lambda: len(c.epochs) == 1)
    assert c.loggers is None
    assert not any(m.startswith(("wandb", "tensorboard", "torch.utils")) for m in set(sys.modules) - before)
    assert _loggers.Loggers([]).targets == [] and not _loggers.Loggers([])


def test_no_wandb_run_yet_is_no_error_and_a_later_run_is_used(companion, fake_torch, fake_wandb):
    fake_wandb.run = None
    c = companion()
    lg = _loggers.Loggers(["wandb"], every_s=3600)
    c.set_loggers(lg)
    c.epoch()
    until(lambda: len(c.epochs) == 1)
    time.sleep(0.1)
    assert lg.targets[0].failures == 0
    fake_wandb.run = Run()  # the program calls wandb.init() later
    c.epoch()
    until(lambda: fake_wandb.run.rows)
    assert fake_wandb.run.rows[0][0]["gpumon/dev0/epoch_floor_bytes"] == GIB


def test_a_failing_target_is_dropped_and_the_companion_goes_on(companion, fake_torch, capfd):
    bad, good = Writer(fail=True), Writer()
    c = companion()
    m = Mon(c.path)
    m.handshake()
    c.set_loggers(_loggers.Loggers([bad, good], every_s=3600))
    for _ in range(4):
        c.epoch()
    until(lambda: len(good.series("gpumon/dev0/epoch_floor_bytes")) == 4)
    assert [type(t.writer) for t in c.loggers.targets] == [Writer]
    assert "logging to tensorboard stopped after 3 failures" in capfd.readouterr().err
    # The monitor got every epoch all the same.
    got = []
    m.until(lambda r: r.get("type") == "epoch" and got.append(r) is None and len(got) == 4)


def test_the_series_are_throttled_not_per_sample(fake_torch):
    lg = _loggers.Loggers([Writer()], every_s=2)
    w = lg.targets[0].writer
    comp = _companion.Companion(_companion.Config(sample_hz=50))
    comp._add_sources()
    ticks = 0
    for i in range(100):  # 10 s of a 10 Hz loop
        now = 1000.0 + i * 0.1
        if lg.due(now):
            lg.tick(comp, now)
            ticks += 1
    assert ticks == 5
    assert len(w.series("gpumon/dev0/allocated_bytes")) == 5
    assert _loggers.Loggers([Writer()], every_s=0.001).every_s == 1.0, "at most once a second"


def test_the_block_map_is_read_within_its_duty(fake_torch):
    lg = _loggers.Loggers([Writer()], every_s=1)
    comp = _companion.Companion(_companion.Config(sample_hz=50))
    comp._add_sources()
    calls = fake_torch.calls
    lg.tick(comp, 0.0)
    snaps = fake_torch.calls - calls
    assert snaps == 2, "one stats read, one block map"
    # A block map that took 10 ms may be read again after 5 s (0.2 % of wall time).
    lg._frag_next[0] = 5.0
    lg.next_due = 0.0
    calls = fake_torch.calls
    lg.tick(comp, 1.0)
    assert fake_torch.calls - calls == 1, "stats only: the last block map stands"
    assert w_last(lg, "gpumon/dev0/largest_free_bytes") == 18 * MIB


def w_last(lg, tag):
    return lg.targets[0].writer.series(tag)[-1][1]


def test_targets_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUMON_LOG_TO", "wandb, tensorboard=%s" % tmp_path)
    monkeypatch.setenv("GPUMON_LOG_EVERY_S", "12")
    monkeypatch.setenv("GPUMON_ALERTS_JSONL", str(tmp_path / "alerts.jsonl"))
    lg = _loggers.from_env()
    assert [t.name for t in lg.targets] == ["wandb", "tensorboard"]
    assert lg.targets[1].logdir == str(tmp_path) and lg.targets[1].own
    assert lg.every_s == 12 and lg.alerts.path == str(tmp_path / "alerts.jsonl")
    monkeypatch.setenv("GPUMON_LOG_TO", "")
    assert _loggers.from_env() is None
    monkeypatch.setenv("RANK", "3")
    assert _loggers.make_target("tensorboard").logdir == os.path.join("runs", "gpumon", "rank3")


def test_an_unknown_target_is_said_and_skipped(capfd):
    lg = _loggers.Loggers(["mlflow", object(), Writer()])
    assert [t.name for t in lg.targets] == ["tensorboard"]
    err = capfd.readouterr().err
    assert "unknown target 'mlflow'" in err and "neither a SummaryWriter nor a W&B run" in err


def test_log_to_before_start_reaches_the_companion(sock_dir, fake_torch, monkeypatch):
    monkeypatch.setattr(gpumon, "_pending_loggers", None)
    w = Writer()
    assert gpumon.log_to(w, every_s=3600)
    try:
        assert gpumon.start(sock_dir=sock_dir, sample_hz=50, epoch_gc=False)
        assert gpumon.companion().loggers.targets[0].writer is w
        gpumon.epoch()
        until(lambda: w.series("gpumon/dev0/epoch_floor_bytes"))
        # start(log_to=...) (the callbacks' option) replaces them on a running companion.
        w2 = Writer()
        gpumon.start(log_to=[w2])
        assert gpumon.companion().loggers.targets[0].writer is w2
        assert gpumon.log_to() is False and gpumon.companion().loggers is None
    finally:
        gpumon.stop("test end")
        gpumon._pending_loggers = None
    assert w.flushed >= 1


def test_log_to_is_off_with_gpumon_disable(monkeypatch):
    monkeypatch.setenv("GPUMON_DISABLE", "1")
    assert gpumon.log_to(Writer()) is False


def _alert(pid, change, severity, kind="growth", t="2026-12-04T14:15:00.000Z", gpu=0):
    return json.dumps({"time": t, "change": change, "epoch": 3, "kind": kind,
                       "severity": severity, "pid": pid, "gpu": gpu, "summary": "s",
                       "message": "%s %s" % (kind, change), "evidence": {"basis": "b"}})


def test_this_processes_alerts_are_followed_in_the_monitors_file(tmp_path, companion):
    path = tmp_path / "alerts.jsonl"
    c = companion()
    me = c.pid
    lg = _loggers.Loggers([Writer()], every_s=3600, alerts_jsonl=str(path))
    w = lg.targets[0].writer
    lg.alerts.since_ms = 1796000000000  # 2026-11-30: older lines are another process's
    old = _alert(me, "raised", "critical", t="2026-11-01T00:00:00.000Z")
    with open(str(path), "w") as f:
        f.write("\n".join([old, _alert(me + 1, "raised", "critical"),
                           _alert(me, "raised", "warning")]) + "\n")
        # A line the monitor is still writing: kept for the next look.
        f.write(_alert(me, "worsened", "critical")[:40])
    lg.poll_alerts(c)
    assert w.series("gpumon/alert/growth") == [(w.series("gpumon/alert/growth")[0][0], 2)]
    with open(str(path), "a") as f:
        f.write(_alert(me, "worsened", "critical")[40:] + "\n")
        f.write(_alert(me, "raised", "info", kind="headroom", gpu=1) + "\n")
        f.write(_alert(me, "cleared", "critical") + "\n")
        f.write("not json\n")
    lg.poll_alerts(c)
    assert [v for _, v in w.series("gpumon/alert/growth")] == [2, 3, 0]
    assert [v for _, v in w.series("gpumon/alert/headroom")] == [1]
    texts = [t for _, t, _ in w.texts]
    assert texts[0] == "raised warning growth (GPU 0): growth raised"
    assert len(texts) == 4
    # A monitor that starts the file anew is read from its start.
    path.write_text(_alert(me, "raised", "warning", kind="oom") + "\n")
    lg.poll_alerts(c)
    assert [v for _, v in w.series("gpumon/alert/oom")] == [2]


def test_the_process_start_is_before_now():
    start = _loggers.process_start_ms()
    assert start <= time.time() * 1000 + 1000
    assert start > time.time() * 1000 - 7 * 86400 * 1000


def test_wandb_waits_for_the_programs_thread(companion, fake_torch, fake_wandb):
    c = companion()
    lg = _loggers.Loggers(["wandb"], every_s=1)
    c.set_loggers(lg)
    until(lambda: lg.targets[0].pending())
    time.sleep(1.2)  # a second periodic point: still waiting, the latest values kept
    assert fake_wandb.run.rows == []
    c.mark("eval")  # a program call: one row with what waited
    assert len(fake_wandb.run.rows) == 1
    assert fake_wandb.run.rows[0][0]["gpumon/dev0/allocated_bytes"] == GIB
    assert fake_wandb.run.threads == {threading.current_thread()}
    c.mark("eval")  # nothing new: no row
    assert len(fake_wandb.run.rows) <= 2
