#!/usr/bin/env python3
"""Packs a root filesystem directory into a one-layer OCI image layout, deterministically.

    oci-layout.py ROOTFS OUT_DIR --name NAME:TAG [--cmd JSON] [--entrypoint JSON]
                  [--env KEY=VALUE]... [--workdir DIR] [--user USER]

Entries are sorted, owned by 0:0, and stamped with SOURCE_DATE_EPOCH (default 0); the gzip
header carries no name or time. The same ROOTFS and arguments give the same digests.
"""
import argparse, gzip, hashlib, io, json, os, shutil, stat, sys, tarfile

p = argparse.ArgumentParser()
p.add_argument("rootfs")
p.add_argument("out")
p.add_argument("--name", required=True)
p.add_argument("--cmd")
p.add_argument("--entrypoint")
p.add_argument("--env", action="append", default=[])
p.add_argument("--workdir")
p.add_argument("--user")
a = p.parse_args()
epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))

def walk(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for n in sorted(dirnames + filenames):
            out.append(os.path.join(dirpath, n))
    return sorted(out, key=lambda p: os.path.relpath(p, root).split(os.sep))

raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
    seen = {}
    for path in walk(a.rootfs):
        rel = os.path.relpath(path, a.rootfs)
        st = os.lstat(path)
        info = tar.gettarinfo(path, arcname=rel)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = epoch
        key = (st.st_dev, st.st_ino)
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            if key in seen:
                info.type, info.linkname, info.size = tarfile.LNKTYPE, seen[key], 0
                tar.addfile(info)
                continue
            seen[key] = rel
        if info.isreg():
            with open(path, "rb") as f:
                tar.addfile(info, f)
        else:
            tar.addfile(info)
layer_raw = raw.getvalue()
gz = io.BytesIO()
with gzip.GzipFile(filename="", mode="wb", fileobj=gz, mtime=0, compresslevel=6) as g:
    g.write(layer_raw)
layer = gz.getvalue()

def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()

created = __import__("datetime").datetime.fromtimestamp(epoch, __import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
conf = {"Env": a.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
if a.cmd: conf["Cmd"] = json.loads(a.cmd)
if a.entrypoint: conf["Entrypoint"] = json.loads(a.entrypoint)
if a.workdir: conf["WorkingDir"] = a.workdir
if a.user: conf["User"] = a.user
arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
config = json.dumps({
    "created": created, "architecture": arch, "os": "linux", "config": conf,
    "rootfs": {"type": "layers", "diff_ids": [sha(layer_raw)]},
    "history": [{"created": created, "created_by": "reprorun images/oci-layout.py"}],
}, sort_keys=True).encode()
manifest = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(layer), "size": len(layer)}],
}, sort_keys=True).encode()
index = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(manifest),
                   "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": a.name}}],
}, sort_keys=True).encode()

shutil.rmtree(a.out, ignore_errors=True)
os.makedirs(os.path.join(a.out, "blobs", "sha256"))
for blob in (layer, config, manifest):
    with open(os.path.join(a.out, "blobs", "sha256", hashlib.sha256(blob).hexdigest()), "wb") as f:
        f.write(blob)
with open(os.path.join(a.out, "index.json"), "wb") as f:
    f.write(index)
with open(os.path.join(a.out, "oci-layout"), "w") as f:
    f.write('{"imageLayoutVersion":"1.0.0"}')
print(sha(manifest))
