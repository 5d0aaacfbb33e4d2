#!/usr/bin/env bash
# OCI benchmark: the lifecycle path (`run` of /bin/true on the same busybox bundle) of
# reprorun, crun and runc side by side in one hyperfine run, with reprorun's determinism
# layer on (its default) and off (annotation org.reprorun.determinism=off). Prints each
# median and its ratio to reprorun's. Not part of the test suite.
#   sudo runtime-tests/bench/oci.sh [RUNS]
# Needs root, hyperfine, crun, runc, busybox-static, python3.
# crun refuses this host's hybrid cgroup layout while /sys/fs/cgroup/unified is mounted, so
# the whole benchmark runs in a private mount namespace with it unmounted (same for all).
set -euo pipefail
runs=${1:-100}
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$@"
need hyperfine crun runc python3
build_reprorun
make_work
"$root/images/busybox/build.sh" --bundle "$work/bundle" /bin/true >/dev/null
# The same bundle with the determinism layer off.
mkdir "$work/plain"
ln -s "$work/bundle/rootfs" "$work/plain/rootfs"
python3 - "$work/bundle/config.json" "$work/plain/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.setdefault("annotations", {})["org.reprorun.determinism"] = "off"
json.dump(c, open(sys.argv[2], "w"))
PY
cd "$work"
hyperfine -N --warmup 10 --runs "$runs" --export-json "$work/result.json" \
  -n "reprorun run" "$bin --root $work/state run --bundle $work/bundle bench-reprorun" \
  -n "reprorun run (determinism off)" "$bin --root $work/state run --bundle $work/plain bench-plain" \
  -n "crun run" "crun --root $work/crun run --bundle $work/bundle bench-crun" \
  -n "runc run" "runc --root $work/runc run --bundle $work/bundle bench-runc" >&2
python3 - "$work/result.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["reprorun run"]["median"]
print(f"{'command':<34}{'median ms':>12}{'reprorun / it':>16}")
for name, r in results.items():
    print(f"{name:<34}{r['median'] * 1000:>12.2f}{base / r['median']:>16.2f}")
PY
