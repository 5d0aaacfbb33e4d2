//! The built-in judge's rules made from the real corpus's tuning half (issue 46: the blind
//! reader's tuning findings against the tuning issues), each with the near-miss it must
//! not match. Texts paraphrase the tuning pairs that taught each rule.

use super::anchors::{claimed_anchors, issue_anchors};
use super::tests::{finding, lexical_label};
use crate::judgment::Label;

/// The anchors of a finding's claim, as the judge counts them.
fn claim_anchors(f: &serde_json::Value) -> std::collections::BTreeSet<String> {
    let claim = ["issue_title", "user_symptom", "root_cause"]
        .map(|k| f[k].as_str().unwrap_or_default().to_string())
        .join("\n");
    claimed_anchors(&claim, &claim)
}

fn mixed_precision() -> serde_json::Value {
    finding(
        "dv2-4",
        "Mixed precision (precision: 16) is on by default",
        "errors or very slow training on CPU; numerical differences across GPUs",
        "running the default config",
        "configs.yaml sets precision 16 and a mixed_float16 policy is applied; the README does not say how to turn it off.",
        ("dreamerv2/configs.yaml", "precision: 16"),
        "runs on other hardware behave differently",
    )
}

#[test]
fn a_precision_setting_named_only_as_code_in_the_issue_matches_a_mixed_precision_finding() {
    let (title, body) = (
        "The result for atari enduro in the paper is not reproduced",
        "With the latest code Enduro does not learn.\nI ran it with precision=16; with precision=32 it is fine.",
    );
    assert!(issue_anchors(body).contains("hparam:precision"));
    assert_ne!(lexical_label(title, body, mixed_precision()), Label::None);
}

#[test]
fn precision_the_metric_is_not_the_precision_setting() {
    let body = "My precision and recall are lower than the paper's table 2.";
    assert!(!issue_anchors(body).contains("hparam:precision"));
    assert_eq!(
        lexical_label("Precision is low", body, mixed_precision()),
        Label::None
    );
}

#[test]
fn a_dead_checkpoint_link_matches_a_checkpoint_to_download_not_one_the_code_writes() {
    let (title, body) = (
        "Pre-trained Checkpoints Leading to 404's",
        "Every pre-trained checkpoint link at the bottom of the README returns a 404 error.",
    );
    let hosted = finding(
        "ifm-1",
        "Pre-trained ImageNet100 checkpoints only on Google Drive links",
        "linear evaluation cannot be reproduced without the checkpoints; if a Drive link is dead the download fails",
        "reproducing the linear-probe numbers",
        "The README table links each checkpoint to a single drive.google.com file.",
        ("README.md", "checkpoints behind drive.google.com links"),
        "the released models are a single point of failure",
    );
    assert!(claim_anchors(&hosted).contains("concept:checkpoint"));
    assert_ne!(lexical_label(title, body, hosted), Label::None);
    // A checkpoint the code saves to a hard-coded path, and one a newer PyTorch cannot
    // unpickle, are other problems with the same word.
    let saved = finding(
        "ifm-3",
        "Checkpoint filename hard-coded to the author's /data/scratch/joshrob/ directory",
        "FileNotFoundError / No such file or directory when the first checkpoint is saved at the end of an epoch",
        "python main_moco.py on any other machine",
        "main_moco.py builds the checkpoint filename from an absolute path under /data/scratch.",
        ("moco-master/main_moco.py", "absolute author path for checkpoints"),
        "pre-training crashes after the first epoch",
    );
    let unpickled = finding(
        "legr-2",
        "Whole pickled models loaded with torch.load; only 'PyTorch 1.0.1' is stated",
        "loading the released .t7 checkpoints on a newer PyTorch fails while unpickling",
        "python legr.py with a current PyTorch",
        "legr.py calls torch.load on a whole pickled nn.Module; unpickling needs PyTorch 1.0.1.",
        ("legr.py", "torch.load of a pickled model"),
        "the checkpoints may not load at all",
    );
    for f in [saved, unpickled] {
        assert!(!claim_anchors(&f).contains("concept:checkpoint"), "{f}");
        assert_eq!(lexical_label(title, body, f), Label::None);
    }
}

fn lower_than_paper() -> serde_json::Value {
    finding(
        "cgd-3",
        "Unofficial re-implementation: results are images, not compared with the paper's Recall@1",
        "Recall@1 obtained with this code may be lower than the paper's, with no stated expected gap",
        "training with the default configuration and comparing with the paper's table",
        "The repository re-implements the paper; no released model or log lets a user check the gap to the paper's numbers.",
        ("README.md", "unofficial implementation"),
        "numbers cannot be tied to the paper",
    )
}

#[test]
fn a_vague_cannot_reproduce_issue_matches_a_result_gap_finding() {
    let (title, body) = (
        "Can you reproduce the result in paper?",
        "I tried to reproduce the paper's numbers with this code and failed.",
    );
    assert!(issue_anchors(title).contains("concept:result_gap"));
    assert!(claim_anchors(&lower_than_paper()).contains("concept:result_gap"));
    assert_ne!(lexical_label(title, body, lower_than_paper()), Label::None);
}

#[test]
fn an_issue_naming_its_cause_is_not_matched_by_a_generic_result_gap() {
    // The issue names the settings it suspects: a claim that results are lower (the
    // keyword-stuffing agent's generic one included) is not that problem.
    let (title, body) = (
        "Can not reproduce the output",
        "Trained with scripts/train_single.sh, the outputs do not look like the paper's. The script's learning rate and batch size differ from the paper's settings; which is correct?",
    );
    let stuffed = "cannot reproduce the results of the paper: accuracy lower than reported";
    let generic = finding(
        "S4",
        stuffed,
        stuffed,
        "bash scripts/train_single.sh",
        stuffed,
        ("README.md", stuffed),
        stuffed,
    );
    assert!(claim_anchors(&generic).contains("concept:result_gap"));
    assert_eq!(lexical_label(title, body, generic), Label::None);
    assert_eq!(lexical_label(title, body, lower_than_paper()), Label::None);
}
