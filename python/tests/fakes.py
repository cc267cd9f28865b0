"""Fake frameworks for tests: just enough of torch and jax for the companion."""

import types

MIB = 1 << 20
GIB = 1 << 30


# -- fake frameworks -----------------------------------------------------------

class FakeTorch(object):
    """Just enough of torch for the companion: stats, snapshot, OOM observer."""

    def __init__(self, backend="native", uuid="58f4a8b1-0000-1111-2222-333344445555"):
        self.calls = 0
        self.initialized = True
        self.alloc = 1 * GIB
        self.reserved = 10 * GIB
        self.peak = 2 * GIB
        self.observer = None
        self.backend = backend
        self.snapshot_kwargs = None
        mod = types.ModuleType("torch")
        mod.__version__ = "2.11.0+fake"
        cuda = types.SimpleNamespace()
        ctl = self

        def is_initialized():
            return ctl.initialized

        def stats(i):
            ctl.calls += 1
            def pool(cur, peak):
                return {"all": {"current": cur, "peak": peak, "allocated": 0, "freed": 0}}
            return {
                "allocated_bytes": pool(ctl.alloc, ctl.peak),
                "reserved_bytes": pool(ctl.reserved, ctl.reserved),
                "active_bytes": pool(ctl.alloc, ctl.peak),
                "requested_bytes": pool(ctl.alloc - 100, ctl.peak),
                "num_alloc_retries": 1, "num_ooms": 0,
            }

        def snapshot(include_traces=True):
            ctl.calls += 1
            ctl.snapshot_kwargs = include_traces
            # Scenario B of the research note: 500 free 18 MiB holes between live blocks.
            blocks = []
            for _ in range(500):
                blocks.append({"size": 2 * MIB, "state": "active_allocated"})
                blocks.append({"size": 18 * MIB, "state": "inactive"})
            return [{"device": 0, "total_size": 10 * GIB, "blocks": blocks},
                    {"device": 1, "blocks": [{"size": 4 * MIB, "state": "inactive"}]}]

        cuda.is_initialized = is_initialized
        cuda.device_count = lambda: 1
        cuda.current_device = lambda: 0
        cuda.get_allocator_backend = lambda: ctl.backend
        cuda.get_per_process_memory_fraction = lambda i: 0.5
        cuda.memory_snapshot = snapshot
        cuda.get_device_properties = lambda i: types.SimpleNamespace(
            name="NVIDIA H200", total_memory=140 * GIB, uuid=uuid,
            pci_bus_id=0x65, pci_device_id=0, pci_domain_id=0)
        mod.cuda = cuda

        def attach(cb):
            ctl.observer = cb
        mod._C = types.SimpleNamespace(_cuda_memoryStats=stats,
                                       _cuda_attach_out_of_memory_observer=attach)
        self.mod = mod


class FakeJaxDevice(object):
    platform = "gpu"
    device_kind = "NVIDIA H200"

    def __init__(self, i, stats):
        self.id = i
        self.local_hardware_id = i
        self._stats = stats

    def memory_stats(self):
        return dict(self._stats)


class FakeJax(object):
    def __init__(self):
        self.stats = {"bytes_in_use": 700 * MIB, "peak_bytes_in_use": 900 * MIB,
                      "pool_bytes": 2000 * MIB, "peak_pool_bytes": 2000 * MIB,
                      "bytes_limit": 100 * GIB, "largest_free_block_bytes": 130 * MIB,
                      "largest_alloc_size": 64 * MIB, "bytes_reserved": -1}
        mod = types.ModuleType("jax")
        mod.__version__ = "0.11.2"
        ctl = self
        mod.local_devices = lambda: [FakeJaxDevice(0, ctl.stats)]
        xb = types.ModuleType("jax._src.xla_bridge")
        xb.backends_are_initialized = lambda: True
        self.mod = mod
        self.xb = xb
