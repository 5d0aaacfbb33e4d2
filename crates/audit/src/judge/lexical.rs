//! The built-in judge (`--judge builtin`): a lexical matcher that needs no model. A pure,
//! deterministic function of `task.json` whose answer is validated like any judge's.
//!
//! Each (hidden issue, finding) pair is scored by
//! - **similarity**: the cosine of TF-IDF vectors (IDF over the task's documents: its
//!   issues and findings) of the issue's title, body and first [`EARLY_COMMENTS`] comments
//!   against the finding's text fields (title, symptom, trigger, root cause, evidence paths
//!   and summaries, impact);
//! - **anchors** both sides name: file and script names (`train.py`, `run.sh`), CLI flags
//!   (`--fp16`), Python modules (after `import`/`from`, `No module named`, `pip install`,
//!   and package names such as `opencv-python` → `cv2`), model and data files (`*.pth`,
//!   `*.ckpt`, `*.pt`, `*.safetensors`, ...) — the strong anchors — and exception class
//!   names (`XxxError`, `XxxException`), weak ones (many problems raise the same one).
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

use super::result::{strongest, FindingAlignment, IssueAlignment, JudgeResult, PairOut};
use super::task::Task;
use crate::judgment::Label;

/// Similarity an anchored pair needs to be `exact`.
pub(crate) const EXACT_SIM: f64 = 0.45;
/// Similarity an anchored (strong) pair needs to be `semantic`.
pub(crate) const SEMANTIC_SIM_ANCHORED: f64 = 0.10;
/// Similarity a pair sharing only a weak anchor needs to be `semantic`.
pub(crate) const SEMANTIC_SIM_WEAK: f64 = 0.20;
/// Similarity a pair without shared anchors needs to be `semantic`.
pub(crate) const SEMANTIC_SIM: f64 = 0.40;
/// Comments of an issue read with its title and body.
pub(crate) const EARLY_COMMENTS: usize = 3;

/// Extensions of code, scripts and configuration: `file:` anchors.
const CODE_EXTS: &[&str] = &[
    "py", "sh", "ipynb", "yaml", "yml", "json", "toml", "cfg", "ini", "txt", "cpp", "cu", "c", "h",
    "hpp", "js", "ts", "r", "jl", "m", "lua", "java", "go", "rs", "md", "bash",
];
/// Extensions of checkpoints, weights and data: `artifact:` anchors.
const ARTIFACT_EXTS: &[&str] = &[
    "pth",
    "ckpt",
    "pt",
    "safetensors",
    "bin",
    "h5",
    "hdf5",
    "pkl",
    "pickle",
    "npy",
    "npz",
    "onnx",
    "tar",
    "zip",
    "gz",
    "csv",
    "tsv",
    "parquet",
    "jsonl",
    "mat",
    "tfrecord",
];
/// Package names users install under another import name.
const PACKAGE_MODULES: &[(&str, &str)] = &[
    ("opencv", "cv2"),
    ("opencv-python", "cv2"),
    ("opencv-python-headless", "cv2"),
    ("opencv-contrib-python", "cv2"),
    ("pillow", "pil"),
    ("scikit-learn", "sklearn"),
    ("scikit-image", "skimage"),
    ("pyyaml", "yaml"),
    ("beautifulsoup4", "bs4"),
    ("pytorch", "torch"),
    ("tensorflow-gpu", "tensorflow"),
    ("protobuf", "google"),
    ("python-dateutil", "dateutil"),
];
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from",
    "has", "have", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or",
    "so", "that", "the", "there", "this", "to", "was", "we", "when", "with", "you", "your", "our",
    "they", "will", "would", "should", "which", "what", "any", "all", "also", "been", "into",
    "than", "then", "these", "those", "only", "some", "get", "got", "use", "using", "used", "run",
    "running", "try", "tried", "hi", "thanks", "thank", "please",
];

/// Words of `text` for the TF-IDF vectors: lower case, split at anything but letters and
/// digits, stop words dropped, a light suffix strip.
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 2)
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
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

/// Whether an anchor is strong (names one thing) rather than weak (an exception class).
fn strong(anchor: &str) -> bool {
    !anchor.starts_with("exception:")
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The anchors `text` names (`file:train.py`, `flag:--fp16`, `module:cv2`,
/// `artifact:model.pth`, `exception:keyerror`).
pub(crate) fn anchors(text: &str) -> BTreeSet<String> {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "'\"`()[]{}<>,;:=|!?*".contains(c))
        .map(|t| t.trim_end_matches('.'))
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = BTreeSet::new();
    for (i, t) in tokens.iter().enumerate() {
        let lower = t.to_lowercase();
        let prev = |k: usize| i.checked_sub(k).map(|j| tokens[j].to_lowercase());
        if let Some(flag) = lower.strip_prefix("--") {
            if flag.starts_with(|c: char| c.is_ascii_alphabetic())
                && flag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                out.insert(format!("flag:{lower}"));
            }
            continue;
        }
        let base = lower.rsplit('/').next().unwrap_or(&lower);
        if let Some((stem, ext)) = base.rsplit_once('.') {
            if !stem.is_empty() && CODE_EXTS.contains(&ext) {
                out.insert(format!("file:{base}"));
                continue;
            }
            if !stem.is_empty() && ARTIFACT_EXTS.contains(&ext) {
                out.insert(format!("artifact:{base}"));
                continue;
            }
        }
        let class = t.rsplit('.').next().unwrap_or(t);
        if class.starts_with(|c: char| c.is_ascii_uppercase())
            && (class.ends_with("Error") || class.ends_with("Exception"))
            && class.chars().all(|c| c.is_ascii_alphanumeric())
        {
            out.insert(format!("exception:{}", class.to_lowercase()));
            continue;
        }
        let after_import = matches!(prev(1).as_deref(), Some("import" | "from"));
        let after_named =
            prev(1).as_deref() == Some("named") && prev(2).as_deref() == Some("module");
        let after_install =
            prev(1).as_deref() == Some("install") && prev(2).as_deref() == Some("pip");
        if let Some((_, module)) = PACKAGE_MODULES.iter().find(|(p, _)| *p == lower) {
            out.insert(format!("module:{module}"));
        } else if (after_import || after_named || after_install)
            && is_ident(&lower)
            && !STOPWORDS.contains(&lower.as_str())
        {
            let top = lower.split('.').next().unwrap_or(&lower);
            out.insert(format!("module:{top}"));
        }
    }
    out
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
    if strong_n >= 1 && sim >= EXACT_SIM {
        Label::Exact
    } else if (strong_n >= 1 && sim >= SEMANTIC_SIM_ANCHORED)
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
    let score = |issue: usize, text: &str| {
        let a = anchors(&issue_texts[issue]);
        let shared: BTreeSet<String> = anchors(text).intersection(&a).cloned().collect();
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
        let scored: Vec<Scored> = (0..n).map(|fi| score(ii, &finding_texts[fi])).collect();
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
                    score(ii, &finding_text(task, b, Some(d))).label
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
            "reprorun built-in lexical judge: exact >= {EXACT_SIM} with a strong anchor, semantic >= {SEMANTIC_SIM_ANCHORED} anchored, >= {SEMANTIC_SIM_WEAK} weakly anchored, >= {SEMANTIC_SIM} otherwise"
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
