"""Hold a known, distinct amount of memory on every GPU the process sees.

usage: python3 hold.py GIB SECONDS [TAG] [--step GIB] [--companion]
cuda:i gets GIB + i*STEP GiB. Prints, per logical device, the physical card's UUID and the
bytes allocated, as JSON lines (ground truth for the CUDA_VISIBLE_DEVICES mapping checks).
"""
import json, os, sys, time
import torch

args = [a for a in sys.argv[1:] if not a.startswith("--")]
flags = sys.argv[1:]
gib, secs = float(args[0]), float(args[1])
tag = args[2] if len(args) > 2 else ""
step = float(flags[flags.index("--step") + 1]) if "--step" in flags else 0.0
if "--companion" in flags:
    import gpumon
    gpumon.start()
held = []
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    n = int((gib + i * step) * 2**30)
    held.append(torch.empty(n, dtype=torch.uint8, device=f"cuda:{i}").fill_(1))
    torch.cuda.synchronize(i)
    print(json.dumps({"tag": tag, "pid": os.getpid(), "logical": i, "uuid": f"GPU-{p.uuid}",
                      "bytes": n, "reserved": torch.cuda.memory_reserved(i),
                      "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
                      "order": os.environ.get("CUDA_DEVICE_ORDER")}), flush=True)
time.sleep(secs)
