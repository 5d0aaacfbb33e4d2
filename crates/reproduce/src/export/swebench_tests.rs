use super::*;

fn inst(id: &str, patch: &str) -> Instance {
    Instance {
        instance_id: id.into(),
        repo: "o/r".into(),
        repo_path: "/repo".into(),
        base_commit: "abc".into(),
        test_patch: String::new(),
        model_patch: patch.into(),
        model_name: "org/model-1".into(),
        fail_to_pass: vec!["tests/test_a.py::TestX::test_new[a.b-1]".into()],
        pass_to_pass: vec!["tests/test_a.py::test_old".into()],
        test_cmd: "pytest".into(),
        image: None,
        rootfs: None,
        mirror: None,
        cassette: None,
        bench_date: 0,
        recorded_resolved: true,
    }
}

fn row(store: &Store, id: &str, resolved: bool, tests: &str, infra: Option<Infra>) -> RunRow {
    RunRow {
        instance_id: id.into(),
        arm: Arm::Shim,
        idx: 0,
        resolved,
        infra,
        exit_code: 0,
        wall_ms: 10,
        started_at: 5,
        signature: "s".into(),
        evidence: vec![],
        apply: "model=git-apply test=git-apply".into(),
        tests: tests.into(),
        stdout_sha256: store.put_log(format!("PASSED {id}\n").as_bytes()).unwrap(),
        stderr_sha256: store.put_log(b"").unwrap(),
        junit_sha256: None,
        error: None,
        env: None,
    }
}

/// JUnit's dotted names, as a run stores them when pytest wrote its XML.
const BOTH_PASS: &str =
    r#"{"tests.test_a.TestX.test_new[a.b-1]": "passed", "tests.test_a.test_old": "passed"}"#;
const NEW_FAILS: &str =
    r#"{"tests.test_a.TestX.test_new[a.b-1]": "failed", "tests/test_a.py::test_old": "passed"}"#;
const OTHERS_ONLY: &str = r#"{"tests/test_b.py::test_other": "passed"}"#;

fn study() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db"), true).unwrap();
    store.set_meta("started_at", "1796640519").unwrap();
    let insts = [
        inst("o__r-1", "P1"),
        inst("o__r-2", "P2"),
        inst("o__r-3", "P3"),
        inst("o__r-4", "P4"),
        inst("o__r-5", ""),
        inst("o__r-6", "P6"),
    ];
    store.register(&insts).unwrap();
    record_inputs(&store, &insts).unwrap();
    for r in [
        row(&store, "o__r-1", true, BOTH_PASS, None),
        row(&store, "o__r-2", false, NEW_FAILS, None),
        row(&store, "o__r-3", false, OTHERS_ONLY, None),
        row(&store, "o__r-4", false, "{}", Some(Infra::PatchApply)),
        row(&store, "o__r-5", false, "{}", Some(Infra::PatchApply)),
    ] {
        store.insert(&r).unwrap();
    }
    (dir, store)
}

#[test]
fn runs_become_swebench_classes_and_reports_with_node_ids() {
    let (dir, store) = study();
    let e = resolve(&store, &dir.path().join("s.db"), Arm::Shim, 0).unwrap();
    assert_eq!(e.run_id, "reprorun-2026-12-07T104839Z");
    let class: Vec<(&str, Class)> = e
        .instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i.class))
        .collect();
    assert_eq!(
        class,
        [
            ("o__r-1", Class::Resolved),
            ("o__r-2", Class::Unresolved),
            // None of the listed tests in the run: an error, not an outcome.
            ("o__r-3", Class::Error),
            ("o__r-4", Class::Error),
            ("o__r-5", Class::EmptyPatch),
        ]
    );
    assert_eq!(e.not_run, ["o__r-6"]);
    let r = e.instances[1].report.as_ref().unwrap();
    assert_eq!(
        r["o__r-2"]["tests_status"]["FAIL_TO_PASS"]["failure"],
        json!(["tests/test_a.py::TestX::test_new[a.b-1]"]),
        "node ids, not JUnit's dotted names"
    );
    assert_eq!(
        r["o__r-2"]["tests_status"]["PASS_TO_PASS"]["success"],
        json!(["tests/test_a.py::test_old"])
    );
    assert_eq!(r["o__r-2"]["resolved"], json!(false));
    assert!(e.instances[2].report.is_none() && e.instances[3].report.is_none());
    let out = String::from_utf8(e.instances[3].test_output.clone().unwrap()).unwrap();
    assert!(
        out.starts_with(">>>>> Patch Apply Failed\n>>>>> Start Test Output\n"),
        "{out}"
    );
    let out = String::from_utf8(e.instances[0].test_output.clone().unwrap()).unwrap();
    assert_eq!(
        out,
        ">>>>> Start Test Output\nPASSED o__r-1\n\n>>>>> End Test Output\n"
    );

    let s = &e.summaries()["org__model-1"];
    assert_eq!(s["resolved_ids"], json!(["o__r-1"]));
    assert_eq!(s["unresolved_ids"], json!(["o__r-2"]));
    assert_eq!(s["error_ids"], json!(["o__r-3", "o__r-4", "o__r-6"]));
    assert_eq!(s["empty_patch_ids"], json!(["o__r-5"]));
    assert_eq!(s["completed_ids"], json!(["o__r-1", "o__r-2"]));
    assert_eq!(
        (
            s["total_instances"].clone(),
            s["submitted_instances"].clone(),
            s["error_instances"].clone()
        ),
        (json!(6), json!(6), json!(3))
    );
}

#[test]
fn the_layout_is_swebenchs_and_an_old_report_does_not_survive() {
    let (dir, store) = study();
    let e = resolve(&store, &dir.path().join("s.db"), Arm::Shim, 0).unwrap();
    let out = dir.path().join("export");
    let base = out.join("logs/run_evaluation/reprorun-2026-12-07T104839Z/org__model-1");
    std::fs::create_dir_all(base.join("o__r-3")).unwrap();
    std::fs::write(base.join("o__r-3/report.json"), "{}").unwrap();
    let written = write(&e, &out).unwrap();
    assert_eq!(
        written,
        [out.join("org__model-1.reprorun-2026-12-07T104839Z.json")]
    );
    for f in ["patch.diff", "test_output.txt", "report.json"] {
        assert!(base.join("o__r-1").join(f).is_file(), "{f}");
    }
    assert_eq!(
        std::fs::read_to_string(base.join("o__r-1/patch.diff")).unwrap(),
        "P1"
    );
    assert!(!base.join("o__r-3/report.json").exists());
    assert!(base.join("o__r-3/test_output.txt").is_file());
    assert!(
        !base.join("o__r-5").exists(),
        "SWE-bench writes nothing for an empty patch"
    );
    // Another arm or run index is its own SWE-bench run.
    let e = resolve(&store, &dir.path().join("s.db"), Arm::NoShim, 2).unwrap();
    assert_eq!(e.run_id, "reprorun-2026-12-07T104839Z.no_shim.2");
}

#[test]
fn names_that_are_not_one_directory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db"), true).unwrap();
    store.register(&[inst("..", "P")]).unwrap();
    record_inputs(&store, &[inst("..", "P")]).unwrap();
    let e = resolve(&store, &dir.path().join("s.db"), Arm::Shim, 0).unwrap_err();
    assert!(
        e.to_string()
            .contains("instance id \"..\" cannot be a directory name"),
        "{e}"
    );
}

#[test]
fn the_error_hook_needs_every_listed_test_missing() {
    let tests: Tests = serde_json::from_str(NEW_FAILS).unwrap();
    assert!(!no_listed_test_found(
        &tests,
        &["tests/test_a.py::test_old"]
    ));
    assert!(no_listed_test_found(&tests, &["tests/test_a.py::gone"]));
    assert!(
        !no_listed_test_found(&tests, &[]),
        "no list: the exit status decides"
    );
}

#[test]
fn a_study_without_the_inputs_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db"), true).unwrap();
    let e = resolve(&store, &dir.path().join("s.db"), Arm::Shim, 0).unwrap_err();
    assert!(e.to_string().contains("predates SWE-bench's inputs"), "{e}");
}
