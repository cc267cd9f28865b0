#!/bin/bash
# gpumon side by side with nvtop and nvitop at a 1 s refresh, after gpumon maps its own code
# a page at a time (src/runner/fault_pages.rs) and stops linking the system libm; main's
# build from before the change runs beside it in the same rounds.
# Targets: gpumon at most nvtop's peak RSS with margin (the aim: 2.5 MB under the 27.0 MB of
# 2026-12-04-house) and at most 0.1x nvtop's CPU; the bare NVML poller is reported.
#
# On the GPU machine, from the repository root, with
#   devbin/gpumon      this tree's `cargo build --release --locked` (target/release/gpumon)
#   devbin/gpumon-kit  main's release build from before this change (the same rounds' before)
#   peers/             /work/shared/peers/fetch-peers.sh peers (nvtop, nvitop)
# run:  bash docs/measurements/2026-12-04-pages/run.sh
# Each round is bench/monitor_overhead.sh: every monitor at once, each in its own 120x40
# pseudo-terminal, watching the same card while one process holds 8 GiB; CPU is on-CPU time
# from schedstat after 5 s of warm-up, RSS is peak RSS (VmHWM). Then one more pass of 30 s
# reads, for gpumon, gpumon-kit and nvtop, the resident kB of each mapping (smaps) and how
# many mappings gpumon's own file has: the page-at-a-time mapping seen on the H200's kernel.
# SECS per round (default 70) and ROUNDS (default 2): about 4.5 minutes in all. Raw output
# and pages.tgz go to OUT (default: $OUT, else /tmp/pages).
set -u
cd "$(dirname "$0")/../../.."
bin=${BIN:-$PWD/devbin}
out=${OUT:-/tmp/pages}
res=$out/pages
secs=${SECS:-70}
rounds=${ROUNDS:-2}
mkdir -p "$res"
[ -x "$bin/gpumon" ] || { echo "run.sh: no $bin/gpumon"; exit 1; }
[ -x "$bin/gpumon-kit" ] || echo "run.sh: no $bin/gpumon-kit: no before/after in the same rounds"
[ -d peers/deb ] || echo "run.sh: no peers/ (fetch-peers.sh): nvtop and nvitop will be missing"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; uname -r
  ldd --version | head -1; "$bin/gpumon" --version; sha256sum "$bin"/gpumon*
  cat /sys/kernel/mm/transparent_hugepage/enabled; } > "$res/env.txt" 2>&1
for r in $(seq 1 "$rounds"); do
  base=()
  [ -x "$bin/gpumon-kit" ] && base=(GPUMON_BASE="$bin/gpumon-kit")
  env GPUMON="$bin/gpumon" "${base[@]}" PEERS="$PWD/peers" HOLD="$PWD/scripts/gpu/hold.py" \
    bash bench/monitor_overhead.sh "$secs" > "$res/r$r-monitor_overhead_${secs}s.txt" 2>&1
done
# The per-mapping pass: monitor_overhead.sh unpacked nvtop into /tmp/nv.
python3 scripts/gpu/hold.py 8 60 pages >/dev/null 2>&1 &
holder=$!
sleep 8
nv=/tmp/nv
cmds=("gpumon=$bin/gpumon --interval 1s")
[ -x "$bin/gpumon-kit" ] && cmds+=("gpumon-kit=$bin/gpumon-kit --interval 1s")
[ -x $nv/usr/bin/nvtop ] && cmds+=("nvtop=env LD_LIBRARY_PATH=$nv/usr/lib/x86_64-linux-gnu:$nv/lib/x86_64-linux-gnu $nv/usr/bin/nvtop -d 10")
TERM=xterm-256color LANG=C.UTF-8 python3 - "${cmds[@]}" > "$res/mappings.txt" 2>&1 <<'PY'
import collections, fcntl, os, pty, select, signal, struct, sys, termios, time
procs = []
for spec in sys.argv[1:]:
    name, cmd = spec.split("=", 1)
    pid, fd = pty.fork()
    if pid == 0:
        args = cmd.split()
        os.execvp(args[0], args)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    procs.append((name, pid, fd))
end = time.time() + 30
while time.time() < end:
    for fd in select.select([p[2] for p in procs], [], [], 0.2)[0]:
        try:
            os.read(fd, 65536)
        except OSError:
            pass
for name, pid, fd in procs:
    exe = os.path.realpath(f"/proc/{pid}/exe")
    rss, count, cur = collections.Counter(), collections.Counter(), None
    for l in open(f"/proc/{pid}/smaps"):
        f = l.split()
        if "-" in f[0] and not f[0].endswith(":"):
            cur = f"{f[1]} {f[5] if len(f) > 5 else '[anon]'}"
            count[cur] += 1
        elif f[0] == "Rss:":
            rss[cur] += int(f[1])
    st = {l.split(":")[0]: l.split()[1] for l in open(f"/proc/{pid}/status")
          if l.startswith(("VmHWM", "RssAnon", "RssFile"))}
    print(f"== {name} pid {pid} {exe}: {st}")
    for k, v in sorted(rss.items(), key=lambda kv: -kv[1]):
        if v:
            print(f"{v:8d} kB in {count[k]:5d} mappings  {k}")
for name, pid, fd in procs:
    os.kill(pid, signal.SIGTERM)
PY
kill $holder 2>/dev/null
cat "$res/env.txt"
python3 - "$res" <<'PY' | tee "$res/summary.txt"
import pathlib, re, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob("r*-monitor_overhead_*s.txt"))
rounds = []  # per round: name -> (CPU s, peak RSS kB)
for f in runs:
    got = {}
    for line in f.read_text().splitlines():
        m = re.match(r"RESULT (\S+) .* cpu ([\d.]+)s .*peak_rss (\d+) kB", line)
        if m:
            ns = re.search(r"sched_cpu ([\d.]+)s", line)  # per-thread on-CPU ns: finer than ticks
            got[m.group(1)] = (float(ns.group(1) if ns else m.group(2)), int(m.group(3)))
    rounds.append(got)
names = ["gpumon_1s", "nvtop_1s", "nvitop_1s", "base_1s", "poll_1s",
         "gpumon_100ms", "base_100ms", "poll_100ms", "poll_100ms_AA", "gpumon_10ms"]
def col(n, i):
    return " ".join("-" if n not in r else (f"{r[n][0]:.4f}" if i == 0 else str(r[n][1])) for r in rounds)
print(f"{len(rounds)} rounds; per round: CPU s on-CPU, peak RSS kB (base = gpumon-kit, main before)")
for n in names:
    if any(n in r for r in rounds):
        print(f"{n:<14} CPU {col(n, 0):<30} RSS {col(n, 1)}")
def both(a, b):
    return [r for r in rounds if a in r and b in r]
def cpu_ratio(text, a, b, target=""):
    rs = both(a, b)
    if not rs:
        print(f"{text}: missing")
        return
    per = " ".join(f"{r[a][0] / r[b][0]:.3f}" for r in rs)
    pooled = sum(r[a][0] for r in rs) / sum(r[b][0] for r in rs)
    print(f"{text}: pooled {pooled:.3f}, per round {per}{target}")
def rss_diff(text, a, b, target=""):
    rs = both(a, b)
    print(f"{text}: {[r[a][1] - r[b][1] for r in rs] if rs else 'missing'}{target}")
rss_diff("gpumon 1 s peak RSS - nvtop 1 s (kB)", "gpumon_1s", "nvtop_1s", " (target < 0)")
rss_diff("gpumon 1 s peak RSS - gpumon-kit 1 s (kB)", "gpumon_1s", "base_1s", " (aim <= -2500)")
rss_diff("gpumon 100 ms peak RSS - gpumon-kit 100 ms (kB)", "gpumon_100ms", "base_100ms")
cpu_ratio("gpumon 1 s / nvtop 1 s CPU", "gpumon_1s", "nvtop_1s", " (target <= 0.1)")
cpu_ratio("gpumon 1 s / gpumon-kit 1 s CPU", "gpumon_1s", "base_1s", " (no regression: ~1)")
cpu_ratio("gpumon 1 s / nvitop 1 s CPU", "gpumon_1s", "nvitop_1s")
rss_diff("gpumon 1 s peak RSS - nvitop 1 s (kB)", "gpumon_1s", "nvitop_1s")
cpu_ratio("reported: gpumon 1 s / bare poller 1 s CPU", "gpumon_1s", "poll_1s")
rss_diff("reported: gpumon 100 ms peak RSS - bare poller 100 ms (kB)", "gpumon_100ms", "poll_100ms")
PY
head -12 "$res/mappings.txt"; grep -A3 "^== gpumon-kit" "$res/mappings.txt"
tar czf "$out/pages.tgz" -C "$out" pages
