//! The real corpus of `reprorun audit` (`images/audit-real/`): built from public clones by its
//! script, then what `images/audit-real/demo.sh` runs on a subset of it, offline: snapshot,
//! the built-in auditor, the built-in judge, metrics, report, the figures against the hand
//! labels per half, and the keyword-stuffing agent. Checks that every figure is computed and
//! that the hand labels still name the auditor's findings; never a tuned value.
//!
//! The clones are not in this repository (their code is not ours to commit): the test needs
//! `REPRORUN_AUDIT_MIRRORS`, a directory of them as build.sh describes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Two papers of each half: small repositories, one issue each, crash and setup issues.
const SUBSET: &str = "bpn,diva,group_wsss,cgd";

fn recipe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("images/audit-real")
}

#[test]
fn the_real_corpus_runs_end_to_end_offline_and_its_figures_are_computed() {
    require!(Need::Root, Need::Tool("git"), Need::Tool("python3"));
    let Some(mirrors) = std::env::var_os("REPRORUN_AUDIT_MIRRORS") else {
        skip!(optional: "needs REPRORUN_AUDIT_MIRRORS: clones of images/audit-real/repos.tsv (images/audit-real/build.sh)");
    };
    let work = Work::new();
    let o = Command::new(recipe_dir().join("demo.sh"))
        .arg(&mirrors)
        .arg(work.path().join("demo"))
        .env("REPRORUN", BIN)
        .env("ONLY", SUBSET)
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
    assert!(out.contains("papers: 4"), "{out}");
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
    // Both the honest auditor and the stuffing agent are measured.
    assert!(out.contains("| builtin |"), "{out}");
    assert!(out.contains("| cmd |"), "{out}");
    assert!(work.path().join("demo/report/report.md").is_file());
}
