import sys
import time
import types

from conftest import GIB, MIB, FakeTorch, Mon
from gpumon import _frag, _sources


def _first(m, kind, timeout=5.0):
    return m.until(lambda x: x["type"] == kind, timeout)


def test_no_framework_calls_while_nobody_watches(companion, fake_torch):
    c = companion()
    time.sleep(1.3)  # detection runs, OOM observer is attached
    assert fake_torch.observer is not None
    assert fake_torch.calls == 0
    c.epoch()  # per-epoch bookkeeping is the one exception
    assert fake_torch.calls == 1


def test_torch_detected_sampled_and_block_map_reduced(companion, fake_torch):
    c = companion()
    m = Mon(c.path)
    m.until(lambda x: x["type"] == "hello" and x.get("framework") == "torch", 4)
    s = _first(m, "sample")
    assert s["allocated"] == GIB and s["reserved"] == 10 * GIB
    assert s["peak_allocated"] == 2 * GIB and s["num_alloc_retries"] == 1
    assert s["limit"] == 70 * GIB, "memory fraction 0.5 of 140 GiB"
    assert s["active"] == GIB and s["requested"] == GIB - 100
    f = _first(m, "frag")
    assert f["free_total"] == 500 * 18 * MIB and f["largest_free"] == 18 * MIB
    assert f["hist"] == [[24, 500, 500 * 18 * MIB]]
    assert f["n_free_blocks"] == 500 and f["largest_block"] == 2 * MIB
    assert fake_torch.snapshot_kwargs is False, "include_traces=False where supported"


def test_torch_hello_names_the_card(companion, fake_torch):
    c = companion()
    m = Mon(c.path)
    h = m.until(lambda x: x["type"] == "hello" and x.get("framework") == "torch", 4)
    d = h["devices"][0]
    assert d["uuid"] == "GPU-58f4a8b1-0000-1111-2222-333344445555"
    assert d["pci_bus_id"] == "00000000:65:00.0"
    assert h["allocator"] == "native" and "free_blocks" in h["capabilities"]
    caps = h["capabilities"]
    assert "epochs" in caps and len(caps) == len(set(caps)), "each capability once: %s" % caps


def test_torch_oom_observer_reports_request_and_free_blocks(companion, fake_torch):
    c = companion()
    time.sleep(1.3)
    m = Mon(c.path)
    m.handshake()
    fake_torch.observer(0, 64 * MIB, 10 * GIB, 1 * GIB)
    ev = _first(m, "event")
    assert ev["kind"] == "oom" and ev["requested"] == 64 * MIB
    assert ev["limit"] == 10 * GIB and ev["device_free"] == GIB
    assert ev["free_total"] == 500 * 18 * MIB and ev["largest_free"] == 18 * MIB


def test_cuda_malloc_async_says_why_not(companion, monkeypatch):
    ft = FakeTorch(backend="cudaMallocAsync")
    monkeypatch.setitem(sys.modules, "torch", ft.mod)
    c = companion()
    m = Mon(c.path)
    h = m.until(lambda x: x["type"] == "hello" and x.get("framework") == "torch", 4)
    assert "cudaMallocAsync" in h["na"]["free_blocks"]
    f = _first(m, "frag")
    assert f["hist"] is None and "no block map" in f["na"]["free_blocks"]
    s = _first(m, "sample")
    assert "active" not in s and "active" in s["na"]


def test_uninitialised_torch_is_left_alone(companion, fake_torch):
    fake_torch.initialized = False
    c = companion()
    m = Mon(c.path)
    m.handshake()
    time.sleep(1.2)
    assert fake_torch.calls == 0, "no CUDA context is ever created by gpumon"


def test_epoch_floor_and_peak(companion, fake_torch):
    c = companion()
    m = Mon(c.path)
    m.until(lambda x: x["type"] == "hello" and x.get("framework") == "torch", 4)
    _first(m, "sample")
    fake_torch.alloc = 3 * GIB
    fake_torch.peak = 5 * GIB
    c.epoch()
    e = _first(m, "epoch")
    assert e["epoch"] == 0 and e["floor"] == 3 * GIB
    assert e["peak"] == 5 * GIB, "the lifetime peak moved during the epoch"
    fake_torch.alloc = 4 * GIB
    time.sleep(0.2)
    fake_torch.alloc = 2 * GIB
    c.epoch(step=40)
    e = _first(m, "epoch")
    assert e["epoch"] == 1 and e["floor"] == 2 * GIB and e["steps"] == 40
    assert e["peak"] == 4 * GIB, "sampled max of the epoch, the lifetime peak stood still"


def test_epoch_peak_unknown_when_unwatched_says_why(companion, fake_torch):
    c = companion()
    c.epoch()
    c.epoch()
    time.sleep(0.2)
    m = Mon(c.path)
    _h, hist = m.handshake()
    epochs = [e for h in hist for e in h.get("epochs", [])]
    assert [e["epoch"] for e in epochs] == [0, 1]
    assert epochs[0]["peak"] == 2 * GIB
    assert "peak" not in epochs[1] and "peak" in epochs[1]["na"]


def test_jax_stats(companion, fake_jax):
    c = companion()
    m = Mon(c.path)
    h = m.until(lambda x: x["type"] == "hello" and x.get("framework") == "jax", 4)
    assert h["allocator"] == "bfc" and "preallocated" in h["policy"]
    s = _first(m, "sample")
    assert s["allocated"] == 700 * MIB and s["reserved"] == 2000 * MIB
    assert s["largest_free"] == 130 * MIB and s["largest_alloc"] == 64 * MIB
    assert s["limit"] == 100 * GIB
    f = _first(m, "frag")
    assert f["free_total"] == 1300 * MIB and f["largest_free"] == 130 * MIB
    assert f["hist"] is None and "JAX" in f["na"]["free_blocks"]


def test_jax_on_cpu_claims_no_pool(fake_jax):
    fake_jax.mod.local_devices = lambda: [types.SimpleNamespace(platform="cpu", id=0)]
    d = _sources.JaxSource(fake_jax.mod).describe()
    assert "preallocated" not in d["policy"] and "CPU" in d["policy"]
    assert d.get("allocator") is None and d["capabilities"] == ["epochs"]


def test_jax_sentinels_are_unknown_not_zero(fake_jax):
    fake_jax.stats["largest_free_block_bytes"] = -1
    src = _sources.JaxSource(fake_jax.mod)
    s = src.sample()[0]
    assert "largest_free" not in s


def test_tensorflow_stats_and_policy(companion, monkeypatch):
    calls = []
    tf = types.ModuleType("tensorflow")
    tf.__version__ = "2.18.0"
    exp = types.SimpleNamespace(
        get_memory_info=lambda name: calls.append(name) or {"current": 5 * MIB, "peak": 9 * MIB},
        get_memory_growth=lambda pd: False)
    tf.config = types.SimpleNamespace(
        list_physical_devices=lambda kind: ["/physical_device:GPU:0"],
        get_logical_device_configuration=lambda pd: None, experimental=exp)
    ctx = types.ModuleType("tensorflow.python.eager.context")
    ctx.context = lambda: types.SimpleNamespace(_context_handle=object())
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    monkeypatch.setitem(sys.modules, "tensorflow.python.eager.context", ctx)
    c = companion()
    m = Mon(c.path)
    h = m.until(lambda x: x["type"] == "hello" and x.get("framework") == "tensorflow", 4)
    assert h["policy"] == "TF: memory growth off — reserved the whole card"
    assert h["settings"]["tf_memory_growth"] == "false"
    s = _first(m, "sample")
    assert s["allocated"] == 5 * MIB and s["peak_allocated"] == 9 * MIB
    assert "reserved" not in s and "reserved" in s["na"]
    f = _first(m, "frag")
    assert f["hist"] is None and "TensorFlow" in f["na"]["free_blocks"]
    assert calls[0] == "GPU:0"


def test_framework_imported_later_is_picked_up(companion, monkeypatch):
    c = companion()
    m = Mon(c.path)
    h, _ = m.handshake()
    assert h["framework"] == "none"
    ft = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", ft.mod)
    h2 = m.until(lambda x: x["type"] == "hello", 4)
    assert h2["framework"] == "torch" and h2["started"] == h["started"]


def test_histogram_reduction_and_index():
    segs = [{"device": 0, "blocks": [
        {"size": 1, "state": "inactive"}, {"size": 3 * MIB, "state": "inactive"},
        {"size": 4 * MIB, "state": "inactive"}, {"size": 7, "state": "active_awaiting_free"},
        {"size": 9 * MIB, "state": "active_allocated"}]},
        {"device": 1, "blocks": [{"size": 100 * MIB, "state": "inactive"}]}]
    f = _frag.reduce_torch_snapshot(segs, 0)
    assert f["hist"] == [[0, 1, 1], [21, 1, 3 * MIB], [22, 1, 4 * MIB]]
    assert f["free_total"] == 7 * MIB + 1 and f["largest_free"] == 4 * MIB
    assert f["n_segments"] == 1 and f["largest_block"] == 9 * MIB
    assert f["free_top"] == [4 * MIB, 3 * MIB] and f["live_top"] == [9 * MIB]
    assert f["allocated"] is None and f["reserved"] is None, "no segment sizes: not guessed"
    segs[0]["total_size"] = 20 * MIB
    f = _frag.reduce_torch_snapshot(segs, 0)
    assert f["reserved"] == 20 * MIB and f["allocated"] == 9 * MIB
    assert _frag.frag_index(0, 0) == 0.0
    assert _frag.frag_index(100, None) is None
    assert abs(_frag.frag_index(500 * 18, 18) - 0.998) < 1e-9


def test_recurring_requests_are_sizes_allocated_anew():
    """A parameter stays live (one rise); a step's buffer comes and goes (a rise each
    time a snapshot sees it back): only the second is a recurring request."""
    r = _frag.Recurrence()
    param, buf = 64 * MIB, 640 * MIB
    assert r.update({param: 1, buf: 1}) == []
    assert r.update({param: 1}) == []  # the buffer was freed (epoch end)
    assert r.update({param: 1, buf: 1}) == [[buf, 2]]
    assert r.update({param: 1, buf: 2}) == [[buf, 3]]  # two live at once: a rise too
    assert r.update({param: 1}) == [[buf, 3]]


def test_uuid_normalisation():
    assert _sources.norm_uuid("abc") == "GPU-abc"
    assert _sources.norm_uuid("GPU-abc") == "GPU-abc"
    assert _sources.norm_uuid(bytes(range(16))) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert _sources.norm_uuid("") is None
