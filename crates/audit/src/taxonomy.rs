//! The paper's four-way taxonomy (crash immediate, crash late, silent wrong setup, silent
//! wrong number) applied to an agent's prediction, as its Figures 7–9 apply it to human
//! issues and to predictions alike. A finding is read as the issue it predicts: its title
//! and its symptom, trigger, root cause and impact go through the same rules that label
//! human issues (`filter::classify`); a finding those rules do not place (no error
//! signature, no wrong number, no set-up words) is placed by its own `category` and
//! `stage`. Pure functions: no I/O.

use crate::findings::{Category as Kind, Finding, Stage};
use crate::input::{Category, Issue};

/// How a finding was placed: by the issue rules on its text, or by its category and stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Basis {
    Text,
    Fields,
}

/// A finding's class in the four-way split, and what decided it; `None` when neither its
/// text nor its fields place it (no category given).
pub(crate) fn of_finding(f: &Finding) -> Option<(Category, Basis)> {
    let body = [
        f.user_symptom.as_str(),
        f.trigger_context.as_str(),
        f.root_cause.as_str(),
        f.impact.as_str(),
    ]
    .join("\n");
    if let (true, Some(c)) = crate::filter::classify(&as_issue(&f.issue_title, &body)) {
        return Some((c, Basis::Text));
    }
    by_fields(f.category?, f.stage).map(|c| (c, Basis::Fields))
}

/// The class a finding's paper category (and stage) stands for. Blockers a user meets
/// before anything runs are immediate crashes; a runtime or hardware failure in training,
/// inference or evaluation is a late one; a mismatch of settings or an omission of the
/// documentation runs with the wrong set-up; a result mismatch is a wrong number.
fn by_fields(kind: Kind, stage: Option<Stage>) -> Option<Category> {
    let mid_run = matches!(
        stage,
        Some(
            Stage::TrainingFineTuning
                | Stage::InferenceDemo
                | Stage::EvaluationMetrics
                | Stage::ResultComparison
        )
    );
    Some(match kind {
        Kind::EnvironmentSetup
        | Kind::DependencyVersion
        | Kind::DataAccess
        | Kind::ModelWeights
        | Kind::ApiService
        | Kind::TrainingReproduction
        | Kind::EvaluationReproduction => Category::CrashImmediate,
        Kind::RuntimeError | Kind::HardwareBackend if mid_run => Category::CrashLate,
        Kind::RuntimeError | Kind::HardwareBackend => Category::CrashImmediate,
        Kind::DocumentationGap | Kind::PaperRepoMismatch => Category::SilentWrongSetup,
        Kind::ResultMismatch => Category::SilentWrongNumber,
    })
}

/// A finding's text as an issue the rules read (open, unlabelled).
fn as_issue(title: &str, body: &str) -> Issue {
    Issue {
        repo: String::new(),
        number: 0,
        title: title.to_string(),
        body: body.to_string(),
        state: "open".into(),
        state_reason: None,
        created_at: String::new(),
        closed_at: None,
        labels: Vec::new(),
        comments: Vec::new(),
        url: String::new(),
        closing_prs: Vec::new(),
        timeline_commits: Vec::new(),
        reproducibility: None,
        category: None,
        fix_commit: None,
        label_source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Category::*;

    fn finding(title: &str, symptom: &str, kind: Option<Kind>, stage: Option<Stage>) -> Finding {
        let doc = br#"{"reproducibility_assessment": "", "findings": [{"finding_id": "F1", "issue_title": "x"}]}"#;
        let mut f = crate::findings::validate(doc)
            .expect("a valid document")
            .findings
            .remove(0);
        f.issue_title = title.into();
        f.user_symptom = symptom.into();
        f.category = kind;
        f.stage = stage;
        f
    }

    #[test]
    fn a_prediction_is_placed_by_the_issue_rules_on_its_text() {
        let cases = [
            (
                "ModuleNotFoundError: No module named 'cv2'",
                "",
                Kind::EnvironmentSetup,
                CrashImmediate,
            ),
            (
                "Training crashes after the first epoch",
                "RuntimeError: CUDA out of memory",
                Kind::RuntimeError,
                CrashLate,
            ),
            (
                "Cannot reproduce the accuracy of Table 2",
                "73.1 instead of 76.4",
                Kind::ResultMismatch,
                SilentWrongNumber,
            ),
            // A settings mismatch naming no result: a wrong set-up, whatever the category says.
            (
                "train.sh does not match the paper",
                "learning rate 5e-5 instead of 2e-4 (could not reproduce)",
                Kind::ResultMismatch,
                SilentWrongSetup,
            ),
        ];
        for (title, symptom, kind, want) in cases {
            let f = finding(title, symptom, Some(kind), Some(Stage::TrainingFineTuning));
            assert_eq!(of_finding(&f), Some((want, Basis::Text)), "{title}");
        }
    }

    #[test]
    fn a_prediction_without_telling_words_is_placed_by_its_category_and_stage() {
        let cases = [
            (
                Kind::ModelWeights,
                Some(Stage::DataModelAcquisition),
                CrashImmediate,
            ),
            (
                Kind::RuntimeError,
                Some(Stage::InstallEnvironment),
                CrashImmediate,
            ),
            (
                Kind::RuntimeError,
                Some(Stage::EvaluationMetrics),
                CrashLate,
            ),
            (
                Kind::HardwareBackend,
                Some(Stage::TrainingFineTuning),
                CrashLate,
            ),
            (Kind::HardwareBackend, None, CrashImmediate),
            (
                Kind::PaperRepoMismatch,
                Some(Stage::TrainingFineTuning),
                SilentWrongSetup,
            ),
            (Kind::DocumentationGap, None, SilentWrongSetup),
            (
                Kind::ResultMismatch,
                Some(Stage::ResultComparison),
                SilentWrongNumber,
            ),
        ];
        for (kind, stage, want) in cases {
            let f = finding("The weights", "nothing telling", Some(kind), stage);
            assert_eq!(
                of_finding(&f),
                Some((want, Basis::Fields)),
                "{kind:?} {stage:?}"
            );
        }
        // Neither text nor category: not placed (the report counts it as unclassified).
        assert_eq!(of_finding(&finding("The weights", "", None, None)), None);
    }
}
