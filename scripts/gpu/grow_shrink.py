"""PyTorch workload for recordings: grows memory in steps, holds, shrinks, repeats.

usage: python3 grow_shrink.py SECONDS [STEP_GIB] [MAX_GIB]
Prints one line per phase with torch's own numbers so a recording can be checked.
"""
import sys, time
import torch

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 60
step = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
top = float(sys.argv[3]) if len(sys.argv) > 3 else 24.0
dev = torch.device("cuda:0")
end = time.time() + secs
held, cycle = [], 0
while time.time() < end:
    cycle += 1
    while sum(t.numel() for t in held) * 4 / 2**30 + step <= top and time.time() < end:
        held.append(torch.empty(int(step * 2**30 / 4), dtype=torch.float32, device=dev).fill_(1))
        time.sleep(0.7)
    print(f"cycle {cycle} peak allocated {torch.cuda.memory_allocated()/2**30:.1f} GiB", flush=True)
    time.sleep(3)
    while held and time.time() < end:
        held.pop()
        time.sleep(0.4)
    torch.cuda.empty_cache()
    time.sleep(2)
print("done", flush=True)
