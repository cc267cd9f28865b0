#!/usr/bin/env python3
"""Fairness under flooding companions (docs/limits.md).

Starts one well-behaved fake companion (a hello, then one epoch every 100 ms)
and N flooding ones (samples and markers as fast as the socket takes them),
each its own process so its socket is named after its own pid as gpumon
requires. Runs `gpumon --headless --record F --serve ADDR --socket-dir D` for
S seconds while a scraper measures /metrics, then counts the good companion's
epochs in the recording.

    python3 bench/flood.py [--gpumon target/debug/gpumon] [--flooders 64] [--seconds 5]

Prints one JSON line: epochs recorded of sent, scrape count/ok/p50/p99 (ms),
gpumon CPU seconds, recording size.
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

HELLO = b'{"v":1,"type":"hello","role":"companion","framework":"torch","started":%d,"devices":[{"dev":0}]}\n'


def good_companion(path, seconds):
    """The real companion's server (bounded per-monitor queue that drops the
    oldest when the monitor does not keep up), so losses show as they would;
    one epoch every 100 ms."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "python"))
    from gpumon._server import Server
    srv = Server(path, lambda: [HELLO % os.getpid(), b'{"v":1,"type":"history","done":true}\n'])
    assert srv.open() is None
    while not srv.live_count():
        srv.poll(0.05)
    end = time.time() + seconds
    n = 0
    next_t = time.time()
    while time.time() < end:
        srv.poll(max(0.0, next_t - time.time()))
        if time.time() >= next_t:
            srv.broadcast({"type": "epoch", "t": int(time.time() * 1000), "epoch": n,
                           "dev": 0, "floor": 1, "peak": 2})
            n += 1
            next_t += 0.1
    srv.close([], 1.0)
    print(n, flush=True)


def companion(path_dir, mode, seconds):
    """Child process body: serve one socket named after our pid."""
    path = os.path.join(path_dir, "%d.sock" % os.getpid())
    if mode == "good":
        good_companion(path, seconds)
        return
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(4)
    s.settimeout(seconds + 5)
    try:
        conn, _ = s.accept()
    except socket.timeout:
        return
    conn.settimeout(seconds + 5)
    f = conn.makefile("rb")
    f.readline()  # the monitor's hello
    conn.sendall(HELLO % os.getpid() + b'{"v":1,"type":"history","done":true}\n')
    end = time.time() + seconds
    chunk = b"".join(
        b'{"v":1,"type":"sample","dev":0,"allocated":%d,"reserved":9}\n'
        b'{"v":1,"type":"marker","kind":"mark","label":"flood %d"}\n' % (i, i)
        for i in range(2000))
    conn.setblocking(True)
    while time.time() < end:
        try:
            conn.sendall(chunk)
        except OSError:
            return


def scrape(addr, stop, lat, fails):
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    while not stop.is_set():
        t = time.perf_counter()
        try:
            c = socket.create_connection(addr, timeout=2)
            c.sendall(req)
            data = b""
            while True:
                b = c.recv(65536)
                if not b:
                    break
                data += b
            c.close()
            if data.startswith(b"HTTP/1.1 200"):
                lat.append((time.perf_counter() - t) * 1000)
            else:
                fails.append(1)
        except OSError:
            fails.append(1)
        time.sleep(0.05)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        companion(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumon", default="target/debug/gpumon")
    ap.add_argument("--flooders", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--port", type=int, default=19477)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    if os.environ.get("FLOOD_KEEP"):
        print("dir", d, file=sys.stderr)
    os.chmod(d, 0o700)
    rec = os.path.join(d, "rec.jsonl")
    me = os.path.abspath(__file__)
    good = subprocess.Popen([sys.executable, me, "--child", d, "good", str(a.seconds)],
                            stdout=subprocess.PIPE, text=True)
    floods = [subprocess.Popen([sys.executable, me, "--child", d, "flood", str(a.seconds + 2)])
              for _ in range(a.flooders)]
    deadline = time.time() + 10
    while len([n for n in os.listdir(d) if n.endswith(".sock")]) < a.flooders + 1:
        assert time.time() < deadline, "companions did not start"
        time.sleep(0.02)
    gp = subprocess.Popen([a.gpumon, "--headless", "--record", rec, "--record-format", "ndjson", "--serve",
                           "127.0.0.1:%d" % a.port, "--socket-dir", d],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stop = threading.Event()
    lat, fails = [], []
    th = threading.Thread(target=scrape, args=(("127.0.0.1", a.port), stop, lat, fails))
    time.sleep(0.3)
    th.start()
    sent = int(good.communicate(timeout=a.seconds + 30)[0].strip() or 0)
    time.sleep(0.5)
    stop.set()
    th.join()
    try:
        with open("/proc/%d/stat" % gp.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        gpumon_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        gpumon_cpu = None
    gp.terminate()
    gp.wait(timeout=10)
    for f in floods:
        f.kill()
        f.wait()
    got = 0
    delays = []
    with open(rec, "rb") as f:
        for line in f:
            if b'"type":"epoch"' in line and b'"pid":%d' % good.pid in line:
                fr = json.loads(line)
                got += 1
                delays.append(fr["t"] - fr["msg"]["t"])
    delays.sort()
    lat.sort()
    pct = lambda p: round(lat[min(len(lat) - 1, int(len(lat) * p))], 2) if lat else None
    print(json.dumps({
        "flooders": a.flooders, "seconds": a.seconds,
        "epochs_recorded": got, "epochs_sent": sent,
        "epoch_delay_ms_max": delays[-1] if delays else None,
        "scrapes": len(lat) + len(fails), "scrapes_ok": len(lat),
        "p50_ms": pct(0.5), "p99_ms": pct(0.99),
        "gpumon_cpu_s": gpumon_cpu,
        "recording_bytes": os.path.getsize(rec),
        "gpumon_stderr_tail": gp.stderr.read().decode(errors="replace")[-300:],
    }))


if __name__ == "__main__":
    main()
