#!/usr/bin/env bash
# Mirror benchmark and real-package check (talks to PyPI; not part of the test suite).
# Pulls the pytest closure at two dates, installs each offline inside the sandbox, prints the
# versions (they must differ as the dates imply), then times an offline install from the
# mirror against a plain online `pip install` of the same pins, side by side, with ratios.
#   runtime-tests/bench/mirror.sh [DATE_OLD] [DATE_NEW]
# Needs uv, curl, python3 with pip, hyperfine, network access to PyPI.
#   runtime-tests/bench/mirror.sh npm
# The npm case instead: pulls the express + chalk closure from registry.npmjs.org, installs it
# with `npm ci` offline in the sandbox, and times that against an online `npm ci` of the same
# lockfile (fresh cache each run), with ratios. The registry reachable from our machines
# rewrites `time` (when a cache saw each version), so it is cut at tomorrow: this proves the
# speed and the offline install, not the date cut (the loopback tests prove that).
# Needs npm, curl, python3, hyperfine, network access to the npm registry.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" = npm ]; then
  need npm curl hyperfine python3
  build_reprorun
  make_work
  cd "$work"
  mkdir app
  echo '{"name": "bench", "version": "1.0.0", "private": true, "dependencies": {"express": "^4.18.0", "chalk": "^4.1.2"}}' >app/package.json
  start=$(date +%s.%N)
  "$bin" mirror pull --npm app/package.json --date "$(date -u -d tomorrow +%F)" --out "$work/m"
  printf 'mirror pull --npm: %.1f s\n' "$(echo "$(date +%s.%N) - $start" | bc)"
  "$bin" mirror verify "$work/m"
  # The lockfile, written offline in the sandbox from the mirror.
  "$bin" exec --mirror "$work/m" --workdir app -- sh -c 'npm install --loglevel=error >/dev/null && node -p "\"express \" + require(\"express/package.json\").version"'
  echo "packages in the lockfile: $(grep -c '"resolved"' app/package-lock.json)"
  ci='rm -rf node_modules && npm ci --loglevel=error >/dev/null'
  hyperfine --warmup 1 --runs 5 --export-json "$work/result.json" \
    -n "offline npm ci from the mirror (--cpus 1, the default)" \
    "$bin exec --mirror $work/m --workdir $work/app -- sh -c '$ci'" \
    -n "offline npm ci from the mirror (--cpus 2)" \
    "$bin exec --mirror $work/m --workdir $work/app --cpus 2 -- sh -c '$ci'" \
    -n "online npm ci (same lockfile, fresh cache)" \
    "cd $work/app && rm -rf $work/cache && npm_config_cache=$work/cache npm_config_replace_registry_host=always npm_config_registry=https://registry.npmjs.org/ sh -c '$ci'" >&2
  python3 - "$work/result.json" <<'PY'
import json, sys
r = [(x["command"], x["median"]) for x in json.load(open(sys.argv[1]))["results"]]
online = r[-1][1]
print(f"{'npm ci':<56}{'median s':>10}{'/ online':>10}")
for name, m in r:
    print(f"{name:<56}{m:>10.2f}{m / online:>10.2f}")
PY
  exit 0
fi
old=${1:-2023-01-15}
new=${2:-2024-06-15}
need uv curl hyperfine python3
build_reprorun
make_work
cd "$work"
start=$(date +%s.%N)
"$bin" mirror pull --date "$old" --out "$work/old" pytest
pulled=$(date +%s.%N)
"$bin" mirror pull --date "$new" --out "$work/new" pytest
"$bin" mirror verify "$work/old" >/dev/null
"$bin" mirror verify "$work/new" >/dev/null
probe='python3 -m pip install -q --target /tmp/site pytest && PYTHONPATH=/tmp/site python3 -c "import pytest; print(pytest.__version__)"'
v_old=$("$bin" exec --mirror "$work/old" -- sh -c "$probe")
v_new=$("$bin" exec --mirror "$work/new" -- sh -c "$probe")
echo "pytest as of $old: $v_old (offline, from the mirror)"
echo "pytest as of $new: $v_new (offline, from the mirror)"
[ "$v_old" != "$v_new" ] || { echo "mirror.sh: the two dates gave the same pytest" >&2; exit 1; }
printf 'mirror pull (%s): %.1f s\n' "$old" "$(echo "$pulled - $start" | bc)"
# The same pins, online, for the side-by-side timing.
python3 -c "import json; print('\n'.join(f'{f[\"name\"]}=={f[\"version\"]}' for f in json.load(open('$work/old/lock.json'))['files']))" | sort -u > "$work/pins.txt"
hyperfine --warmup 1 --runs 5 --export-json "$work/result.json" \
  -n "offline from mirror (reprorun exec --mirror)" \
  "$bin exec --mirror $work/old --bind $work/pins.txt:/tmp/pins.txt:ro -- python3 -m pip install -q --target /tmp/site -r /tmp/pins.txt" \
  -n "online pip install (same pins)" \
  "rm -rf $work/site && python3 -m pip install -q --no-cache-dir --target $work/site -r $work/pins.txt" >&2
python3 - "$work/result.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
base = r["offline from mirror (reprorun exec --mirror)"]["median"]
print(f"{'install':<48}{'median s':>10}{'mirror / it':>13}")
for name, x in r.items():
    print(f"{name:<48}{x['median']:>10.2f}{base / x['median']:>13.2f}")
PY
