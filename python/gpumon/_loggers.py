"""gpumon's allocator series in the places a team already reads its loss curves: Weights &
Biases and TensorBoard. Opt-in (`gpumon.log_to`, or GPUMON_LOG_TO), and through what the
program already has: the active `wandb.run`, a SummaryWriter it passes, or one gpumon makes
with the SummaryWriter class the program imports (torch.utils.tensorboard, else tensorboardX).
Nothing is imported unless asked for. TensorBoard is written by the companion's thread (a
SummaryWriter queues events under its own lock) at epoch ends, at OOMs and every `every_s`
seconds, never per allocation. W&B's `log` is not thread-safe (concurrent calls lose rows),
so W&B is written only on the program's own thread, where the program itself logs: at
`gpumon.epoch()` and `gpumon.mark()` (the callbacks call them) and at stop; what the
companion's thread found in between waits there, the latest value of each series. A target
that fails three times in a row is dropped with one line on stderr.

gpumon's alerts are raised by the monitor, which sends nothing back to the companion; a
monitor started with `--alerts-jsonl FILE` writes them to FILE, and given the same FILE
(`alerts_jsonl=`, GPUMON_ALERTS_JSONL) the companion follows it and logs this process's
alerts too.
"""

import json
import os
import sys
import threading
import time

from . import _frag

# Seconds between two logged points of the series when nothing else is said.
EVERY_S = 30.0
# How often the alerts file is looked at: one stat() when it has not grown.
ALERT_POLL_S = 5.0
# Bytes of the alerts file read per look (a monitor writes a few hundred per alert change).
ALERT_READ_MAX = 1 << 20
# A block map read for the logs may take at most this share of wall time (the companion's
# own snapshots keep to the same bound): one that took 50 ms is read again after 25 s.
FRAG_DUTY = 0.002
FAILURES_BEFORE_DROP = 3
SEVERITY = {"info": 1, "warning": 2, "critical": 3}

PREFIX = "gpumon/"


def _say(text):
    from ._companion import _say as say
    say(text)


def parse_targets(spec):
    """GPUMON_LOG_TO's text: `wandb`, `tensorboard` or `tensorboard=DIR`, comma-separated."""
    out = []
    for part in (spec or "").split(","):
        part = part.strip()
        if part:
            out.append(part)
    return out


def _env_float(name, default):
    try:
        return float(os.environ.get(name, ""))
    except ValueError:
        return default


def from_env():
    """The loggers GPUMON_LOG_TO asks for, or None."""
    targets = parse_targets(os.environ.get("GPUMON_LOG_TO"))
    if not targets:
        return None
    return Loggers(targets, every_s=_env_float("GPUMON_LOG_EVERY_S", EVERY_S),
                   alerts_jsonl=os.environ.get("GPUMON_ALERTS_JSONL") or None)


# -- targets ---------------------------------------------------------------------


class _Target(object):
    name = "target"
    # Written only on the program's thread (deliver()); the companion's thread stashes.
    deferred = False

    def __init__(self):
        self.failures = 0

    def scalars(self, values, step, walltime):
        raise NotImplementedError

    def text(self, key, text, step, walltime):
        raise NotImplementedError

    def flush(self):
        pass

    def close(self):
        self.flush()


class WandbTarget(_Target):
    """A W&B run: the one passed, or the active `wandb.run` of the moment (None until the
    program calls wandb.init, and again after wandb.finish: then nothing is logged).

    Rows are logged with commit=False: they join the row of the program's next
    `wandb.log` instead of taking a step of their own, so the program's own step numbers
    (`wandb.log(..., step=global_step)`) never fall behind W&B's and get dropped, and the
    memory series share the loss curve's x-axis. Between two of the program's rows the
    latest value of each series is kept."""

    name = "wandb"
    deferred = True

    def __init__(self, run=None):
        super(WandbTarget, self).__init__()
        self._run = run
        self._lock = threading.Lock()
        self._values = {}
        self._texts = {}

    def run(self):
        if self._run is not None:
            return self._run
        wandb = sys.modules.get("wandb")
        return getattr(wandb, "run", None) if wandb is not None else None

    def scalars(self, values, step, walltime):
        with self._lock:
            self._values.update(values)

    def text(self, key, text, step, walltime):
        with self._lock:
            self._texts[key] = text

    def pending(self):
        return bool(self._values or self._texts)

    def deliver(self):
        """On the program's thread: what waits, as one row joined to the program's next."""
        run = self.run()
        if run is None or not self.pending():
            return
        with self._lock:
            values, self._values = self._values, {}
            texts, self._texts = self._texts, {}
        try:
            if values:
                run.log(values, commit=False)
            # Text in a history row is a table cell, not a chart: the run's summary shows
            # the latest one beside the run.
            for k, v in texts.items():
                run.summary[k] = v
        except Exception:
            with self._lock:
                self._values = dict(values, **self._values)
                self._texts = dict(texts, **self._texts)
            raise


class TensorBoardTarget(_Target):
    """A SummaryWriter (torch.utils.tensorboard's or tensorboardX's: the same methods): the
    program's own, or one gpumon opens in `logdir` with the class the program imports."""

    name = "tensorboard"

    def __init__(self, writer=None, logdir=None):
        super(TensorBoardTarget, self).__init__()
        self.writer = writer
        self.own = writer is None
        self.logdir = logdir
        self._made = False

    def _writer(self):
        if self.writer is None and not self._made:
            self._made = True
            cls = writer_class()
            if cls is None:
                _say("gpumon: GPUMON_LOG_TO names tensorboard, but neither "
                     "torch.utils.tensorboard nor tensorboardX can be imported: not logged")
                raise RuntimeError("no SummaryWriter")
            self.writer = cls(log_dir=self.logdir)
        if self.writer is None:
            raise RuntimeError("no SummaryWriter")
        return self.writer

    def scalars(self, values, step, walltime):
        w = self._writer()
        for k, v in values.items():
            w.add_scalar(k, v, global_step=step, walltime=walltime)

    def text(self, key, text, step, walltime):
        self._writer().add_text(key, text, global_step=step, walltime=walltime)

    def flush(self):
        if self.writer is not None:
            self.writer.flush()

    def close(self):
        if self.writer is None:
            return
        # The program's writer is the program's to close; gpumon's own is closed here.
        if self.own:
            self.writer.close()
        else:
            self.writer.flush()


def writer_class():
    """The SummaryWriter the program already uses; else one that imports (torch's only in
    a program that imported torch: it needs the tensorboard package besides)."""
    for name in ("torch.utils.tensorboard", "tensorboardX"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "SummaryWriter"):
            return mod.SummaryWriter
    names = ["tensorboardX"]
    if "torch" in sys.modules:
        names.insert(0, "torch.utils.tensorboard")
    for name in names:
        try:
            return __import__(name, fromlist=["SummaryWriter"]).SummaryWriter
        except Exception:
            continue
    return None


def _default_logdir():
    # Ranks of one job would interleave in one directory: each gets its own.
    base = os.path.join("runs", "gpumon")
    rank = os.environ.get("RANK")
    return os.path.join(base, "rank" + rank) if rank and rank.isdigit() else base


def make_target(t):
    """A target from what `gpumon.log_to` was given, or None (with the reason said once)."""
    if isinstance(t, _Target):
        return t
    if isinstance(t, str):
        kind, _, arg = t.partition("=")
        kind = kind.strip().lower()
        if kind in ("wandb", "w&b"):
            return WandbTarget()
        if kind in ("tensorboard", "tb"):
            return TensorBoardTarget(logdir=arg.strip() or _default_logdir())
        _say("gpumon: log_to: unknown target %r (wandb, tensorboard, tensorboard=DIR)" % t)
        return None
    if hasattr(t, "add_scalar"):
        return TensorBoardTarget(writer=t)
    if hasattr(t, "log") and hasattr(t, "summary"):
        return WandbTarget(run=t)
    if getattr(t, "__name__", None) == "wandb":
        return WandbTarget()
    _say("gpumon: log_to: %r is neither a SummaryWriter nor a W&B run" % (t,))
    return None


# -- what is logged ---------------------------------------------------------------


class Loggers(object):
    """The targets and what they are sent. Only the companion's thread calls in, except
    the constructor."""

    def __init__(self, targets, every_s=None, alerts_jsonl=None):
        self.targets = [x for x in (make_target(t) for t in targets) if x is not None]
        every = EVERY_S if every_s is None else float(every_s)
        self.every_s = max(1.0, every)
        self.next_due = 0.0
        self.started = time.time()
        self.ooms = 0
        self._frag_next = {}
        self._last_frag = {}
        self.alerts = AlertsFile(alerts_jsonl) if alerts_jsonl else None
        self._alert_level = {}
        self._next_alert_poll = 0.0

    def __bool__(self):
        return bool(self.targets)

    __nonzero__ = __bool__

    def _step(self, t_ms):
        return max(0, int(t_ms / 1000.0 - self.started))

    def _send(self, fn, targets=None):
        for tg in list(self.targets if targets is None else targets):
            try:
                fn(tg)
                tg.failures = 0
            except Exception as e:
                tg.failures += 1
                if tg.failures >= FAILURES_BEFORE_DROP and tg in self.targets:
                    self.targets.remove(tg)
                    _say("gpumon: logging to %s stopped after %d failures: %r"
                         % (tg.name, tg.failures, e))

    def deliver(self, comp=None, records=None):
        """On the program's thread (epoch, mark, stop): W&B gets what waits, and with
        `records` (an epoch end) that epoch's floor, peak and series, read from what the
        program's thread just measured and the latest block map (none is read here)."""
        deferred = [tg for tg in self.targets if tg.deferred]
        if not deferred:
            return
        if records and comp is not None:
            epoch_values, series, _t, _e = self._epoch_values(comp, records, None)
            epoch_values.update(series)
            if epoch_values:
                for tg in deferred:
                    tg.scalars(epoch_values, None, None)
        self._send(lambda tg: tg.deliver(), deferred)

    def _scalars(self, values, step, t_ms):
        if values:
            self._send(lambda tg: tg.scalars(values, step, t_ms / 1000.0))

    def _text(self, key, text, step, t_ms):
        self._send(lambda tg: tg.text(key, text, step, t_ms / 1000.0))

    # -- the companion's hooks --------------------------------------------------

    def next_wake(self):
        if self.alerts is None:
            return self.next_due
        return min(self.next_due, self._next_alert_poll)

    def due(self, now):
        return now >= self.next_wake()

    def tick(self, comp, now):
        """Every `every_s`: the series of every device the companion reads."""
        if now >= self.next_due:
            self.next_due = now + self.every_s
            t = int(time.time() * 1000)
            values = {}
            for name, s in comp._read():
                self._series(values, comp, name, s, now)
            self._scalars(values, self._step(t), t)
        if self.alerts is not None and now >= self._next_alert_poll:
            self._next_alert_poll = now + min(ALERT_POLL_S, self.every_s)
            self.poll_alerts(comp)

    def epoch(self, comp, records, now):
        """An epoch end, on the companion's thread: its floor and peak per device (step:
        the epoch), and the series read at the same moment. W&B had them from deliver()."""
        values, series, t, epoch = self._epoch_values(comp, records, now)
        direct = [tg for tg in self.targets if not tg.deferred]
        if t is None or not direct:
            return
        if values and epoch is not None:
            self._send(lambda tg: tg.scalars(values, int(epoch), t / 1000.0), direct)
        if series:
            self._send(lambda tg: tg.scalars(series, self._step(t), t / 1000.0), direct)

    def _epoch_values(self, comp, records, now):
        """`now` None: no block map may be read (the program's thread)."""
        values = {}
        series = {}
        t = None
        epoch = None
        for rec, s in records:
            t = rec.get("t", t)
            epoch = rec.get("epoch", epoch)
            dev = rec.get("dev")
            if dev is None:
                continue
            p = "%sdev%d/" % (PREFIX, dev)
            for key, field in (("epoch_floor_bytes", "floor"), ("epoch_peak_bytes", "peak")):
                if rec.get(field) is not None:
                    values[p + key] = rec[field]
            if s is not None:
                self._series(series, comp, None, dict(s, dev=dev), now)
        return values, series, t, epoch

    def event(self, comp, ev):
        """An OOM the allocator reported, with the holes it had."""
        if ev.get("kind") != "oom":
            return
        self.ooms += 1
        t = ev.get("t") or int(time.time() * 1000)
        step = self._step(t)
        self._scalars({PREFIX + "ooms": self.ooms}, step, t)
        words = "OOM on dev %s: %s requested" % (ev.get("dev"), _bytes(ev.get("requested")))
        if ev.get("free_total") is not None:
            words += ", %s free in the pool, largest free block %s" % (
                _bytes(ev.get("free_total")), _bytes(ev.get("largest_free")))
        if ev.get("device_free") is not None:
            words += ", %s free on the device" % _bytes(ev.get("device_free"))
        self._text(PREFIX + "oom", words, step, t)

    def close(self, comp=None):
        if comp is not None and self.alerts is not None:
            self.poll_alerts(comp)
        self._send(lambda tg: tg.close())

    # -- pieces -----------------------------------------------------------------

    def _series(self, values, comp, src_name, s, now):
        dev = s.get("dev", 0)
        p = "%sdev%d/" % (PREFIX, dev)
        alloc, resv = s.get("allocated"), s.get("reserved")
        if alloc is not None:
            values[p + "allocated_bytes"] = alloc
        if resv is not None:
            values[p + "reserved_bytes"] = resv
        f = self._frag(comp, src_name, dev, now)
        free_total = f.get("free_total") if f else None
        largest = f.get("largest_free") if f else s.get("largest_free")
        if free_total is None and alloc is not None and resv is not None:
            free_total = max(0, resv - alloc)
        if free_total is not None:
            values[p + "pool_free_bytes"] = free_total
        if largest is not None:
            values[p + "largest_free_bytes"] = largest
        fi = _frag.frag_index(free_total, largest)
        if fi is not None:
            values[p + "fragmentation"] = fi

    def _frag(self, comp, src_name, dev, now):
        """The block map: the companion's latest when it is recent, else read now if the
        duty bound allows, else the latest whatever its age. `now` None: never read."""
        last = max((f for f in (comp.last_frag.get(dev), self._last_frag.get(dev)) if f),
                   key=lambda f: f.get("t", 0), default=None)
        if now is None:
            return last
        fresh_ms = 1000 * self.every_s
        if last is not None and int(time.time() * 1000) - last.get("t", 0) <= fresh_ms:
            return last
        if now < self._frag_next.get(dev, 0.0):
            return last
        src = next((x for x in comp.sources
                    if x.ready() and src_name in (None, x.name)), None)
        if src is None:
            return last
        t0 = time.perf_counter()
        try:
            f = src.frag(dev)
        except Exception:
            f = None
        cost = time.perf_counter() - t0
        self._frag_next[dev] = now + max(self.every_s, cost / FRAG_DUTY)
        if f is None or f.get("free_total") is None:
            return last
        f["t"] = int(time.time() * 1000)
        self._last_frag[dev] = f
        return f

    def poll_alerts(self, comp):
        pids = {comp.pid, getattr(comp, "ns_pid", None), os.getpid()}
        for a in self.alerts.new_lines():
            if a.get("pid") not in pids:
                continue
            t = _rfc3339_ms(a.get("time"))
            if t is None or t < self.alerts.since_ms:
                continue
            kind = str(a.get("kind", "alert"))
            change = a.get("change")
            level = 0 if change == "cleared" else SEVERITY.get(a.get("severity"), 0)
            self._alert_level[(kind, a.get("gpu"))] = level
            worst = max(v for (k, _), v in self._alert_level.items() if k == kind)
            step = self._step(t)
            self._scalars({PREFIX + "alert/" + kind: worst}, step, t)
            self._text(PREFIX + "alerts", "%s %s %s (GPU %s): %s" % (
                change, a.get("severity"), kind, a.get("gpu"), a.get("message", "")), step, t)


class AlertsFile(object):
    """New lines of a file another process appends to, read without blocking: one stat()
    when it has not grown, at most ALERT_READ_MAX bytes a look, a torn last line kept for
    the next look, and a file truncated or replaced read again from its start."""

    def __init__(self, path, since_ms=None):
        self.path = path
        self.pos = None
        self.ino = None
        self.rest = b""
        self.since_ms = process_start_ms() if since_ms is None else since_ms

    def new_lines(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if self.pos is None or st.st_ino != self.ino or st.st_size < self.pos:
            self.ino = st.st_ino
            self.rest = b""
            # A long file from earlier runs: only its tail can hold this process's alerts.
            self.pos = max(0, st.st_size - 4 * ALERT_READ_MAX)
            skip_partial = self.pos > 0
        else:
            skip_partial = False
        if st.st_size == self.pos:
            return []
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read(ALERT_READ_MAX)
        except OSError:
            return []
        self.pos += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        if skip_partial and lines:
            lines = lines[1:]
        out = []
        for line in lines:
            try:
                obj = json.loads(line.decode("utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


def process_start_ms():
    """When this process started (Unix ms): alerts older than that are about another
    process that had the same pid."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return int(1000 * (time.time() - uptime + ticks / float(os.sysconf("SC_CLK_TCK"))))
    except (OSError, ValueError, IndexError):
        return int(1000 * time.time())


def _rfc3339_ms(s):
    if not isinstance(s, str):
        return None
    from datetime import datetime
    try:
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(d.timestamp() * 1000)


def _bytes(n):
    if not isinstance(n, (int, float)):
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return "%.2f %s" % (n / float(size), unit)
    return "%d B" % n
