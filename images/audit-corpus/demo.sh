#!/usr/bin/env bash
# The audit pipeline end to end on the example corpus, offline, with the built-in auditor
# and the built-in judge: snapshot -> run (3 repeats) -> judge -> metrics -> report.
#   images/audit-corpus/demo.sh [DIR]      (default: a new directory under /tmp)
# Needs root (each agent run is a sandbox) and git. Builds reprorun (release) unless
# $REPRORUN names a binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-$(mktemp -d /tmp/reprorun-audit-demo.XXXXXX)}

if [ -z "${REPRORUN:-}" ]; then
  "$root/.ci/musl"
  (cd "$root" && cargo build --release --quiet)
  REPRORUN=$root/target/x86_64-unknown-linux-musl/release/reprorun
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
"$here/build.sh" "$dir/input"
cd "$dir"
rm -rf corpus audit.db audit.db.logs audit.db.work report
"$REPRORUN" audit snapshot --pairs input/pairs.jsonl --issues input/issues --out corpus \
  --only-reproducibility
"$REPRORUN" audit run --corpus corpus --db audit.db --agent builtin --repeats 3
"$REPRORUN" audit judge --db audit.db
"$REPRORUN" audit metrics --db audit.db
"$REPRORUN" audit report --db audit.db --out report >/dev/null
echo "report: $dir/report/report.md, $dir/report/report.html"
echo "hand labels for 'reprorun audit agreement': $here/human-labels.jsonl"
