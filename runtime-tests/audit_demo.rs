//! The example corpus of `reprorun audit` (`images/audit-corpus/`): built by its script,
//! snapshotted, audited by the built-in auditor, and (once they exist) judged, measured and
//! reported — what `images/audit-corpus/demo.sh` runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::audit::SNAPSHOT_BUILT_INPUT;
use crate::common::*;

fn recipe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("images/audit-corpus")
}

/// The corpus's input built by `build.sh`, then `audit snapshot` and `audit run --agent
/// builtin --repeats 2` on it; the manifest and the findings of each run.
struct Study {
    work: Work,
    manifest: Value,
    /// group id -> the findings documents of its runs, by repeat.
    findings: BTreeMap<String, Vec<Value>>,
}

impl Study {
    fn new() -> Study {
        let work = Work::new();
        let build = Command::new(recipe_dir().join("build.sh"))
            .arg(work.path().join("input"))
            .output()
            .expect("run images/audit-corpus/build.sh");
        assert!(build.status.success(), "build.sh: {}", stderr(&build));
        let o = work.run(&SNAPSHOT_BUILT_INPUT);
        expect_code(&o, 0);
        let manifest = read_json(&work.path().join("corpus/corpus.json"));
        let o = work.run(&[
            "audit",
            "run",
            "--corpus",
            "corpus",
            "--db",
            "audit.db",
            "--agent",
            "builtin",
            "--repeats",
            "2",
            "--json",
        ]);
        let summary: Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
        let mut findings: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut rows: Vec<&Value> = summary["rows"].as_array().unwrap().iter().collect();
        rows.sort_by_key(|r| r["repeat"].as_u64());
        for row in rows {
            assert_eq!(row["status"], "ok", "{row}");
            let sha = row["findings_sha256"].as_str().unwrap();
            let doc = read_json(&work.path().join("audit.db.logs").join(sha));
            let group = row["group_id"].as_str().unwrap().to_string();
            findings.entry(group).or_default().push(doc);
        }
        Study {
            work,
            manifest,
            findings,
        }
    }

    /// The grounding of `owner/name#N`.
    fn grounding(&self, id: &str) -> &Value {
        let (repo, n) = id.split_once('#').unwrap();
        let n: u64 = n.parse().unwrap();
        self.manifest["issues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["issue"]["repo"] == repo && i["issue"]["number"] == n)
            .map(|i| &i["grounding"])
            .unwrap_or_else(|| panic!("{id} not in the corpus"))
    }

    fn group(&self, id: &str) -> &Value {
        self.manifest["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group_id"] == id)
            .unwrap_or_else(|| panic!("no group {id}"))
    }

    /// The finding ids of the first run of `group`, in rank order.
    fn finding_ids(&self, group: &str) -> Vec<String> {
        self.findings[group][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["finding_id"].as_str().unwrap().to_string())
            .collect()
    }
}

/// Each planted blocker: the hidden issue, its target and rule, and the built-in auditor's
/// finding on its snapshot (None: no static rule can see it).
#[rustfmt::skip]
const PLANTED: &[(&str, &str, &str, Option<&str>)] = &[
    ("vislab/seglite#1", "closed_gold", "fixes_keyword", Some("undeclared_import:opencv-python")),
    ("vislab/seglite#2", "closed_silver", "before_created_at", None),
    ("vislab/seglite#3", "open", "default_branch_at_collected_at", Some("paper_metric:mIoU")),
    ("nlp-group/tinydistill#1", "closed_gold", "merged_pr", Some("unknown_flag:train.py")),
    ("nlp-group/tinydistill#3", "open", "default_branch_at_collected_at", Some("hyperparameter_mismatch:learning rate")),
    ("alice-ml/cl-audio#1", "closed_silver", "before_created_at", None),
    ("alice-ml/cl-audio#2", "open", "default_branch_at_collected_at", Some("hardcoded_path:/home/alice")),
    ("geo-lab/pointmini#1", "closed_gold", "fixes_keyword", Some("missing_config:configs/modelnet40.yaml")),
    ("geo-lab/pointmini#2", "open", "default_branch_at_collected_at", None),
    ("rl-team/offq#1", "closed_silver", "before_created_at", Some("hyperparameter_mismatch:batch size")),
    ("rl-team/offq#2", "open", "default_branch_at_collected_at", None),
    ("medvision/cell-unet#1", "closed_gold", "fixes_keyword", None),
    ("medvision/cell-unet#2", "open", "default_branch_at_collected_at", Some("missing_script:preprocess.py")),
];

#[test]
fn example_corpus_grounds_its_issues_and_the_builtin_auditor_finds_the_static_blockers() {
    require!(Need::Root);
    let s = Study::new();
    let m = &s.manifest;
    assert_eq!(m["pairs"].as_array().unwrap().len(), 6, "{m}");
    // Every reproducibility issue is in, the feature request (reproducibility: false) is not.
    assert_eq!(m["issues"].as_array().unwrap().len(), PLANTED.len());
    assert!(m["issues"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| !(i["issue"]["repo"] == "nlp-group/tinydistill" && i["issue"]["number"] == 2)));
    let mut categories = std::collections::BTreeSet::new();
    for i in m["issues"].as_array().unwrap() {
        assert_eq!(i["issue"]["reproducibility"], true, "{i}");
        categories.insert(i["issue"]["category"].as_str().unwrap().to_string());
    }
    assert_eq!(categories.len(), 4, "all four categories: {categories:?}");

    for (id, target, rule, finding) in PLANTED {
        let g = s.grounding(id);
        assert_eq!(
            (g["target"].as_str(), g["rule"].as_str()),
            (Some(*target), Some(*rule)),
            "{id}: {g}"
        );
        let group = g["group_id"].as_str().unwrap();
        let number: u64 = id.split_once('#').unwrap().1.parse().unwrap();
        assert!(
            s.group(group)["issues"]
                .as_array()
                .unwrap()
                .contains(&number.into()),
            "{id}"
        );
        let ids = s.finding_ids(group);
        if let Some(f) = finding {
            assert!(ids.iter().any(|x| x == f), "{id}: {f} not among {ids:?}");
        }
        if *target == "closed_gold" {
            // The post-fix snapshot is the fix commit, a group of its own listing the issue.
            let post = g["post_fix_group_id"].as_str().unwrap();
            assert_eq!(s.group(post)["commit"], g["fix_commit"], "{id}");
            assert!(s.group(post)["post_fix_for"]
                .as_array()
                .unwrap()
                .contains(&number.into()));
            // The fix removed the cause: the auditor no longer reports it there.
            if let Some(f) = finding {
                let after = s.finding_ids(post);
                assert!(
                    !after.iter().any(|x| x == f),
                    "{id}: {f} still on the fix: {after:?}"
                );
            }
        } else {
            assert!(g.get("post_fix_group_id").is_none(), "{id}: {g}");
        }
    }

    // The built-in auditor is deterministic: every repeat wrote the same findings.
    for (group, docs) in &s.findings {
        assert_eq!(docs.len(), 2, "{group}");
        assert_eq!(docs[0], docs[1], "{group}");
    }

    // The hand labels name real runs, real issues of their group and real findings.
    let labels = std::fs::read_to_string(recipe_dir().join("human-labels.jsonl")).unwrap();
    let mut n = 0;
    for line in labels.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let group = s.group(row["group_id"].as_str().unwrap());
        let id = row["hidden_issue_id"].as_str().unwrap();
        let (repo, number) = id.split_once('#').unwrap();
        let number: Value = number.parse::<u64>().unwrap().into();
        assert_eq!(group["repo"], repo, "{line}");
        let of = |k: &str| group[k].as_array().is_some_and(|a| a.contains(&number));
        assert!(of("issues") || of("post_fix_for"), "{line}");
        let ids = s.finding_ids(row["group_id"].as_str().unwrap());
        assert!(
            (row["finding_index"].as_u64().unwrap() as usize) < ids.len(),
            "{line}"
        );
        assert!(["exact", "semantic", "none"].contains(&row["label"].as_str().unwrap()));
        n += 1;
    }
    assert!(n >= 20, "{n} hand labels");
    drop(s.work);
}

/// Every number in `v` whose key names a rate, with its path.
fn rates(v: &Value, path: &str, out: &mut Vec<(String, f64)>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let p = format!("{path}.{k}");
                let key = k.to_lowercase();
                let is_rate = ["em", "sm", "fpr", "recall", "rate", "any", "all"]
                    .iter()
                    .any(|w| {
                        key.split(|c: char| !c.is_ascii_alphanumeric())
                            .any(|t| t == *w)
                    });
                match x {
                    Value::Number(n) if is_rate => out.push((p, n.as_f64().unwrap())),
                    _ => rates(x, &p, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                rates(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn example_corpus_is_judged_measured_and_reported() {
    require!(Need::Root);
    let s = Study::new();
    let o = s.work.run(&["audit", "judge", "--db", "audit.db"]);
    expect_code(&o, 0);
    let o = s
        .work
        .run(&["audit", "metrics", "--db", "audit.db", "--json"]);
    let metrics: Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    let mut found = Vec::new();
    rates(&metrics, "", &mut found);
    assert!(!found.is_empty(), "no rates in {metrics}");
    for (path, x) in &found {
        assert!(
            (0.0..=1.0).contains(x),
            "{path} = {x} is not a rate in [0, 1]"
        );
    }
    let o = s
        .work
        .run(&["audit", "report", "--db", "audit.db", "--out", "report"]);
    expect_code(&o, 0);
    for name in ["report.md", "report.html"] {
        let text = std::fs::read_to_string(s.work.path().join("report").join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!text.trim().is_empty(), "{name} is empty");
    }
    let html = std::fs::read_to_string(s.work.path().join("report/report.html")).unwrap();
    assert!(
        !html.to_lowercase().contains("<script"),
        "report.html has a script"
    );
}
