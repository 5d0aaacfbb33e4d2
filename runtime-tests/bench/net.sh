#!/usr/bin/env bash
# Egress proxy benchmark (`--net allow`, spec/network.md), side by side in one run against the
# same loopback server reached directly (`--net host`):
#   1. throughput: a 256 MiB download (curl's average speed; median of RUNS) — target >= 1.0x (issue 50);
#   2. latency: 1000 small requests, each on a new connection, from one Python process
#      (mean per request) — target <= 1.2x (issue 50);
#   3. start-up: `exec --allow-host x -- /bin/true` vs `exec -- /bin/true` (hyperfine medians)
#      — target <= +1 ms.
# Prints each figure and its ratio. Not part of the test suite (timings on a shared machine
# are noise; ratios are what to read). With REPRORUN_PROXY_TIMING=DIR (a directory the
# sandbox's ids can write), the proxy notes its steps there: proxy-steps.py DIR prints them.
#   sudo runtime-tests/bench/net.sh [RUNS]
# Needs root, hyperfine, curl, busybox (httpd), python3.
set -euo pipefail
runs=${1:-5}
source "$(dirname "$0")/lib.sh"
need hyperfine curl busybox python3
build_reprorun
make_work
start_www
head -c 256M /dev/zero >"$work/www/big"
cd "$work"
allow=(--allow-host "bench.test:$port" --allow-host "127.0.0.1:$port" --add-host bench.test:127.0.0.1)

speed() { # speed ARGS... -- URL: median bytes/s of $runs downloads
  local url=${*: -1} args=("${@:1:$#-1}") i
  for i in $(seq "$runs"); do
    "$bin" exec "${args[@]}" -- curl -s -o /dev/null -w '%{speed_download}\n' "$url"
  done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
direct_bps=$(speed --net host "http://127.0.0.1:$port/big")
proxy_bps=$(speed "${allow[@]}" "http://bench.test:$port/big")

latency=$(cat <<PY
import socket, sys, time
proxied = sys.argv[1] == "proxy"
target = ("127.0.0.1", 3128) if proxied else ("127.0.0.1", $port)
path = "http://bench.test:$port/small" if proxied else "/small"
req = f"GET {path} HTTP/1.1\r\nHost: bench.test:$port\r\nConnection: close\r\n\r\n".encode()
t = time.perf_counter()
for _ in range(1000):
    s = socket.create_connection(target)
    s.sendall(req)
    while s.recv(65536):
        pass
    s.close()
print((time.perf_counter() - t) / 1000)
PY
)
direct_lat=$("$bin" exec --net host -- python3 -c "$latency" direct)
proxy_lat=$("$bin" exec "${allow[@]}" -- python3 -c "$latency" proxy)

hyperfine -N --warmup 10 --runs 100 --export-json "$work/startup.json" \
  -n "exec" "$bin exec -- /bin/true" \
  -n "exec --allow-host" "$bin exec --allow-host x.test -- /bin/true" >&2

python3 - "$direct_bps" "$proxy_bps" "$direct_lat" "$proxy_lat" "$work/startup.json" <<'PY'
import json, sys
d_bps, p_bps, d_lat, p_lat = map(float, sys.argv[1:5])
st = {r["command"]: r["median"] for r in json.load(open(sys.argv[5]))["results"]}
print(f"{'measure':<28}{'direct':>14}{'proxy':>14}{'ratio':>9}{'target':>10}")
print(f"{'download MiB/s':<28}{d_bps/2**20:>14.0f}{p_bps/2**20:>14.0f}{p_bps/d_bps:>9.2f}{'>= 1.0':>10}")
print(f"{'request latency ms':<28}{d_lat*1e3:>14.3f}{p_lat*1e3:>14.3f}{p_lat/d_lat:>9.2f}{'<= 1.2':>10}")
a, b = st["exec"], st["exec --allow-host"]
print(f"{'start-up ms (median)':<28}{a*1e3:>14.2f}{b*1e3:>14.2f}{'+%.2f ms' % ((b-a)*1e3):>9}{'<= +1 ms':>10}")
PY
