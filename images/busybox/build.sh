#!/usr/bin/env bash
# Builds a minimal busybox root filesystem and an OCI runtime bundle around it.
#   images/busybox/build.sh OUT_DIR [ARG...]
# OUT_DIR/rootfs is the tree (usable with `reprorun exec --rootfs`); OUT_DIR/config.json is a
# runc/crun bundle config whose process runs ARG... (default: /bin/sh). Needs Debian's
# busybox-static (a static binary, so the tree needs no libraries).
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR [ARG...]}
shift
busybox=${BUSYBOX:-/bin/busybox}
[ -x "$busybox" ] || { echo "build.sh: $busybox missing; apt-get install busybox-static" >&2; exit 1; }
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' || ldd "$busybox" 2>&1 | grep -q 'not a dynamic' ||
  { echo "build.sh: $busybox is not static; install busybox-static" >&2; exit 1; }

rm -rf "$out/rootfs"
mkdir -p "$out/rootfs"/{bin,etc,proc,sys,dev,tmp,root}
cp "$busybox" "$out/rootfs/bin/busybox"
for app in $("$busybox" --list); do
  [ "$app" = busybox ] || ln -sf busybox "$out/rootfs/bin/$app"
done
echo 'root:x:0:0:root:/root:/bin/sh' > "$out/rootfs/etc/passwd"
echo 'root:x:0:' > "$out/rootfs/etc/group"

args_json=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:] or ["/bin/sh"]))' "$@")
( cd "$out" && rm -f config.json && runc spec )
python3 - "$out/config.json" "$args_json" <<'PY'
import json, sys
path, args = sys.argv[1], json.loads(sys.argv[2])
cfg = json.load(open(path))
cfg["process"]["terminal"] = False
cfg["process"]["args"] = args
cfg["root"]["readonly"] = True
json.dump(cfg, open(path, "w"), indent=2)
PY
echo "$out"
