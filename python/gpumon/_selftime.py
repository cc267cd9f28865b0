"""What the companion costs the program, measured from inside (GPUMON_SELFTIME=1).

A training thread can only be held up by the companion thread while that thread
holds the GIL (or a framework lock it takes inside a call made under the GIL). So
the time from the companion thread's wake-up to its next wait, less the time it
spends blocked in select(), bounds what it can take from the program, and no
scheduling noise can blur that bound. Each framework call it makes is timed by
name, and any that lasts longer than SLOW_S is counted as blocking (a call that
waited for the device would show here).

Off by default: the companion then keeps `selftime = None` and pays one `is not
None` test per wake-up.
"""

import json
import os
import sys
import threading
import time

# A framework call longer than this is counted as one that blocked (waited on the
# device or a lock); the reads the companion makes take microseconds.
SLOW_S = 0.005
# Hold times kept for percentiles: the last this many wake-ups.
KEEP = 100000


def from_env():
    v = os.environ.get("GPUMON_SELFTIME", "")
    if v in ("", "0"):
        return None
    return SelfTime(path=None if v == "1" else v)


class SelfTime(object):
    def __init__(self, path=None, clock=time.perf_counter, cpu=time.thread_time):
        self.path = path
        self.clock = clock
        self.cpu = cpu
        self.t0 = clock()
        self.cpu0 = None
        self.cpu_s = 0.0       # the companion thread's CPU time, read on that thread
        self.thread = None
        self.wakeups = 0
        self.hold_s = 0.0
        self.hold_max_s = 0.0
        self.holds = []
        self.idle_s = 0.0      # blocked in select(), GIL released
        self._idle_in_wake = 0.0
        self._wake_t = None
        self.calls = {}        # (name, "companion"|"program") -> [n, total_s, max_s, slow]

    # -- the companion thread's loop ----------------------------------------

    def attach(self, server):
        """Time the companion thread's one blocking wait (select) so it is not counted
        as holding the GIL."""
        self.thread = threading.current_thread()
        self.cpu0 = self.cpu()
        sel = server.sel
        orig = sel.select
        clock = self.clock

        def select(timeout=None):
            t = clock()
            try:
                return orig(timeout)
            finally:
                d = clock() - t
                self.idle_s += d
                self._idle_in_wake += d

        sel.select = select

    def begin(self):
        self._wake_t = self.clock()
        self._idle_in_wake = 0.0

    def end(self):
        if self._wake_t is None:
            return
        hold = self.clock() - self._wake_t - self._idle_in_wake
        self._wake_t = None
        # thread_time() is the calling thread's: read here, on the companion thread, so
        # a report asked for from another thread still gives the companion's CPU.
        self.cpu_s = self.cpu() - self.cpu0
        self.wakeups += 1
        self.hold_s += hold
        if hold > self.hold_max_s:
            self.hold_max_s = hold
        if len(self.holds) >= KEEP:
            del self.holds[:KEEP // 2]
        self.holds.append(hold)

    # -- framework calls -------------------------------------------------------

    def wrap(self, name, fn):
        calls = self.calls
        clock = self.clock
        me = self

        def timed(*a, **kw):
            t = clock()
            try:
                return fn(*a, **kw)
            finally:
                d = clock() - t
                who = "companion" if threading.current_thread() is me.thread else "program"
                c = calls.get((name, who))
                if c is None:
                    c = calls[(name, who)] = [0, 0.0, 0.0, 0]
                c[0] += 1
                c[1] += d
                if d > c[2]:
                    c[2] = d
                if d > SLOW_S:
                    c[3] += 1

        timed.__wrapped__ = fn
        return timed

    def instrument(self, src):
        """Time a source's reads: the public ones and, for PyTorch, the two framework
        calls under them (the stats dict and the block-map snapshot)."""
        for attr in ("sample", "frag", "devices"):
            f = getattr(src, attr, None)
            if f is not None:
                setattr(src, attr, self.wrap("%s.%s" % (src.name, attr), f))
        for attr, label in (("_stats", "memory_stats"), ("_snapshot", "memory_snapshot")):
            f = getattr(src, attr, None)
            if f is not None:
                setattr(src, attr, self.wrap("%s.%s" % (src.name, label), f))

    # -- the figures -----------------------------------------------------------

    def report(self):
        wall = self.clock() - self.t0
        hs = sorted(self.holds)

        def pct(p):
            return hs[min(len(hs) - 1, int(p * len(hs)))] if hs else None

        calls = {}
        for (name, who), (n, tot, mx, slow) in sorted(self.calls.items()):
            calls["%s@%s" % (name, who)] = {"n": n, "total_ms": tot * 1e3, "mean_us": tot / n * 1e6,
                                            "max_ms": mx * 1e3, "slow": slow}
        return {
            "wall_s": wall,
            "wakeups": self.wakeups,
            "hold_s": self.hold_s,
            "hold_ms_per_s": 1e3 * self.hold_s / wall if wall > 0 else None,
            "hold_pct": 100 * self.hold_s / wall if wall > 0 else None,
            "hold_us_per_wakeup": {"mean": 1e6 * self.hold_s / self.wakeups if self.wakeups else None,
                                   "p50": None if pct(0.5) is None else 1e6 * pct(0.5),
                                   "p99": None if pct(0.99) is None else 1e6 * pct(0.99),
                                   "max": 1e6 * self.hold_max_s},
            "cpu_s": None if self.cpu0 is None else self.cpu_s,
            "idle_s": self.idle_s,
            "calls": calls,
            "slow_calls": sum(c["slow"] for c in calls.values()),
        }

    def write(self):
        """At stop: the report as JSON to GPUMON_SELFTIME's path, or one line on stderr."""
        r = self.report()
        try:
            if self.path:
                with open(self.path, "w") as f:
                    json.dump(r, f, indent=1)
            else:
                sys.stderr.write(
                    "gpumon selftime: %.3f ms/s GIL held (%.4f %%), %d wake-ups, %.0f us mean, "
                    "%.0f us max, %d slow framework calls\n" % (
                        r["hold_ms_per_s"] or 0, r["hold_pct"] or 0, r["wakeups"],
                        r["hold_us_per_wakeup"]["mean"] or 0, r["hold_us_per_wakeup"]["max"],
                        r["slow_calls"]))
        except Exception:
            pass
