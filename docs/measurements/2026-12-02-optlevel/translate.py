# translate.py OLD_LIST MAP > NEW_LIST: the old link order's functions, renamed to the
# names they have in the build that made MAP (crate hashes change with the profile).
import re, subprocess, sys
old = open(sys.argv[1]).read().split()
syms = set(re.findall(r"\(\.text(?:\.[a-z]+)?\.([^)\s]+)\)", open(sys.argv[2]).read()))
syms |= set(re.findall(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+[0-9a-f]+\s+(_R[0-9A-Za-z_$.]+)$", open(sys.argv[2]).read(), re.M))
def dem(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return [re.sub(r"\[[0-9a-f]+\]|::h[0-9a-f]{16}$", "", d) for d in out[:len(names)]]
new = sorted(syms)
idx = {}
for m, d in zip(new, dem(new)): idx.setdefault(d, []).append(m)
keep = set(); miss = 0
for o, d in zip(old, dem(old)):
    if o in syms: keep.add(o)
    elif d in idx: keep.update(idx[d])
    else: miss += 1
print("\n".join(sorted(keep)))
print(f"translate: {len(old)} old, {len(syms)} in map, {len(keep)} kept, {miss} not found", file=sys.stderr)
