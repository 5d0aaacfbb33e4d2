#!/usr/bin/env bash
# Clock benchmark: ns per clock_gettime(CLOCK_REALTIME) in a tight loop, bare vDSO vs
# reprorun (dynamic binary, preload path) vs libfaketime vs reprorun (static binary, seccomp
# notification path), in one run, with ratios; then the start-up cost the time layer adds to
# `reprorun exec -- /bin/true` (hyperfine, --date now vs the default fake clock).
#   runtime-tests/bench/clock.sh [ITERATIONS]
# Needs gcc (with static libc), libfaketime, hyperfine. Not part of the test suite.
set -euo pipefail
n=${1:-20000000}
source "$(dirname "$0")/lib.sh"
build_reprorun
make_work
gcc -O2 -o "$work/dyn" "$root/runtime-tests/bench/clockbench.c"
gcc -O2 -static -o "$work/static" "$root/runtime-tests/bench/clockbench.c"
faketime_lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)
[ -n "$faketime_lib" ] || { echo "clock.sh: libfaketime not installed" >&2; exit 1; }
cd "$work"
per_call() { "$@" | awk '{print $1}'; }
bare=$(per_call ./dyn "$n")
repro_dyn=$(per_call "$bin" exec -- ./dyn "$n")
faketime=$(LD_PRELOAD="$faketime_lib" FAKETIME="@2024-01-01 00:00:00" per_call ./dyn "$n")
repro_static=$(per_call "$bin" exec -- ./static "$n")
repro_static_tick=$(per_call "$bin" exec --clock tick -- ./static "$((n / 1000))")
printf '%-28s %12s %10s %14s\n' path ns/call "x bare" target
printf '%-28s %12s %10s %14s\n' "bare vDSO (dynamic)" "$bare" 1.00 ""
for row in "reprorun dynamic|$repro_dyn|<= 1.3x bare" "libfaketime dynamic|$faketime|" \
           "reprorun static|$repro_static|<= 5000 ns" \
           "reprorun static, tick mode|$repro_static_tick|"; do
  IFS='|' read -r name v target <<<"$row"
  printf '%-28s %12s %10.2f %14s\n' "$name" "$v" "$(echo "$v / $bare" | bc -l)" "$target"
done
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
