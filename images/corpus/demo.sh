#!/usr/bin/env bash
# The README's main command: builds reprorun and the example corpus, runs the reproduction
# study on it with and without the shim (and a clock sweep 16 years on), writes the report
# and prints the per-test ledger's headline.
#   images/corpus/demo.sh [DIR]      (default: a new directory under /tmp)
# As root on Debian/Ubuntu it installs what it needs (git, patch, python3-pytest, python3-pip)
# when missing. The caller's TZ is set to Asia/Tokyo for the study, standing for an evaluator
# in another time zone: the no-shim arm takes the caller's environment, the shim does not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-$(mktemp -d /tmp/reprorun-demo.XXXXXX)}

need=()
for p in git patch python3-pytest python3-pip; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "demo.sh: install ${need[*]} first" >&2
    exit 1
  fi
fi

if [ -z "${REPRORUN:-}" ]; then
  "$root/.ci/musl"
  (cd "$root" && cargo build --release --quiet)
  REPRORUN=$root/target/x86_64-unknown-linux-musl/release/reprorun
fi
export REPRORUN
mkdir -p "$dir"
"$here/build.sh" "$dir/corpus"
cd "$dir"
TZ=Asia/Tokyo "$REPRORUN" reproduce run \
  --instances corpus/instances.jsonl --predictions corpus/predictions.jsonl \
  --no-shim-mirror corpus/mirror-live --db study.db --k 3 --compare-shim --baseline --jobs 2 \
  --clock-sweep created_at,+16y
"$REPRORUN" reproduce report --db study.db --out report >/dev/null
echo "report: $dir/report/report.md, $dir/report/report.html"
# The per-test ledger's headline, and the manifest of tests a grader should not trust.
"$REPRORUN" reproduce ledger --db study.db --export known-flaky.json | head -n 1
echo "ledger: reprorun reproduce ledger --db $dir/study.db; graders' manifest: $dir/known-flaky.json"
