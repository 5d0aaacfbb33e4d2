//! Which commit each issue's reporter saw: pure functions over commit lists, so the rules
//! can be tested without git (`spec/audit.md`, "Snapshots").
//!
//! - open issue → the default branch's head at `collected_at` (`default_branch_at_collected_at`);
//! - closed issue with patch evidence (`closed_gold`) → the fix commit's first parent, and
//!   the fix commit as the post-fix snapshot; evidence in this order: the input's
//!   `fix_commit` (`given_fix_commit`), a merged closing pull request (`merged_pr`), a
//!   `closed`/`referenced` event's commit (`closed_event_commit`), a later commit whose
//!   message says `fixes #N` or holds the issue URL (`fixes_keyword`), the last commit
//!   between the issue's creation and its closing whose message names `#N` at all
//!   (`(#5)`, `(issues #2, #28, #35, #37)`, `see #5`: `history_reference`);
//! - other closed issues (`closed_silver`) → the last first-parent commit before
//!   `created_at` (`before_created_at`).

use crate::input::Issue;

/// A commit as `git log` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Commit {
    pub(crate) id: String,
    pub(crate) parents: Vec<String>,
    /// Committer date, Unix seconds.
    pub(crate) time: i64,
    pub(crate) message: String,
}

/// Which snapshot of a fixed (`closed_gold`) issue is its pre-fix one. The paper's text
/// says the issue-time snapshot, its Figure 1 "pre PR".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PreFix {
    /// The fix commit's first parent (the default): the code the fix changed.
    #[default]
    FixParent,
    /// The last first-parent commit before the issue was opened: what its reporter saw.
    IssueTime,
}

impl PreFix {
    /// As the manifest records it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PreFix::FixParent => "fix_parent",
            PreFix::IssueTime => "issue_time",
        }
    }
}

/// Where an issue is grounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `open`, `closed_silver`, `closed_gold`.
    pub(crate) target: &'static str,
    pub(crate) rule: &'static str,
    /// The snapshot the reporter saw.
    pub(crate) commit: String,
    /// The fix commit (the post-fix snapshot), for `closed_gold`.
    pub(crate) fix: Option<String>,
    /// For `closed_gold`: which pre-fix snapshot `commit` is.
    pub(crate) pre_fix: Option<PreFix>,
}

/// A commit id (possibly abbreviated) to its full id and first parent, when it exists.
pub(crate) type Resolve<'a> = &'a dyn Fn(&str) -> Option<(String, Option<String>)>;

/// What the selection reads of a repository.
pub(crate) struct History<'a> {
    /// The default branch's first-parent chain, newest first.
    pub(crate) first_parent: &'a [Commit],
    /// Every commit reachable from the default branch.
    pub(crate) all: &'a [Commit],
    pub(crate) resolve: Resolve<'a>,
}

/// The last first-parent commit at or before `t`.
pub(crate) fn head_at(chain: &[Commit], t: i64) -> Option<&Commit> {
    chain.iter().find(|c| c.time <= t)
}

/// The last first-parent commit strictly before `t`.
pub(crate) fn before(chain: &[Commit], t: i64) -> Option<&Commit> {
    chain.iter().find(|c| c.time < t)
}

/// Grounds one issue. `collected` is the pair's `collected_at`, `created` the issue's;
/// `pre_fix` picks a fixed issue's pre-fix snapshot.
pub(crate) fn ground(
    issue: &Issue,
    created: i64,
    collected: i64,
    pre_fix: PreFix,
    h: &History,
) -> Result<Target, String> {
    if issue.is_open() {
        let c = head_at(h.first_parent, collected)
            .ok_or("the default branch has no commit at or before collected_at")?;
        return Ok(Target {
            target: "open",
            rule: "default_branch_at_collected_at",
            commit: c.id.clone(),
            fix: None,
            pre_fix: None,
        });
    }
    if let Some((rule, fix, parent)) = fix_evidence(issue, created, h)? {
        let commit = match pre_fix {
            PreFix::FixParent => parent,
            PreFix::IssueTime => before(h.first_parent, created)
                .ok_or(
                    "the default branch has no commit before the issue was created (created_at)",
                )?
                .id
                .clone(),
        };
        return Ok(Target {
            target: "closed_gold",
            rule,
            commit,
            fix: Some(fix),
            pre_fix: Some(pre_fix),
        });
    }
    let c = before(h.first_parent, created)
        .ok_or("the default branch has no commit before the issue was created (created_at)")?;
    Ok(Target {
        target: "closed_silver",
        rule: "before_created_at",
        commit: c.id.clone(),
        fix: None,
        pre_fix: None,
    })
}

/// `(rule, fix commit, its first parent)` of the first evidence that holds. A given
/// `fix_commit` that is not in the clone is an error; other evidence that is not (a commit
/// of a fork, a root commit) is passed over.
fn fix_evidence(
    issue: &Issue,
    created: i64,
    h: &History,
) -> Result<Option<(&'static str, String, String)>, String> {
    let with_parent = |id: &str| match (h.resolve)(id) {
        Some((full, Some(parent))) => Some((full, parent)),
        _ => None,
    };
    if let Some(given) = &issue.fix_commit {
        let (full, parent) = match (h.resolve)(given) {
            Some((full, Some(parent))) => (full, parent),
            Some(_) => {
                return Err(format!(
                    "fix_commit {given} is a root commit: no pre-fix state"
                ))
            }
            None => return Err(format!("fix_commit {given}: no such commit in the clone")),
        };
        return Ok(Some(("given_fix_commit", full, parent)));
    }
    for pr in issue.closing_prs.iter().filter(|p| p.merged != Some(false)) {
        let by_oid = pr.merge_commit.as_deref().and_then(with_parent);
        let found = by_oid.or_else(|| {
            h.all
                .iter()
                .find(|c| merges_pr(&c.message, pr.number))
                .and_then(|c| with_parent(&c.id))
        });
        if let Some((fix, parent)) = found {
            return Ok(Some(("merged_pr", fix, parent)));
        }
    }
    let events = &issue.timeline_commits;
    let closed = events.iter().rev().filter(|e| e.event == "closed");
    let referenced = events.iter().filter(|e| e.event == "referenced");
    if let Some((fix, parent)) = closed
        .chain(referenced)
        .find_map(|e| with_parent(&e.commit))
    {
        return Ok(Some(("closed_event_commit", fix, parent)));
    }
    let keyword = h
        .all
        .iter()
        .filter(|c| c.time > created && mentions_fix(&c.message, issue.number, &issue.url))
        .min_by(|a, b| a.time.cmp(&b.time).then_with(|| a.id.cmp(&b.id)));
    if let Some(c) = keyword {
        if let Some(parent) = c.parents.first() {
            return Ok(Some(("fixes_keyword", c.id.clone(), parent.clone())));
        }
    }
    Ok(history_reference(issue, created, h.all))
}

/// Slack after `closed_at` for a referencing commit: a fix is often pushed (committed
/// earlier, or merged) minutes after the maintainer closes the issue.
const CLOSE_SLACK_SECS: i64 = 24 * 3600;

/// The repository's own history as evidence: of the commits between the issue's creation
/// and its closing whose message names `#N`, the last (the fix usually comes last, right
/// before the close); with none, the first in the [`CLOSE_SLACK_SECS`] after the close.
/// Without `closed_at`, none.
fn history_reference(
    issue: &Issue,
    created: i64,
    all: &[Commit],
) -> Option<(&'static str, String, String)> {
    let closed = issue
        .closed_at
        .as_deref()
        .and_then(crate::input::strict_time)?;
    let naming = || {
        all.iter()
            .filter(|c| c.time >= created && names_issue(&c.message, issue.number))
    };
    let c = naming()
        .filter(|c| c.time <= closed)
        .max_by(|a, b| a.time.cmp(&b.time).then_with(|| b.id.cmp(&a.id)))
        .or_else(|| {
            naming()
                .filter(|c| c.time > closed && c.time <= closed + CLOSE_SLACK_SECS)
                .min_by(|a, b| a.time.cmp(&b.time).then_with(|| a.id.cmp(&b.id)))
        })?;
    let parent = c.parents.first()?;
    Some(("history_reference", c.id.clone(), parent.clone()))
}

/// Whether `message` names `#N` as a whole number: `(#5)`, `#5,`, `issues #2, #5` (not
/// `#50`, not `abc#5` in a word).
pub(crate) fn names_issue(message: &str, number: u64) -> bool {
    let tag = format!("#{number}");
    let mut from = 0;
    while let Some(at) = message[from..].find(&tag).map(|i| i + from) {
        from = at + tag.len();
        let after_ok = !message[from..].starts_with(|c: char| c.is_ascii_digit());
        let before_ok = !message[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        if after_ok && before_ok {
            return true;
        }
    }
    false
}

/// GitHub's merge subjects: `Merge pull request #N from ...`, or a squash merge's
/// `Subject (#N)`.
pub(crate) fn merges_pr(message: &str, number: u64) -> bool {
    let subject = message.lines().next().unwrap_or("").trim_end();
    let tag = format!("#{number}");
    subject
        .strip_prefix("Merge pull request ")
        .is_some_and(|rest| rest.split_whitespace().next() == Some(tag.as_str()))
        || subject.ends_with(&format!("({tag})"))
}

/// SWE-bench's rule: `fix|fixes|fixed|close|closes|closed|resolve|resolves|resolved #N`
/// (any case, an optional colon), or the issue's URL in the message.
pub(crate) fn mentions_fix(message: &str, number: u64, url: &str) -> bool {
    const KEYWORDS: [&str; 9] = [
        "fix", "fixes", "fixed", "close", "closes", "closed", "resolve", "resolves", "resolved",
    ];
    if !url.is_empty() && message.contains(url) {
        return true;
    }
    let text = message.to_lowercase();
    let tag = format!("#{number}");
    let mut from = 0;
    while let Some(at) = text[from..].find(&tag).map(|i| i + from) {
        from = at + tag.len();
        if text[from..].starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let head = text[..at].trim_end();
        let head = head.strip_suffix(':').unwrap_or(head).trim_end();
        let hit = KEYWORDS.iter().any(|k| {
            head.strip_suffix(k)
                .is_some_and(|rest| !rest.ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        });
        if hit && head.len() < at {
            return true;
        }
    }
    false
}
