#!/usr/bin/env python3
"""Writes the reprorun wheel: the Python package (src/reprorun) and the static binary as its
``reprorun`` script, tagged for x86_64 Linux (glibc and musl alike: the binary is static).

Standard library only, so it works offline on a fresh machine; ``build.sh`` calls it. A wheel
is a zip with a ``.dist-info`` (METADATA, WHEEL, entry_points.txt, RECORD, PEP 427) and a
``.data/scripts`` directory pip installs onto PATH, which is how maturin's ``bindings = "bin"``
ships a Rust binary too.

    build_wheel.py --version 0.1.0 --binary PATH --out DIR
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import sys
import zipfile
from pathlib import Path

NAME = "reprorun"
TAG = "py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64"
SUMMARY = "A deterministic execution sandbox for Linux: the reprorun binary and its Python API"
# A fixed time for every entry: the same inputs give the same wheel, byte for byte.
DATE = (2020, 1, 1, 0, 0, 0)


def metadata(version: str, readme: str) -> str:
    return "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {NAME}",
            f"Version: {version}",
            f"Summary: {SUMMARY}",
            "License: see LICENSE",
            "Requires-Python: >=3.10",
            "Classifier: Operating System :: POSIX :: Linux",
            "Classifier: Programming Language :: Python :: 3",
            "Classifier: Programming Language :: Rust",
            "Provides-Extra: inspect",
            'Requires-Dist: inspect-ai>=0.3.200; extra == "inspect"',
            "Provides-Extra: swerex",
            'Requires-Dist: swe-rex>=1.2; extra == "swerex"',
            "Description-Content-Type: text/markdown",
            "",
            readme,
        ]
    )


WHEEL = f"Wheel-Version: 1.0\nGenerator: reprorun build_wheel.py\nRoot-Is-Purelib: false\nTag: {TAG}\n"
# Inspect loads a package's providers through this group; the name is the sandbox's.
ENTRY_POINTS = "[inspect_ai]\nreprorun = reprorun.inspect_sandbox\n"


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build(version: str, binary: Path, out: Path, src: Path, readme: str) -> Path:
    files: list[tuple[str, bytes, int]] = []
    for path in sorted((src / NAME).rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        data = path.read_bytes()
        rel = path.relative_to(src).as_posix()
        if rel == f"{NAME}/__init__.py":
            data = data.replace(b'__version__ = "0.0.0"', f'__version__ = "{version}"'.encode())
        files.append((rel, data, 0o644))
    files.append((f"{NAME}-{version}.data/scripts/reprorun", binary.read_bytes(), 0o755))
    info = f"{NAME}-{version}.dist-info"
    files.append((f"{info}/METADATA", metadata(version, readme).encode(), 0o644))
    files.append((f"{info}/WHEEL", WHEEL.encode(), 0o644))
    files.append((f"{info}/entry_points.txt", ENTRY_POINTS.encode(), 0o644))
    record = "".join(f"{name},{digest(data)},{len(data)}\n" for name, data, _ in files)
    record += f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), 0o644))
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{NAME}-{version}-{TAG}.whl"
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            entry = zipfile.ZipInfo(name, DATE)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    tmp.replace(wheel)
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--binary", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    here = Path(__file__).resolve().parent
    if not args.binary.is_file():
        print(f"build_wheel.py: {args.binary}: no such binary", file=sys.stderr)
        return 1
    readme = (here / "README.md").read_text()
    print(build(args.version, args.binary, args.out, here / "src", readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
