"""Reads a `reprorun reproduce export --swebench DIR` with SWE-bench's own package: its
grading (`get_eval_report` on each test_output.txt) and its run report (`make_run_report`
over the report.json files). Prints one JSON object: per instance, the report SWE-bench
grades from our test_output.txt; and the summary make_run_report wrote.

Usage: python swebench_check.py DIR RUN_ID INSTANCES PREDICTIONS SPECS
"""
import json
import os
import sys

from swebench.harness.constants import MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS
from swebench.harness.grading import get_eval_report
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
from swebench.harness.log_parsers.python import parse_log_pytest
from swebench.harness.reporting import make_run_report
from swebench.harness.test_spec.test_spec import make_test_spec

out_dir, run_id, instances, predictions, specs = sys.argv[1:6]
insts = [json.loads(l) for l in open(instances) if l.strip()]
preds = {}
for line in open(predictions):
    if line.strip():
        p = json.loads(line)
        preds[p["instance_id"]] = p
ids = {i["instance_id"] for i in insts}
preds = {k: v for k, v in preds.items() if k in ids}
# A repository outside SWE-bench's own list: its specs and pytest's parser, as SWE-bench
# keeps them for its Python repositories.
for repo, versions in json.load(open(specs)).items():
    MAP_REPO_VERSION_TO_SPECS.setdefault(repo, {}).update(versions)
    MAP_REPO_TO_PARSER[repo] = parse_log_pytest
    MAP_REPO_TO_EXT[repo] = "py"
os.chdir(out_dir)
graded = {}
for inst in insts:
    iid = inst["instance_id"]
    model = preds[iid]["model_name_or_path"].replace("/", "__")
    log = os.path.join("logs/run_evaluation", run_id, model, iid, "test_output.txt")
    if os.path.exists(log):
        spec = make_test_spec(inst)
        graded[iid] = get_eval_report(spec, preds[iid], log, True)[iid]
summary = make_run_report(preds, insts, run_id)
print(json.dumps({"graded": graded, "summary": json.load(open(summary))}))
