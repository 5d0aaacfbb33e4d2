#!/usr/bin/env bash
# Start-up benchmark: `reprorun exec -- /bin/true` against bubblewrap, crun and runc on the
# same busybox bundle, side by side in one hyperfine run. Prints each median and its ratio to
# reprorun's. Not part of the test suite (timings on a shared machine are noise; ratios are
# what to read).
#   sudo runtime-tests/bench/startup.sh [RUNS]
# Needs root, hyperfine, bubblewrap, crun, runc, busybox-static, python3.
# crun refuses this host's hybrid cgroup layout while /sys/fs/cgroup/unified is mounted, so
# the whole benchmark runs in a private mount namespace with it unmounted (same for all).
set -euo pipefail
runs=${1:-200}
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$@"
need hyperfine bwrap crun runc python3
build_reprorun
make_work
"$root/images/busybox/build.sh" --bundle "$work/bundle" /bin/true >/dev/null
cd "$work"
hyperfine -N --warmup 10 --runs "$runs" --export-json "$work/result.json" \
  -n reprorun "$bin exec -- /bin/true" \
  -n "reprorun --date now" "$bin exec --date now -- /bin/true" \
  -n "reprorun --rootfs" "$bin exec --rootfs $work/bundle/rootfs -- /bin/true" \
  -n bwrap "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev /bin/true" \
  -n crun "crun run --bundle $work/bundle reprorun-bench-crun" \
  -n runc "runc run --bundle $work/bundle reprorun-bench-runc" >&2
python3 - "$work/result.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["reprorun"]["median"]
targets = {"bwrap": 1.0, "crun": 0.5, "runc": 0.15}
print(f"{'command':<20}{'median ms':>12}{'reprorun / it':>16}{'target':>10}")
for name, r in results.items():
    ratio = base / r["median"]
    target = f"<= {targets[name]}" if name in targets else ""
    print(f"{name:<20}{r['median'] * 1000:>12.2f}{ratio:>16.2f}{target:>10}")
PY
