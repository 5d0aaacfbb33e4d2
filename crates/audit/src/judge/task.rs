//! The judge's one input, `task.json`: a run's ranked findings and the hidden issues of its
//! snapshot, as data. Built from the corpus manifest (which agents never see) and the run's
//! validated findings; a pure function, so what a judge was shown is exactly reproducible
//! (and stored as a log, `task_sha256`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::corpus::{Grounding, Group, Manifest};
use crate::findings::Findings;

/// `task.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Task {
    /// `<group_id>#<repeat>`.
    pub(crate) task_id: String,
    pub(crate) snapshot_group_id: String,
    pub(crate) paper_id: String,
    pub(crate) paper_title: Option<String>,
    /// The snapshot is the fix commit of some of its hidden issues (those marked
    /// `post_fix`): a match of those is a false positive.
    pub(crate) post_fix: bool,
    pub(crate) hidden_issues: Vec<HiddenIssue>,
    /// The agent's validated findings, in its order, each with `finding_index` (0-based).
    pub(crate) findings: Vec<Value>,
}

/// A hidden issue as the judge sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HiddenIssue {
    /// `owner/name#N`.
    pub(crate) hidden_issue_id: String,
    /// `open`, `closed_gold` or `closed_silver`.
    pub(crate) target: String,
    pub(crate) issue_number: u64,
    pub(crate) title: String,
    pub(crate) body: String,
    /// All comments of an open issue; of a closed one, only those made before it was
    /// closed (the fix and its discussion are not the issue).
    pub(crate) comments: Vec<TaskComment>,
    /// For `closed_gold`: how the fix was found, and the fix commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fix_evidence: Option<FixEvidence>,
    /// This snapshot already holds the issue's fix (FPR); otherwise the reporter saw it.
    #[serde(default)]
    pub(crate) post_fix: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskComment {
    pub(crate) author: Option<String>,
    pub(crate) body: String,
    pub(crate) created_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FixEvidence {
    pub(crate) rule: String,
    pub(crate) fix_commit: Option<String>,
}

/// A manifest issue entry, read leniently: the judge needs only these fields.
#[derive(Debug, Clone, Deserialize)]
struct IssueIn {
    repo: String,
    number: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
    #[serde(default)]
    comments: Vec<CommentIn>,
}

#[derive(Debug, Clone, Deserialize)]
struct CommentIn {
    #[serde(default)]
    author: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct EntryIn {
    issue: IssueIn,
    grounding: Grounding,
}

/// A hidden issue of the corpus with its grounding, read once per study.
#[derive(Debug, Clone)]
pub(crate) struct Hidden {
    pub(crate) id: String,
    pub(crate) title: String,
    pub(crate) body: String,
    closed_at: Option<String>,
    comments: Vec<CommentIn>,
    pub(crate) grounding: Grounding,
    number: u64,
}

/// Every hidden issue of the manifest; `Err` names the first entry that is not one.
pub(crate) fn hidden_issues(manifest: &Manifest) -> Result<Vec<Hidden>, String> {
    manifest
        .issues
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let e: EntryIn = serde_json::from_value(v.clone())
                .map_err(|e| format!("issues[{i}] is not an issue with its grounding: {e}"))?;
            Ok(Hidden {
                id: format!("{}#{}", e.issue.repo, e.issue.number),
                title: e.issue.title,
                body: e.issue.body.unwrap_or_default(),
                closed_at: e.issue.closed_at,
                comments: e.issue.comments,
                grounding: e.grounding,
                number: e.issue.number,
            })
        })
        .collect()
}

/// Whether `group` is the post-fix snapshot of some hidden issue.
pub(crate) fn is_post_fix(hidden: &[Hidden], group_id: &str) -> bool {
    hidden
        .iter()
        .any(|h| h.grounding.post_fix_group_id.as_deref() == Some(group_id))
}

/// The comments a judge sees: all for an open issue; for a closed one those made strictly
/// before `closed_at` (none when a time is missing: what cannot be placed is left out).
fn early_comments(h: &Hidden) -> Vec<TaskComment> {
    let cutoff = h.closed_at.as_deref().and_then(crate::input::strict_time);
    let open = h.grounding.target == "open";
    h.comments
        .iter()
        .filter(|c| {
            open || match (cutoff, c.created_at.as_deref()) {
                (Some(cut), Some(t)) => crate::input::strict_time(t).is_some_and(|t| t < cut),
                _ => false,
            }
        })
        .map(|c| TaskComment {
            author: c.author.clone(),
            body: c.body.clone().unwrap_or_default(),
            created_at: c.created_at.clone(),
        })
        .collect()
}

/// The task of run (`group`, `repeat`): its hidden issues — those grounded on this snapshot
/// and those it is the fix of (`post_fix`; a snapshot can be both: the fix of one issue and
/// what the reporter of a later one saw) — and `findings` (`None`: no valid findings).
pub(crate) fn build(
    manifest: &Manifest,
    hidden: &[Hidden],
    group: &Group,
    repeat: u32,
    findings: Option<&Findings>,
) -> Task {
    let post_fix = is_post_fix(hidden, &group.group_id);
    let fixed_here =
        |h: &Hidden| h.grounding.post_fix_group_id.as_deref() == Some(group.group_id.as_str());
    let issues = hidden
        .iter()
        .filter(|h| h.grounding.group_id == group.group_id || fixed_here(h))
        .map(|h| HiddenIssue {
            post_fix: fixed_here(h),
            hidden_issue_id: h.id.clone(),
            target: h.grounding.target.clone(),
            issue_number: h.number,
            title: h.title.clone(),
            body: h.body.clone(),
            comments: early_comments(h),
            fix_evidence: (h.grounding.target == "closed_gold").then(|| FixEvidence {
                rule: h.grounding.rule.clone(),
                fix_commit: h.grounding.fix_commit.clone(),
            }),
        })
        .collect();
    let findings = findings
        .map(|f| {
            f.findings
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let mut v = serde_json::to_value(f).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut v {
                        m.insert("finding_index".into(), (i as u64).into());
                    }
                    v
                })
                .collect()
        })
        .unwrap_or_default();
    Task {
        task_id: format!("{}#{repeat}", group.group_id),
        snapshot_group_id: group.group_id.clone(),
        paper_id: group.paper_id.clone(),
        paper_title: manifest
            .pairs
            .iter()
            .find(|p| p.paper_id == group.paper_id)
            .and_then(|p| p.title.clone()),
        post_fix,
        hidden_issues: issues,
        findings,
    }
}

impl Task {
    /// The task as pretty JSON with a final newline (the same task, the same bytes).
    pub(crate) fn to_json(&self) -> Vec<u8> {
        // Serializing plain data with string keys cannot fail.
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// A string field of finding `i` (empty when absent).
    pub(crate) fn finding_str(&self, i: usize, key: &str) -> &str {
        self.findings
            .get(i)
            .and_then(|f| f.get(key))
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}
