//! `reprorun audit plan|work|merge`: `audit run` on a batch cluster, driven here by a local
//! loop over the chunks (what Slurm's array tasks do), on a corpus written by hand. The
//! merged study judges and measures exactly as the one `audit run` made; a second result of
//! a run goes to attempts, merging again adds nothing, a tampered result is refused.

use std::path::{Path, PathBuf};

use crate::common::audit::{agent_writing, Corpus, FINDINGS};
use crate::common::*;

impl Corpus {
    /// A scripted agent: [`FINDINGS`] on snapshots whose main.py imports cv2, none elsewhere.
    fn agent() -> String {
        agent_writing(FINDINGS, true)
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let o = self.work.run(args);
        serde_json::from_str(&expect_code(&o, 0)).unwrap()
    }

    /// `audit judge` (built-in) and `audit metrics --json` of `db`.
    fn judged_metrics(&self, db: &str) -> serde_json::Value {
        expect_code(&self.work.run(&["audit", "judge", "--db", db]), 0);
        self.json(&["audit", "metrics", "--db", db, "--json", "--seed", "3"])
    }

    fn chunks(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.work.path().join("tasks/chunks"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    fn work_chunk(&self, chunk: &Path) {
        let o = self.work.run(&[
            "audit",
            "work",
            "--tasks",
            "tasks",
            "--chunk",
            chunk.to_str().unwrap(),
            "--results",
            "results",
        ]);
        expect_code(&o, 0);
    }

    fn merge(&self) -> serde_json::Value {
        self.json(&[
            "audit",
            "merge",
            "--tasks",
            "tasks",
            "--results",
            "results",
            "--db",
            "cl.db",
            "--json",
        ])
    }

    fn runs(&self, db: &str) -> Vec<(String, u32, String, Option<String>)> {
        let db = rusqlite::Connection::open(self.work.path().join(db)).unwrap();
        let mut st = db
            .prepare("SELECT group_id, repeat, status, findings_sha256 FROM runs ORDER BY 1, 2")
            .unwrap();
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap();
        rows.map(Result::unwrap).collect()
    }
}

#[test]
fn plan_work_merge_records_the_study_audit_run_records() {
    require!(Need::Root);
    let c = Corpus::new();
    let agent = Corpus::agent();
    let common = [
        "--corpus",
        "corpus",
        "--agent-cmd",
        &agent,
        "--repeats",
        "2",
    ];
    let mut run = vec!["audit", "run", "--db", "run.db"];
    run.extend_from_slice(&common);
    expect_code(&c.work.run(&run), 0);

    let mut plan = vec![
        "audit", "plan", "--db", "cl.db", "--out", "tasks", "--chunk", "1",
    ];
    plan.extend_from_slice(&common);
    let o = c.work.run(&plan);
    assert!(
        expect_code(&o, 0).contains("4 runs in 4 chunks"),
        "{}",
        stdout(&o)
    );
    for f in ["submit.sh", "task.sh", "merge.sh"] {
        let s = std::fs::read_to_string(c.work.path().join("tasks").join(f)).unwrap();
        assert!(s.contains(" audit "), "{f}: {s}");
    }
    let chunks = c.chunks();
    assert_eq!(chunks.len(), 4);
    for ch in &chunks {
        c.work_chunk(ch);
    }
    // A chunk run again finds its results there and makes nothing.
    let o = c.work.run(&[
        "audit",
        "work",
        "--tasks",
        "tasks",
        "--chunk",
        chunks[0].to_str().unwrap(),
        "--results",
        "results",
    ]);
    assert!(
        stderr(&o).contains("0 run(s) made, 1 already done"),
        "{}",
        stderr(&o)
    );
    assert!(
        !c.work.path().join("cl.db").exists(),
        "work never opens the database"
    );

    let m = c.merge();
    assert_eq!(
        (m["inserted"].as_u64(), m["recorded"].as_u64()),
        (Some(4), Some(4)),
        "{m}"
    );
    assert_eq!(m["missing_chunks"], serde_json::json!([]));
    // The same runs, findings and all.
    assert_eq!(c.runs("cl.db"), c.runs("run.db"));
    assert!(
        c.runs("cl.db").iter().any(|r| r.3.is_some()),
        "findings recorded"
    );
    assert_eq!(c.judged_metrics("cl.db"), c.judged_metrics("run.db"));

    // A requeued task's second result of a run: an attempt, never a second run.
    let runs = c.work.path().join("results/runs");
    let first = runs.join(
        std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .min()
            .unwrap(),
    );
    let kept = std::fs::read(&first).unwrap();
    std::fs::remove_file(&first).unwrap();
    for ch in &chunks {
        c.work_chunk(ch);
    }
    let again = first.with_extension("requeued.json");
    std::fs::write(&again, kept).unwrap();
    let m = c.merge();
    assert_eq!(
        (
            m["inserted"].as_u64(),
            m["attempts"].as_u64(),
            m["already"].as_u64()
        ),
        (Some(0), Some(1), Some(4)),
        "{m}"
    );
    let m = c.merge();
    assert_eq!(
        (
            m["inserted"].as_u64(),
            m["attempts"].as_u64(),
            m["already"].as_u64()
        ),
        (Some(0), Some(0), Some(5)),
        "merging again adds nothing: {m}"
    );
    assert_eq!(c.runs("cl.db").len(), 4);

    // A tampered result: one line, nothing merged.
    let text = std::fs::read_to_string(&again).unwrap();
    std::fs::write(&again, text.replace("\"repeat\": 0", "\"repeat\": 1")).unwrap();
    let o = c.work.run(&[
        "audit",
        "merge",
        "--tasks",
        "tasks",
        "--results",
        "results",
        "--db",
        "cl.db",
    ]);
    expect_error(&o, "refused");
    assert_eq!(stderr(&o).trim().lines().count(), 1, "{}", stderr(&o));
}

#[test]
fn merge_refuses_a_database_of_another_configuration() {
    require!(Need::Root);
    let c = Corpus::new();
    let agent = Corpus::agent();
    expect_code(
        &c.work.run(&[
            "audit",
            "run",
            "--db",
            "cl.db",
            "--corpus",
            "corpus",
            "--agent-cmd",
            "true",
        ]),
        0,
    );
    expect_code(
        &c.work.run(&[
            "audit",
            "plan",
            "--db",
            "cl.db",
            "--corpus",
            "corpus",
            "--agent-cmd",
            &agent,
            "--out",
            "tasks",
        ]),
        0,
    );
    for ch in c.chunks() {
        c.work_chunk(&ch);
    }
    let o = c.work.run(&[
        "audit",
        "merge",
        "--tasks",
        "tasks",
        "--results",
        "results",
        "--db",
        "cl.db",
    ]);
    expect_code(&o, 125);
    assert_eq!(c.runs("cl.db").len(), 2, "nothing merged");
}

/// Each chunk of `tasks` through `audit work`, then `audit merge` into `db`.
fn work_and_merge(c: &Corpus, tasks: &str, results: &str, db: &str) -> serde_json::Value {
    let mut chunks: Vec<PathBuf> = std::fs::read_dir(c.work.path().join(tasks).join("chunks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    chunks.sort();
    for ch in &chunks {
        let o = c.work.run(&[
            "audit",
            "work",
            "--tasks",
            tasks,
            "--chunk",
            ch.to_str().unwrap(),
            "--results",
            results,
        ]);
        expect_code(&o, 0);
    }
    c.json(&[
        "audit",
        "merge",
        "--tasks",
        tasks,
        "--results",
        results,
        "--db",
        db,
        "--json",
    ])
}

#[test]
fn judge_plan_work_merge_judges_as_audit_judge_does() {
    require!(Need::Root);
    let c = Corpus::new();
    let agent = Corpus::agent();
    let common = [
        "--corpus",
        "corpus",
        "--agent-cmd",
        &agent,
        "--repeats",
        "2",
    ];
    let mut run = vec!["audit", "run", "--db", "run.db"];
    run.extend_from_slice(&common);
    expect_code(&c.work.run(&run), 0);
    let expected = c.judged_metrics("run.db");

    let mut plan = vec!["audit", "plan", "--db", "cl.db", "--out", "tasks"];
    plan.extend_from_slice(&common);
    expect_code(&c.work.run(&plan), 0);
    let m = work_and_merge(&c, "tasks", "results", "cl.db");
    assert_eq!(m["inserted"].as_u64(), Some(4), "{m}");

    let jplan = [
        "audit",
        "judge-plan",
        "--db",
        "cl.db",
        "--out",
        "jtasks",
        "--results",
        "jresults",
        "--chunk",
        "1",
    ];
    let o = c.work.run(&jplan);
    assert!(
        expect_code(&o, 0).contains("4 judgings in 4 chunks"),
        "{}",
        stdout(&o)
    );
    let m = work_and_merge(&c, "jtasks", "jresults", "cl.db");
    assert_eq!(
        (m["inserted"].as_u64(), m["recorded"].as_u64()),
        (Some(4), Some(4)),
        "{m}"
    );
    assert_eq!(m["missing_chunks"], serde_json::json!([]));
    let got = c.json(&["audit", "metrics", "--db", "cl.db", "--json", "--seed", "3"]);
    assert_eq!(got, expected);

    // A second judging of a judged run is an attempt; merging again adds nothing.
    let runs = c.work.path().join("jresults/runs");
    let name = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .min()
        .unwrap();
    let text = std::fs::read_to_string(runs.join(&name)).unwrap();
    std::fs::write(
        runs.join(name.replace(".json", ".requeued.json")),
        text.replace("\"finished_at\": ", "\"finished_at\": 1"),
    )
    .unwrap();
    let merge = [
        "audit",
        "merge",
        "--tasks",
        "jtasks",
        "--results",
        "jresults",
        "--db",
        "cl.db",
        "--json",
    ];
    let m = c.json(&merge);
    assert_eq!(
        (
            m["inserted"].as_u64(),
            m["attempts"].as_u64(),
            m["already"].as_u64()
        ),
        (Some(0), Some(1), Some(4)),
        "{m}"
    );
    let m = c.json(&merge);
    assert_eq!(
        (m["inserted"].as_u64(), m["attempts"].as_u64()),
        (Some(0), Some(0)),
        "{m}"
    );
    assert_eq!(
        c.json(&["audit", "metrics", "--db", "cl.db", "--json", "--seed", "3"]),
        expected
    );

    // Nothing left to judge: an empty plan.
    let o = c.work.run(&[
        "audit",
        "judge-plan",
        "--db",
        "cl.db",
        "--out",
        "jtasks2",
        "--results",
        "jresults2",
    ]);
    assert!(
        expect_code(&o, 0).starts_with("0 judgings"),
        "{}",
        stdout(&o)
    );

    // A tampered judgment: one line, nothing merged.
    std::fs::write(
        runs.join(&name),
        text.replace("\"exact\"", "\"none\"")
            .replace("\"semantic\"", "\"none\"")
            + " ",
    )
    .unwrap();
    let o = c.work.run(&merge[..8]);
    expect_error(&o, "refused");
}

/// `TASKS/submit.sh --wait` on the test's one-node Slurm; the merge job's output.
fn submit(c: &Corpus, slurm: &crate::cluster::Slurm, tasks: &str, results: &str) -> String {
    let out = std::process::Command::new("timeout")
        .args(["120", &format!("{tasks}/submit.sh"), "--wait"])
        .current_dir(c.work.path())
        .env("SLURM_CONF", slurm.conf())
        .env("REPRORUN_SBATCH_TIMEOUT", "100")
        .env_remove("REPRORUN_ISOLATION")
        .output()
        .unwrap();
    let logs = std::fs::read_dir(c.work.path().join(results).join("slurm"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    assert!(
        out.status.success(),
        "submit.sh --wait: {}{}\n{logs}",
        stdout(&out),
        stderr(&out)
    );
    logs
}

#[test]
fn a_one_node_slurm_runs_and_judges_the_audit() {
    let slurm = match crate::cluster::Slurm::start() {
        Ok(s) => s,
        Err(why) => skip!("Slurm cannot be started here: {why}"),
    };
    let c = Corpus::new();
    let agent = Corpus::agent();
    let common = [
        "--corpus",
        "corpus",
        "--agent-cmd",
        &agent,
        "--repeats",
        "2",
    ];
    let mut run = vec!["audit", "run", "--db", "run.db"];
    run.extend_from_slice(&common);
    expect_code(&c.work.run(&run), 0);
    let expected = c.judged_metrics("run.db");

    let mut plan = vec![
        "audit",
        "plan",
        "--db",
        "cl.db",
        "--out",
        "tasks",
        "--chunk",
        "1",
        "--sbatch-args",
        "--partition=debug",
    ];
    plan.extend_from_slice(&common);
    expect_code(&c.work.run(&plan), 0);
    let logs = submit(&c, &slurm, "tasks", "results");
    assert!(logs.contains("merged 4 new run(s), 0 attempt(s)"), "{logs}");
    let o = c.work.run(&[
        "audit",
        "judge-plan",
        "--db",
        "cl.db",
        "--out",
        "jtasks",
        "--results",
        "jresults",
        "--sbatch-args",
        "--partition=debug",
    ]);
    expect_code(&o, 0);
    let logs = submit(&c, &slurm, "jtasks", "jresults");
    assert!(logs.contains("merged 4 new judgment(s)"), "{logs}");
    let got = c.json(&["audit", "metrics", "--db", "cl.db", "--json", "--seed", "3"]);
    assert_eq!(got, expected);
    let db = rusqlite::Connection::open(c.work.path().join("cl.db")).unwrap();
    let jobs: Vec<String> = db
        .prepare("SELECT job FROM run_hosts")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(jobs.len(), 4);
    assert!(jobs.iter().all(|j| j.starts_with("slurm:")), "{jobs:?}");
}
