//! The built-in judge (`--judge builtin`): a lexical matcher that needs no model. A pure,
//! deterministic function of `task.json` whose answer is validated like any judge's.
//!
//! Each (hidden issue, finding) pair is scored by
//! - **similarity**: the cosine of TF-IDF vectors (IDF over the task's documents: its
//!   issues and findings) of the issue's title, body and first [`EARLY_COMMENTS`] comments
//!   against the finding's text fields (title, symptom, trigger, root cause, evidence paths
//!   and summaries, impact);
//! - **anchors** both sides name (`super::anchors`): strong ones (flags, Python modules,
//!   model and data files, hyper-parameters, two problem kinds) and weak ones (file names,
//!   exception classes); a finding naming too many is not counted (keyword stuffing).
//!
//! `exact` needs a shared strong anchor and similarity ≥ [`EXACT_SIM`]; `semantic` a shared
//! strong anchor and similarity ≥ [`SEMANTIC_SIM_ANCHORED`], a shared weak anchor and
//! ≥ [`SEMANTIC_SIM_WEAK`], or similarity ≥ [`SEMANTIC_SIM`] alone; otherwise `none`.
//! The per-dimension labels apply the same rule to one finding field at a time.
//!
//! Hand-written (about 300 lines) rather than a search crate: those index documents on disk
//! and tokenize for prose; this needs a few vectors per task and code-aware anchors.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::anchors::{self, strong, STOPWORDS};
use super::result::{strongest, FindingAlignment, IssueAlignment, JudgeResult, PairOut};
use super::task::Task;
use crate::judgment::Label;

/// Similarity an anchored pair needs to be `exact`.
pub(crate) const EXACT_SIM: f64 = 0.45;
/// Similarity a pair sharing a strong anchor and at least one more needs to be `exact` (the
/// script, its flag and the module: the same problem named several ways).
pub(crate) const EXACT_SIM_CORROBORATED: f64 = 0.30;
/// Similarity an anchored (strong) pair needs to be `semantic`.
pub(crate) const SEMANTIC_SIM_ANCHORED: f64 = 0.10;
/// Similarity a pair sharing only a weak anchor (a file, an exception class: places and
/// symptoms many problems share) needs to be `semantic`: nearly what a pair without anchors
/// needs.
pub(crate) const SEMANTIC_SIM_WEAK: f64 = 0.35;
/// Similarity a pair without shared anchors needs to be `semantic`.
pub(crate) const SEMANTIC_SIM: f64 = 0.40;
/// Comments of an issue read with its title and body.
pub(crate) const EARLY_COMMENTS: usize = 3;

/// Words of `text` for the TF-IDF vectors: lower case, split at anything but letters and
/// digits, stop words and [`GENERIC`] error words dropped, a light suffix strip. Code-like
/// tokens (a path, a dotted or snake_case name, a call, an assignment) are left out first:
/// files and modules are anchors, and quoting code is not describing a problem (keyword
/// stuffing copies the snapshot's code).
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|t| !code_like(t))
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.len() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()) && !GENERIC.contains(&w.as_str()))
        .map(|w| {
            for suffix in ["ing", "ed", "es", "s"] {
                if w.len() >= suffix.len() + 4 && w.ends_with(suffix) {
                    return w[..w.len() - suffix.len()].to_string();
                }
            }
            w
        })
        .collect()
}

/// The words of tracebacks and error messages every crash report shares.
const GENERIC: &[&str] = &[
    "traceback",
    "most",
    "recent",
    "call",
    "last",
    "line",
    "file",
    "error",
    "errno",
    "such",
    "directory",
    "module",
    "named",
    "cannot",
    "import",
    "name",
    "attribute",
    "attributeerror",
    "found",
    "fail",
    "fails",
    "failed",
    "exception",
    "raise",
    "modulenotfounderror",
    "importerror",
    "filenotfounderror",
    "runtimeerror",
    "keyerror",
    "valueerror",
    "typeerror",
];

/// Whether a whitespace-separated token is code rather than prose.
fn code_like(token: &str) -> bool {
    let t = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '/');
    t.contains('/')
        || t.contains('_')
        || t.contains('=')
        || token.contains('(') && token.contains(')') && !token.starts_with('(')
        || t.trim_end_matches('.').contains('.')
}

/// A TF-IDF vector.
type Vector = BTreeMap<String, f64>;

/// Inverse document frequencies over `docs` (smoothed: every word weighs at least 1).
fn idf(docs: &[Vec<String>]) -> BTreeMap<String, f64> {
    let mut df = BTreeMap::<String, usize>::new();
    for d in docs {
        for w in d.iter().collect::<BTreeSet<_>>() {
            *df.entry(w.clone()).or_default() += 1;
        }
    }
    let n = docs.len() as f64;
    df.into_iter()
        .map(|(w, k)| (w, ((n + 1.0) / (k as f64 + 1.0)).ln() + 1.0))
        .collect()
}

fn vector(words: &[String], idf: &BTreeMap<String, f64>) -> Vector {
    let mut v = Vector::new();
    for w in words {
        *v.entry(w.clone()).or_default() += 1.0;
    }
    for (w, x) in v.iter_mut() {
        *x = (1.0 + x.ln()) * idf.get(w).copied().unwrap_or(1.0);
    }
    v
}

fn cosine(a: &Vector, b: &Vector) -> f64 {
    let dot: f64 = a.iter().filter_map(|(w, x)| b.get(w).map(|y| x * y)).sum();
    let norm = |v: &Vector| v.values().map(|x| x * x).sum::<f64>().sqrt();
    let d = norm(a) * norm(b);
    if d == 0.0 {
        0.0
    } else {
        // An empty sum is -0.0: printed as such in rationales.
        (dot / d).max(0.0)
    }
}

/// The label of a similarity and the anchors both sides share.
pub(crate) fn decide(sim: f64, shared: &BTreeSet<String>) -> Label {
    let strong_n = shared.iter().filter(|a| strong(a)).count();
    let weak_n = shared.len() - strong_n;
    // A setting both name in prose (the finding's claim, not its quoted code) is the same
    // problem whatever else the texts say: an issue often names it only as `precision=16`,
    // which is code, not words.
    let setting = shared.iter().any(|a| a.starts_with("hparam:"));
    if strong_n >= 1 && (sim >= EXACT_SIM || (shared.len() >= 2 && sim >= EXACT_SIM_CORROBORATED)) {
        Label::Exact
    } else if setting
        || (strong_n >= 1 && sim >= SEMANTIC_SIM_ANCHORED)
        || (weak_n >= 1 && sim >= SEMANTIC_SIM_WEAK)
        || sim >= SEMANTIC_SIM
    {
        Label::Semantic
    } else {
        Label::None
    }
}

/// The text of an issue as the judge reads it.
fn issue_text(task: &Task, i: usize) -> String {
    let h = &task.hidden_issues[i];
    let mut t = format!("{}\n{}", h.title, h.body);
    for c in h.comments.iter().take(EARLY_COMMENTS) {
        t.push('\n');
        t.push_str(&c.body);
    }
    t
}

/// The text of one dimension of finding `i` (all of them for `None`).
fn finding_text(task: &Task, i: usize, dim: Option<&str>) -> String {
    let f = |k: &str| task.finding_str(i, k).to_string();
    let evidence = || {
        let mut t = String::new();
        let list = task.findings[i].get("evidence").and_then(Value::as_array);
        for e in list.into_iter().flatten() {
            for k in ["path", "summary"] {
                t.push_str(e.get(k).and_then(Value::as_str).unwrap_or(""));
                t.push('\n');
            }
        }
        t
    };
    match dim {
        Some("user_facing_symptom") => format!("{}\n{}", f("issue_title"), f("user_symptom")),
        Some("trigger_path_or_workflow") => f("trigger_context"),
        Some("root_cause") => f("root_cause"),
        Some("involved_artifact") => evidence(),
        Some(_) => f("impact"),
        None => [
            f("issue_title"),
            f("user_symptom"),
            f("trigger_context"),
            f("root_cause"),
            evidence(),
            f("impact"),
        ]
        .join("\n"),
    }
}

/// One scored pair.
struct Scored {
    label: Label,
    sim: f64,
    shared: BTreeSet<String>,
}

/// The built-in judge's answer to `task`.
pub(crate) fn judge(task: &Task) -> JudgeResult {
    let n_issues = task.hidden_issues.len();
    let n = task.findings.len();
    let issue_texts: Vec<String> = (0..n_issues).map(|i| issue_text(task, i)).collect();
    let finding_texts: Vec<String> = (0..n).map(|i| finding_text(task, i, None)).collect();
    let docs: Vec<Vec<String>> = issue_texts
        .iter()
        .chain(&finding_texts)
        .map(|t| words(t))
        .collect();
    let idf = idf(&docs);
    let issue_anchors: Vec<BTreeSet<String>> = issue_texts
        .iter()
        .map(|t| anchors::issue_anchors(t))
        .collect();
    let claim_names: Vec<BTreeSet<String>> = (0..n)
        .map(|fi| {
            let claim = ["issue_title", "user_symptom", "root_cause"]
                .map(|k| task.finding_str(fi, k))
                .join("\n");
            anchors::claim_names(&claim)
        })
        .collect();
    // What a finding claims, where its problem kinds must be named.
    let claims: Vec<String> = (0..n)
        .map(|fi| {
            ["issue_title", "user_symptom", "root_cause"]
                .map(|k| task.finding_str(fi, k))
                .join("\n")
        })
        .collect();
    // A finding's own anchors decide whether it is focused, whatever dimension is scored.
    let focused: Vec<bool> = finding_texts
        .iter()
        .zip(&claims)
        .map(|(t, c)| !anchors::unfocused(&anchors::claimed_anchors(t, c)))
        .collect();
    let score = |issue: usize, fi: usize, text: &str| {
        let shared = if focused[fi] {
            anchors::shared(
                &issue_anchors[issue],
                &anchors::claimed_anchors(text, &claims[fi]),
                &claim_names[fi],
            )
        } else {
            BTreeSet::new()
        };
        let sim = cosine(&vector(&docs[issue], &idf), &vector(&words(text), &idf));
        Scored {
            label: decide(sim, &shared),
            sim,
            shared,
        }
    };
    let mut pair_labels = Vec::new();
    let mut issue_alignments = Vec::new();
    let mut by_finding: Vec<Vec<(usize, Label)>> = vec![Vec::new(); n];
    for (ii, h) in task.hidden_issues.iter().enumerate() {
        let scored: Vec<Scored> = (0..n).map(|fi| score(ii, fi, &finding_texts[fi])).collect();
        for (fi, s) in scored.iter().enumerate() {
            pair_labels.push(PairOut {
                hidden_issue_id: h.hidden_issue_id.clone(),
                finding_index: fi as u64,
                label: s.label.as_str().into(),
            });
            by_finding[fi].push((ii, s.label));
        }
        // The best: the strongest label, then the highest similarity, then the first.
        let best = (0..n).min_by(|&a, &b| {
            let (x, y) = (&scored[a], &scored[b]);
            x.label
                .cmp(&y.label)
                .then(y.sim.total_cmp(&x.sim))
                .then(a.cmp(&b))
        });
        let best_label = best.map_or(Label::None, |b| scored[b].label);
        let matched = best.filter(|_| best_label != Label::None);
        let dimension_labels = super::result::DIMENSIONS
            .iter()
            .map(|d| {
                let l = matched.map_or(Label::None, |b| {
                    score(ii, b, &finding_text(task, b, Some(d))).label
                });
                (d.to_string(), l.as_str().to_string())
            })
            .collect();
        issue_alignments.push(IssueAlignment {
            hidden_issue_id: h.hidden_issue_id.clone(),
            target: Some(h.target.clone()),
            issue_number: Some(h.issue_number),
            best_label: best_label.as_str().into(),
            best_finding_id: matched.map(|b| task.finding_str(b, "finding_id").to_string()),
            best_finding_index: matched.map(|b| b as u64),
            dimension_labels,
            rationale: Value::String(match best {
                Some(b) => format!(
                    "lexical: best similarity {:.3} (finding {b}); shared anchors: {}",
                    scored[b].sim,
                    anchor_list(&scored[b].shared)
                ),
                None => "no findings".into(),
            }),
            matched_evidence: matched
                .map(|b| scored[b].shared.iter().cloned().collect::<Vec<_>>().into())
                .unwrap_or(Value::Array(Vec::new())),
        });
    }
    let finding_alignments = by_finding
        .iter()
        .enumerate()
        .map(|(fi, labels)| {
            let matched: Vec<usize> = labels
                .iter()
                .filter(|(_, l)| *l != Label::None)
                .map(|(ii, _)| *ii)
                .collect();
            FindingAlignment {
                finding_id: Some(task.finding_str(fi, "finding_id").to_string()),
                finding_index: fi as u64,
                best_label: strongest(labels.iter().map(|(_, l)| *l)).as_str().into(),
                matched_hidden_issue_ids: matched
                    .iter()
                    .map(|&ii| task.hidden_issues[ii].hidden_issue_id.clone())
                    .collect(),
                matched_targets: matched
                    .iter()
                    .map(|&ii| task.hidden_issues[ii].target.clone())
                    .collect(),
                rationale: Value::String("lexical similarity and shared anchors".into()),
            }
        })
        .collect();
    JudgeResult {
        issue_alignments,
        finding_alignments,
        pair_labels: Some(pair_labels),
        notes: Value::String(format!(
            "reprorun built-in lexical judge: exact >= {EXACT_SIM} with a strong anchor or >= {EXACT_SIM_CORROBORATED} with a strong one and another, semantic >= {SEMANTIC_SIM_ANCHORED} anchored, >= {SEMANTIC_SIM_WEAK} weakly anchored, >= {SEMANTIC_SIM} otherwise"
        )),
    }
}

fn anchor_list(shared: &BTreeSet<String>) -> String {
    if shared.is_empty() {
        "none".into()
    } else {
        shared.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}
