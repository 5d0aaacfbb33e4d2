//! A run's outcome: per-test statuses from JUnit XML when the runner wrote it, else from
//! the runner's output (pytest's `-v` lines and `-rA` summary here; `go test`, jest, mocha,
//! vitest, karma and TAP in [`super::runners`]), SWE-bench's resolved rule, and the `error`
//! class of a run that names none of the listed tests ([`Grade::error`]).

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::runners::{self, Aliases};
use super::Infra;

pub(crate) use super::runners::{Status, Tests};

/// Parses JUnit XML (pytest's, or any runner's `<testcase>` elements). `None` when the text
/// is not XML with test cases.
pub(crate) fn parse_junit(xml: &str) -> Option<Tests> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let mut tests = Tests::new();
    let mut any = false;
    for case in doc.descendants().filter(|n| n.has_tag_name("testcase")) {
        any = true;
        let name = case.attribute("name").unwrap_or("");
        let class = case.attribute("classname").unwrap_or("");
        let key = if class.is_empty() {
            name.to_string()
        } else {
            format!("{class}.{name}")
        };
        let child = |tag: &str| case.children().find(|c| c.has_tag_name(tag));
        let status = if let Some(s) = child("skipped") {
            // pytest writes an xfail as <skipped type="pytest.xfail">.
            if s.attribute("type") == Some("pytest.xfail") {
                Status::Xfail
            } else {
                Status::Skipped
            }
        } else if child("failure").is_some() {
            Status::Failed
        } else if child("error").is_some() {
            Status::Error
        } else {
            Status::Passed
        };
        // A test that passed and then errored in teardown appears twice: the worst wins.
        let entry = tests.entry(key).or_insert(status);
        if status != Status::Passed {
            *entry = status;
        }
    }
    any.then_some(tests)
}

/// A pytest node id (`tests/test_a.py::TestX::test_y[p]`) in JUnit's dotted form
/// (`tests.test_a.TestX.test_y[p]`); other names are returned unchanged.
pub(crate) fn dotted(id: &str) -> String {
    match id.split_once("::") {
        Some((file, rest)) if file.ends_with(".py") => {
            let module = file.trim_end_matches(".py").replace('/', ".");
            // Parameters may hold '::'; only the part before '[' is a path.
            let (path, params) = match rest.find('[') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            format!("{module}.{}{params}", path.replace("::", "."))
        }
        _ => id.to_string(),
    }
}

/// The status of a listed test: by exact name (pytest's output keeps node ids), else by
/// its dotted form (JUnit's `classname.name`), else by another name of a tree reporter's
/// test ([`Aliases`]). Map lookups only, so grading stays cheap for instances that list
/// thousands of tests.
pub(crate) fn lookup(tests: &Tests, aliases: &Aliases, id: &str) -> Option<Status> {
    tests
        .get(id)
        .or_else(|| tests.get(&dotted(id)))
        .copied()
        .or_else(|| aliases.get(id))
}

/// What SWE-bench's rule makes of a run's statuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grade {
    pub resolved: bool,
    /// The digest of the outcome (what flakiness compares).
    pub signature: String,
    /// Listed tests the run's output names.
    pub found: usize,
    /// **The `error` class of a run** (SWE-bench's `error_ids`): tests are listed and none
    /// of them appears in the output. Such a run is no outcome: it is recorded with
    /// [`Infra::NoTests`], unresolved, and an arm none of whose runs ran a listed test is
    /// classed `error` (`summary`), never reproducible.
    pub error: bool,
}

/// SWE-bench's rule over the listed tests, or the exit status when none are listed; and
/// the signature of the outcome.
pub(crate) fn grade(tests: &Tests, listed: &[&str], exit_code: i32) -> Grade {
    if listed.is_empty() {
        return Grade {
            resolved: exit_code == 0,
            signature: digest(&format!("exit:{exit_code}")),
            found: 0,
            error: false,
        };
    }
    let aliases = Aliases::new(tests);
    let mut sig = String::new();
    let mut resolved = true;
    let mut found = 0;
    for id in listed {
        let status = lookup(tests, &aliases, id);
        found += usize::from(status.is_some());
        resolved &= status.is_some_and(Status::passes);
        sig.push_str(&format!(
            "{id}={}\n",
            status.map_or("missing", Status::name)
        ));
    }
    if found == 0 {
        return Grade {
            resolved: false,
            signature: infra_signature(Infra::NoTests),
            found,
            error: true,
        };
    }
    Grade {
        resolved,
        signature: digest(&sig),
        found,
        error: false,
    }
}

/// What grading makes of a finished run's logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Graded {
    pub resolved: bool,
    pub signature: String,
    /// `Some(Infra::NoTests)` for a run in the `error` class ([`Grade::error`]).
    pub infra: Option<Infra>,
    /// Failure modes the logs show, looked for only when the outcome differs from the
    /// recorded one.
    pub evidence: Vec<super::Mode>,
    /// Per-test statuses, JSON.
    pub tests: String,
    /// For an `error` run: why the output may name no listed test (a runner that prints
    /// passing tests only when asked to), to print with the warning.
    pub hint: Option<&'static str>,
}

/// Grades a run from what it left: per-test statuses from the JUnit XML, then those every
/// runner's output gives ([`runners::parse`], stdout first, then stderr where jest writes;
/// terminal escapes removed) that the XML lacks (a command that runs pytest twice
/// overwrites the XML, and a runner that writes none still prints its results), SWE-bench's
/// rule over `listed` (or the exit status), and evidence when the outcome is not the
/// `recorded` one. The same logs give the same grade: runs are graded this way when made and
/// by `regrade`.
pub(crate) fn grade_logs(
    listed: &[&str],
    recorded: bool,
    exit_code: i32,
    stdout: &[u8],
    stderr: &[u8],
    junit: Option<&[u8]>,
) -> Graded {
    let mut tests: Tests = junit
        .and_then(|x| {
            parse_junit(&String::from_utf8_lossy(
                &x[..x.len().min(runners::MAX_OUTPUT)],
            ))
        })
        .unwrap_or_default();
    let out = runners::clean(stdout);
    let err = runners::clean(stderr);
    let none = Aliases::new(&Tests::new());
    for (k, v) in runners::parse(&out).into_iter().chain(runners::parse(&err)) {
        if lookup(&tests, &none, &k).is_none() {
            tests.insert(k, v);
        }
    }
    let g = grade(&tests, listed, exit_code);
    let evidence = if g.resolved != recorded {
        let mut text = out.clone();
        text.push_str(&err);
        super::evidence::detect(&text)
    } else {
        Vec::new()
    };
    let statuses: BTreeMap<&str, &str> =
        tests.iter().map(|(k, v)| (k.as_str(), v.name())).collect();
    Graded {
        resolved: g.resolved,
        signature: g.signature,
        infra: g.error.then_some(Infra::NoTests),
        evidence,
        tests: serde_json::to_string(&statuses).unwrap_or_else(|_| "{}".into()),
        hint: if g.error { hint(&out, &err) } else { None },
    }
}

/// Why a run's output may name no listed test although tests ran.
fn hint(out: &str, err: &str) -> Option<&'static str> {
    let has = |s: &str| out.contains(s) || err.contains(s);
    if (has("\nok  \t") || out.starts_with("ok  \t") || has("\nPASS\n")) && !has("--- PASS") {
        Some("go test names passing tests only with -v (or -json)")
    } else if has("Test Suites:") && !has("✓ ") {
        Some("jest names passing tests only with --verbose")
    } else if has("Test Files ") && !has(" > ") {
        Some("vitest names passing tests only with --reporter=verbose")
    } else if tests_is_empty(out) && tests_is_empty(err) {
        Some("no runner's test lines were found in its output")
    } else {
        None
    }
}

fn tests_is_empty(text: &str) -> bool {
    runners::parse(text).is_empty()
}

/// The warning a run in the `error` class prints: one line naming the instance and the run.
pub(crate) fn no_tests_warning(
    instance: &str,
    run: &str,
    listed: usize,
    hint: Option<&str>,
) -> String {
    let mut line = format!(
        "reprorun: warning: instance {instance} run {run}: none of its {listed} listed test(s) appears in the run's output; the run is graded error, not unresolved"
    );
    if let Some(h) = hint {
        line.push_str(&format!(" ({h})"));
    }
    line
}

/// The listed tests that did not pass (failed or missing), by the statuses a run stored
/// (its `tests` JSON, as [`grade_logs`] writes it).
pub(crate) fn failed_listed(tests_json: &str, listed: &[String]) -> Vec<String> {
    let stored: BTreeMap<String, String> = serde_json::from_str(tests_json).unwrap_or_default();
    let tests: Tests = stored
        .into_iter()
        .filter_map(|(k, v)| Some((k, Status::parse(&v)?)))
        .collect();
    let aliases = Aliases::new(&tests);
    listed
        .iter()
        .filter(|id| !lookup(&tests, &aliases, id).is_some_and(Status::passes))
        .cloned()
        .collect()
}

/// The signature of a run that produced no test outcome.
pub(crate) fn infra_signature(infra: Infra) -> String {
    digest(&format!("infra:{}", infra.name()))
}

fn digest(text: &str) -> String {
    reprorun_runtime::image::digest::hex(&Sha256::digest(text.as_bytes())[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    const JUNIT: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="2" tests="5">
<testcase classname="tests.test_dates" name="test_year" time="0.001" />
<testcase classname="tests.test_dates.TestFmt" name="test_fmt[a.b-1]" time="0.001"><failure message="AssertionError">x</failure></testcase>
<testcase classname="tests.test_misc" name="test_skip" time="0"><skipped type="pytest.skip" message="no">s</skipped></testcase>
<testcase classname="tests.test_misc" name="test_xf" time="0"><skipped type="pytest.xfail" message="x">s</skipped></testcase>
<testcase classname="tests.test_misc" name="test_td" time="0" />
<testcase classname="tests.test_misc" name="test_td" time="0"><error message="teardown">e</error></testcase>
</testsuite></testsuites>"#;

    #[test]
    fn junit_statuses_and_node_ids() {
        let t = parse_junit(JUNIT).unwrap();
        assert_eq!(
            lookup(&t, &Aliases::new(&t), "tests/test_dates.py::test_year"),
            Some(Status::Passed)
        );
        assert_eq!(
            lookup(
                &t,
                &Aliases::new(&t),
                "tests/test_dates.py::TestFmt::test_fmt[a.b-1]"
            ),
            Some(Status::Failed)
        );
        assert_eq!(
            lookup(&t, &Aliases::new(&t), "tests/test_misc.py::test_skip"),
            Some(Status::Skipped)
        );
        assert_eq!(
            lookup(&t, &Aliases::new(&t), "tests/test_misc.py::test_xf"),
            Some(Status::Xfail)
        );
        // Passed, then errored in teardown: an error.
        assert_eq!(
            lookup(&t, &Aliases::new(&t), "tests/test_misc.py::test_td"),
            Some(Status::Error)
        );
        assert_eq!(
            lookup(&t, &Aliases::new(&t), "tests/test_misc.py::test_absent"),
            None
        );
    }

    #[test]
    fn junit_rejects_non_xml_and_empty_suites() {
        assert!(parse_junit("not xml <").is_none());
        assert!(parse_junit("<testsuites/>").is_none());
    }

    #[test]
    fn swe_bench_rule() {
        let mut t = Tests::new();
        t.insert("a.py::f2p".into(), Status::Passed);
        t.insert("a.py::p2p".into(), Status::Xfail);
        let g1 = grade(&t, &["a.py::f2p", "a.py::p2p"], 1);
        assert!(g1.resolved, "exit status is ignored when tests are listed");
        t.insert("a.py::p2p".into(), Status::Skipped);
        let g2 = grade(&t, &["a.py::f2p", "a.py::p2p"], 0);
        assert!(!g2.resolved, "a skipped test does not pass");
        assert_ne!(g1.signature, g2.signature);
        let g = grade(&t, &["a.py::f2p", "a.py::gone"], 0);
        assert!(!g.resolved && !g.error, "a missing test fails");
        assert_eq!(g.found, 1);
        // No lists: the exit status decides.
        assert!(grade(&t, &[], 0).resolved);
        assert!(!grade(&t, &[], 3).resolved);
        assert_ne!(grade(&t, &[], 3).signature, grade(&t, &[], 4).signature);
    }

    #[test]
    fn a_run_that_names_no_listed_test_is_an_error() {
        // `go test` without -v: exit 0, the listed tests never printed.
        let out = b"ok  \texample.com/m\t0.004s\n";
        let g = grade_logs(&["TestParse", "TestParse/empty"], true, 0, out, b"", None);
        assert_eq!(g.infra, Some(Infra::NoTests), "{g:?}");
        assert!(!g.resolved);
        assert_eq!(g.signature, infra_signature(Infra::NoTests));
        assert_eq!(
            g.hint,
            Some("go test names passing tests only with -v (or -json)")
        );
        // A recorded failure is not "reproduced" by a run that ran nothing.
        let g = grade_logs(
            &["t.py::x"],
            false,
            2,
            b"ImportError: no module\n",
            b"",
            None,
        );
        assert_eq!(g.infra, Some(Infra::NoTests));
        let w = no_tests_warning("org__repo-1", "shim #0", 2, g.hint);
        assert!(
            w.starts_with(
                "reprorun: warning: instance org__repo-1 run shim #0: none of its 2 listed test(s)"
            ),
            "{w}"
        );
        // One listed test found is an outcome (unresolved), not an error.
        let g = grade_logs(
            &["t.py::x", "t.py::y"],
            true,
            1,
            b"FAILED t.py::x - boom\n",
            b"",
            None,
        );
        assert_eq!(g.infra, None);
        assert!(!g.resolved);
    }

    #[test]
    fn coloured_pytest_output_is_read() {
        // addopts = "--color=yes": the status words are wrapped in escapes.
        let out = "tests/test_a.py::test_one \x1b[32mPASSED\x1b[0m\x1b[32m   [ 50%]\x1b[0m\n\x1b[32mPASSED\x1b[0m tests/test_a.py::test_two\n";
        let g = grade_logs(
            &["tests/test_a.py::test_one", "tests/test_a.py::test_two"],
            true,
            0,
            out.as_bytes(),
            b"",
            None,
        );
        assert!(g.resolved && g.infra.is_none(), "{g:?}");
    }

    #[test]
    fn failed_listed_tests_by_stored_statuses() {
        let json = r#"{"a > b > ok":"passed","a > b > bad":"failed","x.py::t":"xfail"}"#;
        let listed = [
            "a b ok".to_string(),
            "bad".into(),
            "x.py::t".into(),
            "gone".into(),
        ];
        assert_eq!(failed_listed(json, &listed), ["bad", "gone"]);
    }

    #[test]
    fn logs_are_graded_junit_first_then_pytest_output() {
        let out = b"PASSED tests/test_b.py::test_three\nFAILED tests/test_misc.py::test_td - x\n";
        let listed = [
            "tests/test_dates.py::test_year",
            "tests/test_b.py::test_three",
        ];
        let g = grade_logs(&listed, true, 1, out, b"", Some(JUNIT.as_bytes()));
        assert!(g.resolved, "{g:?}");
        assert!(g.evidence.is_empty(), "as recorded: no evidence looked for");
        // The XML's teardown error wins over the output's line for the same test.
        assert!(
            g.tests.contains("\"tests.test_misc.test_td\":\"error\""),
            "{}",
            g.tests
        );
        assert!(g
            .tests
            .contains("\"tests/test_b.py::test_three\":\"passed\""));
        let err = b"requests.exceptions.ConnectionError: Failed to establish a new connection\n";
        let g = grade_logs(&["tests/x.py::gone"], true, 0, b"", err, None);
        assert!(!g.resolved);
        assert_eq!(g.evidence, vec![crate::Mode::Network]);
        assert_eq!(
            g,
            grade_logs(&["tests/x.py::gone"], true, 0, b"", err, None)
        );
    }

    #[test]
    fn dotted_forms() {
        assert_eq!(
            dotted("tests/x/test_a.py::C::t[1::2]"),
            "tests.x.test_a.C.t[1::2]"
        );
        assert_eq!(dotted("test_x (pkg.tests.Case)"), "test_x (pkg.tests.Case)");
    }
}
