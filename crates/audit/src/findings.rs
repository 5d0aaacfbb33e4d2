//! The `findings.json` an audit agent writes (`spec/audit-findings.md`), and its validator.
//!
//! The document is an object: `reproducibility_assessment` (an overall verdict and a
//! summary), `findings` (ranked: the first is the blocker a real reproducer is most likely
//! to report) and `missing_or_ambiguous_artifacts`. [`validate`] reads what an agent wrote
//! into typed [`Findings`], keeping the order of `findings` (it is the ranking the judge
//! scores) and every field it does not know (`extra`, written back by [`Findings::to_json`]).
//!
//! What it tolerates, because agents do it and nothing is lost by reading it:
//! - a UTF-8 byte-order mark, blanks around the document, and a document wholly wrapped
//!   in one Markdown code fence (```` ```json ... ``` ````);
//! - enum values in another case or with `-`/blanks for `_` (`"High"`, `"code-bug"`);
//! - an integer `finding_id` (read as its decimal string);
//! - `affected_claims_or_metrics` as one string (read as a one-element list);
//! - `line_refs` items as integers, `"12"` or `"12-30"` strings, or `[12, 30]` pairs, all
//!   read as `[start, end]` ranges; one bare item for the list; absent (`[]`, e.g. for
//!   `absence` evidence);
//! - `missing_or_ambiguous_artifacts` absent (`[]`), its items strings or objects.
//!
//! What it refuses: a top-level array of findings (the verdict and the artifacts would be
//! invented), other JSON outside the document, and anything [`FindingsError`] names.
//! A text reply that carries the document somewhere inside is the caller's to cut out with
//! [`extract_json`] first.

use std::collections::BTreeMap;

use serde::ser::SerializeTuple;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use thiserror::Error;

mod extract;
mod schema;

pub(crate) use schema::{Category, Confidence, EvidenceType, Overall, Severity, Stage};

/// The largest `findings.json` read (4 MiB): a ranked list of at most a few hundred
/// findings is far smaller; more is an agent gone wrong.
pub(crate) const MAX_BYTES: usize = 4 << 20;

/// Why a `findings.json` was refused; each is one line.
#[derive(Debug, Error, PartialEq)]
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
    #[error("findings.json: findings[{second}].finding_id: duplicate id {id} (first used by findings[{first}])")]
    DuplicateId {
        id: String,
        first: usize,
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
}

/// The verdict on the whole release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Assessment {
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

/// One reproducibility blocker, phrased as the GitHub issue a user would open.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Finding {
    pub(crate) finding_id: String,
    pub(crate) rank_reason: String,
    pub(crate) severity: Severity,
    pub(crate) stage: Stage,
    pub(crate) category: Category,
    pub(crate) issue_title: String,
    pub(crate) user_symptom: String,
    pub(crate) trigger_context: String,
    pub(crate) root_cause: String,
    pub(crate) evidence: Vec<Evidence>,
    pub(crate) impact: String,
    pub(crate) affected_claims_or_metrics: Vec<String>,
    pub(crate) reproducibility_blocker: bool,
    pub(crate) confidence: Confidence,
    #[serde(flatten)]
    pub(crate) extra: Map<String, Value>,
}

/// Where a finding shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Evidence {
    /// Relative to the repository root (the paper's file name for `paper` evidence).
    pub(crate) path: String,
    pub(crate) line_refs: Vec<LineRange>,
    pub(crate) evidence_type: EvidenceType,
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

/// Reads and checks a `findings.json` (module docs: what is tolerated, what is refused).
pub(crate) fn validate(bytes: &[u8]) -> Result<Findings, FindingsError> {
    if bytes.len() > MAX_BYTES {
        return Err(FindingsError::TooLarge {
            size: bytes.len(),
            limit: MAX_BYTES,
        });
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let bytes = strip_fence(bytes);
    let value: Value = serde_json::from_slice(bytes).map_err(|e| syntax(&e))?;
    let Value::Object(map) = value else {
        let found = kind(&value);
        return Err(FindingsError::Type {
            at: "top level".into(),
            expected: "an object with `reproducibility_assessment` and `findings`",
            found,
        });
    };
    let mut top = Obj::new("top level".into(), map);
    let mut assess = top.object("reproducibility_assessment")?;
    let reproducibility_assessment = Assessment {
        overall: assess.enumerated("overall", Overall::parse, Overall::NAMES)?,
        summary: assess.string("summary")?,
        extra: assess.finish(),
    };
    let list = top.array("findings")?;
    let mut findings = Vec::with_capacity(list.len());
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    for (i, v) in list.into_iter().enumerate() {
        let f = finding(i, v)?;
        if let Some(&first) = ids.get(&f.finding_id) {
            return Err(FindingsError::DuplicateId {
                id: show(&Value::String(f.finding_id)),
                first,
                second: i,
            });
        }
        ids.insert(f.finding_id.clone(), i);
        findings.push(f);
    }
    let mut missing_or_ambiguous_artifacts = Vec::new();
    if top.map.contains_key("missing_or_ambiguous_artifacts") {
        let list = top.array("missing_or_ambiguous_artifacts")?;
        for (i, v) in list.into_iter().enumerate() {
            missing_or_ambiguous_artifacts.push(artifact(i, v)?);
        }
    }
    Ok(Findings {
        reproducibility_assessment,
        findings,
        missing_or_ambiguous_artifacts,
        extra: top.finish(),
    })
}

fn finding(i: usize, v: Value) -> Result<Finding, FindingsError> {
    let at = format!("findings[{i}]");
    let mut o = Obj::from_value(at.clone(), v, "a finding object")?;
    let finding_id = match o.map.get("finding_id") {
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => {
            let s = n.to_string();
            o.map.remove("finding_id");
            s
        }
        _ => o.string("finding_id")?,
    };
    o.non_empty("finding_id", &finding_id)?;
    let rank_reason = o.string("rank_reason")?;
    let severity = o.enumerated("severity", Severity::parse, Severity::NAMES)?;
    let stage = o.enumerated("stage", Stage::parse, Stage::NAMES)?;
    let category = o.enumerated("category", Category::parse, Category::NAMES)?;
    let issue_title = o.string("issue_title")?;
    o.non_empty("issue_title", &issue_title)?;
    let user_symptom = o.string("user_symptom")?;
    let trigger_context = o.string("trigger_context")?;
    let root_cause = o.string("root_cause")?;
    let mut evidence = Vec::new();
    for (j, e) in o.array("evidence")?.into_iter().enumerate() {
        evidence.push(evidence_item(&format!("{at}.evidence[{j}]"), e)?);
    }
    let impact = o.string("impact")?;
    let affected_claims_or_metrics = match o.take("affected_claims_or_metrics")? {
        Value::String(s) => vec![s],
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (j, item) in items.into_iter().enumerate() {
                match item {
                    Value::String(s) => out.push(s),
                    other => {
                        return Err(type_err(
                            format!("{at}.affected_claims_or_metrics[{j}]"),
                            "a string",
                            &other,
                        ))
                    }
                }
            }
            out
        }
        other => {
            return Err(type_err(
                format!("{at}.affected_claims_or_metrics"),
                "an array of strings",
                &other,
            ))
        }
    };
    let reproducibility_blocker = match o.take("reproducibility_blocker")? {
        Value::Bool(b) => b,
        other => {
            return Err(type_err(
                format!("{at}.reproducibility_blocker"),
                "true or false",
                &other,
            ))
        }
    };
    let confidence = o.enumerated("confidence", Confidence::parse, Confidence::NAMES)?;
    Ok(Finding {
        finding_id,
        rank_reason,
        severity,
        stage,
        category,
        issue_title,
        user_symptom,
        trigger_context,
        root_cause,
        evidence,
        impact,
        affected_claims_or_metrics,
        reproducibility_blocker,
        confidence,
        extra: o.finish(),
    })
}

fn evidence_item(at: &str, v: Value) -> Result<Evidence, FindingsError> {
    let mut o = Obj::from_value(at.to_string(), v, "an evidence object")?;
    let path = o.string("path")?;
    o.non_empty("path", &path)?;
    let line_refs = match o.map.remove("line_refs") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => line_refs(&format!("{at}.line_refs"), v)?,
    };
    Ok(Evidence {
        path,
        line_refs,
        evidence_type: o.enumerated("evidence_type", EvidenceType::parse, EvidenceType::NAMES)?,
        summary: o.string("summary")?,
        extra: o.finish(),
    })
}

/// `line_refs`: a list of references, each an integer (one line), `"12"`, `"12-30"` or a
/// `[12, 30]` pair (a range); one bare reference is read as a one-item list (so `[12, 30]`
/// is lines 12 and 30, `[[12, 30]]` the range). Lines are 1-based; a range ends at or after
/// its start.
fn line_refs(at: &str, v: Value) -> Result<Vec<LineRange>, FindingsError> {
    let items = match v {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut out = Vec::with_capacity(items.len());
    for (k, item) in items.into_iter().enumerate() {
        let at = format!("{at}[{k}]");
        let (start, end) = match &item {
            Value::Number(_) => {
                let n = line_number(&at, &item)?;
                (n, n)
            }
            Value::String(s) => parse_range(s).ok_or_else(|| FindingsError::Invalid {
                at: at.clone(),
                why: format!(
                    "{} is not a line (\"12\") or a range (\"12-30\")",
                    show(&item)
                ),
            })?,
            Value::Array(pair) if pair.len() == 2 => {
                (line_number(&at, &pair[0])?, line_number(&at, &pair[1])?)
            }
            other => return Err(type_err(at, "a line number, \"12-30\" or [12, 30]", other)),
        };
        if start == 0 || end < start {
            return Err(FindingsError::Invalid {
                at,
                why: format!("{start}-{end} is not a range of 1-based lines"),
            });
        }
        out.push(LineRange { start, end });
    }
    Ok(out)
}

fn line_number(at: &str, v: &Value) -> Result<u32, FindingsError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| type_err(at.to_string(), "a positive line number", v))
}

/// `"12"`, `"12-30"`, `"L12-L30"`, `"12–30"` (en dash).
fn parse_range(s: &str) -> Option<(u32, u32)> {
    let num = |t: &str| -> Option<u32> {
        let t = t.trim();
        let t = t.strip_prefix('L').unwrap_or(t);
        t.parse().ok()
    };
    match s.split_once(['-', '–']) {
        Some((a, b)) => Some((num(a)?, num(b)?)),
        None => num(s).map(|n| (n, n)),
    }
}

fn artifact(i: usize, v: Value) -> Result<Artifact, FindingsError> {
    let at = format!("missing_or_ambiguous_artifacts[{i}]");
    match v {
        Value::String(s) => Ok(Artifact::Text(s)),
        Value::Object(map) => {
            let mut o = Obj::new(at, map);
            Ok(Artifact::Item(ArtifactItem {
                artifact: o.string("artifact")?,
                why: o.string("why")?,
                extra: o.finish(),
            }))
        }
        other => Err(type_err(
            at,
            "a string or an object {artifact, why}",
            &other,
        )),
    }
}

/// An object being read: fields are taken out; what is left is `extra`.
struct Obj {
    at: String,
    map: Map<String, Value>,
}

impl Obj {
    fn new(at: String, map: Map<String, Value>) -> Obj {
        Obj { at, map }
    }

    fn from_value(at: String, v: Value, expected: &'static str) -> Result<Obj, FindingsError> {
        match v {
            Value::Object(map) => Ok(Obj { at, map }),
            other => Err(type_err(at, expected, &other)),
        }
    }

    fn field_at(&self, field: &str) -> String {
        if self.at == "top level" {
            field.to_string()
        } else {
            format!("{}.{field}", self.at)
        }
    }

    fn take(&mut self, field: &'static str) -> Result<Value, FindingsError> {
        self.map
            .remove(field)
            .ok_or_else(|| FindingsError::Missing {
                at: self.at.clone(),
                field,
            })
    }

    fn string(&mut self, field: &'static str) -> Result<String, FindingsError> {
        match self.take(field)? {
            Value::String(s) => Ok(s),
            other => Err(type_err(self.field_at(field), "a string", &other)),
        }
    }

    fn non_empty(&self, field: &str, value: &str) -> Result<(), FindingsError> {
        if value.trim().is_empty() {
            return Err(FindingsError::Invalid {
                at: self.field_at(field),
                why: "must not be empty".into(),
            });
        }
        Ok(())
    }

    fn array(&mut self, field: &'static str) -> Result<Vec<Value>, FindingsError> {
        match self.take(field)? {
            Value::Array(items) => Ok(items),
            other => Err(type_err(self.field_at(field), "an array", &other)),
        }
    }

    fn object(&mut self, field: &'static str) -> Result<Obj, FindingsError> {
        let at = self.field_at(field);
        let v = self.take(field)?;
        Obj::from_value(at, v, "an object")
    }

    /// An enum value, read after folding case and `-`/blanks to `_`.
    fn enumerated<E>(
        &mut self,
        field: &'static str,
        parse: fn(&str) -> Option<E>,
        names: &[&str],
    ) -> Result<E, FindingsError> {
        let at = self.field_at(field);
        let raw = self.string(field)?;
        let folded: String = raw
            .trim()
            .chars()
            .map(|c| {
                if c == '-' || c == ' ' {
                    '_'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect();
        parse(&folded).ok_or_else(|| FindingsError::Value {
            at,
            value: show(&Value::String(raw)),
            allowed: names.join("|"),
        })
    }

    fn finish(self) -> Map<String, Value> {
        self.map
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn type_err(at: String, expected: &'static str, found: &Value) -> FindingsError {
    FindingsError::Type {
        at,
        expected,
        found: kind(found),
    }
}

/// A value as compact JSON on one line, cut to 60 characters.
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 60 {
        return s;
    }
    let cut: String = s.chars().take(57).collect();
    format!("{cut}...")
}

fn syntax(e: &serde_json::Error) -> FindingsError {
    // serde_json's message ends with " at line L column C"; the error carries them apart.
    let full = e.to_string();
    let msg = match full.rfind(" at line ") {
        Some(i) => full[..i].to_string(),
        None => full,
    };
    FindingsError::Syntax {
        line: e.line(),
        column: e.column(),
        msg,
    }
}

/// The document inside one Markdown fence that wraps all of `bytes`, else `bytes`.
fn strip_fence(bytes: &[u8]) -> &[u8] {
    let t = bytes.trim_ascii();
    let Some(rest) = t.strip_prefix(b"```") else {
        return bytes;
    };
    let Some(body_start) = rest.iter().position(|&b| b == b'\n') else {
        return bytes;
    };
    match rest[body_start..].strip_suffix(b"```") {
        Some(body) if !body.windows(3).any(|w| w == b"```") => body,
        _ => bytes,
    }
}

#[cfg(test)]
mod tests;
