#!/usr/bin/env bash
# Pull throughput: `reprorun image pull` against `skopeo copy` of the same image from the same
# registry on loopback (Debian's docker-registry, plain HTTP), side by side, with the ratio.
#   runtime-tests/bench/pull.sh [RUNS]
# The image: the busybox recipe's root plus two layers of this host's files (/usr/lib/python3.11
# and /usr/share/doc: many small files, about 170 MB unpacked), gzip, pushed once with skopeo.
# reprorun's side downloads (4 blobs at a time), verifies, and imports into a fresh store
# (unpacked, ready for `exec --image`); skopeo's side copies the blobs into a fresh OCI layout
# (downloaded and verified, not unpacked: less work); the third line is the same work as
# reprorun's, done the way it was before `image pull` (skopeo copy, then image import). Every
# run starts from nothing. The fourth line is podman pull into a private store of its own
# (download, verify and unpack into overlay layers: the same work as reprorun's, by the
# engine users have).
# Needs root, docker-registry, skopeo, podman, hyperfine, python3, curl.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need docker-registry skopeo podman hyperfine python3 curl
build_reprorun
make_work
runs=${1:-5}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/registry.yml" <<YML
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$port
YML
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
reg_pid=$!
trap 'kill $reg_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done

"$root/images/busybox/build.sh" "$work/bb" >/dev/null
layout="$work/bench"
skopeo copy --quiet "oci:$work/bb:busybox:latest" "oci:$layout:latest"
# One gzip layer per directory (umoci insert truncates some layers of this host's files).
python3 - "$layout" /usr/lib/python3.11 /usr/share/doc <<'PY'
import gzip, hashlib, io, json, os, sys, tarfile
root, dirs = sys.argv[1], [d for d in sys.argv[2:] if os.path.isdir(d)]
blobs = os.path.join(root, "blobs/sha256")
def put(b):
    h = hashlib.sha256(b).hexdigest()
    open(os.path.join(blobs, h), "wb").write(b)
    return "sha256:" + h, len(b)
get = lambda d: json.load(open(os.path.join(blobs, d.split(":")[1])))
ix = json.load(open(os.path.join(root, "index.json")))
m = get(ix["manifests"][0]["digest"])
cfg = get(m["config"]["digest"])
for d in dirs:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.add(d, arcname=d.lstrip("/"), filter=lambda i: i if (i.isfile() or i.isdir() or i.issym()) else None)
    raw = raw.getvalue()
    gz = gzip.compress(raw, compresslevel=6, mtime=0)
    digest, size = put(gz)
    m["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": size})
    cfg["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(raw).hexdigest())
m["config"]["digest"], m["config"]["size"] = put(json.dumps(cfg).encode())
md, ms = put(json.dumps(m).encode())
ix["manifests"][0].update(digest=md, size=ms)
json.dump(ix, open(os.path.join(root, "index.json"), "w"))
PY
ref="127.0.0.1:$port/bench/image:1"
skopeo copy --quiet --preserve-digests --dest-tls-verify=false "oci:$layout:latest" "docker://$ref"
python3 - "$layout" <<'PY'
import json, sys, os
root = sys.argv[1]
blob = lambda d: os.path.join(root, "blobs/sha256", d.split(":")[1])
ix = json.load(open(os.path.join(root, "index.json")))
m = json.load(open(blob(ix["manifests"][0]["digest"])))
total = sum(l["size"] for l in m["layers"])
print(f"image: {len(m['layers'])} layers, {total/1e6:.1f} MB compressed")
PY
"$bin" image pull --store "$work/check" --tls-verify=false "$ref"
"$bin" exec --store "$work/check" --image "$ref" -- sh -c 'ls /usr/share/doc | wc -l' >/dev/null

hyperfine --warmup 1 --runs "$runs" --export-json "$work/result.json" \
  -n "reprorun image pull (download, verify, unpack)" \
  --prepare "rm -rf $work/store" \
  "$bin image pull --store $work/store --tls-verify=false $ref" \
  -n "skopeo copy to an OCI layout (download, verify)" \
  --prepare "rm -rf $work/skopeo" \
  "skopeo copy --quiet --src-tls-verify=false docker://$ref oci:$work/skopeo:latest" \
  -n "skopeo copy, then reprorun image import (the way before image pull)" \
  --prepare "rm -rf $work/skopeo2 $work/store2" \
  "skopeo copy --quiet --src-tls-verify=false docker://$ref oci:$work/skopeo2:latest && $bin image import --store $work/store2 $work/skopeo2 >/dev/null" \
  -n "podman pull (download, verify, unpack into its store)" \
  --prepare "rm -rf $work/podroot $work/podrun" \
  "podman --root $work/podroot --runroot $work/podrun --events-backend file --cgroup-manager cgroupfs pull --quiet --tls-verify=false $ref >/dev/null" >&2
print_ratios "$work/result.json" s 52 \
  "ratio skopeo copy / reprorun pull (above 1: reprorun is faster; skopeo does not unpack)=1/0" \
  "ratio skopeo copy + image import / reprorun pull (the same work)=2/0" \
  "ratio podman pull / reprorun pull (the same work, by the engine)=3/0"
