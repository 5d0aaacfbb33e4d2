//! Rules on what the documentation and the paper promise: training or evaluation described
//! but not released (`missing_train_entry`, `missing_eval_entry`), artifacts announced as
//! coming later (`coming_soon`).

use std::collections::BTreeMap;

use super::tree::{self, file_name, line_no};
use super::{ev, Candidate, Ctx, Rule};
use crate::findings::detail::{Category, EvidenceType, Stage};
use crate::findings::Severity;

/// Lowercased words of the paper and the documentation.
fn described(ctx: &Ctx) -> (String, String) {
    let docs: String = ctx
        .doc_texts()
        .map(|(_, t)| t.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("\n");
    (
        ctx.paper.map(str::to_ascii_lowercase).unwrap_or_default(),
        docs,
    )
}

/// `missing_train_entry` and `missing_eval_entry`.
pub(super) fn entry_points(ctx: &Ctx) -> Vec<Candidate> {
    let (paper, docs) = described(ctx);
    let code_files: Vec<&str> = ctx
        .tree
        .files()
        .filter(|p| matches!(tree::ext(p).as_str(), "py" | "sh" | "ipynb"))
        .collect();
    let code_text = |needles: &[&str]| {
        ctx.py.keys().any(|p| {
            ctx.tree
                .text(p)
                .is_some_and(|t| needles.iter().any(|n| t.contains(n)))
        })
    };
    let stem_has = |words: &[&str]| {
        code_files.iter().any(|p| {
            words
                .iter()
                .any(|w| file_name(p).to_ascii_lowercase().contains(w))
        })
    };
    let mut out = Vec::new();
    let said = |words: &[&str]| {
        words
            .iter()
            .any(|w| has_word(&paper, w) || has_word(&docs, w))
    };
    let train_said = said(&["we train", "training", "trained", "fine-tun", "finetun"]);
    let train_code = stem_has(&["train", "finetune", "fine_tune", "pretrain"])
        || code_text(&[
            ".backward(",
            "optimizer.step",
            ".fit(",
            "Trainer(",
            "def train",
            "train_step",
            "apply_gradients",
        ]);
    if train_said && !train_code {
        let mut c = Candidate::new(Rule::MissingTrainEntry, "train");
        c.title = "Training code not released? No training script in the repository".into();
        c.symptom = "There is no train.py (or any training loop) to run; only inference/evaluation code is provided".into();
        c.trigger = "trying to retrain the model as the paper describes".into();
        c.cause = "The paper/README describe training, but no file is named for training and no Python file has a backward pass, optimizer step or fit call.".into();
        c.evidence.push(ev(
            "train.py",
            &[],
            EvidenceType::Absence,
            "no training entry point",
        ));
        push_mention(ctx, &mut c, &["training", "train"]);
        c.impact =
            "Training results (and any result needing retraining) cannot be reproduced.".into();
        c.claims.push("training results".into());
        out.push(c);
    }
    let eval_said = said(&["evaluat", "test set", "benchmark", "inference"]);
    let eval_code = stem_has(&[
        "eval", "test", "infer", "predict", "demo", "bench", "valid", "score", "metric", "sample",
        "generate", "run", "main",
    ]) || code_text(&[
        "def evaluate",
        "def eval",
        "def test",
        ".eval()",
        "evaluate(",
        "def validate",
    ]);
    if eval_said && !eval_code {
        let mut c = Candidate::new(Rule::MissingEvalEntry, "eval");
        c.title = "How to evaluate? No evaluation script to reproduce the paper's numbers".into();
        c.symptom =
            "No eval.py/test.py or evaluation function to compute the reported metrics".into();
        c.trigger = "trying to reproduce the paper's result tables".into();
        c.cause = "The paper/README describe evaluation, but no file is named for evaluation, testing or inference and no evaluation function exists.".into();
        c.evidence.push(ev(
            "eval.py",
            &[],
            EvidenceType::Absence,
            "no evaluation entry point",
        ));
        push_mention(ctx, &mut c, &["evaluat", "test"]);
        c.impact = "The reported numbers cannot be recomputed.".into();
        c.claims.push("reported evaluation metrics".into());
        out.push(c);
    }
    out
}

/// Whether `text` has `word` at the start of a word (`trained` but not `pretrained`).
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(p, _)| {
        !text[..p]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
    })
}

/// Adds the first documentation (else paper) line mentioning one of `words`.
fn push_mention(ctx: &Ctx, c: &mut Candidate, words: &[&str]) {
    for (doc, text) in ctx.doc_texts() {
        if let Some(i) = text
            .lines()
            .position(|l| words.iter().any(|w| l.to_ascii_lowercase().contains(w)))
        {
            c.evidence.push(ev(
                doc,
                &[line_no(i)],
                EvidenceType::Documentation,
                "describes it",
            ));
            return;
        }
    }
    if let Some(paper) = ctx.paper {
        if let Some(i) = paper
            .lines()
            .position(|l| words.iter().any(|w| l.to_ascii_lowercase().contains(w)))
        {
            c.evidence.push(ev(
                "paper",
                &[line_no(i)],
                EvidenceType::Paper,
                "describes it",
            ));
        }
    }
}

const SOON: &[&str] = &[
    "coming soon",
    "will be released",
    "to be released",
    "will release",
    "will be made available",
    "will be available",
    "will be uploaded",
    "will be open-sourced",
    "will be open sourced",
    "will be public",
    "release soon",
    "released soon",
    "stay tuned",
    "under construction",
    "todo:",
    "to do:",
    "work in progress",
    "not yet released",
    "yet to be released",
    "will be updated",
    "will upload",
    "will be added",
    "upload soon",
];

/// `coming_soon`: README lines announcing artifacts for later (unchecked `- [ ]` items
/// included), one finding per kind of artifact.
pub(super) fn coming_soon(ctx: &Ctx) -> Vec<Candidate> {
    let mut by_kind: BTreeMap<&str, Vec<(String, u32, String)>> = BTreeMap::new();
    for (doc, text) in ctx.doc_texts() {
        for (i, line) in text.lines().enumerate() {
            let l = line.to_ascii_lowercase();
            let t = l
                .trim_start()
                .trim_start_matches(['-', '*', '+'])
                .trim_start();
            if !(SOON.iter().any(|s| l.contains(s)) || t.starts_with("[ ]")) {
                continue;
            }
            let kind = if [
                "checkpoint",
                "weight",
                "pretrained",
                "pre-trained",
                "model zoo",
                "models",
            ]
            .iter()
            .any(|w| l.contains(w))
            {
                "checkpoints"
            } else if ["dataset", "data ", "data.", "annotation", "benchmark"]
                .iter()
                .any(|w| l.contains(w))
            {
                "data"
            } else if l.contains("train") {
                "training code"
            } else if ["eval", "test", "inference", "demo"]
                .iter()
                .any(|w| l.contains(w))
            {
                "evaluation code"
            } else {
                "code"
            };
            by_kind.entry(kind).or_default().push((
                doc.to_string(),
                line_no(i),
                line.trim().chars().take(120).collect(),
            ));
        }
    }
    let mut out = Vec::new();
    for (kind, lines) in by_kind {
        let mut c = Candidate::new(Rule::ComingSoon, kind);
        c.weight = lines.len();
        c.title = format!("When will the {kind} be released?");
        c.symptom =
            format!("The README says the {kind} will come later; they are not in the repository");
        c.trigger = "following the README to reproduce the paper".into();
        c.cause = format!("The release is incomplete: {}", lines[0].2);
        for (doc, line, text) in lines.iter().take(5) {
            c.evidence
                .push(ev(doc, &[*line], EvidenceType::Documentation, text.clone()));
        }
        (c.category, c.stage) = match kind {
            "checkpoints" => (Category::MissingCheckpoint, Stage::Inference),
            "data" => (Category::MissingData, Stage::DataPreparation),
            "training code" => (Category::IncompleteRelease, Stage::Training),
            "evaluation code" => (Category::IncompleteRelease, Stage::Evaluation),
            _ => (Category::IncompleteRelease, Stage::Documentation),
        };
        if kind == "code" {
            c.severity = Severity::Medium;
        }
        c.impact = format!(
            "Results that need the {kind} cannot be reproduced until the authors release them."
        );
        out.push(c);
    }
    out
}
