use super::*;

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn narrowed(tests: &[&str], cmd: &str) -> (Option<String>, String) {
    let s = select(&ids(tests), cmd);
    assert_eq!(s.tests, ids(tests));
    (s.runner, s.command)
}

#[test]
fn pytest_runs_node_ids_instead_of_the_paths_it_names() {
    let (runner, cmd) = narrowed(
        &["tests/test_a.py::test_x[1-2]"],
        "/usr/bin/python3 -m pytest -p no:cacheprovider -rA tests",
    );
    assert_eq!(runner.as_deref(), Some("pytest"));
    assert_eq!(
        cmd,
        "/usr/bin/python3 -m pytest -p no:cacheprovider -rA 'tests/test_a.py::test_x[1-2]'"
    );
    // Set-up steps are kept; option values are not taken for paths; a trailing comment
    // stays after the ids.
    let (_, cmd) = narrowed(
        &["t.py::a", "t.py::b"],
        "pip install -e . && pytest -k 'not slow' tests/ t.py -q # all\n",
    );
    assert_eq!(
        cmd,
        "pip install -e . && pytest -k 'not slow' -q 't.py::a' 't.py::b' # all\n"
    );
    // An id that is no node id cannot be selected: the whole command.
    let (runner, cmd) = narrowed(&["test_a"], "pytest tests");
    assert_eq!((runner, cmd.as_str()), (None, "pytest tests"));
}

#[test]
fn go_node_jest_and_mocha_select_by_an_escaped_anchored_pattern() {
    let (r, cmd) = narrowed(&["TestParse/a.b"], "go test -v ./...");
    assert_eq!(r.as_deref(), Some("go_test"));
    assert_eq!(cmd, r"go test -v ./... -run '^TestParse$/^a\.b$'");
    let (_, cmd) = narrowed(&["TestB/x", "TestA", "TestB/y"], "cd pkg && go test -v .");
    assert_eq!(cmd, "cd pkg && go test -v . -run '^(TestA|TestB)$'");
    let (r, cmd) = narrowed(
        &["suite > pads (2 cells)"],
        "npm install --no-package-lock && node --test test/",
    );
    assert_eq!(r.as_deref(), Some("node_test"));
    assert_eq!(
        cmd,
        r"npm install --no-package-lock && node --test --test-name-pattern='^pads \(2 cells\)$' test/"
    );
    let (r, cmd) = narrowed(&["row > pads [x]", "a*b"], "npx jest --ci");
    assert_eq!(r.as_deref(), Some("jest"));
    assert_eq!(cmd, r"npx jest --ci -t '(row pads \[x\]|a\*b)$'");
    let (r, cmd) = narrowed(&["it works"], "./node_modules/.bin/mocha test");
    assert_eq!(r.as_deref(), Some("mocha"));
    assert_eq!(cmd, "./node_modules/.bin/mocha test --grep 'it works$'");
}

#[test]
fn a_command_that_cannot_be_narrowed_safely_runs_whole() {
    for cmd in [
        "pytest tests | tee log",
        "pytest tests > log 2>&1",
        "(cd x && pytest)",
        "pytest \"$TESTS\"",
        "pytest $(cat list)",
        "pytest 'unclosed",
        "npm test",
        "make check",
        "node test/run.js",
        "go test ./... -args -x",
        "pytest tests &",
    ] {
        let (runner, out) = narrowed(&["t.py::a"], cmd);
        assert_eq!((runner, out.as_str()), (None, cmd), "{cmd}");
    }
    // What comes before the last command does not matter.
    let (runner, _) = narrowed(&["t.py::a"], "(cd x; make) | cat; pytest tests");
    assert_eq!(runner.as_deref(), Some("pytest"));
    // No test: nothing to narrow to.
    assert_eq!(select(&[], "pytest tests").runner, None);
}

#[test]
fn test_ids_reach_the_runner_as_written_whatever_they_hold() {
    // The narrowed command run by sh, with `pytest` a script that prints its arguments.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("pytest");
    std::fs::write(
        &bin,
        "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>\\n' \"$a\"; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let nasty = "t.py::test_x[it's $(touch pwned) `id` \"q\" \\ ; && |]";
    let s = select(&ids(&[nasty]), "pytest -q tests");
    assert!(s.alone(), "{s:?}");
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(&s.command)
        .current_dir(dir.path())
        .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("<-q>\n<{nasty}>\n")
    );
    assert!(!dir.path().join("pwned").exists());
}

#[test]
fn harnesses_test_commands_as_benchmarks_write_them() {
    // SWE-bench's TEST_PYTEST names no path: the node ids are added.
    let (r, cmd) = narrowed(
        &["sklearn/tests/test_base.py::test_clone"],
        "pytest --no-header -rA --tb=no -p no:cacheprovider",
    );
    assert_eq!(r.as_deref(), Some("pytest"));
    assert_eq!(
        cmd,
        "pytest --no-header -rA --tb=no -p no:cacheprovider 'sklearn/tests/test_base.py::test_clone'"
    );
    // Options with `=` values are kept as written, quotes and all.
    let (_, cmd) = narrowed(
        &["t.py::a"],
        "pytest --no-header -rA --ignore=deprecated/ --override-ini=\"testpaths=.\" tests/",
    );
    assert_eq!(
        cmd,
        "pytest --no-header -rA --ignore=deprecated/ --override-ini=\"testpaths=.\" 't.py::a'"
    );
    // A runner whose status is swallowed (`|| true`) is still the command that runs them.
    let (r, cmd) = narrowed(
        &["t.py::a"],
        "pip install -e . && pytest --no-header -rA --continue-on-collection-errors tests || true",
    );
    assert_eq!(r.as_deref(), Some("pytest"));
    assert_eq!(
        cmd,
        "pip install -e . && pytest --no-header -rA --continue-on-collection-errors 't.py::a' || true"
    );
    // Django's and SymPy's own runners, and `true` after something else: whole.
    for cmd in [
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
        "bin/test -C --verbose",
        "pytest tests && true",
        "pytest tests | tee log || true",
    ] {
        let (runner, out) = narrowed(&["t.py::a"], cmd);
        assert_eq!((runner, out.as_str()), (None, cmd), "{cmd}");
    }
}
