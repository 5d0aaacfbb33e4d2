#!/usr/bin/env python3
"""Makes a small seed of a real ELF64 program for the `elf` fuzz target: its ELF header,
program headers, section headers and section-name table as they are, and its symbol table cut
to the first KEEP symbols plus `runtime.cputicks.abi0` (with a string table of their names),
laid out one after the other (the offsets rewritten; other sections' contents left out).
These are all the parts of a program the exec-time ELF reader reads.

    runtime-tests/fuzz/tools/elf_seed.py PROGRAM runtime-tests/fuzz/seeds/elf/NAME

The seeds: true-dynamic-pie (Debian 12's /bin/true), busybox-static (/usr/bin/busybox),
musl-static (`int main(void){return 0;}` by musl-gcc -static), go-static and go-pie (a hello
world printing time.Now() by Go 1.19.8, `go build` and `go build -buildmode=pie`).
"""
import struct
import sys

KEEP = 24
WANTED = b"runtime.cputicks.abi0"

src = open(sys.argv[1], "rb").read()
assert src[:6] == b"\x7fELF\x02\x01", "an ELF64 little-endian file"
(phoff, shoff) = struct.unpack_from("<QQ", src, 32)
(phentsize, phnum, shentsize, shnum, shstrndx) = struct.unpack_from("<HHHHH", src, 54)
phdrs = src[phoff:phoff + phentsize * phnum]
shdrs = [bytearray(src[shoff + i * shentsize:shoff + (i + 1) * shentsize]) for i in range(shnum)]


def field(sh, at, fmt):
    return struct.unpack_from(fmt, sh, at)[0]


def contents(sh):
    off, size = field(sh, 24, "<Q"), field(sh, 32, "<Q")
    return src[off:off + size]


parts = {shstrndx: contents(shdrs[shstrndx])}
symtab = next((i for i, sh in enumerate(shdrs) if field(sh, 4, "<I") == 2), None)
if symtab is not None:
    link = field(shdrs[symtab], 40, "<I")
    names = contents(shdrs[link])
    syms = contents(shdrs[symtab])
    out_syms, out_names = bytearray(), bytearray(b"\0")
    for i in range(len(syms) // 24):
        sym = bytearray(syms[i * 24:(i + 1) * 24])
        at = struct.unpack_from("<I", sym, 0)[0]
        name = names[at:names.index(b"\0", at)]
        if i < KEEP or name == WANTED:
            struct.pack_into("<I", sym, 0, len(out_names) if name else 0)
            if name:
                out_names += name + b"\0"
            out_syms += sym
    parts[symtab], parts[link] = bytes(out_syms), bytes(out_names)

at = 64 + len(phdrs)
sh_at = (at + 7) & ~7
at = sh_at + shentsize * shnum
blobs = bytearray()
for i, sh in enumerate(shdrs):
    if i in parts:
        struct.pack_into("<QQ", sh, 24, at + len(blobs), len(parts[i]))
        blobs += parts[i]
    elif field(sh, 4, "<I") != 8:  # not NOBITS: its contents are left out
        struct.pack_into("<QQ", sh, 24, 0, 0)
head = bytearray(src[:64])
struct.pack_into("<QQ", head, 32, 64 if phnum else 0, sh_at)
out = head + phdrs + b"\0" * (sh_at - 64 - len(phdrs)) + b"".join(shdrs) + blobs
open(sys.argv[2], "wb").write(out)
print(f"{sys.argv[2]}: {len(out)} bytes")
