#!/usr/bin/env bash
# Refreshes the committed bundles (repos/) from clones of the repositories of repos.tsv:
#   images/audit-real/pack.sh MIRRORS
# (build.sh --mirrors MIRRORS into a scratch directory, then its repos/ copied here). The
# rewrite gives the same commits from the same clones; commit ids the hand labels (labels/)
# name change only when rewrite.py's rules or repos.tsv do, and then the labels must be
# carried over. Needs git and python3; no network.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: pack.sh MIRRORS" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/build.sh" --mirrors "$1" "$tmp/out"
rm -rf "$here/repos"
cp -r "$tmp/out/repos" "$here/repos"
echo "pack.sh: $(ls "$here"/repos/*.bundle | wc -l) bundles, $(du -cb "$here"/repos/*.bundle | tail -1 | cut -f1) bytes in $here/repos" >&2
