"""Hold a known amount of GPU memory for a while (for mapping and accuracy checks).

usage: python3 hold.py GIB SECONDS [TAG]
Prints the physical card's UUID for each logical device the process sees.
"""
import sys, time
import torch

gib, secs = float(sys.argv[1]), float(sys.argv[2])
tag = sys.argv[3] if len(sys.argv) > 3 else ""
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"{tag} pid {__import__('os').getpid()} cuda:{i} uuid GPU-{p.uuid}", flush=True)
x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda:0").fill_(1)
torch.cuda.synchronize()
print(f"{tag} holding {torch.cuda.memory_reserved()/2**20:.0f} MiB reserved", flush=True)
time.sleep(secs)
