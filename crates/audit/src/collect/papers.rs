//! `papers.jsonl` to a plan (pure): each paper's repository URL normalised to `owner/name`,
//! or the reason the method drops the paper (no link, not GitHub, a second paper of the same
//! repository, no paper).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::CollectError;
use crate::input::is_repo_name;
use reprorun_pipeline::records::{read_records, string_field};

/// Where the paper comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PaperSource {
    /// Downloaded (without the token) once.
    Url(String),
    /// A local file (relative paths against the papers file's directory).
    Path(PathBuf),
}

/// A paper whose repository is collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Job {
    pub(crate) paper_id: String,
    pub(crate) title: Option<String>,
    pub(crate) venue: Option<String>,
    pub(crate) year: Option<Value>,
    /// `owner/name` as normalised from the link (the API's `full_name` may differ in case).
    pub(crate) repo: String,
    pub(crate) paper: PaperSource,
}

/// A paper left out, and why (written to `skipped.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Skip {
    pub(crate) paper_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) repo_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) repo: Option<String>,
    pub(crate) reason: String,
}

/// What to collect, in the papers file's order, and what is left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) jobs: Vec<Job>,
    pub(crate) skipped: Vec<Skip>,
}

/// `owner/name` of a GitHub repository link, or why the link is none: `https://`, `http://`,
/// `git@github.com:`, `ssh://git@`, `git://`, bare `github.com/...` and `www.`; `.git`,
/// trailing paths (`tree/BRANCH/...`, `blob/...`, `issues`), queries and fragments dropped.
pub(crate) fn normalize_repo_url(url: &str) -> Result<String, String> {
    let t = url.trim();
    if t.is_empty() {
        return Err("no repository link".into());
    }
    let rest = t
        .strip_prefix("git@github.com:")
        .map(|r| format!("github.com/{r}"))
        .unwrap_or_else(|| {
            let no_scheme = t.split_once("://").map_or(t, |(_, r)| r);
            let no_user = no_scheme
                .split_once('@')
                .filter(|(user, _)| !user.contains('/'))
                .map_or(no_scheme, |(_, r)| r);
            no_user.to_string()
        });
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.to_ascii_lowercase();
    let host = host.split(':').next().unwrap_or_default();
    if host != "github.com" && host != "www.github.com" {
        return Err(format!("not a GitHub repository ({host})"));
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let (Some(owner), Some(name)) = (parts.next(), parts.next()) else {
        return Err(format!("{t}: no owner/name"));
    };
    let name = name.strip_suffix(".git").unwrap_or(name);
    let repo = format!("{owner}/{name}");
    if !is_repo_name(&repo) || RESERVED.contains(&owner.to_ascii_lowercase().as_str()) {
        return Err(format!("{t}: not a repository link"));
    }
    Ok(repo)
}

/// github.com's own pages, never an owner.
const RESERVED: [&str; 8] = [
    "orgs",
    "topics",
    "features",
    "marketplace",
    "settings",
    "sponsors",
    "collections",
    "search",
];

/// Reads `papers.jsonl` (or a JSON array) into a plan. A record without `paper_id`, or a
/// `paper_id` twice, is an error of the file; everything else is a skip with its reason.
pub(crate) fn plan(path: &Path) -> Result<Plan, CollectError> {
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let base = std::path::absolute(&base).unwrap_or(base);
    let records = read_records(path, "papers").map_err(|e| CollectError::Papers {
        reason: e.to_string(),
    })?;
    plan_records(&records, &base).map_err(|(line, reason)| CollectError::Papers {
        reason: format!("{}:{line}: {reason}", path.display()),
    })
}

/// [`plan`] on records already read; an error is `(line, reason)`.
pub(crate) fn plan_records(
    records: &[(usize, Map<String, Value>)],
    base: &Path,
) -> Result<Plan, (usize, String)> {
    let mut out = Plan::default();
    let mut seen_ids = BTreeMap::new();
    let mut seen_repos: BTreeMap<String, String> = BTreeMap::new();
    for (line, obj) in records {
        let paper_id =
            string_field(obj, "paper_id").ok_or((*line, "no \"paper_id\" string".into()))?;
        if let Some(first) = seen_ids.insert(paper_id.clone(), *line) {
            return Err((*line, format!("paper_id {paper_id:?} also on line {first}")));
        }
        let repo_url = string_field(obj, "repo_url");
        let skip = |repo: Option<String>, reason: String| Skip {
            paper_id: paper_id.clone(),
            repo_url: repo_url.clone(),
            repo,
            reason,
        };
        let repo = match normalize_repo_url(repo_url.as_deref().unwrap_or_default()) {
            Ok(r) => r,
            Err(reason) => {
                out.skipped.push(skip(None, reason));
                continue;
            }
        };
        if let Some(other) = seen_repos.get(&repo.to_ascii_lowercase()) {
            let reason = format!("repository {repo} is already paper {other}'s");
            out.skipped.push(skip(Some(repo), reason));
            continue;
        }
        let paper = match (
            string_field(obj, "paper_url"),
            string_field(obj, "paper_path"),
        ) {
            (_, Some(p)) => PaperSource::Path(base.join(p)),
            (Some(u), None) => PaperSource::Url(u),
            (None, None) => {
                let reason = "no paper_url or paper_path".to_string();
                out.skipped.push(skip(Some(repo), reason));
                continue;
            }
        };
        seen_repos.insert(repo.to_ascii_lowercase(), paper_id.clone());
        out.jobs.push(Job {
            paper_id: paper_id.clone(),
            title: string_field(obj, "title"),
            venue: string_field(obj, "venue"),
            year: obj.get("year").filter(|v| !v.is_null()).cloned(),
            repo,
            paper,
        });
    }
    Ok(out)
}
