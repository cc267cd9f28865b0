# cgt.py OUTDIR WARM SECS INTERVAL NAME...: each binary (target/opt/bin/NAME) under callgrind in
# a 120x40 pty against the fake NVML, side by side; counters zeroed after WARM s, dumped SECS
# later: instructions (Ir) per second of the watch, thread by thread summed.
import fcntl, glob, os, pty, select, signal, struct, subprocess, sys, termios, time
out, warm, secs, iv = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
names = sys.argv[5:]
os.makedirs(out, exist_ok=True)
env = dict(os.environ, LD_LIBRARY_PATH="/tmp/mon2nvml", TERM="xterm-256color", LANG="C.UTF-8")
procs = {}
for n in names:
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe("valgrind", ["valgrind", "--tool=callgrind", "--demangle=no", "--separate-threads=yes",
            f"--callgrind-out-file={out}/cg.{n}.{iv}", f"target/opt/bin/{n}", "--interval", iv], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    procs[n] = (pid, fd)
def pump(d):
    end = time.time() + d
    while time.time() < end:
        r, _, _ = select.select([fd for _, fd in procs.values()], [], [], 0.2)
        for f in r:
            try: os.read(f, 65536)
            except OSError: pass
pump(warm)
for n, (pid, _) in procs.items(): subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True)
t0 = time.time(); pump(secs)
for n, (pid, _) in procs.items(): subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True)
el = time.time() - t0
for n, (pid, _) in procs.items():
    os.kill(pid, signal.SIGTERM)
pump(3)
for n, (pid, _) in procs.items():
    try: os.kill(pid, signal.SIGKILL)
    except OSError: pass
    os.waitpid(pid, 0)
for n in names:
    rows = []
    for f in sorted(glob.glob(f"{out}/cg.{n}.{iv}*")):
        txt = open(f, errors="replace").read()
        if "Trigger: dump" in txt:
            v = int([l for l in txt.splitlines() if l.startswith("summary:")][0].split()[1])
            rows.append((f.rsplit("-", 1)[-1], v))
    tot = sum(v for _, v in rows)
    print(f"{n:8s} {iv:6s} total {tot/el/1e6:7.3f} M Ir/s  threads " + " ".join(f"{t}:{v/el/1e6:.3f}" for t, v in rows))
