//! `reprorun audit judge`, `sample` and `agreement`: a corpus written by hand (the format of
//! `spec/audit.md`), scripted agents' findings, the built-in judge's pair labels in the
//! database, scripted judges that answer badly or try to look around, kill and resume.

use std::process::Stdio;
use std::time::Duration;

use crate::common::audit::{agent_writing, Corpus, FINDINGS, FIX, PRE};
use crate::common::*;

impl Corpus {
    /// `audit run` with a scripted agent writing [`FINDINGS`] (only on snapshots whose
    /// main.py imports cv2, with `only_cv2`).
    fn audit(&self, repeats: u32, only_cv2: bool) {
        let agent = agent_writing(FINDINGS, only_cv2);
        let o = self.work.run(&[
            "audit",
            "run",
            "--corpus",
            "corpus",
            "--db",
            "audit.db",
            "--agent-cmd",
            &agent,
            "--repeats",
            &repeats.to_string(),
        ]);
        expect_code(&o, 0);
    }

    fn judge(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["audit", "judge", "--db", "audit.db", "--json"];
        args.extend_from_slice(extra);
        let o = self.work.run(&args);
        serde_json::from_str(&expect_code(&o, 0)).unwrap()
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.work.path().join("audit.db")).unwrap()
    }

    /// `(group, repeat, issue, finding_index, label)` of `judge`, in order.
    fn labels(&self, judge: &str) -> Vec<(String, u32, String, u32, String)> {
        let db = self.db();
        let mut st = db
            .prepare("SELECT group_id, repeat, hidden_issue_id, finding_index, label FROM pair_labels WHERE judge = ?1 ORDER BY 1, 2, 3, 4")
            .unwrap();
        let rows = st
            .query_map([judge], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    }
}

fn row<'a>(s: &'a serde_json::Value, group: &str) -> &'a serde_json::Value {
    s["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group_id"] == group)
        .unwrap_or_else(|| panic!("no judgment of {group}: {s}"))
}

#[test]
fn the_builtin_judge_labels_every_pair_once() {
    require!(Need::Root);
    let c = Corpus::new();
    c.audit(1, false);
    let s = c.judge(&[]);
    assert_eq!(s["judgments"], 2, "{s}");
    assert_eq!(s["by_status"]["ok"], 2, "{s}");
    let pre = "o/demo#1".to_string();
    let open = "o/demo#2".to_string();
    let l = |g: &str, i: &str, f: u32, label: &str| {
        (g.to_string(), 0, i.to_string(), f, label.to_string())
    };
    assert_eq!(
        c.labels("builtin"),
        vec![
            l(PRE, &pre, 0, "exact"),
            l(PRE, &pre, 1, "none"),
            l(PRE, &open, 0, "none"),
            l(PRE, &open, 1, "none"),
            // The fix snapshot: only the fixed issue; the stale finding matches (a false positive).
            l(FIX, &pre, 0, "exact"),
            l(FIX, &pre, 1, "none"),
        ]
    );
    assert_eq!(s["labels"]["exact"], 2, "{s}");
    // The task as stored: the issue without the fix's discussion; the findings in order.
    let task: serde_json::Value =
        serde_json::from_str(&c.log(row(&s, PRE)["task_sha256"].as_str().unwrap())).unwrap();
    assert_eq!(task["post_fix"], false);
    assert_eq!(
        task["hidden_issues"][0]["comments"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{task}"
    );
    assert!(!task.to_string().contains("FIX-DISCUSSION"));
    assert_eq!(task["findings"][1]["finding_index"], 1);
    let fix: serde_json::Value =
        serde_json::from_str(&c.log(row(&s, FIX)["task_sha256"].as_str().unwrap())).unwrap();
    assert_eq!(fix["post_fix"], true);
    assert_eq!(fix["hidden_issues"].as_array().unwrap().len(), 1);
    // Again: nothing is judged twice.
    let again = c.judge(&[]);
    assert_eq!(again["rows"], s["rows"]);
    assert_eq!(c.labels("builtin").len(), 6);
}

#[test]
fn an_invalid_answer_is_asked_again_once_and_a_run_without_findings_is_skipped() {
    require!(Need::Root);
    let c = Corpus::new();
    c.audit(1, true);
    let s = c.judge(&[
        "--judge-cmd",
        "echo asked; printf '{not json' > \"$REPRORUN_JUDGE_OUT\"",
    ]);
    assert_eq!(s["judge"], "cmd", "{s}");
    let pre = row(&s, PRE);
    assert_eq!(pre["status"], "invalid_output", "{s}");
    assert_eq!(pre["attempts"], 2, "{s}");
    let reason = pre["reason"].as_str().unwrap();
    assert!(
        reason.contains("not JSON") && !reason.contains('\n'),
        "{reason}"
    );
    let fix = row(&s, FIX);
    assert_eq!(fix["status"], "skipped", "{s}");
    assert!(fix["reason"].as_str().unwrap().contains("no_output"), "{s}");
    assert!(c.labels("cmd").is_empty());
    // Another command under the same judge name is refused; the built-in judge is another.
    let o = c
        .work
        .run(&["audit", "judge", "--db", "audit.db", "--judge-cmd", "true"]);
    expect_error(&o, "other options");
    let b = c.judge(&[]);
    assert_eq!(b["by_status"]["ok"], 1, "{b}");
    assert_eq!(b["by_status"]["skipped"], 1, "{b}");
}

/// A judge writing the paper's `result.json` (Appendix E.2: alignments and notes, no
/// `pair_labels`): every issue matched `semantic` by the first finding, when there is one.
const PAPER_JUDGE: &str = r#"python3 - <<'PY'
import json, os
t = json.load(open("/work/task.json"))
dims = {d: "none" for d in ["user_facing_symptom", "trigger_path_or_workflow", "root_cause", "involved_artifact", "impact"]}
has = bool(t["findings"])
issues = [{"hidden_issue_id": h["hidden_issue_id"], "best_label": "semantic" if has else "none",
           "best_finding_index": 0 if has else None, "dimension_labels": dims, "rationale": "r"}
          for h in t["hidden_issues"]]
findings = [{"finding_id": f["finding_id"], "finding_index": f["finding_index"],
             "best_label": "semantic" if f["finding_index"] == 0 else "none",
             "matched_hidden_issue_ids": [h["hidden_issue_id"] for h in t["hidden_issues"]] if f["finding_index"] == 0 else []}
            for f in t["findings"]]
json.dump({"issue_alignments": issues, "finding_alignments": findings, "notes": ""}, open(os.environ["REPRORUN_JUDGE_OUT"], "w"))
PY"#;

#[test]
fn a_failed_judging_is_retried_and_replace_takes_the_papers_result() {
    require!(Need::Root);
    let c = Corpus::new();
    c.audit(1, true);
    let broken = "printf '{not json' > \"$REPRORUN_JUDGE_OUT\"";
    let s = c.judge(&["--judge-cmd", broken]);
    assert_eq!(row(&s, PRE)["status"], "invalid_output", "{s}");
    // The next judging asks again, rather than keeping the failure for good.
    let o = c.work.run(&[
        "audit",
        "judge",
        "--db",
        "audit.db",
        "--json",
        "--judge-cmd",
        broken,
    ]);
    let again: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert!(
        stderr(&o).contains("judging 1 run(s) again"),
        "{}",
        stderr(&o)
    );
    assert_eq!(row(&again, PRE)["attempts"], 2, "{again}");
    // Another command is refused without --replace, and taken with it.
    let o = c.work.run(&[
        "audit",
        "judge",
        "--db",
        "audit.db",
        "--judge-cmd",
        PAPER_JUDGE,
    ]);
    expect_error(&o, "--replace");
    let o = c.work.run(&[
        "audit",
        "judge",
        "--db",
        "audit.db",
        "--json",
        "--replace",
        "--judge-cmd",
        PAPER_JUDGE,
    ]);
    let s: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert!(stderr(&o).contains("--replace: forgot"), "{}", stderr(&o));
    let pre = row(&s, PRE);
    assert_eq!(pre["status"], "ok", "{s}");
    assert!(
        pre["reason"].as_str().unwrap_or("").contains("derived"),
        "{s}"
    );
    // The pairs were derived: the first finding semantic, every other pair none.
    let labels = c.labels("cmd");
    assert!(!labels.is_empty());
    for (_, _, _, index, label) in &labels {
        assert_eq!(
            label,
            if *index == 0 { "semantic" } else { "none" },
            "{labels:?}"
        );
    }
}

#[test]
fn a_judge_sees_only_its_task_and_reaches_no_network() {
    require!(Need::Root);
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = other.local_addr().unwrap().port();
    other.set_nonblocking(true).unwrap();
    let c = Corpus::new();
    c.audit(1, false);
    let probes = [
        ("corpus", format!("cat {}/corpus.json", c.dir().display())),
        ("db", format!("ls {}/audit.db", c.work.path().display())),
        ("repo", "ls /work/repo".to_string()),
        ("write-task", "touch /work/task.json".to_string()),
        (
            "network",
            format!("curl -sf -m 5 --noproxy '*' http://127.0.0.1:{port}/"),
        ),
    ];
    let mut script = String::from("test -f /work/task.json && grep -q HIDDEN /work/task.json && echo has-task; grep -q pair_labels \"$REPRORUN_JUDGE_PROMPT\" && echo has-prompt; ");
    for (name, cmd) in &probes {
        script.push_str(&format!(
            "if {cmd} >/dev/null 2>&1; then echo LEAK-{name}; else echo blocked-{name}; fi; "
        ));
    }
    let s = c.judge(&["--judge-cmd", &script]);
    let pre = row(&s, PRE);
    assert_eq!(pre["status"], "no_output", "{s}");
    assert_eq!(pre["attempts"], 1, "{s}");
    let out = c.log(pre["stdout_sha256"].as_str().unwrap());
    for line in ["has-task", "has-prompt"] {
        assert!(out.lines().any(|l| l == line), "{line}: {out}");
    }
    for (name, _) in &probes {
        assert!(
            out.lines().any(|l| l == format!("blocked-{name}")),
            "{name}: {out}"
        );
    }
    assert!(other.accept().is_err(), "the host service was reached");
}

#[test]
fn a_killed_judging_resumes_and_judges_each_run_once() {
    require!(Need::Root);
    let c = Corpus::new();
    c.audit(3, false);
    let judge = "sleep 1; echo no answer";
    let mut child = c
        .work
        .cmd(&["audit", "judge", "--db", "audit.db", "--judge-cmd", judge])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let recorded = || {
        c.db()
            .query_row("SELECT count(*) FROM judgments", [], |r| r.get::<_, u32>(0))
            .unwrap_or(0)
    };
    assert!(wait_until(Duration::from_secs(60), || recorded() >= 1));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = child.wait();
    let s = c.judge(&["--judge-cmd", judge]);
    assert_eq!(s["judgments"], 6, "{s}");
    assert_eq!(s["by_status"]["no_output"], 6, "{s}");
}

#[test]
fn sample_and_agreement_end_to_end() {
    require!(Need::Root);
    let c = Corpus::new();
    c.audit(2, false);
    c.judge(&[]);
    let sample = |seed: &str| {
        let o = c.work.run(&[
            "audit",
            "sample",
            "--db",
            "audit.db",
            "--judge",
            "builtin",
            "--per-label",
            "3",
            "--out",
            "pairs.jsonl",
            "--seed",
            seed,
        ]);
        expect_code(&o, 0);
        let said = stderr(&o);
        assert!(
            said.contains("of 6 distinct pairs (12 labelled over the repeats)"),
            "{said}"
        );
        std::fs::read_to_string(c.work.path().join("pairs.jsonl")).unwrap()
    };
    let pairs = sample("7");
    assert_eq!(pairs, sample("7"), "the same seed draws the same pairs");
    let rows: Vec<serde_json::Value> = pairs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 12 pairs in the study, but its two repeats gave the same findings: 6 distinct pairs,
    // 2 exact and 4 none, each drawn once (from the first repeat); at most 3 of each label.
    assert_eq!(rows.len(), 5, "{pairs}");
    assert!(rows.iter().all(|r| r["repeat"] == 0), "{pairs}");
    assert!(
        !pairs.contains("\"label\""),
        "the judge's label is hidden: {pairs}"
    );
    assert!(rows
        .iter()
        .all(|r| r["finding"]["finding_id"].is_string() && r["issue_title"].is_string()));
    let key = std::fs::read_to_string(c.work.path().join("pairs.jsonl.key")).unwrap();
    // Hand labels: the judge's, but one flipped to "semantic".
    let mut human = String::new();
    for (i, line) in key.lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if i == 0 {
            v["label"] = "semantic".into();
        }
        human.push_str(&format!("{v}\n"));
    }
    // A pair named by its coordinates counts as well.
    let first = &rows[0];
    let judge_first: serde_json::Value = serde_json::from_str(key.lines().next().unwrap()).unwrap();
    human.push_str(&format!(
        "{}\n",
        serde_json::json!({"group_id": first["group_id"], "repeat": first["repeat"],
            "hidden_issue_id": first["hidden_issue_id"], "finding_index": first["finding_index"],
            "label": "none"})
    ));
    std::fs::write(c.work.path().join("human.jsonl"), &human).unwrap();
    let o = c.work.run(&[
        "audit",
        "agreement",
        "--db",
        "audit.db",
        "--judge",
        "builtin",
        "--labels",
        "human.jsonl",
        "--json",
    ]);
    // The coordinates repeat the first pair: refused as labelled twice.
    expect_error(&o, "line 1 already");
    let human: String = human
        .lines()
        .take(rows.len())
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(c.work.path().join("human.jsonl"), &human).unwrap();
    let o = c.work.run(&[
        "audit",
        "agreement",
        "--db",
        "audit.db",
        "--judge",
        "builtin",
        "--labels",
        "human.jsonl",
        "--json",
    ]);
    let a: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    let a = &a["agreement"];
    assert_eq!(a["pairs"], 5, "{a}");
    assert_eq!(a["agree"], 4, "{a}");
    // The study's distinct pairs per judge label, what the sample was drawn from.
    assert_eq!(a["population"], serde_json::json!([2, 0, 4]), "{a}");
    assert!(a["weighted_recall"].is_number(), "{a}");
    let judged = judge_first["label"].as_str().unwrap();
    let col = ["exact", "semantic", "none"]
        .iter()
        .position(|l| *l == judged)
        .unwrap();
    assert_eq!(a["confusion"][1][col], 1, "the flipped pair: {a}");
    // Text form, and an unknown pair.
    let o = c.work.run(&[
        "audit",
        "agreement",
        "--db",
        "audit.db",
        "--judge",
        "builtin",
        "--labels",
        "human.jsonl",
    ]);
    let text = expect_code(&o, 0);
    assert!(text.contains("raw agreement"), "{text}");
    assert!(
        text.contains(
            "weighted to the study's 6 distinct pairs (judge: exact 2, semantic 0, none 4)"
        ),
        "{text}"
    );
    std::fs::write(
        c.work.path().join("bad.jsonl"),
        "{\"pair_id\": \"0000\", \"label\": \"none\"}\n",
    )
    .unwrap();
    let o = c.work.run(&[
        "audit",
        "agreement",
        "--db",
        "audit.db",
        "--judge",
        "builtin",
        "--labels",
        "bad.jsonl",
    ]);
    expect_error(&o, "pair 0000");
}

#[test]
fn bad_judge_input_is_one_line() {
    let c = Corpus::new();
    let o = c.work.run(&["audit", "judge", "--db", "missing.db"]);
    expect_error(&o, "missing.db");
    for (args, needle) in [
        (vec!["--judge", "cmd"], "--judge-cmd"),
        (vec!["--judge", "codex", "--judge-cmd", "x"], "--judge-cmd"),
        (
            vec!["--pass-env", "REPRORUN_TEST_SURELY_UNSET"],
            "REPRORUN_TEST_SURELY_UNSET",
        ),
    ] {
        let mut a = vec!["audit", "judge", "--db", "missing.db"];
        a.extend(args);
        expect_error(&c.work.run(&a), needle);
    }
    let o = c.work.run(&[
        "audit",
        "sample",
        "--db",
        "missing.db",
        "--judge",
        "builtin",
        "--out",
        "x",
    ]);
    expect_error(&o, "missing.db");
}
