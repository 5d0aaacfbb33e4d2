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
