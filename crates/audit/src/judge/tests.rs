use serde_json::json;

use super::result::{validate, ResultError};
use super::task::{build, hidden_issues, Task};
use super::validation::{agreement_of, distinct, draw, pair_id};
use super::*;
use crate::corpus::{Group, Manifest, PairEntry, CORPUS_VERSION};
use crate::findings::Findings;

/// One finding of the schema, with the text fields given.
pub(super) fn finding(
    id: &str,
    title: &str,
    symptom: &str,
    trigger: &str,
    cause: &str,
    ev: (&str, &str),
    impact: &str,
) -> serde_json::Value {
    json!({
        "finding_id": id, "rank_reason": "likely", "severity": "high",
        "stage": "environment_setup", "category": "missing_dependency",
        "issue_title": title, "user_symptom": symptom, "trigger_context": trigger,
        "root_cause": cause,
        "evidence": [{"path": ev.0, "line_refs": [1], "evidence_type": "code", "summary": ev.1}],
        "impact": impact, "affected_claims_or_metrics": [], "reproducibility_blocker": true,
        "confidence": "high"
    })
}

fn findings(list: Vec<serde_json::Value>) -> Findings {
    let doc = json!({
        "reproducibility_assessment": {"overall": "partially_reproducible", "summary": "s"},
        "findings": list, "missing_or_ambiguous_artifacts": []
    });
    crate::findings::validate(doc.to_string().as_bytes()).unwrap()
}

fn cv2_finding() -> serde_json::Value {
    finding(
        "F1",
        "ModuleNotFoundError: No module named 'cv2' when running demo.py",
        "python demo.py fails at startup with ModuleNotFoundError: No module named 'cv2'",
        "python demo.py --input images/",
        "demo.py does import cv2 but opencv-python is missing from requirements.txt",
        ("demo.py", "import cv2"),
        "the demo cannot run at all",
    )
}

fn unrelated_finding() -> serde_json::Value {
    finding(
        "F2",
        "Evaluation uses a different learning rate schedule than the paper",
        "Reported accuracy is lower than Table 2",
        "bash scripts/eval.sh",
        "configs/base.yaml sets cosine decay while the paper describes step decay at epoch 30",
        ("configs/base.yaml", "scheduler: cosine"),
        "accuracy numbers differ from the paper",
    )
}

fn fp16_finding() -> serde_json::Value {
    finding(
        "F3",
        "Mixed precision training is numerically unstable",
        "With --fp16 the run diverges after some iterations",
        "python train.py --fp16 --batch-size 64",
        "no GradScaler is used, so half precision gradients overflow",
        ("train.py", "model.half() without loss scaling"),
        "training results cannot be reproduced with half precision",
    )
}

fn issue(
    number: u64,
    title: &str,
    body: &str,
    closed_at: Option<&str>,
    comments: serde_json::Value,
) -> serde_json::Value {
    json!({"repo": "o/demo", "number": number, "title": title, "body": body,
           "state": if closed_at.is_some() { "closed" } else { "open" },
           "created_at": "2024-01-01T00:00:00Z", "closed_at": closed_at,
           "url": format!("https://github.com/o/demo/issues/{number}"), "comments": comments})
}

/// A manifest: group `p@pre` holds a gold issue #1 (fixed in `p@fix`) and an open #2;
/// `p@fix` holds an open #3 of its own.
fn manifest() -> Manifest {
    let group = |id: &str, issues: Vec<u64>, post: Vec<u64>| Group {
        group_id: id.into(),
        paper_id: "p".into(),
        repo: "o/demo".into(),
        commit: "c".into(),
        tree: "t".into(),
        issues,
        post_fix_for: post,
    };
    let comments = json!([
        {"author": "a", "body": "same here", "created_at": "2024-01-02T00:00:00Z"},
        {"author": "m", "body": "fixed in abc123 by adding opencv", "created_at": "2024-02-02T00:00:00Z"},
        {"author": "x", "body": "undated"}
    ]);
    Manifest {
        version: CORPUS_VERSION,
        pairs: vec![PairEntry {
            paper_id: "p".into(),
            title: Some("A paper".into()),
            repo: "o/demo".into(),
            paper: "x.md".into(),
            paper_kind: "md".into(),
            collected_at: "2024-01-01".into(),
            venue: None,
            year: None,
            default_branch: "refs/heads/main".into(),
        }],
        groups: vec![
            group("p@fix", vec![3], vec![1]),
            group("p@pre", vec![1, 2], vec![]),
        ],
        issues: vec![
            json!({"issue": issue(1, "No module named 'cv2'", "Running python demo.py gives\nModuleNotFoundError: No module named 'cv2'", Some("2024-02-01T00:00:00Z"), comments.clone()),
                   "grounding": {"target": "closed_gold", "group_id": "p@pre", "post_fix_group_id": "p@fix", "rule": "merged_pr", "fix_commit": "abc123"}}),
            json!({"issue": issue(2, "Where is the checkpoint?", "model_best.pth is not linked", None, comments),
                   "grounding": {"target": "open", "group_id": "p@pre", "rule": "default_branch_at_collected_at"}}),
            json!({"issue": issue(3, "Other", "x", None, json!([])),
                   "grounding": {"target": "open", "group_id": "p@fix", "rule": "default_branch_at_collected_at"}}),
        ],
        warnings: vec![],
    }
}

fn task_for(group: &str, list: Vec<serde_json::Value>) -> Task {
    let m = manifest();
    let hidden = hidden_issues(&m).unwrap();
    let g = m.groups.iter().find(|g| g.group_id == group).unwrap();
    build(&m, &hidden, g, 0, Some(&findings(list)))
}

#[test]
fn a_task_holds_the_snapshots_issues_with_comments_made_before_the_fix() {
    let t = task_for("p@pre", vec![cv2_finding(), unrelated_finding()]);
    assert_eq!(t.task_id, "p@pre#0");
    assert!(!t.post_fix);
    assert_eq!(t.paper_title.as_deref(), Some("A paper"));
    let ids: Vec<&str> = t
        .hidden_issues
        .iter()
        .map(|h| h.hidden_issue_id.as_str())
        .collect();
    assert_eq!(ids, ["o/demo#1", "o/demo#2"]);
    let gold = &t.hidden_issues[0];
    assert_eq!(gold.target, "closed_gold");
    // Before closed_at only: not the fix's comment, not an undated one.
    let bodies: Vec<&str> = gold.comments.iter().map(|c| c.body.as_str()).collect();
    assert_eq!(bodies, ["same here"]);
    let fix = gold.fix_evidence.as_ref().unwrap();
    assert_eq!(
        (fix.rule.as_str(), fix.fix_commit.as_deref()),
        ("merged_pr", Some("abc123"))
    );
    // An open issue: every comment.
    assert_eq!(t.hidden_issues[1].comments.len(), 3);
    assert!(t.hidden_issues[1].fix_evidence.is_none());
    // The findings in order, with their index.
    assert_eq!(t.findings.len(), 2);
    assert_eq!(t.findings[1]["finding_index"], 1);
    assert_eq!(t.findings[1]["finding_id"], "F2");
    // The same task, the same bytes.
    assert_eq!(
        t.to_json(),
        task_for("p@pre", vec![cv2_finding(), unrelated_finding()]).to_json()
    );
}

#[test]
fn a_post_fix_task_holds_the_fixed_issue_and_those_reported_on_that_snapshot() {
    let t = task_for("p@fix", vec![cv2_finding()]);
    assert!(t.post_fix);
    let ids: Vec<(&str, bool)> = t
        .hidden_issues
        .iter()
        .map(|h| (h.hidden_issue_id.as_str(), h.post_fix))
        .collect();
    // #1 is fixed here (a match is a false positive); #3's reporter saw this very tree.
    assert_eq!(ids, [("o/demo#1", true), ("o/demo#3", false)]);
    let pre = task_for("p@pre", vec![cv2_finding()]);
    assert!(!pre.post_fix);
    assert!(pre.hidden_issues.iter().all(|h| !h.post_fix));
}

#[test]
fn a_run_without_findings_gets_a_task_without_findings() {
    let m = manifest();
    let hidden = hidden_issues(&m).unwrap();
    let t = build(&m, &hidden, &m.groups[1], 2, None);
    assert!(t.findings.is_empty());
    assert_eq!(t.hidden_issues.len(), 2);
}

#[test]
fn a_manifest_entry_that_is_no_issue_is_named() {
    let mut m = manifest();
    m.issues.push(json!({"issue": {"number": 9}}));
    let e = hidden_issues(&m).unwrap_err();
    assert!(e.starts_with("issues[3]"), "{e}");
}

/// A valid answer to a task of two issues and two findings.
fn answer() -> serde_json::Value {
    let dims = json!({"user_facing_symptom": "exact", "trigger_path_or_workflow": "semantic",
                      "root_cause": "exact", "involved_artifact": "exact", "impact": "none"});
    let none_dims = json!({"user_facing_symptom": "none", "trigger_path_or_workflow": "none",
                      "root_cause": "none", "involved_artifact": "none", "impact": "none"});
    json!({
        "issue_alignments": [
            {"hidden_issue_id": "o/demo#1", "target": "closed_gold", "issue_number": 1,
             "best_label": "exact", "best_finding_id": "F1", "best_finding_index": 0,
             "dimension_labels": dims, "rationale": "same", "matched_evidence": ["cv2"]},
            {"hidden_issue_id": "o/demo#2", "best_label": "none", "best_finding_index": null,
             "dimension_labels": none_dims, "rationale": "no"}
        ],
        "finding_alignments": [
            {"finding_id": "F1", "finding_index": 0, "best_label": "exact",
             "matched_hidden_issue_ids": ["o/demo#1"], "matched_targets": ["closed_gold"]},
            {"finding_id": "F2", "finding_index": 1, "best_label": "none"}
        ],
        "pair_labels": [
            {"hidden_issue_id": "o/demo#1", "finding_index": 0, "label": "exact"},
            {"hidden_issue_id": "o/demo#1", "finding_index": 1, "label": "none"},
            {"hidden_issue_id": "o/demo#2", "finding_index": 0, "label": "none"},
            {"hidden_issue_id": "o/demo#2", "finding_index": 1, "label": "none"}
        ],
        "notes": ""
    })
}

fn check(v: &serde_json::Value) -> Result<result::Pairs, ResultError> {
    let t = task_for("p@pre", vec![cv2_finding(), unrelated_finding()]);
    validate(v.to_string().as_bytes(), &t)
}

#[test]
fn a_valid_result_gives_every_pairs_label() {
    let pairs = check(&answer()).unwrap();
    assert_eq!(pairs.len(), 4);
    assert_eq!(pairs[&("o/demo#1".to_string(), 0)], Label::Exact);
    assert_eq!(pairs[&("o/demo#2".to_string(), 1)], Label::None);
    // A fenced answer in a message is found.
    let msg = format!("Here it is:\n```json\n{}\n```\n", answer());
    let doc = agent::extract(&msg).unwrap();
    assert!(check(&serde_json::from_str(doc).unwrap()).is_ok());
}

#[test]
fn the_papers_result_without_pair_labels_is_accepted_and_pairs_derived() {
    let t = task_for("p@pre", vec![cv2_finding(), unrelated_finding()]);
    let mut v = answer();
    v.as_object_mut().unwrap().remove("pair_labels");
    let (pairs, from) = result::validate_from(v.to_string().as_bytes(), &t).unwrap();
    assert_eq!(from, result::PairsFrom::Derived);
    assert!(from.note().unwrap().contains("derived"));
    assert_eq!(
        pairs,
        check(&answer()).unwrap(),
        "the same pairs as the full answer"
    );
    // A semantic match named only by the finding's alignment.
    v["issue_alignments"][1]["best_label"] = "semantic".into();
    v["finding_alignments"][1]["best_label"] = "semantic".into();
    v["finding_alignments"][1]["matched_hidden_issue_ids"] = json!(["o/demo#2"]);
    let (pairs, _) = result::validate_from(v.to_string().as_bytes(), &t).unwrap();
    assert_eq!(pairs[&("o/demo#2".to_string(), 1)], Label::Semantic);
    assert_eq!(pairs[&("o/demo#2".to_string(), 0)], Label::None);
    // A finding's label is never stronger than the issue's own best.
    v["finding_alignments"][0]["matched_hidden_issue_ids"] = json!(["o/demo#1", "o/demo#2"]);
    let (pairs, _) = result::validate_from(v.to_string().as_bytes(), &t).unwrap();
    assert_eq!(pairs[&("o/demo#2".to_string(), 0)], Label::Semantic);
    // best_finding_id stands for a missing index.
    let mut w = answer();
    w.as_object_mut().unwrap().remove("pair_labels");
    w["issue_alignments"][0]["best_finding_index"] = serde_json::Value::Null;
    w["finding_alignments"][0]["matched_hidden_issue_ids"] = json!([]);
    let (pairs, _) = result::validate_from(w.to_string().as_bytes(), &t).unwrap();
    assert_eq!(pairs[&("o/demo#1".to_string(), 0)], Label::Exact);
    // Unknown ids are still refused; a full answer says its pairs are its own.
    w["finding_alignments"][0]["matched_hidden_issue_ids"] = json!(["o/demo#77"]);
    let e = result::validate_from(w.to_string().as_bytes(), &t).unwrap_err();
    assert!(e.to_string().contains("o/demo#77"), "{e}");
    let (_, from) = result::validate_from(answer().to_string().as_bytes(), &t).unwrap();
    assert_eq!(from, result::PairsFrom::Given);
    // A message with the paper's answer is found.
    let msg = format!("```json\n{v}\n```");
    assert!(agent::extract(&msg).unwrap().contains("issue_alignments"));
}

/// An edit of a valid answer.
type Edit = fn(&mut serde_json::Value);

#[test]
fn each_kind_of_bad_result_is_refused_with_its_reason() {
    let t = task_for("p@pre", vec![cv2_finding(), unrelated_finding()]);
    assert!(matches!(
        validate(b"{not json", &t),
        Err(ResultError::Syntax(_))
    ));
    assert!(matches!(
        validate(b"{\"pair_labels\": 3}", &t),
        Err(ResultError::Shape(_))
    ));
    let cases: Vec<(Edit, &str)> = vec![
        (
            |v| v["pair_labels"][0]["label"] = "maybe".into(),
            "label \"maybe\"",
        ),
        (
            |v| v["issue_alignments"][0]["best_label"] = "close".into(),
            "issue_alignments[0]: label \"close\"",
        ),
        (
            |v| v["pair_labels"][1]["hidden_issue_id"] = "o/demo#99".into(),
            "o/demo#99",
        ),
        (
            |v| v["pair_labels"][1]["finding_index"] = 7.into(),
            "finding index 7",
        ),
        (
            |v| {
                v["pair_labels"].as_array_mut().unwrap().pop();
            },
            "(o/demo#2, finding 1) is not labelled",
        ),
        (
            |v| v["pair_labels"][3] = v["pair_labels"][2].clone(),
            "given twice",
        ),
        (
            |v| {
                v["issue_alignments"].as_array_mut().unwrap().pop();
            },
            "o/demo#2 is not answered",
        ),
        (
            |v| v["issue_alignments"][1]["hidden_issue_id"] = "o/demo#1".into(),
            "given twice",
        ),
        (
            |v| v["issue_alignments"][0]["best_label"] = "semantic".into(),
            "strongest pair label of o/demo#1 is exact",
        ),
        (
            |v| v["issue_alignments"][0]["best_finding_index"] = 1.into(),
            "best_finding_index 1 is not labelled exact",
        ),
        (
            |v| v["issue_alignments"][0]["target"] = "open".into(),
            "target is closed_gold",
        ),
        (
            |v| {
                v["issue_alignments"][0]["dimension_labels"]
                    .as_object_mut()
                    .unwrap()
                    .remove("impact");
            },
            "no impact",
        ),
        (
            |v| v["issue_alignments"][0]["dimension_labels"]["root_cause"] = "yes".into(),
            "dimension_labels.root_cause",
        ),
        (
            |v| v["finding_alignments"][0]["best_label"] = "none".into(),
            "strongest pair label of finding 0 is exact",
        ),
        (
            |v| v["finding_alignments"][1]["finding_id"] = "F9".into(),
            "finding 1 is \"F2\"",
        ),
        (
            |v| v["finding_alignments"][1]["matched_hidden_issue_ids"] = json!(["x#1"]),
            "x#1",
        ),
    ];
    for (edit, needle) in cases {
        let mut v = answer();
        edit(&mut v);
        let e = check(&v).expect_err(needle).to_string();
        assert!(e.contains(needle), "{needle:?} not in {e:?}");
        assert!(!e.contains('\n'), "{e}");
    }
}

pub(super) fn lexical_label(issue_title: &str, issue_body: &str, f: serde_json::Value) -> Label {
    let mut m = manifest();
    m.issues[0]["issue"]["title"] = issue_title.into();
    m.issues[0]["issue"]["body"] = issue_body.into();
    m.issues[0]["issue"]["comments"] = json!([]);
    let hidden = hidden_issues(&m).unwrap();
    let t = build(&m, &hidden, &m.groups[1], 0, Some(&findings(vec![f])));
    let r = lexical::judge(&t);
    let pairs = validate(&r.to_json(), &t).expect("the built-in judge's answer validates");
    pairs[&("o/demo#1".to_string(), 0)]
}

#[test]
fn the_lexical_judge_matches_a_missing_module_to_its_dependency_finding() {
    let l = lexical_label(
        "ModuleNotFoundError: No module named 'cv2'",
        "I installed the requirements and ran `python demo.py --input images/`:\n\nTraceback (most recent call last):\n  File \"demo.py\", line 3, in <module>\n    import cv2\nModuleNotFoundError: No module named 'cv2'",
        cv2_finding(),
    );
    assert_eq!(l, Label::Exact);
}

#[test]
fn the_lexical_judge_leaves_an_unrelated_finding_unmatched() {
    let l = lexical_label(
        "ModuleNotFoundError: No module named 'cv2'",
        "python demo.py fails:\nModuleNotFoundError: No module named 'cv2'",
        unrelated_finding(),
    );
    assert_eq!(l, Label::None);
}

#[test]
fn the_lexical_judge_calls_a_paraphrase_with_the_same_script_and_flag_semantic() {
    let l = lexical_label(
        "Loss becomes NaN with --fp16",
        "When I launch python train.py --fp16 on a single V100 the loss is NaN after about 2k steps. Without the flag it trains fine. Any idea?",
        fp16_finding(),
    );
    assert_eq!(l, Label::Semantic);
}

#[test]
fn the_lexical_judge_is_deterministic_and_labels_every_pair() {
    let t = task_for(
        "p@pre",
        vec![cv2_finding(), unrelated_finding(), fp16_finding()],
    );
    let a = lexical::judge(&t).to_json();
    assert_eq!(a, lexical::judge(&t).to_json());
    let pairs = validate(&a, &t).unwrap();
    assert_eq!(pairs.len(), 2 * 3);
    assert_eq!(pairs[&("o/demo#1".to_string(), 0)], Label::Exact);
    assert_eq!(pairs[&("o/demo#1".to_string(), 1)], Label::None);
}

#[test]
fn anchors_name_files_flags_modules_artifacts_and_exceptions() {
    let a = super::anchors::anchors(
        "Run `python tools/train.py --lr=0.1` then load ckpt/model_best.pth. ImportError: No module named 'torchvision'; from mmcv.ops import x; pip install opencv-python. torch.cuda.OutOfMemoryError.",
    );
    for want in [
        "file:train.py",
        "flag:--lr",
        "artifact:model_best.pth",
        "exception:importerror",
        "exception:outofmemoryerror",
        "module:torchvision",
        "module:mmcv",
        "module:cv2",
    ] {
        assert!(a.contains(want), "{want} not in {a:?}");
    }
}

#[test]
fn agreement_arithmetic_on_a_known_confusion() {
    // human rows × judge columns: exact, semantic, none.
    let c = [[10, 2, 3], [4, 5, 1], [2, 3, 20]];
    // Every pair labelled: the population is the table's columns.
    let a = agreement_of(&c, [16, 10, 24]);
    assert_eq!(a.pairs, 50);
    assert_eq!(a.agree, 35);
    assert_eq!(a.raw_agreement, Some(0.7));
    // Both say match: 10 + 2 + 4 + 5 = 21; judge says match: 21 + 2 + 3 = 26; human: 21 + 3 + 1 = 25.
    assert_eq!((a.match_both, a.match_judge, a.match_human), (21, 26, 25));
    assert_eq!(a.precision, Some(21.0 / 26.0));
    assert_eq!(a.recall, Some(21.0 / 25.0));
    assert_eq!(a.weighted_precision, a.precision);
    assert_eq!(a.weighted_recall, a.recall);
    let none = agreement_of(&[[0; 3]; 3], [0; 3]);
    assert_eq!(
        (none.raw_agreement, none.precision, none.recall),
        (None, None, None)
    );
}

#[test]
fn a_sample_per_judge_label_is_weighted_back_to_the_study() {
    // The paper's design on rare matches: 10 matches the judge found, all sampled (8 true);
    // 50 of the judge's 990 nones sampled, 5 of them true matches it missed. As sampled,
    // recall is 8/13 = 61.5%; over the study, 5/50 of 990 nones is ~99 missed matches:
    // recall 8/107.
    let c = [[8, 0, 5], [0, 0, 0], [2, 0, 45]];
    let a = agreement_of(&c, [10, 0, 990]);
    assert_eq!(a.recall, Some(8.0 / 13.0));
    assert_eq!(a.precision, Some(0.8));
    assert_eq!(a.weighted_precision, Some(0.8));
    let r = a.weighted_recall.unwrap();
    assert!((r - 8.0 / 107.0).abs() < 1e-12, "{r}");
    // A label the judge gave without a hand-labelled pair: no study-wide estimate.
    let b = agreement_of(&c, [10, 3, 990]);
    assert_eq!((b.weighted_precision, b.weighted_recall), (None, None));
    assert_eq!(b.recall, a.recall);
}

#[test]
fn a_pair_repeated_by_several_repeats_is_drawn_once() {
    // Three repeats of one group gave the same two findings for one issue; a fourth gave
    // another first finding.
    let labels: Vec<PairLabel> = (0..4u32)
        .flat_map(|repeat| {
            (0..2u32).map(move |i| PairLabel {
                group_id: "g".into(),
                repeat,
                judge: "builtin".into(),
                hidden_issue_id: "o/r#1".into(),
                finding_index: i,
                label: if i == 0 { Label::Exact } else { Label::None },
            })
        })
        .collect();
    let content = |l: &PairLabel| {
        Some(if l.repeat == 3 && l.finding_index == 0 {
            "other".to_string()
        } else {
            format!("finding {}", l.finding_index)
        })
    };
    let pairs = distinct(&labels, content);
    let keys: Vec<(u32, u32)> = pairs.iter().map(|l| (l.repeat, l.finding_index)).collect();
    assert_eq!(keys, vec![(0, 0), (0, 1), (3, 0)]);
    let drawn = draw(&pairs, 50, 0);
    assert_eq!(drawn.len(), 3, "each distinct pair once");
    // Runs without findings keep every pair.
    assert_eq!(distinct(&labels, |_| None).len(), 8);
}

#[test]
fn the_draw_is_deterministic_per_seed_and_capped_per_label() {
    let labels: Vec<PairLabel> = (0..300)
        .map(|i| PairLabel {
            group_id: format!("g{}", i % 7),
            repeat: i / 100,
            judge: "builtin".into(),
            hidden_issue_id: format!("o/r#{}", i % 11),
            finding_index: i,
            label: [Label::Exact, Label::Semantic, Label::None][(i % 3) as usize],
        })
        .collect();
    let all: Vec<&PairLabel> = labels.iter().collect();
    let a = draw(&all, 5, 1);
    assert_eq!(a.len(), 15);
    for l in [Label::Exact, Label::Semantic, Label::None] {
        assert_eq!(a.iter().filter(|p| p.label == l).count(), 5);
    }
    assert_eq!(a, draw(&all, 5, 1));
    assert_ne!(a, draw(&all, 5, 2));
    assert_eq!(draw(&all, 1000, 0).len(), 300);
    // Ids are distinct per pair.
    let ids: std::collections::BTreeSet<String> = labels.iter().map(pair_id).collect();
    assert_eq!(ids.len(), 300);
}

// Issue 46 §3: the built-in judge on real code.

#[test]
fn a_bare_package_name_in_a_finding_anchors_a_missing_module() {
    let l = lexical_label(
        "No module named 'scipy'",
        "python tools/eval.py\nTraceback (most recent call last):\n  File \"tools/eval.py\", line 4, in <module>\n    from scipy.optimize import linear_sum_assignment\nModuleNotFoundError: No module named 'scipy'",
        finding(
            "F1",
            "Add a requirement: scipy",
            "The evaluation cannot start in a fresh environment",
            "installing requirements.txt, then evaluating",
            "requirements.txt lists torch and numpy only; scipy is needed too",
            ("requirements.txt", "torch\nnumpy"),
            "evaluation fails",
        ),
    );
    assert_ne!(l, Label::None);
}

#[test]
fn a_file_named_only_in_a_traceback_frame_does_not_match_by_itself() {
    let l = lexical_label(
        "RuntimeError: CUDA error: device-side assert triggered",
        "Training crashes after a few steps:\n\nTraceback (most recent call last):\n  File \"ethos/train/training_loop.py\", line 88, in train\n    loss.backward()\nRuntimeError: CUDA error: device-side assert triggered",
        finding(
            "F1",
            "ModuleNotFoundError: No module named 'psutil' (psutil is not in the requirements)",
            "ModuleNotFoundError: No module named 'psutil'",
            "installing the declared dependencies, then running ethos/train/training_loop.py",
            "ethos/train/training_loop.py imports psutil but no dependency specification declares psutil.",
            ("ethos/train/training_loop.py", "import psutil"),
            "training cannot start",
        ),
    );
    assert_eq!(l, Label::None);
}

#[test]
fn a_hyper_parameter_issue_matches_a_finding_about_the_same_hyper_parameter() {
    let l = lexical_label(
        "Batch size = 16?",
        "configs.yaml sets batch: 16. Should it be 50 to have the same hyperparameters as in the paper?",
        finding(
            "F1",
            "The paper's batch size is 50 but configs.yaml uses 16",
            "Training with the released defaults does not match the paper's setup (batch size 16 vs 50)",
            "training with the repository's defaults to reproduce the paper's numbers",
            "The paper gives batch size 50; the repository sets 16 (configs.yaml:24).",
            ("configs.yaml", "batch: 16"),
            "results may differ from the paper's",
        ),
    );
    assert_ne!(l, Label::None);
}

#[test]
fn a_dead_checkpoint_link_matches_a_missing_checkpoint_finding() {
    let l = lexical_label(
        "The link does not work for \"Checkpoints for pre-trained models\"",
        "The README's link to the checkpoints for pre-trained models no longer works.",
        finding(
            "F1",
            "Where is the pretrained model mobilenetv2_718.pth? FileNotFoundError for ./ckpt/mobilenetv2_718.pth",
            "FileNotFoundError: ./ckpt/mobilenetv2_718.pth",
            "running the README's pruning command",
            "ckpt/mobilenetv2_718.pth is referenced but not in the release, and no download link or script for it is given.",
            ("legr.py", "torch.load('./ckpt/mobilenetv2_718.pth')"),
            "pruning cannot start",
        ),
    );
    assert_ne!(l, Label::None);
}

/// Ten findings made only of a snapshot's own text (file names, its code, the error words
/// issues quote) against real issue texts: the judge must not call them matches.
#[test]
fn keyword_stuffed_findings_do_not_score() {
    let files = "src/learning/single_client/goal_prediction_house_single_360_image_supervised_from_disk.py src/experiments_house/train_goal_prediction_from_disk.py src/models/model.py requirements.txt";
    let code = "import torch import numpy as np from learning.auxiliary_objective.goal_prediction import GoalPrediction from utils.cuda import cuda_var parser.add_argument('--lr', type=float) open(config_file) torch.load(model_file)";
    let errors = [
        "Traceback (most recent call last): ModuleNotFoundError: No module named",
        "FileNotFoundError: [Errno 2] No such file or directory",
        "RuntimeError: CUDA out of memory; RuntimeError: size mismatch",
        "ImportError: cannot import name; KeyError; AttributeError: has no attribute",
        "cannot reproduce the results of the paper: accuracy lower than reported",
        "pretrained model checkpoint download link broken, learning rate batch size epochs",
    ];
    let issue_title = "No module named 'learning.auxiliary_objective'";
    let issue_body = "Reproducing the Chai experiment fails:\n\n```\n$ python3 src/experiments_house/train_goal_prediction_from_disk.py\nTraceback (most recent call last):\n  File \"src/experiments_house/train_goal_prediction_from_disk.py\", line 13, in <module>\n    from learning.single_client.goal_prediction_house_single_360_image_supervised_from_disk import \\\n  File \"src/learning/single_client/goal_prediction_house_single_360_image_supervised_from_disk.py\", line 15, in <module>\n    from learning.auxiliary_objective.goal_prediction import GoalPrediction\nModuleNotFoundError: No module named 'learning.auxiliary_objective'\n```";
    for (k, err) in errors.iter().cycle().take(10).enumerate() {
        let stuffed = finding(
            &format!("S{k}"),
            &format!("{err} in {files}"),
            &format!("{err} {code}"),
            "python src/experiments_house/train_goal_prediction_from_disk.py",
            &format!("{code} {files}"),
            ("src/models/model.py", code),
            err,
        );
        let l = lexical_label(issue_title, issue_body, stuffed);
        assert_eq!(l, Label::None, "stuffed finding {k} ({err}) scored");
    }
}

/// The stuffing guard's two mistakes on the real corpus's tuning half (issue 46): a claim
/// naming one problem beside a list of settings was refused whole, and quoted code
/// (`checkpoint = torch.load(...)`, an argument's help text) counted as naming a problem.
#[test]
fn a_problem_counts_where_the_claim_names_it_not_where_code_is_quoted() {
    let (title, body) = (
        "Pre-trained Checkpoints Leading to 404's",
        "Every pre-trained checkpoint link at the bottom of the README returns a 404 error.",
    );
    let files = "README.md moco-master/main_lincls.py moco-master/main_moco.py";
    let listed =
        "pretrained model checkpoint download link broken, learning rate batch size epochs";
    let claim = finding(
        "S5",
        &format!("{listed} in {files}"),
        listed,
        "python main_moco.py",
        files,
        ("README.md", listed),
        listed,
    );
    let text = |f: &serde_json::Value| {
        ["issue_title", "user_symptom", "root_cause", "impact"]
            .map(|k| f[k].as_str().unwrap_or_default().to_string())
            .join("\n")
    };
    let claim_of = |f: &serde_json::Value| {
        ["issue_title", "user_symptom", "root_cause"]
            .map(|k| f[k].as_str().unwrap_or_default().to_string())
            .join("\n")
    };
    let kept = super::anchors::claimed_anchors(&text(&claim), &claim_of(&claim));
    assert!(kept.contains("concept:checkpoint"), "{kept:?}");
    assert!(!kept.iter().any(|a| a.starts_with("hparam:")), "{kept:?}");
    assert!(!super::anchors::unfocused(&kept), "{kept:?}");
    // The listed settings are not its claim: an issue about a batch size is another problem.
    let settings = (
        "About training details",
        "The paper reports training batch size 512, but the released code uses 64.",
    );
    assert_eq!(lexical_label(settings.0, settings.1, claim), Label::None);
    let code = "checkpoint = torch.load(args.resume) checkpoint = torch.load(pretrained_weights, map_location=\"cpu\") parser.add_argument('--resume', default='', type=str, help='path to latest checkpoint (default: none)')";
    let quoting = finding(
        "S7",
        &format!("FileNotFoundError: [Errno 2] No such file or directory in {files}"),
        &format!("FileNotFoundError: [Errno 2] No such file or directory {code}"),
        "python main_moco.py",
        &format!("{code} {files}"),
        ("README.md", "FileNotFoundError"),
        "FileNotFoundError: [Errno 2] No such file or directory",
    );
    let kept = super::anchors::claimed_anchors(&text(&quoting), &claim_of(&quoting));
    assert!(!kept.contains("concept:checkpoint"), "{kept:?}");
    assert_eq!(lexical_label(title, body, quoting), Label::None);
}
