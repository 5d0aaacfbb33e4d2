//! The tree reporters: a line per test under its suites, indented by depth, with a mark
//! for its status. Each dialect is read only when its summary line is in the output (jest's
//! `Tests:`, mocha's `N passing`, vitest's `Test Files`, karma's `Executed N of M`), so a
//! `✓` in other output is no test.
//!
//! - jest (`--verbose`, or one test file): `✓ title (5 ms)`, `✕`, `○ skipped title`,
//!   `✎ todo title`; its failure headings `● suite › title` name failing tests even without
//!   `--verbose`, when passing tests are not printed at all.
//! - mocha (spec reporter): `✔ title (105ms)`, `1) title` (failed), `- title` (pending); the
//!   failure details after `N passing` are not read as tests.
//! - vitest: `✓ file > suite > title 2ms`, `×`, `↓` (`--reporter=verbose`), or the default
//!   tree under `❯ file (4 tests | 1 failed)` (passing files are not listed test by test);
//!   `FAIL file > suite > title` headings.
//! - karma (mocha or spec reporter): `✔`/`✓` and `✖`/`✗` under indented suites, up to
//!   `SUMMARY:`.
//!
//! A test's name is its suites' and its own title joined with ` > `.

use super::{Status, Tests};

/// The deepest suite nesting followed.
pub(crate) const MAX_DEPTH: usize = 32;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Jest,
    Mocha,
    Vitest,
    Karma,
}

const DIALECTS: [Dialect; 4] = [
    Dialect::Jest,
    Dialect::Mocha,
    Dialect::Vitest,
    Dialect::Karma,
];

impl Dialect {
    /// Whether `line` (trimmed) is this runner's summary.
    fn summary(self, line: &str) -> bool {
        match self {
            Dialect::Jest => line.starts_with("Tests:") || line.starts_with("Test Suites:"),
            Dialect::Mocha => count_then(line, "passing") || count_then(line, "failing"),
            Dialect::Vitest => line.starts_with("Test Files "),
            Dialect::Karma => {
                line.starts_with("SUMMARY:") || line.contains("Executed ") && line.contains(" of ")
            }
        }
    }

    /// The status a line's mark gives, and the title after it.
    fn mark(self, body: &str) -> Option<(Status, &str)> {
        let marks: &[(&str, Status)] = match self {
            Dialect::Jest => &[
                ("✓ ", Status::Passed),
                ("✕ ", Status::Failed),
                ("○ skipped ", Status::Skipped),
                ("○ ", Status::Skipped),
                ("✎ todo ", Status::Skipped),
            ],
            Dialect::Mocha => &[
                ("✔ ", Status::Passed),
                ("✓ ", Status::Passed),
                ("- ", Status::Skipped),
            ],
            Dialect::Vitest => &[
                ("✓ ", Status::Passed),
                ("× ", Status::Failed),
                ("↓ ", Status::Skipped),
            ],
            Dialect::Karma => &[
                ("✔ ", Status::Passed),
                ("✓ ", Status::Passed),
                ("✖ ", Status::Failed),
                ("✗ ", Status::Failed),
            ],
        };
        for (mark, status) in marks {
            if let Some(title) = body.strip_prefix(mark) {
                return Some((*status, title));
            }
        }
        if self == Dialect::Mocha {
            // `12) title`: the failure's number.
            let digits = body.len() - body.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                if let Some(title) = body[digits..].strip_prefix(") ") {
                    return Some((Status::Failed, title));
                }
            }
        }
        None
    }

    /// The title without the duration the runner appends.
    fn title(self, title: &str) -> String {
        let mut t = title.trim_end();
        if let Some((head, tail)) = t.rsplit_once(" (") {
            if is_duration(tail.trim_end_matches(')')) && tail.ends_with(')') {
                t = head;
            }
        }
        if self == Dialect::Vitest {
            t = t.trim_end_matches(" [skipped]");
            if let Some((head, tail)) = t.rsplit_once(' ') {
                if is_duration(tail) {
                    t = head;
                }
            }
        }
        t.trim_end().to_string()
    }
}

/// `N word` at the start of `line` (mocha's `3 passing (14ms)`).
fn count_then(line: &str, word: &str) -> bool {
    let rest = line.trim_start_matches(|c: char| c.is_ascii_digit());
    rest.len() < line.len() && rest.strip_prefix(' ').is_some_and(|r| r.starts_with(word))
}

/// `15 ms`, `105ms`, `1.2s`, `2.5 s`.
fn is_duration(s: &str) -> bool {
    let s = s.trim();
    let num = s.trim_end_matches(['m', 's']).trim_end();
    num.len() < s.len()
        && (s.ends_with("ms") || s.ends_with('s'))
        && !num.is_empty()
        && num.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// Every detected dialect's tests.
pub(crate) fn parse(text: &str) -> Tests {
    let mut tests = Tests::new();
    for dialect in DIALECTS {
        if text.lines().any(|l| dialect.summary(l.trim())) {
            for (k, v) in read(dialect, text) {
                tests.entry(k).or_insert(v);
            }
        }
    }
    tests
}

/// A vitest file line (`❯ a.test.ts (4 tests | 1 failed) 23ms`, `✓ a.test.ts (4 tests)`):
/// the file's name.
fn vitest_file(body: &str) -> Option<&str> {
    let rest = body
        .strip_prefix("❯ ")
        .or_else(|| body.strip_prefix("✓ "))
        .or_else(|| body.strip_prefix("× "))?;
    let (file, counts) = rest.split_once(" (")?;
    let n = counts.trim_start_matches(|c: char| c.is_ascii_digit());
    (n.len() < counts.len() && n.starts_with(" test")).then_some(file)
}

/// A failure heading that names a test by its path: jest's `● a › b`, vitest's
/// `FAIL file > a > b`.
fn heading(dialect: Dialect, body: &str) -> Option<String> {
    match dialect {
        Dialect::Jest => {
            let path = body.strip_prefix("● ")?;
            let skip = path.starts_with("Test suite failed to run") || path.starts_with("Console");
            (!skip).then(|| path.split(" › ").collect::<Vec<_>>().join(" > "))
        }
        Dialect::Vitest => {
            let path = body.strip_prefix("FAIL ")?.trim_start();
            (path.contains(" > ")).then(|| path.to_string())
        }
        _ => None,
    }
}

fn read(dialect: Dialect, text: &str) -> Tests {
    let mut tests = Tests::new();
    // The enclosing suites: (indentation, title).
    let mut stack: Vec<(usize, String)> = Vec::new();
    // Mocha's failure details, after its summary: numbered titles there are not results.
    let mut details = false;
    for line in text.lines() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let body = body.trim_end();
        if body.is_empty() {
            continue;
        }
        if dialect == Dialect::Karma && body.starts_with("SUMMARY:") {
            break;
        }
        if dialect.summary(body) {
            details = dialect == Dialect::Mocha;
            stack.clear();
            continue;
        }
        if dialect == Dialect::Jest && (body.starts_with("PASS ") || body.starts_with("FAIL ")) {
            // A test file's heading: its tree follows.
            stack.clear();
            continue;
        }
        stack.retain(|(i, _)| *i < indent);
        if let Some(path) = heading(dialect, body) {
            tests.insert(path, Status::Failed);
            continue;
        }
        if dialect == Dialect::Vitest {
            if let Some(file) = vitest_file(body) {
                stack.push((indent, file.to_string()));
                continue;
            }
        }
        match dialect.mark(body) {
            Some((status, _)) if details && status != Status::Passed => continue,
            Some((status, title)) => {
                let mut key: Vec<&str> = stack.iter().map(|(_, t)| t.as_str()).collect();
                let title = dialect.title(title);
                key.push(&title);
                let key = key.join(" > ");
                // A heading read first (jest prints it after the tree) keeps its status.
                tests.entry(key).or_insert(status);
            }
            // Deeper than any real suite tree: bytes the sandbox wrote are not followed
            // further (the names and their aliases stay bounded).
            None if indent > 0 && stack.len() < MAX_DEPTH => stack.push((indent, body.to_string())),
            None => {}
        }
    }
    tests
}
