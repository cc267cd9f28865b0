"""Per-framework readers. Each one only touches a framework the program has
already imported and initialised: gpumon never imports a framework, never
creates a CUDA context, and never resets the allocator's peaks."""

import os
import sys
import time
import threading

from . import _frag

ENV_SETTINGS = (
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR",
    "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
)


def alloc_conf():
    """The allocator setting PyTorch reads: PYTORCH_ALLOC_CONF when set, else the deprecated
    PYTORCH_CUDA_ALLOC_CONF (c10/core/AllocatorConfig.cpp)."""
    return os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))


def env_settings():
    return {k: os.environ[k] for k in ENV_SETTINGS if k in os.environ}


def norm_uuid(u):
    """`GPU-…` as NVML spells it, from a string, bytes, or a CUDA uuid object."""
    if u is None:
        return None
    if isinstance(u, (bytes, bytearray)) and len(u) == 16:
        h = bytes(u).hex()
        s = "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
    else:
        s = str(u).strip()
    if not s:
        return None
    if s.upper().startswith(("GPU-", "MIG-")):
        return s
    return "GPU-" + s


def uuid_from_visible(ordinal):
    """Best effort for frameworks that do not name their cards: a UUID token of
    CUDA_VISIBLE_DEVICES, or (only in PCI order, where it is certain) pynvml."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    token = None
    if cvd is not None:
        toks = [t.strip() for t in cvd.split(",")]
        if ordinal < len(toks):
            token = toks[ordinal]
    else:
        token = str(ordinal)
    if token is None or token == "":
        return None, None
    if token.upper().startswith(("GPU-", "MIG-")):
        return token, None
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" or "pynvml" not in sys.modules:
        return None, None
    try:
        import pynvml  # already imported by the program, so no new cost
        h = pynvml.nvmlDeviceGetHandleByIndex(int(token))
        u = pynvml.nvmlDeviceGetUUID(h)
        pci = pynvml.nvmlDeviceGetPciInfo(h).busId
        u = u.decode() if isinstance(u, bytes) else u
        pci = pci.decode() if isinstance(pci, bytes) else pci
        return u, pci
    except Exception:
        return None, None


def _nz(x):
    """A stat the framework could not fill (-1, None) is unknown, not zero."""
    if x is None:
        return None
    try:
        x = int(x)
    except (TypeError, ValueError):
        return None
    return x if x >= 0 else None


class Source(object):
    name = "none"
    version = None

    def ready(self):
        return False

    def describe(self):
        return {}

    def devices(self):
        return []

    def sample(self):
        """List of sample dicts, one per device in use."""
        return []

    def frag(self, dev):
        """A frag dict (may carry hist None with na), or None."""
        return None

    def install_oom(self, cb):
        return False


# -- PyTorch -----------------------------------------------------------------

def _live_policy(segs):
    """"expandable_segments" or "native" from the segments of a memory_snapshot (each says
    `is_expandable`), None when there are none to tell."""
    flags = [s.get("is_expandable") for s in segs or () if isinstance(s, dict)]
    flags = [f for f in flags if f is not None]
    if not flags:
        return None
    return "expandable_segments" if any(flags) else "native"


class TorchSource(Source):
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.version = getattr(torch, "__version__", None)
        self._stats = getattr(getattr(torch, "_C", None), "_cuda_memoryStats", None)
        if self._stats is None:
            self._stats = getattr(torch.cuda, "memory_stats_as_nested_dict", None)
        self._props = {}
        self._snap_kw = None  # None: not probed; {} plain; {"include_traces": False}
        self.snapshot_na = None
        self.oom_installed = False
        # Per device: the large requests seen made again and again: whether
        # they still fit a free block is the fragmentation risk.
        # Snapshots come from the program's thread (epoch ends) and the companion's.
        self._recurrence = {}
        self._rec_lock = threading.Lock()

    def ready(self):
        try:
            return bool(self.torch.cuda.is_initialized())
        except Exception:
            return False

    def backend(self):
        try:
            return self.torch.cuda.get_allocator_backend()
        except Exception:
            conf = alloc_conf()
            return "cudaMallocAsync" if "cudaMallocAsync" in conf else "native"

    def allocator(self):
        # Fixed once CUDA is up (the backend cannot change after the first allocation).
        if getattr(self, "_alloc", None) is None:
            a = self._allocator()
            if not self.ready():
                return a
            self._alloc = a
        return self._alloc

    def _allocator(self):
        b = self.backend()
        if b == "cudaMallocAsync":
            return b
        conf = alloc_conf()
        if "expandable_segments:true" in conf.replace(" ", "").lower():
            return "expandable_segments"
        return "native"

    def describe(self):
        alloc = self.allocator()
        conf = alloc_conf()
        if alloc == "cudaMallocAsync":
            policy = "PyTorch: cudaMallocAsync — the driver's pool, no block map"
        elif alloc == "expandable_segments":
            policy = "PyTorch: expandable_segments"
        else:
            policy = "PyTorch caching allocator (%s)" % (conf or "native")
        caps = ["stats", "peaks", "oom_events", "epochs"]
        na = {}
        if alloc == "cudaMallocAsync":
            na["free_blocks"] = "cudaMallocAsync backend keeps no block map"
        else:
            caps += ["free_blocks", "largest_free"]
        return {"allocator": alloc, "policy": policy, "capabilities": caps, "na": na}

    def _n(self):
        try:
            return int(self.torch.cuda.device_count())
        except Exception:
            return 0

    def _used_devices(self):
        out = []
        for i in range(self._n()):
            try:
                st = self._stats(i)
                if st["reserved_bytes"]["all"]["peak"] > 0 or i == self.torch.cuda.current_device():
                    out.append((i, st))
            except Exception:
                continue
        return out

    def devices(self):
        return [self._info(i) for i, _st in self._used_devices()]

    def _info(self, i):
        info = self._props.get(i)
        if info is not None:
            return info
        info = {"dev": i}
        try:
            p = self.torch.cuda.get_device_properties(i)
            info["name"] = getattr(p, "name", None)
            info["total"] = getattr(p, "total_memory", None)
            info["uuid"] = norm_uuid(getattr(p, "uuid", None))
            bus = getattr(p, "pci_bus_id", None)
            if bus is not None:
                info["pci_bus_id"] = "%08X:%02X:%02X.0" % (
                    getattr(p, "pci_domain_id", 0) or 0, bus, getattr(p, "pci_device_id", 0) or 0)
        except Exception:
            pass
        if not info.get("uuid"):
            u, pci = uuid_from_visible(i)
            info["uuid"] = u
            if pci and not info.get("pci_bus_id"):
                info["pci_bus_id"] = pci
        info = {k: v for k, v in info.items() if v is not None}
        self._props[i] = info
        return info

    def _limit(self, dev):
        info = self._props.get(dev) or {}
        total = info.get("total")
        frac = None
        f = getattr(self.torch.cuda, "get_per_process_memory_fraction", None)
        if f is not None:
            try:
                frac = float(f(dev))
            except Exception:
                frac = None
        if total is None:
            return None
        return int(total * (frac if frac is not None else 1.0))

    def sample(self):
        out = []
        masync = self.allocator() == "cudaMallocAsync"
        for i, st in self._used_devices():
            t0 = time.perf_counter()
            try:
                a = st["allocated_bytes"]["all"]
                r = st["reserved_bytes"]["all"]
                s = {
                    "type": "sample", "dev": i,
                    "allocated": a["current"], "reserved": r["current"],
                    "peak_allocated": a["peak"], "peak_reserved": r["peak"],
                    "num_alloc_retries": st.get("num_alloc_retries"),
                    "num_ooms": st.get("num_ooms"),
                }
                if masync:
                    s["na"] = {"active": "cudaMallocAsync backend does not track it",
                               "requested": "cudaMallocAsync backend does not track it"}
                else:
                    s["active"] = st["active_bytes"]["all"]["current"]
                    # Free pieces of split segments: empty_cache() cannot return them,
                    # and their growth across epochs is a fragmentation signal.
                    isb = st.get("inactive_split_bytes")
                    if isb:
                        s["inactive_split"] = isb["all"]["current"]
                    req = st.get("requested_bytes")
                    if req:
                        s["requested"] = req["all"]["current"]
            except Exception:
                continue
            self._info(i)
            s["limit"] = self._limit(i)
            s["cost_us"] = int((time.perf_counter() - t0) * 1e6)
            out.append({k: v for k, v in s.items() if v is not None})
        return out

    def _snapshot(self):
        ms = self.torch.cuda.memory_snapshot
        if self._snap_kw is None:
            try:
                segs = ms(include_traces=False)
                self._snap_kw = {"include_traces": False}
                return segs
            except TypeError:
                self._snap_kw = {}
        return ms(**self._snap_kw)

    def frag(self, dev):
        if self.allocator() == "cudaMallocAsync":
            return {"type": "frag", "dev": dev, "hist": None,
                    "na": {"free_blocks": "cudaMallocAsync backend keeps no block map"}}
        t0 = time.perf_counter()
        try:
            segs = self._snapshot()
        except Exception as e:
            self.snapshot_na = "memory_snapshot failed: %s" % (type(e).__name__,)
            return {"type": "frag", "dev": dev, "hist": None, "na": {"free_blocks": self.snapshot_na}}
        # Live truth over the environment (also after `_set_allocator_settings` at run time).
        self._alloc = _live_policy(segs) or getattr(self, "_alloc", None)
        f = _frag.reduce_torch_snapshot(segs, dev)
        with self._rec_lock:
            rec = self._recurrence.setdefault(dev, _frag.Recurrence())
            f["requests"] = rec.update(f.pop("_live_counts"))
        f["type"] = "frag"
        f["cost_us"] = int((time.perf_counter() - t0) * 1e6)
        return {k: v for k, v in f.items() if v is not None}

    def snapshot_has_traces(self):
        """True when snapshots may also copy history traces (slow)."""
        return self._snap_kw == {}

    def install_oom(self, cb):
        if self.oom_installed:
            return True
        attach = getattr(getattr(self.torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            return False
        try:
            attach(cb)
        except Exception:
            return False
        self.oom_installed = True
        return True


# -- JAX ---------------------------------------------------------------------

class JaxSource(Source):
    name = "jax"

    def __init__(self, jax):
        self.jax = jax
        self.version = getattr(jax, "__version__", None)
        self._devs = None

    def ready(self):
        # Asking for devices would initialise the backends (and preallocate 75 %
        # of the card); wait until the program has done that itself.
        try:
            xb = sys.modules.get("jax._src.xla_bridge")
            if xb is None:
                return False
            f = getattr(xb, "backends_are_initialized", None)
            if f is not None:
                return bool(f())
            return bool(getattr(xb, "_backends", None))
        except Exception:
            return False

    def _gpu_devices(self):
        if self._devs is None:
            try:
                self._devs = [d for d in self.jax.local_devices()
                              if getattr(d, "platform", "") in ("gpu", "cuda", "rocm")]
            except Exception:
                self._devs = []
        return self._devs

    def describe(self):
        if not self._gpu_devices():
            # JAX on the CPU: no GPU pool, nothing preallocated, no allocator statistics.
            return {"policy": "JAX on CPU: no GPU device", "capabilities": ["epochs"]}
        alloc_env = os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "")
        prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower()
        frac = os.environ.get("XLA_CLIENT_MEM_FRACTION") or os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
        if alloc_env == "platform":
            alloc, policy = "platform", "JAX: platform allocator — exact, no pool"
        elif prealloc in ("false", "0"):
            alloc, policy = "bfc", "JAX: BFC pool, allocated on demand"
        else:
            alloc = "bfc"
            policy = "JAX: BFC pool, preallocated %s of the card" % (frac or "75%")
        return {"allocator": alloc, "policy": policy,
                "capabilities": ["stats", "peaks", "largest_free", "epochs"],
                "na": {"free_blocks": "JAX exposes no free-block list (T and L only)"}}

    def devices(self):
        out = []
        for d in self._gpu_devices():
            ordinal = getattr(d, "local_hardware_id", None)
            if ordinal is None:
                ordinal = getattr(d, "id", 0)
            info = {"dev": int(getattr(d, "id", 0)), "name": getattr(d, "device_kind", None)}
            u, pci = uuid_from_visible(int(ordinal))
            if u:
                info["uuid"] = u
            if pci:
                info["pci_bus_id"] = pci
            out.append({k: v for k, v in info.items() if v is not None})
        return out

    def _stats(self):
        for d in self._gpu_devices():
            t0 = time.perf_counter()
            try:
                st = d.memory_stats()
            except Exception:
                st = None
            if st:
                yield int(getattr(d, "id", 0)), st, int((time.perf_counter() - t0) * 1e6)

    def sample(self):
        out = []
        for dev, st, cost in self._stats():
            s = {
                "type": "sample", "dev": dev,
                "allocated": _nz(st.get("bytes_in_use")),
                "reserved": _nz(st.get("pool_bytes", st.get("bytes_reserved"))),
                "peak_allocated": _nz(st.get("peak_bytes_in_use")),
                "peak_reserved": _nz(st.get("peak_pool_bytes", st.get("peak_bytes_reserved"))),
                "limit": _nz(st.get("bytes_limit")),
                "largest_free": _nz(st.get("largest_free_block_bytes")),
                "largest_alloc": _nz(st.get("largest_alloc_size")),
                "cost_us": cost,
            }
            out.append({k: v for k, v in s.items() if v is not None})
        return out

    def frag(self, dev):
        for d, st, cost in self._stats():
            if d != dev:
                continue
            pool = _nz(st.get("pool_bytes"))
            used = _nz(st.get("bytes_in_use"))
            f = {"type": "frag", "dev": dev, "source": "stats", "hist": None, "cost_us": cost,
                 "na": {"free_blocks": "JAX exposes no free-block list (T and L only)"}}
            if pool is not None and used is not None:
                f["free_total"] = max(0, pool - used)
            lf = _nz(st.get("largest_free_block_bytes"))
            if lf is not None:
                f["largest_free"] = lf
            la = _nz(st.get("largest_alloc_size"))
            if la is not None:
                f["largest_block"] = la
            return f
        return None


# -- TensorFlow --------------------------------------------------------------

class TfSource(Source):
    name = "tensorflow"

    def __init__(self, tf):
        self.tf = tf
        self.version = getattr(tf, "__version__", None)
        self._gpus = None

    def ready(self):
        try:
            ctx_mod = sys.modules.get("tensorflow.python.eager.context")
            if ctx_mod is None:
                return False
            ctx = ctx_mod.context()
            return getattr(ctx, "_context_handle", None) is not None
        except Exception:
            return False

    def _physical(self):
        if self._gpus is None:
            try:
                self._gpus = list(self.tf.config.list_physical_devices("GPU"))
            except Exception:
                self._gpus = []
        return self._gpus

    def _growth(self):
        vals = []
        for pd in self._physical():
            try:
                vals.append(bool(self.tf.config.experimental.get_memory_growth(pd)))
            except Exception:
                pass
        if os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH", "").lower() == "true":
            return True
        return all(vals) if vals else None

    def _limit(self, i):
        try:
            cfg = self.tf.config.get_logical_device_configuration(self._physical()[i])
            if cfg and getattr(cfg[0], "memory_limit", None):
                return int(cfg[0].memory_limit) * 1024 * 1024
        except Exception:
            pass
        return None

    def describe(self):
        growth = self._growth()
        alloc = "cuda_malloc_async" if os.environ.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async" else "bfc"
        limits = [self._limit(i) for i in range(len(self._physical()))]
        if alloc == "cuda_malloc_async":
            policy = "TF: cuda_malloc_async — the driver's pool"
        elif any(limits):
            policy = "TF: memory limit %d MiB per GPU" % (max(x for x in limits if x) >> 20)
        elif growth:
            policy = "TF: memory growth on — grows on demand"
        elif growth is False:
            policy = "TF: memory growth off — reserved the whole card"
        else:
            policy = "TF: BFC allocator"
        settings = {}
        if growth is not None:
            settings["tf_memory_growth"] = "true" if growth else "false"
        return {"allocator": alloc, "policy": policy, "settings": settings,
                "capabilities": ["stats", "peaks", "epochs"],
                "na": {"free_blocks": "TensorFlow exposes no free-block list",
                       "reserved": "TensorFlow reports only bytes in use"}}

    def devices(self):
        out = []
        for i, _pd in enumerate(self._physical()):
            info = {"dev": i}
            u, pci = uuid_from_visible(i)
            if u:
                info["uuid"] = u
            if pci:
                info["pci_bus_id"] = pci
            out.append(info)
        return out

    def sample(self):
        out = []
        for i in range(len(self._physical())):
            t0 = time.perf_counter()
            try:
                mi = self.tf.config.experimental.get_memory_info("GPU:%d" % i)
            except Exception:
                continue
            s = {"type": "sample", "dev": i, "allocated": _nz(mi.get("current")),
                 "peak_allocated": _nz(mi.get("peak")), "limit": self._limit(i),
                 "na": {"reserved": "TensorFlow reports only bytes in use"},
                 "cost_us": int((time.perf_counter() - t0) * 1e6)}
            out.append({k: v for k, v in s.items() if v is not None})
        return out

    def frag(self, dev):
        return {"type": "frag", "dev": dev, "hist": None,
                "na": {"free_blocks": "TensorFlow exposes no free-block list"}}


def detect(have):
    """New sources for frameworks the program has imported since the last call.
    `have` is the set of names already handled."""
    out = []
    mods = sys.modules
    torch = mods.get("torch")
    if "torch" not in have and torch is not None and getattr(torch, "cuda", None) is not None:
        out.append(TorchSource(torch))
    jax = mods.get("jax")
    if "jax" not in have and jax is not None and hasattr(jax, "local_devices"):
        out.append(JaxSource(jax))
    tf = mods.get("tensorflow")
    if "tensorflow" not in have and tf is not None and hasattr(tf, "config"):
        out.append(TfSource(tf))
    return out
