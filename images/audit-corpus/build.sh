#!/usr/bin/env bash
# Builds the example corpus of `reprorun audit` (images/README.md, "audit-corpus").
#   images/audit-corpus/build.sh OUT
# OUT must be empty, missing, or an earlier output of this script (then it is rebuilt).
# Writes the input of `reprorun audit snapshot`, as a user collects it:
#   OUT/repos/OWNER__NAME/    six small ML code releases as git repositories, history from
#                             repos/OWNER__NAME/history.txt (fixed names and dates, so the
#                             same commit hashes everywhere)
#   OUT/papers/ID.md          the papers, as Markdown
#   OUT/issues/OWNER__NAME.json  each repository's issues, as `gh issue list --json ...`
#                             exports them (plus reprorun's `reproducibility`/`category`)
#   OUT/pairs.jsonl           the paper-repository pairs
# Needs git and coreutils; no network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build.sh OUT"
out=$1
command -v git >/dev/null || die "git not found"

marker=.reprorun-audit-corpus
if [ -e "$out" ]; then
  [ -d "$out" ] || die "$out exists and is not a directory"
  if [ -n "$(ls -A "$out")" ]; then
    [ -f "$out/$marker" ] || die "$out is not empty and not a corpus this script built; refusing"
    find "$out" -mindepth 1 -delete
  fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "reprorun audit corpus (images/audit-corpus/build.sh)" > "$out/$marker"

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null TZ=UTC LC_ALL=C
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_TEMPLATE_DIR
export GIT_AUTHOR_NAME="Research Maintainer" GIT_AUTHOR_EMAIL="maintainer@lab.example"
export GIT_COMMITTER_NAME="Research Maintainer" GIT_COMMITTER_EMAIL="maintainer@lab.example"

# Copies STEP's files (whole files, mode 0644) over the work tree.
overlay() {
  local src=$1 repo=$2
  (cd "$src" && find . -type f | LC_ALL=C sort) | while read -r f; do
    install -D -m 0644 "$src/$f" "$repo/$f"
  done
}

commit() {
  local repo=$1 date=$2 message=$3
  git -C "$repo" add -A
  GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date \
    git -C "$repo" commit -q --no-gpg-sign -m "$(printf '%b' "$message")"
}

# One repository from its history.txt: `main|STEP|DATE|MESSAGE` commits STEP on main;
# `pr/N/USER/BRANCH|STEP|DATE|MESSAGE` commits STEP on BRANCH and merges it into main as
# GitHub does (`Merge pull request #N from USER/BRANCH`, no fast-forward).
build_repo() {
  local src=$1 repo=$2 kind step date message n user branch
  git -c init.defaultBranch=main init -q "$repo"
  git -C "$repo" config core.autocrlf false
  while IFS='|' read -r kind step date message; do
    case $kind in ''|'#'*) continue ;; esac
    [ -d "$src/$step" ] || die "$src/history.txt names $step, which is missing"
    case $kind in
      main)
        overlay "$src/$step" "$repo"
        commit "$repo" "$date" "$message"
        ;;
      pr/*/*/*)
        IFS=/ read -r _ n user branch <<<"$kind"
        git -C "$repo" checkout -q -b "$branch"
        overlay "$src/$step" "$repo"
        commit "$repo" "$date" "$message"
        git -C "$repo" checkout -q main
        GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date git -C "$repo" merge -q --no-ff \
          --no-gpg-sign -m "Merge pull request #$n from $user/$branch" "$branch"
        git -C "$repo" branch -q -d "$branch"
        ;;
      *) die "$src/history.txt: unknown kind $kind" ;;
    esac
  done < "$src/history.txt"
  [ -z "$(git -C "$repo" status --porcelain)" ] || die "$repo: files left uncommitted"
}

mkdir -p "$out/repos" "$out/papers" "$out/issues"
for src in "$here"/repos/*/; do
  name=$(basename "$src")
  build_repo "${src%/}" "$out/repos/$name"
done
install -m 0644 "$here"/papers/*.md "$out/papers/"
install -m 0644 "$here"/issues/*.json "$out/issues/"
install -m 0644 "$here/pairs.jsonl" "$out/pairs.jsonl"
echo "build.sh: $(ls "$out/repos" | wc -l) repositories -> $out" >&2
