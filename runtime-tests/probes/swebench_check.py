"""Reads a `reprorun reproduce export --swebench DIR` with SWE-bench's own package: its
grading (`get_eval_report` on each test_output.txt) and its run report (`make_run_report`
over the report.json files). Prints one JSON object: per instance, the report SWE-bench
grades from our test_output.txt; and the summary make_run_report wrote.

Usage: python swebench_check.py DIR RUN_ID INSTANCES PREDICTIONS SPECS [PARSERS]

PARSERS is a JSON object naming, per repository outside SWE-bench's own list, which of
SWE-bench's log parsers grades it (`pytest`, `gotest`, `jest`), or null when SWE-bench
ships none for its runner (mocha's spec reporter): such an instance is not graded here, and
only the run report reads its report.json. Default: pytest for every repository.
"""
import json
import os
import sys

from swebench.harness.constants import MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS
from swebench.harness.grading import get_eval_report
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
from swebench.harness.log_parsers.go import parse_log_gotest
from swebench.harness.log_parsers.javascript import parse_log_jest
from swebench.harness.log_parsers.python import parse_log_pytest
from swebench.harness.reporting import make_run_report
from swebench.harness.test_spec.test_spec import make_test_spec

out_dir, run_id, instances, predictions, specs = sys.argv[1:6]
parsers = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
PARSERS = {
    "pytest": (parse_log_pytest, "py"),
    "gotest": (parse_log_gotest, "go"),
    "jest": (parse_log_jest, "js"),
}
insts = [json.loads(l) for l in open(instances) if l.strip()]
preds = {}
for line in open(predictions):
    if line.strip():
        p = json.loads(line)
        preds[p["instance_id"]] = p
ids = {i["instance_id"] for i in insts}
preds = {k: v for k, v in preds.items() if k in ids}
# A repository outside SWE-bench's own list: its specs and its runner's parser, as SWE-bench
# keeps them for its own repositories.
ungraded = set()
for repo, versions in json.load(open(specs)).items():
    MAP_REPO_VERSION_TO_SPECS.setdefault(repo, {}).update(versions)
    name = parsers.get(repo, "pytest")
    if name is None:
        ungraded.add(repo)
        continue
    MAP_REPO_TO_PARSER[repo], MAP_REPO_TO_EXT[repo] = PARSERS[name]
os.chdir(out_dir)
graded = {}
for inst in insts:
    iid = inst["instance_id"]
    model = preds[iid]["model_name_or_path"].replace("/", "__")
    log = os.path.join("logs/run_evaluation", run_id, model, iid, "test_output.txt")
    if os.path.exists(log) and inst["repo"] not in ungraded:
        spec = make_test_spec(inst)
        graded[iid] = get_eval_report(spec, preds[iid], log, True)[iid]
summary = make_run_report(preds, insts, run_id)
print(json.dumps({"graded": graded, "summary": json.load(open(summary))}))
