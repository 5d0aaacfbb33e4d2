#!/usr/bin/env python3
"""A fixed set of findings written blind by a careful reader, replayed as an audit agent.

Run by `reprorun audit run --agent-root images/audit-real/blind --agent-cmd
'python3 /opt/agent/agent.py'`. findings.json (beside this file) holds, for each paper of
split.tsv (the held-out half's first; the tuning half's were added for issue 46, so that
judge rules are made from tuning pairs only), the findings a careful agent wrote after reading only that paper's
snapshots (their code, README and configuration) and the paraphrased paper, never its issues:
missing dependencies, version pins, absent weights, hard-coded paths, paper/code mismatches.
The agent recognises the paper by its title in $REPRORUN_AUDIT_PAPER and writes those
findings, in the order written (the reader's ranking), keeping a finding only when one of
its evidence files exists in the snapshot ($REPRORUN_AUDIT_REPO): a snapshot that lacks the
file cannot hold the problem. A paper it does not know gets no findings. Deterministic;
Python 3 standard library.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    repo = os.environ["REPRORUN_AUDIT_REPO"]
    out = os.environ["REPRORUN_AUDIT_OUT"]
    paper = os.environ.get("REPRORUN_AUDIT_PAPER", "")
    head = ""
    if paper and os.path.isfile(paper):
        with open(paper, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    with open(os.path.join(HERE, "findings.json"), encoding="utf-8") as f:
        known = json.load(f)["papers"]
    findings = []
    for entry in known.values():
        if entry["title_contains"] in head:
            for finding in entry["findings"]:
                paths = [e["path"] for e in finding["evidence"] if e["path"] != "paper"]
                if not paths or any(os.path.isfile(os.path.join(repo, p)) for p in paths):
                    findings.append(finding)
            break
    doc = {"reproducibility_assessment": "blind reading of the snapshot" if findings else "paper not known",
           "findings": findings, "missing_or_ambiguous_artifacts": []}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
