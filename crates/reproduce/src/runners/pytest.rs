//! pytest's terminal output: `-v` lines (`path::test PASSED [ 50%]`) and the `-rA` short
//! summary (`PASSED path::test`, `FAILED path::test - reason`).

use super::{Status, Tests};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
