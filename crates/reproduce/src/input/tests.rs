use super::*;

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        Files { dir }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn load(&self, inst: &str, preds: &str, d: &Defaults) -> Result<Input, InputError> {
        load(
            &self.write("i.jsonl", inst),
            &self.write("p.jsonl", preds),
            d,
        )
    }
}

const INST: &str = r#"{"instance_id": "a__b-1", "repo": "a/b", "base_commit": "abc123", "test_patch": "T", "FAIL_TO_PASS": "[\"t.py::f\"]", "PASS_TO_PASS": ["t.py::p"], "created_at": "2023-05-10T12:00:00Z", "repo_path": "repo", "test_cmd": "pytest", "recorded_resolved": true, "problem_statement": "ignored"}"#;
const PRED: &str = r#"{"instance_id": "a__b-1", "model_name_or_path": "m", "model_patch": "P"}"#;

#[test]
fn swe_bench_fields_are_read_as_they_are() {
    let f = Files::new();
    let input = f.load(INST, PRED, &Defaults::default()).unwrap();
    let i = &input.instances[0];
    assert_eq!(i.instance_id, "a__b-1");
    assert_eq!(
        i.fail_to_pass,
        vec!["t.py::f"],
        "a JSON list inside a string"
    );
    assert_eq!(i.pass_to_pass, vec!["t.py::p"]);
    assert_eq!(
        i.repo_path,
        f.dir.path().join("repo"),
        "relative to the instances file"
    );
    assert_eq!(i.bench_date, 1_683_720_000);
    assert_eq!((i.model_patch.as_str(), i.model_name.as_str()), ("P", "m"));
    assert!(i.recorded_resolved);
}

#[test]
fn a_json_array_of_instances_and_bench_date_win() {
    let f = Files::new();
    let inst = format!(
        "[{}]",
        INST.replace(
            "\"created_at\"",
            "\"bench_date\": \"2021-01-02\", \"created_at\""
        )
    );
    let input = load(
        &f.write("i.json", &inst),
        &f.write("p.jsonl", PRED),
        &Defaults::default(),
    )
    .unwrap();
    assert_eq!(input.instances[0].bench_date, 1_609_545_600);
}

#[test]
fn malformed_lines_are_reported_with_their_number() {
    let f = Files::new();
    let e = f
        .load(
            &format!("{INST}\n\n{{not json\n"),
            PRED,
            &Defaults::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("i.jsonl:3: malformed JSON: key must be a string at line 1 column 2"),
        "{e}"
    );
    let e = f
        .load(INST, &format!("{PRED}\n[1]\n"), &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("p.jsonl:2: not a JSON object"), "{e}");
}

#[test]
fn unknown_predictions_are_skipped_and_duplicates_refused() {
    let f = Files::new();
    let other = PRED.replace("a__b-1", "zz-9");
    let more = PRED.replace("a__b-1", "zz-10");
    // A predictions file often covers a whole benchmark, a study part of it.
    let input = f
        .load(
            INST,
            &format!("{PRED}\n{other}\n{more}\n"),
            &Defaults::default(),
        )
        .unwrap();
    assert_eq!(input.instances.len(), 1);
    assert_eq!(input.unknown_predictions, 2);
    let e = f
        .load(INST, &other, &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no instance has a prediction"), "{e}");
    let e = f
        .load(INST, &format!("{PRED}\n{PRED}\n"), &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("p.jsonl:2: a second prediction"), "{e}");
    let e = f
        .load(&format!("{INST}\n{INST}"), PRED, &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("i.jsonl:2: instance \"a__b-1\" appears twice"),
        "{e}"
    );
}

#[test]
fn instances_without_prediction_are_skipped_and_named() {
    let f = Files::new();
    let two = INST.replace("a__b-1", "a__b-2");
    let input = f
        .load(&format!("{INST}\n{two}\n"), PRED, &Defaults::default())
        .unwrap();
    assert_eq!(input.instances.len(), 1);
    assert_eq!(input.without_prediction, vec!["a__b-2"]);
}

#[test]
fn a_missing_repository_is_a_clear_error() {
    let f = Files::new();
    let e = f
        .load(
            &INST.replace("repo_path\": \"repo", "repo_path\": \"nowhere"),
            PRED,
            &Defaults::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("instance a__b-1: repository") && e.contains("nowhere does not exist"),
        "{e}"
    );
    let no_path = INST.replace(", \"repo_path\": \"repo\"", "");
    let e = f
        .load(&no_path, PRED, &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no repository: add \"repo_path\""), "{e}");
    // --repos DIR finds owner__name.
    std::fs::create_dir(f.dir.path().join("a__b")).unwrap();
    let d = Defaults {
        repos: Some(f.dir.path().to_path_buf()),
        ..Defaults::default()
    };
    let input = f.load(&no_path, PRED, &d).unwrap();
    assert_eq!(input.instances[0].repo_path, f.dir.path().join("a__b"));
}

#[test]
fn recorded_outcomes_come_from_a_report_json() {
    let f = Files::new();
    let no_rec = INST.replace(", \"recorded_resolved\": true", "");
    let e = f
        .load(&no_rec, PRED, &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no recorded outcome"), "{e}");
    let per_instance = f.write(
        "report.json",
        r#"{"a__b-1": {"resolved": false, "tests_status": {}}}"#,
    );
    let d = Defaults {
        recorded: Some(per_instance),
        ..Defaults::default()
    };
    assert!(
        !f.load(INST, PRED, &d).unwrap().instances[0].recorded_resolved,
        "the report wins"
    );
    let summary = f.write(
        "summary.json",
        r#"{"resolved_ids": ["a__b-1"], "unresolved_ids": []}"#,
    );
    let d = Defaults {
        recorded: Some(summary),
        ..Defaults::default()
    };
    assert!(f.load(&no_rec, PRED, &d).unwrap().instances[0].recorded_resolved);
    let field = no_rec.replace(
        "\"problem_statement\"",
        "\"recorded\": \"unresolved\", \"problem_statement\"",
    );
    assert!(
        !f.load(&field, PRED, &Defaults::default())
            .unwrap()
            .instances[0]
            .recorded_resolved
    );
}

#[test]
fn other_bad_fields() {
    let f = Files::new();
    for (from, to, want) in [
        (
            "\"base_commit\": \"abc123\"",
            "\"base_commit\": \"--upload-pack=x\"",
            "is not a revision",
        ),
        (
            "\"created_at\": \"2023-05-10T12:00:00Z\"",
            "\"created_at\": \"yesterday\"",
            "\"created_at\" \"yesterday\" is not a date",
        ),
        (
            "\"test_cmd\": \"pytest\"",
            "\"test_cmd\": \"  \"",
            "no test command",
        ),
        (
            "\"PASS_TO_PASS\": [\"t.py::p\"]",
            "\"PASS_TO_PASS\": [1]",
            "not a string",
        ),
        (
            "\"FAIL_TO_PASS\": \"[\\\"t.py::f\\\"]\"",
            "\"FAIL_TO_PASS\": \"t.py::f\"",
            "not a JSON array",
        ),
        (
            "\"repo_path\": \"repo\"",
            "\"repo_path\": \"repo\", \"mirror\": \"repo\"",
            "has no lock.json",
        ),
        (
            "\"repo_path\": \"repo\"",
            "\"repo_path\": \"repo\", \"image\": \"no-such-image:1\"",
            "image \"no-such-image:1\"",
        ),
        (
            "\"repo_path\": \"repo\"",
            "\"repo_path\": \"repo\", \"rootfs\": \"nowhere\"",
            "is not a directory",
        ),
        (
            "\"repo_path\": \"repo\"",
            "\"repo_path\": \"repo\", \"rootfs\": \"repo\", \"image\": \"x\"",
            "cannot both be set",
        ),
    ] {
        assert!(INST.contains(from), "{from}");
        // Offline: an image the store lacks is not pulled.
        let offline = Defaults {
            pull: images::PullPolicy::Never,
            ..Defaults::default()
        };
        let e = f
            .load(&INST.replace(from, to), PRED, &offline)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{to}: {e}");
    }
    let e = f
        .load(INST, "\n\n", &Defaults::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no records"), "{e}");
}

#[test]
fn swe_bench_dates() {
    assert_eq!(parse_when("2023-05-10 12:00:00"), Some(1_683_720_000));
    assert_eq!(
        parse_when("2023-05-10T12:00:00.123456Z"),
        Some(1_683_720_000)
    );
    assert_eq!(parse_when("2023-05-10"), Some(1_683_676_800));
    assert_eq!(parse_when("soon"), None);
}

#[test]
fn instance_ids_select_and_name_the_unknown() {
    let f = Files::new();
    let two = format!("{INST}\n{}", INST.replace("a__b-1", "a__b-2"));
    let preds = format!("{PRED}\n{}", PRED.replace("a__b-1", "a__b-2"));
    let d = Defaults {
        instance_ids: vec!["a__b-2".into()],
        ..Defaults::default()
    };
    let input = f.load(&two, &preds, &d).unwrap();
    let ids: Vec<&str> = input
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    assert_eq!(ids, ["a__b-2"]);
    assert_eq!(input.unknown_predictions, 1, "the other's prediction");
    let d = Defaults {
        instance_ids: vec!["a__b-2".into(), "x-1".into()],
        ..Defaults::default()
    };
    let e = f.load(&two, &preds, &d).unwrap_err().to_string();
    assert_eq!(e, "--instance-ids: x-1 not in the instances file");
}

#[test]
fn specs_give_the_test_command_by_repo_and_version() {
    let f = Files::new();
    let specs = f.write(
        "specs.json",
        r#"{"a/b": {"0.1": {"python": "3.9", "install": "pip install -e .", "test_cmd": "pytest -rA"}}}"#,
    );
    // As SWE-bench ships it: no test_cmd, a version (a string, or a number), the
    // environment's commit.
    let inst = INST
        .replace(
            "\"test_cmd\": \"pytest\", ",
            "\"version\": \"0.1\", \"environment_setup_commit\": \"abc\", ",
        )
        .replace(
            "\"test_patch\": \"T\"",
            "\"test_patch\": \"diff --git a/t.py b/t.py\\n\"",
        );
    let d = Defaults {
        specs: Some(specs.clone()),
        ..Defaults::default()
    };
    let input = f.load(&inst, PRED, &d).unwrap();
    assert_eq!(
        input.instances[0].test_cmd,
        "pip install -e .\npytest -rA 't.py'"
    );
    let number = inst.replace("\"0.1\"", "0.1");
    assert_eq!(
        f.load(&number, PRED, &d).unwrap().instances[0].test_cmd,
        input.instances[0].test_cmd
    );
    // Another version: an error naming it, unless --test-cmd stands in.
    let other = inst.replace("\"0.1\"", "\"0.2\"");
    let e = f.load(&other, PRED, &d).unwrap_err().to_string();
    assert!(
        e.contains("has no entry for \"a/b\" version \"0.2\"; or pass --test-cmd"),
        "{e}"
    );
    let d = Defaults {
        test_cmd: Some("make test".into()),
        ..d
    };
    assert_eq!(
        f.load(&other, PRED, &d).unwrap().instances[0].test_cmd,
        "make test"
    );
    // The instance's own test_cmd wins.
    assert_eq!(
        f.load(INST, PRED, &d).unwrap().instances[0].test_cmd,
        "pytest"
    );
}

#[test]
fn repos_finds_a_bundle() {
    let f = Files::new();
    std::fs::write(f.dir.path().join("a__b.bundle"), "").unwrap();
    let inst = INST.replace("\"repo_path\": \"repo\", ", "");
    let d = Defaults {
        repos: Some(f.dir.path().to_path_buf()),
        ..Defaults::default()
    };
    let input = f.load(&inst, PRED, &d).unwrap();
    assert_eq!(
        input.instances[0].repo_path,
        f.dir.path().join("a__b.bundle")
    );
}

/// `--instances DIR` (Harbor's task directories) with `--predictions gold`: each task's
/// record, its eval script's test command, its own patch as the prediction, and the
/// benchmark's validation (the gold patch resolves) as the recorded outcome.
#[test]
fn task_directories_with_gold_predictions() {
    let tasks = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../runtime-tests/fixtures/harbor-tasks"
    ));
    let f = Files::new();
    for name in ["pytoolz__toolz", "hashicorp__go-version"] {
        std::fs::create_dir(f.dir.path().join(name)).unwrap();
    }
    let d = Defaults {
        repos: Some(f.dir.path().to_path_buf()),
        // On the host's root: the tasks' Dockerfiles name images this test does not build.
        task_environment: tasks::TaskEnvironment::Host,
        ..Defaults::default()
    };
    let input = load(tasks, Path::new("gold"), &d).unwrap();
    assert_eq!(input.unknown_predictions, 0);
    let toolz = &input.instances[1];
    assert_eq!(toolz.instance_id, "pytoolz__toolz-603");
    assert_eq!(toolz.model_name, "gold");
    assert!(toolz
        .model_patch
        .starts_with("diff --git a/toolz/itertoolz.py"));
    assert!(toolz.recorded_resolved);
    assert_eq!(
        toolz.test_cmd,
        "python3 -m pytest -p no:cacheprovider -rA toolz/tests/test_itertoolz.py"
    );
    assert_eq!(input.instances[0].fail_to_pass, ["TestVersionEqual_nil"]);
    assert_eq!(toolz.repo_path, f.dir.path().join("pytoolz__toolz"));
    // gold with a JSON file of instances: the `patch` field; --recorded still wins.
    let inst = INST.replace("\"test_patch\"", "\"patch\": \"G\", \"test_patch\"");
    let i = &f.load(&inst, "", &d).map(|_| ()).err();
    assert!(i.is_some(), "an empty predictions file is no predictions");
    let input = load(&f.write("i.jsonl", &inst), Path::new("gold"), &d).unwrap();
    assert_eq!(input.instances[0].model_patch, "G");
    assert!(digest(Path::new("gold")).is_ok());
    assert_ne!(
        digest(tasks).unwrap(),
        digest(&tasks.join("pytoolz__toolz-603")).unwrap()
    );
}
