use super::*;

/// Real task directories (`runtime-tests/fixtures/harbor-tasks`): one written by Harbor's
/// SWE-bench adapter, one carrying SWE-bench's own evaluation script.
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../runtime-tests/fixtures/harbor-tasks"
);

#[test]
fn harbor_tasks_become_swe_bench_records_with_their_test_command() {
    let records = read(Path::new(FIXTURES), TaskEnvironment::Host).unwrap();
    let ids: Vec<&str> = records
        .iter()
        .map(|(_, r)| r["instance_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["hashicorp__go-version-73", "pytoolz__toolz-603"]);
    let (go, toolz) = (&records[0].1, &records[1].1);
    // Harbor's SWE-bench adapter: the command inside its `tee` capture, without `|| true`.
    assert_eq!(
        toolz["test_cmd"],
        "python3 -m pytest -p no:cacheprovider -rA toolz/tests/test_itertoolz.py"
    );
    // SWE-bench's own eval.sh: between its test output markers.
    assert_eq!(go["test_cmd"], "go test -v .");
    // The record is config.json's, as SWE-bench wrote it.
    assert_eq!(
        toolz["FAIL_TO_PASS"],
        "[\"toolz/tests/test_itertoolz.py::test_partition_all\"]"
    );
    assert_eq!(toolz["version"], "1.0");
    // One task directory is read as such.
    let one = read(
        &Path::new(FIXTURES).join("pytoolz__toolz-603"),
        TaskEnvironment::Host,
    )
    .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].1, *toolz);
}

#[test]
fn a_record_with_its_own_test_cmd_or_lower_case_lists_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t1/tests");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(
        t.join("config.json"),
        r#"{"instance_id": "x-1", "test_cmd": "make check", "fail_to_pass": ["a"], "pass_to_pass": "[\"b\"]"}"#,
    )
    .unwrap();
    let r = &read(dir.path(), TaskEnvironment::Host).unwrap()[0].1;
    assert_eq!(r["test_cmd"], "make check", "no test.sh needed");
    assert_eq!(r["FAIL_TO_PASS"], serde_json::json!(["a"]));
    assert_eq!(r["PASS_TO_PASS"], "[\"b\"]");
}

#[test]
fn bad_tasks_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let e = read(root, TaskEnvironment::Host).unwrap_err().to_string();
    assert!(e.contains("no task directories"), "{e}");
    let t = root.join("t1/tests");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    for (config, script, want) in [
        ("{", None, "tests/config.json: not JSON"),
        ("[1]", None, "not a JSON object"),
        ("{\"repo\": \"a/b\"}", None, "no \"instance_id\" string"),
        (
            "{\"instance_id\": \"x-1\"}",
            None,
            "tests/test.sh: No such file",
        ),
        (
            "{\"instance_id\": \"x-1\"}",
            Some("#!/bin/bash\npytest -rA\n"),
            "tests/test.sh: no test command found",
        ),
        (
            "{\"instance_id\": \"x-1\"}",
            Some(": '>>>>> Start Test Output'\n\n: '>>>>> End Test Output'\n"),
            "no test command found",
        ),
    ] {
        std::fs::write(t.join("config.json"), config).unwrap();
        let _ = std::fs::remove_file(t.join("test.sh"));
        if let Some(s) = script {
            std::fs::write(t.join("test.sh"), s).unwrap();
        }
        let e = read(root, TaskEnvironment::Host).unwrap_err().to_string();
        assert!(e.contains(want), "{config}: {e}");
        assert!(e.starts_with("--instances "), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A directory beside the tasks that is not one (hidden ones are passed over).
    std::fs::write(
        t.join("test.sh"),
        ": '>>>>> Start Test Output'\ngo test -v .\n: '>>>>> End Test Output'\n",
    )
    .unwrap();
    assert_eq!(read(root, TaskEnvironment::Host).unwrap().len(), 1);
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let e = read(root, TaskEnvironment::Host).unwrap_err().to_string();
    assert!(
        e.ends_with("notes: not a task directory (no tests/config.json)"),
        "{e}"
    );
}

#[test]
fn an_oversized_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("tests");
    std::fs::create_dir_all(&t).unwrap();
    let f = std::fs::File::create(t.join("config.json")).unwrap();
    f.set_len(MAX_FILE + 1).unwrap();
    let e = read(dir.path(), TaskEnvironment::Host)
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.json: over 16 MiB"), "{e}");
}

/// The capture of Harbor's SWE-bench Pro adapter: its shell options and the status it keeps
/// are its own, not the test command's.
#[test]
fn the_scripts_bookkeeping_is_not_the_test_command() {
    let script = "cd /app\nLOG_FILE=$(mktemp)\nexport LOG_FILE\nexec 3>&1 4>&2\nexec > >(tee \"$LOG_FILE\") 2>&1\n\nset +e\nnpx jest --verbose test/a.test.js || true\nTEST_EXIT_CODE=$?\nset -e\n\nexec 1>&3 2>&4\n";
    assert_eq!(
        test_command(script).as_deref(),
        Some("npx jest --verbose test/a.test.js")
    );
    assert!(!is_bookkeeping("set -- a b"));
    assert!(!is_bookkeeping("X=$? && make"));
    assert!(!is_bookkeeping("set -uo pipefail"));
    assert!(is_bookkeeping("set -ux"));
}

/// By default a task runs in the image its `environment/Dockerfile` builds: the record names
/// it (relative to the directory read, as `load` resolves paths) with `environment/` as the
/// context, unless the record names a root of its own or the Dockerfile is not a file.
#[test]
fn a_tasks_environment_dockerfile_becomes_its_dockerfile() {
    let records = read(Path::new(FIXTURES), TaskEnvironment::Dockerfile).unwrap();
    let toolz = &records[1].1;
    assert_eq!(
        toolz["dockerfile"],
        "pytoolz__toolz-603/environment/Dockerfile"
    );
    assert_eq!(toolz["context"], "pytoolz__toolz-603/environment");
    let go = &records[0].1;
    assert_eq!(go["context"], "hashicorp__go-version-73/environment");
    // One task read as such: relative to the task.
    let one = read(
        &Path::new(FIXTURES).join("pytoolz__toolz-603"),
        TaskEnvironment::Dockerfile,
    )
    .unwrap();
    assert_eq!(one[0].1["dockerfile"], "environment/Dockerfile");
    assert_eq!(one[0].1["context"], "environment");
    // --task-environment host: neither.
    let host = read(Path::new(FIXTURES), TaskEnvironment::Host).unwrap();
    assert!(host[1].1.get("dockerfile").is_none() && host[1].1.get("context").is_none());

    let dir = tempfile::tempdir().unwrap();
    let task = |name: &str, record: &str| {
        let t = dir.path().join(name);
        std::fs::create_dir_all(t.join("tests")).unwrap();
        std::fs::create_dir_all(t.join("environment")).unwrap();
        std::fs::write(t.join("tests/config.json"), record).unwrap();
        t
    };
    // A record with its own image keeps it.
    let a = task(
        "a",
        r#"{"instance_id": "a-1", "test_cmd": "true", "image": "busybox"}"#,
    );
    std::fs::write(a.join("environment/Dockerfile"), "FROM busybox\n").unwrap();
    // A Dockerfile that is a link is not followed: the task runs where the record says.
    let b = task("b", r#"{"instance_id": "b-1", "test_cmd": "true"}"#);
    std::os::unix::fs::symlink("/etc/passwd", b.join("environment/Dockerfile")).unwrap();
    // No environment/Dockerfile at all.
    task("c", r#"{"instance_id": "c-1", "test_cmd": "true"}"#);
    let r = read(dir.path(), TaskEnvironment::Dockerfile).unwrap();
    assert_eq!(r[0].1["image"], "busybox");
    assert!(r[0].1.get("dockerfile").is_none());
    assert!(r[1].1.get("dockerfile").is_none());
    assert!(r[2].1.get("dockerfile").is_none());
}
