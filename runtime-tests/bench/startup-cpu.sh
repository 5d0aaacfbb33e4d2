#!/usr/bin/env bash
# Start-up of `exec -- /bin/true` by CPU-side measures, which a machine shared with other
# work moves less than wall times: the task-clock of the whole process tree (`perf stat`,
# which follows every child; work the kernel defers to its own threads is not counted) and
# its page faults, in BLOCKS blocks of RUNS starts; then each binary's system calls that
# build the root (`strace -f -c`, one run: `mount`, `mount_setattr`, `open_tree`,
# `move_mount`, `umount2`, `pivot_root`) and the mounts the sandbox sees
# (`/proc/self/mountinfo`).
#   runtime-tests/bench/startup-cpu.sh [RUNS [BLOCKS]] NAME=BINARY...   (default 15 and 40)
# The binaries alternate in ABBA order (block b runs them in the given order when b is even,
# reversed when odd: A B B A A B ...), so that a drift of the machine's speed, which moves
# whole batches of starts by up to 15 % on our VM while each batch is within 1 % (issue 42),
# falls alike on both sides of each ratio. Prints, per binary, the median over the blocks of
# the mean task-clock per start, its ratio to the first binary's as the median of the
# per-block ratios (each block's time over the first binary's block next to it) with their
# quartiles and range, and page faults per start. Until issue 42 the rounds were 40 starts
# of one binary then 40 of the other, 5 rounds: the drift between batches was read as a
# difference of the binaries (one measurement read 0.95-1.57x from round to round).
# Runs in a private mount namespace without the unified cgroup hierarchy, as startup.sh
# (the v1 device path). Needs root, perf, strace. Not part of the test suite.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$@"
need perf strace python3
runs=15 blocks=40
[[ ${1:-} != *=* && -n ${1:-} ]] && { runs=$1; shift; }
[[ ${1:-} != *=* && -n ${1:-} ]] && { blocks=$1; shift; }
[ $# -gt 0 ] || { echo "startup-cpu.sh: name a binary: NAME=PATH" >&2; exit 2; }
make_work
names=() bins=()
for a in "$@"; do
  names+=("${a%%=*}")
  bins+=("$(fresh "${a#*=}" "$work/${a%%=*}")")
done
cd "$work"
n=${#bins[@]}
for ((b = 0; b < blocks; b++)); do
  for ((i = 0; i < n; i++)); do
    j=$((b % 2 == 0 ? i : n - 1 - i))
    stat=$(perf stat -x, -r "$runs" -e task-clock,page-faults "${bins[j]}" exec -- /bin/true 2>&1 >/dev/null |
      awk -F, '/task-clock/ {ms = $1} /page-faults/ {pf = $1} END {print ms, pf}')
    echo "$b ${names[j]} $stat"
  done
done >"$work/rounds"
for ((i = 0; i < ${#bins[@]}; i++)); do
  calls=$(strace -f -c -o "$work/strace" "${bins[i]}" exec -- /bin/true >/dev/null 2>&1; awk '
    $NF ~ /^(mount|mount_setattr|open_tree|move_mount|umount2|pivot_root)$/ {printf "%s %s  ", $NF, $4}
    $NF == "total" {printf "(all calls %s)", $4}' "$work/strace")
  seen=$("${bins[i]}" exec -- cat /proc/self/mountinfo | wc -l)
  echo "${names[i]}|$calls|$seen"
done >"$work/calls"
python3 - "$work/rounds" "$work/calls" "$runs" <<'PY'
import collections, statistics, sys
blocks = collections.defaultdict(dict)
faults = collections.defaultdict(list)
for line in open(sys.argv[1]):
    b, name, ms, pf = line.split()
    blocks[b][name] = float(ms)
    faults[name].append(float(pf))
calls = {l.split("|")[0]: l.rstrip("\n").split("|")[1:] for l in open(sys.argv[2])}
first = next(iter(calls))
print(f"{'build':<10} {'task-clock ms':>14} {'x ' + first:>10} {'quartiles':>13} {'range':>13} {'faults':>7}"
      "   root-building calls (one strace -f -c run); mounts seen inside")
for name in calls:
    v = [bs[name] for bs in blocks.values()]
    r = sorted(bs[name] / bs[first] for bs in blocks.values())
    q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
    print(f"{name:<10} {statistics.median(v):>14.2f} {q[1]:>10.3f} {q[0]:>6.3f}-{q[2]:<6.3f}"
          f" {r[0]:>6.3f}-{r[-1]:<6.3f} {statistics.median(faults[name]):>7.0f}"
          f"   {calls[name][0]}; {calls[name][1]} mounts")
print(f"({len(blocks)} blocks of perf stat -r {sys.argv[3]} each, the binaries in ABBA order;"
      " ratio: median of the per-block ratios; faults: page faults per start, median of the blocks)")
PY
