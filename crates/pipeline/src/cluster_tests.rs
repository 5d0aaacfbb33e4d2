use super::*;

#[test]
fn coverage_counts_recorded_units_and_lists_each_missing_chunk_once() {
    let c = coverage([(0, true), (1, false), (1, false), (2, true), (3, false)]);
    assert_eq!((c.recorded, c.planned), (2, 5));
    assert_eq!(c.missing_chunks, vec![1, 3]);
    assert_eq!(coverage([]), Coverage::default());
}

#[test]
fn a_result_name_names_its_unit_or_an_attempt_of_it() {
    assert!(names_unit("a.1.json", "a.1"));
    assert!(names_unit("a.1.slurm_7_1.99.json", "a.1"));
    assert!(!names_unit("a.10.json", "a.1"));
    assert!(!names_unit("b.1.json", "a.1"));
}

#[test]
fn a_log_dir_is_content_addressed_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let logs = LogDir(dir.path().join("logs"));
    let d = logs.put(b"hello").unwrap();
    assert_eq!(d, sha256_hex(b"hello"));
    assert_eq!(logs.put(b"hello").unwrap(), d);
    assert_eq!(logs.check(&d).unwrap(), b"hello");
    assert!(logs
        .check("../etc/passwd")
        .unwrap_err()
        .contains("not a sha256"));
    assert!(logs.check(&sha256_hex(b"x")).is_err());
    std::fs::write(dir.path().join("logs").join(&d), b"bye").unwrap();
    assert!(logs.check(&d).unwrap_err().contains("does not match"));
}

#[test]
fn result_names_skip_temporaries_and_a_missing_directory() {
    let dir = tempfile::tempdir().unwrap();
    assert!(result_names(dir.path()).unwrap().is_empty());
    write_result(dir.path(), "k", b"1", "local:1").unwrap();
    write_result(dir.path(), "k", b"2", "local:1").unwrap();
    std::fs::write(dir.path().join("runs/.k.x.tmp"), b"").unwrap();
    let names = result_names(dir.path()).unwrap();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], "k.json");
    assert!(names[1].starts_with("k.local_1."), "{names:?}");
}

#[test]
fn scripts_run_the_pipeline_they_are_written_for() {
    let s = Scripts {
        pipeline: "audit",
        tasks: Path::new("/t's"),
        results: Path::new("/r"),
        db: Path::new("/d.db"),
        reprorun: Path::new("/bin/reprorun"),
    };
    assert!(s.task().contains("\"$REPRORUN\" audit work --tasks"));
    assert!(s
        .merge()
        .contains("audit merge --tasks '/t'\\''s' --results '/r' --db '/d.db'"));
    assert!(s.submit(&[], "").contains("reprorun audit plan"));
}

/// Writes an executable `name` into `dir`.
fn exe_file(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_one_chunk_plan_submits_one_task_that_merges_and_no_merge_job() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, tasks, log) = (
        dir.path().join("bin"),
        dir.path().join("t"),
        dir.path().join("log"),
    );
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&tasks).unwrap();
    let logged = format!(
        "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> '{}'\n",
        log.display()
    );
    // sbatch prints a job id; scontrol and the program `REPRORUN` names only log their calls.
    exe_file(&bin, "sbatch", &format!("{logged}echo '7;cluster'\n"));
    exe_file(&bin, "scontrol", &logged);
    exe_file(
        &bin,
        "reprorun",
        &format!("{logged}[ \"$2\" != work ] || exit \"${{WORK_RC:-0}}\"\n"),
    );
    let s = Scripts {
        pipeline: "reproduce",
        tasks: &tasks,
        results: &dir.path().join("r"),
        db: &dir.path().join("d.db"),
        reprorun: &bin.join("reprorun"),
    };
    let one = ChunkRef {
        index: 0,
        units: 3,
        sha256: String::new(),
        begin_s: 0,
    };
    s.write(std::slice::from_ref(&one), "--partition=p")
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg(tasks.join("submit.sh"))
        .arg("--wait")
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "7;cluster\n");
    let calls = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    // One sbatch, of the one task with the caller's arguments; no scontrol, no merge job.
    assert_eq!(calls.len(), 1, "{calls:#?}");
    for part in [
        "sbatch --parsable --job-name=reprorun-work --array=0-0 --requeue --signal=B:TERM@120",
        "REPRORUN_CHUNK_OFFSET=0,REPRORUN_MERGE_IN_TASK=1 --partition=p --wait",
    ] {
        assert!(calls[0].contains(part), "{}", calls[0]);
    }
    // The task: work, then merge; its status is the first failure.
    for (work_rc, code, merged) in [("0", 0, true), ("3", 3, true)] {
        std::fs::remove_file(&log).unwrap();
        let status = std::process::Command::new("sh")
            .arg(tasks.join("task.sh"))
            .env("PATH", &path)
            .env("SLURM_ARRAY_TASK_ID", "0")
            .env("REPRORUN_MERGE_IN_TASK", "1")
            .env("WORK_RC", work_rc)
            .env_remove("REPRORUN")
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(code));
        let calls = std::fs::read_to_string(&log).unwrap();
        let calls: Vec<&str> = calls.lines().collect();
        assert!(
            calls[0].starts_with("reprorun reproduce work --tasks"),
            "{calls:#?}"
        );
        assert_eq!(
            calls.len() == 2 && calls[1].starts_with("reprorun reproduce merge"),
            merged
        );
    }
    // A task of a plan with a merge job does not merge.
    std::fs::remove_file(&log).unwrap();
    let status = std::process::Command::new("sh")
        .arg(tasks.join("task.sh"))
        .env("PATH", &path)
        .env("SLURM_ARRAY_TASK_ID", "0")
        .env_remove("REPRORUN_MERGE_IN_TASK")
        .env_remove("REPRORUN")
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);
    // Two chunks: MaxArraySize asked for, and a merge job after the array.
    std::fs::remove_file(&log).unwrap();
    let two = [one.clone(), ChunkRef { index: 1, ..one }];
    s.write(&two, "").unwrap();
    let out = std::process::Command::new("sh")
        .arg(tasks.join("submit.sh"))
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.starts_with("scontrol show config\n"), "{calls}");
    assert!(calls.contains("--job-name=reprorun-merge"), "{calls}");
}
