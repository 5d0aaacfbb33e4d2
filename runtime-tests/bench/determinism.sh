#!/usr/bin/env bash
# Determinism-layer benchmark: the cost of reprorun's pins (sorted getdents, seeded getrandom,
# pinned uname/sysinfo/affinity, the exec-time path) on real workloads, side by side with the
# same workloads bare and under bubblewrap (a sandbox that pins nothing), in one hyperfine run
# per workload. Prints medians and the ratios reprorun/bare and reprorun/bwrap. Not part of
# the test suite (timings on a shared machine are noise; ratios are what to read).
# DetTrace and hermit (ptrace-based determinism, 3-6x by their own papers) are not packaged
# for Debian and are not measured here.
#   sudo runtime-tests/bench/determinism.sh [RUNS]
# Needs root, hyperfine, bubblewrap, python3, perl, gcc, golang-go.
set -euo pipefail
runs=${1:-15}
source "$(dirname "$0")/lib.sh"
need hyperfine bwrap python3 perl gcc go
build_reprorun
make_work
src="$root/runtime-tests/probes/variation"
mkdir -p "$work/probes" "$work/build/input"
cp "$src"/run-all.sh "$src"/probe.sh "$src"/probe.py "$src"/probe.pl "$work/probes/"
gcc -O2 -static -o "$work/probes/probe-static" "$src/probe.c"
CGO_ENABLED=0 GO111MODULE=off GOCACHE="$work/gocache" GOPATH="$work/gopath" \
  go build -o "$work/probes/probe-go" "$src/probe.go"
for i in $(seq -w 1 24); do echo "$i" > "$work/build/input/entry-$i"; done
cd "$work/build"

# Every configuration runs the same programs: the sandbox's frozen PATH, here too.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# One script per workload, run from the build directory (probes at $work/probes).
workload() { printf '%s\n' "$2" > "$work/w-$1.sh"; names+=("$1"); }
names=()
workload probes "sh $work/probes/run-all.sh $work/probes"
workload python-imports "python3 -c 'import json, email.parser, http.client, asyncio, decimal, sqlite3'"
workload tree-walk "find /usr/share -xdev -maxdepth 4 | wc -l"
workload urandom-10k "python3 -c 'import os; [os.urandom(16) for _ in range(10000)]'"
workload exec-100 "for i in \$(seq 100); do /bin/true; done"
workload compute "python3 -c 'print(sum(i * i for i in range(3_000_000)))'"
printf '%-16s %12s %12s %14s %14s %12s %12s\n' workload "bare ms" "bwrap ms" "reprorun-min" "reprorun ms" "vs bare" "vs bwrap"
for name in "${names[@]}"; do
  w="$work/w-$name.sh"
  hyperfine -N --warmup 2 --runs "$runs" --export-json "$work/$name.json" \
    -n bare "sh $w" \
    -n bwrap "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev --bind $work $work --chdir $work/build sh $w" \
    -n reprorun-min "$bin exec --date now --random real --bind $work:$work -- sh $w" \
    -n reprorun "$bin exec --clock frozen --bind $work:$work -- sh $w" >/dev/null 2>&1 \
    || { echo "$name: hyperfine failed (run it by hand to see why)" >&2; continue; }
  python3 - "$work/$name.json" "$name" <<'PY'
import json, sys
r = {x["command"]: x["median"] * 1000 for x in json.load(open(sys.argv[1]))["results"]}
print(f"{sys.argv[2]:<16} {r['bare']:>12.1f} {r['bwrap']:>12.1f} {r['reprorun-min']:>14.1f} "
      f"{r['reprorun']:>14.1f} {r['reprorun'] / r['bare']:>11.2f}x {r['reprorun'] / r['bwrap']:>11.2f}x")
PY
done
echo "reprorun-min: --date now --random real (sandbox, sorted getdents, pinned identity);"
echo "reprorun: every pin, frozen clock. Ratios are reprorun (every pin) over the peer."
