#!/usr/bin/env python3
"""Checks what a gpumon wheel, or an installed gpumon binary, asks of the machine it runs on.

auditwheel reads the ELF files it sees in a wheel, but the LD_PRELOAD interposer is carried
*inside* the gpumon binary (src/embed.rs, include_bytes!) and is invisible to it, so a
regression there (a newer glibc symbol in the interposer) would ship unnoticed and fail only
when `gpumon run` preloads it into a job on an old cluster. This script reads them all:

* the wheel's platform tags (file name and WHEEL metadata) are manylinux, at most the glibc
  given (2.17 = manylinux2014 by default);
* every ELF file in the wheel, and every ELF file embedded in one (found by its header and
  cut out by its section table), needs no GLIBC_ symbol version above that; at least one
  embedded ELF (the interposer) must be found, so the check cannot pass by reading nothing;
* none of them needs a newer loader's feature: no packed relocations (DT_RELR, glibc 2.36,
  which the linker marks by requiring `GLIBC_ABI_DT_RELR`) and no other `GLIBC_ABI_` version;
* every one of them is built for the architecture the wheel's tags name (ELF e_machine): a
  cross-built wheel whose interposer was built for the build machine would install, and
  fail only when `gpumon run` preloads it (the loader refuses a foreign library);
* a binary checked with `--elf` does not link the system libm (its resolvers and pages would
  join a watch's resident set for a few functions the libm crate gives).

`--elf BINARY` checks one binary (`cargo install`'s) and what is embedded in it the same way,
the embedded files against the binary's own architecture.
`--allow-libm` lets the binary name libm.so.6: only for the test suite's own build, which has
the dev-dependencies' features (tokio's multi-thread scheduler, whose statistics call powf);
an installed gpumon has none of them and is checked without it.
`--baseline PROGRAM` raises the limit to the newest glibc version PROGRAM needs: a plain Rust
program linked on the same machine, which needs what the start files and Rust's standard
library take from that glibc (GLIBC_2.34 on glibc 2.34 or newer). A binary that needs more
than that took it from its own code or a dependency, and refuses to run on systems that the
plain program runs on.

Standard library only (the release machine may have no binutils).
Usage: wheel_glibc.py WHEEL [--max-glibc 2.17]
       wheel_glibc.py --elf BINARY [--max-glibc 2.17] [--baseline PROGRAM]
"""

import re
import struct
import sys
import zipfile

SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_DYNAMIC = 6
# DT_RELRSZ, DT_RELR, DT_RELRENT: relative relocations packed, which only glibc 2.36's
# loader applies (an older one would leave every pointer of the binary unrelocated).
DT_RELR_TAGS = {35, 36, 37}
# ELF e_machine of each architecture a wheel tag may name.
MACHINES = {"x86_64": 62, "aarch64": 183}
MACHINE_NAMES = {v: k for k, v in MACHINES.items()}
DT_NEEDED = 1
# The system libm: gpumon computes with the libm crate instead (Cargo.toml says why), so a
# binary that names it took a call of f64::exp, ln, powf... from gpumon or a dependency.
NOT_NEEDED = {"libm.so.6"}


def machine(elf):
    return struct.unpack_from("<H", elf, 18)[0]


def machine_name(m):
    return MACHINE_NAMES.get(m, f"e_machine {m}")


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


def sections(elf):
    e_shoff = struct.unpack_from("<Q", elf, 40)[0]
    e_shentsize, e_shnum = struct.unpack_from("<HH", elf, 58)
    return [
        struct.unpack_from("<IIQQQQIIQQ", elf, e_shoff + i * e_shentsize) for i in range(e_shnum)
    ]


def packed_relocs(elf):
    """Whether the ELF file's dynamic section has DT_RELR entries."""
    for _name, kind, _flags, _addr, offset, size, _link, _info, _align, _entsize in sections(elf):
        if kind != SHT_DYNAMIC:
            continue
        for pos in range(offset, offset + size - 15, 16):
            tag = struct.unpack_from("<q", elf, pos)[0]
            if tag == 0:
                break
            if tag in DT_RELR_TAGS:
                return True
    return False


def needed(elf):
    """The shared libraries an ELF file names as DT_NEEDED."""
    secs = sections(elf)
    out = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, _entsize in secs:
        if kind != SHT_DYNAMIC:
            continue
        strtab = secs[link][4]
        for pos in range(offset, offset + size - 15, 16):
            tag, val = struct.unpack_from("<qQ", elf, pos)
            if tag == 0:
                break
            if tag == DT_NEEDED:
                out.append(elf[strtab + val : elf.index(b"\0", strtab + val)].decode())
    return out


def glibc_needs(elf, abi=None):
    """The GLIBC_x.y versions an ELF file (64-bit little-endian) requires; the GLIBC_ABI_
    names (loader features, not versions) are added to `abi` when given."""
    secs = sections(elf)
    out = set()
    for _name, kind, _flags, _addr, offset, _size, link, info, _align, _entsize in secs:
        if kind != SHT_GNU_VERNEED:
            continue
        strtab = secs[link][4]
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
                elif text.startswith("GLIBC_ABI_") and abi is not None:
                    abi.add(text)
                apos += anext
            pos += nxt
    return out


def check_elf(name, data, limit, problems, arch):
    abi = set()
    needs = glibc_needs(data, abi)
    top = max(needs, key=version) if needs else "none"
    print(f"  {name}: {machine_name(machine(data))}, {len(data)} bytes, highest GLIBC_ {top}")
    if machine(data) != arch:
        problems.append(f"{name} is built for {machine_name(machine(data))}, not {machine_name(arch)}")
    over = sorted((v for v in needs if version(v) > limit), key=version)
    if over:
        problems.append(f"{name} needs GLIBC_{', GLIBC_'.join(over)}")
    for a in sorted(abi):
        problems.append(f"{name} needs {a}, a loader feature older systems lack")
    if packed_relocs(data):
        problems.append(f"{name} has packed relocations (DT_RELR), which need glibc 2.36")


def check_embedded(name, data, limit, problems, arch):
    """Checks every ELF file inside `data` (past its own header); returns how many."""
    embedded = 0
    start = 1
    while (off := data.find(b"\x7fELF", start)) != -1:
        size = elf_size(data, off)
        if size is None:
            start = off + 1
            continue
        embedded += 1
        check_elf(f"{name} + {off:#x} (embedded)", data[off : off + size], limit, problems, arch)
        start = off + size
    return embedded


def highest(path):
    with open(path, "rb") as f:
        needs = glibc_needs(f.read())
    return max(needs, key=version) if needs else "2.0"


def report(problems, what, limit_text):
    for p in problems:
        print(f"{what} glibc check: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{what} glibc check: ok (at most glibc {limit_text}, no packed relocations, one architecture)")


def main(argv):
    args = argv[1:]
    limit_text = "2.17"
    if "--max-glibc" in args:
        i = args.index("--max-glibc")
        limit_text = args[i + 1]
        del args[i : i + 2]
    allow_libm = "--allow-libm" in args
    if allow_libm:
        args.remove("--allow-libm")
    elf = baseline = None
    for flag in ("--elf", "--baseline"):
        if flag in args:
            i = args.index(flag)
            if flag == "--elf":
                elf = args[i + 1]
            else:
                baseline = args[i + 1]
            del args[i : i + 2]
    if baseline is not None:
        base = highest(baseline)
        print(f"{baseline}: a plain program linked here needs GLIBC_{base}")
        if version(base) > version(limit_text):
            limit_text = base
    limit = version(limit_text)
    problems = []
    if elf is not None and not args:
        with open(elf, "rb") as f:
            data = f.read()
        print(elf)
        arch = machine(data)
        check_elf(elf, data, limit, problems, arch)
        refused = set() if allow_libm else NOT_NEEDED
        for lib in sorted(refused.intersection(needed(data))):
            problems.append(f"{elf} needs {lib}: gpumon uses the libm crate (Cargo.toml says why)")
        if check_embedded(elf, data, limit, problems, arch) == 0:
            problems.append("no embedded ELF file found: where is the interposer?")
        report(problems, "binary", limit_text)
        return
    if len(args) != 1:
        sys.exit("\n".join(__doc__.strip().splitlines()[-2:]))
    wheel = args[0]

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
        archs = {a for p in platforms for a in MACHINES if p.endswith("_" + a)}
        if len(archs) != 1:
            report(problems + [f"the tags name no one architecture: {', '.join(sorted(set(platforms)))}"], "wheel", limit_text)
        arch = MACHINES[archs.pop()]
        print(f"  architecture: {machine_name(arch)}")
        embedded = 0
        for n in z.namelist():
            data = z.read(n)
            if data[:4] != b"\x7fELF":
                continue
            check_elf(n, data, limit, problems, arch)
            embedded += check_embedded(n, data, limit, problems, arch)
    if embedded == 0:
        problems.append("no embedded ELF file found: where is the interposer?")
    report(problems, "wheel", limit_text)


if __name__ == "__main__":
    main(sys.argv)
