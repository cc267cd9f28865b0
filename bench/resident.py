"""What of a running process is resident, mapping by mapping, and for chosen files which ELF
sections and which symbols the resident pages hold.

usage: python3 bench/resident.py PID [--syms FILE=SYMBOLS_ELF ...] [--folios FILE]
  PID            a running process (same user, or root: /proc/PID/pagemap)
  --syms F=E     symbols for mapped file F (a path, or the end of one, e.g. `gpumon` or
                 `libm.so.6`) read from ELF E (`nm`, and `nm -D` when E has no .symtab): an
                 unstripped build of the same binary (`cargo rustc --release --bin gpumon --
                 -C strip=none` keeps the release layout), or F itself for a shared library
  --map F=MAP    symbols for mapped file F from rust-lld's map of its link
                 (RUSTFLAGS="-C link-arg=-Wl,-Map=MAP" cargo build --release): every input
                 section, so a stripped release build works
  --folios F     list each resident 64 KiB block of file F with the largest symbols in it

Resident means the page-table entry is present (bit 63 of /proc/PID/pagemap): what RSS counts.
File pages come in 64 KiB page-cache folios on recent kernels and a fault maps the whole
folio, so for a file the unit that matters is the 64 KiB block: fewer, denser touched blocks.
"""
import bisect, collections, os, re, struct, subprocess, sys

PAGE = os.sysconf("SC_PAGE_SIZE")
BLOCK = 64 * 1024


def maps(pid):
    out = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split(None, 5)
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        path = f[5].strip() if len(f) > 5 else ""
        out.append((lo, hi, f[1], int(f[2], 16), path))
    return out


def present(pid, lo, hi):
    """Addresses of the resident pages in [lo, hi)."""
    n = (hi - lo) // PAGE
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        pm.seek(lo // PAGE * 8)
        data = pm.read(n * 8)
    got = []
    for i, (e,) in enumerate(struct.iter_unpack("<Q", data)):
        if e >> 63:
            got.append(lo + i * PAGE)
    return got


def sections(elf):
    """(file offset, size, name) of each section that occupies file bytes."""
    out = []
    for line in subprocess.run(["readelf", "-SW", elf], capture_output=True, text=True).stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m and m.group(2) != "NOBITS" and m.group(1) != "NULL":
            out.append((int(m.group(4), 16), int(m.group(5), 16), m.group(1)))
    return sorted(out)


def loads(elf):
    """(file offset, vaddr, file size) of each PT_LOAD."""
    out = []
    for line in subprocess.run(["readelf", "-lW", elf], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            out.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
    return out


def symbols(elf):
    """Sorted (vaddr, size, name) of the defined symbols with a size."""
    def nm(extra):
        r = subprocess.run(["nm", "-S", "--defined-only", "--demangle", *extra, elf],
                           capture_output=True, text=True)
        syms = []
        for line in r.stdout.splitlines():
            f = line.split(None, 3)
            if len(f) == 4:
                syms.append((int(f[0], 16), int(f[1], 16), f[3]))
        return syms
    syms = nm([]) or nm(["-D"])
    return sorted(set(syms))


def map_sections(path):
    """Sorted (vaddr, size, input section) of an lld map (`VMA LMA Size Align Out In Symbol`)."""
    out = []
    for line in open(path, errors="replace"):
        m = re.match(r"\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+\S.*:\((.*)\)$", line)
        if m and int(m.group(2), 16):
            out.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    return sorted(out)


def off_to_vaddr(load, off):
    for o, v, sz in load:
        if o <= off < o + sz:
            return v + off - o
    return None


def main():
    args = sys.argv[1:]
    pid = int(args.pop(0))
    symsrc, mapsrc, folios = {}, {}, set()
    while args:
        a = args.pop(0)
        if a == "--syms":
            f, e = args.pop(0).split("=", 1)
            symsrc[f] = e
        elif a == "--map":
            f, e = args.pop(0).split("=", 1)
            mapsrc[f] = e
        elif a == "--folios":
            folios.add(args.pop(0))
    per_file = collections.OrderedDict()
    file_pages = collections.defaultdict(set)  # path -> resident file offsets
    for lo, hi, perm, off, path in maps(pid):
        try:
            pages = present(pid, lo, hi)
        except OSError as e:
            sys.exit(f"pagemap of {pid}: {e}")
        key = path or "[anon]"
        tot = per_file.setdefault(key, [0, 0])
        tot[0] += len(pages) * PAGE // 1024
        tot[1] += (hi - lo) // 1024
        if path.startswith("/"):
            for a in pages:
                file_pages[path].add(off + a - lo)
    print(f"{'resident kB':>11} {'mapped kB':>10}  mapping")
    total = 0
    for k, (r, m) in sorted(per_file.items(), key=lambda x: -x[1][0]):
        total += r
        if r:
            print(f"{r:11d} {m:10d}  {k}")
    print(f"{total:11d} {'':10}  total")
    for path, offs in file_pages.items():
        want = [f for f in symsrc if path == f or path.endswith("/" + f)]
        wmap = [f for f in mapsrc if path == f or path.endswith("/" + f)]
        fol = [f for f in folios if path == f or path.endswith("/" + f)]
        if not want and not fol:
            continue
        elf = symsrc[want[0]] if want else path
        secs = sections(path)
        starts = [s[0] for s in secs]
        print(f"\n== {path}: {len(offs) * PAGE // 1024} kB resident in "
              f"{len({o // BLOCK for o in offs})} blocks of 64 KiB")
        by_sec = collections.Counter()
        for o in offs:
            # a page may hold the ends of several sections: charge it to each
            for s_off, s_sz, name in secs:
                if s_off < o + PAGE and o < s_off + s_sz:
                    by_sec[name] += 1
        for s_off, s_sz, name in secs:
            if by_sec[name]:
                print(f"  {name:24s} {by_sec[name] * PAGE // 1024:6d} kB of {s_sz // 1024:6d} kB")
        if not fol:
            continue
        load = loads(path)
        syms = symbols(elf) if want else map_sections(mapsrc[wmap[0]]) if wmap else []
        addrs = [s[0] for s in syms]
        blocks = sorted({o // BLOCK for o in offs})
        for b in blocks:
            boff = b * BLOCK
            res = sum(1 for o in offs if o // BLOCK == b) * PAGE // 1024
            names = [n for s_off, s_sz, n in secs if s_off < boff + BLOCK and boff < s_off + s_sz]
            va = off_to_vaddr(load, boff)
            top = []
            if va is not None:
                i = bisect.bisect_left(addrs, va)
                j = bisect.bisect_left(addrs, va + BLOCK)
                inside = syms[i:j]
                top = sorted(inside, key=lambda s: -s[1])[:4]
                print(f"  block {boff:#09x} ({res:2d} kB) {','.join(names)}: {len(inside)} symbols, "
                      f"{sum(s[1] for s in inside) // 1024} kB sized")
            else:
                print(f"  block {boff:#09x} ({res:2d} kB) {','.join(names)}")
            for a, sz, n in top:
                print(f"      {sz:7d} {n[:110]}")


if __name__ == "__main__":
    main()
