#!/usr/bin/env bash
# Where the clock-loop suite's time goes (suite.sh's clockloop: /usr/bin/python3 reading
# time.time() and time.monotonic() in a tight loop, inside against bare). The same loop, and
# clockbench.c's C loop of each clock alone, run in settings that add one piece of the sandbox
# at a time, ROUNDS rounds alternating the settings (each round starts one setting later):
#   bare                  the host, no preload, no namespace;
#   ASLR off              `setarch -R`: the sandbox pins the address layout (no
#                         randomisation), which moves where code and data lie;
#   time namespace        `unshare --time` with a monotonic and boot-time offset, as the
#                         sandbox has (the vDSO's time-namespace path);
#   preload, no page      reprorun's time library by LD_PRELOAD on the host (its checks and
#                         pass-through, no fake date to apply);
#   exec --date now       the sandbox without a fake date;
#   exec --cpus 2         the sandbox with the fake date, on both CPUs;
#   exec                  the sandbox as suite.sh runs it (fake date, one CPU).
# Prints per setting the median cost per loop iteration, and the median of each round's ratio
# to bare: for Python (one time() and one monotonic() read) the task-clock of the whole
# command, start-up included, as suite.sh measures it; for C (one read) the loop's own CPU
# time per read (its thread's CPU clock), without the start-up.
#   runtime-tests/bench/clockloop-parts.sh [PY_ITERATIONS [ROUNDS]]   (default 3000000 and 5)
# Needs gcc, python3, perf, util-linux's unshare and setarch. Not part of the test suite.
set -euo pipefail
n=${1:-3000000}
rounds=${2:-5}
source "$(dirname "$0")/lib.sh"
need gcc python3 unshare perf setarch
build_reprorun
make_work
bin=$(fresh "$bin" "$work/reprorun")
gcc -O2 -o "$work/cloop" "$root/runtime-tests/bench/clockbench.c"
cp "$root/runtime-tests/bench/clockloop.py" "$work/"
cd "$work"
# The time library as the sandbox serves it.
"$bin" exec -- cat /run/reprorun/libreprotime.so >"$work/libreprotime.so"
settings=("bare|"
  "ASLR off|setarch -R"
  "time namespace|unshare --time --fork --monotonic -36000 --boottime -36000"
  "preload, no page|env LD_PRELOAD=$work/libreprotime.so"
  "exec --date now|$bin exec --date now --"
  "exec --cpus 2|$bin exec --cpus 2 --"
  "exec|$bin exec --")
# cpu_of CMD...: the task-clock of CMD's process tree in seconds (perf stat follows every
# child, in the sandbox's namespaces too).
cpu_of() {
  perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1 / 1000}'
}
# per_read CMD...: clockbench's CPU nanoseconds per read, in seconds per read.
per_read() {
  "$@" | sed -n 's/.*(cpu \([0-9.]*\) ns\/call.*/\1/p' | awk '{print $1 / 1e9}'
}
c_n=$((n * 4))
declare -A got
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#settings[@]}; i++)); do
    IFS='|' read -r name prefix <<<"${settings[(i + r) % ${#settings[@]}]}"
    read -ra pre <<<"$prefix"
    got["py|$name"]+="$(cpu_of "${pre[@]}" /usr/bin/python3 clockloop.py "$n") "
    got["real|$name"]+="$(per_read "${pre[@]}" ./cloop "$c_n") "
    got["mono|$name"]+="$(per_read "${pre[@]}" ./cloop "$c_n" monotonic) "
  done
done
for k in "${!got[@]}"; do echo "$k|${got[$k]}"; done | python3 -c '
import statistics, sys
n, c_n = int(sys.argv[1]), int(sys.argv[2])
got = {}
for line in sys.stdin:
    loop, name, vals = line.rstrip("\n").split("|")
    got[(loop, name)] = [float(v) for v in vals.split()]
names = [s.split("|")[0] for s in sys.argv[3:]]
for loop, label, per in (("py", "python clockloop, ns per iteration (two reads)", n),
                         ("real", "C loop, CLOCK_REALTIME, CPU ns per read", 1),
                         ("mono", "C loop, CLOCK_MONOTONIC, CPU ns per read", 1)):
    bare = got[(loop, "bare")]
    print(label)
    for name in names:
        v = got[(loop, name)]
        ratio = statistics.median(a / b for a, b in zip(v, bare))
        print(f"  {name:<18} {statistics.median(v) / per * 1e9:>8.2f} {ratio:>7.3f}x")
' "$n" "$c_n" "${settings[@]}"
