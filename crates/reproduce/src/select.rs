//! Running tests alone: an instance's test command narrowed to the tests a variation run is
//! about — pytest node ids, `go test -run`, node's `--test-name-pattern`, jest's `-t`,
//! mocha's `--grep` — or the whole command where the runner is not recognised or the
//! command cannot be narrowed safely. Pure: a function of (runner, tests, command),
//! unit-tested; the run records what it ran ([`Selection`], in the run's `env`).
//!
//! Only the command's last simple command is read (after its last `&&`, `||`, `;` or
//! newline; the one before a final `|| true`): set-up steps before it (`npm install ... &&
//! node --test`) are kept as written.
//! A last command with a pipe, a redirection, a subshell, a command substitution, a
//! background `&` or a comment is not narrowed. Test ids go into the command single-quoted,
//! and into a runner's pattern with every regular-expression metacharacter escaped, so an
//! id is never read by the shell nor as a pattern.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::input::Instance;
use super::outcome::{self, Tests};
use super::runners::Aliases;
use super::store::RunRow;
use super::Arm;

/// A test runner whose command line can select single tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runner {
    Pytest,
    GoTest,
    NodeTest,
    Jest,
    Mocha,
}

impl Runner {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Runner::Pytest => "pytest",
            Runner::GoTest => "go_test",
            Runner::NodeTest => "node_test",
            Runner::Jest => "jest",
            Runner::Mocha => "mocha",
        }
    }
}

/// What a variation run ran: recorded with the run (`runs.env`, `selection`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Selection {
    /// The runner the command was narrowed for; `null`: the whole command ran.
    pub runner: Option<String>,
    /// The tests the run is about (those run alone, or looked at in the whole run).
    pub tests: Vec<String>,
    /// The command run.
    pub command: String,
}

impl Selection {
    /// Whether the run ran only `tests` (others it lists are not its business).
    pub(crate) fn alone(&self) -> bool {
        self.runner.is_some()
    }
}

/// The selection of `tests` from `test_cmd`: narrowed where the runner allows, the whole
/// command otherwise.
pub(crate) fn select(tests: &[String], test_cmd: &str) -> Selection {
    let narrowed = last_command(test_cmd).and_then(|(words, tail)| {
        let (runner, at) = runner_of(&words)?;
        let cmd = command(runner, tests, test_cmd, &words[at..], tail)?;
        Some((runner, cmd))
    });
    match narrowed {
        Some((runner, command)) if !tests.is_empty() => Selection {
            runner: Some(runner.name().into()),
            tests: tests.to_vec(),
            command,
        },
        _ => Selection {
            runner: None,
            tests: tests.to_vec(),
            command: test_cmd.into(),
        },
    }
}

/// One word of a shell command: its span in the command and its text unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    start: usize,
    end: usize,
    text: String,
}

/// The words of the last simple command of `cmd`, and where it ends (the command's
/// length, trailing blanks left out); `None` when it cannot be narrowed safely (module
/// docs) or quotes are not closed.
fn last_command(cmd: &str) -> Option<(Vec<Word>, usize)> {
    let b = cmd.as_bytes();
    let mut words: Vec<Word> = Vec::new();
    let mut cur: Option<Word> = None;
    // Set by what keeps the current simple command from being narrowed.
    let mut bad = false;
    // A separator was seen (its byte: `|` for `||`, `&` for `&&`, `;`, newline): the next
    // word or operator starts a new simple command (so a trailing newline or `;` keeps the
    // last one). The command before the last one, and what joined them.
    let mut sep: Option<u8> = None;
    let mut prev: Option<(Vec<Word>, bool)> = None;
    let mut joined: Option<u8> = None;
    let mut new_segment = |sep: &mut Option<u8>, words: &mut Vec<Word>, bad: &mut bool| {
        if let Some(s) = sep.take() {
            prev = Some((std::mem::take(words), std::mem::take(bad)));
            joined = Some(s);
        }
    };
    let mut i = 0;
    fn flush(cur: &mut Option<Word>, words: &mut Vec<Word>, end: usize) {
        if let Some(mut w) = cur.take() {
            w.end = end;
            words.push(w);
        }
    }
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' => flush(&mut cur, &mut words, i),
            b'\n' | b';' => {
                flush(&mut cur, &mut words, i);
                sep = sep.or(Some(c));
            }
            b'&' | b'|' if b.get(i + 1) == Some(&c) => {
                flush(&mut cur, &mut words, i);
                sep = Some(c);
                i += 1;
            }
            b'&' | b'|' | b'<' | b'>' | b'(' | b')' | b'`' | b'{' | b'}' => {
                flush(&mut cur, &mut words, i);
                new_segment(&mut sep, &mut words, &mut bad);
                bad = true;
            }
            b'#' if cur.is_none() => {
                // A comment, to the end of its line.
                while b.get(i + 1).is_some_and(|&n| n != b'\n') {
                    i += 1;
                }
            }
            _ => {
                if cur.is_none() {
                    new_segment(&mut sep, &mut words, &mut bad);
                }
                let w = cur.get_or_insert_with(|| Word {
                    start: i,
                    end: i,
                    text: String::new(),
                });
                match c {
                    b'\'' => {
                        let close = cmd[i + 1..].find('\'')? + i + 1;
                        w.text.push_str(&cmd[i + 1..close]);
                        i = close;
                    }
                    b'"' => {
                        let mut j = i + 1;
                        loop {
                            match *b.get(j)? {
                                b'"' => break,
                                b'\\' => j += 2,
                                b'$' | b'`' => {
                                    bad = true;
                                    j += 1;
                                }
                                _ => j += 1,
                            }
                        }
                        w.text.push_str(&cmd[i + 1..j].replace('\\', ""));
                        i = j;
                    }
                    b'\\' => {
                        let next = cmd[i + 1..].chars().next()?;
                        w.text.push(next);
                        i += next.len_utf8();
                    }
                    b'$' if b.get(i + 1) == Some(&b'(') => bad = true,
                    _ => {
                        let ch = cmd[i..].chars().next()?;
                        w.text.push(ch);
                        i += ch.len_utf8() - 1;
                    }
                }
            }
        }
        i += 1;
    }
    flush(&mut cur, &mut words, b.len());
    // `RUNNER … || true`: the runner's status is swallowed, and the runner is the command.
    let swallowed = matches!(&words[..], [w] if w.text == "true" || w.text == ":");
    if swallowed && !bad && joined == Some(b'|') {
        if let Some((w, was_bad)) = prev {
            (words, bad) = (w, was_bad);
        }
    }
    if bad {
        return None;
    }
    let end = words.last()?.end;
    Some((words, end))
}

/// The file name of a command word (`/usr/bin/pytest` → `pytest`).
fn base(w: &Word) -> &str {
    w.text.rsplit('/').next().unwrap_or("")
}

/// The runner of a simple command and the index of the word its own options follow.
fn runner_of(words: &[Word]) -> Option<(Runner, usize)> {
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).map(|w| w.text.as_str());
        match base(w) {
            "pytest" | "py.test" => return Some((Runner::Pytest, i + 1)),
            "-m" if next == Some("pytest") => return Some((Runner::Pytest, i + 2)),
            "go" if next == Some("test") => return Some((Runner::GoTest, i + 2)),
            "node" | "nodejs" => {
                // `node --test`: the flag before any script.
                let test = words[i + 1..]
                    .iter()
                    .take_while(|w| w.text.starts_with('-'))
                    .position(|w| w.text == "--test")?;
                return Some((Runner::NodeTest, i + 1 + test));
            }
            "jest" => return Some((Runner::Jest, i + 1)),
            "mocha" | "_mocha" => return Some((Runner::Mocha, i + 1)),
            _ => {}
        }
    }
    None
}

/// pytest's options that take their value as the next word.
const PYTEST_VALUED: &[&str] = &[
    "-k",
    "-m",
    "-p",
    "-c",
    "-o",
    "-W",
    "-n",
    "-r",
    "--maxfail",
    "--rootdir",
    "--basetemp",
    "--confcutdir",
    "--deselect",
    "--ignore",
    "--ignore-glob",
    "--junitxml",
    "--junit-xml",
    "--log-level",
    "--log-file",
    "--durations",
    "--tb",
    "--import-mode",
    "--capture",
    "--override-ini",
    "--cov",
    "--cov-report",
    "--timeout",
    "--dist",
    "--reruns",
];

/// The narrowed command, `None` where `runner` cannot select `tests` from `words` (the
/// runner's word and what follows it).
fn command(
    runner: Runner,
    tests: &[String],
    cmd: &str,
    words: &[Word],
    end: usize,
) -> Option<String> {
    let appended = |arg: String| format!("{} {arg}{}", &cmd[..end], &cmd[end..]);
    match runner {
        Runner::Pytest => {
            // Node ids replace the paths the command names (a directory would collect
            // every test in it).
            if !tests.iter().all(|t| t.contains("::")) {
                return None;
            }
            let mut drop = Vec::new();
            let mut value_next = false;
            for w in words {
                if value_next {
                    value_next = false;
                } else if w.text.starts_with('-') {
                    value_next = PYTEST_VALUED.contains(&w.text.as_str());
                } else {
                    drop.push((w.start, w.end));
                }
            }
            let mut out = String::new();
            let mut at = 0;
            for (s, e) in drop {
                out.push_str(cmd[at..s].trim_end_matches([' ', '\t']));
                at = e;
            }
            out.push_str(&cmd[at..end]);
            for t in tests {
                out.push(' ');
                out.push_str(&quote(t));
            }
            out.push_str(&cmd[end..]);
            Some(out)
        }
        Runner::GoTest => {
            if words.iter().any(|w| w.text == "-args") {
                return None;
            }
            Some(appended(format!("-run {}", quote(&go_pattern(tests)))))
        }
        Runner::NodeTest => {
            let flag = words.first()?;
            let titles: Vec<String> = tests.iter().map(|t| leaf(t).to_string()).collect();
            Some(format!(
                "{} --test-name-pattern={}{}",
                &cmd[..flag.end],
                quote(&format!("^{}$", alternation(&titles))),
                &cmd[flag.end..]
            ))
        }
        Runner::Jest | Runner::Mocha => {
            let names: Vec<String> = tests.iter().map(|t| t.replace(" > ", " ")).collect();
            let flag = if runner == Runner::Jest {
                "-t"
            } else {
                "--grep"
            };
            Some(appended(format!(
                "{flag} {}",
                quote(&format!("{}$", alternation(&names)))
            )))
        }
    }
}

/// A test's own title: the last part of a ` > `-joined path.
fn leaf(id: &str) -> &str {
    id.rsplit(" > ").next().unwrap_or(id)
}

/// `(a|b)` of the escaped names, or the one escaped name.
fn alternation(names: &[String]) -> String {
    let mut escaped: Vec<String> = names.iter().map(|n| escape(n)).collect();
    escaped.dedup();
    if escaped.len() == 1 {
        escaped.remove(0)
    } else {
        format!("({})", escaped.join("|"))
    }
}

/// `go test -run`'s pattern: one test level by level (`^TestA$/^sub$`), several by their
/// top-level names (`^(TestA|TestB)$`, subtests included).
fn go_pattern(tests: &[String]) -> String {
    if let [one] = tests {
        return one
            .split('/')
            .map(|level| format!("^{}$", escape(level)))
            .collect::<Vec<_>>()
            .join("/");
    }
    let mut top: Vec<String> = tests
        .iter()
        .map(|t| t.split('/').next().unwrap_or(t).to_string())
        .collect();
    top.sort();
    top.dedup();
    format!("^{}$", alternation(&top))
}

/// `text` with every regular-expression metacharacter escaped (RE2 and JavaScript alike).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` single-quoted for `sh` (a `'` inside as `'\''`).
pub(crate) fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The listed tests of `inst` whose verdict differs between its `shim` runs (all the same)
/// and its `no_shim` runs: what its variation runs are about.
pub(crate) fn differing(inst: &Instance, rows: &[RunRow]) -> Vec<String> {
    let verdicts = |arm: Arm, test: &str| -> std::collections::BTreeSet<bool> {
        rows.iter()
            .filter(|r| r.instance_id == inst.instance_id && r.arm == arm && r.infra.is_none())
            .map(|r| {
                let tests: Tests = serde_json::from_str(&r.tests).unwrap_or_default();
                outcome::lookup(&tests, &Aliases::new(&tests), test).is_some_and(|s| s.passes())
            })
            .collect()
    };
    inst.fail_to_pass
        .iter()
        .chain(&inst.pass_to_pass)
        .filter(|t| {
            let (shim, no_shim) = (verdicts(Arm::Shim, t), verdicts(Arm::NoShim, t));
            shim.len() == 1 && !no_shim.is_empty() && no_shim != shim
        })
        .cloned()
        .collect()
}

/// The tests each instance's variation runs select, by instance (those with any).
pub(crate) fn selections(insts: &[Instance], rows: &[RunRow]) -> BTreeMap<String, Vec<String>> {
    insts
        .iter()
        .map(|i| (i.instance_id.clone(), differing(i, rows)))
        .filter(|(_, t)| !t.is_empty())
        .collect()
}

#[cfg(test)]
mod tests;
