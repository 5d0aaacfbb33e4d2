//! Test runners' output, read as each runner prints it: `go test` (`-v` lines and `-json`
//! events, [`go`]), the tree reporters of jest, mocha, vitest and karma ([`tree`]), TAP
//! ([`tap`]) and pytest ([`pytest`]). Terminal escapes (colours,
//! cursor moves) are removed before any of them reads a line ([`clean`]), so
//! `--color=yes` and `FORCE_COLOR` change nothing.
//!
//! Names are kept as the runner prints them: `TestX/sub` for Go, the suite path joined with
//! ` > ` for the tree reporters (`suite > inner > test`, as vitest and node's reporter show
//! it). An instance may list a tree test by that path, by the path joined with spaces (jest's
//! `fullName`, mocha's `fullTitle()`), by a tail of it, or by its own title (SWE-bench's jest
//! parser keys by title): [`Aliases`] answers those.

pub(crate) mod go;
pub(crate) mod pytest;
pub(crate) mod tap;
pub(crate) mod tree;

use std::collections::{BTreeMap, HashMap};

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

    /// The inverse of [`Status::name`].
    pub(crate) fn parse(name: &str) -> Option<Status> {
        [
            Status::Passed,
            Status::Failed,
            Status::Error,
            Status::Skipped,
            Status::Xfail,
            Status::Xpass,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    pub(crate) fn from_word(w: &str) -> Option<Status> {
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
/// as written and matched through `outcome::dotted`.
pub(crate) type Tests = BTreeMap<String, Status>;

/// Output longer than this is read up to here only (a runner's output is bytes the sandbox
/// wrote; the parsers are linear, this bounds their memory).
pub(crate) const MAX_OUTPUT: usize = 64 << 20;

/// `text` without terminal escapes (CSI, OSC and the rest, via `strip-ansi-escapes`), and
/// with a carriage return's overwritten line reduced to what follows it (progress lines).
/// Tabs are kept (`go test` separates its package lines' fields with them).
pub(crate) fn clean(text: &[u8]) -> String {
    let text = &text[..text.len().min(MAX_OUTPUT)];
    let mut out = String::with_capacity(text.len());
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let shown = match line.iter().rposition(|&b| b == b'\r') {
            Some(i) => &line[i + 1..],
            None => line,
        };
        for (i, piece) in shown.split(|&b| b == b'\t').enumerate() {
            if i > 0 {
                out.push('\t');
            }
            out.push_str(&String::from_utf8_lossy(&strip_ansi_escapes::strip(piece)));
        }
        out.push('\n');
    }
    // The split gives one piece after a final newline.
    if text.ends_with(b"\n") || text.is_empty() {
        out.pop();
    }
    out
}

/// Every runner's statuses from one cleaned output, in order of precedence: `go test -json`,
/// `go test -v`, the tree reporters, TAP, pytest. A name the output gives twice keeps its
/// first status.
pub(crate) fn parse(text: &str) -> Tests {
    let mut tests = Tests::new();
    let mut add = |found: Tests| {
        for (k, v) in found {
            tests.entry(k).or_insert(v);
        }
    };
    add(go::parse_json(text));
    add(go::parse_verbose(text));
    add(tree::parse(text));
    add(tap::parse_tap(text)
        .into_iter()
        .map(|(k, t)| (k, tap_status(t)))
        .collect());
    add(pytest::parse_pytest(text));
    tests
}

/// The status SWE-bench grades a TAP result as: a `# TODO` that fails is an expected
/// failure.
fn tap_status(t: tap::Tap) -> Status {
    match t {
        tap::Tap::Ok => Status::Passed,
        tap::Tap::NotOk => Status::Failed,
        tap::Tap::Skip => Status::Skipped,
        tap::Tap::TodoNotOk => Status::Xfail,
        tap::Tap::TodoOk => Status::Xpass,
    }
}

/// The other names a tree test may be listed by: for `a > b > c`, `a b c` (jest's
/// `fullName`, mocha's `fullTitle()`), `a › b › c` (jest's failure headings) and each tail
/// (`b > c`, `b c`, `c`). Where two tests share an alias, the alias has the worse status
/// (a listed title that names a failing test somewhere does not pass).
pub(crate) struct Aliases {
    by_alias: HashMap<String, Status>,
}

impl Aliases {
    pub(crate) fn new(tests: &Tests) -> Aliases {
        let mut by_alias: HashMap<String, Status> = HashMap::new();
        for (key, &status) in tests {
            // pytest node ids and Go names have no suite path.
            if key.contains("::") || !key.contains(" > ") {
                continue;
            }
            let parts: Vec<&str> = key.split(" > ").collect();
            if parts.len() > tree::MAX_DEPTH + 1 {
                continue;
            }
            for start in 0..parts.len() {
                let tail = &parts[start..];
                let mut names = vec![tail.join(" "), tail.join(" › ")];
                if start > 0 {
                    names.push(tail.join(" > "));
                }
                for name in names {
                    let entry = by_alias.entry(name).or_insert(status);
                    if entry.passes() && !status.passes() {
                        *entry = status;
                    }
                }
            }
        }
        Aliases { by_alias }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Status> {
        self.by_alias.get(id).copied()
    }
}

#[cfg(test)]
mod tests;
