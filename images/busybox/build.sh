#!/usr/bin/env bash
# Builds a minimal busybox image from Debian's static busybox (busybox-static).
#   images/busybox/build.sh OUT_DIR
#       OUT_DIR becomes an OCI image layout named busybox:latest (Cmd ["/bin/sh"]), ready for
#       `reprorun image import OUT_DIR`. Deterministic: same busybox, same digests
#       (SOURCE_DATE_EPOCH, default 0, stamps every entry).
#   images/busybox/build.sh --bundle OUT_DIR [ARG...]
#       OUT_DIR/rootfs (usable with `reprorun exec --rootfs`) and OUT_DIR/config.json, a
#       runc/crun bundle whose process runs ARG... (default: /bin/sh); needs runc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=0
if [ "${1:-}" = --bundle ]; then bundle=1; shift; fi
out=${1:?usage: build.sh [--bundle] OUT_DIR [ARG...]}
shift
busybox=${BUSYBOX:-/bin/busybox}
[ -x "$busybox" ] || { echo "build.sh: $busybox missing; apt-get install busybox-static" >&2; exit 1; }
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' || ldd "$busybox" 2>&1 | grep -q 'not a dynamic' ||
  { echo "build.sh: $busybox is not static; install busybox-static" >&2; exit 1; }

make_rootfs() {
  local root=$1
  rm -rf "$root"
  mkdir -p "$root"/{bin,etc,proc,sys,dev,tmp,root,usr/bin,usr/sbin,sbin,var}
  chmod 1777 "$root/tmp"
  chmod 0700 "$root/root"
  cp "$busybox" "$root/bin/busybox"
  chmod 0755 "$root/bin/busybox"
  for app in $("$busybox" --list); do
    [ "$app" = busybox ] || ln -sf busybox "$root/bin/$app"
  done
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' > "$root/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' > "$root/etc/group"
  chmod 0644 "$root/etc/passwd" "$root/etc/group"
}

if [ $bundle = 0 ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  make_rootfs "$work/rootfs"
  python3 "$here/../oci-layout.py" "$work/rootfs" "$out" --name busybox:latest --cmd '["/bin/sh"]' >/dev/null
  echo "$out"
  exit 0
fi

make_rootfs "$out/rootfs"
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
