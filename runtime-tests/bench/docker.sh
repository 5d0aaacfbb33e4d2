#!/usr/bin/env bash
# Docker benchmark: `docker run --rm --network none IMAGE true` (the whole per-container
# path a harness pays: the client, dockerd, containerd's runc v2 shim, the runtime's create,
# start and delete) with reprorun (determinism on, its default; and off, through
# -e REPRORUN_DETERMINISM=off) and with runc, side by side in alternating rounds, on a dockerd
# of the script's own (its own data root, exec root, socket; in a network namespace of its
# own, without Docker's bridge). Prints each median and runc's median over it (above 1: faster
# than runc). Not part of the test suite.
#   sudo runtime-tests/bench/docker.sh [RUNS]
# Needs root, dockerd + docker (docker.io), skopeo, busybox-static, python3.
# REPRORUN_BIN=PATH measures that binary instead of building the release one.
set -euo pipefail
runs=${1:-30}
source "$(dirname "$0")/lib.sh"
need dockerd docker skopeo unshare timeout python3
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
# Alternating rounds (one run of each in turn, in a rotating order), not one series after
# another: on a shared machine the load moves within a series, and alternating spreads it
# over the three alike.
python3 - "$runs" "$docker" "unix://$work/d.sock" <<'PY'
import statistics, subprocess, sys, time
runs, docker, host = int(sys.argv[1]), sys.argv[2], sys.argv[3]
base = [docker, "-H", host, "run", "--rm", "--network", "none"]
cases = {
    "docker run, reprorun": ["--runtime", "reprorun"],
    "docker run, reprorun (determinism off)": ["--runtime", "reprorun", "-e", "REPRORUN_DETERMINISM=off"],
    "docker run, runc": ["--runtime", "runc"],
}
times = {name: [] for name in cases}
names = list(cases)
for i in range(runs + 3):
    for name in names[i % 3:] + names[: i % 3]:
        start = time.perf_counter()
        subprocess.run(base + cases[name] + ["bench/busybox", "true"], check=True, timeout=120)
        if i >= 3:  # three warm-up rounds
            times[name].append(time.perf_counter() - start)
runc = statistics.median(times["docker run, runc"])
print(f"{'command':<42}{'median ms':>12}{'runc / it':>12}")
for name, t in times.items():
    m = statistics.median(t)
    print(f"{name:<42}{m * 1000:>12.1f}{runc / m:>12.2f}")
PY
