#!/usr/bin/env bash
# Peak memory (issue 50): the supervisor's peak resident set per sandbox, and a 25,000-run
# study's merge.
#   1. `exec -- sleep 0.3` (a trivial command that outlives the start-up, so the sampler sees
#      the supervisor after every setup step; its peak is the kernel's VmHWM, see memory.py);
#   2. the same with the egress proxy on (`--allow-host`), the command making 200 small
#      requests through it to a loopback server: the supervisor and the proxy's helper
#      process;
#   3. `reproduce merge` and `audit merge` of N results (merge.sh, which prints each merge's
#      peak resident set from its rusage).
# Medians and maxima over RUNS runs, in KiB.
#   runtime-tests/bench/memory.sh [RUNS [N]]     (default 10 runs, N 25000; needs root)
# Needs python3, busybox (httpd). Not part of the test suite.
set -euo pipefail
runs=${1:-10}
total=${2:-25000}
source "$(dirname "$0")/lib.sh"
need python3 busybox
build_reprorun
make_work
bin=$(fresh "$bin" "$work/reprorun")
start_www
cd "$work"
requests=$(cat <<PY
import socket
req = b"GET http://bench.test:$port/small HTTP/1.1\r\nHost: bench.test:$port\r\nConnection: close\r\n\r\n"
for _ in range(200):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(req)
    while s.recv(65536):
        pass
    s.close()
PY
)
mem="$root/runtime-tests/bench/memory.py"
python3 "$mem" "exec -- sleep 0.3" "$runs" "$bin" -- sleep 0.3
python3 "$mem" "exec --allow-host, 200 requests" "$runs" "$bin" \
  --allow-host "bench.test:$port" --add-host bench.test:127.0.0.1 -- python3 -c "$requests"
REPRORUN_BIN=$bin "$root/runtime-tests/bench/merge.sh" "$total"
