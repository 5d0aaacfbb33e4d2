//! One issue record, in gh's camelCase or REST's snake_case (or reprorun's own output,
//! which is the latter), to an [`Issue`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{is_repo_name, strict_time, Category, ClosingPr, Comment, EventCommit, Issue};
use reprorun_pipeline::records::string_field;

type Obj = Map<String, Value>;

/// The first of `keys` present and not null.
fn field<'a>(obj: &'a Obj, keys: &[&str]) -> Option<&'a Value> {
    keys.iter()
        .filter_map(|k| obj.get(*k))
        .find(|v| !v.is_null())
}

fn str_of<'a>(obj: &'a Obj, keys: &[&str]) -> Option<&'a str> {
    field(obj, keys).and_then(Value::as_str)
}

/// Why a record is no issue; `id` (`owner/name#N`) when the record got that far.
#[derive(Debug)]
pub(crate) struct RecordError {
    pub(crate) id: Option<String>,
    pub(crate) reason: String,
}

impl From<&str> for RecordError {
    fn from(reason: &str) -> Self {
        RecordError {
            id: None,
            reason: reason.to_string(),
        }
    }
}

/// The issue a record holds; `None` for a pull request (a REST object with `pull_request`).
/// `repo` is the repository the file belongs to (a directory's `owner__name.json`).
pub(crate) fn issue_from_record(
    obj: &Obj,
    repo: Option<&str>,
    timelines: &BTreeMap<String, Vec<Value>>,
) -> Result<Option<Issue>, RecordError> {
    if field(obj, &["pull_request"]).is_some()
        || obj.get("isPullRequest") == Some(&Value::Bool(true))
    {
        return Ok(None);
    }
    let number = field(obj, &["number"])
        .and_then(Value::as_u64)
        .ok_or("no \"number\"")?;
    let html = str_of(obj, &["html_url", "url"]).and_then(github_issue_url);
    let repo = match (string_field(obj, "repo"), &html, repo) {
        (Some(r), _, _) => r,
        (None, Some((r, _)), _) => r.clone(),
        (None, None, Some(r)) => r.to_string(),
        (None, None, None) => repo_from_api(obj).ok_or(
            "no repository: give \"repo\" (owner/name) or a GitHub \"url\"/\"html_url\", or use a directory of owner__name.json files",
        )?,
    };
    if !is_repo_name(&repo) {
        return Err(RecordError {
            id: None,
            reason: format!("repo {repo:?} is not owner/name"),
        });
    }
    let name = format!("{repo}#{number}");
    issue_fields(obj, repo, number, html, timelines).map_err(|reason| RecordError {
        id: Some(name),
        reason,
    })
}

fn issue_fields(
    obj: &Obj,
    repo: String,
    number: u64,
    html: Option<(String, String)>,
    timelines: &BTreeMap<String, Vec<Value>>,
) -> Result<Option<Issue>, String> {
    let name = format!("{repo}#{number}");
    let state = str_of(obj, &["state"])
        .map(str::to_ascii_lowercase)
        .filter(|s| s == "open" || s == "closed")
        .ok_or("\"state\" is not open/closed")?;
    let time = |keys: &[&str], what: &str| -> Result<Option<String>, String> {
        match str_of(obj, keys) {
            None => Ok(None),
            Some(t) if t.starts_with("0001-01-01") => Ok(None), // gh's zero time: unset
            Some(t) if strict_time(t).is_some() => Ok(Some(t.to_string())),
            Some(t) => Err(format!("{what} {t:?} is not an RFC 3339 time")),
        }
    };
    let created_at =
        time(&["created_at", "createdAt"], "created_at")?.ok_or("no created_at/createdAt")?;
    let closed_at = time(&["closed_at", "closedAt"], "closed_at")?.filter(|_| state == "closed");
    let category = match str_of(obj, &["category"]) {
        None => None,
        Some(c) => Some(Category::parse(c).ok_or_else(|| {
            format!("category {c:?} is not crash_immediate, crash_late, silent_wrong_setup or silent_wrong_number")
        })?),
    };
    let reproducibility = match field(obj, &["reproducibility"]) {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err("reproducibility is not true/false".into()),
    };
    let mut closing_prs = closing_prs(obj, &repo);
    let mut timeline_commits = own_event_commits(obj);
    let events = field(obj, &["timeline"])
        .and_then(Value::as_array)
        .or_else(|| {
            timelines
                .get(&name)
                .or_else(|| timelines.get(&number.to_string()))
        });
    if let Some(events) = events {
        read_timeline(events, &repo, &mut closing_prs, &mut timeline_commits);
    }
    Ok(Some(Issue {
        url: match html {
            Some((_, url)) => url,
            None => format!("https://github.com/{repo}/issues/{number}"),
        },
        repo,
        number,
        title: str_of(obj, &["title"]).unwrap_or_default().to_string(),
        body: str_of(obj, &["body"]).unwrap_or_default().to_string(),
        state,
        state_reason: str_of(obj, &["state_reason", "stateReason"])
            .filter(|s| !s.is_empty())
            .map(str::to_ascii_lowercase),
        created_at,
        closed_at,
        labels: labels(obj),
        comments: comments(obj)?,
        closing_prs,
        timeline_commits,
        reproducibility,
        category,
        fix_commit: string_field(obj, "fix_commit"),
        label_source: string_field(obj, "label_source")
            .filter(|s| super::LABEL_SOURCES.contains(&s.as_str())),
    }))
}

/// `(owner/name, https://github.com/owner/name/issues/N)` from a web or API issue URL.
fn github_issue_url(url: &str) -> Option<(String, String)> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let (host, path) = rest.split_once('/')?;
    let path = if host == "api.github.com" {
        path.strip_prefix("repos/")?
    } else {
        path
    };
    let mut parts = path.split('/');
    let (owner, name, kind, num) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if kind != "issues" || num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let repo = format!("{owner}/{name}");
    let web_host = if host == "api.github.com" {
        "github.com"
    } else {
        host
    };
    Some((
        repo.clone(),
        format!("https://{web_host}/{repo}/issues/{num}"),
    ))
}

/// REST's `repository_url`: `https://api.github.com/repos/owner/name`.
fn repo_from_api(obj: &Obj) -> Option<String> {
    let url = str_of(obj, &["repository_url"])?;
    let (_, path) = url.split_once("/repos/")?;
    let repo = path.trim_end_matches('/');
    is_repo_name(repo).then(|| repo.to_string())
}

fn labels(obj: &Obj) -> Vec<String> {
    let Some(Value::Array(items)) = field(obj, &["labels"]) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|l| match l {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => str_of(o, &["name"]).map(str::to_string),
            _ => None,
        })
        .collect()
}

/// gh's comment objects; REST's `comments` is a count and gives none.
fn comments(obj: &Obj) -> Result<Vec<Comment>, String> {
    let Some(Value::Array(items)) = field(obj, &["comments"]) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for c in items.iter().filter_map(Value::as_object) {
        let author = match field(c, &["author", "user"]) {
            Some(Value::Object(a)) => str_of(a, &["login"]).map(str::to_string),
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let created_at = str_of(c, &["created_at", "createdAt"]).map(str::to_string);
        if let Some(t) = &created_at {
            if strict_time(t).is_none() {
                return Err(format!("a comment's time {t:?} is not RFC 3339"));
            }
        }
        out.push(Comment {
            author,
            body: str_of(c, &["body"]).unwrap_or_default().to_string(),
            created_at,
        });
    }
    Ok(out)
}

/// A pull request object's merge commit, in any of the spellings exports use.
fn merge_commit(pr: &Obj) -> Option<String> {
    let oid = match field(pr, &["mergeCommit", "merge_commit"]) {
        Some(Value::Object(m)) => str_of(m, &["oid", "sha"]).map(str::to_string),
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    oid.or_else(|| str_of(pr, &["merge_commit_sha", "mergeCommitOid"]).map(str::to_string))
        .filter(|s| !s.is_empty())
}

/// A pull request's repository, when the export names it.
fn pr_repo(pr: &Obj) -> Option<String> {
    match field(pr, &["repository"])? {
        Value::Object(r) => {
            if let Some(full) = str_of(r, &["full_name", "nameWithOwner"]) {
                return Some(full.to_string());
            }
            let owner = match field(r, &["owner"])? {
                Value::Object(o) => str_of(o, &["login"])?.to_string(),
                Value::String(s) => s.clone(),
                _ => return None,
            };
            Some(format!("{owner}/{}", str_of(r, &["name"])?))
        }
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// gh's `closedByPullRequestsReferences` (or reprorun's `closing_prs`); pull requests of
/// other repositories are left out (their commits are not in this clone).
fn closing_prs(obj: &Obj, repo: &str) -> Vec<ClosingPr> {
    let Some(Value::Array(items)) = field(obj, &["closedByPullRequestsReferences", "closing_prs"])
    else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_object)
        .filter(|pr| pr_repo(pr).map_or(true, |r| r.eq_ignore_ascii_case(repo)))
        .filter_map(|pr| {
            Some(ClosingPr {
                number: field(pr, &["number"])?.as_u64()?,
                merge_commit: merge_commit(pr),
                merged: field(pr, &["merged"]).and_then(Value::as_bool),
            })
        })
        .collect()
}

/// reprorun's own `timeline_commits`.
fn own_event_commits(obj: &Obj) -> Vec<EventCommit> {
    let Some(Value::Array(items)) = field(obj, &["timeline_commits"]) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|e| {
            Some(EventCommit {
                event: str_of(e, &["event"])?.to_string(),
                commit: str_of(e, &["commit"])?.to_string(),
            })
        })
        .collect()
}

/// REST timeline events: `closed`/`referenced` with a `commit_id`, and `cross-referenced`
/// from a merged pull request of the same repository.
fn read_timeline(
    events: &[Value],
    repo: &str,
    prs: &mut Vec<ClosingPr>,
    commits: &mut Vec<EventCommit>,
) {
    for e in events.iter().filter_map(Value::as_object) {
        let kind = str_of(e, &["event"]).unwrap_or_default();
        match kind {
            "closed" | "referenced" => {
                if let Some(c) = str_of(e, &["commit_id"]).filter(|c| !c.is_empty()) {
                    commits.push(EventCommit {
                        event: kind.to_string(),
                        commit: c.to_string(),
                    });
                }
            }
            "cross-referenced" => {
                let Some(Value::Object(src)) = field(e, &["source"]) else {
                    continue;
                };
                let Some(Value::Object(issue)) = field(src, &["issue"]) else {
                    continue;
                };
                let Some(Value::Object(pr)) = field(issue, &["pull_request"]) else {
                    continue;
                };
                let merged = field(pr, &["merged_at"]).is_some();
                let same_repo = pr_repo(issue)
                    .or_else(|| repo_from_api(issue))
                    .map_or(true, |r| r.eq_ignore_ascii_case(repo));
                let Some(number) = field(issue, &["number"]).and_then(Value::as_u64) else {
                    continue;
                };
                if merged && same_repo && !prs.iter().any(|p| p.number == number) {
                    prs.push(ClosingPr {
                        number,
                        merge_commit: merge_commit(pr).or_else(|| merge_commit(issue)),
                        merged: Some(true),
                    });
                }
            }
            _ => {}
        }
    }
}
