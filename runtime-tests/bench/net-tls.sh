#!/usr/bin/env bash
# The cost of TLS termination (`--inject-env`, spec/network.md; issue 47), side by side in one
# run against the same loopback TLS server (openssl s_server -WWW, a test CA made here):
#   direct       `--net host`, the client talks TLS to the server;
#   tunnel       `--allow-host`: CONNECT, the proxy splices the client's TLS through;
#   terminating  `--inject-env`: the proxy ends the client's TLS with the run's CA and opens
#                its own to the server (verified with --upstream-ca), rewriting request heads.
# Figures:
#   1. a streamed response: a 256 MiB download (curl's average speed; median of RUNS)
#      — target: terminating >= 0.9x the tunnel;
#   2. 1000 small requests, each on a new connection with its own TLS handshake, from one
#      Python process (mean per request) — target: terminating <= +1 ms over the tunnel;
#      and the tunnel against direct (goal <= 1.2x).
# Prints each figure and its ratios. Not part of the test suite (timings on a shared machine
# are noise; ratios are what to read).
#   sudo runtime-tests/bench/net-tls.sh [RUNS]
# Needs root, curl, openssl, python3.
set -euo pipefail
runs=${1:-5}
source "$(dirname "$0")/lib.sh"
need curl openssl python3
build_reprorun
make_work
cd "$work"
tls_server big:256M
export BENCH_KEY=bench-0123456789abcdefXYZ
# --date now: the test certificates are made now (the run's own CA is valid at any date).
declare -A mode=(
  [direct]="--date now --net host"
  [tunnel]="--date now ${allow[*]}"
  [terminating]="--date now ${allow[*]} --inject-env BENCH_KEY:bench.test:$port --upstream-ca $work/ca.pem"
)
# The client's CA: the test CA, but the run's bundle where the proxy terminates.
cafile() { [ "$1" = terminating ] && echo /run/reprorun-ca.pem || echo /work/ca.pem; }
resolve=(--resolve "bench.test:$port:127.0.0.1")

speed() { # speed MODE: median bytes/s of $runs downloads
  local m=$1 i
  for i in $(seq "$runs"); do
    # shellcheck disable=SC2086
    "$bin" exec ${mode[$m]} -- curl -s "${resolve[@]}" --cacert "$(cafile "$m")" \
      -H "Authorization: Bearer $BENCH_KEY" -o /dev/null -w '%{speed_download}\n' \
      "https://bench.test:$port/big"
  done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

latency=$(cat <<PY
import os, socket, ssl, sys, time
proxied, cafile = sys.argv[1] != "direct", sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile)
key = os.environ.get("BENCH_KEY", "")
req = f"GET /small HTTP/1.1\r\nHost: bench.test\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n".encode()
def one():
    if proxied:
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"CONNECT bench.test:$port HTTP/1.1\r\n\r\n")
        assert b" 200 " in s.recv(200)
    else:
        s = socket.create_connection(("127.0.0.1", $port))
    t = ctx.wrap_socket(s, server_hostname="bench.test")
    t.sendall(req)
    try:
        while t.recv(65536):
            pass
    except ssl.SSLError:
        pass
    t.close()
for _ in range(20):
    one()
t = time.perf_counter()
for _ in range(1000):
    one()
print((time.perf_counter() - t) / 1000)
PY
)
declare -A bps lat
for m in direct tunnel terminating; do
  bps[$m]=$(speed "$m")
  # shellcheck disable=SC2086
  lat[$m]=$("$bin" exec ${mode[$m]} -- python3 -c "$latency" "$m" "$(cafile "$m")")
done

python3 - "${bps[direct]}" "${bps[tunnel]}" "${bps[terminating]}" \
  "${lat[direct]}" "${lat[tunnel]}" "${lat[terminating]}" <<'PY'
import sys
bd, bt, bx, ld, lt, lx = map(float, sys.argv[1:7])
print(f"{'measure':<24}{'direct':>10}{'tunnel':>10}{'terminating':>13}{'term/tunnel':>13}{'tunnel/direct':>15}")
print(f"{'download MiB/s':<24}{bd/2**20:>10.0f}{bt/2**20:>10.0f}{bx/2**20:>13.0f}{bx/bt:>12.2f}x{bt/bd:>14.2f}x")
print(f"{'request ms (TLS each)':<24}{ld*1e3:>10.3f}{lt*1e3:>10.3f}{lx*1e3:>13.3f}{lx/lt:>12.2f}x{lt/ld:>14.2f}x")
print(f"terminating adds {(lx-lt)*1e3:+.3f} ms a request over the tunnel (target <= +1 ms); "
      f"streamed {bx/bt:.2f}x the tunnel (target >= 0.9x)")
PY
