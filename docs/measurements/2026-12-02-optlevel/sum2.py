import glob, re, sys, statistics as st
for d in sys.argv[1:]:
    print("==", d)
    for iv in ("1s", "100ms"):
        base = None
        for n in ("os", "o2", "o3"):
            ms, hwm, ut, stt = [], [], 0, 0
            for f in sorted(glob.glob(f"{d}/threads_{n}_{iv}_*.txt")):
                t = open(f).read()
                m = re.search(r"= ([\d.]+) ms/s.*VmHWM=(\d+)", t); u = re.search(r"UTIME (\d+) STIME (\d+)", t)
                ms.append(float(m.group(1))); hwm.append(int(m.group(2))); ut += int(u.group(1)); stt += int(u.group(2))
            mean = st.mean(ms); base = base or mean
            print(f"{n:3s} {iv:6s} ms/s copies {' '.join(f'{x:.3f}' for x in ms)}  mean {mean:.3f} ({100*(mean/base-1):+.1f}%)  VmHWM {' '.join(map(str,hwm))}  user/sys ticks {ut}/{stt}")
