#!/usr/bin/env python3
"""Checks what a gpumon wheel asks of the machine it is installed on.

auditwheel reads the ELF files it sees in a wheel, but the LD_PRELOAD interposer is carried
*inside* the gpumon binary (src/embed.rs, include_bytes!) and is invisible to it, so a
regression there (a newer glibc symbol in the interposer) would ship unnoticed and fail only
when `gpumon run` preloads it into a job on an old cluster. This script reads them all:

* the wheel's platform tags (file name and WHEEL metadata) are manylinux, at most the glibc
  given (2.17 = manylinux2014 by default);
* every ELF file in the wheel, and every ELF file embedded in one (found by its header and
  cut out by its section table), needs no GLIBC_ symbol version above that; at least one
  embedded ELF (the interposer) must be found, so the check cannot pass by reading nothing.

Standard library only (the release machine may have no binutils).
Usage: wheel_glibc.py WHEEL [--max-glibc 2.17]
"""

import re
import struct
import sys
import zipfile

SHT_GNU_VERNEED = 0x6FFFFFFE


def version(text):
    return tuple(int(x) for x in text.split("."))


def elf_size(data, off):
    """Length of the ELF file starting at `off` (64-bit little-endian), or None."""
    if data[off + 4] != 2 or data[off + 5] != 1:
        return None
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, off + 32)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, off + 54)
    if e_shentsize != 64 or e_shnum == 0 or e_shnum > 4096:
        return None
    end = e_shoff + e_shnum * e_shentsize
    if off + end > len(data) or e_phoff + e_phnum * e_phentsize > end:
        return None
    return end


def glibc_needs(elf):
    """The GLIBC_x.y versions an ELF file (64-bit little-endian) requires."""
    e_shoff = struct.unpack_from("<Q", elf, 40)[0]
    e_shentsize, e_shnum = struct.unpack_from("<HH", elf, 58)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", elf, e_shoff + i * e_shentsize) for i in range(e_shnum)
    ]
    out = set()
    for _name, kind, _flags, _addr, offset, _size, link, info, _align, _entsize in sections:
        if kind != SHT_GNU_VERNEED:
            continue
        strtab = sections[link][4]
        pos = offset
        for _ in range(info):
            _ver, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", elf, pos)
            apos = pos + aux
            for _ in range(cnt):
                _hash, _flags2, _other, name, anext = struct.unpack_from("<IHHII", elf, apos)
                end = elf.index(b"\0", strtab + name)
                text = elf[strtab + name : end].decode()
                if text.startswith("GLIBC_") and re.fullmatch(r"GLIBC_\d+(\.\d+)*", text):
                    out.add(text[len("GLIBC_") :])
                apos += anext
            pos += nxt
    return out


def check_elf(name, data, limit, problems):
    needs = glibc_needs(data)
    top = max(needs, key=version) if needs else "none"
    print(f"  {name}: {len(data)} bytes, highest GLIBC_ {top}")
    over = sorted((v for v in needs if version(v) > limit), key=version)
    if over:
        problems.append(f"{name} needs GLIBC_{', GLIBC_'.join(over)}")


def main(argv):
    args = argv[1:]
    limit_text = "2.17"
    if "--max-glibc" in args:
        i = args.index("--max-glibc")
        limit_text = args[i + 1]
        del args[i : i + 2]
    if len(args) != 1:
        sys.exit(__doc__.strip().splitlines()[-1])
    limit = version(limit_text)
    wheel = args[0]
    problems = []

    # Tags: gpumon_memory-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
    platforms = wheel.rsplit("/", 1)[-1][: -len(".whl")].split("-")[-1].split(".")
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
        tags = [l.split(":", 1)[1].strip() for l in z.read(meta).decode().splitlines() if l.startswith("Tag:")]
        platforms += [t.split("-")[-1] for t in tags]
        print(f"{wheel}\n  tags: {', '.join(tags)}")
        legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
        for p in sorted(set(platforms)):
            m = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", p)
            glibc = (int(m.group(1)), int(m.group(2))) if m else legacy.get(p.split("_")[0])
            if glibc is None:
                problems.append(f"platform tag {p} is not manylinux")
            elif glibc > limit:
                problems.append(f"platform tag {p} asks for more than glibc {limit_text}")
        embedded = 0
        for n in z.namelist():
            data = z.read(n)
            if data[:4] != b"\x7fELF":
                continue
            check_elf(n, data, limit, problems)
            start = 1
            while (off := data.find(b"\x7fELF", start)) != -1:
                size = elf_size(data, off)
                if size is None:
                    start = off + 1
                    continue
                embedded += 1
                check_elf(f"{n} + {off:#x} (embedded)", data[off : off + size], limit, problems)
                start = off + size
    if embedded == 0:
        problems.append("no embedded ELF file found: where is the interposer?")
    for p in problems:
        print(f"wheel glibc check: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"wheel glibc check: ok (at most glibc {limit_text})")


if __name__ == "__main__":
    main(sys.argv)
