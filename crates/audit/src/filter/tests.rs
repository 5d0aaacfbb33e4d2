use super::*;
use crate::input::Category::*;

fn issue(title: &str, body: &str) -> Issue {
    Issue {
        repo: "lab/model".into(),
        number: 1,
        title: title.into(),
        body: body.into(),
        state: "closed".into(),
        state_reason: Some("completed".into()),
        created_at: "2023-01-01T00:00:00Z".into(),
        closed_at: None,
        labels: Vec::new(),
        comments: Vec::new(),
        url: "https://github.com/lab/model/issues/1".into(),
        closing_prs: Vec::new(),
        timeline_commits: Vec::new(),
        reproducibility: None,
        category: None,
        fix_commit: None,
        label_source: None,
    }
}

#[test]
fn reproducibility_issues_get_their_category() {
    let cases = [
        (
            "Import error when running train.py",
            "$ python train.py --config configs/base.yaml\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    from torch_geometric.nn import GCNConv\nModuleNotFoundError: No module named 'torch_geometric'",
            CrashImmediate,
        ),
        (
            "data/vocab.pkl not found",
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/vocab.pkl'",
            CrashImmediate,
        ),
        (
            "pip install -r requirements.txt",
            "ERROR: Could not find a version that satisfies the requirement torch==1.4.0+cu100",
            CrashImmediate,
        ),
        (
            "Error when loading the pretrained model",
            "RuntimeError: Error(s) in loading state_dict for ResNet:\n\tsize mismatch for fc.weight: copying a param with shape torch.Size([1000, 2048]) from checkpoint, the shape in current model is torch.Size([10, 2048]).",
            CrashLate,
        ),
        (
            "CUDA OOM at epoch 3",
            "Epoch 3: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 10.76 GiB total capacity)",
            CrashLate,
        ),
        (
            "crash in evaluation",
            "After training finishes, evaluation fails:\nValueError: too many values to unpack (expected 2)",
            CrashLate,
        ),
        (
            "Can't reproduce Table 2",
            "I trained with the default settings and got 71.2 top-1, but the paper reports 76.5. Could you share the exact command?",
            SilentWrongNumber,
        ),
        (
            "Results lower than reported",
            "My BLEU is 24.1 while the paper has 27.3.",
            SilentWrongNumber,
        ),
        (
            "Which learning rate was used for CIFAR-100?",
            "The config uses 0.1 but the paper says 0.05 with cosine decay. Which one is right?",
            SilentWrongSetup,
        ),
        (
            "preprocessing script for ScanNet",
            "The README does not say how the data split was made; the val list is missing data for 12 scenes.",
            SilentWrongSetup,
        ),
    ];
    for (title, body, want) in cases {
        assert_eq!(classify(&issue(title, body)), (true, Some(want)), "{title}");
    }
}

#[test]
fn other_issues_are_not_reproducibility_issues() {
    let cases = [
        (
            "Will you release the pretrained weights?",
            "Great work! Do you plan to release the checkpoints for the large model?",
        ),
        (
            "Feature request: multi-GPU support",
            "Would it be possible to add support for DistributedDataParallel?",
        ),
        (
            "Question about Eq. 3",
            "Why is the temperature divided by the norm in Eq. 3? Thanks.",
        ),
        ("License?", "Under which license is this code released?"),
    ];
    for (title, body) in cases {
        assert_eq!(classify(&issue(title, body)), (false, None), "{title}");
    }
    let mut skilled = issue("Thanks", "A skilled piece of work, the paper is clear.");
    assert_eq!(classify(&skilled), (false, None));
    skilled.labels = vec!["Question".into()];
    skilled.body = "Which batch size did you use?".into();
    assert_eq!(
        classify(&skilled),
        (false, None),
        "a set-up question labelled a question by the maintainers"
    );
}

#[test]
fn not_planned_is_not_reproducibility_even_with_a_traceback() {
    let mut i = issue(
        "error",
        "Traceback (most recent call last):\nKeyError: 'model'",
    );
    assert!(classify(&i).0);
    i.state_reason = Some("not_planned".into());
    assert_eq!(classify(&i), (false, None));
}

#[test]
fn input_labels_win_and_the_source_is_recorded() {
    let mut given = issue("Feature request", "please add X");
    given.reproducibility = Some(true);
    given.category = Some(SilentWrongSetup);
    label(&mut given, Some("exit 3")).unwrap();
    assert_eq!(
        (
            given.reproducibility,
            given.category,
            given.label_source.as_deref()
        ),
        (Some(true), Some(SilentWrongSetup), Some("input")),
        "neither rules nor the judge ran"
    );
    let mut ruled = issue("Feature request", "please add X");
    label(&mut ruled, None).unwrap();
    assert_eq!(
        (
            ruled.reproducibility,
            ruled.category,
            ruled.label_source.as_deref()
        ),
        (Some(false), None, Some("rules"))
    );
}

#[test]
fn the_judge_reads_the_issue_on_stdin_and_its_verdict_is_taken() {
    let mut i = issue("anything", "body");
    let cmd =
        r#"grep -q '"number":1' && echo '{"reproducibility": true, "category": "crash_late"}'"#;
    label(&mut i, Some(cmd)).unwrap();
    assert_eq!(
        (i.reproducibility, i.category, i.label_source.as_deref()),
        (Some(true), Some(CrashLate), Some("judge"))
    );
    for (cmd, needle) in [
        ("echo oops >&2; exit 4", "oops"),
        ("echo not json", "expected"),
        (
            r#"echo '{"reproducibility": true, "category": "meh"}'"#,
            "meh",
        ),
    ] {
        let e = label(&mut issue("a", "b"), Some(cmd))
            .unwrap_err()
            .to_string();
        assert!(e.contains("lab/model#1") && e.contains(needle), "{e}");
    }
}

// Issue 46 §3: real issues the rules dropped or misfiled (the tuning half of
// images/audit-real, paraphrased).
#[test]
fn real_setup_mismatches_dead_links_and_unreproduced_results_are_kept() {
    let cases = [
        (
            "Mobile-O-0.5B pre_train.sh Does Not Match the Paper",
            "Some hyper-parameters of pre_train.sh differ from the paper: the script sets weight_decay 0 where the paper reports 0.01, and learning rate 5e-5 where the paper states 2e-4.",
            SilentWrongSetup,
        ),
        (
            "Can not reproduce the output",
            "The script's learning rate and batch size differ from the experiment settings in the paper; which is correct?",
            SilentWrongSetup,
        ),
        (
            "Pre-trained Checkpoints Leading to 404's",
            "Every pre-trained checkpoint link at the bottom of the README returns a 404 error.",
            CrashImmediate,
        ),
        (
            "The link does not work for \"Checkpoints for pre-trained models\"",
            "The README's link to the checkpoints for pre-trained models no longer works.",
            CrashImmediate,
        ),
        (
            "The result for atari enduro in the paper is not reproduced",
            "With the latest code Atari Enduro does not learn; tensorboard curves attached.",
            SilentWrongNumber,
        ),
        (
            "\"Inconsistent experimental results\"",
            "Why do the results of this code not match the paper's, and why are they worse?",
            SilentWrongNumber,
        ),
    ];
    for (title, body, want) in cases {
        assert_eq!(
            rules::classify(&issue(title, body)),
            (true, Some(want)),
            "{title}"
        );
    }
    // A result that differs stays a wrong number even when a setting is named.
    assert_eq!(
        rules::classify(&issue(
            "Cannot reproduce the accuracy",
            "With the paper's learning rate I get 71.2% accuracy, not 76.5%."
        )),
        (true, Some(SilentWrongNumber))
    );
}
