#!/usr/bin/env bash
# Start-up benchmark: `reprorun exec -- /bin/true` (and `-- true`, found on PATH) against
# bubblewrap, crun and runc on the same busybox bundle, side by side in hyperfine runs (two
# passes, the commands in one order then reversed), twice: on an idle machine, and with
# one busy loop per CPU competing (there the start-up's CPU time turns into wall time, as it
# does when a study runs many sandboxes at once). Prints, per command, the median wall time
# and the CPU time of its whole process tree, and both as ratios of reprorun's to it, and the
# median wall time of single starts (the commands in turn, 30 ms apart: single.py), which
# hyperfine's back-to-back runs can flatter for a command that leaves work behind. Not
# part of the test suite (timings on a shared machine are noise; ratios from one run are what
# to read).
# CPU time is user+system of the command's whole process tree, from treecpu.py (a child
# subreaper that also reaps what the command leaves behind), in rounds that alternate the
# commands. hyperfine's user+system misses any process the measured one does not wait for:
# bubblewrap's parent exits without waiting for its namespaced child (the host's init reaps
# it), so hyperfine shows only bwrap's parent, about a third of its CPU time. That column is
# printed too, marked.
#   sudo runtime-tests/bench/startup.sh [RUNS] [idle|busy|both]
# $REPRORUN_BASE_BIN=PATH adds a row for that reprorun binary (an earlier build, to measure a
# change side by side); $REPRORUN_BIN measures the given binary instead of building one.
# Needs root, hyperfine, bubblewrap, crun, runc, busybox-static, python3.
# crun refuses this host's hybrid cgroup layout while /sys/fs/cgroup/unified is mounted, so
# the whole benchmark runs in a private mount namespace with it unmounted (same for all).
set -euo pipefail
runs=${1:-200}
modes=${2:-both}
source "$(dirname "$0")/lib.sh"
in_private_mount_ns "$@"
need hyperfine bwrap crun runc python3
build_reprorun
make_work
# The reprorun binaries are measured from fresh copies in the scratch directory (lib.sh).
bin=$(fresh "$bin" "$work/reprorun")
[ -z "${REPRORUN_BASE_BIN:-}" ] || REPRORUN_BASE_BIN=$(fresh "$REPRORUN_BASE_BIN" "$work/reprorun-base")
"$root/images/busybox/build.sh" --bundle "$work/bundle" /bin/true >/dev/null
cd "$work"

busy_pids=()
stop_busy() {
  [ ${#busy_pids[@]} -eq 0 ] || kill "${busy_pids[@]}" 2>/dev/null || true
  busy_pids=()
}
trap 'stop_busy; rm -rf "$work"' EXIT

# The commands, NAME and CMD, in the order of every table.
names=(reprorun)
cmds=("$bin exec -- /bin/true")
if [ -n "${REPRORUN_BASE_BIN:-}" ]; then
  names+=("reprorun (base)"); cmds+=("$REPRORUN_BASE_BIN exec -- /bin/true")
fi
names+=("reprorun, PATH search" "reprorun --date now" "reprorun --rootfs" bwrap crun runc)
cmds+=("$bin exec -- true" "$bin exec --date now -- /bin/true"
  "$bin exec --rootfs $work/bundle/rootfs -- /bin/true"
  "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev /bin/true"
  "crun run --bundle $work/bundle reprorun-bench-crun"
  "runc run --bundle $work/bundle reprorun-bench-runc")

# measure MODE: hyperfine over every command twice, in the order above and reversed (a
# command measured first read 4-10 % slow on our VM, whichever it was), JSON in
# $work/MODE.fwd.json and $work/MODE.rev.json; then CPU rounds and single starts.
measure() {
  local mode=$1 n=$runs order i
  if [ "$mode" = busy ]; then
    # One busy loop per CPU; fewer runs, each is slower.
    for _ in $(seq "$(nproc)"); do (while :; do :; done) & busy_pids+=($!); done
    n=$(( (runs + 3) / 4 ))
  fi
  for order in fwd rev; do
    local -a args=()
    for i in "${!cmds[@]}"; do
      [ $order = fwd ] || i=$(( ${#cmds[@]} - 1 - i ))
      args+=(-n "${names[$i]}" "${cmds[$i]}")
    done
    hyperfine -N --warmup 10 --runs "$(( (n + 1) / 2 ))" \
      --export-json "$work/$mode.$order.json" "${args[@]}" >&2
  done
  cpu_rounds "$mode" "$n"
  stop_busy
}

# cpu_rounds MODE RUNS: CPU ms per run of each command's whole process tree (treecpu.py), in
# 5 rounds that alternate the commands in ABBA order (odd rounds reversed, so that a drift of
# the machine's speed falls alike on each command, as startup-cpu.sh), lines NAME<TAB>MS in
# $work/MODE.cpu; then single starts, lines NAME<TAB>MS in $work/MODE.single.
cpu_rounds() {
  local mode=$1 n=$2 per round i k
  per=$(( (n + 4) / 5 ))
  : >"$work/$mode.cpu"
  for round in 1 2 3 4 5; do
    for k in "${!cmds[@]}"; do
      i=$((round % 2 == 1 ? k : ${#cmds[@]} - 1 - k))
      # shellcheck disable=SC2086
      printf '%s\t%s\n' "${names[$i]}" \
        "$(python3 "$root/runtime-tests/bench/treecpu.py" "$per" ${cmds[$i]})" >>"$work/$mode.cpu"
    done
  done
  echo "cpu $mode: $per runs x 5 rounds per command" >&2
  # Single starts: the same commands in turn, 30 ms apart, so that what one leaves to finish
  # after it exits is done before the next is timed (single.py).
  local -a pairs=()
  for i in "${!cmds[@]}"; do pairs+=("${names[$i]}=${cmds[$i]}"); done
  python3 "$root/runtime-tests/bench/single.py" "$n" 30 "${pairs[@]}" >"$work/$mode.single"
  echo "single $mode: $n runs per command, 30 ms apart" >&2
}

case $modes in
  idle|busy) measure "$modes"; set -- "$modes" ;;
  both) measure idle; measure busy; set -- idle busy ;;
  *) echo "startup.sh: mode must be idle, busy or both, not $modes" >&2; exit 1 ;;
esac

python3 - "$work" "$@" <<'PY'
import json, statistics, sys
work, modes = sys.argv[1], sys.argv[2:]
targets = {"bwrap": "<= 1.0", "crun": "<= 0.5", "runc": "<= 0.15"}
cpu_targets = {"bwrap": "<= 1.5"}
for mode in modes:
    # Both orders' runs pooled: median of all, rusage means averaged.
    results = {}
    for order in ("fwd", "rev"):
        for r in json.load(open(f"{work}/{mode}.{order}.json"))["results"]:
            results.setdefault(r["command"], []).append(r)
    results = {name: {"median": statistics.median(t for r in rs for t in r["times"]),
                      "user": statistics.mean(r["user"] for r in rs),
                      "system": statistics.mean(r["system"] for r in rs)}
               for name, rs in results.items()}
    rounds = {}
    for line in open(f"{work}/{mode}.cpu"):
        name, ms = line.rstrip("\n").split("\t")
        rounds.setdefault(name, []).append(float(ms))
    cpu = {name: statistics.mean(v) for name, v in rounds.items()}
    single = dict((n, float(ms)) for n, ms in
                  (line.rstrip("\n").split("\t") for line in open(f"{work}/{mode}.single")))
    base = results["reprorun"]
    base_rusage = base["user"] + base["system"]
    print(f"\n{mode}: {'command':<20}{'median ms':>10}{'CPU ms':>9}{'wall ratio':>12}{'CPU ratio':>11}"
          f"{'target wall':>13}{'target CPU':>12}{'single ms':>11}{'ratio':>7}"
          f"{'rusage ms*':>12}{'ratio*':>8}")
    for name, r in results.items():
        rusage = r["user"] + r["system"]
        print(f"{'':<{len(mode) + 2}}{name:<20}{r['median'] * 1000:>10.2f}{cpu[name]:>9.2f}"
              f"{base['median'] / r['median']:>12.2f}{cpu['reprorun'] / cpu[name]:>11.2f}"
              f"{targets.get(name, ''):>13}{cpu_targets.get(name, ''):>12}"
              f"{single[name]:>11.2f}{single['reprorun'] / single[name]:>7.2f}"
              f"{rusage * 1000:>12.2f}{base_rusage / rusage:>8.2f}")
print("\nratio = reprorun's / the command's (wall: medians of hyperfine, each command's runs"
      " back to back, in two passes, the commands in one order then reversed; CPU: user+system of the whole process tree, treecpu.py, mean of 5"
      " alternating rounds; single: medians of single starts in turn, 30 ms apart, single.py)")
print("back to back, what a command leaves to finish after it exits lands on its own next run"
      " (bwrap's parent does not wait for its sandbox's teardown); single starts time only what"
      " the caller waits for")
print("* hyperfine's user+system (rusage of reaped children): misses what the command does not"
      " reap, e.g. bwrap's namespaced child, which the host's init reaps")
PY
