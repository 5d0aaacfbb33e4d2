#!/usr/bin/env bash
# OCI benchmark: the lifecycle path (`run` of /bin/true on the same busybox bundle) of
# reprorun, crun and runc side by side in one hyperfine run, with reprorun's determinism
# layer on (its default) and off (annotation org.reprorun.determinism=off). Prints each
# median and its ratio to reprorun's. Then the same three through containerd, as an engine
# drives them: `ctr run --rm --runc-binary RUNTIME` of /bin/true (create, start, wait,
# delete through the runc shim) on a private containerd, each median and its ratio to
# crun's. Not part of the test suite.
#   sudo runtime-tests/bench/oci.sh [RUNS]
# Needs root, hyperfine, crun, runc, containerd + ctr, busybox-static, python3.
# REPRORUN_BIN=PATH measures that binary instead of building the release one.
# crun refuses this host's hybrid cgroup layout while /sys/fs/cgroup/unified is mounted, so
# the whole benchmark runs in a private mount namespace with it unmounted (same for all).
set -euo pipefail
runs=${1:-100}
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$@"
need hyperfine crun runc python3 containerd ctr containerd-shim-runc-v2
if [ -n "${REPRORUN_BIN:-}" ]; then bin=$REPRORUN_BIN; else build_reprorun; fi
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

# Through containerd: a private one (its own root, state and socket under $work).
mkdir "$work/ctrd"
cat >"$work/ctrd/config.toml" <<TOML
version = 2
root = "$work/ctrd/root"
state = "$work/ctrd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/ctrd/c.sock"
[ttrpc]
  address = "$work/ctrd/c.sock.ttrpc"
TOML
containerd --config "$work/ctrd/config.toml" >"$work/ctrd/log" 2>&1 &
ctrd=$!
trap 'kill $ctrd 2>/dev/null; wait $ctrd 2>/dev/null; rm -rf "$work"' EXIT
ctr_cmd="ctr --address $work/ctrd/c.sock -n reprorun-bench-$$"
for _ in $(seq 100); do $ctr_cmd version >/dev/null 2>&1 && break; sleep 0.1; done
$ctr_cmd version >/dev/null || { echo "oci.sh: containerd did not start:" >&2; cat "$work/ctrd/log" >&2; exit 1; }
run_in() { echo "$ctr_cmd run --rm --runc-binary $1 --rootfs $work/bundle/rootfs bench-$2 /bin/true"; }
hyperfine -N --warmup 5 --runs "$runs" --export-json "$work/ctr.json" \
  -n "ctr run (reprorun)" "$(run_in "$bin" reprorun)" \
  -n "ctr run (crun)" "$(run_in "$(command -v crun)" crun)" \
  -n "ctr run (runc)" "$(run_in "$(command -v runc)" runc)" >&2
python3 - "$work/ctr.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
crun = results["ctr run (crun)"]["median"]
print()
print(f"{'command':<34}{'median ms':>12}{'it / crun':>12}")
for name, r in results.items():
    print(f"{name:<34}{r['median'] * 1000:>12.2f}{r['median'] / crun:>12.2f}")
PY
