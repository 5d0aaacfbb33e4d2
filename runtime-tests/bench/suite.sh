#!/usr/bin/env bash
# Real test suites benchmark (issues 20, 50): real projects' test suites run inside the sandbox
# (`reprorun exec` with its defaults, the project directory as the work dir) and bare (the same
# command without reprorun), in alternating order, after one untimed warm-up of each. Prints,
# per suite, the median wall time inside and bare and their ratio, and the median peak RSS of
# the workload inside and bare and their ratio (targets: time <= 1.01x, RSS <= 1.05x). Not part
# of the test suite (timings on a shared machine are noise; ratios are what to read).
#   runtime-tests/bench/suite.sh [RUNS [SUITE...]]   (RUNS timed runs of each, default 5;
#                                                   SUITEs: the names below, default all)
# The suites, each stressing another path of the sandbox:
#   python-dateutil 2.9.0, attrs 23.2.0 (Hypothesis-heavy), humanize 4.9.0 (freezegun): pytest;
#   commander.js (runtime-tests/fixtures/swebench-multi, its base commit): the whole jest
#     suite in band (Node.js, V8's threads, tests that spawn node processes);
#   go-humanize (runtime-tests/fixtures/go-humanize): `go test -count=1 .` offline (GOPROXY=off,
#     the go tool, the compiler and linker, a static test binary), a GOCACHE per place, warmed
#     by the warm-up, so each run links and runs the test binary without compiling the module;
#   clockloop: /usr/bin/python3 reading time.time() and time.monotonic() in a tight loop
#     (clockloop.py): the faked clock's dynamic read, the path a clock-heavy program takes.
# The Node.js and Go suites run inside with `--cpus` the caller's CPU count (their runtimes
# size their thread pools by it; the default one CPU would measure the pin, not the sandbox);
# the Python ones with the defaults (one CPU).
# Needs uv (for `mirror pull`), curl, /usr/bin/python3 with venv and pip (Debian's
# python3-venv), /usr/bin/time, node and jest (.ci/setup installs jest 29.7.0), go, git, and
# network access to PyPI for the first pull.
# $REPRORUN_SUITE_CACHE=DIR keeps the mirrors, the unpacked projects and their venvs in DIR
# between runs (built once, reused while they are complete; no network after that); without
# it, a scratch directory.
# $REPRORUN_SUITE_ENV=caller: the bare runs get the caller's own environment (as a user runs
# the suite), not the pinned one (below); the difference between the two is the pins' cost.
#
# Each Python project comes from a mirror frozen at the end of its release day (`mirror pull --date`
# takes a bare date as midnight UTC, before the release was uploaded): the sdist (its tests
# are in it) is pulled first and unpacked, then its test dependencies and build backends are
# pulled into the same mirror with `--project` (attrs, humanize: the `tests` extra; dateutil,
# which has no extras: its requirements-dev.txt). The venv is made outside with /usr/bin/python3, which
# the sandbox sees at the same path (the host's / is its root), so `.venv/bin/python` works in
# both places; the packages and the project itself (built from the sdist) are installed inside
# the sandbox with `--mirror`, offline (the sandbox has no network).
#
# Measured: wall time of the whole command (reprorun's start-up and teardown included), with
# bash's $EPOCHREALTIME; peak RSS with `/usr/bin/time -f %M` wrapped directly around the
# command in both places (inside the sandbox too), i.e. the largest resident set among the
# workload's processes (getrusage of the children, in KiB): reprorun's supervisor is a separate
# process outside the workload tree, and is not counted.
# The bare run gets the environment the sandbox pins (env -i with what `reprorun exec -- env`
# prints, HOME aside), not the caller's, so that the sandbox is the one thing that differs (a
# caller's PYTHONDONTWRITEBYTECODE or random hash seed would change the work done). The
# outcome counts (the runner's summary line) and exit status of every run must agree between
# inside and bare, or the script fails (on a heavily loaded machine attrs' Hypothesis tests
# can overrun their 200 ms deadline and fail as Flaky in one run: that stops it too).
set -euo pipefail
set -euo pipefail
runs=${1:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "suite.sh: RUNS must be a positive integer, not '$runs'" >&2; exit 1; }
shift $(($# > 0 ? 1 : 0))
all_suites=(python-dateutil attrs humanize commander go-humanize clockloop)
suites=("${all_suites[@]}")
[ $# -eq 0 ] || suites=("$@")
for s in "${suites[@]}"; do
  [[ " ${all_suites[*]} " == *" $s "* ]] || { echo "suite.sh: no suite '$s' (${all_suites[*]})" >&2; exit 1; }
done
wants() { [[ " ${suites[*]} " == *" $1 "* ]]; }
source "$(dirname "$0")/lib.sh"
need uv curl /usr/bin/python3 /usr/bin/time
! wants commander || need node jest git
! wants go-humanize || need go git
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
fixtures="$root/runtime-tests/fixtures"

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
    attrs | humanize) reqs=('.[tests]') ;;
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

# prepare_git NAME SOURCE: $work/NAME, a checkout of the fixture SOURCE (a git bundle, or a
# tarball of a bare repository) at its one branch, unless it is there already.
prepare_git() {
  local name=$1 src=$2 dir="$work/$1"
  [ -f "$dir/.suite-ready" ] && return
  rm -rf "$dir" "$work/$name.git"
  case $src in
    *.bundle) git -c init.defaultBranch=main -c advice.detachedHead=false clone -q "$src" "$dir" ;;
    *.tar.gz)
      mkdir -p "$work/$name.git"
      tar -xzf "$src" -C "$work/$name.git" --strip-components=1 --no-same-owner
      git -c init.defaultBranch=main -c advice.detachedHead=false clone -q "$work/$name.git" "$dir"
      rm -rf "$work/$name.git" ;;
  esac
  touch "$dir/.suite-ready"
}

# The command each suite runs, relative to its directory, into the array cmd.
suite_cmd() {
  case $1 in
    # Hypothesis' seed is fixed in both places: unseeded, each bare run draws its own examples
    # (two bare attrs runs differed by 5 % in system calls, and dateutil's property tests
    # found a falsifying 1959 Europe/London example in one bare run of three), while inside
    # the sandbox's seeded entropy gives the same draws every run. Fixed, both do one work.
    python-dateutil) cmd=(.venv/bin/python -m pytest -q -p no:cacheprovider --color=no --hypothesis-seed=0) ;;
    # attrs' tests/test_mypy.yml is left out: each of its cases runs the mypy type checker on
    # a snippet (minutes in all, measuring mypy rather than attrs), and needs mypy on PATH.
    attrs) cmd=(.venv/bin/python -m pytest -q -p no:cacheprovider --color=no --hypothesis-seed=0 --ignore=tests/test_mypy.yml) ;;
    # humanize's pyproject forces colours (addopts); the --color=no after it wins.
    humanize) cmd=(.venv/bin/python -m pytest -q -p no:cacheprovider --color=no) ;;
    # In band (no workers), no coverage, no cache of transformed files between runs, no
    # colours; the one test that fails on this host (a signal test) fails in both places.
    commander) cmd=(jest --runInBand --coverage=false --no-cache --ci) ;;
    go-humanize) cmd=(go test -count=1 .) ;;
    clockloop) cmd=(/usr/bin/python3 clockloop.py 10000000) ;;
  esac
}

# suite_env NAME AT MODE: the environment a suite adds in both places, given the directory
# it sees the tree at (/work inside, DIR bare), into the array extra.
suite_env() {
  local at=$2 mode=$3
  case $1 in
    # Byte-compiled files go under DIR/.pycache, by source path: the two places see the tree
    # at different paths (/work, DIR), so each keeps its own. A shared __pycache__ would hand
    # one place's pytest-rewritten test modules, whose code names the other's paths, to the
    # other (attrs' TestEvolve.test_inst_kw compares such a path and failed bare only).
    python-dateutil | attrs | humanize) extra=(PYTHONPYCACHEPREFIX="$at/.pycache") ;;
    # Offline: no proxy, no downloads (go-humanize requires no module). Each place its own
    # build cache (the same host directory is /work inside: named by the place): a cache
    # warmed under the faked clock is not the real clock's (spec/reproduce.md).
    go-humanize) extra=(GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOTELEMETRY=off
                        GOCACHE="$at/.gocache-$mode" GOPATH="$at/.gopath-$mode") ;;
    *) extra=() ;;
  esac
}

# One run: run MODE NAME N; appends "NAME MODE WALL_S RSS_KIB" to $logs/results (unless N
# is "warmup") and leaves the runner's output in $logs/NAME.MODE.N.
run() {
  local mode=$1 name=$2 n=$3 cmd extra opts e
  local dir="$work/$name" out="$logs/$name.$mode.$n" status=0 start end
  suite_cmd "$name"
  suite_opts "$name"
  # The RSS file is written by /usr/bin/time from where the command runs: /work inside, DIR bare.
  rm -f "$dir/.suite-rss"
  cmd=(/usr/bin/time -f %M -o .suite-rss "${cmd[@]}")
  start=$EPOCHREALTIME
  if [ "$mode" = inside ]; then
    suite_env "$name" /work inside
    local envs=()
    for e in "${extra[@]}"; do envs+=(--env "$e"); done
    (cd "$dir" && "$bin" exec "${sandbox_opts[@]}" "${opts[@]}" "${envs[@]}" -- "${cmd[@]}") >"$out" 2>&1 || status=$?
  else
    suite_env "$name" "$dir" bare
    (cd "$dir" && env "${bare_env[@]}" "${extra[@]}" "${cmd[@]}") >"$out" 2>&1 || status=$?
  fi
  end=$EPOCHREALTIME
  # A test runner exits 1 when tests fail (fine if the same everywhere); anything else is a
  # broken run.
  if [ "$status" -gt 1 ]; then
    echo "suite.sh: $name $mode run $n exited $status (log: $(tail -n 1 "$out"))" >&2
    exit 1
  fi
  summary_of "$name" "$out" "$status" >"$out.summary"
  [ "$n" = warmup ] && return
  echo "$name $mode $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }') $(tail -n 1 "$dir/.suite-rss")" >>"$logs/results"
}

# Options of reprorun exec per suite (beyond $sandbox_opts), into the array opts.
suite_opts() {
  case $1 in
    commander | go-humanize) opts=(--cpus "$(nproc)") ;;
    *) opts=() ;;
  esac
}

# summary_of NAME LOG STATUS: the outcome counts without durations, e.g. "2032 passed, 47
# skipped, 17 xfailed (exit 0)".
summary_of() {
  local s
  case $1 in
    commander) s=$(grep -E '^(Tests|Test Suites):' "$2" | sed -E 's/ +/ /g' | paste -sd ';') ;;
    go-humanize) s=$(grep -E '^(ok|FAIL|---)' "$2" | sed -E 's/[[:space:]]+[0-9.]+s$//; s/ \([0-9.]+s\)$//' | paste -sd ';') ;;
    *) s=$(tail -n 1 "$2" | sed -E 's/ in [0-9.]+s( \([0-9:]+\))?$//') ;;
  esac
  echo "$s (exit $3)"
}

# bench NAME: a warm-up of each (byte-compiled files, hypothesis' database, Go's build cache),
# then $runs alternating pairs, inside first in odd pairs and bare first in even ones.
bench() {
  local name=$1 i
  echo "running the $name suite: warm-up, then $runs runs inside and bare" >&2
  run inside "$name" warmup
  run bare "$name" warmup
  for ((i = 1; i <= runs; i++)); do
    if ((i % 2)); then
      run inside "$name" "$i"
      run bare "$name" "$i"
    else
      run bare "$name" "$i"
      run inside "$name" "$i"
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

# Released 2024-03-01T03:52Z, 2023-12-31T06:30Z and 2023-11-21T19:53Z: the end of each release day.
! wants python-dateutil || prepare python-dateutil 2.9.0 2024-03-01T23:59:59Z --project DIR -r DIR/requirements-dev.txt
! wants attrs || prepare attrs 23.2.0 2023-12-31T23:59:59Z --project DIR --extras tests
! wants humanize || prepare humanize 4.9.0 2023-11-21T23:59:59Z --project DIR --extras tests
! wants commander || prepare_git commander "$fixtures/swebench-multi/tj__commander.js.tar.gz"
! wants go-humanize || prepare_git go-humanize "$fixtures/go-humanize/dustin__go-humanize.bundle"
mkdir -p "$work/clockloop"
cp "$root/runtime-tests/bench/clockloop.py" "$work/clockloop/"
: >"$logs/results"
: >"$logs/outcomes"

# The bare runs' environment: the one the sandbox pins (read from it, so the two cannot
# drift apart), but for HOME, which is the sandbox's own private directory; or, with
# $REPRORUN_SUITE_ENV=caller, the caller's own.
if [ "${REPRORUN_SUITE_ENV:-pinned}" = caller ]; then
  bare_env=()
else
  mapfile -t pinned_env < <("$bin" exec -- env | grep -v '^HOME=')
  [ ${#pinned_env[@]} -gt 0 ] || { echo "suite.sh: could not read the sandbox's environment" >&2; exit 1; }
  bare_env=(-i "${pinned_env[@]}" HOME="$work/home")
fi

# The sandbox's defaults: fake clock at 2024-01-01, one CPU, seeded randomness, no network.
# The Python suites' outcomes under the pinned date match bare's (bench checks every run), so
# they need no `--date now`; should they ever differ, that is the option to add for one.
sandbox_opts=()
for s in "${suites[@]}"; do bench "$s"; done

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
