#!/usr/bin/env bash
# Emulates both arms of `reprorun reproduce` on a built corpus with `reprorun exec`, and prints
# a Markdown table (README.md, "Verifying").
#   images/corpus/verify.sh OUT [--shim K] [--no-shim K] [--tz ZONE] [--only NAME]... [--pins]
# shim: reprorun's defaults (--date created_at, seeded entropy, PYTHONHASHSEED=0, TZ=UTC,
# OUT/mirror-frozen), K runs (default 3). no-shim: --date now --random real,
# PYTHONHASHSEED=random, TZ=ZONE (default Asia/Tokyo), OUT/mirror-live, K runs (default 5).
# --pins: also one run of the shim without each pin. Each run gets a fresh copy of the patched
# checkout. Exit 1 when an instance does not do what
# OUT/expected.json says.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: verify.sh OUT [--shim K] [--no-shim K] [--tz ZONE] [--only NAME]... [--pins]" >&2; exit 2; }
if [ -z "${REPRORUN:-}" ]; then
  REPRORUN=$(command -v reprorun) || { echo "verify.sh: set REPRORUN or put reprorun in PATH" >&2; exit 1; }
fi
export REPRORUN
exec python3 "$here/corpus.py" verify "$@"
