"""gpumon.epoch() with and without a readable framework, and what its gc costs."""

import gc

from conftest import Mon
from gpumon import _companion

GIB = 1 << 30
MIB = 1 << 20


def _epochs(m, n):
    got = []
    m.until(lambda r: r.get("type") == "epoch" and got.append(r) is None and len(got) >= n)
    return got


def test_epoch_without_a_framework_is_still_marked(companion):
    c = companion()
    m = Mon(c.path)
    m.handshake()
    c.epoch()
    c.epoch(7, step=70)
    e0, e1 = _epochs(m, 2)
    assert (e0["epoch"], e1["epoch"]) == (0, 7)
    for e in (e0, e1):
        # no device and no floor: gpumon reads the process's NVML bytes at `t`
        assert "dev" not in e and "floor" not in e
        assert "NVML" in e["na"]["floor"]
    assert e1["steps"] == 70 and e1["start_t"] == e0["t"]


def test_epoch_with_a_framework_carries_its_floor(companion, fake_torch):
    c = companion()
    m = Mon(c.path)
    m.handshake()
    c.epoch()
    (e,) = _epochs(m, 1)
    assert e["dev"] == 0 and e["floor"] == fake_torch.alloc


def test_gc_modes():
    assert _companion._gc_mode(None, None) == "auto"
    assert _companion._gc_mode(None, "0") == "off"
    assert _companion._gc_mode(None, "full") == "full"
    assert _companion._gc_mode(False, "full") == "off", "the API argument wins"
    assert _companion._gc_mode(True, None) == "auto"


def _count_collections(monkeypatch, c):
    calls = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(a[0] if a else 2) or 0)
    return calls


def test_auto_gc_is_young_unless_the_floor_rose(companion, fake_torch, monkeypatch):
    c = companion(epoch_gc="auto")
    calls = _count_collections(monkeypatch, c)
    c.epoch()          # first floor: nothing to compare with
    c.epoch()          # flat floor: young generation only
    assert calls == [0, 0]
    fake_torch.alloc += GIB
    c.epoch()          # the floor rose: measured again after a full collection
    assert calls == [0, 0, 0, 2]
    c.epoch()          # flat again at the new level
    assert calls[-1] == 0 and len(calls) == 5


def test_full_and_off(companion, fake_torch, monkeypatch):
    c = companion(epoch_gc="full")
    calls = _count_collections(monkeypatch, c)
    c.epoch()
    c.epoch()
    assert calls == [2, 2]
    c2 = companion(epoch_gc="off")
    calls.clear()
    c2.epoch()
    assert calls == []


def test_auto_gc_skips_rises_within_the_noise(companion, fake_torch, monkeypatch):
    c = companion(epoch_gc="auto")
    calls = _count_collections(monkeypatch, c)
    c.epoch()
    for i in range(12):
        # a floor that moves by half a MiB up and down (rounding, metric tensors)
        fake_torch.alloc += (MIB // 2) if i % 2 == 0 else -(MIB // 2)
        c.epoch()
    assert calls == [0] * 13, "no full pass for noise"
    # a slow rise below the threshold each epoch still gets a full pass once it adds up
    for _ in range(6):
        fake_torch.alloc += MIB
        c.epoch()
    assert calls.count(2) == 2, calls


def test_floor_gate_threshold_follows_the_noise():
    from gpumon._epochgc import FloorGate, MiB
    g = FloorGate()
    k = ("torch", 0)
    base = 1000 * MiB
    for i in range(16):
        g.seen(k, base + (3 * MiB if i % 2 else 0))
    # steps of 3 MiB: noise 12 MiB; a 10 MiB rise over the low is within it
    assert not g.needs_full(k, base + 10 * MiB)
    assert g.needs_full(k, base + 13 * MiB)
