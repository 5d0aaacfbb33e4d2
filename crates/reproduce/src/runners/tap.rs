//! TAP, as `node --test` prints it (node 20's reporter when its output is not a terminal):
//! `ok N - name`, `not ok N - name`, `# SKIP` and `# TODO` directives, and subtests
//! indented four spaces a level under `# Subtest: name`. A nested test is keyed by its
//! ancestors' names and its own joined with ` > ` (`suite > inner`), as node's spec reporter
//! shows them. Only output that declares itself (`TAP version N`) is read.

use std::collections::BTreeMap;

/// A TAP test result (its line and directive); `super::tap_status` grades it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tap {
    Ok,
    NotOk,
    Skip,
    /// `# TODO` that failed (expected) or passed.
    TodoNotOk,
    TodoOk,
}

/// Results by test name.
pub(crate) type Tests = BTreeMap<String, Tap>;

/// TAP escapes `#` and `\` in names.
fn unescape(name: &str) -> String {
    name.replace("\\#", "#").replace("\\\\", "\\")
}

/// A result line (without its indentation): its status and name.
fn result(line: &str) -> Option<(Tap, String)> {
    let (ok, rest) = match line.strip_prefix("not ok ") {
        Some(r) => (false, r),
        None => (true, line.strip_prefix("ok ")?),
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(" - ").unwrap_or(rest.trim_start());
    // The directive follows the first unescaped ` # `.
    let mut cut = None;
    let b = rest.as_bytes();
    for i in 0..b.len() {
        if b[i] == b'#' && i > 0 && b[i - 1] == b' ' && (i < 2 || b[i - 2] != b'\\') {
            cut = Some(i);
            break;
        }
    }
    let (name, directive) = match cut {
        Some(i) => (rest[..i - 1].trim_end(), rest[i + 1..].trim()),
        None => (rest.trim_end(), ""),
    };
    let directive = directive.to_ascii_uppercase();
    let status = if directive.starts_with("SKIP") {
        Tap::Skip
    } else if directive.starts_with("TODO") {
        if ok {
            Tap::TodoOk
        } else {
            Tap::TodoNotOk
        }
    } else if ok {
        Tap::Ok
    } else {
        Tap::NotOk
    };
    Some((status, unescape(name)))
}

/// Per-test statuses from TAP output; empty when the output is not TAP.
pub(crate) fn parse_tap(output: &str) -> Tests {
    let mut tests = Tests::new();
    if !output.lines().any(|l| l.trim().starts_with("TAP version ")) {
        return tests;
    }
    // The names of the subtests enclosing the current line, by depth.
    let mut stack: Vec<String> = Vec::new();
    for line in output.lines() {
        let body = line.trim_start_matches(' ');
        let depth = (line.len() - body.len()) / 4;
        if let Some(name) = body.strip_prefix("# Subtest: ") {
            stack.truncate(depth);
            stack.push(unescape(name.trim_end()));
            continue;
        }
        if let Some((status, name)) = result(body) {
            stack.truncate(depth);
            let mut key = stack.join(" > ");
            if !key.is_empty() {
                key.push_str(" > ");
            }
            key.push_str(&name);
            tests.insert(key, status);
        }
    }
    tests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_test_output_gives_each_test_its_status() {
        let out = "TAP version 13\n# Subtest: adds\nok 1 - adds\n  ---\n  duration_ms: 0.5\n  ...\n# Subtest: a \\# hash\nok 2 - a \\# hash\n# Subtest: suite\n    # Subtest: inner\n    ok 1 - inner\n    # Subtest: bad\n    not ok 2 - bad\n      ---\n      error: 'Expected values to be strictly equal'\n      ...\n    1..2\nnot ok 3 - suite\n# Subtest: skipped\nok 4 - skipped # SKIP\n# Subtest: todo\nnot ok 5 - todo # TODO\n# Subtest: fails\nnot ok 6 - fails\n1..6\n# tests 7\n# pass 3\n";
        let t = parse_tap(out);
        let got: Vec<(&str, Tap)> = t.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("a # hash", Tap::Ok),
                ("adds", Tap::Ok),
                ("fails", Tap::NotOk),
                ("skipped", Tap::Skip),
                ("suite", Tap::NotOk),
                ("suite > bad", Tap::NotOk),
                ("suite > inner", Tap::Ok),
                ("todo", Tap::TodoNotOk),
            ]
        );
    }

    #[test]
    fn output_that_is_not_tap_gives_nothing() {
        assert!(parse_tap("ok 1 - looks like tap\nnot ok 2 - but is not\n").is_empty());
        assert!(parse_tap("").is_empty());
    }
}
