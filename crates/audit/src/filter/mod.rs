//! `reprorun audit filter` (`spec/audit.md`, "Filter"): each issue's relevance
//! (`reproducibility`) and `category`, from the built-in rules ([`rules`]) or a judge
//! command; labels already in the input win. Writes the normalized issues as JSONL.

mod rules;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::Deserialize;
use thiserror::Error;

use super::input::{self, Category, Issue};
pub(crate) use rules::classify;

#[derive(Debug, Error)]
pub enum FilterError {
    #[error("--judge-cmd on issue {issue}: {reason}")]
    Judge { issue: String, reason: String },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `reprorun audit filter` options.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// The issues: a JSON/JSONL file (gh `issue list --json` output or REST issue objects;
    /// each names its repository by `repo` or its URL) or a directory of `owner__name.json`.
    #[arg(long, value_name = "PATH")]
    pub issues: PathBuf,
    /// Where to write the labelled issues (JSONL); stdout without it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// A command (run by `/bin/sh -c`) that judges one issue: it reads the issue as JSON on
    /// stdin and prints `{"reproducibility": true|false, "category": "..."|null}`.
    #[arg(long, value_name = "CMD")]
    pub judge_cmd: Option<String>,
}

/// Runs `reprorun audit filter`.
pub(crate) fn command(args: FilterArgs) -> Result<(), super::AuditError> {
    let loaded = input::load_issues(&args.issues)?;
    if let Some(bad) = loaded.bad.into_iter().next() {
        return Err(bad.into());
    }
    let mut out = String::new();
    for mut issue in loaded.items {
        label(&mut issue, args.judge_cmd.as_deref())?;
        // Serializing plain data into a String cannot fail.
        out.push_str(&serde_json::to_string(&issue).unwrap_or_default());
        out.push('\n');
    }
    match &args.out {
        Some(path) => {
            reprorun_runtime::sys::write_atomic(path, out.as_bytes(), 0o644).map_err(|source| {
                FilterError::Write {
                    path: path.clone(),
                    source,
                }
            })?
        }
        None => std::io::stdout()
            .lock()
            .write_all(out.as_bytes())
            .map_err(super::AuditError::Print)?,
    }
    Ok(())
}

/// Labels one issue unless the input did: the judge command's verdict, else the rules'.
pub(crate) fn label(issue: &mut Issue, judge_cmd: Option<&str>) -> Result<(), FilterError> {
    if issue.reproducibility.is_some() {
        if issue.label_source.is_none() {
            issue.label_source = Some("input".into());
        }
        return Ok(());
    }
    let (relevant, category, source) = match judge_cmd {
        Some(cmd) => {
            let (r, c) = judge(issue, cmd)?;
            (r, c, "judge")
        }
        None => {
            let (r, c) = classify(issue);
            (r, c, "rules")
        }
    };
    issue.reproducibility = Some(relevant);
    issue.category = if relevant {
        category.or(issue.category)
    } else {
        None
    };
    issue.label_source = Some(source.into());
    Ok(())
}

#[derive(Deserialize)]
struct Verdict {
    reproducibility: bool,
    #[serde(default)]
    category: Option<String>,
}

/// Runs the judge command on one issue.
fn judge(issue: &Issue, cmd: &str) -> Result<(bool, Option<Category>), FilterError> {
    let fail = |reason: String| FilterError::Judge {
        issue: issue.id(),
        reason,
    };
    let json = serde_json::to_vec(issue).map_err(|e| fail(e.to_string()))?;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("start /bin/sh: {e}")))?;
    // Written from a thread so that a judge that prints before reading cannot block us.
    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            // A judge that ignores its input closes the pipe early: not an error.
            let _ = s.write_all(&json);
        }
    });
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("wait: {e}")))?;
    let _ = writer.join();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(fail(format!("exited with {}: {}", out.status, last.trim())));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Verdict = serde_json::from_str(text.trim()).map_err(|e| {
        fail(format!(
            "expected {{\"reproducibility\": true|false, \"category\": ...}} on stdout: {e}"
        ))
    })?;
    let category = match v.category.as_deref() {
        None | Some("") => None,
        Some(c) => Some(Category::parse(c).ok_or_else(|| {
            fail(format!(
                "category {c:?} is not crash_immediate, crash_late, silent_wrong_setup or silent_wrong_number"
            ))
        })?),
    };
    Ok((v.reproducibility, category))
}

#[cfg(test)]
mod tests;
