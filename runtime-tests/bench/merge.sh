#!/usr/bin/env bash
# The merge rate of the three pipelines' `merge` (`reproduce merge`, `audit merge` of an
# `audit plan` and of an `audit judge-plan`): a plan of about N units, one result file per
# unit as `work` writes it (each with its own logs), merged into a fresh database; then
# merged again (nothing new). Reproduce: the example corpus's instances, k large. Audit run:
# a corpus of N/10 snapshot groups (one tree) × 10 repeats. Audit judge: a judging plan of
# the runs just merged, one judgment per run.
#   runtime-tests/bench/merge.sh [N]      (default 25000; not part of the tests)
# $REPRORUN_BASE_BIN: also measure that binary (e.g. a build of the previous commit), side
# by side. Prints results per second (target >= 5,000/s: a 25,000-unit study merges in
# seconds), and the first merge's peak resident set (GNU time's %M: the process's rusage).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
total=${1:-25000}
need python3 git bc
[ -x /usr/bin/time ] || { echo "merge.sh: GNU time (/usr/bin/time) not installed" >&2; exit 1; }
build_reprorun
make_work
REPRORUN=$bin "$root/images/corpus/build.sh" "$work/corpus" >/dev/null

# synth KIND TASKS RESULTS: one result file per planned unit of TASKS, as `work` writes it.
synth() {
  python3 - "$@" <<'PY'
import hashlib, json, os, sys
kind, tasks, results = sys.argv[1:4]
fmt = {"reproduce": "reprorun-result/1", "audit": "reprorun-audit-result/1",
       "judge": "reprorun-judge-result/1"}[kind]
digest = hashlib.sha256(open(tasks + "/manifest.json", "rb").read()).hexdigest()
m = json.load(open(tasks + "/manifest.json"))
os.makedirs(results + "/runs", exist_ok=True), os.makedirs(results + "/logs", exist_ok=True)
def log(text):
    b = text.encode()
    d = hashlib.sha256(b).hexdigest()
    with open(results + "/logs/" + d, "wb") as f:
        f.write(b)
    return d
host = {"hostname": "node1", "kernel": "6.1.0", "cpu_model": "cpu", "cpus": 2,
        "mem_bytes": 1 << 34, "os": "Debian GNU/Linux 12", "machine_id": "0123456789abcdef",
        "reprorun_version": m["reprorun_version"], "job": "slurm:1_1"}
n = 0
for c in m["chunks"]:
    chunk = json.load(open(tasks + "/chunks/%04d.json" % c["index"]))
    for u in chunk["units"]:
        out, err = log("%s: 12 passed in 1.01s\n" % u["key"]), log("%s\n" % n)
        s = {"format": fmt, "manifest_sha256": digest, "key": u["key"], "chunk": chunk["index"]}
        if kind == "reproduce":
            s["row"] = {"instance_id": u["instance_id"], "arm": u["arm"], "idx": u["idx"],
                        "resolved": True, "infra": None, "exit_code": 0, "wall_ms": 1500,
                        "started_at": 1700000000 + n, "signature": "s", "evidence": [],
                        "apply": "model=git-apply test=git-apply", "tests": "{}",
                        "stdout_sha256": out, "stderr_sha256": err, "junit_sha256": None,
                        "error": None}
        elif kind == "audit":
            s["row"] = {"group_id": u["group_id"], "repeat": u["repeat"], "status": "ok",
                        "reason": None, "exit_code": 0, "wall_ms": 1500,
                        "started_at": 1700000000 + n, "n_findings": 0, "findings_sha256": None,
                        "raw_sha256": None, "stdout_sha256": out, "stderr_sha256": err,
                        "input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 5,
                        "cost_usd": None, "cost_source": "none"}
        else:
            r = u["row"]
            s["judgment"] = {"group_id": r["group_id"], "repeat": r["repeat"],
                             "judge": m["judge"], "status": "skipped", "reason": None,
                             "attempts": 1, "task_sha256": out, "result_sha256": None,
                             "stdout_sha256": None, "stderr_sha256": err, "input_tokens": 0,
                             "cached_input_tokens": 0, "output_tokens": 0, "cost_usd": None}
            s["labels"] = []
        s["host"], s["finished_at"] = host, 1700000100 + n
        with open(results + "/runs/%s.json" % u["key"], "w") as f:
            json.dump(s, f, indent=2)
        n += 1
print(n)
PY
}

# merge NAME PIPELINE EXE VERB TASKS RESULTS DB: merges twice; prints both rates.
merge() {
  local name=$1 what=$2 exe=$3 verb=$4 tasks=$5 results=$6 db=$7 t0 first again count
  count=$(find "$results/runs" -name '*.json' | wc -l)
  sync
  t0=$(date +%s.%N)
  /usr/bin/time -f %M -o "$db.first.rss" \
    "$exe" "$verb" merge --tasks "$tasks" --results "$results" --db "$db" --json >"$db.first.json"
  first=$(echo "$(date +%s.%N) - $t0" | bc)
  t0=$(date +%s.%N)
  "$exe" "$verb" merge --tasks "$tasks" --results "$results" --db "$db" --json >"$db.again.json"
  again=$(echo "$(date +%s.%N) - $t0" | bc)
  grep -q "\"inserted\":$count" "$db.first.json" || { echo "merge.sh: $(cat "$db.first.json")" >&2; exit 1; }
  printf '%-6s %-11s %d results in %6.2f s: %6.0f results/s; again (nothing new): %6.0f results/s; peak RSS %d KiB\n' \
    "$name" "$what" "$count" "$first" "$(echo "$count / $first" | bc -l)" \
    "$(echo "$count / $again" | bc -l)" "$(tail -n 1 "$db.first.rss")"
}

# measure NAME EXE: the three pipelines' merges by binary EXE, in a directory of their own.
measure() {
  local name=$1 exe=$2 d="$work/$1" n k groups
  mkdir -p "$d" && cd "$d"
  n=$(wc -l <"$work/corpus/instances.jsonl")
  k=$(( (total + 2 * n - 1) / (2 * n) ))
  "$exe" reproduce plan --instances "$work/corpus/instances.jsonl" \
    --predictions "$work/corpus/predictions.jsonl" --compare-shim --pin-runs 0 --k "$k" \
    --db merge.db --out tasks --results results >/dev/null
  synth reproduce tasks results >/dev/null
  merge "$name" reproduce "$exe" reproduce tasks results merge.db

  groups=$(( (total + 9) / 10 ))
  python3 - "$groups" <<'PY'
import hashlib, io, json, os, sys, tarfile
groups = int(sys.argv[1])
os.makedirs("acorpus/trees"), os.makedirs("acorpus/papers")
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    data = b"print('hi')\n"
    info = tarfile.TarInfo("main.py"); info.size = len(data); info.mode = 0o644
    t.addfile(info, io.BytesIO(data))
tree = hashlib.sha256(buf.getvalue()).hexdigest()
open("acorpus/trees/%s.tar" % tree, "wb").write(buf.getvalue())
paper = b"# A paper\n"
pname = hashlib.sha256(paper).hexdigest() + ".md"
open("acorpus/papers/" + pname, "wb").write(paper)
gs = [{"group_id": "p1@%012d" % i, "paper_id": "p1", "repo": "o/demo", "commit": "%040d" % i,
       "tree": tree, "issues": [], "post_fix_for": []} for i in range(groups)]
json.dump({"version": 1, "pairs": [{"paper_id": "p1", "title": "A paper", "repo": "o/demo",
           "paper": pname, "paper_kind": "md", "collected_at": "2024-01-01T00:00:00Z"}],
           "groups": gs, "issues": [], "warnings": []}, open("acorpus/corpus.json", "w"))
PY
  "$exe" audit plan --corpus acorpus --agent-cmd true --repeats 10 --db audit.db \
    --out atasks --results aresults >/dev/null
  synth audit atasks aresults >/dev/null
  merge "$name" "audit run" "$exe" audit atasks aresults audit.db
  "$exe" audit judge-plan --db audit.db --out jtasks --results jresults >/dev/null
  synth judge jtasks jresults >/dev/null
  merge "$name" "audit judge" "$exe" audit jtasks jresults audit.db
  cd "$work"
}

measure after "$bin"
if [ -n "${REPRORUN_BASE_BIN:-}" ]; then
  measure before "$REPRORUN_BASE_BIN"
fi
