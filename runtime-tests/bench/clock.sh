#!/usr/bin/env bash
# Clock benchmark: ns per clock_gettime(CLOCK_REALTIME) in a tight loop, bare vDSO vs an
# LD_PRELOAD pass-through (the floor of any interposer) vs the bare read inside a time
# namespace with a monotonic offset, as the sandbox has (the vDSO's slower time-namespace path,
# which every read inside pays) vs reprorun (dynamic binary, preload
# path) vs libfaketime vs reprorun (static binary, injected clock; tick mode through the
# seccomp notification), in one run, ROUNDS rounds alternating the paths: medians, and the
# median of each round's ratio to the bare read;
# then the start-up cost the time layer adds to `reprorun exec -- /bin/true` (hyperfine,
# --date now vs the default fake clock).
#   runtime-tests/bench/clock.sh [ITERATIONS [ROUNDS]]
# $REPRORUN_BASE_BIN=PATH adds rows for that reprorun binary's dynamic and static paths (an
# earlier build, to measure a change side by side). Needs gcc (with static libc), libfaketime,
# hyperfine. Not part of the test suite.
set -euo pipefail
n=${1:-20000000}
rounds=${2:-5}
source "$(dirname "$0")/lib.sh"
build_reprorun
make_work
gcc -O2 -o "$work/dyn" "$root/runtime-tests/bench/clockbench.c"
gcc -O2 -static -o "$work/static" "$root/runtime-tests/bench/clockbench.c"
gcc -O2 -shared -fPIC -o "$work/passthrough.so" "$root/runtime-tests/bench/passthrough.c" -ldl
faketime_lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
[ -n "$faketime_lib" ] || { echo "clock.sh: libfaketime not installed" >&2; exit 1; }
bin=$(fresh "$bin" "$work/reprorun")
base=${REPRORUN_BASE_BIN:+$(fresh "$REPRORUN_BASE_BIN" "$work/reprorun-base")}
cd "$work"
# Each path: name|target|command (the loop's iteration count appended).
paths=("bare vDSO (dynamic)||./dyn"
       "bare, in a time namespace||unshare --time --fork --monotonic -36000 --boottime -36000 ./dyn"
       "pass-through interposer||env LD_PRELOAD=$work/passthrough.so ./dyn"
       "reprorun dynamic|<= 1.3x bare|$bin exec -- ./dyn")
[ -z "$base" ] || paths+=("reprorun dynamic (base)||$base exec -- ./dyn")
# libfaketime's date (only the process that preloads it reads it).
export FAKETIME="@2024-01-01 00:00:00"
paths+=("libfaketime dynamic||env LD_PRELOAD=$faketime_lib ./dyn"
        "reprorun static|<= 5000 ns|$bin exec -- ./static"
        "reprorun static, tick mode||$bin exec --clock tick -- ./static")
[ -z "$base" ] || paths+=("reprorun static (base)||$base exec -- ./static")
declare -A got
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#paths[@]}; i++)); do
    # Each round starts one path later, so no path is always first.
    p=${paths[(i + r) % ${#paths[@]}]}
    IFS='|' read -r name _ cmd <<<"$p"
    iters=$n
    [[ $name != *tick* ]] || iters=$((n / 1000))
    got[$name]+="$($cmd "$iters" | awk '{print $1}') "
  done
done
# Ratios per round (each path against the bare read of the same round), then their median:
# the machine's speed drifts between rounds more than between neighbouring runs.
for p in "${paths[@]}"; do
  IFS='|' read -r name target _ <<<"$p"
  printf '%s|%s|%s\n' "$name" "$target" "${got[$name]}"
done | python3 -c '
import statistics, sys
rows = [l.rstrip("\n").split("|") for l in sys.stdin]
bare = [float(v) for v in rows[0][2].split()]
print("%-28s %10s %8s %14s   rounds (ns)" % ("path", "ns/call", "x bare", "target"))
for name, target, vals in rows:
    v = [float(x) for x in vals.split()]
    ratio = statistics.median(a / b for a, b in zip(v, bare))
    print(f"{name:<28} {statistics.median(v):>10.2f} {ratio:>8.2f} {target:>14}   {vals}")
'
echo
hyperfine -N --warmup 10 --runs 200 --export-json "$work/startup.json" \
  -n "exec --date now" "$bin exec --date now -- /bin/true" \
  -n "exec (fake clock)" "$bin exec -- /bin/true" >&2
python3 - "$work/startup.json" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
off, on = r["exec --date now"], r["exec (fake clock)"]
print(f"start-up: --date now {off*1000:.2f} ms, fake clock {on*1000:.2f} ms, time layer adds {(on-off)*1000:.2f} ms ({on/off:.2f}x)")
PY
