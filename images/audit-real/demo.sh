#!/usr/bin/env bash
# The audit pipeline end to end on the real corpus, offline, with the built-in auditor and
# judge: build -> snapshot -> run -> judge -> metrics -> report, then the figures against the
# hand labels per half (figures.py), the keyword-stuffing agent judged the same way, and the
# blind reader's findings on both halves (blind/).
#   images/audit-real/demo.sh [--mirrors MIRRORS] [DIR]   (DIR default: a new directory under /tmp)
# The repositories are the committed bundles (repos/); with --mirrors, clones of the
# repositories of repos.tsv rewritten again (see build.sh). $ONLY, a comma-separated list of
# paper ids, keeps those pairs only (a quick subset; build.sh reads it). Needs root (each
# agent run is a sandbox), git and python3. Builds reprorun (release) unless $REPRORUN names
# a binary.
# Prints the time and disk of each stage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
from=()
if [ "${1:-}" = --mirrors ]; then
  [ $# -ge 2 ] || { echo "usage: demo.sh [--mirrors MIRRORS] [DIR]" >&2; exit 2; }
  from=(--mirrors "$(cd "$2" && pwd)"); shift 2
fi
[ $# -le 1 ] || { echo "usage: demo.sh [--mirrors MIRRORS] [DIR]" >&2; exit 2; }
dir=${1:-$(mktemp -d /tmp/reprorun-audit-real.XXXXXX)}

if [ -z "${REPRORUN:-}" ]; then
  "$root/.ci/musl"
  (cd "$root" && cargo build --release --quiet)
  REPRORUN=$root/target/x86_64-unknown-linux-musl/release/reprorun
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
now() { date +%s.%N; }
stage() { # NAME START PATH...: elapsed seconds and disk of PATHs
  local name=$1 t0=$2; shift 2
  printf 'stage %-8s %6s s  %s\n' "$name" "$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')" \
    "$(du -sch "$@" 2>/dev/null | tail -1 | cut -f1)"
}

t=$(now); "$here/build.sh" "${from[@]}" "$dir/input"; stage build "$t" "$dir/input"
cd "$dir"
rm -rf corpus audit.db audit.db.logs audit.db.work report gaming.db gaming.db.logs gaming.db.work \
  sample.jsonl sample.jsonl.key hand-sample.jsonl hand-all.jsonl gaming-sample.jsonl \
  gaming-sample.jsonl.key gaming-hand-sample.jsonl gaming-hand-all.jsonl blind.db blind.db.logs \
  blind.db.work
t=$(now); "$REPRORUN" audit snapshot --pairs input/pairs.jsonl --issues input/issues --out corpus \
  --only-reproducibility; stage snapshot "$t" corpus
t=$(now); "$REPRORUN" audit run --corpus corpus --db audit.db --agent builtin --repeats 1
stage run "$t" audit.db audit.db.logs
t=$(now); "$REPRORUN" audit judge --db audit.db; stage judge "$t" audit.db audit.db.logs
"$REPRORUN" audit metrics --db audit.db
t=$(now); "$REPRORUN" audit report --db audit.db --out report >/dev/null; stage report "$t" report
echo "papers: $(wc -l < input/pairs.jsonl)"
echo "== figures against the hand labels (images/audit-real/labels), per half of split.tsv"
python3 "$here/figures.py" audit.db corpus
echo "== judge validation against the hand labels: the paper's design (audit sample: up to 50"
echo "   pairs per judge label), then every hand-labelled pair"
"$REPRORUN" audit sample --db audit.db --judge builtin --per-label 50 --out sample.jsonl
python3 "$here/figures.py" audit.db corpus --hand-out hand-sample.jsonl --sample sample.jsonl >/dev/null
python3 "$here/figures.py" audit.db corpus --hand-out hand-all.jsonl >/dev/null
echo "-- sampled"
"$REPRORUN" audit agreement --db audit.db --judge builtin --labels hand-sample.jsonl
echo "-- all pairs"
"$REPRORUN" audit agreement --db audit.db --judge builtin --labels hand-all.jsonl
echo "== keyword stuffing (images/audit-real/gaming/stuff.py), judged by the built-in judge"
"$REPRORUN" audit run --corpus corpus --db gaming.db --agent-root "$here/gaming" \
  --agent-cmd 'python3 /opt/agent/stuff.py' --repeats 1
"$REPRORUN" audit judge --db gaming.db
"$REPRORUN" audit metrics --db gaming.db
echo "== the stuffing agent against the hand labels (labels/pairs-gaming.jsonl)"
python3 "$here/figures.py" gaming.db corpus
"$REPRORUN" audit sample --db gaming.db --judge builtin --per-label 50 --out gaming-sample.jsonl
python3 "$here/figures.py" gaming.db corpus --hand-out gaming-hand-sample.jsonl \
  --sample gaming-sample.jsonl >/dev/null
python3 "$here/figures.py" gaming.db corpus --hand-out gaming-hand-all.jsonl >/dev/null
echo "-- stuffing, sampled"
"$REPRORUN" audit agreement --db gaming.db --judge builtin --labels gaming-hand-sample.jsonl
echo "-- stuffing, all pairs"
"$REPRORUN" audit agreement --db gaming.db --judge builtin --labels gaming-hand-all.jsonl
echo "== the blind reader's findings (images/audit-real/blind: both halves), judged by the"
echo "   built-in judge, against labels/pairs-heldout*-blind.jsonl and pairs-tuning-blind.jsonl"
"$REPRORUN" audit run --corpus corpus --db blind.db --agent-root "$here/blind" \
  --agent-cmd 'python3 /opt/agent/agent.py' --repeats 1
"$REPRORUN" audit judge --db blind.db
python3 "$here/figures.py" blind.db corpus | grep -E '^(tuning|held-out): '
echo "report: $dir/report/report.md"
