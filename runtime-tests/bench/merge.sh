#!/usr/bin/env bash
# The merge rate of `reproduce merge`: a plan of about N runs (the example corpus's
# instances, k large), one result file per run as `work` writes it (each with its own
# stdout and stderr logs), merged into a fresh database; then merged again (nothing new).
#   runtime-tests/bench/merge.sh [N]      (default 25000; not part of the tests)
# Prints results per second (target >= 5,000/s: a 25,000-run study merges in seconds).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
total=${1:-25000}
need python3 git bc
build_reprorun
make_work
REPRORUN=$bin "$root/images/corpus/build.sh" "$work/corpus" >/dev/null
cd "$work"
n=$(wc -l <corpus/instances.jsonl)
k=$(( (total + 2 * n - 1) / (2 * n) ))
"$bin" reproduce plan --instances corpus/instances.jsonl --predictions corpus/predictions.jsonl \
  --compare-shim --pin-runs 0 --k "$k" --db merge.db --out tasks --results results >/dev/null
python3 - <<'PY'
import hashlib, json, os
digest = hashlib.sha256(open("tasks/manifest.json", "rb").read()).hexdigest()
m = json.load(open("tasks/manifest.json"))
os.makedirs("results/runs"), os.makedirs("results/logs")
def log(text):
    b = text.encode()
    d = hashlib.sha256(b).hexdigest()
    with open("results/logs/" + d, "wb") as f:
        f.write(b)
    return d
host = {"hostname": "node1", "kernel": "6.1.0", "cpu_model": "cpu", "cpus": 2,
        "mem_bytes": 1 << 34, "os": "Debian GNU/Linux 12", "machine_id": "0123456789abcdef",
        "reprorun_version": m["reprorun_version"], "job": "slurm:1_1"}
n = 0
for c in m["chunks"]:
    chunk = json.load(open("tasks/chunks/%04d.json" % c["index"]))
    for u in chunk["units"]:
        row = {"instance_id": u["instance_id"], "arm": u["arm"], "idx": u["idx"],
               "resolved": True, "infra": None, "exit_code": 0, "wall_ms": 1500,
               "started_at": 1700000000 + n, "signature": "s", "evidence": [],
               "apply": "model=git-apply test=git-apply", "tests": "{}",
               "stdout_sha256": log("%s: 12 passed in 1.01s\n" % u["key"]),
               "stderr_sha256": log("%s\n" % n), "junit_sha256": None, "error": None}
        s = {"format": "reprorun-result/1", "manifest_sha256": digest, "key": u["key"],
             "chunk": chunk["index"], "row": row, "host": host, "finished_at": 1700000100 + n}
        with open("results/runs/%s.json" % u["key"], "w") as f:
            json.dump(s, f, indent=2)
        n += 1
open("count", "w").write(str(n))
PY
count=$(cat count)
sync
merge() {
  local t0; t0=$(date +%s.%N)
  "$bin" reproduce merge --tasks tasks --results results --db merge.db --json >"$1"
  echo "$(date +%s.%N) - $t0" | bc
}
first=$(merge first.json)
again=$(merge again.json)
grep -q "\"inserted\":$count" first.json || { echo "merge.sh: $(cat first.json)" >&2; exit 1; }
printf 'merge:       %d results in %6.2f s: %6.0f results/s (target >= 5000/s)\n' \
  "$count" "$first" "$(echo "$count / $first" | bc -l)"
printf 'merge again: %d results in %6.2f s: %6.0f results/s (nothing new)\n' \
  "$count" "$again" "$(echo "$count / $again" | bc -l)"
