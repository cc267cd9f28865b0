"""The companion: one daemon thread that owns the socket, the history and all
framework sampling. Program threads (epoch, mark, the OOM observer) only append
to a deque and poke a pipe, so they never wait on gpumon."""

import collections
import gc
import os
import sys
import threading
import time

from . import _epochgc, _loggers, _paths, _proto, _selftime, _sources
from ._inbox import Inbox
from ._server import Server

MAX_EPOCHS = 10000
MAX_MARKERS = 1000
MAX_EVENTS = 1000
SAMPLE_RING_S = 300
DETECT_EVERY_S = 1.0
# A snapshot may use at most this share of wall time (adaptive back-off).
SNAPSHOT_DUTY = 0.002


def _gc_mode(arg, env):
    """`auto` (default): young-generation collection at each epoch end, a full one only
    when the floor it measured rose (see epoch()); `full`: gc.collect() every epoch (the
    old default, ~270 ms on a BERT-base process); `off`: none. True/False from the API
    mean auto/off; the environment's "1"/"0" likewise."""
    v = arg if arg is not None else env
    if v is None or v is True:
        return "auto"
    if v is False:
        return "off"
    v = str(v).strip().lower()
    if v in ("0", "off", "false", "no", "none"):
        return "off"
    if v in ("full", "2"):
        return "full"
    return "auto"


def _env_float(name, default):
    try:
        return float(os.environ.get(name, ""))
    except ValueError:
        return default


class Config(object):
    def __init__(self, sample_hz=None, snapshot_s=None, epoch_gc=None, detail=None, sock_dir=None):
        detail = detail or os.environ.get("GPUMON_DETAIL", "default")
        if detail == "max":
            hz, snap = 20.0, 1.0
        else:
            hz, snap = 4.0, 10.0
        self.detail = detail
        self.sample_hz = sample_hz or _env_float("GPUMON_SAMPLE_HZ", hz)
        self.snapshot_s = snapshot_s or _env_float("GPUMON_SNAPSHOT_S", snap)
        self.epoch_gc = _gc_mode(epoch_gc, os.environ.get("GPUMON_EPOCH_GC"))
        self.sock_dir = sock_dir


class Companion(object):
    def __init__(self, config=None):
        self.cfg = config or Config()
        self.started = _proto.now_ms()
        self.pid, self.ns_pid = _paths.host_pid()
        self.sources = []
        self._have = set()
        self.inbox = Inbox()
        self.epochs = collections.deque(maxlen=MAX_EPOCHS)
        self.samples = collections.deque(maxlen=SAMPLE_RING_S * 8)
        self.markers = collections.deque(maxlen=MAX_MARKERS)
        self.events = collections.deque(maxlen=MAX_EVENTS)
        self.last_frag = {}
        self._ring_t = {}
        # Per device: highest allocated sampled since the last epoch, and the
        # allocator's lifetime peak at the last epoch (to see it move).
        self._lock = threading.Lock()
        self._detect_lock = threading.Lock()
        self._epoch_max = {}
        self._floor_gate = _epochgc.FloorGate()
        # Per device: when the block map was last read at a new in-epoch high of
        # `allocated` (the largest hole at the step's peak).
        self._peak_frag_t = {}
        self._peak_frag_gap_ms = {}
        self._lifetime_at_epoch = {}
        self.epoch_n = -1
        self.epoch_start_t = self.started
        self.step = None
        self.server = None
        self.thread = None
        self._stop = threading.Event()
        self._wake_r = self._wake_w = None
        self.problem = None
        self.live = 0
        self._next_sample = 0.0
        self._next_snap = 0.0
        self._next_detect = 0.0
        self.cpu_s = 0.0
        # GPUMON_SELFTIME=1: the companion times its own GIL holds and framework calls
        # (_selftime.py); None otherwise.
        self.selftime = _selftime.from_env()
        # W&B / TensorBoard (_loggers.py): None unless asked for (GPUMON_LOG_TO, log_to()).
        # Replaced whole by set_loggers(), read once per use by the companion's thread.
        self.loggers = None
        self._loggers_env = True

    # -- lifecycle ---------------------------------------------------------

    def start(self):
        d = self.cfg.sock_dir or _paths.socket_dir()
        why = _paths.ensure_dir(d)
        if why is not None:
            self.problem = "gpumon companion disabled: %s" % why
            return False
        self.path = os.path.join(d, "%d.sock" % self.pid)
        self.server = Server(self.path, self._hello_lines)
        why = self.server.open()
        if why is not None:
            self.problem = "gpumon companion disabled: %s" % why
            self.server = None
            return False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.server.add_reader(self._wake_r)
        self.thread = threading.Thread(target=self._run, name="gpumon-companion", daemon=True)
        self.thread.start()
        return True

    def set_loggers(self, loggers):
        """What gpumon.log_to() asked for (None: log nowhere); applies from the next tick."""
        self._loggers_env = False
        old, self.loggers = self.loggers, (loggers if loggers else None)
        if old is not None:
            self._deliver(old)
            # Flushed (gpumon's own writer closed) on the companion's thread, like any write.
            self.inbox.append(("loggers_done", old))
        self._poke()

    def _deliver(self, lg, records=None):
        """W&B's rows, on the program's thread (_loggers.py says why)."""
        try:
            lg.deliver(self, records)
        except Exception:
            pass

    def stop(self, reason="stop"):
        if self.thread is None:
            return
        self.inbox.append(("bye", reason))
        self._stop.set()
        self._poke()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)
        lg = self.loggers
        if lg is not None:
            self._deliver(lg)
        self.thread = None
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except (OSError, TypeError):
                pass

    def _poke(self):
        try:
            os.write(self._wake_w, b"x")
        except (OSError, TypeError):
            pass

    # -- program-thread API (never blocks, never raises) ---------------------

    def epoch(self, n=None, step=None):
        if n is None:
            n = self.epoch_n + 1
        self.epoch_n = int(n)
        t = _proto.now_ms()
        self._add_sources()
        records = self._epoch_records(t, step)
        if not records:
            # No framework is readable (CPU-only so far, or a CUDA library gpumon cannot
            # read): still mark the epoch. The record carries no floor and no device, and
            # gpumon takes the process's NVML (or interposer) bytes at this time as the
            # floor on every GPU the process uses.
            rec = {"type": "epoch", "t": t, "epoch": self.epoch_n, "start_t": self.epoch_start_t,
                   "na": {"floor": "no framework readable at the epoch end: gpumon uses the "
                                   "process's NVML bytes"}}
            if step is not None:
                rec["steps"] = step
            records = [(rec, None)]
        self.epoch_start_t = t
        # The block map that goes with the epoch is read on the companion's thread as it
        # sends the epoch: on the program's thread it cost a BERT process 1.3-1.4 ms per
        # epoch end on the H200, most of what the mark cost. It carries its own time.
        self.inbox.append(("epoch", records))
        self._poke()
        lg = self.loggers
        if lg is not None:
            self._deliver(lg, records)

    def _collect(self, full):
        """Garbage before the floor is read. A young-generation pass frees what the last
        steps dropped (most tensors die young) in well under a millisecond; the full pass
        walks every object the program holds, which on a large model costs ~100x more."""
        mode = self.cfg.epoch_gc
        if mode == "off":
            return
        if mode == "full" or full:
            gc.collect()
        else:
            gc.collect(0)

    def _epoch_records(self, t, step):
        self._collect(full=False)
        read = self._read()
        if self.cfg.epoch_gc == "auto" and any(
                self._floor_gate.needs_full((name, s.get("dev", 0)), s.get("allocated"))
                for name, s in read):
            # The floor rose past its own noise since the last full collection: garbage in
            # older generations (reference cycles holding tensors) must not read as growth,
            # so collect fully and read it again. Rises within the noise skip the full pass
            # (it walks every object: 150-260 ms on a BERT process), and since each rise is
            # measured from the last fully collected floor, garbage that piles up slowly
            # still triggers one once it reaches the noise.
            self._collect(full=True)
            read = self._read()
            for name, s in read:
                self._floor_gate.collected((name, s.get("dev", 0)), s.get("allocated"))
        records = []
        for name, s in read:
            dev = s.get("dev", 0)
            alloc = s.get("allocated")
            self._floor_gate.seen((name, dev), alloc)
            life = s.get("peak_allocated")
            with self._lock:
                sampled = self._epoch_max.pop((name, dev), None)
                prev_life = self._lifetime_at_epoch.get((name, dev))
                self._lifetime_at_epoch[(name, dev)] = life
            peak = sampled
            if life is not None and (prev_life is None or life != prev_life):
                # The lifetime peak moved during this epoch, so it is this epoch's peak. A
                # lower one means the program reset the counter (to print its own epoch
                # peak): what it holds now is the peak since then, also this epoch's.
                peak = life if peak is None else max(peak, life)
            if alloc is not None and peak is not None:
                peak = max(peak, alloc)
            rec = {"type": "epoch", "t": t, "epoch": self.epoch_n, "dev": dev,
                   "floor": alloc, "peak": peak, "reserved": s.get("reserved"),
                   "start_t": self.epoch_start_t}
            if step is not None:
                rec["steps"] = step
            if peak is None:
                rec["na"] = {"peak": "not sampled during this epoch and the lifetime peak did not move"}
            records.append(({k: v for k, v in rec.items() if v is not None}, s))
        return records

    def _read(self):
        return [(src.name, s) for src in list(self.sources) if src.ready() for s in src.sample()]

    def mark(self, label, kind="mark", epoch=None, step=None):
        m = {"type": "marker", "t": _proto.now_ms(), "kind": kind, "label": label,
             "epoch": self.epoch_n if epoch is None and self.epoch_n >= 0 else epoch, "step": step}
        self.inbox.append(("marker", {k: v for k, v in m.items() if v is not None}))
        self._poke()
        lg = self.loggers
        if lg is not None:
            self._deliver(lg)

    def _on_oom(self, device, alloc, device_allocated, device_free):
        # Runs on the allocating thread right before PyTorch raises; the
        # allocator lock is recursive, so a snapshot here is safe.
        try:
            ev = {"type": "event", "t": _proto.now_ms(), "kind": "oom", "dev": int(device),
                  "requested": int(alloc), "limit": int(device_allocated),
                  "device_free": int(device_free)}
            for src in self.sources:
                if src.name == "torch":
                    f = src.frag(int(device))
                    if f and f.get("free_total") is not None:
                        ev["free_total"] = f["free_total"]
                        ev["largest_free"] = f.get("largest_free")
                        f["t"] = ev["t"]
                        self.inbox.append(("frag", f))
            self.inbox.append(("event", {k: v for k, v in ev.items() if v is not None}))
            self._poke()
        except Exception:
            pass

    # -- companion thread --------------------------------------------------

    def _hello(self):
        h = {"type": "hello", "role": "companion", "pid": self.pid, "ns_pid": self.ns_pid,
             "framework": "none", "settings": _sources.env_settings(), "devices": [],
             "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
             "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER"),
             "cmdline": _cmdline(), "capabilities": ["epochs"],
             "sample_hz": self.cfg.sample_hz, "snapshot_s": self.cfg.snapshot_s,
             "started": self.started}
        for k, env in (("rank", "RANK"), ("local_rank", "LOCAL_RANK"), ("world_size", "WORLD_SIZE")):
            try:
                h[k] = int(os.environ[env])
            except (KeyError, ValueError):
                pass
        prog = _program(h["cmdline"])
        if prog:
            h["program"] = prog
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if addr and port:
            h["master"] = "%s:%s" % (addr, port)
        if os.environ.get("TORCHELASTIC_RUN_ID"):
            h["run_id"] = os.environ["TORCHELASTIC_RUN_ID"]
        for src in self.sources:
            if not src.ready():
                continue
            d = src.describe()
            h["framework"] = src.name
            h["framework_version"] = src.version
            h["allocator"] = d.get("allocator")
            h["policy"] = d.get("policy")
            # Every source marks epochs; some already say so: each capability once.
            caps = list(d.get("capabilities", []))
            h["capabilities"] = caps + [c for c in ["epochs"] if c not in caps]
            h["settings"].update(d.get("settings", {}))
            if d.get("na"):
                h["na"] = d["na"]
            h["devices"] = src.devices()
            break
        # Devices a monitor can place on a card; one that starts being used later (a
        # second GPU touched after start) triggers a new hello from _sample.
        self._announced_devs = {d.get("dev") for d in h["devices"]}
        return {k: v for k, v in h.items() if v is not None}

    def _hello_lines(self):
        # What the program queued so far goes into the history first: the server answers a
        # hello as soon as it accepts the connection, possibly before this loop's drain.
        self._drain()
        lines = [_proto.encode(self._hello())]
        lines += _proto.history_parts(_proto.now_ms(), list(self.epochs), list(self.samples),
                                      list(self.markers), list(self.events),
                                      list(self.last_frag.values()))
        return [l for l in lines if l]

    def _run(self):
        t_cpu = time.thread_time()
        st = self.selftime
        if st is not None:
            st.attach(self.server)
        try:
            if self._loggers_env and self.loggers is None:
                # Read here, not on the program's thread: making a target may import.
                self.loggers = _loggers.from_env()
            while not self._stop.is_set():
                if st is not None:
                    st.begin()
                now = time.monotonic()
                due = self._next_detect
                if self.live:
                    due = min(due, self._next_sample, self._next_snap)
                lg = self.loggers
                if lg is not None:
                    due = min(due, lg.next_wake())
                self.server.poll(max(0.0, min(due - now, 1.0)))
                self._drain()
                self._tick(time.monotonic())
                self.cpu_s = time.thread_time() - t_cpu
                if st is not None:
                    st.end()
        except Exception as e:  # never into the program; say it once
            _say("gpumon companion stopped: %r" % (e,))
        finally:
            self._drain()
            lg = self.loggers
            if lg is not None:
                try:
                    lg.close(self)
                except Exception:
                    pass
            bye = _proto.encode({"type": "bye", "t": _proto.now_ms(), "reason": self._bye_reason()})
            try:
                self.server.close([bye] if bye else [])
            except Exception:
                pass
            if st is not None:
                st.write()

    def _bye_reason(self):
        return getattr(self, "_bye", "stop")

    def _tick(self, now):
        was = self.live
        self.live = self.server.live_count()
        if now >= self._next_detect:
            self._next_detect = now + DETECT_EVERY_S
            self._detect()
        lg = self.loggers
        if lg is not None and lg.due(now):
            # Asked for by the program, so it runs with no monitor connected too.
            self._log(lambda: lg.tick(self, now))
        if self.live == 0:
            return
        if was == 0:
            self._next_sample = now
            self._next_snap = now
        if now >= self._next_sample:
            self._next_sample = now + 1.0 / max(self.cfg.sample_hz, 0.01)
            self._sample()
        if now >= self._next_snap:
            cost = self._snapshot()
            # Back off so snapshots never take more than a sliver of the time.
            self._next_snap = now + max(self.cfg.snapshot_s, cost / SNAPSHOT_DUTY)

    def _add_sources(self):
        # Called from the companion thread and from epoch(): sys.modules lookups only.
        with self._detect_lock:
            for src in _sources.detect(self._have):
                self._have.add(src.name)
                if self.selftime is not None:
                    self.selftime.instrument(src)
                self.sources.append(src)

    def _detect(self):
        changed = False
        self._add_sources()
        for src in self.sources:
            if getattr(src, "_announced", False) or not src.ready():
                continue
            src._announced = True
            changed = True
            src.install_oom(self._on_oom)
        if changed and self.server.live_count():
            # What the monitors know changed (framework now in use): say hello again.
            self.server.broadcast(self._hello())

    def _sample(self):
        now_t = _proto.now_ms()
        unannounced = False
        for src in self.sources:
            if not src.ready():
                continue
            for s in src.sample():
                s["t"] = now_t
                s["epoch"] = self.epoch_n if self.epoch_n >= 0 else None
                s = {k: v for k, v in s.items() if v is not None}
                key = (src.name, s.get("dev", 0))
                alloc = s.get("allocated")
                new_high = False
                if alloc is not None:
                    with self._lock:
                        prev = self._epoch_max.get(key)
                        if prev is None or alloc > prev:
                            self._epoch_max[key] = alloc
                            new_high = prev is not None
                if new_high:
                    self._frag_at_peak(src, s.get("dev", 0), now_t)
                if now_t - self._ring_t.get(key, 0) >= 1000:
                    self._ring_t[key] = now_t
                    self.samples.append(s)
                if s.get("dev", 0) not in getattr(self, "_announced_devs", ()):
                    unannounced = True
                self.server.broadcast(s)
        if unannounced and self.server.live_count():
            self.server.broadcast(self._hello())

    def _frag_at_peak(self, src, dev, now_t):
        """The block map read while the step is near its peak: at the epoch end the big
        transient blocks are free again and merge into one large hole, so L looks fine
        exactly when the next peak will not fit. Rate-limited like the periodic snapshot."""
        gap_ms = max(1000 * self.cfg.snapshot_s / 2, self._peak_frag_gap_ms.get(dev, 0))
        if now_t - self._peak_frag_t.get(dev, 0) < gap_ms:
            return
        self._peak_frag_t[dev] = now_t
        t0 = time.perf_counter()
        f = src.frag(dev)
        # This read lands inside a step by design, so it gets half the periodic
        # snapshot's duty: a block map that takes 1 ms to read is read here at most
        # once a second, whatever the detail level asks.
        self._peak_frag_gap_ms[dev] = 1000 * (time.perf_counter() - t0) / (SNAPSHOT_DUTY / 2)
        if f is None or f.get("free_total") is None:
            return
        f["t"] = now_t
        f["source"] = "peak"
        self.server.broadcast(f)
        self.cpu_snap_s = getattr(self, "cpu_snap_s", 0.0) + time.perf_counter() - t0

    def _snapshot(self):
        t0 = time.perf_counter()
        for src in self.sources:
            if not src.ready():
                continue
            for d in src.devices():
                f = src.frag(d["dev"])
                if f is not None:
                    f["t"] = _proto.now_ms()
                    self.last_frag[d["dev"]] = f
                    self.server.broadcast(f)
        return time.perf_counter() - t0

    def _log(self, fn):
        # A logging target's failure is counted in _loggers; anything else still must not
        # stop the companion.
        try:
            fn()
        except Exception as e:
            _say("gpumon: logging failed: %r (ignored)" % (e,))

    def _drain(self):
        while True:
            try:
                kind, val = self.inbox.popleft()
            except IndexError:
                return
            lg = self.loggers
            if kind == "epoch":
                for rec, s in val:
                    self.epochs.append(rec)
                    if s is not None:
                        s = dict(s, t=rec["t"], epoch=rec["epoch"])
                        self.samples.append(s)
                        self.server.broadcast(s)
                    self.server.broadcast(rec)
                if self.live > 0:
                    self._snapshot()
                if lg is not None:
                    self._log(lambda: lg.epoch(self, val, time.monotonic()))
            elif kind == "marker":
                self.markers.append(val)
                self.server.broadcast(val)
            elif kind == "event":
                self.events.append(val)
                self.server.broadcast(val)
                if lg is not None:
                    self._log(lambda: lg.event(self, val))
            elif kind == "frag":
                self.last_frag[val.get("dev", 0)] = val
                self.server.broadcast(val)
            elif kind == "loggers_done":
                self._log(lambda: val.close(self))
            elif kind == "bye":
                self._bye = val


def _cmdline():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return " ".join(sys.argv)


def _program(cmdline):
    """A multiprocessing child's program: its own command line is the spawn or forkserver
    bootstrap, but its sys.argv is the one the parent passed it (spawn's `prepare`)."""
    boot = ("--multiprocessing-fork" in cmdline
            or "from multiprocessing.spawn import" in cmdline
            or "from multiprocessing.forkserver import" in cmdline)
    if not boot or not sys.argv or not sys.argv[0] or sys.argv[0] == "-c":
        return None
    return " ".join([sys.executable or "python"] + [str(a) for a in sys.argv])


_said = set()


def _say(text):
    if text in _said:
        return
    _said.add(text)
    try:
        sys.stderr.write(text + "\n")
    except Exception:
        pass
