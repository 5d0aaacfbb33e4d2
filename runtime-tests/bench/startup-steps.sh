#!/usr/bin/env bash
# Where `reprorun exec -- /bin/true` spends its start-up (issue 20), in three parts:
#   1. the per-step table: REPRORUN_TRACE_STEPS=1 timestamps (crates/runtime/src/trace.rs) of RUNS traced
#      runs, median per step (its own duration, and µs since the supervisor's main);
#   2. the cost of each isolation piece: exec with the piece turned off by its flag, side by
#      side with the default and bubblewrap (hyperfine, in rounds); median wall time, CPU time
#      of the whole process tree (treecpu.py), and ratios to bwrap and to the default;
#   3. system calls: `strace -f -c` totals of reprorun against bwrap.
# Not part of the test suite: on a shared machine absolute timings are noise, read the ratios.
#   sudo runtime-tests/bench/startup-steps.sh [RUNS] [HYPERFINE_RUNS]
# Needs root, hyperfine, bubblewrap, strace, python3.
set -euo pipefail
runs=${1:-30}
hruns=${2:-100}
source "$(dirname "$0")/lib.sh"
need hyperfine bwrap strace python3
build_reprorun
make_work
cd "$work"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# 1. Per-step table. Wall time of each traced run is taken around it (the difference to the
# last timestamp is process start before main plus exit).
echo
echo "== 1. steps of exec -- /bin/true (median of $runs traced runs, release build) =="
python3 - "$bin" "$runs" <<'PY'
import os, statistics, subprocess, sys, time
from collections import OrderedDict
bin, runs = sys.argv[1], int(sys.argv[2])
env = dict(os.environ, REPRORUN_TRACE_STEPS="1")
# The process a new one starts from: its first step's duration counts from there.
parent_anchor = {"init": ("supervisor", "socketpair, groups"), "workload": ("init", "build the notification filter")}
steps = OrderedDict()   # (who, name) -> list of (at, duration)
kinds = OrderedDict()   # mount kind -> list of (count, total duration) per run
walls, lasts = [], []
for i in range(runs + 3):
    t = time.perf_counter()
    p = subprocess.run([bin, "exec", "--", "/bin/true"], env=env, stderr=subprocess.PIPE, text=True)
    wall = (time.perf_counter() - t) * 1e6
    if p.returncode != 0:
        sys.exit(f"run failed: {p.stderr}")
    lines = []
    for line in p.stderr.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[0] == "reprorun-trace":
            lines.append((parts[1], int(parts[2]), parts[3]))
    if i < 3:
        continue  # warm-up
    last = {}
    run_kinds = {}
    for who, at, name in sorted(lines, key=lambda l: l[1]):
        if who in last:
            prev = last[who]
        elif who in parent_anchor:
            pw, pn = parent_anchor[who]
            prev = next((a for w, a, n in lines if w == pw and n == pn), at)
        else:
            prev = 0
        dur = at - prev
        last[who] = at
        if name.startswith("  mount ") and name != "  mount staging root":
            kind = name.split()[1]
            c, d = run_kinds.get(kind, (0, 0))
            run_kinds[kind] = (c + 1, d + dur)
            continue
        steps.setdefault((who, name.strip()), []).append((at, dur))
    for k, v in run_kinds.items():
        kinds.setdefault(k, []).append(v)
    walls.append(wall)
    lasts.append(max(a for _, a, _ in lines))
med = statistics.median
print(f"{'process':<11}{'step':<52}{'step µs':>9}{'at µs':>9}")
for (who, name), v in steps.items():
    print(f"{who:<11}{name:<52}{med(d for _, d in v):>9.0f}{med(a for a, _ in v):>9.0f}")
    if name == "mount staging root":
        for kind, kv in kinds.items():
            label = f"  mount {kind} (x{med(c for c, _ in kv):.0f}, total)"
            print(f"{'init':<11}{label:<52}{med(d for _, d in kv):>9.0f}{'':>9}")
print(f"{'':<11}{'wall time of the traced run (from python)':<52}{med(walls):>9.0f}")
print(f"{'':<11}{'of it before main and after exit':<52}{med(w - l for w, l in zip(walls, lasts)):>9.0f}")
PY

# 2. Each isolation piece: what its flag turns off, side by side. The machine's load drifts
# over a minute, so hyperfine runs in ROUNDS rounds of HYPERFINE_RUNS/ROUNDS runs per command,
# and each ratio is the median of its per-round ratios (names without the leading dashes:
# hyperfine would take them for options).
rounds=5
echo
echo "== 2. isolation pieces: hyperfine, $rounds rounds of $((hruns / rounds)) runs per command, side by side =="
mkdir -p "$work/wd"
t=/bin/true
n=$(nproc)
names=("default (full)" "net host" "date now, random real" "seccomp unconfined"
  "cpus $n (no narrowing pin)" "workdir-mode ro" "workdir-mode overlay" "all five above off"
  "isolation none" "isolation none, pins off" "reprorun --version" bwrap)
cmds=("$bin exec -- $t" "$bin exec --net host -- $t" "$bin exec --date now --random real -- $t"
  "$bin exec --seccomp unconfined -- $t" "$bin exec --cpus $n -- $t"
  "$bin exec --workdir $work/wd --workdir-mode ro -- $t"
  "$bin exec --workdir $work/wd --workdir-mode overlay -- $t"
  "$bin exec --net host --date now --random real --seccomp unconfined --cpus $n -- $t"
  "$bin exec --isolation none -- $t"
  "$bin exec --isolation none --date now --random real --seccomp unconfined -- $t"
  "$bin --version" "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev $t")
args=()
for i in "${!names[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
for r in $(seq "$rounds"); do
  hyperfine -N --warmup 3 --runs $((hruns / rounds)) --export-json "$work/pieces.$r.json" \
    "${args[@]}" >/dev/null
  # CPU of each command's whole process tree (treecpu.py: what it leaves behind included).
  for i in "${!names[@]}"; do
    # shellcheck disable=SC2086
    printf '%s\t%s\n' "${names[$i]}" \
      "$(python3 "$root/runtime-tests/bench/treecpu.py" $((hruns / rounds)) ${cmds[$i]})"
  done >"$work/pieces.$r.cpu"
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
med = statistics.median
work, n = sys.argv[1], int(sys.argv[2])
rounds = []
for r in range(1, n + 1):
    rs = {x["command"]: {"wall": x["median"] * 1000}
          for x in json.load(open(f"{work}/pieces.{r}.json"))["results"]}
    for line in open(f"{work}/pieces.{r}.cpu"):
        name, ms = line.rstrip("\n").split("\t")
        rs[name]["cpu"] = float(ms)
    rounds.append(rs)
print(f"{'variant':<28}{'wall ms':>9}{'/bwrap':>8}{'/full':>8}{'CPU ms':>9}{'/bwrap':>8}{'/full':>8}")
for name in rounds[0]:
    row = [med(rs[name][k] for rs in rounds) for k in ("wall", "cpu")]
    ratios = [med(rs[name][k] / rs[base][k] for rs in rounds)
              for k in ("wall", "cpu") for base in ("bwrap", "default (full)")]
    print(f"{name:<28}{row[0]:>9.2f}{ratios[0]:>8.2f}{ratios[1]:>8.2f}"
          f"{row[1]:>9.2f}{ratios[2]:>8.2f}{ratios[3]:>8.2f}")
print("(wall: hyperfine's median; CPU: user+system of the whole process tree, treecpu.py; figures")
print(" and ratios are medians over the rounds; a piece costs about what 'default' minus its row is)")
PY

# 3. System calls.
echo
echo "== 3. system calls (strace -f -c) =="
strace -f -c -o "$work/reprorun.strace" "$bin" exec -- $t
strace -f -c -o "$work/bwrap.strace" bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev $t
python3 - "$work/reprorun.strace" "$work/bwrap.strace" <<'PY'
import sys
def counts(path):
    c = {}
    for line in open(path):
        f = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall (or "total")
        if len(f) >= 5 and f[0][0].isdigit():
            c[f[-1]] = int(f[3])
    return c
r, b = counts(sys.argv[1]), counts(sys.argv[2])
print(f"{'syscall':<22}{'reprorun':>10}{'bwrap':>8}")
for name in ["total"] + sorted((k for k in r if k != "total"), key=lambda k: -r[k])[:25]:
    print(f"{name:<22}{r.get(name, 0):>10}{b.get(name, 0):>8}")
PY
