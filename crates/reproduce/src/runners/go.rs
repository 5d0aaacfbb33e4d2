//! `go test`'s output: the `-v` result lines (`--- PASS: TestX (0.00s)`, subtests indented
//! four spaces a level and named `TestX/sub`) and `-json`'s events (`{"Action":"pass",
//! "Test":"TestX/sub",...}`, one per line, as `go test -json` and `go tool test2json`
//! print them). Without `-v`, `go test` prints only failing tests: the passing ones are
//! missing, and a run that lists them is an error (`super::super::outcome`).

use serde::Deserialize;

use super::{Status, Tests};

/// The status word of a `-v` result line or a `-json` action.
fn status(word: &str) -> Option<Status> {
    Some(match word {
        "PASS" | "pass" => Status::Passed,
        "FAIL" | "fail" => Status::Failed,
        "SKIP" | "skip" => Status::Skipped,
        _ => return None,
    })
}

/// `-v` lines: `--- STATUS: NAME (DURATION)`, at any indentation.
pub(crate) fn parse_verbose(text: &str) -> Tests {
    let mut tests = Tests::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("--- ") else {
            continue;
        };
        let Some((word, rest)) = rest.split_once(": ") else {
            continue;
        };
        let Some(status) = status(word) else {
            continue;
        };
        // The duration is the last parenthesised word; a name has no spaces (go test
        // writes a subtest's spaces as '_').
        let name = match rest.trim_end().rsplit_once(" (") {
            Some((name, d)) if d.ends_with("s)") => name,
            _ => continue,
        };
        if !name.is_empty() && !name.contains(' ') {
            tests.insert(name.to_string(), status);
        }
    }
    tests
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "Action", borrow)]
    action: &'a str,
    #[serde(rename = "Test", default, borrow)]
    test: Option<std::borrow::Cow<'a, str>>,
}

/// `-json` events: a test's last `pass`, `fail` or `skip`.
pub(crate) fn parse_json(text: &str) -> Tests {
    let mut tests = Tests::new();
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('{') || !line.contains("\"Action\"") {
            continue;
        }
        let Ok(event) = serde_json::from_str::<Event>(line) else {
            continue;
        };
        if let (Some(test), Some(status)) = (event.test, status(event.action)) {
            tests.insert(test.into_owned(), status);
        }
    }
    tests
}
