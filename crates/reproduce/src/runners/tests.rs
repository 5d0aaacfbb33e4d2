//! Real output, captured from the runners themselves (`fixtures/`, see its README), and
//! the shapes SWE-bench's own log parsers read.

use super::*;
use crate::outcome::{grade, grade_logs, Status};

/// What `clean` then `parse` make of a fixture.
fn read(fixture: &str) -> Tests {
    parse(&clean(fixture.as_bytes()))
}

fn get(t: &Tests, name: &str) -> Option<Status> {
    t.get(name).copied()
}

#[test]
fn go_test_verbose_of_a_real_module() {
    // pkg/errors at 87f8819, `go test -v -run 'TestNew|TestWrap|TestFormatNew|TestIs'`
    // (go 1.19): subtests, and a real failure (its expected stack path).
    let t = read(include_str!("fixtures/go-v-pkg-errors.txt"));
    assert_eq!(get(&t, "TestNew"), Some(Status::Passed));
    assert_eq!(get(&t, "TestFormatNew"), Some(Status::Failed));
    assert_eq!(get(&t, "TestIs/with_message_format"), Some(Status::Passed));
    assert_eq!(get(&t, "TestIs"), Some(Status::Passed));
    assert_eq!(t.len(), 11, "{t:?}");
    let skip = go::parse_verbose("    --- SKIP: TestX/needs_root (0.00s)\n--- BENCH: BenchmarkY\n");
    assert_eq!(get(&skip, "TestX/needs_root"), Some(Status::Skipped));
    assert_eq!(skip.len(), 1);
}

#[test]
fn go_test_json_of_a_real_module() {
    // The same module, `go test -json` (its `output` events left out of the fixture).
    let t = read(include_str!("fixtures/go-json-pkg-errors.txt"));
    assert_eq!(get(&t, "TestWrap"), Some(Status::Passed));
    assert_eq!(
        get(&t, "TestIs/std_errors_compatibility"),
        Some(Status::Passed)
    );
    assert!(!t.contains_key(""), "package events name no test");
    assert!(go::parse_json("{\"Action\":\"pass\",\"Test\":\n{not json\n").is_empty());
}

#[test]
fn jest_verbose_names_every_test() {
    // jest 30.5.2 --verbose (it writes to stderr), two files, nested describes.
    let t = read(include_str!("fixtures/jest-verbose.txt"));
    assert_eq!(get(&t, "top level"), Some(Status::Passed));
    assert_eq!(get(&t, "sum > adds 1 + 2 to equal 3"), Some(Status::Passed));
    assert_eq!(
        get(&t, "sum > with negatives > is wrong on purpose"),
        Some(Status::Failed)
    );
    assert_eq!(get(&t, "sum > skipped one"), Some(Status::Skipped));
    assert_eq!(get(&t, "sum > todo one"), Some(Status::Skipped));
    assert_eq!(get(&t, "other passes"), Some(Status::Passed));
    assert_eq!(t.len(), 7, "{t:?}");
    // The same run with --colors.
    let c = read(include_str!("fixtures/jest-verbose-color.txt"));
    assert_eq!(c, t);
}

#[test]
fn jest_default_reporter_names_its_failures() {
    // Without --verbose and with two files jest prints failures only.
    let t = read(include_str!("fixtures/jest-default.txt"));
    let got: Vec<(&str, Status)> = t.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        got,
        [("sum > with negatives > is wrong on purpose", Status::Failed)]
    );
}

#[test]
fn mocha_spec_reporter() {
    // mocha 12.0.3, spec reporter: pass, numbered failure, pending; the failure details
    // after the summary are not tests.
    let t = read(include_str!("fixtures/mocha-spec.txt"));
    let got: Vec<(&str, Status)> = t.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        got,
        [
            ("Array > #indexOf() > fails on purpose", Status::Failed),
            ("Array > #indexOf() > is pending", Status::Skipped),
            (
                "Array > #indexOf() > should return -1 when the value is not present",
                Status::Passed
            ),
            ("Array > top of Array", Status::Passed),
            ("root test", Status::Passed),
        ]
    );
    // A real project: is-number's own suite (jonschlinkert/is-number 7.0.0, mocha 10).
    // 111 tests, 73 distinct titles (`0` and `"0"` print alike).
    let t = read(include_str!("fixtures/mocha-is-number.txt"));
    assert_eq!(t.len(), 73);
    assert_eq!(
        get(&t, "is a number > \"-1.1\" should be a number"),
        Some(Status::Passed)
    );
}

#[test]
fn vitest_verbose_and_default() {
    // vitest 4.1.12, coloured although not on a terminal.
    let t = read(include_str!("fixtures/vitest-verbose.txt"));
    assert_eq!(get(&t, "sum.test.js > sum > adds"), Some(Status::Passed));
    assert_eq!(
        get(&t, "sum.test.js > sum > nested > fails on purpose"),
        Some(Status::Failed)
    );
    assert_eq!(
        get(&t, "sum.test.js > sum > skipped one"),
        Some(Status::Skipped)
    );
    assert_eq!(get(&t, "sum.test.js > top level"), Some(Status::Passed));
    assert_eq!(t.len(), 4, "{t:?}");
    // The default reporter: a failing file's tests by title, its failure by path.
    let t = read(include_str!("fixtures/vitest-default.txt"));
    assert_eq!(
        get(&t, "sum.test.js > sum > nested > fails on purpose"),
        Some(Status::Failed)
    );
    assert_eq!(get(&t, "sum.test.js > adds"), Some(Status::Passed));
}

#[test]
fn karma_mocha_reporter() {
    // The shape SWE-bench's karma parser reads (preact), up to SUMMARY.
    let out = "START:\n  Starting browser ChromeHeadless\n  render()\n    ✔ should render\n    nested\n      ✖ should fail\nFinished in 0.1 secs / 0.05 secs\nSUMMARY:\n✔ 1 test completed\n✖ 1 test failed\n";
    let t = read(out);
    assert_eq!(get(&t, "render() > should render"), Some(Status::Passed));
    assert_eq!(
        get(&t, "render() > nested > should fail"),
        Some(Status::Failed)
    );
    assert_eq!(t.len(), 2, "{t:?}");
}

#[test]
fn marks_in_other_output_are_no_tests() {
    // No runner's summary line: a ✓ in a build log is not a test.
    assert!(read("  ✓ compiled\n  ✔ linted\n  1) step one\n").is_empty());
}

#[test]
fn listed_names_in_each_form_match() {
    let t = read(include_str!("fixtures/mocha-spec.txt"));
    let listed = [
        // mocha's fullTitle(), jest's fullName: the path joined with spaces.
        "Array #indexOf() should return -1 when the value is not present",
        // The path as printed here.
        "Array > top of Array",
        // SWE-bench's jest parser: the title alone.
        "root test",
    ];
    assert!(grade(&t, &listed, 1).resolved);
    let g = grade(&t, &["fails on purpose"], 0);
    assert!(!g.resolved && !g.error && g.found == 1);
    // A title two tests share: the worse status.
    let mut two = Tests::new();
    two.insert("a > same".into(), Status::Passed);
    two.insert("b > same".into(), Status::Failed);
    assert_eq!(Aliases::new(&two).get("same"), Some(Status::Failed));
}

#[test]
fn runs_are_graded_from_stderr_too() {
    // jest writes its report to stderr: a run listing jest tests is graded from it.
    let err = include_str!("fixtures/jest-verbose.txt");
    let g = grade_logs(
        &["other passes", "sum adds 1 + 2 to equal 3"],
        true,
        1,
        b"",
        err.as_bytes(),
        None,
    );
    assert!(g.resolved && g.infra.is_none(), "{g:?}");
}

#[test]
fn escapes_and_carriage_returns_are_removed() {
    assert_eq!(clean(b"\x1b[1m\x1b[31mFAIL\x1b[0m x\r\n"), "FAIL x\n");
    assert_eq!(clean(b"10%\r50%\rdone\n"), "done\n");
    assert_eq!(clean(b"\x1b]8;;http://x\x07link\x1b]8;;\x07\n"), "link\n");
}

#[test]
fn tabs_survive_cleaning() {
    assert_eq!(clean(b"ok  \tpkg\t0.1s\n"), "ok  \tpkg\t0.1s\n");
}

#[test]
fn a_deep_tree_is_bounded() {
    let mut out = String::new();
    for i in 0..200 {
        out.push_str(&format!("{}suite{i}\n", " ".repeat(i + 1)));
    }
    out.push_str(&format!("{}✔ leaf\n  1 passing (1ms)\n", " ".repeat(202)));
    let t = read(&out);
    let key = t.keys().next().cloned().unwrap_or_default();
    assert_eq!(key.split(" > ").count(), tree::MAX_DEPTH + 1, "{key}");
}
