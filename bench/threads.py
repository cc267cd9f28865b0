"""Where a monitor's CPU goes, thread by thread: run CMD in a pseudo-terminal (SIZE=120x40)
for WARM + SECS seconds and print each thread's on-CPU time over the last SECS (schedstat)
and its wake-ups a second, then the total and the resident set.
usage: python3 bench/threads.py SECS WARM CMD [ARGS...]"""
import fcntl, os, pty, select, signal, struct, sys, termios, time
secs=float(sys.argv[1]); warm=float(sys.argv[2]); args=sys.argv[3:]
size=os.environ.get("SIZE","120x40"); cols,rows=map(int,size.split("x"))
pid, fd = pty.fork()
if pid == 0:
    os.environ.setdefault("TERM","xterm-256color"); os.execvp(args[0], args)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
def pump(d):
    n=0; end=time.time()+d
    while time.time()<end:
        r,_,_=select.select([fd],[],[],0.2)
        if r:
            try: n+=len(os.read(fd,65536))
            except OSError: break
    return n
def snap():
    out={}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            name=open(f"/proc/{pid}/task/{t}/comm").read().strip()
            s=open(f"/proc/{pid}/task/{t}/schedstat").read().split()
            out[t]=(name,int(s[0]),int(s[2]))
        except OSError: pass
    return out
def ticks():
    """The process's user and system clock ticks (/proc/PID/stat): a cross-check of the
    per-thread schedstat sum with the kernel's own accounting."""
    f=open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split(); return int(f[11]),int(f[12])
pump(warm); a=snap(); u0=ticks(); n=pump(secs); b=snap(); u1=ticks()
tot=0; totw=0
for t,(name,ns,w) in sorted(b.items(), key=lambda x:-x[1][1]):
    ns0,w0=(a[t][1],a[t][2]) if t in a else (0,0)
    d=(ns-ns0)/1e6; tot+=d; totw+=w-w0
    print(f"  {name:16s} {d:8.2f} ms  {d/secs:6.3f} ms/s  wakeups {(w-w0)/secs:6.1f}/s")
hwm=[l for l in open(f"/proc/{pid}/status") if l.startswith(("VmHWM","RssAnon","RssFile"))]
print(f"UTIME {u1[0]-u0[0]} STIME {u1[1]-u0[1]} ticks")
print(f"TOTAL {tot:.2f} ms = {tot/secs:.3f} ms/s, wakeups {totw/secs:.1f}/s, bytes_out {n}, {' '.join(l.split(':')[0]+'='+l.split()[1] for l in hwm)}")
os.kill(pid, signal.SIGTERM); time.sleep(0.3)
try: os.kill(pid, signal.SIGKILL)
except OSError: pass
