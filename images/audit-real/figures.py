#!/usr/bin/env python3
"""The real corpus's measured figures, per half of split.tsv, against the hand labels.

    figures.py DB CORPUS [LABELS_DIR] [--judge NAME] [--json]
               [--hand-out FILE [--sample SAMPLE]]

DB is an `audit run` study judged by NAME (default builtin), CORPUS its `audit snapshot`
output; LABELS_DIR (default: labels/ beside this file) holds the hand labels:
  pairs-*.jsonl   {group_id, hidden_issue_id, finding_id, label}: a (hidden issue, finding)
                  pair, label exact/semantic/none (finding_id, not the index: labels survive a
                  change of the auditor's ranking)
  rank1-*.jsonl   {group_id, finding_id, real_blocker}: is the finding a real blocker?
Prints, per half: the judge's match precision and recall (exact or semantic against none) on
the hand-labelled pairs of repeat 0, how many pairs are not hand-labelled, the auditor's
precision at rank 1 (real blockers among labelled rank-1 findings), and Issue SM@10 by the
hand labels and by the judge. A figure without labelled data prints as n/a.
--hand-out FILE also writes the hand labels of repeat 0's pairs in `audit agreement`'s
format ({group_id, repeat, hidden_issue_id, finding_index, label}, the index the study's
own); with --sample, only the pairs of SAMPLE (an `audit sample` output).
Reads only; Python 3 standard library.
"""
import json
import os
import sqlite3
import sys


def pct(a, b):
    return "n/a" if b == 0 else f"{100.0 * a / b:.1f}% ({a}/{b})"


def main(argv):
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    opts = {}
    for name in ("--judge", "--hand-out", "--sample"):
        if name in argv:
            k = argv.index(name)
            if k + 1 >= len(argv):
                raise SystemExit(__doc__)
            opts[name] = argv[k + 1]
            del argv[k:k + 2]
    sample = None
    if "--sample" in opts:
        sample = set()
        for line in open(opts["--sample"]):
            if line.strip():
                r = json.loads(line)
                sample.add((r["group_id"], r["repeat"], r["hidden_issue_id"], r["finding_index"]))
    hand_rows = []
    judge = opts.get("--judge", "builtin")
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    db_path, corpus = argv[0], argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    labels_dir = argv[2] if len(argv) == 3 else os.path.join(here, "labels")
    half = {}
    for line in open(os.path.join(here, "split.tsv")):
        if line.strip() and not line.startswith("#"):
            repo, h = line.split()
            half[repo] = h
    pair_hand, rank1_hand = {}, {}
    for name in sorted(os.listdir(labels_dir)):
        for line in open(os.path.join(labels_dir, name)):
            if not line.strip():
                continue
            r = json.loads(line)
            if name.startswith("pairs-"):
                pair_hand[(r["group_id"], r["hidden_issue_id"], r["finding_id"])] = r["label"]
            elif name.startswith("rank1-") and r.get("real_blocker") is not None:
                rank1_hand[(r["group_id"], r["finding_id"])] = bool(r["real_blocker"])
    manifest = json.load(open(os.path.join(corpus, "corpus.json")))
    repo_of = {g["group_id"]: g["repo"] for g in manifest["groups"]}
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    logs = db_path + ".logs"
    stats = {h: dict(tp=0, fp=0, fn=0, unlabelled=0, pairs=0, r1_real=0, r1_n=0, r1_unlabelled=0,
                     issues=set(), hand_hit=set(), judge_hit=set()) for h in ("tuning", "held-out")}
    runs = db.execute("select group_id, findings_sha256 from runs where repeat = 0 and status = 'ok'")
    for gid, sha in runs.fetchall():
        s = stats[half[repo_of[gid]]]
        doc = json.load(open(os.path.join(logs, sha)))
        findings = doc["findings"] if isinstance(doc, dict) else doc
        ids = [f.get("finding_id", str(k)) for k, f in enumerate(findings)]
        if ids:
            key = (gid, ids[0])
            if key in rank1_hand:
                s["r1_n"] += 1
                s["r1_real"] += rank1_hand[key]
            else:
                s["r1_unlabelled"] += 1
        rows = db.execute(
            "select hidden_issue_id, finding_index, label from pair_labels"
            " where group_id = ? and repeat = 0 and judge = ?", (gid, judge)).fetchall()
        for iid, k, label in rows:
            if k >= 10:
                at10 = False
            else:
                at10 = True
            hand = pair_hand.get((gid, iid, ids[k] if k < len(ids) else None))
            if label != "none" and at10:
                s["judge_hit"].add(f"{iid}@{gid}")
            if hand is None:
                s["unlabelled"] += 1
                continue
            s["pairs"] += 1
            if sample is None or (gid, 0, iid, k) in sample:
                hand_rows.append({"group_id": gid, "repeat": 0, "hidden_issue_id": iid,
                                  "finding_index": k, "label": hand})
            if hand != "none" and at10:
                s["hand_hit"].add(f"{iid}@{gid}")
            j, h = label != "none", hand != "none"
            s["tp"] += j and h
            s["fp"] += j and not h
            s["fn"] += h and not j
    for i in manifest["issues"]:
        gid = i["grounding"]["group_id"]
        stats[half[repo_of[gid]]]["issues"].add(f'{i["issue"]["repo"]}#{i["issue"]["number"]}@{gid}')
    if "--hand-out" in opts:
        with open(opts["--hand-out"], "w") as f:
            for r in sorted(hand_rows, key=lambda r: (r["group_id"], r["hidden_issue_id"], r["finding_index"])):
                f.write(json.dumps(r) + "\n")
        if sample is not None and len(hand_rows) < len(sample):
            print(f"figures.py: {len(sample) - len(hand_rows)} sampled pairs have no hand label",
                  file=sys.stderr)
    out = {}
    for h, s in stats.items():
        out[h] = {
            "judge_match_precision": pct(s["tp"], s["tp"] + s["fp"]),
            "judge_match_recall": pct(s["tp"], s["tp"] + s["fn"]),
            "hand_labelled_pairs": s["pairs"],
            "unlabelled_pairs": s["unlabelled"],
            "auditor_precision_at_1": pct(s["r1_real"], s["r1_n"]),
            "unlabelled_rank1": s["r1_unlabelled"],
            "issue_sm10_hand": pct(len(s["hand_hit"]), len(s["issues"])),
            "issue_sm10_judge": pct(len(s["judge_hit"]), len(s["issues"])),
        }
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        for h, f in out.items():
            print(f"{h}: " + "; ".join(f"{k} {v}" for k, v in f.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
