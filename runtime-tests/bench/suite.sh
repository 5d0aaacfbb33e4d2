#!/usr/bin/env bash
# Real test suites benchmark (issue 20): the test suites of two PyPI projects, python-dateutil
# 2.9.0 and attrs 23.2.0, run inside the sandbox (`reprorun exec` with its defaults, the
# project directory as the work dir) and bare (the same command without reprorun), in
# alternating order, after one untimed warm-up of each. Prints, per project, the median wall
# time inside and bare and their ratio, and the median peak RSS of the workload inside and
# bare and their ratio (targets: time <= 1.01x, RSS <= 1.05x). Not part of the test suite
# (timings on a shared machine are noise; ratios are what to read).
#   runtime-tests/bench/suite.sh [RUNS]            (RUNS timed runs of each, default 5)
# Needs uv (for `mirror pull`), curl, /usr/bin/python3 with venv and pip (Debian's
# python3-venv), /usr/bin/time, and network access to PyPI for the first pull.
# $REPRORUN_SUITE_CACHE=DIR keeps the mirrors, the unpacked projects and their venvs in DIR
# between runs (built once, reused while they are complete); without it, a scratch directory.
#
# Each project comes from a mirror frozen at the end of its release day (`mirror pull --date`
# takes a bare date as midnight UTC, before the release was uploaded): the sdist (its tests
# are in it) is pulled first and unpacked, then its test dependencies and build backends are
# pulled into the same mirror with `--project` (attrs: the `tests` extra; dateutil, which has
# no extras: its requirements-dev.txt). The venv is made outside with /usr/bin/python3, which
# the sandbox sees at the same path (the host's / is its root), so `.venv/bin/python` works in
# both places; the packages and the project itself (built from the sdist) are installed inside
# the sandbox with `--mirror`, offline (the sandbox has no network).
#
# Measured: wall time of the whole command (reprorun's start-up and teardown included), with
# bash's $EPOCHREALTIME; peak RSS with `/usr/bin/time -f %M` wrapped directly around python in
# both places (inside the sandbox too), i.e. the largest resident set among the workload's
# processes (getrusage of the children, in KiB): reprorun's supervisor is a separate process
# outside the workload tree, and is not counted.
# The bare run gets the environment the sandbox pins (env -i with what `reprorun exec -- env`
# prints, HOME aside), not the caller's, so that the sandbox is the one thing that differs (a
# caller's PYTHONDONTWRITEBYTECODE or random hash seed would change the work done). The
# outcome counts (pytest's summary line) and exit status of every run must agree between
# inside and bare, or the script fails.
set -euo pipefail
runs=${1:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "suite.sh: RUNS must be a positive integer, not '$runs'" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"
need uv curl /usr/bin/python3 /usr/bin/time
build_reprorun
if [ -n "${REPRORUN_SUITE_CACHE:-}" ]; then
  mkdir -p "$REPRORUN_SUITE_CACHE"
  work=$(cd "$REPRORUN_SUITE_CACHE" && pwd -P)
else
  make_work
fi
# The run logs, fresh each run (with a cache, the last run's stay there to be read).
logs="$work/logs"
rm -rf "$logs"
mkdir -p "$logs" "$work/home"
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# prepare NAME VERSION DATE PULL_ARGS...: the mirror $work/NAME.mirror and the project
# $work/NAME (the unpacked sdist with a working .venv), unless both are there already.
# PULL_ARGS name the test dependencies, with DIR standing for the unpacked project.
prepare() {
  local name=$1 version=$2 date=$3
  shift 3
  local mirror="$work/$name.mirror" dir="$work/$name" reqs
  # .venv/.suite-ready is written last: anything less is rebuilt from scratch.
  [ -f "$dir/.venv/.suite-ready" ] && [ -d "$mirror" ] && return
  rm -rf "$dir" "$mirror.partial"
  if [ ! -d "$mirror" ]; then
    echo "pulling $name $version and its test dependencies as of $date" >&2
    "$bin" mirror pull --date "$date" --python "$pyver" --out "$mirror.partial" "$name==$version" >&2
  fi
  local from=$mirror
  [ -d "$mirror" ] || from=$mirror.partial
  # The sdist is the one .tar.gz the lock names for the project at that version.
  local sdist
  sdist=$(/usr/bin/python3 - "$from/lock.json" "$name" "$version" <<'PY'
import json, re, sys
lock, name, version = sys.argv[1:]
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
hits = [f["filename"] for f in json.load(open(lock))["files"]
        if norm(f["name"]) == norm(name) and f["version"] == version and f["filename"].endswith(".tar.gz")]
print(hits[0] if len(hits) == 1 else "")
PY
)
  [ -n "$sdist" ] || { echo "suite.sh: no single sdist of $name $version in $from" >&2; exit 1; }
  mkdir -p "$dir"
  # --no-same-owner: the files must be the caller's (the sdist's are uid 1001 or so), since
  # the sandbox drops every capability and its root could not write another user's files.
  tar -xzf "$from/pypi/files/$sdist" -C "$dir" --strip-components=1 --no-same-owner
  if [ ! -d "$mirror" ]; then
    "$bin" mirror pull --date "$date" --python "$pyver" --into "$mirror.partial" "${@//DIR/$dir}" >&2
    mv "$mirror.partial" "$mirror"
  fi
  "$bin" mirror verify "$mirror" >/dev/null
  /usr/bin/python3 -m venv "$dir/.venv"
  echo "installing $name $version and its test dependencies offline, inside the sandbox" >&2
  case $name in
    python-dateutil) reqs=(-r requirements-dev.txt .) ;;
    attrs) reqs=('.[tests]') ;;
  esac
  (cd "$dir" && "$bin" exec --mirror "$mirror" -- .venv/bin/python -m pip install -q "${reqs[@]}" >&2)
  # The venv must work in both places: the same pytest from the venv, inside and bare.
  local probe='import pytest, sys; print(sys.prefix.endswith("/.venv"), pytest.__version__)'
  local in bare
  in=$(cd "$dir" && "$bin" exec -- .venv/bin/python -c "$probe")
  bare=$(cd "$dir" && .venv/bin/python -c "$probe")
  [ "$in" = "$bare" ] && [ "${in%% *}" = True ] \
    || { echo "suite.sh: the venv of $name does not work in both places (inside: $in; bare: $bare)" >&2; exit 1; }
  touch "$dir/.venv/.suite-ready"
}

# One run: run MODE NAME N PYTEST_ARGS...; appends "NAME MODE WALL_S RSS_KIB" to
# $logs/results (unless N is "warmup") and leaves pytest's output in $logs/NAME.MODE.N.
run() {
  local mode=$1 name=$2 n=$3
  shift 3
  local dir="$work/$name" out="$logs/$name.$mode.$n" status=0 start end
  # The RSS file is written by /usr/bin/time from where python runs: /work inside, DIR bare.
  rm -f "$dir/.suite-rss"
  local cmd=(/usr/bin/time -f %M -o .suite-rss .venv/bin/python -m pytest -q -p no:cacheprovider "$@")
  # Byte-compiled files go under DIR/.pycache, by source path: the two places see the tree at
  # different paths (/work, DIR), so each keeps its own. A shared __pycache__ would hand one
  # place's pytest-rewritten test modules, whose code names the other's paths, to the other
  # (attrs' TestEvolve.test_inst_kw compares such a path and failed bare only).
  start=$EPOCHREALTIME
  if [ "$mode" = inside ]; then
    (cd "$dir" && "$bin" exec "${sandbox_opts[@]}" --env PYTHONPYCACHEPREFIX=/work/.pycache -- "${cmd[@]}") >"$out" 2>&1 || status=$?
  else
    (cd "$dir" && env -i "${pinned_env[@]}" HOME="$work/home" \
      PYTHONPYCACHEPREFIX="$dir/.pycache" "${cmd[@]}") >"$out" 2>&1 || status=$?
  fi
  end=$EPOCHREALTIME
  # pytest exits 1 when tests fail (fine if the same everywhere); anything else is a broken run.
  if [ "$status" -gt 1 ]; then
    echo "suite.sh: $name $mode run $n exited $status (log: $(tail -n 1 "$out"))" >&2
    exit 1
  fi
  # The summary line without its duration, e.g. "2032 passed, 47 skipped, 17 xfailed".
  local summary
  summary=$(tail -n 1 "$out" | sed -E 's/ in [0-9.]+s( \([0-9:]+\))?$//')
  echo "$summary (exit $status)" >"$out.summary"
  [ "$n" = warmup ] && return
  echo "$name $mode $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }') $(tail -n 1 "$dir/.suite-rss")" >>"$logs/results"
}

# bench NAME PYTEST_ARGS...: a warm-up of each (byte-compiled files, hypothesis' database),
# then $runs alternating pairs, inside first in odd pairs and bare first in even ones.
bench() {
  local name=$1 i
  shift
  echo "running the $name suite: warm-up, then $runs runs inside and bare" >&2
  run inside "$name" warmup "$@"
  run bare "$name" warmup "$@"
  for ((i = 1; i <= runs; i++)); do
    if ((i % 2)); then
      run inside "$name" "$i" "$@"
      run bare "$name" "$i" "$@"
    else
      run bare "$name" "$i" "$@"
      run inside "$name" "$i" "$@"
    fi
  done
  # Every run's outcome must be the bare warm-up's.
  local expect f
  expect=$(cat "$logs/$name.bare.warmup.summary")
  for f in "$logs/$name".*.summary; do
    [ "$(cat "$f")" = "$expect" ] \
      || { echo "suite.sh: $name outcomes differ: bare '$expect', $(basename "$f" .summary) '$(cat "$f")'" >&2; exit 1; }
  done
  printf '%-16s inside: %s\n%-16s bare:   %s\n' "$name" "$(cat "$logs/$name.inside.warmup.summary")" \
    "$name" "$expect" >>"$logs/outcomes"
  echo "(the same outcome in all $((2 * runs + 2)) runs)" >>"$logs/outcomes"
}

# Released 2024-03-01T03:52Z and 2023-12-31T06:30Z: the end of each release day.
prepare python-dateutil 2.9.0 2024-03-01T23:59:59Z --project DIR -r DIR/requirements-dev.txt
prepare attrs 23.2.0 2023-12-31T23:59:59Z --project DIR --extras tests
: >"$logs/results"
: >"$logs/outcomes"

# The bare runs' environment: the one the sandbox pins (read from it, so the two cannot
# drift apart), but for HOME, which is the sandbox's own private directory.
mapfile -t pinned_env < <("$bin" exec -- env | grep -v '^HOME=')
[ ${#pinned_env[@]} -gt 0 ] || { echo "suite.sh: could not read the sandbox's environment" >&2; exit 1; }

# The sandbox's defaults: fake clock at 2024-01-01, one CPU, seeded randomness, no network.
# dateutil's outcomes under the pinned date match bare's (bench checks every run), so it
# needs no `--date now`; should they ever differ, that is the option to add for it.
sandbox_opts=()
bench python-dateutil
# attrs' tests/test_mypy.yml is left out: each of its cases runs the mypy type checker on a
# snippet (minutes in all, measuring mypy rather than attrs), and needs mypy on PATH.
bench attrs --ignore=tests/test_mypy.yml

echo
cat "$logs/outcomes"
/usr/bin/python3 - "$logs/results" "$runs" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
print(f"{'suite':<18}{'runs':>5}{'inside s':>10}{'bare s':>9}{'in / bare':>11}{'target':>9}"
      f"{'inside MiB':>12}{'bare MiB':>10}{'in / bare':>11}{'target':>9}")
for name in dict.fromkeys(r[0] for r in rows):
    med = {}
    for mode in ("inside", "bare"):
        got = [r for r in rows if r[0] == name and r[1] == mode]
        med[mode] = (statistics.median(float(r[2]) for r in got), statistics.median(int(r[3]) for r in got) / 1024)
    (ti, ri), (tb, rb) = med["inside"], med["bare"]
    print(f"{name:<18}{len(got):>5}{ti:>10.2f}{tb:>9.2f}{ti / tb:>11.3f}{'<= 1.01':>9}"
          f"{ri:>12.1f}{rb:>10.1f}{ri / rb:>11.3f}{'<= 1.05':>9}")
PY
