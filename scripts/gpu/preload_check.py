"""Runs one workload under the interposer, acts as a gpumon monitor on its
socket, and compares the driver-level numbers with the workload's own at each
CHECK. Writes every protocol message to a JSONL fixture. Prints one JSON
result line per CHECK on stdout (preload_check.sh makes the table)."""
import glob
import json
import os
import socket
import subprocess
import sys
import time

name, fixture, *cmd = sys.argv[1:]
env = dict(os.environ)
# Only the workload gets the interposer, not this checker.
env["LD_PRELOAD"] = env.pop("GPUMON_CHECK_PRELOAD")
proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
sockdir = env["GPUMON_DIR"]
msgs, buf, conn = [], b"", None


def connect():
    deadline = time.time() + 30
    while time.time() < deadline:
        paths = glob.glob(f"{sockdir}/{proc.pid}.driver.sock") + glob.glob(f"{sockdir}/{proc.pid}.sock")
        for p in paths:
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(p)
                s.sendall(b'{"v":1,"type":"hello","role":"monitor","min_v":1,"max_v":1,"client":"preload_check"}\n')
                s.settimeout(0.2)
                return s
            except OSError:
                pass
        time.sleep(0.05)
    raise SystemExit(f"{name}: no interposer socket for pid {proc.pid} in {sockdir}")


def pump(until):
    """Reads messages until `until(msg)` is true or 10 s pass."""
    global buf
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            data = conn.recv(1 << 16)
        except socket.timeout:
            continue
        if not data:
            return False
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            m = json.loads(line)
            msgs.append(m)
            if until(m):
                return True
    return False


def latest(kind, dev=0):
    for m in reversed(msgs):
        if m.get("type") == kind and m.get("dev") == dev:
            return m
    return {}


for line in proc.stdout:
    if not line.startswith("CHECK "):
        print(f"{name}: {line.rstrip()}", file=sys.stderr)
        continue
    own = json.loads(line[6:])
    if conn is None:
        conn = connect()
    # Two samples after the check: the second was certainly taken after it.
    t0 = time.time() * 1000
    seen = []
    pump(lambda m: m.get("type") == "sample" and m.get("dev") == 0 and m["t"] >= t0
         and (seen.append(m) or len(seen) >= 2))
    s = latest("sample")
    drv = {k: s.get(k) for k in ("allocated", "reserved", "peak_allocated", "peak_reserved",
                                  "pool_reserved", "live_count", "host_pinned")}
    print(json.dumps({"workload": name, "phase": own.pop("phase"), "own": own, "driver": drv}), flush=True)
    proc.stdin.write("next\n")
    proc.stdin.flush()

rc = proc.wait()
if conn is not None:
    pump(lambda m: m.get("type") == "bye")
with open(fixture, "w") as f:
    for m in msgs:
        f.write(json.dumps(m) + "\n")
if rc != 0:
    raise SystemExit(f"{name}: workload exited {rc}")
