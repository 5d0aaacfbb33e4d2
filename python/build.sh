#!/usr/bin/env bash
# Builds the reprorun wheel into OUT_DIR: reprorun-VERSION-py3-none-<x86_64 Linux tags>.whl,
# the Python package (python/src/reprorun) with the static musl binary as its `reprorun`
# command, VERSION being the binary's (Cargo.toml). Offline after the README's set-up: cargo
# builds the binary (release, --locked), python3's standard library writes the wheel.
#
#   python/build.sh OUT_DIR                     # builds the release binary first
#   REPRORUN_BIN=PATH python/build.sh OUT_DIR   # packs an already built binary (tests do)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: python/build.sh OUT_DIR" >&2; exit 2; }
out=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n1)
[ -n "$version" ] || { echo "python/build.sh: no version in Cargo.toml" >&2; exit 1; }
bin=${REPRORUN_BIN:-}
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release --locked --bin reprorun)
  bin="${CARGO_TARGET_DIR:-$root/target}/x86_64-unknown-linux-musl/release/reprorun"
fi
# The wheel must carry the binary of this version, not another one found lying about.
got=$("$bin" --version | awk '{print $2}')
[ "$got" = "$version" ] || { echo "python/build.sh: $bin is version $got, Cargo.toml says $version" >&2; exit 1; }
python3 "$here/build_wheel.py" --version "$version" --binary "$bin" --out "$out"
