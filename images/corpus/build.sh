#!/usr/bin/env bash
# Builds the example corpus of `reprorun reproduce` (README.md beside this script).
#   images/corpus/build.sh OUT
# OUT must be empty, missing, or a corpus an earlier run built (then it is rebuilt). Writes:
#   OUT/repo                  the `shelf` project as a git repository (fixed names and dates,
#                             so the same commit hashes everywhere; tags name the commits)
#   OUT/wheels/               shelfdep 1.0 and 2.0 (byte-identical on every machine)
#   OUT/mirror-frozen         a reprorun mirror: shelfdep 1.0 (uploaded 2023-03-01)
#   OUT/mirror-live           a reprorun mirror: 1.0, and 2.0 (uploaded 2025-06-01)
#   OUT/instances.jsonl       SWE-bench instances (+ repo_path, test_cmd, mirror,
#                             recorded_resolved)
#   OUT/predictions.jsonl     the model patches
#   OUT/expected.json         what each instance should do in each arm (for tests and readers)
# Needs git, python3, patch, coreutils, and reprorun ($REPRORUN, else `reprorun` in PATH):
# the hash-order and random tests assert what the patched code printed under reprorun's
# shim, so they are computed here, with the interpreter the tests run with
# ($CORPUS_PYTHON, else the python3 the sandbox's PATH finds; it needs pytest and pip).
# Every instance is then run once under the shim and must be resolved (CORPUS_NO_CHECK=1
# skips that). images/corpus/verify.sh OUT runs both arms k times.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build.sh OUT"
out=$1
reprorun=${REPRORUN:-$(command -v reprorun || true)}
[ -n "$reprorun" ] && [ -x "$reprorun" ] || die "reprorun not found: set REPRORUN or put it in PATH"
reprorun=$(cd "$(dirname "$reprorun")" && pwd)/$(basename "$reprorun")
for tool in git python3 patch sha256sum; do
  command -v "$tool" >/dev/null || die "$tool not found"
done

marker=.reprorun-corpus
if [ -e "$out" ]; then
  [ -d "$out" ] || die "$out exists and is not a directory"
  if [ -n "$(ls -A "$out")" ]; then
    [ -f "$out/$marker" ] || die "$out is not empty and not a corpus this script built; refusing"
    chmod -R u+w "$out"
    find "$out" -mindepth 1 -delete
  fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "reprorun corpus (images/corpus/build.sh)" > "$out/$marker"

# The interpreter the tests run with, as an absolute path: the shim's frozen PATH finds it,
# and the no-shim arm (the caller's PATH, which may put another python3 first) runs the same.
py=${CORPUS_PYTHON:-$("$reprorun" exec -- /bin/sh -c 'command -v python3')}
case $py in /*) ;; *) die "python3 not found in the sandbox's PATH (set CORPUS_PYTHON)" ;; esac
"$py" -m pytest --version >/dev/null 2>&1 || die "$py has no pytest (apt-get install python3-pytest)"
"$py" -m pip --version >/dev/null 2>&1 || die "$py has no pip (apt-get install python3-pip)"

# --- OUT/repo: the history in history.txt, one commit per project/DIR --------------------
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null TZ=UTC LC_ALL=C
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_TEMPLATE_DIR
export GIT_AUTHOR_NAME="Shelf Maintainers" GIT_AUTHOR_EMAIL="maintainers@shelf.example"
export GIT_COMMITTER_NAME="Shelf Maintainers" GIT_COMMITTER_EMAIL="maintainers@shelf.example"
repo=$out/repo
git init -q -b main "$repo"
git -C "$repo" config core.autocrlf false
git -C "$repo" config commit.gpgsign false
git -C "$repo" config tag.gpgsign false
while IFS='|' read -r dir date subject; do
  case $dir in ''|'#'*) continue ;; esac
  [ -d "$here/project/$dir" ] || die "history.txt names project/$dir, which is missing"
  # Whole files, mode 0644, no byte-code: the tree (and so the hash) is the same everywhere.
  (cd "$here/project/$dir" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort) |
    while read -r f; do
      case $f in
        # A change to a file an earlier commit made: the diff, applied.
        *.diff) git -C "$repo" apply --whitespace=nowarn "$here/project/$dir/$f" ;;
        *) install -D -m 0644 "$here/project/$dir/$f" "$repo/$f" ;;
      esac
    done
  git -C "$repo" add -A
  GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -C "$repo" commit -q -m "$subject"
  git -C "$repo" tag "$dir"
done < "$here/history.txt"
git -C "$repo" status --porcelain | grep -q . && die "repo: files left uncommitted"

# --- wheels and mirrors --------------------------------------------------------------------
python3 "$here/make_wheels.py" "$out/wheels" >/dev/null
whl1=$out/wheels/shelfdep-1.0-py3-none-any.whl
whl2=$out/wheels/shelfdep-2.0-py3-none-any.whl
"$reprorun" mirror add "$out/mirror-frozen" --upload-time 2023-03-01T00:00:00Z "$whl1" >/dev/null
"$reprorun" mirror add "$out/mirror-live" --upload-time 2023-03-01T00:00:00Z "$whl1" >/dev/null
"$reprorun" mirror add "$out/mirror-live" --upload-time 2025-06-01T00:00:00Z "$whl2" >/dev/null
"$reprorun" mirror verify "$out/mirror-frozen" >/dev/null
"$reprorun" mirror verify "$out/mirror-live" >/dev/null

# --- instances, predictions (probes and the shim self-check run here) ---------------------
REPRORUN=$reprorun python3 "$here/corpus.py" assemble "$out" "$py" "$reprorun"

echo "$out: $(wc -l < "$out/instances.jsonl") instances; repo HEAD $(git -C "$repo" rev-parse HEAD)"
