#!/usr/bin/env bash
# Builds a small Python image from the host's Python (Debian's python3.11):
#   images/python/build.sh OUT_DIR
# OUT_DIR becomes an OCI image layout named python:3.11 (Cmd ["python3"]): the interpreter,
# the libraries ldd lists for it and for its extension modules, and the standard library
# without test/, idlelib/, tkinter/ and turtledemo/. Deterministic for a given host Python
# (SOURCE_DATE_EPOCH, default 0, stamps every entry).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR}
py=${PYTHON:-/usr/bin/python3.11}
ver=$(basename "$py" | sed 's/^python//')
stdlib=/usr/lib/python$ver
[ -x "$py" ] && [ -d "$stdlib" ] || { echo "build.sh: $py or $stdlib missing; apt-get install python3" >&2; exit 1; }

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
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' > "$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' > "$root/etc/group"
python3 "$here/../oci-layout.py" "$root" "$out" --name "python:$ver" --cmd '["python3"]' \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env PYTHONDONTWRITEBYTECODE=1 >/dev/null
echo "$out"
