#!/usr/bin/env bash
# Builds a small Python image from the host's Python (Debian's python3.11):
#   images/python/build.sh OUT_DIR
#   PYTHON=/usr/bin/python3.X images/python/build.sh OUT_DIR   # another Python the host has
# OUT_DIR becomes an OCI image layout named python:X.Y (Cmd ["python3"]): the interpreter,
# the libraries ldd lists for it and for its extension modules, the standard library
# without test/, idlelib/, tkinter/ and turtledemo/, /bin/sh (Debian's static busybox: what
# subprocess, os.system and build backends run) and the pip and setuptools wheels Debian's
# ensurepip installs from, so `python3 -m venv` and `python3 -m ensurepip` work offline.
# Deterministic for a given host Python (SOURCE_DATE_EPOCH, default 0, stamps every entry).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR}
py=${PYTHON:-/usr/bin/python3.11}
ver=$(basename "$py" | sed 's/^python//')
stdlib=/usr/lib/python$ver
[ -x "$py" ] && [ -d "$stdlib" ] || { echo "build.sh: $py or $stdlib missing; apt-get install python3" >&2; exit 1; }
[ -f "$stdlib/ensurepip/__init__.py" ] || { echo "build.sh: $stdlib/ensurepip missing (venv, ensurepip); apt-get install python3-venv" >&2; exit 1; }
[ -x /bin/busybox ] || { echo "build.sh: /bin/busybox missing (the image's /bin/sh); apt-get install busybox-static" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root"/{usr/bin,etc,tmp,root,proc,sys,dev}
chmod 1777 "$root/tmp"
ln -s usr/bin "$root/bin"
cp "$py" "$root/usr/bin/python$ver"
ln -s "python$ver" "$root/usr/bin/python3"
ln -s python3 "$root/usr/bin/python"
# The standard library, without what a sandboxed run does not need.
mkdir -p "$root$stdlib"
tar -C "$stdlib" --exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo \
  --exclude=./lib2to3/tests --exclude='__pycache__' -cf - . | tar -C "$root$stdlib" -xf -
# Every shared library the interpreter and its extension modules load, with the loader.
{ ldd "$py"; find "$stdlib/lib-dynload" -name '*.so' -exec ldd {} \; ; } 2>/dev/null |
  awk '/=> \//{print $3} /^\t\/[^ ]*ld-linux/{print $1}' | sort -u |
  while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
# The loader is also reached through the architecture's canonical path.
for ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do
  if [ -e "$ld" ] && [ ! -e "$root$ld" ]; then mkdir -p "$root$(dirname "$ld")"; cp -L "$ld" "$root$ld"; fi
done
# /bin/sh: a static busybox, which needs no library.
cp /bin/busybox "$root/usr/bin/busybox"
ln -s busybox "$root/usr/bin/sh"
# Debian's ensurepip (and so venv) installs pip and setuptools from these wheels
# (sysconfig's WHEEL_PKG_DIR; python3-pip-whl, python3-setuptools-whl).
wheels=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("WHEEL_PKG_DIR") or "")')
if [ -n "$wheels" ]; then
  ls "$wheels"/pip-*.whl >/dev/null 2>&1 || { echo "build.sh: no pip wheel in $wheels; apt-get install python3-venv" >&2; exit 1; }
  mkdir -p "$root$wheels"
  cp "$wheels"/*.whl "$root$wheels/"
fi
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' > "$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' > "$root/etc/group"
python3 "$here/../oci-layout.py" "$root" "$out" --name "python:$ver" --cmd '["python3"]' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env PYTHONDONTWRITEBYTECODE=1 >/dev/null
echo "$out"
