#!/usr/bin/env bash
# Builds the JavaScript example instance of `reprorun reproduce` (README.md beside this script):
#   OUT/repo                  `tablefmt`, a small node package, as a git repository (one commit,
#                             fixed author, committer and date)
#   OUT/mirror-frozen         a reprorun mirror with an npm part: padkit 1.0.0, as the registry
#                             stood on 2023-03-01 (the instance's date)
#   OUT/mirror-live           padkit 2.0.0 (2025-06-01, `pad.js` moved to `lib/`): "today's" registry
#   OUT/instances.jsonl, OUT/predictions.jsonl
# The registry is served on loopback by runtime-tests/probes/npm_registry.py from
# registry.json; nothing is fetched from the internet.
# Needs git, python3, npm and reprorun ($REPRORUN, else `reprorun` in PATH).
#   images/js-corpus/build.sh OUT
set -euo pipefail
die() { echo "js-corpus/build.sh: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: build.sh OUT"
here=$(cd "$(dirname "$0")" && pwd)
out=$1
reprorun=${REPRORUN:-$(command -v reprorun || true)}
[ -n "$reprorun" ] && [ -x "$reprorun" ] || die "reprorun not found: set REPRORUN or put it in PATH"
[ ! -e "$out" ] || [ -z "$(ls -A "$out")" ] || die "$out exists and is not empty"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# --- the repository -----------------------------------------------------------------------
export GIT_AUTHOR_NAME=corpus GIT_AUTHOR_EMAIL=corpus@reprorun.invalid
export GIT_COMMITTER_NAME=corpus GIT_COMMITTER_EMAIL=corpus@reprorun.invalid
export GIT_AUTHOR_DATE=2023-02-20T10:00:00Z GIT_COMMITTER_DATE=2023-02-20T10:00:00Z
git init -q -b main "$out/repo"
cp -R "$here/repo/." "$out/repo/"
git -C "$out/repo" add -A
git -C "$out/repo" -c commit.gpgsign=false commit -q -m "tablefmt: header"
base=$(git -C "$out/repo" rev-parse HEAD)
# The model patch (a row formatter on padkit's pad.js) and the test patch, as git prints them.
cat >>"$out/repo/index.js" <<'JS'

/** A row: every cell padded on the left to `width`, joined by ` | `. */
exports.row = (cells, width) => {
  const pad = require('padkit/pad');
  return cells.map((c) => pad(c, width)).join(' | ');
};
JS
model=$(git -C "$out/repo" diff)
git -C "$out/repo" checkout -q -- .
cat >"$out/repo/test/row.test.js" <<'JS'
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { row } = require('..');

test('row pads every cell', () => {
  assert.strictEqual(row(['a', 'bb'], 3), '  a |  bb');
});
JS
git -C "$out/repo" add -N test/row.test.js
tpatch=$(git -C "$out/repo" diff)
git -C "$out/repo" rm -q --cached test/row.test.js
rm "$out/repo/test/row.test.js"

# --- the registry on loopback and the two mirrors -----------------------------------------
python3 "$here/../../runtime-tests/probes/npm_registry.py" "$here/registry.json" >"$out/.port" &
registry=$!
trap 'kill $registry 2>/dev/null || true; rm -f "$out/.port"' EXIT
for _ in $(seq 50); do [ -s "$out/.port" ] && break; sleep 0.1; done
url=http://127.0.0.1:$(cat "$out/.port")
"$reprorun" mirror pull --npm "$here/repo/package.json" --npm-registry "$url" --date 2023-03-01 --out "$out/mirror-frozen" >/dev/null
"$reprorun" mirror pull --npm "$here/repo/package.json" --npm-registry "$url" --date 2025-07-01 --out "$out/mirror-live" >/dev/null

# --- the instance and its prediction ------------------------------------------------------
MODEL=$model TPATCH=$tpatch BASE=$base python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
inst = {
    "instance_id": "js-tablefmt__drift",
    "repo": "reprorun/corpus-tablefmt",
    "base_commit": os.environ["BASE"],
    "problem_statement": "Add row(cells, width): every cell padded on the left to width, joined by ' | '.",
    "test_patch": os.environ["TPATCH"] + "\n",
    "FAIL_TO_PASS": ["row pads every cell"],
    "PASS_TO_PASS": ["header joins columns"],
    "created_at": "2023-03-01T00:00:00Z",
    "version": "0.1",
    "repo_path": "repo",
    "test_cmd": "npm install --no-package-lock --loglevel=error >/dev/null && node --test",
    "mirror": "mirror-frozen",
    "recorded_resolved": True,
}
pred = {"instance_id": inst["instance_id"], "model_name_or_path": "reprorun-corpus/hand-written",
        "model_patch": os.environ["MODEL"] + "\n"}
for name, obj in (("instances.jsonl", inst), ("predictions.jsonl", pred)):
    with open(os.path.join(out, name), "w") as f:
        f.write(json.dumps(obj, sort_keys=True) + "\n")
PY
echo "$out: 1 JavaScript instance (js-tablefmt__drift), mirror-frozen and mirror-live"
