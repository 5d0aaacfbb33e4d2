//! The judge's answer, `result.json`, and its validation against the task: only the three
//! labels, only issues and findings the task holds, every hidden issue aligned, every
//! (issue, finding) pair labelled exactly once, and the best labels consistent with the
//! pair labels (the best is the strongest pair label). A judge's answer is untrusted.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use super::task::Task;
use crate::judgment::Label;

/// The most bytes of a `result.json` read.
pub(crate) const MAX_BYTES: usize = 16 << 20;

/// The five aspects of a match (`dimension_labels`).
pub(crate) const DIMENSIONS: [&str; 5] = [
    "user_facing_symptom",
    "trigger_path_or_workflow",
    "root_cause",
    "involved_artifact",
    "impact",
];

/// Why a `result.json` is refused: one line, naming where.
#[derive(Debug, Error, PartialEq)]
pub(crate) enum ResultError {
    #[error("result.json is larger than {0} bytes")]
    TooLarge(usize),
    #[error("result.json is not JSON: {0}")]
    Syntax(String),
    #[error("result.json does not follow the schema: {0}")]
    Shape(String),
    #[error("{at}: label {value:?} is not exact, semantic or none")]
    Label { at: String, value: String },
    #[error("{at}: hidden issue {id:?} is not in the task")]
    UnknownIssue { at: String, id: String },
    #[error("{at}: finding index {index} is not in the task ({count} findings)")]
    UnknownFinding {
        at: String,
        index: u64,
        count: usize,
    },
    #[error("issue_alignments: hidden issue {0} is not answered")]
    MissingIssue(String),
    #[error("{at}: {what} is given twice")]
    Duplicate { at: String, what: String },
    #[error("pair_labels: the pair ({issue}, finding {index}) is not labelled")]
    MissingPair { issue: String, index: usize },
    #[error("{at}: {why}")]
    Inconsistent { at: String, why: String },
}

/// `result.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JudgeResult {
    pub(crate) issue_alignments: Vec<IssueAlignment>,
    #[serde(default)]
    pub(crate) finding_alignments: Vec<FindingAlignment>,
    /// reprorun's extension: every pair's label. The paper's format (Appendix E.2) has
    /// none; the pairs are then derived from the alignments ([`derive_pairs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pair_labels: Option<Vec<PairOut>>,
    #[serde(default)]
    pub(crate) notes: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IssueAlignment {
    pub(crate) hidden_issue_id: String,
    #[serde(default)]
    pub(crate) target: Option<String>,
    #[serde(default)]
    pub(crate) issue_number: Option<u64>,
    pub(crate) best_label: String,
    #[serde(default)]
    pub(crate) best_finding_id: Option<String>,
    #[serde(default)]
    pub(crate) best_finding_index: Option<u64>,
    pub(crate) dimension_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) rationale: Value,
    #[serde(default)]
    pub(crate) matched_evidence: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FindingAlignment {
    #[serde(default)]
    pub(crate) finding_id: Option<String>,
    pub(crate) finding_index: u64,
    pub(crate) best_label: String,
    #[serde(default)]
    pub(crate) matched_hidden_issue_ids: Vec<String>,
    #[serde(default)]
    pub(crate) matched_targets: Vec<String>,
    #[serde(default)]
    pub(crate) rationale: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PairOut {
    pub(crate) hidden_issue_id: String,
    pub(crate) finding_index: u64,
    pub(crate) label: String,
}

impl JudgeResult {
    /// Pretty JSON with a final newline.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        // Plain data with string keys: serializing cannot fail.
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

/// The strongest of `labels` (`none` for no label).
pub(crate) fn strongest(labels: impl IntoIterator<Item = Label>) -> Label {
    // `Label` orders exact < semantic < none.
    labels.into_iter().min().unwrap_or(Label::None)
}

fn label(at: impl Fn() -> String, value: &str) -> Result<Label, ResultError> {
    Label::parse(value).ok_or_else(|| ResultError::Label {
        at: at(),
        value: value.to_string(),
    })
}

/// The labels of every (hidden issue, finding index) pair of `task`, from a valid answer.
pub(crate) type Pairs = BTreeMap<(String, usize), Label>;

/// Where a valid answer's pair labels came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairsFrom {
    /// The answer's own `pair_labels`.
    Given,
    /// Derived from `issue_alignments` and `finding_alignments` (the paper's format).
    Derived,
}

impl PairsFrom {
    /// What a judgment records of it (`None` for the usual case).
    pub(crate) fn note(self) -> Option<String> {
        match self {
            PairsFrom::Given => None,
            PairsFrom::Derived => Some(
                "pair labels derived from issue_alignments and finding_alignments (no pair_labels)"
                    .into(),
            ),
        }
    }
}

/// Checks `bytes` against `task`; returns every pair's label.
pub(crate) fn validate(bytes: &[u8], task: &Task) -> Result<Pairs, ResultError> {
    validate_from(bytes, task).map(|(pairs, _)| pairs)
}

/// Checks `bytes` against `task`; returns every pair's label and where they came from.
pub(crate) fn validate_from(bytes: &[u8], task: &Task) -> Result<(Pairs, PairsFrom), ResultError> {
    if bytes.len() > MAX_BYTES {
        return Err(ResultError::TooLarge(MAX_BYTES));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| ResultError::Syntax(e.to_string()))?;
    let r: JudgeResult =
        serde_json::from_value(value).map_err(|e| ResultError::Shape(e.to_string()))?;
    let issues: BTreeMap<&str, &str> = task
        .hidden_issues
        .iter()
        .map(|h| (h.hidden_issue_id.as_str(), h.target.as_str()))
        .collect();
    let n = task.findings.len();
    let (pairs, from) = match &r.pair_labels {
        Some(given) => (pair_labels(given, &issues, n)?, PairsFrom::Given),
        None => (derive_pairs(&r, task, &issues)?, PairsFrom::Derived),
    };
    let strict = from == PairsFrom::Given;
    check_issue_alignments(&r, task, &issues, &pairs, strict)?;
    check_finding_alignments(&r, task, &issues, &pairs, strict)?;
    Ok((pairs, from))
}

/// The pairs of an answer without `pair_labels`, as the paper reads its judge: a finding's
/// `best_label` for each issue it names in `matched_hidden_issue_ids`, never stronger than
/// that issue's own `best_label`; the issue's `best_label` for its `best_finding_index` (or
/// `best_finding_id`); `none` for every other pair.
pub(crate) fn derive_pairs(
    r: &JudgeResult,
    task: &Task,
    issues: &BTreeMap<&str, &str>,
) -> Result<Pairs, ResultError> {
    let n = task.findings.len();
    let mut pairs = Pairs::new();
    for id in issues.keys() {
        for i in 0..n {
            pairs.insert((id.to_string(), i), Label::None);
        }
    }
    for (k, a) in r.finding_alignments.iter().enumerate() {
        let at = || format!("finding_alignments[{k}]");
        let i = finding_index(&at, a.finding_index, n)?;
        let l = label(at, &a.best_label)?;
        for id in &a.matched_hidden_issue_ids {
            let Some(slot) = pairs.get_mut(&(id.clone(), i)) else {
                return Err(ResultError::UnknownIssue {
                    at: at(),
                    id: id.clone(),
                });
            };
            *slot = l;
        }
    }
    for (k, a) in r.issue_alignments.iter().enumerate() {
        let at = || format!("issue_alignments[{k}]");
        if !issues.contains_key(a.hidden_issue_id.as_str()) {
            continue; // named by the checks that follow
        }
        let best = label(at, &a.best_label)?;
        for i in 0..n {
            if let Some(slot) = pairs.get_mut(&(a.hidden_issue_id.clone(), i)) {
                // `Label` orders exact < semantic < none: the weaker is the larger.
                *slot = (*slot).max(best);
            }
        }
        if best == Label::None {
            continue;
        }
        let index = match (a.best_finding_index, a.best_finding_id.as_deref()) {
            (Some(index), _) => Some(finding_index(&at, index, n)?),
            (None, Some(fid)) => (0..n).find(|&i| task.finding_str(i, "finding_id") == fid),
            (None, None) => None,
        };
        if let Some(i) = index {
            pairs.insert((a.hidden_issue_id.clone(), i), best);
        }
    }
    Ok(pairs)
}

fn finding_index(at: &dyn Fn() -> String, index: u64, n: usize) -> Result<usize, ResultError> {
    usize::try_from(index)
        .ok()
        .filter(|i| *i < n)
        .ok_or_else(|| ResultError::UnknownFinding {
            at: at(),
            index,
            count: n,
        })
}

fn pair_labels(
    given: &[PairOut],
    issues: &BTreeMap<&str, &str>,
    n: usize,
) -> Result<Pairs, ResultError> {
    let mut pairs = Pairs::new();
    for (k, p) in given.iter().enumerate() {
        let at = || format!("pair_labels[{k}]");
        let l = label(at, &p.label)?;
        if !issues.contains_key(p.hidden_issue_id.as_str()) {
            return Err(ResultError::UnknownIssue {
                at: at(),
                id: p.hidden_issue_id.clone(),
            });
        }
        let i = finding_index(&at, p.finding_index, n)?;
        if pairs.insert((p.hidden_issue_id.clone(), i), l).is_some() {
            return Err(ResultError::Duplicate {
                at: at(),
                what: format!("the pair ({}, finding {i})", p.hidden_issue_id),
            });
        }
    }
    for issue in issues.keys() {
        for index in 0..n {
            if !pairs.contains_key(&(issue.to_string(), index)) {
                return Err(ResultError::MissingPair {
                    issue: issue.to_string(),
                    index,
                });
            }
        }
    }
    Ok(pairs)
}

/// The issue alignments against the task; with `strict` (given pair labels) also against
/// the pairs (derived pairs agree with the alignments by construction, as far as the
/// alignments agree with each other).
fn check_issue_alignments(
    r: &JudgeResult,
    task: &Task,
    issues: &BTreeMap<&str, &str>,
    pairs: &Pairs,
    strict: bool,
) -> Result<(), ResultError> {
    let n = task.findings.len();
    let mut seen = BTreeSet::new();
    for (k, a) in r.issue_alignments.iter().enumerate() {
        let at = || format!("issue_alignments[{k}]");
        let id = a.hidden_issue_id.as_str();
        let Some(target) = issues.get(id) else {
            return Err(ResultError::UnknownIssue {
                at: at(),
                id: id.to_string(),
            });
        };
        if !seen.insert(id) {
            return Err(ResultError::Duplicate {
                at: at(),
                what: format!("hidden issue {id}"),
            });
        }
        if a.target.as_deref().is_some_and(|t| t != *target) {
            return Err(ResultError::Inconsistent {
                at: at(),
                why: format!("target is {target}, not {:?}", a.target),
            });
        }
        let best = label(at, &a.best_label)?;
        for d in DIMENSIONS {
            let v = a.dimension_labels.get(d).ok_or_else(|| {
                ResultError::Shape(format!("{}: dimension_labels has no {d}", at()))
            })?;
            label(|| format!("{}.dimension_labels.{d}", at()), v)?;
        }
        let strongest = strongest((0..n).filter_map(|i| pairs.get(&(id.to_string(), i)).copied()));
        if strict && best != strongest {
            return Err(ResultError::Inconsistent {
                at: at(),
                why: format!(
                    "best_label is {}, but the strongest pair label of {id} is {}",
                    best.as_str(),
                    strongest.as_str()
                ),
            });
        }
        if let Some(index) = a.best_finding_index.filter(|_| best != Label::None) {
            let i = finding_index(&at, index, n)?;
            if strict && pairs.get(&(id.to_string(), i)) != Some(&best) {
                return Err(ResultError::Inconsistent {
                    at: at(),
                    why: format!("best_finding_index {i} is not labelled {}", best.as_str()),
                });
            }
        }
    }
    if let Some(missing) = issues.keys().find(|id| !seen.contains(*id)) {
        return Err(ResultError::MissingIssue(missing.to_string()));
    }
    Ok(())
}

fn check_finding_alignments(
    r: &JudgeResult,
    task: &Task,
    issues: &BTreeMap<&str, &str>,
    pairs: &Pairs,
    strict: bool,
) -> Result<(), ResultError> {
    let n = task.findings.len();
    let mut seen = BTreeSet::new();
    for (k, a) in r.finding_alignments.iter().enumerate() {
        let at = || format!("finding_alignments[{k}]");
        let i = finding_index(&at, a.finding_index, n)?;
        if !seen.insert(i) {
            return Err(ResultError::Duplicate {
                at: at(),
                what: format!("finding {i}"),
            });
        }
        let own_id = task.finding_str(i, "finding_id");
        if a.finding_id.as_deref().is_some_and(|id| id != own_id) {
            return Err(ResultError::Inconsistent {
                at: at(),
                why: format!("finding {i} is {own_id:?}, not {:?}", a.finding_id),
            });
        }
        let best = label(at, &a.best_label)?;
        let strongest = strongest(
            issues
                .keys()
                .filter_map(|id| pairs.get(&(id.to_string(), i)).copied()),
        );
        if strict && best != strongest {
            return Err(ResultError::Inconsistent {
                at: at(),
                why: format!(
                    "best_label is {}, but the strongest pair label of finding {i} is {}",
                    best.as_str(),
                    strongest.as_str()
                ),
            });
        }
        for id in &a.matched_hidden_issue_ids {
            if !issues.contains_key(id.as_str()) {
                return Err(ResultError::UnknownIssue {
                    at: at(),
                    id: id.clone(),
                });
            }
        }
    }
    Ok(())
}
