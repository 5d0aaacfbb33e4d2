# Sourced by the benchmarks: the repository root, tool checks, a release build, a scratch
# directory, and (for crun) a private mount namespace without the hybrid v2 hierarchy.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# need TOOL...: stop with one line naming the first tool that is not installed.
need() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || { echo "$(basename "$0"): $t not installed" >&2; exit 1; }
  done
}

# build_reprorun: the release binary, as $bin ($REPRORUN_BIN if set).
build_reprorun() {
  # $REPRORUN_BIN: measure this binary instead (e.g. a debug build), building nothing.
  if [ -n "${REPRORUN_BIN:-}" ]; then bin=$REPRORUN_BIN; return; fi
  "$root/.ci/musl"
  (cd "$root" && cargo build --release --quiet)
  bin="$root/target/x86_64-unknown-linux-musl/release/reprorun"
}

# fresh SRC DEST: a fresh executable copy of SRC at DEST, printed. The reprorun binaries a
# benchmark compares are measured from copies made the same way: how a binary's pages came
# into the page cache (written just now, or read back through readahead) moved its start-up
# by up to 10 % on our VM, more than the changes measured with $REPRORUN_BASE_BIN (issue 20).
fresh() { cat "$1" >"$2" && chmod +x "$2" && echo "$2"; }

# make_work: a scratch directory, as $work, removed on exit.
make_work() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}

# in_private_mount_ns "$@": re-runs the script in a private mount namespace and unmounts
# /sys/fs/cgroup/unified there (crun refuses this host's hybrid cgroup layout while it is
# mounted; the same for every runtime measured).
in_private_mount_ns() {
  if [ -z "${REPRORUN_BENCH_INNER:-}" ]; then
    exec unshare --mount --propagation private env REPRORUN_BENCH_INNER=1 "$0" "$@"
  fi
  umount /sys/fs/cgroup/unified 2>/dev/null || true
}

# --- net-tls.sh and net-replay.sh (issue 47): a loopback TLS server under a test CA ---

# tls_server [FILE:BYTES...]: in $work (the current directory), a P-256 test CA (ca.pem) and
# a certificate for bench.test signed by it, ./www holding `small` ("ok") and each FILE of
# BYTES zero bytes, and `openssl s_server -WWW` serving ./www on a free loopback port: $port,
# its pid $server (killed on exit, $work removed), and $allow, the `--allow-host` and
# `--add-host` options that reach it by name and by address.
tls_server() {
  local f
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
    -out ca.pem -days 30 -subj "/CN=bench CA" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr \
    -subj "/CN=bench.test" 2>/dev/null
  printf 'subjectAltName=DNS:bench.test\n' >ext
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 30 \
    -extfile ext 2>/dev/null
  mkdir -p www
  printf 'ok' >www/small
  for f in "$@"; do head -c "${f#*:}" /dev/zero >"www/${f%%:*}"; done
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  (cd www && exec openssl s_server -quiet -WWW -accept "127.0.0.1:$port" -cert ../srv.pem \
    -key ../srv.key -naccept 1000000 >/dev/null 2>&1) &
  server=$!
  trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
  sleep 0.5
  allow=(--allow-host "bench.test:$port" --allow-host "127.0.0.1:$port" --add-host bench.test:127.0.0.1)
}

# --- The loopback web server of net.sh and memory.sh (h50v) ---

# start_www: busybox httpd serving $work/www (made, with a 2-byte file `small`) on a free
# loopback port, as $port; stopped on exit, with $work removed (after make_work).
start_www() {
  mkdir -p "$work/www"
  printf 'ok' >"$work/www/small"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  busybox httpd -f -p "127.0.0.1:$port" -h "$work/www" &
  server=$!
  trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
  sleep 0.3
}

# print_ratios RESULT_JSON UNIT WIDTH "LABEL=NUM/DEN"...: hyperfine's exported results, one
# line a command (its mean ± standard deviation in UNIT, ms or s, the name padded to WIDTH),
# then one line a ratio, `LABEL: X.XXx`, X being command NUM's mean over command DEN's
# (0-based, in hyperfine's order). LABEL may hold anything but `=`.
print_ratios() {
  python3 - "$@" <<'PY'
import json, sys
path, unit, width, *ratios = sys.argv[1:]
r = json.load(open(path))["results"]
scale, places = (1000, 1) if unit == "ms" else (1, 3)
for x in r:
    print(f"{x['command']:<{int(width)}} {x['mean'] * scale:.{places}f} {unit} ± {x['stddev'] * scale:.{places}f}")
for spec in ratios:
    label, pair = spec.rsplit("=", 1)
    num, den = (int(i) for i in pair.split("/"))
    print(f"{label}: {r[num]['mean'] / r[den]['mean']:.2f}x")
PY
}
