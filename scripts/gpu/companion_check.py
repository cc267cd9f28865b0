#!/usr/bin/env python3
"""Companion correctness on a real GPU (H200 machine), about 1-2 minutes.

1. PyTorch: the companion's samples equal torch.cuda.memory_stats() at a quiet
   moment (no allocation in between), exactly.
2. PyTorch: F from the companion's epoch-end block map equals F computed here,
   independently, from torch.cuda.memory_snapshot() in the same step.
3. PyTorch fragmentation OOM (research note section 6.3, scenario B): 5,000 x
   2 MiB, keep every 10th, cap = reserved + 32 MiB, ask 64 MiB -> OOM while
   T (free in the cache) is far larger than the request; the companion's OOM
   event carries the request, T and L, and L < request <= T.
4. JAX (subprocess, no preallocation): samples equal device.memory_stats(),
   frag T = pool_bytes - bytes_in_use and L = largest_free_block_bytes.

When a gpumon binary is available (--gpumon, default target/release/gpumon),
each part also runs under `gpumon record`, and the recordings (fixtures for
CI replay / a demo for assets/) are written to --out.

    PYTHONPATH=python python3 scripts/gpu/companion_check.py --out "$OUT"
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

MIB = 1 << 20
RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append((name, bool(ok)))
    print("%s  %s  %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


class Monitor(threading.Thread):
    """An in-process stand-in for gpumon: keeps every message it gets."""

    def __init__(self, path):
        threading.Thread.__init__(self, daemon=True)
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.s.sendall(b'{"v":1,"type":"hello","role":"monitor","min_v":1,"max_v":1,"client":"check"}\n')
        self.msgs = []
        self.lock = threading.Lock()
        self.start()

    def run(self):
        buf = b""
        while True:
            try:
                d = self.s.recv(1 << 16)
            except OSError:
                return
            if not d:
                return
            buf += d
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                with self.lock:
                    self.msgs.append(json.loads(line))

    def wait(self, pred, timeout=10.0, after=0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                for m in self.msgs[after:]:
                    if pred(m):
                        return m
            time.sleep(0.01)
        return None

    def count(self):
        with self.lock:
            return len(self.msgs)


def start_recording(binary, out, name, sock_dir, seconds):
    if not binary or not out:
        return None
    path = os.path.join(out, name)
    p = subprocess.Popen([binary, "record", "-o", path, "--duration", "%ss" % seconds,
                          "--interval", "250ms", "--socket-dir", sock_dir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    return p, path


def finish_recording(rec, pid):
    if rec is None:
        return
    p, path = rec
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.terminate()
        p.wait()
    kinds = {}
    try:
        with open(path) as fh:
            for line in fh:
                f = json.loads(line)
                if f.get("type") == "companion" and f.get("pid") == pid:
                    k = f.get("msg", {}).get("type")
                    kinds[k] = kinds.get(k, 0) + 1
    except (OSError, ValueError) as e:
        check("recording %s readable" % os.path.basename(path), False, repr(e))
        return
    check("recording %s has this process's companion frames" % os.path.basename(path),
          kinds.get("sample", 0) > 0 and kinds.get("hello", 0) > 0, json.dumps(kinds))


def independent_f(segments, dev):
    free = [b["size"] for s in segments if s.get("device", dev) == dev
            for b in s.get("blocks", []) if b.get("state") == "inactive"]
    t = sum(free)
    l = max(free) if free else 0
    return t, l, (0.0 if t == 0 else 1.0 - l / t)


def torch_part(args, sock_dir):
    import torch
    import gpumon

    dev = torch.cuda.current_device()
    torch.empty(1, device="cuda")  # the program initialises CUDA, not gpumon
    gpumon.start(sample_hz=10, snapshot_s=2, sock_dir=sock_dir)
    c = gpumon.companion()
    rec = start_recording(args.gpumon, args.out, "torch_companion.jsonl", sock_dir, 40)
    mon = Monitor(c.path)
    check("torch hello", mon.wait(lambda m: m["type"] == "hello" and m.get("framework") == "torch") is not None)

    # 1. samples equal memory_stats at a quiet moment.
    keep = [torch.randn(1 << 20, device="cuda") for _ in range(64)]
    del keep[::2]
    torch.cuda.synchronize()
    n = mon.count()
    s = mon.wait(lambda m: m["type"] == "sample" and m["dev"] == dev, after=n)
    s = mon.wait(lambda m: m["type"] == "sample" and m["dev"] == dev, after=mon.count())
    st = torch.cuda.memory_stats(dev)
    want = {"allocated": st["allocated_bytes.all.current"], "reserved": st["reserved_bytes.all.current"],
            "peak_allocated": st["allocated_bytes.all.peak"], "peak_reserved": st["reserved_bytes.all.peak"],
            "active": st["active_bytes.all.current"], "num_ooms": st["num_ooms"]}
    got = {k: s.get(k) for k in want}
    check("sample == torch.cuda.memory_stats at the same moment", got == want,
          "got %s want %s" % (got, want))

    # 2. F of the epoch-end block map vs an independent computation from a snapshot now.
    n = mon.count()
    gpumon.epoch(0)
    segs = torch.cuda.memory_snapshot()
    t, l, f_here = independent_f(segs, dev)
    ep = mon.wait(lambda m: m["type"] == "epoch", after=n)
    # The block map taken by epoch() itself carries the epoch's time.
    fr = ep and mon.wait(lambda m: m["type"] == "frag" and m["dev"] == dev and m.get("t") == ep["t"],
                         after=n)
    ok = fr is not None and fr["free_total"] == t and fr["largest_free"] == l
    f_comp = None if fr is None else (0.0 if fr["free_total"] == 0 else 1 - fr["largest_free"] / fr["free_total"])
    check("frag T, L equal the snapshot of the same step", ok, "companion %s here T=%d L=%d" % (
        None if fr is None else (fr["free_total"], fr["largest_free"]), t, l))
    check("F equal", f_comp is not None and abs(f_comp - f_here) < 1e-12, "F=%s vs %s" % (f_comp, f_here))
    check("epoch floor == allocated after gc", ep is not None and ep["floor"] == torch.cuda.memory_allocated(dev),
          str(ep))
    del keep

    # 3. Scenario B: fragmentation OOM with T >> request.
    torch.cuda.empty_cache()
    blocks = [torch.empty(2 * MIB, dtype=torch.uint8, device="cuda") for _ in range(5000)]
    blocks = blocks[::10]
    torch.cuda.synchronize()
    total = torch.cuda.get_device_properties(dev).total_memory
    reserved = torch.cuda.memory_reserved(dev)
    torch.cuda.set_per_process_memory_fraction((reserved + 32 * MIB) / total, dev)
    n = mon.count()
    oom = False
    try:
        torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        oom = True
    check("scenario B raised OOM", oom)
    ev = mon.wait(lambda m: m["type"] == "event" and m.get("kind") == "oom", after=n)
    check("OOM event with the requested size", ev is not None and ev.get("requested") == 64 * MIB, str(ev))
    if ev is not None:
        T, L = ev.get("free_total"), ev.get("largest_free")
        check("OOM while T > request > L (fragmentation OOM)",
              T is not None and L is not None and T >= 64 * MIB > L,
              "T=%s L=%s F=%s" % (T, L, None if not T else 1 - L / T))
        segs = torch.cuda.memory_snapshot()
        t, l, _ = independent_f(segs, dev)
        check("OOM T, L equal a snapshot right after", (T, L) == (t, l), "%s vs %s" % ((T, L), (t, l)))
    time.sleep(3)  # let a snapshot-rate frag and samples land in the recording
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    del blocks
    torch.cuda.empty_cache()
    pid = c.pid
    gpumon.stop("check done")
    finish_recording(rec, pid)


JAX_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
import gpumon
xs = [jnp.ones((1 << 18,), jnp.float32) * i for i in range(400)]
del xs[::2]
jax.block_until_ready(xs)
gpumon.start(sample_hz=10, snapshot_s=1, sock_dir=sys.argv[2])
print(json.dumps({"path": gpumon.companion().path, "pid": gpumon.companion().pid}), flush=True)
sys.stdin.readline()          # parent: "measure"
d = [d for d in jax.local_devices() if d.platform == "gpu"][0]
print(json.dumps(d.memory_stats()), flush=True)
sys.stdin.readline()          # parent: "done"
gpumon.stop("check done")
"""


def jax_part(args, sock_dir):
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    p = subprocess.Popen([sys.executable, "-c", JAX_CHILD, os.path.join(ROOT, "python"), sock_dir],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    info = json.loads(p.stdout.readline())
    rec = start_recording(args.gpumon, args.out, "jax_companion.jsonl", sock_dir, 15)
    mon = Monitor(info["path"])
    check("jax hello", mon.wait(lambda m: m["type"] == "hello" and m.get("framework") == "jax") is not None)
    mon.wait(lambda m: m["type"] == "sample")
    n = mon.count()
    s = mon.wait(lambda m: m["type"] == "sample", after=n)
    p.stdin.write("measure\n")
    p.stdin.flush()
    st = json.loads(p.stdout.readline())
    def known(x):
        return x if isinstance(x, int) and x >= 0 else None
    want = {"allocated": known(st.get("bytes_in_use")), "reserved": known(st.get("pool_bytes")),
            "peak_allocated": known(st.get("peak_bytes_in_use")), "limit": known(st.get("bytes_limit")),
            "largest_free": known(st.get("largest_free_block_bytes"))}
    got = {k: s.get(k) for k in want}
    check("jax sample == device.memory_stats()", got == want, "got %s want %s" % (got, want))
    fr = mon.wait(lambda m: m["type"] == "frag")
    ok = fr is not None and fr.get("free_total") == st["pool_bytes"] - st["bytes_in_use"] \
        and fr.get("largest_free") == st.get("largest_free_block_bytes")
    check("jax frag T = pool - in_use, L = largest_free_block_bytes", ok, str(fr))
    time.sleep(4)
    p.stdin.write("done\n")
    p.stdin.flush()
    p.wait(timeout=30)
    finish_recording(rec, info["pid"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT"))
    default_bin = os.path.join(ROOT, "target", "release", "gpumon")
    ap.add_argument("--gpumon", default=default_bin if os.path.exists(default_bin) else None)
    ap.add_argument("--skip-jax", action="store_true")
    args = ap.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    sock_dir = tempfile.mkdtemp(prefix="gpumon-check-")
    os.chmod(sock_dir, 0o700)
    torch_part(args, sock_dir)
    if not args.skip_jax:
        try:
            jax_part(args, sock_dir)
        except Exception as e:
            check("jax part ran", False, repr(e))
    failed = [n for n, ok in RESULTS if not ok]
    print("\n%d checks, %d failed%s" % (len(RESULTS), len(failed), (": " + "; ".join(failed)) if failed else ""))
    if args.out:
        with open(os.path.join(args.out, "companion_check.json"), "w") as fh:
            json.dump(RESULTS, fh)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
