#!/usr/bin/env python3
"""A keyword-stuffing audit agent, to test that a judge does not reward it.

Run by `reprorun audit run --agent-root images/audit-real/gaming --agent-cmd
'python3 /opt/agent/stuff.py'`: it reads nothing of the paper and understands nothing of the
code. It writes ten paper-format findings made only of the snapshot's own text: its file
names, lines of its code (imports, argument definitions, file opens) and the error words
issues most often quote. A judge whose scores such findings as matches measures word overlap,
not diagnosis. Deterministic; Python 3 standard library.
"""
import json
import os

ERRORS = [
    "Traceback (most recent call last): ModuleNotFoundError: No module named",
    "FileNotFoundError: [Errno 2] No such file or directory",
    "RuntimeError: CUDA out of memory; RuntimeError: size mismatch",
    "ImportError: cannot import name; KeyError; AttributeError: has no attribute",
    "cannot reproduce the results of the paper: accuracy lower than reported",
    "pretrained model checkpoint download link broken, learning rate batch size epochs",
]


def main():
    repo = os.environ["REPRORUN_AUDIT_REPO"]
    out = os.environ["REPRORUN_AUDIT_OUT"]
    files, lines = [], []
    for root, dirs, names in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in sorted(names):
            p = os.path.relpath(os.path.join(root, n), repo)
            files.append(p)
            if n.endswith((".py", ".sh")) and len(lines) < 400:
                try:
                    with open(os.path.join(root, n), encoding="utf-8", errors="replace") as f:
                        for line in f.read(200_000).splitlines():
                            s = line.strip()
                            if s.startswith(("import ", "from ", "parser.add_argument", "python ")) \
                                    or "open(" in s or "torch.load(" in s:
                                lines.append(s[:160])
                except OSError:
                    pass
    py = [f for f in files if f.endswith((".py", ".sh", ".yaml", ".yml", ".txt", ".md"))] or files
    findings = []
    for k in range(10):
        names = py[k * 4:(k + 1) * 4] or py[:4]
        code = lines[k * 6:(k + 1) * 6] or lines[:6]
        err = ERRORS[k % len(ERRORS)]
        findings.append({
            "finding_id": f"stuffed_{k}",
            "severity": "high",
            "stage": "install/environment",
            "category": "runtime_error",
            "issue_title": f"{err} in {' '.join(names)}",
            "user_symptom": f"{err} {' '.join(code[:3])}",
            "trigger_context": f"python {names[0] if names else 'main.py'}",
            "root_cause": " ".join(code + names),
            "evidence": [{"path": n, "line_refs": [], "evidence_type": "file", "summary": err} for n in names],
            "impact": err,
            "affected_claims_or_metrics": [],
            "reproducibility_blocker": True,
            "confidence": "high",
        })
    doc = {"reproducibility_assessment": "stuffed", "findings": findings,
           "missing_or_ambiguous_artifacts": []}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
