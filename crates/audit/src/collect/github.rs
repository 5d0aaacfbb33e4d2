//! One repository's issues from the REST API: the repository (`full_name`,
//! `default_branch`), every issue (`state=all`, pages followed, pull requests left out),
//! each issue's timeline (its comments are the `commented` events; `closed`/`referenced`
//! with a `commit_id` and `cross-referenced` merged pull requests are the fix evidence), and
//! the merge commit of each merged pull request of the same repository named there. Each
//! issue is then read by [`crate::input::issue_from_record`], so what is written is
//! what `audit snapshot` reads.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::http::{api_error, Client};
use super::CollectError;
use crate::input::{issue_from_record, Issue};

/// The repository as the API names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RepoInfo {
    pub(crate) full_name: String,
    pub(crate) default_branch: Option<String>,
}

/// What became of a repository's lookup.
pub(crate) enum Found<T> {
    Yes(T),
    /// The API answered 404/410/451: the method drops the paper.
    Gone(String),
}

fn gone(status: u16) -> Option<String> {
    match status {
        404 => Some("repository not found (HTTP 404)".into()),
        410 => Some("repository gone (HTTP 410)".into()),
        451 => Some("repository unavailable for legal reasons (HTTP 451)".into()),
        _ => None,
    }
}

/// `GET /repos/{owner}/{name}`.
pub(crate) fn repo(client: &mut Client, repo: &str) -> Result<Found<RepoInfo>, CollectError> {
    let path = format!("/repos/{repo}");
    let a = client.get(&path)?;
    if let Some(why) = gone(a.status) {
        return Ok(Found::Gone(why));
    }
    if a.status == 401 {
        return Err(CollectError::Auth(
            "the API refused the token (HTTP 401): check the variable --token-env names".into(),
        ));
    }
    if a.status != 200 {
        return Err(api_error(&client.url(&path), a.status, &a.body));
    }
    let full_name = a
        .body
        .get("full_name")
        .and_then(Value::as_str)
        .filter(|n| crate::input::is_repo_name(n))
        .unwrap_or(repo)
        .to_string();
    Ok(Found::Yes(RepoInfo {
        full_name,
        default_branch: a
            .body
            .get("default_branch")
            .and_then(Value::as_str)
            .map(str::to_string),
    }))
}

/// The issue objects of the list (pull requests left out), in the API's order.
pub(crate) fn issue_list(
    client: &mut Client,
    repo: &str,
    since: Option<&str>,
) -> Result<Found<Vec<Map<String, Value>>>, CollectError> {
    let mut path = format!("/repos/{repo}/issues?state=all&per_page=100");
    if let Some(s) = since {
        path.push_str(&format!("&since={s}"));
    }
    let Some(items) = client.get_all(&path)? else {
        return Ok(Found::Gone(
            "issues not found or disabled (HTTP 404/410)".into(),
        ));
    };
    Ok(Found::Yes(
        items
            .into_iter()
            .filter_map(|v| match v {
                Value::Object(o) if !o.contains_key("pull_request") => Some(o),
                _ => None,
            })
            .collect(),
    ))
}

/// Whether an issue needs its timeline: a closed one for its fix evidence, an open one for
/// its comments when it has any.
pub(crate) fn needs_timeline(issue: &Map<String, Value>) -> bool {
    let closed = issue.get("state").and_then(Value::as_str) == Some("closed");
    let comments = issue.get("comments").and_then(Value::as_u64).unwrap_or(1);
    closed || comments > 0
}

/// `cross-referenced` events whose source is a merged pull request of `repo`: its number.
pub(crate) fn merged_prs(events: &[Value], repo: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for e in events {
        if e.get("event").and_then(Value::as_str) != Some("cross-referenced") {
            continue;
        }
        let Some(issue) = e.pointer("/source/issue") else {
            continue;
        };
        let merged = issue
            .pointer("/pull_request/merged_at")
            .is_some_and(|m| !m.is_null());
        let same = issue
            .pointer("/repository/full_name")
            .and_then(Value::as_str)
            .map_or(true, |r| r.eq_ignore_ascii_case(repo));
        if let (true, true, Some(n)) = (merged, same, issue.get("number").and_then(Value::as_u64)) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The record `issue_from_record` reads: the REST issue, its comments from the timeline's
/// `commented` events, and the timeline with each merged pull request's `merge_commit_sha`.
pub(crate) fn record(
    issue: &Map<String, Value>,
    events: Vec<Value>,
    merge_commits: &BTreeMap<u64, String>,
) -> Map<String, Value> {
    let mut obj = issue.clone();
    let comments: Vec<Value> = events
        .iter()
        .filter(|e| e.get("event").and_then(Value::as_str) == Some("commented"))
        .map(|e| {
            let login = e
                .pointer("/user/login")
                .or_else(|| e.pointer("/actor/login"))
                .cloned()
                .unwrap_or(Value::Null);
            json!({
                "user": {"login": login},
                "body": e.get("body").cloned().unwrap_or(Value::Null),
                "created_at": e.get("created_at").cloned().unwrap_or(Value::Null),
            })
        })
        .collect();
    let events = events
        .into_iter()
        .map(|mut e| {
            let n = e.pointer("/source/issue/number").and_then(Value::as_u64);
            if let (Some(sha), Some(Value::Object(pr))) = (
                n.and_then(|n| merge_commits.get(&n)),
                e.pointer_mut("/source/issue/pull_request"),
            ) {
                pr.insert("merge_commit_sha".into(), Value::String(sha.clone()));
            }
            e
        })
        .filter(|e| e.get("event").and_then(Value::as_str) != Some("commented"))
        .collect();
    obj.insert("comments".into(), Value::Array(comments));
    obj.insert("timeline".into(), Value::Array(events));
    obj
}

/// Everything about one issue, read as `audit snapshot` will read it.
pub(crate) fn issue(
    client: &mut Client,
    repo: &str,
    obj: &Map<String, Value>,
    merge_commits: &mut BTreeMap<u64, String>,
) -> Result<Issue, CollectError> {
    let number = obj.get("number").and_then(Value::as_u64).unwrap_or(0);
    let events = if needs_timeline(obj) {
        let path = format!("/repos/{repo}/issues/{number}/timeline?per_page=100");
        client.get_all(&path)?.unwrap_or_default()
    } else {
        Vec::new()
    };
    for pr in merged_prs(&events, repo) {
        if merge_commits.contains_key(&pr) {
            continue;
        }
        let a = client.get(&format!("/repos/{repo}/pulls/{pr}"))?;
        if let Some(sha) = a.body.get("merge_commit_sha").and_then(Value::as_str) {
            merge_commits.insert(pr, sha.to_string());
        }
    }
    let rec = record(obj, events, merge_commits);
    match issue_from_record(&rec, Some(repo), &BTreeMap::new()) {
        Ok(Some(issue)) => Ok(issue),
        Ok(None) => Err(CollectError::Issue {
            id: format!("{repo}#{number}"),
            reason: "a pull request".into(),
        }),
        Err(e) => Err(CollectError::Issue {
            id: e.id.unwrap_or_else(|| format!("{repo}#{number}")),
            reason: e.reason,
        }),
    }
}
