//! A run's outcome: per-test statuses from JUnit XML when the runner wrote it, else from
//! pytest's output (`-v` lines and the `-rA` summary) or TAP (`node --test`, [`super::tap`]),
//! and SWE-bench's resolved rule.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// One test's status, as SWE-bench grades it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Passed,
    Failed,
    Error,
    Skipped,
    Xfail,
    Xpass,
}

impl Status {
    /// SWE-bench counts PASSED and XFAIL as passing.
    pub(crate) fn passes(self) -> bool {
        matches!(self, Status::Passed | Status::Xfail)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error => "error",
            Status::Skipped => "skipped",
            Status::Xfail => "xfail",
            Status::Xpass => "xpass",
        }
    }

    fn from_word(w: &str) -> Option<Status> {
        Some(match w {
            "PASSED" => Status::Passed,
            "FAILED" => Status::Failed,
            "ERROR" => Status::Error,
            "SKIPPED" => Status::Skipped,
            "XFAIL" => Status::Xfail,
            "XPASS" => Status::Xpass,
            _ => return None,
        })
    }
}

/// Test statuses by name. JUnit cases are keyed `classname.name`; pytest node ids are kept
/// as written and matched through [`dotted`].
pub(crate) type Tests = BTreeMap<String, Status>;

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

/// Parses pytest's terminal output: `-v` lines (`path::test PASSED [ 50%]`) and the `-rA`
/// short summary (`PASSED path::test`, `FAILED path::test - reason`).
pub(crate) fn parse_pytest(output: &str) -> Tests {
    let mut tests = Tests::new();
    for line in output.lines() {
        let line = line.trim_end();
        // Short summary: STATUS nodeid [- reason]
        if let Some((word, rest)) = line.split_once(' ') {
            if let Some(status) = Status::from_word(word) {
                let id = rest.split(" - ").next().unwrap_or(rest).trim();
                if id.contains("::") || id.ends_with(".py") {
                    tests.insert(id.to_string(), status);
                    continue;
                }
            }
        }
        // Verbose: nodeid STATUS [percent]
        let mut words = line.split_whitespace();
        if let (Some(id), Some(word)) = (words.next(), words.next()) {
            if id.contains("::") {
                if let Some(status) = Status::from_word(word) {
                    tests.entry(id.to_string()).or_insert(status);
                }
            }
        }
    }
    tests
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
/// its dotted form (JUnit's `classname.name`). Two map lookups, so grading stays cheap for
/// instances that list thousands of tests.
pub(crate) fn lookup(tests: &Tests, id: &str) -> Option<Status> {
    tests.get(id).or_else(|| tests.get(&dotted(id))).copied()
}

/// SWE-bench's rule over the listed tests, or the exit status when none are listed; and
/// the signature of the outcome (what flakiness compares).
pub(crate) fn grade(tests: &Tests, listed: &[&str], exit_code: i32) -> (bool, String) {
    if listed.is_empty() {
        return (exit_code == 0, digest(&format!("exit:{exit_code}")));
    }
    let mut sig = String::new();
    let mut resolved = true;
    for id in listed {
        let status = lookup(tests, id);
        resolved &= status.is_some_and(Status::passes);
        sig.push_str(&format!(
            "{id}={}\n",
            status.map_or("missing", Status::name)
        ));
    }
    (resolved, digest(&sig))
}

/// What grading makes of a finished run's logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Graded {
    pub resolved: bool,
    pub signature: String,
    /// Failure modes the logs show, looked for only when the outcome differs from the
    /// recorded one.
    pub evidence: Vec<super::Mode>,
    /// Per-test statuses, JSON.
    pub tests: String,
}

/// Grades a run from what it left: per-test statuses from the JUnit XML, then those of
/// pytest's output the XML lacks (a command that runs pytest twice overwrites the XML, and
/// a runner that writes none still prints its results), SWE-bench's rule over `listed`
/// (or the exit status), and evidence when the outcome is not the `recorded` one. The
/// same logs give the same grade: runs are graded this way when made and by `regrade`.
pub(crate) fn grade_logs(
    listed: &[&str],
    recorded: bool,
    exit_code: i32,
    stdout: &[u8],
    stderr: &[u8],
    junit: Option<&[u8]>,
) -> Graded {
    let mut tests: Tests = junit
        .and_then(|x| parse_junit(&String::from_utf8_lossy(x)))
        .unwrap_or_default();
    let out = String::from_utf8_lossy(stdout);
    let tap = super::tap::parse_tap(&out).into_iter().map(|(k, t)| {
        use super::tap::Tap;
        let status = match t {
            Tap::Ok => Status::Passed,
            Tap::NotOk => Status::Failed,
            Tap::Skip => Status::Skipped,
            Tap::TodoNotOk => Status::Xfail,
            Tap::TodoOk => Status::Xpass,
        };
        (k, status)
    });
    for (k, v) in parse_pytest(&out).into_iter().chain(tap) {
        if lookup(&tests, &k).is_none() {
            tests.insert(k, v);
        }
    }
    let (resolved, signature) = grade(&tests, listed, exit_code);
    let evidence = if resolved != recorded {
        let mut text = String::from_utf8_lossy(stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(stderr));
        super::evidence::detect(&text)
    } else {
        Vec::new()
    };
    let statuses: BTreeMap<&str, &str> =
        tests.iter().map(|(k, v)| (k.as_str(), v.name())).collect();
    Graded {
        resolved,
        signature,
        evidence,
        tests: serde_json::to_string(&statuses).unwrap_or_else(|_| "{}".into()),
    }
}

/// The signature of a run that produced no test outcome.
pub(crate) fn infra_signature(infra: super::Infra) -> String {
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
            lookup(&t, "tests/test_dates.py::test_year"),
            Some(Status::Passed)
        );
        assert_eq!(
            lookup(&t, "tests/test_dates.py::TestFmt::test_fmt[a.b-1]"),
            Some(Status::Failed)
        );
        assert_eq!(
            lookup(&t, "tests/test_misc.py::test_skip"),
            Some(Status::Skipped)
        );
        assert_eq!(
            lookup(&t, "tests/test_misc.py::test_xf"),
            Some(Status::Xfail)
        );
        // Passed, then errored in teardown: an error.
        assert_eq!(
            lookup(&t, "tests/test_misc.py::test_td"),
            Some(Status::Error)
        );
        assert_eq!(lookup(&t, "tests/test_misc.py::test_absent"), None);
    }

    #[test]
    fn junit_rejects_non_xml_and_empty_suites() {
        assert!(parse_junit("not xml <").is_none());
        assert!(parse_junit("<testsuites/>").is_none());
    }

    #[test]
    fn pytest_verbose_and_summary_lines() {
        let out = "\
============================= test session starts ==============================
tests/test_a.py::test_one PASSED                                         [ 33%]
tests/test_a.py::test_two FAILED                                         [ 66%]
tests/test_a.py::TestK::test_p[x-1] SKIPPED (why)                        [100%]
=========================== short test summary info ============================
PASSED tests/test_b.py::test_three
FAILED tests/test_b.py::test_four - AssertionError: assert 2023 == 2026
ERROR tests/test_c.py - ModuleNotFoundError: No module named 'shelfdep'
XFAIL tests/test_b.py::test_five - reason
FAILED some words that are not a test
";
        let t = parse_pytest(out);
        assert_eq!(t.get("tests/test_a.py::test_one"), Some(&Status::Passed));
        assert_eq!(t.get("tests/test_a.py::test_two"), Some(&Status::Failed));
        assert_eq!(
            t.get("tests/test_a.py::TestK::test_p[x-1]"),
            Some(&Status::Skipped)
        );
        assert_eq!(t.get("tests/test_b.py::test_three"), Some(&Status::Passed));
        assert_eq!(t.get("tests/test_b.py::test_four"), Some(&Status::Failed));
        assert_eq!(t.get("tests/test_c.py"), Some(&Status::Error));
        assert_eq!(t.get("tests/test_b.py::test_five"), Some(&Status::Xfail));
        assert_eq!(t.len(), 7);
    }

    #[test]
    fn swe_bench_rule() {
        let mut t = Tests::new();
        t.insert("a.py::f2p".into(), Status::Passed);
        t.insert("a.py::p2p".into(), Status::Xfail);
        let (ok, sig1) = grade(&t, &["a.py::f2p", "a.py::p2p"], 1);
        assert!(ok, "exit status is ignored when tests are listed");
        t.insert("a.py::p2p".into(), Status::Skipped);
        let (ok, sig2) = grade(&t, &["a.py::f2p", "a.py::p2p"], 0);
        assert!(!ok, "a skipped test does not pass");
        assert_ne!(sig1, sig2);
        let (ok, _) = grade(&t, &["a.py::f2p", "a.py::gone"], 0);
        assert!(!ok, "a missing test fails");
        // No lists: the exit status decides.
        assert!(grade(&t, &[], 0).0);
        assert!(!grade(&t, &[], 3).0);
        assert_ne!(grade(&t, &[], 3).1, grade(&t, &[], 4).1);
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
