//! The built-in relevance rules: is an issue about reproducing the paper's code, and which
//! kind of failure is it? Plain phrase lists over the title and body (lower case), in the
//! order a maintainer triages: not planned → error signatures → numbers that differ →
//! set-up questions → anything else is not a reproducibility issue. Hand-written phrase
//! matching keeps the rules readable in one place (a regex crate would add little).

use crate::input::{Category, Issue};

/// Import, install and missing-file errors: the code fails at its start.
const IMMEDIATE: &[&str] = &[
    "modulenotfounderror",
    "importerror",
    "no module named",
    "cannot import name",
    "filenotfounderror",
    "no such file or directory",
    "could not find a version that satisfies",
    "failed building wheel",
    "subprocess-exited-with-error",
    "resolutionimpossible",
    "command not found",
    "syntaxerror",
    "undefined symbol",
    "attributeerror: module",
    "pip install fails",
    "fails to install",
    "installation error",
];

/// Errors after the run got going: shapes, memory, keys, indices, NaNs.
const LATE: &[&str] = &[
    "size mismatch",
    "out of memory",
    "cuda error",
    "device-side assert",
    "keyerror",
    "indexerror",
    "segmentation fault",
    "loss is nan",
    "loss becomes nan",
    "nan loss",
    "loss goes to nan",
    "shapes cannot be multiplied",
    "must match the size",
    "dimension out of range",
];

/// Words that tell an error came mid-run.
const MID_RUN: &[&str] = &[
    "epoch",
    "iteration",
    "step ",
    "during training",
    "after training",
    "while training",
    "evaluat",
    "inference",
    "checkpoint",
];

/// The numbers differ from the paper's.
const WRONG_NUMBER: &[&str] = &[
    "cannot reproduce",
    "can't reproduce",
    "can not reproduce",
    "could not reproduce",
    "couldn't reproduce",
    "unable to reproduce",
    "fail to reproduce",
    "failed to reproduce",
    "reproduce the result",
    "reproduce your result",
    "reproduce the number",
    "reproduce the performance",
    "reproduce the accuracy",
    "reproducing the result",
    "lower accuracy",
    "lower than reported",
    "lower than the paper",
    "lower than in the paper",
    "worse than the paper",
    "worse than reported",
    "higher than reported",
    "different numbers",
    "different results",
    "results differ",
    "result differs",
    "results are different",
    "doesn't match the paper",
    "does not match the paper",
    "don't match the paper",
    "do not match the paper",
    "inconsistent with the paper",
    "reported in the paper",
    "performance gap",
    "accuracy gap",
    "not match the paper",
    "not reproduced",
    "is not reproducible",
    "inconsistent experimental result",
    "inconsistent result",
];

/// What a silently wrong number is about: a result, not a setting.
const RESULT_WORDS: &[&str] = &[
    "accuracy",
    "score",
    "map ",
    "miou",
    "bleu",
    "f1",
    "auc",
    "psnr",
    "fid",
    "reward",
    "return",
    "performance",
    "results",
    "numbers",
    "metric",
    "error rate",
    "top-1",
    "top1",
];

/// Settings: a mismatch about these, with no result named, is a wrong set-up.
const SETTINGS: &[&str] = &[
    "hyperparameter",
    "hyper-parameter",
    "hyper parameter",
    "learning rate",
    "learning_rate",
    "batch size",
    "batch_size",
    "weight decay",
    "weight_decay",
    "number of epochs",
    "epochs",
    "settings",
];

/// A dead or missing download: the user cannot get what the code needs to start.
const DEAD_LINK: &[&str] = &[
    "404",
    "link is broken",
    "link broken",
    "broken link",
    "links are broken",
    "link does not work",
    "link doesn't work",
    "link is down",
    "link has expired",
    "link expired",
    "link fails",
    "link is invalid",
    "link is dead",
];

/// Set-up questions that lead a user to a wrong set-up: missing data, config, parameters.
const WRONG_SETUP: &[&str] = &[
    "hyperparameter",
    "hyper-parameter",
    "hyper parameter",
    "learning rate",
    "batch size",
    "config file",
    "configuration file",
    "which config",
    "missing config",
    "missing file",
    "missing data",
    "data is missing",
    "dataset is missing",
    "missing dataset",
    "data split",
    "train/test split",
    "preprocessing",
    "pre-processing",
    "number of epochs",
    "random seed",
    "the paper says",
    "the paper uses",
    "paper mentions",
    "different from the paper",
    "not mentioned in the paper",
];

/// Not about running the code: feature requests, help with other things.
const NOT_REPRO: &[&str] = &[
    "feature request",
    "would it be possible to add",
    "could you add",
    "can you add",
    "please add",
    "support for",
    "do you plan to",
    "is there any plan",
    "any plans to",
    "release the pretrained",
    "release the checkpoint",
    "release the weights",
    "release the code",
    "when will the code",
    "license",
    "citation",
];

/// Labels that say an issue is not a reproducibility problem.
const NOT_REPRO_LABELS: &[&str] = &[
    "question",
    "enhancement",
    "feature",
    "feature request",
    "documentation",
    "wontfix",
    "invalid",
];

fn any(text: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| text.contains(p))
}

/// A Python traceback or an `XxxError: ...`/`Error: ...` line.
fn has_error_line(raw: &str) -> bool {
    raw.contains("Traceback (most recent call last)")
        || raw.lines().any(|l| {
            let l = l.trim_start();
            let Some((head, _)) = l.split_once(": ") else {
                return false;
            };
            let word = head.rsplit('.').next().unwrap_or(head);
            word.len() < 40
                && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && (word.ends_with("Error") || word.ends_with("Exception"))
        })
}

/// The rules' verdict: relevance and, when relevant, the category.
pub(crate) fn classify(issue: &Issue) -> (bool, Option<Category>) {
    if issue.state_reason.as_deref() == Some("not_planned") {
        return (false, None);
    }
    let raw = format!("{}\n{}", issue.title, issue.body);
    let text = raw.to_lowercase();
    let error = has_error_line(&raw) || any(&text, IMMEDIATE) || any(&text, LATE);
    if error {
        let shape = text.contains("runtimeerror") && text.contains("shape");
        let category = if any(&text, IMMEDIATE) && !any(&text, LATE) && !shape {
            Category::CrashImmediate
        } else if any(&text, LATE) || shape || any(&text, MID_RUN) {
            Category::CrashLate
        } else {
            Category::CrashImmediate
        };
        return (true, Some(category));
    }
    let labelled_away = issue
        .labels
        .iter()
        .any(|l| NOT_REPRO_LABELS.contains(&l.to_lowercase().as_str()));
    if any(&text, DEAD_LINK) {
        return (true, Some(Category::CrashImmediate));
    }
    // "pre_train.sh does not match the paper: learning rate 5e-5 vs 2e-4" is a set-up that
    // differs, not a number: a settings mismatch naming no result is a wrong set-up.
    let about_settings = any(&text, SETTINGS) && !any(&text, RESULT_WORDS);
    if any(&text, WRONG_NUMBER) && !about_settings {
        return (true, Some(Category::SilentWrongNumber));
    }
    if any(&text, WRONG_NUMBER) {
        return (true, Some(Category::SilentWrongSetup));
    }
    if labelled_away || any(&text, NOT_REPRO) {
        return (false, None);
    }
    if any(&text, WRONG_SETUP) {
        return (true, Some(Category::SilentWrongSetup));
    }
    (false, None)
}
