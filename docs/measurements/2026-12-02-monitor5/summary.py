"""The tables of README.md from the raw files of the runs given (run.sh's output directories):
per round, gpumon (new) and base against the poller, and pooled over all rounds (sum of CPU
over the sum of the poller's); then each thread's CPU per round.
usage: python3 summary.py run1 run2 ..."""
import glob, os, re, sys

def results(path):
    """{who: (sched_cpu s, peak_rss kB)} from a monitor_overhead RESULT block."""
    out = {}
    for line in open(path):
        m = re.match(r"RESULT (\S+) .* peak_rss (\d+) kB .* sched_cpu ([0-9.]+)s", line)
        if m:
            out[m[1]] = (float(m[3]), int(m[2]))
    return out

def threads(path):
    """{thread name: ms/s} and the total line's ms/s and wake-ups/s."""
    names, total = {}, None
    for line in open(path):
        m = re.match(r"\s+(\S+)\s+[0-9.]+ ms\s+([0-9.]+) ms/s\s+wakeups\s+([0-9.]+)/s", line)
        if m:
            names[m[1]] = float(m[2])
        m = re.match(r"TOTAL .*= ([0-9.]+) ms/s, wakeups ([0-9.]+)/s", line)
        if m:
            total = (float(m[1]), float(m[2]))
    return names, total

pooled = {}
print("| round | new 1 s | new 100 ms | new RSS above poller | base 1 s | base 100 ms | base RSS |")
print("|---|---|---|---|---|---|---|")
for run in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(run, "r*-monitor_overhead_90s.txt"))):
        r = results(f)
        if "poll_1s" not in r:
            continue
        rnd = os.path.basename(f).split("-")[0][1:]
        row = [f"{os.path.basename(run)} {rnd}"]
        for who in ("gpumon", "base"):
            a, b = r[f"{who}_1s"][0] / r["poll_1s"][0], r[f"{who}_100ms"][0] / r["poll_100ms"][0]
            rss = (r[f"{who}_100ms"][1] - r["poll_100ms"][1]) / 1024
            row += [f"{a:.2f}x", f"{b:.2f}x", f"{rss:.1f} MB"]
            for k, v in ((f"{who}_1s", r[f"{who}_1s"][0]), (f"{who}_100ms", r[f"{who}_100ms"][0])):
                pooled[k] = pooled.get(k, 0) + v
        for k in ("poll_1s", "poll_100ms"):
            pooled[k] = pooled.get(k, 0) + r[k][0]
        print("| " + " | ".join(row) + " |")
if pooled:
    p = lambda w, iv: pooled[f"{w}_{iv}"] / pooled[f"poll_{iv}"]
    print(f"| pooled | {p('gpumon', '1s'):.2f}x | {p('gpumon', '100ms'):.2f}x | | "
          f"{p('base', '1s'):.2f}x | {p('base', '100ms'):.2f}x | |")
print()
print("| round | binary | interval | main | nvml-sampler | gpumon-channel | scan worker | all threads | wake-ups/s |")
print("|---|---|---|---|---|---|---|---|---|")
for run in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(run, "r*-threads_*.txt"))):
        rnd, _, who, iv = re.match(r"r(.+)-(threads)_(\w+)_(\w+)\.txt", os.path.basename(f)).groups()
        names, total = threads(f)
        if total is None:
            continue
        main = names.get(f"gpumon-{who}", 0.0)
        print(f"| {os.path.basename(run)} {rnd} | {who} | {iv} | {main:.3f} | {names.get('nvml-sampler', 0):.3f} | "
              f"{names.get('gpumon-channel', 0):.3f} | {names.get('tokio-rt-worker', 0):.3f} | {total[0]:.3f} | {total[1]:.1f} |")
