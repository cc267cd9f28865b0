#!/usr/bin/env python3
# bench/auth_flood.py BINARY repeat|fresh SECONDS CONNS [PAUSE_S]: gpumon serve with basic auth (a
# cost-10 bcrypt hash), CONNS keep-alive clients sending wrong passwords; prints gpumon's CPU.
# The hash is gpumon's own dummy (cost 10), so every password is wrong. Figures:
# docs/limits.md, "Authentication under a flood".
import base64, os, socket, subprocess, sys, tempfile, threading, time
W = tempfile.mkdtemp()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary, mode, secs, conns = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
H = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"
open("%s/web.yml" % W, "w").write("basic_auth_users:\n  prom: '%s'\n" % H)
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--web-config-file", "%s/web.yml" % W,
                      "--replay", os.path.join(ROOT, "assets/demo.gpumon.jsonl.gz")], stderr=subprocess.PIPE, text=True,
                     env=dict(os.environ, XDG_CONFIG_HOME="/nonexistent"))
line = p.stderr.readline()
host, port = line.strip().split("http://")[1].split("/")[0].rsplit(":", 1)
time.sleep(1)
def cpu():
    f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
stop = False
count = [0] * conns
codes = {}
def worker(i):
    n = 0
    while not stop:
        try:
            s = socket.create_connection((host, int(port)), timeout=10)
            f = s.makefile("rb")
            while not stop:
                n += 1
                pw = "wrong" if mode == "repeat" else "guess-%d-%d" % (i, n)
                a = base64.b64encode(("prom:" + pw).encode()).decode()
                s.sendall(("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n\r\n" % a).encode())
                st = f.readline().split()[1].decode()
                ln = 0
                while True:
                    h = f.readline()
                    if h in (b"\r\n", b""): break
                    if h.lower().startswith(b"content-length:"): ln = int(h.split(b":")[1])
                f.read(ln)
                codes[st] = codes.get(st, 0) + 1
                count[i] += 1
                if pause: time.sleep(pause)
        except Exception:
            time.sleep(0.05)
c0, t0 = cpu(), time.time()
ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(conns)]
for t in ts: t.start()
time.sleep(secs)
stop = True
c1, t1 = cpu(), time.time()
print("%s %s: %d answers %r in %.1f s; gpumon %.2f CPU-s = %.0f%% of a core" % (
    os.path.basename(binary), mode, sum(count), codes, t1 - t0, c1 - c0, (c1 - c0) / (t1 - t0) * 100))
p.kill()
