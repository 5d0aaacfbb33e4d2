#!/usr/bin/env python3
"""Writes the corpus dependency's wheels, byte for byte the same on every machine.

    python3 make_wheels.py OUT_DIR

For each version under shelfdep/ (1.0 and 2.0) it writes OUT_DIR/shelfdep-V-py3-none-any.whl:
the package's files, then METADATA, WHEEL and RECORD (sha256 of every file, PEP 376/427).
Entries are stored uncompressed (so no zlib version can change the bytes), in a fixed order,
with a fixed timestamp and mode.
"""
import base64
import hashlib
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "shelfdep"
STAMPS = {"1.0": (2023, 3, 1, 0, 0, 0), "2.0": (2025, 6, 1, 0, 0, 0)}

SUMMARY = "Small text helpers for shop software (slugs)."
CHANGES = {
    "1.0": "1.0: first stable release: slugify(text, sep='-').\n",
    "2.0": (
        "2.0 (breaking): slugify(text, sep) was renamed make_slug(text, *, separator);\n"
        "the old name is removed. Slugs are capped at max_length (default 64).\n\n"
        "1.0: first stable release: slugify(text, sep='-').\n"
    ),
}


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def build(version, out_dir):
    src = os.path.join(HERE, NAME, version)
    files = []  # (archive name, bytes)
    for root, dirs, names in os.walk(src):
        dirs.sort()
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(root, name)
            arc = os.path.relpath(path, src).replace(os.sep, "/")
            with open(path, "rb") as f:
                files.append((arc, f.read()))
    files.sort()
    dist_info = f"{NAME}-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "License: Apache-2.0\n"
        "Requires-Python: >=3.7\n"
        "Description-Content-Type: text/plain\n"
        "\n"
        + CHANGES[version]
    ).encode()
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: reprorun-corpus make_wheels.py\n"
        "Root-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    ).encode()
    files.append((f"{dist_info}/METADATA", metadata))
    files.append((f"{dist_info}/WHEEL", wheel))
    record_lines = [f"{arc},{record_hash(data)},{len(data)}" for arc, data in files]
    record_lines.append(f"{dist_info}/RECORD,,")
    files.append((f"{dist_info}/RECORD", ("\n".join(record_lines) + "\n").encode()))

    out = os.path.join(out_dir, f"{NAME}-{version}-py3-none-any.whl")
    tmp = out + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        for arc, data in files:
            info = zipfile.ZipInfo(arc, date_time=STAMPS[version])
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3  # Unix, so the mode below is read
            info.external_attr = (0o100644 << 16)
            zf.writestr(info, data)
    os.replace(tmp, out)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_wheels.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for version in sorted(STAMPS):
        print(build(version, out_dir))


if __name__ == "__main__":
    main()
