#!/usr/bin/env bash
# The latency of a replayed request (`--net-replay`, spec/network.md; issue 47 section 2),
# side by side in one run against the same loopback TLS server (openssl s_server -WWW, a test
# CA made here):
#   direct   `--net host`, the client talks TLS to the server;
#   tunnel   `--allow-host`: CONNECT, the proxy splices the client's TLS through;
#   record   `--net-record`: the proxy terminates TLS, verifies the server, records;
#   replay   `--net-replay` with the server stopped: the proxy answers from the cassette.
# The figure: 1000 small requests, each on a new connection with its own TLS handshake, from
# one Python process (mean per request), and the ratios to direct and to the tunnel. Not part
# of the test suite (timings on a shared machine are noise; ratios are what to read).
#   sudo runtime-tests/bench/net-replay.sh
# Needs root, openssl, python3.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need openssl python3
build_reprorun
make_work
cd "$work"
tls_server
declare -A mode=(
  [direct]="--date now --net host"
  [tunnel]="--date now ${allow[*]}"
  [record]="--date now ${allow[*]} --net-record $work/tape --upstream-ca $work/ca.pem"
  [replay]="--date now --net-replay $work/tape"
)
# The client's CA: the test CA, but the run's bundle where the proxy terminates.
cafile() { case $1 in record | replay) echo /run/reprorun-ca.pem ;; *) echo /work/ca.pem ;; esac; }

latency=$(cat <<PY
import socket, ssl, sys, time
proxied, cafile = sys.argv[1] != "direct", sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile)
req = b"GET /small HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n"
def one():
    if proxied:
        s = socket.create_connection(("127.0.0.1", 3128))
        s.sendall(b"CONNECT bench.test:$port HTTP/1.1\r\n\r\n")
        assert b" 200 " in s.recv(200)
    else:
        s = socket.create_connection(("127.0.0.1", $port))
    t = ctx.wrap_socket(s, server_hostname="bench.test")
    t.sendall(req)
    got = b""
    try:
        while (b := t.recv(65536)):
            got += b
    except ssl.SSLError:
        pass
    assert got.startswith(b"HTTP/1.") and b" 200 " in got.split(b"\r\n")[0], got[:200]
    t.close()
for _ in range(20):
    one()
t = time.perf_counter()
for _ in range(1000):
    one()
print((time.perf_counter() - t) / 1000)
PY
)
declare -A lat
for m in direct tunnel record replay; do
  if [ "$m" = replay ]; then kill "$server"; wait "$server" 2>/dev/null || true; fi
  # shellcheck disable=SC2086
  lat[$m]=$("$bin" exec ${mode[$m]} -- python3 -c "$latency" "$m" "$(cafile "$m")")
done
python3 - "${lat[direct]}" "${lat[tunnel]}" "${lat[record]}" "${lat[replay]}" <<'PY'
import sys
d, t, r, p = map(float, sys.argv[1:5])
print(f"{'request ms (TLS each)':<24}{'direct':>10}{'tunnel':>10}{'record':>10}{'replay':>10}")
print(f"{'':<24}{d*1e3:>10.3f}{t*1e3:>10.3f}{r*1e3:>10.3f}{p*1e3:>10.3f}")
print(f"replay {p/d:.2f}x direct, {p/t:.2f}x the tunnel; record {r/t:.2f}x the tunnel")
PY
