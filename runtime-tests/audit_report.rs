//! `reprorun audit metrics` and `audit report` on a study made by `audit run` with a
//! scripted agent over a hand-written corpus, judged by hand (rows written straight into
//! the judge's tables): the numbers against values computed by hand, the report escaped
//! and, when chromium is installed, rendered.

use std::path::{Path, PathBuf};

use crate::common::*;

/// Two findings, ranked: a missing dependency (its title with markup the report must
/// escape), then a paper/code mismatch.
const RANKED_FINDINGS: &str = r#"{"reproducibility_assessment": {"overall": "partially_reproducible", "summary": "two blockers"}, "findings": [{"finding_id": "F1", "rank_reason": "first thing a user hits", "severity": "high", "stage": "environment_setup", "category": "missing_dependency", "issue_title": "No module named cv2 <script>x</script>", "user_symptom": "ModuleNotFoundError", "trigger_context": "python main.py", "root_cause": "opencv-python is not listed", "evidence": [{"path": "main.py", "line_refs": [1], "evidence_type": "code", "summary": "import cv2"}], "impact": "nothing runs", "affected_claims_or_metrics": [], "reproducibility_blocker": true, "confidence": "high"}, {"finding_id": "F2", "rank_reason": "second", "severity": "medium", "stage": "training", "category": "paper_code_mismatch", "issue_title": "Learning rate differs from the paper", "user_symptom": "lower accuracy", "trigger_context": "python main.py", "root_cause": "lr 0.01 in code, 0.001 in paper", "evidence": [{"path": "main.py", "line_refs": [1], "evidence_type": "code", "summary": "lr"}], "impact": "numbers differ", "affected_claims_or_metrics": ["Table 1"], "reproducibility_blocker": false, "confidence": "medium"}], "missing_or_ambiguous_artifacts": []}"#;

/// Two papers: p1 (NeurIPS 2024; snapshot g0 with issues o/demo#1 and #2, and g1, the fix
/// of #2), p2 (snapshot g2 with o/two#1).
struct Study {
    work: Work,
}

const G0: &str = "p1@000000000000";
const G1: &str = "p1@000000000001";
const G2: &str = "p2@000000000002";

impl Study {
    fn new() -> Study {
        let work = Work::new();
        let dir = work.path().join("corpus");
        std::fs::create_dir_all(dir.join("trees")).unwrap();
        std::fs::create_dir_all(dir.join("papers")).unwrap();
        let paper = "# A paper\nWe train with a learning rate of 0.001.\n";
        let paper_name = format!("{}.md", sha256_hex(paper.as_bytes()));
        std::fs::write(dir.join("papers").join(&paper_name), paper).unwrap();
        let mut groups = Vec::new();
        for (i, (paper_id, repo, issues, fixes)) in [
            ("p1", "o/demo", vec![1, 2], vec![]),
            ("p1", "o/demo", vec![], vec![2]),
            ("p2", "o/two", vec![1], vec![]),
        ]
        .into_iter()
        .enumerate()
        {
            let digest = store_tree(
                &dir,
                &[("main.py", &format!("import cv2\nlr = 0.0{i}\n"), 0o644)],
            );
            groups.push(serde_json::json!({
                "group_id": format!("{paper_id}@{i:012}"), "paper_id": paper_id, "repo": repo,
                "commit": format!("{i:040}"), "tree": digest, "issues": issues,
                "post_fix_for": fixes,
            }));
        }
        let manifest = serde_json::json!({
            "version": 1,
            "pairs": [
                {"paper_id": "p1", "repo": "o/demo", "paper": paper_name, "paper_kind": "md",
                 "collected_at": "2024-01-01T00:00:00Z", "venue": "NeurIPS", "year": "2024",
                 "title": "Demo <img src=x onerror=alert(2)>"},
                {"paper_id": "p2", "repo": "o/two", "paper": paper_name, "paper_kind": "md",
                 "collected_at": "2024-01-01T00:00:00Z"},
            ],
            "groups": groups,
            "issues": [
                {"issue": {"repo": "o/demo", "number": 1, "title": "<script>alert(1)</script>",
                           "category": "crash_immediate"},
                 "grounding": {"target": "open", "group_id": G0, "commit": format!("{:040}", 0),
                               "rule": "default_branch_at_collected_at"}},
                {"issue": {"repo": "o/demo", "number": 2, "title": "wrong lr",
                           "category": "silent_wrong_setup"},
                 "grounding": {"target": "closed_gold", "group_id": G0, "commit": format!("{:040}", 0),
                               "post_fix_group_id": G1, "rule": "merged_pr",
                               "fix_commit": format!("{:040}", 1)}},
                {"issue": {"repo": "o/two", "number": 1, "title": "numbers differ",
                           "category": "silent_wrong_number"},
                 "grounding": {"target": "closed_silver", "group_id": G2, "commit": format!("{:040}", 2),
                               "rule": "before_created_at"}},
            ],
            "warnings": [],
        });
        std::fs::write(
            dir.join("corpus.json"),
            serde_json::to_vec_pretty(&manifest).unwrap(),
        )
        .unwrap();
        Study { work }
    }

    fn path(&self) -> &Path {
        self.work.path()
    }

    /// `audit run` with a scripted agent, 2 repeats.
    fn run_agent(&self) {
        let agent = format!(
            "printf '%s' '{RANKED_FINDINGS}' > \"$REPRORUN_AUDIT_OUT\"; \
             echo '{{\"input_tokens\": 100, \"cached_input_tokens\": 40, \"output_tokens\": 7}}' > /out/usage.json"
        );
        let o = self.work.run(&[
            "audit",
            "run",
            "--corpus",
            "corpus",
            "--db",
            "audit.db",
            "--repeats",
            "2",
            "--agent-cmd",
            &agent,
            "--json",
        ]);
        let s: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
        assert_eq!(s["by_status"]["ok"], 6, "{s}");
    }

    /// The judge's verdicts, by hand: `judged` runs get a judgment `ok`; labels are written
    /// for every run listed, judged or not.
    fn judge(&self, judged: &[(&str, u32)], labels: &[(&str, u32, &str, u32, &str)]) {
        let conn = rusqlite::Connection::open(self.path().join("audit.db")).unwrap();
        let result = r#"{"issue_alignments": [{"hidden_issue_id": "o/demo#1", "best_label": "exact", "best_finding_index": 0, "rationale": "RATIONALE <b>cv2</b>"}], "finding_alignments": [], "pair_labels": []}"#;
        let digest = sha256_hex(result.as_bytes());
        let logs = self.path().join("audit.db.logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join(&digest), result).unwrap();
        for (group, repeat) in judged {
            let res = (*group == G0 && *repeat == 0).then_some(digest.as_str());
            conn.execute(
                "INSERT INTO judgments VALUES (?1, ?2, 'builtin', 'ok', NULL, 1, 'task', ?3, NULL, NULL, 10, 0, 5, NULL)",
                rusqlite::params![group, repeat, res],
            )
            .unwrap();
        }
        for (group, repeat, issue, index, label) in labels {
            conn.execute(
                "INSERT INTO pair_labels VALUES (?1, ?2, 'builtin', ?3, ?4, ?5)",
                rusqlite::params![group, repeat, issue, index, label],
            )
            .unwrap();
        }
    }
}

fn close(v: &serde_json::Value, want: f64, what: &str) {
    let got = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {v} is no number"));
    assert!((got - want).abs() < 1e-9, "{what}: {got} != {want}");
}

fn judged_study() -> Study {
    let s = Study::new();
    s.run_agent();
    // g2 repeat 0 has labels but no judgment: its issue stays unmatched.
    s.judge(
        &[(G0, 0), (G0, 1), (G1, 0), (G1, 1), (G2, 1)],
        &[
            (G0, 0, "o/demo#1", 0, "exact"),
            (G0, 0, "o/demo#1", 1, "none"),
            (G0, 0, "o/demo#2", 0, "none"),
            (G0, 0, "o/demo#2", 1, "semantic"),
            (G0, 1, "o/demo#1", 0, "none"),
            (G0, 1, "o/demo#1", 1, "semantic"),
            (G0, 1, "o/demo#2", 0, "none"),
            (G0, 1, "o/demo#2", 1, "none"),
            (G1, 0, "o/demo#2", 0, "exact"),
            (G1, 0, "o/demo#2", 1, "none"),
            (G1, 1, "o/demo#2", 0, "none"),
            (G1, 1, "o/demo#2", 1, "none"),
            (G2, 0, "o/two#1", 0, "exact"),
            (G2, 1, "o/two#1", 0, "none"),
            (G2, 1, "o/two#1", 1, "exact"),
        ],
    );
    s
}

#[test]
fn metrics_match_hand_computed_values_and_the_report_is_safe() {
    require!(Need::Root);
    let s = judged_study();
    let o = s.work.run(&[
        "audit", "metrics", "--db", "audit.db", "--json", "--seed", "3",
    ]);
    let m: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(
        (m["papers"].as_u64(), m["issues"].as_u64()),
        (Some(2), Some(3)),
        "{m}"
    );
    let c = &m["configs"][0];
    assert_eq!(c["judge"], "builtin");
    assert_eq!(c["repeats"], 2);
    // Repeat 0: #1 exact@0, #2 semantic@1, two#1 unjudged. Repeat 1: #1 semantic@1,
    // two#1 exact@1.
    close(
        &c["issue"]["em"]["1"],
        (1.0 / 3.0 + 0.0) / 2.0,
        "issue EM@1",
    );
    close(&c["issue"]["sm"]["1"], 1.0 / 6.0, "issue SM@1");
    close(
        &c["std"]["issue"]["sm"]["1"],
        (1.0f64 / 18.0).sqrt(),
        "std SM@1",
    );
    close(&c["issue"]["em"]["10"], 1.0 / 3.0, "issue EM@10");
    close(&c["issue"]["sm"]["10"], 2.0 / 3.0, "issue SM@10");
    close(&c["std"]["issue"]["sm"]["10"], 0.0, "std SM@10");
    close(&c["issue"]["sm"]["all"], 2.0 / 3.0, "issue SM@all");
    close(&c["paper_any"]["em"]["10"], 0.5, "paper-any EM@10");
    close(&c["paper_any"]["sm"]["10"], 0.75, "paper-any SM@10");
    close(&c["paper_all"]["sm"]["10"], 0.5, "paper-all SM@10");
    close(&c["fpr"]["exact"], 0.5, "FPR exact");
    close(&c["fpr"]["exact_or_semantic"], 0.5, "FPR SM");
    assert_eq!(c["fpr"]["papers"], 1);
    close(
        &c["by_category"]["crash_immediate"]["em"],
        0.5,
        "crash_immediate EM",
    );
    close(
        &c["by_category"]["crash_immediate"]["sm"],
        1.0,
        "crash_immediate SM",
    );
    close(
        &c["by_category"]["silent_wrong_number"]["sm"],
        0.5,
        "swn SM",
    );
    assert_eq!(c["by_venue"]["NeurIPS 2024"]["issues"], 2, "{c}");
    assert_eq!(c["finding_categories"]["environment_setup"]["n"], 6, "{c}");
    close(
        &c["finding_categories"]["paper_repo_mismatch"]["share"],
        0.5,
        "share",
    );
    assert_eq!(c["cost"]["runs"], 6);
    close(&c["cost"]["mean_input_tokens"], 60.0, "input tokens");
    close(
        &c["cost"]["mean_cached_input_tokens"],
        40.0,
        "cached tokens",
    );
    close(&c["cost"]["mean_output_tokens"], 7.0, "output tokens");
    assert_eq!(c["status"]["ok"], 6);
    let [lo, hi] =
        [&c["ci95"]["issue_sm_10"][0], &c["ci95"]["issue_sm_10"][1]].map(|v| v.as_f64().unwrap());
    assert!(lo <= 2.0 / 3.0 && 2.0 / 3.0 <= hi, "{lo} {hi}");
    // Seeded: the same command prints the same bytes.
    let again = s.work.run(&[
        "audit", "metrics", "--db", "audit.db", "--json", "--seed", "3",
    ]);
    assert_eq!(stdout(&again), stdout(&o));

    // The Table-3 rows.
    let t = expect_code(&s.work.run(&["audit", "metrics", "--db", "audit.db"]), 0);
    assert!(t.contains("| config | Issue EM@10 | Issue SM@10 | Paper-any EM@10 | Paper-any SM@10 | Paper-all SM@10 | FPR | $/run |"), "{t}");
    assert!(t.contains("| 66.7% ± 0.0 |"), "{t}");

    let out = s.path().join("report");
    expect_code(
        &s.work.run(&[
            "audit", "report", "--db", "audit.db", "--out", "report", "--seed", "3",
        ]),
        0,
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let lower = html.to_ascii_lowercase();
    assert!(
        !lower.contains("<script") && !lower.contains("<img"),
        "markup got through"
    );
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        html.contains("RATIONALE &lt;b&gt;cv2&lt;/b&gt;"),
        "the rationale is shown"
    );
    assert!(html.contains("<svg class=\"curves\""));
    assert!(html.contains(G1) && html.contains("merged_pr"));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Paper p1"), "{md}");
    assert_eq!(read_json(&out.join("metrics.json")), m);
    render(&out.join("report.html"), &s.path().join("report.png"));
}

/// Renders the page with headless chromium when installed; the PNG must not be blank-small.
fn render(html: &Path, png: &Path) {
    let Some(chromium) = ["chromium", "chromium-browser"]
        .iter()
        .find_map(|c| which(c))
    else {
        // .ci/setup does not install a browser (hundreds of MB for one screenshot).
        skip!(optional: "its rendering of report.html: needs `chromium` on PATH");
    };
    let o = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            &format!("--screenshot={}", png.display()),
            "--window-size=1280,2000",
            &format!("file://{}", html.display()),
        ])
        .output()
        .unwrap();
    let size = std::fs::metadata(png).map(|m| m.len()).unwrap_or(0);
    eprintln!("chromium rendered the report: {size} bytes");
    assert!(
        size > 10 * 1024,
        "screenshot of {} bytes: {}",
        size,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

#[test]
fn bad_input_is_refused_with_one_line() {
    let w = Work::new();
    let o = w.run(&["audit", "metrics", "--db", "missing.db"]);
    expect_error(&o, "missing.db");
    let o = w.run(&["audit", "report", "--db", "missing.db", "--out", "r"]);
    expect_error(&o, "missing.db");
    assert!(
        !w.path().join("r").exists(),
        "no report for a missing study"
    );
    let o = w.run(&["audit", "metrics", "--db", "x.db", "--k", "0"]);
    expect_code(&o, 125);
    assert!(stderr(&o).contains("--k"), "{}", stderr(&o));
}
