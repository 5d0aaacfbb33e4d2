#!/usr/bin/env bash
# Builds the real example corpus of `reprorun audit` (images/README.md, "audit-real").
#   images/audit-real/build.sh OUT                  from the committed bundles (repos/)
#   images/audit-real/build.sh --mirrors MIRRORS OUT  from clones, rewritten again
# repos/ holds one small bundle per repository of repos.tsv, made by the second form
# (pack.sh refreshes them). MIRRORS holds clones of the 27 public repositories, one
# directory each named OWNER+NAME (a bare repository, or a work tree's .git, directly or
# under repo/), as the search tool's `fetch` or `git clone --mirror
# https://github.com/OWNER/NAME` gives them.
# OUT must be empty, missing, or an earlier output of this script (then it is rebuilt).
# Writes the input of `reprorun audit snapshot`:
#   OUT/repos/OWNER__NAME.bundle  the branch of repos.tsv at its recorded head, rewritten by
#                                 rewrite.py (large blobs, or blobs absent from the clone,
#                                 become a short placeholder; unchanged commits keep their ids)
#   OUT/repos/OWNER__NAME.stripped  what rewrite.py replaced (path, blob id, size; -1 = absent)
#   OUT/papers/ID.md              paraphrased paper texts (papers/)
#   OUT/issues/OWNER__NAME.json   the repositories' real issues as `gh issue list --json` gives
#                                 them, bodies paraphrased (issues/)
#   OUT/pairs.jsonl               the paper-repository pairs
# $ONLY, a comma-separated list of paper ids, builds those pairs only (a quick subset).
# Needs git and python3; no network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "build.sh: $*" >&2; exit 1; }
mirrors=
if [ "${1:-}" = --mirrors ]; then
  [ $# -eq 3 ] || die "usage: build.sh [--mirrors MIRRORS] OUT"
  mirrors=$2; shift 2
  [ -d "$mirrors" ] || die "$mirrors is not a directory"
fi
[ $# -eq 1 ] || die "usage: build.sh [--mirrors MIRRORS] OUT"
out=$1
command -v git >/dev/null || die "git not found"
command -v python3 >/dev/null || die "python3 not found"

marker=.reprorun-audit-real
if [ -e "$out" ]; then
  [ -d "$out" ] || die "$out exists and is not a directory"
  if [ -n "$(ls -A "$out")" ]; then
    [ -f "$out/$marker" ] || die "$out is not empty and not a corpus this script built; refusing"
    find "$out" -mindepth 1 -delete
  fi
fi
mkdir -p "$out/repos" "$out/papers" "$out/issues"
out=$(cd "$out" && pwd)
echo "reprorun real audit corpus (images/audit-real/build.sh)" > "$out/$marker"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null TZ=UTC LC_ALL=C
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_TEMPLATE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The repositories of the pairs kept (all without $ONLY).
keep=$(python3 - "$here/pairs.jsonl" "${ONLY:-}" <<'PY'
import json, sys
only = set(filter(None, sys.argv[2].split(",")))
for line in open(sys.argv[1]):
    p = json.loads(line)
    if not only or p["paper_id"] in only:
        print(p["repo"])
PY
)
[ -n "$keep" ] || die "ONLY=${ONLY:-} names no paper of pairs.jsonl"

while IFS=$'\t' read -r repo branch head; do
  case $repo in ''|'#'*) continue ;; esac
  grep -qxF "$repo" <<<"$keep" || continue
  name=${repo/\//__}
  if [ -z "$mirrors" ]; then
    [ -f "$here/repos/$name.bundle" ] || die "$repo: no repos/$name.bundle (build.sh --mirrors makes it)"
    cp "$here/repos/$name.bundle" "$here/repos/$name.stripped" "$out/repos/"
    continue
  fi
  src=
  for cand in "$mirrors/${repo/\//+}/repo/.git" "$mirrors/${repo/\//+}/repo" "$mirrors/${repo/\//+}"; do
    if git --git-dir="$cand" rev-parse -q --verify "$head^{commit}" >/dev/null 2>&1; then
      src=$cand; break
    fi
  done
  [ -n "$src" ] || die "$repo: no clone under $mirrors holds $head"
  work=$tmp/${repo/\//__}.git
  git init -q --bare "$work"
  # Objects are shared read-only through alternates; only new objects land in $work.
  echo "$(cd "$src" && pwd)/objects" > "$work/objects/info/alternates"
  git --git-dir="$work" update-ref refs/heads/src "$head"
  python3 "$here/rewrite.py" "$work" refs/heads/src "refs/heads/$branch" 16384 \
    > "$out/repos/${repo/\//__}.stripped"
  git --git-dir="$work" symbolic-ref HEAD "refs/heads/$branch"
  git --git-dir="$work" update-ref -d refs/heads/src
  # A tighter delta search than the default: the bundles are committed.
  git --git-dir="$work" -c pack.window=250 -c pack.depth=250 -c pack.compression=9 -c pack.threads=1 \
    bundle create -q "$out/repos/${repo/\//__}.bundle" "refs/heads/$branch" HEAD
  rm -rf "$work"
done < "$here/repos.tsv"

python3 - "$here" "$out" "${ONLY:-}" <<'PY'
import json, shutil, sys
here, out, only = sys.argv[1], sys.argv[2], set(filter(None, sys.argv[3].split(",")))
with open(f"{out}/pairs.jsonl", "w") as f:
    for line in open(f"{here}/pairs.jsonl"):
        p = json.loads(line)
        if only and p["paper_id"] not in only:
            continue
        f.write(line)
        shutil.copyfile(f"{here}/{p['paper']}", f"{out}/{p['paper']}")
        name = p["repo"].replace("/", "__") + ".json"
        shutil.copyfile(f"{here}/issues/{name}", f"{out}/issues/{name}")
PY
echo "build.sh: $(ls "$out"/repos/*.bundle | wc -l) repositories -> $out ($(du -sh "$out" | cut -f1))" >&2
