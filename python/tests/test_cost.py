"""What the companion costs the program: its self-timing (GPUMON_SELFTIME), one send per
monitor per wake-up, and the duty limit on block-map reads made inside a step."""

import json
import os
import time

from conftest import GIB, Mon
from gpumon import _companion, _selftime
from gpumon._server import Server


def test_selftime_is_off_unless_asked(companion, fake_torch, monkeypatch):
    monkeypatch.delenv("GPUMON_SELFTIME", raising=False)
    c = companion()
    time.sleep(1.3)  # detection has run
    assert c.selftime is None
    assert c.sources and not hasattr(c.sources[0].sample, "__wrapped__")


def test_selftime_bounds_gil_holds_and_names_each_framework_call(companion, fake_torch, monkeypatch,
                                                                 tmp_path):
    out = tmp_path / "self.json"
    monkeypatch.setenv("GPUMON_SELFTIME", str(out))
    c = companion(sample_hz=20.0, snapshot_s=0.3)
    m = Mon(c.path)
    m.until(lambda x: x["type"] == "frag", 4)
    m.until(lambda x: x["type"] == "sample", 4)
    c.epoch()
    time.sleep(0.3)
    r = c.selftime.report()
    assert r["wakeups"] >= 5
    # Blocked in select most of the time (a loaded test machine can stretch the holds).
    assert 0 < r["hold_s"] < r["wall_s"] and r["idle_s"] > 0
    assert r["hold_s"] + r["idle_s"] <= r["wall_s"] * 1.01
    assert r["hold_us_per_wakeup"]["max"] >= r["hold_us_per_wakeup"]["p50"] > 0
    calls = r["calls"]
    assert calls["torch.memory_stats@companion"]["n"] >= 2
    assert calls["torch.memory_snapshot@companion"]["n"] >= 1
    # epoch() reads the floor on the program's own thread: counted apart.
    assert calls["torch.sample@program"]["n"] == 1
    assert r["slow_calls"] == 0
    c.stop("test")
    saved = json.loads(out.read_text())
    assert saved["wakeups"] >= r["wakeups"]


def test_selftime_cpu_is_the_companion_threads_even_when_asked_from_another(
        companion, fake_torch, monkeypatch):
    monkeypatch.setenv("GPUMON_SELFTIME", "1")
    c = companion(sample_hz=20.0)
    m = Mon(c.path)
    m.until(lambda x: x["type"] == "sample", 4)
    t_end = time.thread_time() + 0.6
    while time.thread_time() < t_end:  # the program thread burns CPU; the companion idles
        pass
    r = c.selftime.report()
    assert r["wakeups"] > 0
    assert 0 < r["cpu_s"] < 0.3, r["cpu_s"]


def test_selftime_counts_a_framework_call_that_blocks(fake_torch):
    st = _selftime.SelfTime()
    slow = st.wrap("torch.memory_snapshot", lambda: time.sleep(2 * _selftime.SLOW_S))
    fast = st.wrap("torch.memory_stats", lambda: None)
    slow()
    fast()
    r = st.report()
    assert r["slow_calls"] == 1
    assert r["calls"]["torch.memory_snapshot@program"]["slow"] == 1
    assert r["calls"]["torch.memory_stats@program"]["slow"] == 0


def test_a_wake_up_sends_once_per_monitor_and_leaves_the_selector_alone(sock_dir):
    srv = Server(os.path.join(sock_dir, "9.sock"), lambda: [])
    assert srv.open() is None
    mon = Mon(srv.path)
    for _ in range(20):
        srv.poll(0.01)
    assert srv.live_count() == 1
    m = srv.monitors[0]
    sends, modifies = [], []
    real_send, real_modify = m.sock.send, srv.sel.modify

    class CountingSock(object):
        def __getattr__(self, k):
            return getattr(real_sock, k)

        def send(self, data):
            sends.append(len(data))
            return real_send(data)

    real_sock = m.sock
    m.sock = CountingSock()
    srv.sel.modify = lambda *a: modifies.append(a) or real_modify(*a)
    for i in range(10):
        srv.broadcast({"type": "marker", "kind": "mark", "label": "m%d" % i})
    assert sends == [], "broadcast only queues"
    srv.poll(0)
    assert len(sends) == 1, "ten messages of one wake-up go out in one send"
    assert modifies == [], "a socket with room is never re-registered"
    got = [mon.read()["label"] for _ in range(10)]
    assert got == ["m%d" % i for i in range(10)]
    m.sock = real_sock
    srv.close()


def test_block_map_reads_inside_a_step_keep_to_their_duty(companion, fake_torch, monkeypatch):
    """A slow block map is read at a new in-epoch high no more than its duty allows,
    even when the detail level would read it every 0.1 s."""
    real = fake_torch.mod.cuda.memory_snapshot
    snaps = []

    def slow_snapshot(include_traces=True):
        snaps.append(time.monotonic())
        time.sleep(0.002)
        return real(include_traces=include_traces)

    fake_torch.mod.cuda.memory_snapshot = slow_snapshot
    c = companion(sample_hz=50.0, snapshot_s=0.2)
    m = Mon(c.path)
    m.until(lambda x: x["type"] == "sample", 4)
    peaks = []
    t_end = time.time() + 1.5
    while time.time() < t_end:
        fake_torch.alloc += GIB  # a new high at every sample
        msg = m.read(2)
        if msg["type"] == "frag" and msg.get("source") == "peak":
            peaks.append(msg)
    # 2 ms a read at half of SNAPSHOT_DUTY: at most one read every 2 s.
    assert 1 <= len(peaks) <= 1, len(peaks)
    assert c._peak_frag_gap_ms[0] >= 0.002 * 1000 / (_companion.SNAPSHOT_DUTY / 2) * 0.9
