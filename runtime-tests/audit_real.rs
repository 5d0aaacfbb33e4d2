//! The real corpus of `reprorun audit` (`images/audit-real/`), all 22 repositories from their
//! committed bundles, through what `images/audit-real/demo.sh` runs, offline: snapshot, the
//! built-in auditor, the built-in judge, metrics, report (with the four-way taxonomy of the
//! human issues and of the predictions), the figures against the hand labels per half, the
//! judge's validation as the paper samples it and over all pairs, and the keyword-stuffing
//! agent. Checks that every figure is computed and that the hand labels still name the
//! auditor's findings; never a tuned value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

fn recipe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("images/audit-real")
}

#[test]
fn the_real_corpus_runs_end_to_end_offline_and_its_figures_are_computed() {
    require!(Need::Root, Need::Tool("git"), Need::Tool("python3"));
    let work = Work::new();
    let o = Command::new(recipe_dir().join("demo.sh"))
        .arg(work.path().join("demo"))
        .env("REPRORUN", BIN)
        .env_remove("ONLY")
        .output()
        .expect("run images/audit-real/demo.sh");
    let out = stdout(&o);
    assert!(o.status.success(), "demo.sh: {out}\n{}", stderr(&o));
    for stage in ["build", "snapshot", "run", "judge", "report"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("stage {stage} ")) && l.contains(" s ")),
            "no time and disk for {stage}: {out}"
        );
    }
    let papers = std::fs::read_to_string(recipe_dir().join("pairs.jsonl"))
        .expect("pairs.jsonl")
        .lines()
        .count();
    assert!(out.contains(&format!("papers: {papers}\n")), "{out}");
    for half in ["tuning", "held-out"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{half}: ")))
            .unwrap_or_else(|| panic!("no figures for the {half} half: {out}"));
        for figure in [
            "judge_match_precision",
            "judge_match_recall",
            "auditor_precision_at_1",
            "issue_sm10_hand",
            "issue_sm10_judge",
        ] {
            assert!(line.contains(figure), "{figure} missing: {line}");
        }
        // Every rank-1 finding and every pair of the subset is hand-labelled: a change of
        // the auditor's output must come with new labels.
        assert!(line.contains("unlabelled_pairs 0;"), "{line}");
        assert!(line.contains("unlabelled_rank1 0;"), "{line}");
        let p1 = line
            .split("auditor_precision_at_1 ")
            .nth(1)
            .unwrap_or_default();
        assert!(
            p1.contains("% ("),
            "precision at rank 1 not computed: {line}"
        );
    }
    // The judge against the hand labels, as the paper samples (up to 50 pairs per judge
    // label) and over every pair; each with the estimate weighted back to the study.
    let sampled = section(&out, "-- sampled", "-- all pairs");
    let all = section(&out, "-- all pairs", "== keyword stuffing");
    for (name, text) in [("sampled", sampled), ("all pairs", all)] {
        assert!(
            text.contains("match (exact or semantic vs none): precision ")
                && text.contains("weighted to the study's "),
            "{name}: {text}"
        );
    }
    let labelled = |text: &str| -> u64 {
        text.split("against ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        labelled(sampled) > 0 && labelled(sampled) <= labelled(all),
        "the sample is part of the hand-labelled pairs: {sampled}\n{all}"
    );
    // Both the honest auditor and the stuffing agent are measured, the stuffing agent's
    // pairs also against hand labels (every pair of it labelled, as the auditor's).
    assert!(out.contains("| builtin |"), "{out}");
    assert!(out.contains("| cmd |"), "{out}");
    let stuffing = section(
        &out,
        "== the stuffing agent against the hand labels",
        "report: ",
    );
    for name in ["-- stuffing, sampled", "-- stuffing, all pairs"] {
        let text = section(stuffing, name, "weighted to the study's");
        assert!(text.contains("precision "), "{name}: {stuffing}");
    }
    for half in ["tuning", "held-out"] {
        assert!(
            stuffing.lines().any(|l| l.starts_with(&format!("{half}: "))
                && l.contains("judge_match_precision ")
                && l.contains("unlabelled_pairs 0;")),
            "{half}: {stuffing}"
        );
    }
    let report =
        std::fs::read_to_string(work.path().join("demo/report/report.md")).expect("report.md");
    assert!(
        report.contains("## Taxonomy: human issues and predictions"),
        "{report}"
    );
    // The human issues' split is the hand labels' (issues/*.json, reproducibility issues).
    for (class, n) in hand_categories() {
        let row = format!("| {} | {n} | ", class.replace('_', "\\_"));
        assert!(report.contains(&row), "{row} not in the report: {report}");
    }
}

/// The text of `out` from the line `from` to the line `to`.
fn section<'a>(out: &'a str, from: &str, to: &str) -> &'a str {
    let start = out.find(from).unwrap_or_else(|| panic!("no {from}: {out}"));
    let end = out[start..].find(to).map_or(out.len(), |e| start + e);
    &out[start..end]
}

/// The reproducibility issues of `issues/` per hand-labelled category.
fn hand_categories() -> BTreeMap<String, u64> {
    let mut n = BTreeMap::new();
    for class in [
        "crash_immediate",
        "crash_late",
        "silent_wrong_setup",
        "silent_wrong_number",
    ] {
        n.insert(class.to_string(), 0);
    }
    let dir = recipe_dir().join("issues");
    for e in std::fs::read_dir(&dir).expect("issues/") {
        let text = std::fs::read_to_string(e.expect("entry").path()).expect("an issues file");
        let v: serde_json::Value = serde_json::from_str(&text).expect("issues JSON");
        for i in v.as_array().expect("an array of issues") {
            if i["reproducibility"] == true {
                if let Some(c) = i["category"].as_str() {
                    *n.entry(c.to_string()).or_insert(0) += 1;
                }
            }
        }
    }
    n
}
