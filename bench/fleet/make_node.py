#!/usr/bin/env python3
"""An 8-GPU node from a real 2-GPU H200 recording, for the cluster-view scale test.

The recording is cut at --until-s (its processes still running there) and its GPUs are
copied --copies times: copy k gets GPU indices 2k, 2k+1, its own UUIDs and PCI bus ids,
and PIDs offset by 100000*k, so every copy is a distinct card with distinct processes
(companions and their allocator state included). Nothing else changes: the values are
the real run's.

    bench/fleet/make_node.py assets/demo-leaks.gpumon.jsonl.gz /tmp/node8.gpumon.jsonl
"""
import argparse
import gzip
import json


def remap(v, k, gpus_per_copy):
    """Copy k of one frame: PIDs, GPU indices, UUIDs and bus ids moved."""
    if isinstance(v, dict):
        out = {}
        for key, x in v.items():
            if key in ("pid", "ppid", "pgid") and isinstance(x, int) and x > 1:
                out[key] = x + 100000 * k
            elif key == "index" and isinstance(x, int):
                out[key] = x + gpus_per_copy * k
            elif key in ("uuid",) and isinstance(x, str) and x.startswith("GPU-"):
                out[key] = x[:-2] + f"{k:02x}"
            elif key == "pci_bus_id" and isinstance(x, str):
                out[key] = x[:-4] + f"{(int(x[-4:-2], 16) + 8 * k) & 0xff:02x}" + x[-2:]
            else:
                out[key] = remap(x, k, gpus_per_copy)
        return out
    if isinstance(v, list):
        return [remap(x, k, gpus_per_copy) for x in v]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--until-s", type=float, default=60)
    a = ap.parse_args()
    opener = gzip.open if a.src.endswith(".gz") else open
    with opener(a.src, "rt") as f:
        lines = f.read().splitlines()
    header = json.loads(lines[0])
    n = len(header["gpus"])
    end = header["started"] + int(a.until_s * 1000)
    header["gpus"] = [g for k in range(a.copies) for g in remap(header["gpus"], k, n)]
    out = [json.dumps(header)]
    for line in lines[1:]:
        f = json.loads(line)
        t = f.get("t", f.get("at", 0))
        if t > end:
            break
        if f["type"] == "alert":
            continue
        if f["type"] == "tick":
            f["gpus"] = [g for k in range(a.copies) for g in remap(f["gpus"], k, n)]
            out.append(json.dumps(f))
        elif f["type"] in ("procs", "companion"):
            for k in range(a.copies):
                out.append(json.dumps(remap(f, k, n)))
        else:
            out.append(json.dumps(f))
    open(a.out, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
