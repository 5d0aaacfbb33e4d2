#!/usr/bin/env bash
# Start-up of `exec -- /bin/true` by CPU-side measures, which a machine shared with other
# work moves less than wall times: the task-clock of the whole process tree (`perf stat`,
# which follows every child; work the kernel defers to its own threads is not counted), in
# ROUNDS rounds of RUNS starts, the binaries alternating (each round starts one binary
# later); then each binary's system calls that build the root (`strace -f -c`, one run:
# `mount`, `mount_setattr`, `open_tree`, `move_mount`, `umount2`, `pivot_root`) and the mounts
# the sandbox sees (`/proc/self/mountinfo`).
#   runtime-tests/bench/startup-cpu.sh [RUNS [ROUNDS]] NAME=BINARY...   (default 40 and 5)
# Prints, per binary, the median over the rounds of the mean task-clock per start, and its
# ratio to the first binary's (the median of each round's ratio). Runs in a private mount
# namespace without the unified cgroup hierarchy, as startup.sh (the v1 device path).
# Needs root, perf, strace. Not part of the test suite.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$@"
need perf strace python3
runs=40 rounds=5
[[ ${1:-} != *=* && -n ${1:-} ]] && { runs=$1; shift; }
[[ ${1:-} != *=* && -n ${1:-} ]] && { rounds=$1; shift; }
[ $# -gt 0 ] || { echo "startup-cpu.sh: name a binary: NAME=PATH" >&2; exit 2; }
make_work
names=() bins=()
for a in "$@"; do
  names+=("${a%%=*}")
  bins+=("$(fresh "${a#*=}" "$work/${a%%=*}")")
done
cd "$work"
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#bins[@]}; i++)); do
    j=$(((i + r) % ${#bins[@]}))
    ms=$(perf stat -x, -r "$runs" -e task-clock "${bins[j]}" exec -- /bin/true 2>&1 >/dev/null |
      awk -F, '/task-clock/ {print $1}')
    echo "$r ${names[j]} $ms"
  done
done >"$work/rounds"
for ((i = 0; i < ${#bins[@]}; i++)); do
  calls=$(strace -f -c -o "$work/strace" "${bins[i]}" exec -- /bin/true >/dev/null 2>&1; awk '
    $NF ~ /^(mount|mount_setattr|open_tree|move_mount|umount2|pivot_root)$/ {printf "%s %s  ", $NF, $4}
    $NF == "total" {printf "(all calls %s)", $4}' "$work/strace")
  seen=$("${bins[i]}" exec -- cat /proc/self/mountinfo | wc -l)
  echo "${names[i]}|$calls|$seen"
done >"$work/calls"
python3 - "$work/rounds" "$work/calls" <<'PY'
import collections, statistics, sys
rounds = collections.defaultdict(dict)
order = []
for line in open(sys.argv[1]):
    r, name, ms = line.split()
    rounds[r][name] = float(ms)
    order.append(name) if name not in order else None
calls = {l.split("|")[0]: l.rstrip("\n").split("|")[1:] for l in open(sys.argv[2])}
first = next(iter(calls))
print(f"{'build':<10} {'task-clock ms':>14} {'x ' + first:>10}   root-building calls (one strace -f -c run); mounts seen inside")
for name in calls:
    v = [rs[name] for rs in rounds.values()]
    ratio = statistics.median(rs[name] / rs[first] for rs in rounds.values())
    print(f"{name:<10} {statistics.median(v):>14.2f} {ratio:>10.3f}   {calls[name][0]}; {calls[name][1]} mounts")
print(f"({len(rounds)} rounds of perf stat -r N each; rounds: "
      + "; ".join(" ".join(f"{n}={rs[n]:.2f}" for n in calls) for rs in rounds.values()) + ")")
PY
