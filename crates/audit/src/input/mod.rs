//! `reprorun audit`'s input (`spec/audit.md`, "Input"): the pairs (paper + repository, JSON
//! array or JSONL) and the issues as users export them offline: `gh issue list --json ...`
//! output (camelCase), GitHub REST issue objects (snake_case, pull requests skipped), with
//! optional REST timeline events, in one file or a directory of `owner__name.json` files.
//! Both spellings become one [`Issue`]. Problems of one record (a bad date, an issue without
//! a repository) are collected per record so that `--skip-bad` can go on without them;
//! problems of a whole file stop at once.

mod issue;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

pub(crate) use issue::issue_from_record;
use reprorun_pipeline::records::{read_records, string_field, Records, RecordsError};

#[derive(Debug, Error)]
pub enum InputError {
    /// Reading the file, a record of it, or the file as a whole (shared by every pipeline's
    /// input, `reprorun_pipeline::records`).
    #[error(transparent)]
    Records(#[from] RecordsError),
    #[error("pair {paper_id}: {reason}")]
    Pair { paper_id: String, reason: String },
    #[error("issue {id}: {reason}")]
    Issue { id: String, reason: String },
}

/// Where an issue's labels came from.
pub(crate) const LABEL_SOURCES: [&str; 3] = ["input", "rules", "judge"];

/// What went wrong in a reproducibility issue, as ReproRepo counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Category {
    /// Fails at the start: install, import, a missing file.
    CrashImmediate,
    /// Fails after the run got going: shapes, memory, keys, NaNs mid-training.
    CrashLate,
    /// Runs, but set up wrongly: missing data, config or hyper-parameters.
    SilentWrongSetup,
    /// Runs, but the numbers differ from the paper's.
    SilentWrongNumber,
}

impl Category {
    pub(crate) const ALL: [Category; 4] = [
        Category::CrashImmediate,
        Category::CrashLate,
        Category::SilentWrongSetup,
        Category::SilentWrongNumber,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Category::CrashImmediate => "crash_immediate",
            Category::CrashLate => "crash_late",
            Category::SilentWrongSetup => "silent_wrong_setup",
            Category::SilentWrongNumber => "silent_wrong_number",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// A comment on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Comment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) author: Option<String>,
    pub(crate) body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created_at: Option<String>,
}

/// A pull request recorded as closing an issue (gh's `closedByPullRequestsReferences`, or a
/// merged pull request cross-referencing it in the REST timeline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClosingPr {
    pub(crate) number: u64,
    /// Its merge commit, when the export names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) merge_commit: Option<String>,
    /// Whether it was merged, when the export says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) merged: Option<bool>,
}

/// A commit named by a timeline event (`closed` or `referenced`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EventCommit {
    pub(crate) event: String,
    pub(crate) commit: String,
}

/// One issue, normalized from either spelling. Times are kept as given (checked RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Issue {
    /// `owner/name`.
    pub(crate) repo: String,
    pub(crate) number: u64,
    pub(crate) title: String,
    pub(crate) body: String,
    /// `open` or `closed`.
    pub(crate) state: String,
    /// Lower case: `completed`, `not_planned`, `reopened`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) state_reason: Option<String>,
    pub(crate) created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) closed_at: Option<String>,
    #[serde(default)]
    pub(crate) labels: Vec<String>,
    #[serde(default)]
    pub(crate) comments: Vec<Comment>,
    pub(crate) url: String,
    #[serde(default)]
    pub(crate) closing_prs: Vec<ClosingPr>,
    #[serde(default)]
    pub(crate) timeline_commits: Vec<EventCommit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reproducibility: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<Category>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fix_commit: Option<String>,
    /// `input`, `rules` or `judge`: who set `reproducibility` and `category`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) label_source: Option<String>,
}

impl Issue {
    /// `owner/name#N`: how messages name an issue.
    pub(crate) fn id(&self) -> String {
        format!("{}#{}", self.repo, self.number)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state == "open"
    }

    /// `created_at` in Unix seconds (checked when the issue was read).
    pub(crate) fn created_secs(&self) -> Result<i64, InputError> {
        strict_time(&self.created_at).ok_or_else(|| InputError::Issue {
            id: self.id(),
            reason: format!("created_at {:?} is not an RFC 3339 time", self.created_at),
        })
    }
}

/// An RFC 3339 date-time (`2024-03-01T12:00:00Z`, an offset, fractions): nothing looser.
pub(crate) fn strict_time(text: &str) -> Option<i64> {
    let t = text.trim();
    if t.len() <= 10 || t.starts_with('@') {
        return None;
    }
    reprorun_runtime::determinism::date::parse_date(t).ok()
}

/// A paper and its repository, resolved: paths absolute (relative ones against the pairs
/// file's directory), `collected_at` in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pair {
    pub(crate) paper_id: String,
    pub(crate) title: Option<String>,
    pub(crate) venue: Option<String>,
    pub(crate) year: Option<String>,
    /// `owner/name`.
    pub(crate) repo: String,
    /// A local git repository (directory) or a git bundle (file).
    pub(crate) clone: PathBuf,
    pub(crate) default_branch: Option<String>,
    pub(crate) paper: PathBuf,
    /// `pdf`, `md` or `txt`.
    pub(crate) paper_kind: String,
    /// As given.
    pub(crate) collected_at: String,
    /// A plain date is the end of that day (UTC): the collection happened on that day.
    pub(crate) collected: i64,
}

/// What was read: the good records, and one error per bad record.
#[derive(Debug)]
pub(crate) struct Loaded<T> {
    pub(crate) items: Vec<T>,
    pub(crate) bad: Vec<InputError>,
}

impl<T> Default for Loaded<T> {
    fn default() -> Self {
        Loaded {
            items: Vec::new(),
            bad: Vec::new(),
        }
    }
}

/// Reads a pairs file (JSON array or JSONL). Sorted by `paper_id`; a `paper_id` or `repo`
/// twice is an error of the file.
pub(crate) fn load_pairs(path: &Path) -> Result<Loaded<Pair>, InputError> {
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let base = std::path::absolute(&base).unwrap_or(base);
    let mut out = Loaded::default();
    let mut ids = BTreeSet::new();
    let mut repos: BTreeMap<String, String> = BTreeMap::new();
    for (line, obj) in read_records(path, "pairs")? {
        let line_err = |reason: String| {
            InputError::from(RecordsError::Line {
                path: path.to_path_buf(),
                line,
                reason,
            })
        };
        let paper_id = string_field(&obj, "paper_id")
            .ok_or_else(|| line_err("no \"paper_id\" string".into()))?;
        if !ids.insert(paper_id.clone()) {
            return Err(line_err(format!("paper_id {paper_id:?} appears twice")));
        }
        match pair_from_record(&obj, &paper_id, &base) {
            Ok(pair) => {
                if let Some(other) = repos.insert(pair.repo.clone(), paper_id.clone()) {
                    return Err(line_err(format!(
                        "repo {} is already the repository of pair {other}: one pair per repository",
                        pair.repo
                    )));
                }
                out.items.push(pair);
            }
            Err(e) => out.bad.push(e),
        }
    }
    out.items.sort_by(|a, b| a.paper_id.cmp(&b.paper_id));
    Ok(out)
}

fn pair_from_record(
    obj: &serde_json::Map<String, Value>,
    paper_id: &str,
    base: &Path,
) -> Result<Pair, InputError> {
    let bad = |reason: String| InputError::Pair {
        paper_id: paper_id.to_string(),
        reason,
    };
    let need = |key: &str| string_field(obj, key).ok_or_else(|| bad(format!("no {key:?} string")));
    let repo = need("repo")?;
    if !is_repo_name(&repo) {
        return Err(bad(format!("repo {repo:?} is not owner/name")));
    }
    let clone = base.join(need("clone")?);
    let paper = base.join(need("paper")?);
    let paper_kind = paper_kind(&paper).ok_or_else(|| {
        bad(format!(
            "paper {}: expected a .pdf, .md, .markdown, .txt or .text file",
            paper.display()
        ))
    })?;
    let collected_at = need("collected_at")?;
    let collected = if collected_at.trim().len() == 10 {
        reprorun_runtime::determinism::date::parse_date(&collected_at)
            .ok()
            .map(|day| day + 86_399)
    } else {
        strict_time(&collected_at)
    }
    .ok_or_else(|| {
        bad(format!(
            "collected_at {collected_at:?}: expected RFC 3339 (2024-03-01T12:00:00Z) or YYYY-MM-DD"
        ))
    })?;
    let year = match obj.get("year") {
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    Ok(Pair {
        paper_id: paper_id.to_string(),
        title: string_field(obj, "title"),
        venue: string_field(obj, "venue"),
        year,
        repo,
        clone,
        default_branch: string_field(obj, "default_branch"),
        paper,
        paper_kind: paper_kind.to_string(),
        collected_at,
        collected,
    })
}

fn paper_kind(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "pdf" => Some("pdf"),
        "md" | "markdown" => Some("md"),
        "txt" | "text" => Some("txt"),
        _ => None,
    }
}

/// `owner/name` with GitHub's characters.
pub(crate) fn is_repo_name(text: &str) -> bool {
    let ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    matches!(text.split_once('/'), Some((o, n)) if ok(o) && ok(n))
}

/// Reads the issues: one JSON/JSONL file (each row names its repository by `repo` or a
/// GitHub URL) or a directory of `owner__name.json[l]` files. Timelines come from each row's
/// `timeline` or a sibling `X.timeline.json`. Sorted by repository and number.
pub(crate) fn load_issues(path: &Path) -> Result<Loaded<Issue>, InputError> {
    let meta = std::fs::metadata(path).map_err(|source| RecordsError::Read {
        what: "issues",
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Loaded::default();
    if meta.is_dir() {
        for (file, repo) in issue_files(path)? {
            read_issue_file(&file, Some(&repo), &mut out)?;
        }
    } else {
        read_issue_file(path, None, &mut out)?;
    }
    out.items
        .sort_by(|a, b| (&a.repo, a.number).cmp(&(&b.repo, b.number)));
    if let Some(w) = out.items.windows(2).find(|w| w[0].id() == w[1].id()) {
        return Err(InputError::from(RecordsError::File {
            path: path.to_path_buf(),
            reason: format!("issue {} appears twice", w[0].id()),
        }));
    }
    Ok(out)
}

/// The `owner__name.json`/`.jsonl` files of a directory, by name.
fn issue_files(dir: &Path) -> Result<Vec<(PathBuf, String)>, InputError> {
    let read_err = |source| RecordsError::Read {
        what: "issues directory",
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name
            .strip_suffix(".jsonl")
            .or_else(|| name.strip_suffix(".json"))
        else {
            continue;
        };
        if stem.ends_with(".timeline") {
            continue;
        }
        let repo = stem.replacen("__", "/", 1);
        if !is_repo_name(&repo) {
            return Err(InputError::from(RecordsError::File {
                path: entry.path(),
                reason: "an issues directory holds owner__name.json files".into(),
            }));
        }
        files.push((entry.path(), repo));
    }
    files.sort();
    Ok(files)
}

fn read_issue_file(
    path: &Path,
    repo: Option<&str>,
    out: &mut Loaded<Issue>,
) -> Result<(), InputError> {
    let records: Records = read_records(path, "issues")?;
    let timelines = read_timelines(path)?;
    for (line, obj) in records {
        match issue_from_record(&obj, repo, &timelines) {
            Ok(Some(issue)) => out.items.push(issue),
            Ok(None) => {}
            Err(e) => out.bad.push(InputError::Issue {
                id: e.id.unwrap_or_else(|| format!("{}:{line}", path.display())),
                reason: e.reason,
            }),
        }
    }
    Ok(())
}

/// `X.timeline.json` beside `X.json`: an object from `"N"` or `"owner/name#N"` to the
/// issue's REST timeline events.
fn read_timelines(issues: &Path) -> Result<BTreeMap<String, Vec<Value>>, InputError> {
    let Some(stem) = issues.file_stem() else {
        return Ok(BTreeMap::new());
    };
    let mut name = stem.to_os_string();
    name.push(".timeline.json");
    let path = issues.with_file_name(name);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(InputError::from(RecordsError::Read {
                what: "timeline",
                path,
                source,
            }))
        }
    };
    serde_json::from_str(&text).map_err(|e| {
        InputError::from(RecordsError::File {
            path,
            reason: format!("expected an object from issue number to an array of events: {e}"),
        })
    })
}

#[cfg(test)]
mod tests;
