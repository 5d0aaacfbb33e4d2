#!/usr/bin/env bash
# Docker benchmark: `docker run --rm --network none IMAGE true` (the whole per-container
# path a harness pays: the client, dockerd, containerd's runc v2 shim, the runtime's create,
# start and delete) with reprorun (determinism on, its default; and off, through
# -e REPRORUN_DETERMINISM=off) and with runc, side by side in one hyperfine run, on a dockerd
# of the script's own (its own data root, exec root, socket; in a network namespace of its
# own, without Docker's bridge). Prints each median and runc's median over it (above 1: faster
# than runc). Not part of the test suite.
#   sudo runtime-tests/bench/docker.sh [RUNS]
# Needs root, hyperfine, dockerd + docker (docker.io), skopeo, busybox-static, python3.
# REPRORUN_BIN=PATH measures that binary instead of building the release one.
set -euo pipefail
runs=${1:-30}
source "$(dirname "$0")/lib.sh"
need hyperfine dockerd docker skopeo unshare timeout python3
build_reprorun
make_work
docker=/usr/bin/docker
[ -x "$docker" ] || docker=docker
"$root/images/busybox/build.sh" "$work/layout" >/dev/null
skopeo copy -q "oci:$work/layout:busybox:latest" "docker-archive:$work/busybox.tar:bench/busybox:latest"
exec_root=/run/reprorun-bench-docker-$$
unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh dockerd \
  --data-root "$work/data" --exec-root "$exec_root" -H "unix://$work/d.sock" \
  --pidfile "$work/d.pid" --bridge=none --iptables=false \
  --add-runtime "reprorun=$bin" >"$work/dockerd.log" 2>&1 &
dockerd_pid=$!
trap 'kill $dockerd_pid 2>/dev/null; wait $dockerd_pid 2>/dev/null; rm -rf "$work" "$exec_root"' EXIT
d() { timeout 120 "$docker" -H "unix://$work/d.sock" "$@"; }
for _ in $(seq 90); do d version >/dev/null 2>&1 && break; sleep 1; done
d version >/dev/null || { echo "docker.sh: dockerd did not start: $(tail -3 "$work/dockerd.log")" >&2; exit 1; }
d load -q -i "$work/busybox.tar" >/dev/null
run="$docker -H unix://$work/d.sock run --rm --network none"
hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/result.json" \
  -n "docker run, reprorun" "$run --runtime reprorun bench/busybox true" \
  -n "docker run, reprorun (determinism off)" "$run --runtime reprorun -e REPRORUN_DETERMINISM=off bench/busybox true" \
  -n "docker run, runc" "$run --runtime runc bench/busybox true" >&2
python3 - "$work/result.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["docker run, runc"]["median"]
print(f"{'command':<42}{'median ms':>12}{'runc / it':>12}")
for name, r in results.items():
    print(f"{name:<42}{r['median'] * 1000:>12.1f}{base / r['median']:>12.2f}")
PY
