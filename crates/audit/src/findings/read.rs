//! Reading a `findings.json`: what is fatal (the document is not one), and what only drops
//! a field, an evidence item or a finding, named in [`Findings::problems`] so the run keeps
//! everything else (the paper's documents, Appendix E.1, and agents' slips alike).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::schema::detail;
use super::{
    Artifact, ArtifactItem, Assessment, Category, Confidence, Evidence, EvidenceType, Finding,
    Findings, FindingsError, LineRange, Overall, Severity, Stage, Verdict, MAX_BYTES,
};

/// Reads a `findings.json` (the module docs of `findings`: what is tolerated, what is
/// refused). Only a document that is not one is an error: too large, not JSON, not an
/// object, or without a `findings` array. Every other problem drops what it names and is
/// listed in `problems`, all of them, in document order.
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
    let list = top.array("findings")?;
    let mut p = Vec::new();
    let reproducibility_assessment = assessment(&mut top, &mut p);
    let mut findings = Vec::with_capacity(list.len());
    let mut ids = BTreeSet::new();
    for (i, v) in list.into_iter().enumerate() {
        let Some(mut f) = finding(i, v, &mut p) else {
            continue;
        };
        if !ids.insert(f.finding_id.clone()) {
            let renamed = unique_id(&ids, &f.finding_id, i);
            p.push(FindingsError::DuplicateId {
                id: show(&Value::String(f.finding_id.clone())),
                renamed: renamed.clone(),
                second: i,
            });
            ids.insert(renamed.clone());
            f.finding_id = renamed;
        }
        findings.push(f);
    }
    let mut missing_or_ambiguous_artifacts = Vec::new();
    if top.map.contains_key("missing_or_ambiguous_artifacts") {
        for (i, v) in keep(top.array("missing_or_ambiguous_artifacts"), &mut p)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            if let Some(a) = keep(artifact(i, v), &mut p) {
                missing_or_ambiguous_artifacts.push(a);
            }
        }
    }
    Ok(Findings {
        reproducibility_assessment,
        findings,
        missing_or_ambiguous_artifacts,
        extra: top.finish(),
        problems: p,
    })
}

/// `Ok`'s value; an error is recorded and gives `None`.
fn keep<T>(r: Result<T, FindingsError>, problems: &mut Vec<FindingsError>) -> Option<T> {
    r.map_err(|e| problems.push(e)).ok()
}

/// `id#N` for the first N (from the finding's index) not already used.
fn unique_id(ids: &BTreeSet<String>, id: &str, i: usize) -> String {
    (i + 1..)
        .map(|n| format!("{id}#{n}"))
        .find(|c| !ids.contains(c))
        .unwrap_or_default()
}

/// The paper's free text, or reprorun's `{overall, summary}` object.
fn assessment(top: &mut Obj, p: &mut Vec<FindingsError>) -> Assessment {
    match top.map.remove("reproducibility_assessment") {
        Some(Value::String(s)) => Assessment::Text(s),
        Some(Value::Object(map)) => {
            let mut o = Obj::new("reproducibility_assessment".into(), map);
            let overall = keep(
                o.enumerated("overall", Overall::parse_loose, Overall::NAMES),
                p,
            )
            .unwrap_or(Overall::Unknown);
            let summary = keep(o.string("summary"), p).unwrap_or_default();
            Assessment::Verdict(Verdict {
                overall,
                summary,
                extra: o.finish(),
            })
        }
        None => {
            p.push(FindingsError::Missing {
                at: "top level".into(),
                field: "reproducibility_assessment",
            });
            Assessment::Text(String::new())
        }
        Some(other) => {
            p.push(type_err(
                "reproducibility_assessment".into(),
                "a string or an object {overall, summary}",
                &other,
            ));
            Assessment::Text(String::new())
        }
    }
}

fn finding(i: usize, v: Value, p: &mut Vec<FindingsError>) -> Option<Finding> {
    let at = format!("findings[{i}]");
    let mut o = keep(Obj::from_value(at.clone(), v, "a finding object"), p)?;
    let finding_id = match o.map.get("finding_id") {
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => {
            let s = n.to_string();
            o.map.remove("finding_id");
            Some(s)
        }
        _ => keep(o.string("finding_id"), p),
    };
    let finding_id = finding_id
        .filter(|id| keep(o.non_empty("finding_id", id), p).is_some())
        .unwrap_or_else(|| format!("F{}", i + 1));
    let mut text = |o: &mut Obj, f: &'static str| keep(o.string(f), p).unwrap_or_default();
    let rank_reason = text(&mut o, "rank_reason");
    let issue_title = text(&mut o, "issue_title");
    let user_symptom = text(&mut o, "user_symptom");
    let trigger_context = text(&mut o, "trigger_context");
    let root_cause = text(&mut o, "root_cause");
    let impact = text(&mut o, "impact");
    keep(o.non_empty("issue_title", &issue_title), p);
    let severity = keep(
        o.enumerated("severity", Severity::parse_loose, Severity::NAMES),
        p,
    );
    let confidence = keep(
        o.enumerated("confidence", Confidence::parse_loose, Confidence::NAMES),
        p,
    );
    let (stage, category) = stage_and_category(&mut o, p);
    let mut evidence = Vec::new();
    for (j, e) in keep(o.array("evidence"), p)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        if let Some(e) = evidence_item(&format!("{at}.evidence[{j}]"), e, p) {
            evidence.push(e);
        }
    }
    let affected_claims_or_metrics = claims(&mut o, &at, p);
    let reproducibility_blocker = blocker(&mut o, &at, p);
    Some(Finding {
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

/// `stage` and `category`: the paper's values, or reprorun's finer ones (an older prompt's),
/// read as the paper's with the original kept as `reprorun_stage` / `reprorun_category`.
fn stage_and_category(
    o: &mut Obj,
    p: &mut Vec<FindingsError>,
) -> (Option<Stage>, Option<Category>) {
    let (stage, fine_stage) = o.paper_or_detail(
        "stage",
        "reprorun_stage",
        (Stage::parse_loose, Stage::NAMES),
        detail::Stage::parse_loose,
        p,
    );
    let (category, fine_category) = o.paper_or_detail(
        "category",
        "reprorun_category",
        (Category::parse_loose, Category::NAMES),
        detail::Category::parse_loose,
        p,
    );
    let fine_stage_or_doc = fine_stage.unwrap_or(detail::Stage::Documentation);
    (
        stage.or(fine_stage.map(detail::Stage::paper)),
        category.or(fine_category.map(|c| c.paper(fine_stage_or_doc))),
    )
}

fn claims(o: &mut Obj, at: &str, p: &mut Vec<FindingsError>) -> Vec<String> {
    match o.map.remove("affected_claims_or_metrics") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter_map(|(j, item)| match item {
                Value::String(s) => Some(s),
                other => {
                    let at = format!("{at}.affected_claims_or_metrics[{j}]");
                    p.push(type_err(at, "a string", &other));
                    None
                }
            })
            .collect(),
        Some(other) => {
            let at = format!("{at}.affected_claims_or_metrics");
            p.push(type_err(at, "an array of strings", &other));
            Vec::new()
        }
    }
}

/// `reproducibility_blocker`: a boolean, or `"true"`/`"false"`/`"yes"`/`"no"`.
fn blocker(o: &mut Obj, at: &str, p: &mut Vec<FindingsError>) -> Option<bool> {
    let v = o.map.remove("reproducibility_blocker")?;
    let b = match &v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    };
    if b.is_none() {
        let at = format!("{at}.reproducibility_blocker");
        p.push(type_err(at, "true or false", &v));
    }
    b
}

/// One evidence item; `None` (recorded) when it is not an object or has no path.
fn evidence_item(at: &str, v: Value, p: &mut Vec<FindingsError>) -> Option<Evidence> {
    let mut o = keep(Obj::from_value(at.to_string(), v, "an evidence object"), p)?;
    let path = keep(o.string("path"), p)?;
    keep(o.non_empty("path", &path), p)?;
    let line_refs = match o.map.remove("line_refs") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => line_refs(&format!("{at}.line_refs"), v, p),
    };
    let (evidence_type, fine) = o.paper_or_detail(
        "evidence_type",
        "reprorun_evidence_type",
        (EvidenceType::parse_loose, EvidenceType::NAMES),
        detail::EvidenceType::parse_loose,
        p,
    );
    let evidence_type = evidence_type.or(fine.map(detail::EvidenceType::paper));
    let summary = keep(o.string("summary"), p).unwrap_or_default();
    Some(Evidence {
        path,
        line_refs,
        evidence_type,
        summary,
        extra: o.finish(),
    })
}

/// `line_refs`: a list of references, each an integer (one line), `"12"`, `"12-30"` or a
/// `[12, 30]` pair (a range); one bare reference is read as a one-item list (so `[12, 30]`
/// is lines 12 and 30, `[[12, 30]]` the range). Lines are 1-based; a range ends at or after
/// its start. Free text meaning "no line" (`""`, `"N/A"`, `"none"`, `"-"`) is no reference;
/// any other unreadable item is dropped and recorded.
fn line_refs(at: &str, v: Value, p: &mut Vec<FindingsError>) -> Vec<LineRange> {
    let items = match v {
        Value::Array(items) => items,
        one => vec![one],
    };
    let mut out = Vec::with_capacity(items.len());
    for (k, item) in items.into_iter().enumerate() {
        if let Value::String(s) = &item {
            if no_line(s) {
                continue;
            }
        }
        if let Some(r) = keep(line_ref(&format!("{at}[{k}]"), &item), p) {
            out.push(r);
        }
    }
    out
}

/// Text that says there is no line to point at.
fn no_line(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "" | "-" | "n/a" | "na" | "none" | "null" | "not applicable" | "unknown"
    )
}

fn line_ref(at: &str, item: &Value) -> Result<LineRange, FindingsError> {
    let (start, end) = match item {
        Value::Number(_) => {
            let n = line_number(at, item)?;
            (n, n)
        }
        Value::String(s) => parse_range(s).ok_or_else(|| FindingsError::Invalid {
            at: at.to_string(),
            why: format!(
                "{} is not a line (\"12\") or a range (\"12-30\")",
                show(item)
            ),
        })?,
        Value::Array(pair) if pair.len() == 2 => {
            (line_number(at, &pair[0])?, line_number(at, &pair[1])?)
        }
        other => {
            return Err(type_err(
                at.to_string(),
                "a line number, \"12-30\" or [12, 30]",
                other,
            ))
        }
    };
    if start == 0 || end < start {
        return Err(FindingsError::Invalid {
            at: at.to_string(),
            why: format!("{start}-{end} is not a range of 1-based lines"),
        });
    }
    Ok(LineRange { start, end })
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

/// One of the paper's value sets: its reader and its names.
type PaperSet<P> = (fn(&str) -> Option<P>, &'static [&'static str]);

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

    /// An enum value, read with `parse` (the sets' `parse_loose` folds case and blanks).
    fn enumerated<E>(
        &mut self,
        field: &'static str,
        parse: fn(&str) -> Option<E>,
        names: &[&str],
    ) -> Result<E, FindingsError> {
        let at = self.field_at(field);
        let raw = self.string(field)?;
        parse(&raw).ok_or_else(|| FindingsError::Value {
            at,
            value: show(&Value::String(raw)),
            allowed: names.join("|"),
        })
    }

    /// `field` read as a value of the paper's set (`paper`), else of reprorun's finer set
    /// (`fine`; the text is kept as `ext`), else recorded as a problem: at most one is `Some`.
    fn paper_or_detail<P, D>(
        &mut self,
        field: &'static str,
        ext: &str,
        paper: PaperSet<P>,
        fine: fn(&str) -> Option<D>,
        p: &mut Vec<FindingsError>,
    ) -> (Option<P>, Option<D>) {
        if let Some(Value::String(s)) = self.map.get(field) {
            if paper.0(s).is_none() {
                if let Some(d) = fine(s) {
                    if let Some(v) = self.map.remove(field) {
                        self.map.insert(ext.to_string(), v);
                    }
                    return (None, Some(d));
                }
            }
        }
        (keep(self.enumerated(field, paper.0, paper.1), p), None)
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
