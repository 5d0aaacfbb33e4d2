//! The metrics on hand-built judge results, against values computed by hand.

use super::compute::*;
use crate::input::Category;
use crate::judgment::Label;

fn issue(
    id: &str,
    paper: &str,
    group: &str,
    post_fix: Option<&str>,
    cat: Option<Category>,
) -> IssueInfo {
    IssueInfo {
        id: id.into(),
        paper_id: paper.into(),
        title: format!("title of {id}"),
        target: if post_fix.is_some() {
            "closed_gold"
        } else {
            "open"
        }
        .into(),
        group_id: group.into(),
        post_fix_group_id: post_fix.map(String::from),
        category: cat,
        rule: "default_branch_at_collected_at".into(),
        commit: "c0ffee".into(),
    }
}

fn paper(id: &str, venue: Option<&str>, year: Option<&str>) -> PaperInfo {
    PaperInfo {
        paper_id: id.into(),
        title: None,
        venue: venue.map(String::from),
        year: year.map(String::from),
    }
}

fn run(
    group: &str,
    repeat: u32,
    judged: bool,
    labels: &[(&str, u32, Label)],
    cats: &[&str],
) -> RunData {
    RunData {
        group_id: group.into(),
        repeat,
        status: "ok".into(),
        judgment: judged.then(|| "ok".to_string()),
        labels: labels
            .iter()
            .map(|(i, n, l)| (i.to_string(), *n, *l))
            .collect(),
        findings: cats
            .iter()
            .map(|c| FindingBrief {
                title: "t".into(),
                category: c.to_string(),
                taxonomy: match *c {
                    "missing_dependency" => Some(Category::CrashImmediate),
                    "paper_code_mismatch" => Some(Category::SilentWrongSetup),
                    _ => None,
                },
            })
            .collect(),
        ..RunData::default()
    }
}

const O: Options = Options {
    k: 10,
    bootstrap: 200,
    seed: 7,
};

/// Three papers, four hidden issues, one post-fix snapshot; one repeat.
///
/// - `a/x#1` (P1, g1, crash_immediate): semantic at rank 0, exact at rank 3 on g1; exact at
///   rank 0 on the post-fix group g1fix, which must not count.
/// - `a/x#2` (P1, g1, gold, fixed by g1fix, silent_wrong_number): exact at rank 12 only;
///   semantic at rank 0 on g1fix (a false positive under SM only).
/// - `b/y#1` (P2, g2, crash_immediate): exact at rank 0, but g2 has no judgment.
/// - `c/z#1` (P3, g3, no category): exact at rank 9.
fn dataset() -> Dataset {
    use Label::{Exact, Semantic};
    let mut d = Dataset {
        issues: vec![
            issue("a/x#1", "P1", "g1", None, Some(Category::CrashImmediate)),
            issue(
                "a/x#2",
                "P1",
                "g1",
                Some("g1fix"),
                Some(Category::SilentWrongNumber),
            ),
            issue("b/y#1", "P2", "g2", None, Some(Category::CrashImmediate)),
            issue("c/z#1", "P3", "g3", None, None),
        ],
        papers: vec![
            paper("P1", Some("NeurIPS"), Some("2023")),
            paper("P2", Some("ICML"), None),
            paper("P3", None, None),
        ],
        groups: vec![],
        runs: vec![
            run(
                "g1",
                0,
                true,
                &[
                    ("a/x#1", 0, Semantic),
                    ("a/x#1", 3, Exact),
                    ("a/x#1", 1, Label::None),
                    ("a/x#2", 12, Exact),
                ],
                &[
                    "missing_dependency",
                    "missing_dependency",
                    "paper_code_mismatch",
                ],
            ),
            run(
                "g1fix",
                0,
                true,
                &[("a/x#2", 0, Semantic), ("a/x#1", 0, Exact)],
                &[],
            ),
            run("g2", 0, false, &[("b/y#1", 0, Exact)], &[]),
            run("g3", 0, true, &[("c/z#1", 9, Exact)], &["nondeterminism"]),
        ],
    };
    let costs = [Some(1.0), Some(2.0), Option::None, Some(3.0)];
    for (i, r) in d.runs.iter_mut().enumerate() {
        r.cost_usd = costs[i];
        r.input_tokens = 100 * (i as u64 + 1);
        r.cached_input_tokens = 10;
        r.output_tokens = 5 * i as u64;
    }
    // A run that timed out: its findings are no findings, its cost still a cost.
    let mut t = run("gx", 0, false, &[], &["missing_dependency"]);
    t.status = "timeout".into();
    d.runs.push(t);
    d
}

fn close(a: Option<f64>, b: f64) {
    let a = a.expect("a value");
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn issue_em_and_sm_at_1_10_and_all() {
    let m = compute(&dataset(), "agent", "builtin", O);
    assert_eq!((m.papers, m.issues, m.repeats), (3, 4, 1));
    // @1: only a/x#1 semantic at 0 (b/y#1 unjudged, g1fix's exact for a/x#1 not its group).
    close(m.issue.em.get(1), 0.0);
    close(m.issue.sm.get(1), 0.25);
    // @4: a/x#1 exact at 3.
    close(m.issue.em.get(4), 0.25);
    // @10: a/x#1 and c/z#1 (rank 9).
    close(m.issue.em.get(10), 0.5);
    close(m.issue.sm.get(10), 0.5);
    close(m.issue.em.get(9), 0.25);
    // all: also a/x#2 at rank 12.
    close(m.issue.em.all, 0.75);
    close(m.issue.sm.all, 0.75);
    assert_eq!(m.issue.em.at.len(), 10);
}

#[test]
fn paper_any_and_all() {
    let m = compute(&dataset(), "agent", "builtin", O);
    close(m.paper_any.em.get(1), 0.0);
    close(m.paper_any.sm.get(1), 1.0 / 3.0);
    close(m.paper_any.em.get(10), 2.0 / 3.0);
    // P1 misses a/x#2 within 10: only P3 has all its issues.
    close(m.paper_all.sm.get(10), 1.0 / 3.0);
    close(m.paper_all.em.all, 2.0 / 3.0);
}

#[test]
fn fpr_exact_and_semantic_on_post_fix_snapshots() {
    let m = compute(&dataset(), "agent", "builtin", O);
    assert_eq!(m.fpr.papers, 1);
    close(m.fpr.exact, 0.0);
    close(m.fpr.exact_or_semantic, 1.0);
    // No post-fix snapshot at all: no rate, not 0.
    let mut d = dataset();
    d.issues[1].post_fix_group_id = None;
    let m = compute(&d, "agent", "builtin", O);
    assert_eq!((m.fpr.papers, m.fpr.exact), (0, None));
}

#[test]
fn missing_or_failed_judgments_and_invalid_runs_leave_issues_unmatched() {
    let mut d = dataset();
    // Judged now: b/y#1 is matched at rank 0.
    d.runs[2].judgment = Some("ok".into());
    close(compute(&d, "a", "j", O).issue.em.get(1), 0.25);
    d.runs[2].judgment = Some("invalid_output".into());
    close(compute(&d, "a", "j", O).issue.em.get(1), 0.0);
    d.runs[2].judgment = Some("ok".into());
    d.runs[2].status = "invalid_output".into();
    close(compute(&d, "a", "j", O).issue.em.get(1), 0.0);
    // No run at all for g3: c/z#1 unmatched, still in the denominator.
    let mut d = dataset();
    d.runs.retain(|r| r.group_id != "g3");
    let m = compute(&d, "a", "j", O);
    close(m.issue.em.get(10), 0.25);
    assert_eq!(m.issues, 4);
}

#[test]
fn a_post_fix_group_never_counts_toward_issue_recall() {
    let mut d = dataset();
    // Everything on g1 gone: a/x#1's exact label on g1fix must not match it.
    d.runs.retain(|r| r.group_id != "g1");
    let m = compute(&d, "a", "j", O);
    close(m.issue.em.all, 0.25); // c/z#1 only
    close(m.fpr.exact_or_semantic, 1.0);
}

#[test]
fn recall_by_category_and_venue() {
    let m = compute(&dataset(), "a", "j", O);
    let ci = &m.by_category["crash_immediate"];
    assert_eq!(ci.n, 2);
    close(ci.em, 0.5);
    close(ci.sm, 0.5);
    let swn = &m.by_category["silent_wrong_number"];
    assert_eq!(swn.n, 1);
    close(swn.sm, 0.0);
    assert_eq!(m.by_category["crash_late"].n, 0);
    assert_eq!(m.by_category["crash_late"].sm, None);
    assert_eq!(m.by_category.len(), 4);

    let v = &m.by_venue["NeurIPS 2023"];
    assert_eq!((v.issues, v.papers), (2, 1));
    close(v.issue_em, 0.5);
    close(v.paper_any_sm, 1.0);
    let v = &m.by_venue["ICML"];
    assert_eq!((v.issues, v.papers), (1, 1));
    close(v.issue_sm, 0.0);
    assert_eq!(m.by_venue.len(), 2, "P3 has no venue");
}

#[test]
fn the_four_way_split_of_issues_and_of_predictions() {
    let t = compute(&dataset(), "a", "j", O).taxonomy;
    let n = |m: &std::collections::BTreeMap<String, Share>| -> Vec<(String, u64)> {
        m.iter().map(|(k, s)| (k.clone(), s.n)).collect()
    };
    let want = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    // Issues: every class listed, the one without a category as unlabelled.
    assert_eq!(
        n(&t.issues),
        want(&[
            ("crash_immediate", 2),
            ("crash_late", 0),
            ("silent_wrong_number", 1),
            ("silent_wrong_setup", 0),
            ("unlabelled", 1)
        ])
    );
    close(Some(t.issues["crash_immediate"].share), 0.5);
    // Findings of valid runs only (the timed-out run's is left out); one not placed.
    assert_eq!(
        n(&t.findings),
        want(&[
            ("crash_immediate", 2),
            ("crash_late", 0),
            ("silent_wrong_number", 0),
            ("silent_wrong_setup", 1),
            ("unclassified", 1)
        ])
    );
    close(Some(t.findings["silent_wrong_setup"].share), 0.25);
}

#[test]
fn finding_categories_cost_and_status() {
    let m = compute(&dataset(), "a", "j", O);
    let f = &m.finding_categories;
    assert_eq!(f.len(), 3, "{f:?}");
    assert_eq!(
        f["missing_dependency"].n, 2,
        "the timed-out run's finding is left out"
    );
    close(Some(f["missing_dependency"].share), 0.5);
    close(Some(f["nondeterminism"].share), 0.25);
    assert_eq!(m.cost.runs, 5);
    close(m.cost.mean_usd, 2.0);
    // 100, 200, 300, 400 and the timed-out run's 0.
    close(m.cost.mean_input_tokens, 200.0);
    close(m.cost.mean_cached_input_tokens, 8.0);
    assert_eq!(m.status["ok"], 4);
    assert_eq!(m.status["timeout"], 1);
    assert_eq!(m.judgments["ok"], 3);
}

#[test]
fn mean_and_sample_std_over_three_repeats() {
    let mut d = Dataset {
        issues: vec![issue("a/x#1", "P1", "g1", Some("g1fix"), None)],
        papers: vec![paper("P1", None, None)],
        ..Dataset::default()
    };
    for r in 0..3 {
        let hit: &[(&str, u32, Label)] = if r < 2 {
            &[("a/x#1", 0, Label::Exact)]
        } else {
            &[]
        };
        d.runs.push(run("g1", r, true, hit, &[]));
        let fp: &[(&str, u32, Label)] = if r == 0 {
            &[("a/x#1", 5, Label::Exact)]
        } else {
            &[]
        };
        d.runs.push(run("g1fix", r, true, fp, &[]));
    }
    let m = compute(&d, "a", "j", O);
    assert_eq!(m.repeats, 3);
    close(m.issue.sm.get(1), 2.0 / 3.0);
    // Deviations 1/3, 1/3, −2/3: Σ² = 2/3, / (n − 1) = 1/3.
    close(m.std.issue.sm.get(1), (1.0f64 / 3.0).sqrt());
    close(m.fpr.exact, 1.0 / 3.0);
    close(m.std.fpr.exact, (1.0f64 / 3.0).sqrt());
    assert_eq!(mean_std(&[Some(0.5)]), (Some(0.5), None));
    assert_eq!(mean_std(&[None, None]), (None, None));
}

#[test]
fn bootstrap_intervals_contain_the_estimate_and_are_deterministic() {
    let d = dataset();
    let m = compute(&d, "a", "j", O);
    for (name, point) in [
        ("issue_em_10", m.issue.em.get(10)),
        ("issue_sm_10", m.issue.sm.get(10)),
        ("paper_any_sm_10", m.paper_any.sm.get(10)),
        ("fpr_exact_or_semantic", m.fpr.exact_or_semantic),
    ] {
        let [lo, hi] = m.ci95[name].unwrap_or_else(|| panic!("{name}: no interval"));
        let p = point.unwrap_or(f64::NAN);
        assert!(lo <= p && p <= hi, "{name}: {lo} <= {p} <= {hi}");
        assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi));
    }
    // Resampling three papers of issue SM 1/2, 0, 1 can give 0 (P2 thrice) and 1 (P3
    // thrice): with 200 draws the interval is wide.
    let [lo, hi] = m.ci95["issue_sm_10"].unwrap();
    assert!(hi - lo > 0.3, "{lo} {hi}");
    assert_eq!(compute(&d, "a", "j", O).ci95, m.ci95);
    let other = compute(&d, "a", "j", Options { seed: 8, ..O });
    assert_ne!(other.ci95, m.ci95);
    let none = compute(&d, "a", "j", Options { bootstrap: 0, ..O });
    assert_eq!(none.ci95["issue_sm_10"], None);
}

#[test]
fn json_rates_are_keyed_1_to_k_then_all() {
    let m = compute(&dataset(), "a", "j", Options { k: 3, ..O });
    let v = serde_json::to_string(&m.issue.sm).unwrap();
    assert_eq!(v, r#"{"1":0.25,"2":0.25,"3":0.25,"all":0.75}"#);
    let j = serde_json::to_value(&m).unwrap();
    for key in [
        "issue",
        "paper_any",
        "paper_all",
        "fpr",
        "by_category",
        "finding_categories",
        "taxonomy",
        "by_venue",
        "cost",
        "std",
        "ci95",
        "status",
    ] {
        assert!(j.get(key).is_some(), "{key} missing: {j}");
    }
    assert!(j["ci95"]["issue_sm_3"].is_array(), "{j}");
    assert!(
        j["std"]["issue"]["em"]["all"].is_null(),
        "one repeat has no std: {j}"
    );
}
