"""Peak RSS of gpumon builds side by side without a GPU, as the H200 run measures it: each
binary in its own 120x40 pseudo-terminal at a 1 s refresh, all at once, against the fake
NVML (bench/fake_nvml.c), ROUNDS times; each binary is read through first, so it is wholly
in the page cache, as a copied or installed binary is. Per binary and round: VmHWM,
RssFile, RssAnon, the resident kB of its own code (r-xp) and read-only (r--p) mappings, its
on-CPU seconds over SECS after 5 s of warm-up, its threads; then the median and range.

usage (repository root):
  gcc -O2 -shared -fPIC -o /tmp/fakenvml/libnvidia-ml.so.1 bench/fake_nvml.c
  gcc -O2 -o /tmp/nvml_poll bench/nvml_poll.c -ldl
  python3 docs/measurements/2026-12-04-pages/local.py SECS ROUNDS NAME=BINARY[:ARGS] ...
  (ARGS default to --interval 1s; the poller: poll=/tmp/nvml_poll:1000)"""
import collections, fcntl, os, pty, select, signal, statistics, struct, sys, termios, time

secs, rounds = float(sys.argv[1]), int(sys.argv[2])
variants = [a.split("=", 1) for a in sys.argv[3:]]
os.environ.update(LD_LIBRARY_PATH="/tmp/fakenvml", TERM="xterm-256color", LANG="C.UTF-8")


def start(cmd):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    return pid, fd


def sched_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except OSError:
            pass
    return total


def status(pid):
    keys = ("VmHWM", "RssAnon", "RssFile", "Threads")
    return {l.split(":")[0]: int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith(keys)}


def own(pid, exe):
    """kB resident of the mappings of the binary itself, by permissions."""
    r, cur = collections.Counter(), None
    for l in open(f"/proc/{pid}/smaps"):
        f = l.split()
        if "-" in f[0] and not f[0].endswith(":"):
            cur = f[1] if len(f) > 5 and f[5] == exe else None
        elif cur and f[0] == "Rss:":
            r[cur] += int(f[1])
    return r


res = collections.defaultdict(list)
for rnd in range(rounds):
    procs = []
    for name, spec in variants:
        binary, _, args = spec.partition(":")
        with open(binary, "rb") as f:
            while f.read(1 << 20):
                pass
        pid, fd = start([binary] + (args.split() if args else ["--interval", "1s"]))
        procs.append((name, os.path.realpath(binary), pid, fd))
    fds = {p[3] for p in procs}

    def pump(until):
        while time.time() < until:
            for fd in select.select(list(fds), [], [], 0.2)[0]:
                try:
                    os.read(fd, 65536)
                except OSError:
                    fds.discard(fd)

    pump(time.time() + 5)
    ns0 = {p[2]: sched_ns(p[2]) for p in procs}
    pump(time.time() + secs)
    for name, exe, pid, fd in procs:
        s, o = status(pid), own(pid, exe)
        cpu = (sched_ns(pid) - ns0[pid]) / 1e9
        row = (s["VmHWM"], s["RssFile"], s["RssAnon"], o["r-xp"], o["r--p"], cpu, s["Threads"])
        res[name].append(row)
        print(f"round {rnd + 1} {name:10s} VmHWM {row[0]} RssFile {row[1]} RssAnon {row[2]} "
              f"own r-x {row[3]} r-- {row[4]} cpu {cpu:.4f}s threads {row[6]}", flush=True)
    for name, exe, pid, fd in procs:
        os.kill(pid, signal.SIGTERM)
    time.sleep(0.5)
    for name, exe, pid, fd in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
print(f"median (min-max) of {rounds} rounds; kB, CPU s in {secs:.0f} s")
cols = ["VmHWM", "RssFile", "RssAnon", "own r-x", "own r--", "cpu_s", "threads"]
for name, _ in variants:
    rs = res[name]
    print(f"{name:10s} " + "  ".join(
        f"{c} {statistics.median(x[i] for x in rs):.4g} ({min(x[i] for x in rs):.4g}-{max(x[i] for x in rs):.4g})"
        for i, c in enumerate(cols)))
