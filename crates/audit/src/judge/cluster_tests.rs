use super::*;
use crate::judgment::Label;

fn row(group: &str, repeat: u32) -> RunRow {
    RunRow {
        group_id: group.into(),
        repeat,
        status: "ok".into(),
        reason: None,
        exit_code: 0,
        wall_ms: 1,
        started_at: 0,
        n_findings: Some(0),
        findings_sha256: None,
        raw_sha256: None,
        stdout_sha256: String::new(),
        stderr_sha256: String::new(),
        input_tokens: 0,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
        cost_source: String::new(),
        network_sha256: None,
    }
}

/// A judging plan of two runs by `builtin` (one chunk each), held in memory.
fn tasks() -> Tasks {
    let mut units = BTreeMap::new();
    for (chunk, repeat) in [(0, 0), (1, 1)] {
        let u = Unit {
            key: key("g/1", repeat),
            row: row("g/1", repeat),
        };
        units.insert(u.key.clone(), (chunk, u));
    }
    Tasks {
        manifest: Manifest {
            format: MANIFEST_FORMAT.into(),
            reprorun_version: "0".into(),
            db: "/s.db".into(),
            results: "/r".into(),
            corpus: "/c".into(),
            judge: "builtin".into(),
            judge_fingerprint: "f".into(),
            judge_args: vec![],
            chunks: vec![],
        },
        digest: "d".repeat(64),
        units,
    }
}

/// A judging of run `g/1 #1` as `work` writes it (its task in `results/logs`).
fn shard(results: &Path, status: &str) -> Shard {
    let task = LogDir(results.join("logs")).put(b"{}").unwrap();
    Shard {
        format: SHARD_FORMAT.into(),
        manifest_sha256: "d".repeat(64),
        key: key("g/1", 1),
        chunk: 1,
        body: Body {
            judgment: Judgment {
                group_id: "g/1".into(),
                repeat: 1,
                judge: "builtin".into(),
                status: status.into(),
                reason: None,
                attempts: 1,
                task_sha256: task,
                result_sha256: None,
                stdout_sha256: None,
                stderr_sha256: None,
                input_tokens: 0,
                cached_input_tokens: 0,
                output_tokens: 0,
                cost_usd: None,
            },
            labels: vec![],
        },
        host: reprorun_pipeline::host::Host::current(),
        finished_at: 1,
    }
}

fn checked(t: &Tasks, results: &Path, s: &Shard) -> Result<Shard, String> {
    let text = serde_json::to_string(s).unwrap();
    check(t, results, &format!("{}.json", s.key), &text)
}

fn label(group: &str, judge: &str) -> PairLabel {
    PairLabel {
        group_id: group.into(),
        repeat: 1,
        judge: judge.into(),
        hidden_issue_id: "o/r#1".into(),
        finding_index: 0,
        label: Label::Exact,
    }
}

#[test]
fn a_judging_of_the_plan_passes() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path(), "skipped");
    assert_eq!(checked(&tasks(), dir.path(), &s).unwrap(), s);
}

#[test]
fn a_judging_by_another_judge_or_plan_or_of_an_unplanned_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = tasks();
    let mut s = shard(dir.path(), "skipped");
    s.body.judgment.judge = "codex".into();
    let e = checked(&t, dir.path(), &s).unwrap_err();
    assert!(e.contains("by codex, the plan's judge is builtin"), "{e}");

    let mut s = shard(dir.path(), "skipped");
    s.manifest_sha256 = "e".repeat(64);
    let e = checked(&t, dir.path(), &s).unwrap_err();
    assert!(e.contains("another plan"), "{e}");

    let mut s = shard(dir.path(), "skipped");
    s.body.judgment.repeat = 7;
    s.key = key("g/1", 7);
    let e = checked(&t, dir.path(), &s).unwrap_err();
    assert!(e.contains("unknown unit"), "{e}");
}

#[test]
fn labels_not_of_the_judgment_or_not_from_its_result_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = tasks();
    let mut s = shard(dir.path(), "skipped");
    s.body.labels = vec![label("g/2", "builtin")];
    let e = checked(&t, dir.path(), &s).unwrap_err();
    assert!(e.contains("a pair label is not of its judgment"), "{e}");

    // A judgment without a result has no labels; one claimed is forged.
    s.body.labels = vec![label("g/1", "builtin")];
    let e = checked(&t, dir.path(), &s).unwrap_err();
    assert!(e.contains("not the ones its result.json gives"), "{e}");
}

#[test]
fn a_judgment_whose_task_log_is_missing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = shard(dir.path(), "skipped");
    s.body.judgment.task_sha256 = "a".repeat(64);
    assert!(checked(&tasks(), dir.path(), &s).is_err());
}

#[test]
fn an_edited_judging_plan_is_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let e = match open(dir.path()) {
        Err(e) => e,
        Ok(_) => panic!("no manifest, yet opened"),
    };
    assert!(matches!(e, JudgeError::Tasks(_)), "{e}");
    assert!(e.to_string().contains("manifest.json"), "{e}");
    std::fs::write(dir.path().join("manifest.json"), "{\"format\": 1}").unwrap();
    let e = open(dir.path()).err().unwrap().to_string();
    assert!(e.contains("not a plan"), "{e}");
}
