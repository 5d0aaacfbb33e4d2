//! The `findings.json` an audit agent writes (`spec/audit.md`, *findings.json*), and its
//! reader.
//!
//! The schema is the paper's (ReproRepo, Appendix E.1): `reproducibility_assessment` (free
//! text, or reprorun's `{overall, summary}` object), `findings` (ranked: the first is the
//! blocker a real reproducer is most likely to report) with the paper's `stage`, `category`
//! and `evidence_type` value sets, and `missing_or_ambiguous_artifacts`. reprorun's finer
//! value sets (`schema::detail`) are optional extensions. [`validate`] reads what an agent
//! wrote into typed [`Findings`], keeping the order of `findings` (it is the ranking the
//! judge scores) and every field it does not know (`extra`, written back by
//! [`Findings::to_json`]).
//!
//! What it tolerates, because agents do it and nothing is lost by reading it:
//! - a UTF-8 byte-order mark, blanks around the document, and a document wholly wrapped
//!   in one Markdown code fence (```` ```json ... ``` ````);
//! - enum values in another case or with `-`, `_` and blanks alike (`"High"`,
//!   `"install / environment"`);
//! - an integer `finding_id` (read as its decimal string);
//! - `affected_claims_or_metrics` as one string (read as a one-element list);
//! - `line_refs` items as integers, `"12"` or `"12-30"` strings, or `[12, 30]` pairs, all
//!   read as `[start, end]` ranges; one bare item for the list; absent, or free text for
//!   "no line" (`"N/A"`, `""`).
//!
//! What only drops a part, recorded in [`Findings::problems`] (all of them, not the first):
//! a field of the wrong type or outside its value set, a missing field, an unreadable line
//! reference, an evidence item without a path, a finding that is not an object; a
//! duplicate `finding_id` is renamed `ID#N`. What refuses the document: it is too large, not
//! JSON, not an object (a top-level array would invent the verdict), or has no `findings`
//! array. A text reply that carries the document somewhere inside is the caller's to cut
//! out with [`extract_json`] first.

use serde::ser::SerializeTuple;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use thiserror::Error;

mod extract;
mod read;
mod schema;

pub(crate) use read::validate;
pub(crate) use schema::{detail, Category, Confidence, EvidenceType, Overall, Severity, Stage};

/// The largest `findings.json` read (4 MiB): a ranked list of at most a few hundred
/// findings is far smaller; more is an agent gone wrong.
pub(crate) const MAX_BYTES: usize = 4 << 20;

/// Why a `findings.json` was refused, or what of it was dropped ([`Findings::problems`]);
/// each is one line.
#[derive(Debug, Clone, Error, PartialEq)]
pub(crate) enum FindingsError {
    #[error("findings.json is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error("findings.json is not JSON (line {line}, column {column}): {msg}")]
    Syntax {
        line: usize,
        column: usize,
        msg: String,
    },
    #[error("findings.json: {at}: expected {expected}, found {found}")]
    Type {
        at: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("findings.json: {at}: missing required field `{field}`")]
    Missing { at: String, field: &'static str },
    #[error("findings.json: {at}: {value} is not one of {allowed}")]
    Value {
        at: String,
        value: String,
        allowed: String,
    },
    #[error("findings.json: {at}: {why}")]
    Invalid { at: String, why: String },
    #[error("findings.json: findings[{second}].finding_id: duplicate id {id}, renamed {renamed}")]
    DuplicateId {
        id: String,
        renamed: String,
        second: usize,
    },
}

/// A validated `findings.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Findings {
    pub(crate) reproducibility_assessment: Assessment,
    /// Ranked: the first is the most likely to be reported by a real reproducer.
    pub(crate) findings: Vec<Finding>,
    pub(crate) missing_or_ambiguous_artifacts: Vec<Artifact>,
    /// Fields this version does not know, kept as written.
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
    /// What was dropped while reading (a field, an evidence item, a finding that was not an
    /// object), each naming where; empty for a clean document. Not written back.
    #[serde(skip)]
    pub(crate) problems: Vec<FindingsError>,
}

/// The verdict on the whole release: reprorun's object, or the paper's free text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum Assessment {
    Verdict(Verdict),
    /// The paper's form (Appendix E.1): a free-text assessment.
    Text(String),
}

/// The object form of [`Assessment`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Verdict {
    pub(crate) overall: Overall,
    pub(crate) summary: String,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// An artifact the paper or README needs and the release lacks or leaves unclear.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum Artifact {
    Text(String),
    Item(ArtifactItem),
}

/// The object form of an [`Artifact`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ArtifactItem {
    pub(crate) artifact: String,
    pub(crate) why: String,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// One reproducibility blocker, phrased as the GitHub issue a user would open. A field
/// that was absent or unreadable is `None` (or empty) and named in [`Findings::problems`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Finding {
    pub(crate) finding_id: String,
    pub(crate) rank_reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) severity: Option<Severity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stage: Option<Stage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<Category>,
    pub(crate) issue_title: String,
    pub(crate) user_symptom: String,
    pub(crate) trigger_context: String,
    pub(crate) root_cause: String,
    pub(crate) evidence: Vec<Evidence>,
    pub(crate) impact: String,
    pub(crate) affected_claims_or_metrics: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reproducibility_blocker: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) confidence: Option<Confidence>,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// Where a finding shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Evidence {
    /// Relative to the repository root (the paper's file name for paper evidence).
    pub(crate) path: String,
    pub(crate) line_refs: Vec<LineRange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) evidence_type: Option<EvidenceType>,
    pub(crate) summary: String,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// Lines `start..=end` (1-based); written as `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LineRange {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

impl LineRange {
    /// One line.
    pub(crate) fn line(n: u32) -> LineRange {
        LineRange { start: n, end: n }
    }
}

impl Serialize for LineRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&self.start)?;
        t.serialize_element(&self.end)?;
        t.end()
    }
}

impl Findings {
    /// The problems met while reading, as one line (`None` for a clean document): how many,
    /// and each, cut to `max` characters in all.
    pub(crate) fn problems_line(&self, max: usize) -> Option<String> {
        if self.problems.is_empty() {
            return None;
        }
        let all: Vec<String> = self.problems.iter().map(|e| e.to_string()).collect();
        let line = format!(
            "read with {} problem(s), each dropping what it names: {}",
            all.len(),
            all.join("; ")
        );
        Some(if line.chars().count() > max {
            let cut: String = line.chars().take(max.saturating_sub(3)).collect();
            format!("{cut}...")
        } else {
            line
        })
    }

    /// The document as pretty JSON with a final newline: fields in schema order, unknown
    /// fields after them sorted by name; the same value always gives the same bytes.
    pub(crate) fn to_json(&self) -> String {
        // Serializing cannot fail: every map key is a string and every number came from
        // JSON (no NaN); an empty string would only show a serde_json bug.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The `findings.json` document inside an agent's text reply: the last fenced block
/// (```` ```json ```` or a bare fence) whose body is an object mentioning `"findings"`,
/// else the first balanced `{...}` in the text that mentions `"findings"`. `None` when
/// there is neither. The result is not validated.
pub(crate) fn extract_json(text: &str) -> Option<&str> {
    extract::find(text)
}

#[cfg(test)]
mod tests;
