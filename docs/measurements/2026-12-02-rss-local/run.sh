#!/usr/bin/env bash
# gpumon's peak RSS against the bare NVML poller, locally with the fake NVML: each binary in
# BIN (and the poller) in a 120x40 pseudo-terminal at 100 ms for SECS seconds, in turn,
# ROUNDS times; each binary's page cache is dropped before its run (POSIX_FADV_DONTNEED) so
# every run maps it from the same state. Then one more run of each under bench/resident.py.
# usage: run.sh OUTDIR SECS ROUNDS NAME=BINARY...
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=$1 secs=$2 rounds=$3; shift 3
mkdir -p "$out" /tmp/fakenvml
gcc -O2 -shared -fPIC -o /tmp/fakenvml/libnvidia-ml.so.1 "$root/bench/fake_nvml.c"
gcc -O2 -o /tmp/nvml_poll "$root/bench/nvml_poll.c" -ldl
evict() { python3 -c 'import os,sys
for p in sys.argv[1:]:
    fd=os.open(p,os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
export LD_LIBRARY_PATH=/tmp/fakenvml
for r in $(seq "$rounds"); do
    for nb in poller=/tmp/nvml_poll "$@"; do
        name=${nb%%=*} bin=${nb#*=}
        evict "$bin"
        if [ "$name" = poller ]; then args=(100); else args=(--interval 100ms); fi
        line=$(python3 "$root/bench/threads.py" "$secs" 5 "$bin" "${args[@]}" | tail -1)
        echo "round $r $name ${line#*bytes_out * }" | tee -a "$out/rss.txt"
    done
done
for nb in poller=/tmp/nvml_poll "$@"; do
    name=${nb%%=*} bin=${nb#*=}
    evict "$bin"
    if [ "$name" = poller ]; then args=(100); else args=(--interval 100ms); fi
    python3 - "$secs" "$root/bench/resident.py" "$bin" "${args[@]}" > "$out/resident-$name.txt" <<'PY'
import fcntl, os, pty, select, signal, struct, subprocess, sys, termios, time
secs, tool, args = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"; os.execvp(args[0], args)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
end = time.time() + secs
while time.time() < end:
    if select.select([fd], [], [], 0.2)[0]:
        try: os.read(fd, 65536)
        except OSError: break
print("".join(l for l in open(f"/proc/{pid}/status") if l.startswith(("VmHWM", "RssAnon", "RssFile"))), end="", flush=True)
subprocess.run([sys.executable, tool, str(pid), "--folios", os.path.basename(args[0])])
os.kill(pid, signal.SIGTERM); os.waitpid(pid, 0)
PY
done
