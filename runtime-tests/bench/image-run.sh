#!/usr/bin/env bash
# Per-run cost of an image-backed run: `reprorun exec --image` against `podman run --rm` of
# the same image (the busybox recipe, imported into each one's own store once), each running
# `sh -c true` with no network, side by side, with the ratio. This is the part of every
# `reproduce` run on an instance's image that the image adds (the sandbox over the image's
# root); a podman run is what an organiser runs per instance without reprorun.
#   runtime-tests/bench/image-run.sh [RUNS]
# podman runs with runc (named: with crun installed podman picks crun, which refuses this
# host's hybrid cgroup layout), a private store (vfs), `--network none`, the cgroupfs manager
# and a file events log, so it touches neither the host's store nor systemd.
# Needs root, podman, hyperfine, python3.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need podman hyperfine python3
build_reprorun
make_work
runs=${1:-20}

"$root/images/busybox/build.sh" "$work/bb" >/dev/null
"$bin" image import --store "$work/store" --name bench/busybox:1 "$work/bb" >/dev/null
pod=(podman --root "$work/podroot" --runroot "$work/podrun" --storage-driver vfs
  --events-backend file --cgroup-manager cgroupfs --runtime runc)
# podman's default rlimits exceed this VM's hard limits (runc: "error setting rlimit type 7").
lim=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
# The layout as an oci-archive (podman names an `oci:` directory after its path).
tar -C "$work/bb" -cf "$work/bb.tar" .
"${pod[@]}" load --quiet -i "$work/bb.tar" >/dev/null
"${pod[@]}" tag "$("${pod[@]}" images -q | head -1)" localhost/bench/busybox:1
# Both run it once before they are timed (a broken side stops the benchmark).
"$bin" exec --store "$work/store" --image bench/busybox:1 -- sh -c true
"${pod[@]}" run --rm --network none "${lim[@]}" localhost/bench/busybox:1 sh -c true

hyperfine --warmup 2 --runs "$runs" --export-json "$work/result.json" \
  -n "reprorun exec --image" \
  "$bin exec --store $work/store --image bench/busybox:1 -- sh -c true" \
  -n "podman run --rm --network none" \
  "${pod[*]} run --rm --network none ${lim[*]} localhost/bench/busybox:1 sh -c true" >&2
print_ratios "$work/result.json" ms 34 \
  "ratio podman run / reprorun exec --image (above 1: reprorun is faster)=1/0"
