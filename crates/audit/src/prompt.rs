//! The audit prompt: reprorun's own words for the ReproRepo method's rules, given to an
//! LLM audit agent (Codex, Claude Code, any command) in its sandbox.
//!
//! The schema part is generated from the enum lists of [`super::findings`], the ones the
//! validator checks against, so the prompt and the validator cannot drift; the example
//! document in the prompt passes [`super::findings::validate`] (a unit test checks both).
//! Ablations: `paper_file: None` (`--no-paper`) says no paper is given and drops every
//! mention of one; `order_instruction: false` (`--no-order-instruction`) drops the
//! sentences that ask for the ranking, nothing else.

use serde_json::json;

use super::findings::{Category, Confidence, EvidenceType, Severity, Stage};

/// What the prompt tells the agent about its sandbox.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptOptions {
    /// The paper inside the sandbox (e.g. `/work/paper.md`); `None` for the no-paper ablation.
    pub(crate) paper_file: Option<String>,
    /// The repository snapshot inside the sandbox (e.g. `/work/repo`).
    pub(crate) repo_dir: String,
    /// Where the agent writes its findings (e.g. `/out/findings.json`).
    pub(crate) out_file: String,
    /// Whether to ask for the findings ranked by how likely a real reproducer reports them.
    pub(crate) order_instruction: bool,
    /// The most findings to report.
    pub(crate) max_findings: usize,
}

/// The prompt for one audit run.
pub(crate) fn prompt(opts: &PromptOptions) -> String {
    let mut p = String::new();
    let repo = &opts.repo_dir;
    p.push_str("You are auditing a research code release for reproducibility blockers.\n\n");
    match &opts.paper_file {
        Some(paper) => p.push_str(&format!(
            "A paper and the code its authors released with it are given:\n\
             - the paper: {paper}\n\
             - the repository, as a user would clone it: {repo}\n\n\
             Imagine a researcher who reads the paper and tries to reproduce its results with \
             this repository. Find the problems that would block or mislead them: the ones that \
             would make them open a GitHub issue on this repository.\n\n"
        )),
        None => p.push_str(&format!(
            "The repository, as a user would clone it, is at {repo}. No paper is given: judge \
             the release from the repository alone.\n\n\
             Imagine a researcher who tries to reproduce the results this repository claims. \
             Find the problems that would block or mislead them: the ones that would make them \
             open a GitHub issue on this repository.\n\n"
        )),
    }
    p.push_str(
        "Rules:\n\
         - Blind: you have no access to the repository's issues, pull requests, discussions or \
         later commits, and no internet. Do not try to reach them.\n\
         - Static: read files only. Do not execute, build, install, import or download anything; \
         do not run the repository's scripts or tests.\n\
         - Report what a real user following the README",
    );
    if opts.paper_file.is_some() {
        p.push_str(" and the paper");
    }
    p.push_str(
        " would actually hit (a missing file, an undeclared dependency, a command that fails, a \
         missing checkpoint or dataset, a hard-coded path, a mismatch",
    );
    if opts.paper_file.is_some() {
        p.push_str(" between paper and code");
    } else {
        p.push_str(" between documentation and code");
    }
    p.push_str(
        "), not style or code quality. One finding per distinct cause; merge duplicates.\n\
         - Ground every finding in evidence: file paths relative to the repository root and \
         line numbers. For something that is absent, give the path where it was expected and \
         evidence_type \"missing_artifact\".\n",
    );
    if opts.order_instruction {
        p.push_str(
            "- Order the findings by how likely a real reproducer would be to report them, most \
             likely first. The order is your ranking: it is scored.\n",
        );
    }
    p.push_str(&format!(
        "- Report at most {} findings. Fewer, well-grounded findings beat many speculative ones.\n\n",
        opts.max_findings
    ));
    p.push_str("Finding categories (field `category`):\n");
    for c in Category::ALL {
        p.push_str(&format!("- {}: {}\n", c.as_str(), c.describe()));
    }
    p.push_str("\nStages (field `stage`):\n");
    for s in Stage::ALL {
        p.push_str(&format!("- {}: {}\n", s.as_str(), s.describe()));
    }
    p.push_str("\nSeverities (field `severity`):\n");
    for s in Severity::ALL {
        p.push_str(&format!("- {}: {}\n", s.as_str(), s.describe()));
    }
    p.push('\n');
    p.push_str(&schema(opts));
    p
}

/// `a|b|c`.
fn one_of(names: &[&str]) -> String {
    names.join("|")
}

/// The `findings.json` schema, field by field, and an example document.
fn schema(opts: &PromptOptions) -> String {
    let findings_line = if opts.order_instruction {
        "array of finding objects, most likely to be reported first"
    } else {
        "array of finding objects"
    };
    let mut s = format!(
        "Write your result as JSON to {out} (a JSON object, no Markdown around it) with these fields:\n\
         - reproducibility_assessment: string, two or three sentences: can the paper's main \
         results be reproduced from this release, and what stands in the way\n\
         - findings: {findings_line}; each has\n\
         \x20 - finding_id: string, unique (e.g. \"F1\")\n\
         \x20 - rank_reason: string, why a reproducer would hit and report this\n\
         \x20 - severity: {severity}\n\
         \x20 - stage: {stage}\n\
         \x20 - category: {category}\n\
         \x20 - issue_title: string, phrased like the title of the GitHub issue a user would open\n\
         \x20 - user_symptom: string, what the user sees (an error message, a wrong number)\n\
         \x20 - trigger_context: string, what the user was doing (the command, the step)\n\
         \x20 - root_cause: string\n\
         \x20 - evidence: array of objects\n\
         \x20   - path: string, relative to the repository root{paper_path}\n\
         \x20   - line_refs: array of line numbers or \"start-end\" strings (empty for a missing artifact)\n\
         \x20   - evidence_type: {evidence_type}\n\
         \x20   - summary: string, what this evidence shows\n\
         \x20 - impact: string, which results cannot be reproduced\n\
         \x20 - affected_claims_or_metrics: array of strings (tables, figures, metrics)\n\
         \x20 - reproducibility_blocker: true or false (false: it misleads but does not block)\n\
         \x20 - confidence: {confidence}\n\
         - missing_or_ambiguous_artifacts: array of objects {{artifact: string, why: string}} \
         (data, checkpoints, configs the release lacks or leaves unclear)\n\n",
        out = opts.out_file,
        severity = one_of(Severity::NAMES),
        stage = one_of(Stage::NAMES),
        category = one_of(Category::NAMES),
        evidence_type = one_of(EvidenceType::NAMES),
        confidence = one_of(Confidence::NAMES),
        paper_path = if opts.paper_file.is_some() {
            " (for evidence_type \"paper_repo_mismatch\": the paper's file name or the file that differs)"
        } else {
            ""
        },
    );
    s.push_str("Example of the shape (the values are illustrative):\n```json\n");
    s.push_str(&example());
    s.push_str("\n```\n");
    s
}

/// An example document; it passes the validator.
fn example() -> String {
    let doc = json!({
        "reproducibility_assessment": "Partially reproducible: training code is released but undeclared dependencies and a missing checkpoint block evaluation.",
        "findings": [{
            "finding_id": "F1",
            "rank_reason": "Every user installs the requirements and runs the training command first.",
            "severity": Severity::High.as_str(),
            "stage": Stage::InstallEnvironment.as_str(),
            "category": Category::EnvironmentSetup.as_str(),
            "issue_title": "ModuleNotFoundError: No module named 'cv2' when running train.py",
            "user_symptom": "ModuleNotFoundError: No module named 'cv2'",
            "trigger_context": "pip install -r requirements.txt, then python train.py as in the README",
            "root_cause": "train.py imports cv2 but requirements.txt does not list opencv-python.",
            "evidence": [
                {"path": "train.py", "line_refs": [3], "evidence_type": EvidenceType::File.as_str(), "summary": "import cv2"},
                {"path": "requirements.txt", "line_refs": ["1-12"], "evidence_type": EvidenceType::Config.as_str(), "summary": "no opencv entry"}
            ],
            "impact": "Training cannot start.",
            "affected_claims_or_metrics": ["Table 1"],
            "reproducibility_blocker": true,
            "confidence": Confidence::High.as_str()
        }],
        "missing_or_ambiguous_artifacts": [
            {"artifact": "pretrained checkpoint for Table 2", "why": "the README names ckpt/best.pth but gives no download link"}
        ]
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::findings::validate;
    use super::*;

    fn opts() -> PromptOptions {
        PromptOptions {
            paper_file: Some("/work/paper.md".into()),
            repo_dir: "/work/repo".into(),
            out_file: "/out/findings.json".into(),
            order_instruction: true,
            max_findings: 25,
        }
    }

    /// The value list the prompt gives for `field`.
    fn listed<'a>(p: &'a str, field: &str) -> Vec<&'a str> {
        let prefix = format!("- {field}: ");
        let line = p
            .lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(&prefix))
            .unwrap();
        line[prefix.len()..].split('|').collect()
    }

    #[test]
    fn enums_in_the_prompt_are_the_validators() {
        let p = prompt(&opts());
        // The paper's value sets (ReproRepo, Appendix E.1), as it spells them.
        assert_eq!(listed(&p, "stage")[0], "install/environment");
        assert_eq!(listed(&p, "category").len(), 12);
        assert_eq!(listed(&p, "evidence_type")[2], "missing_artifact");
        assert!(p.contains("- reproducibility_assessment: string"));
        assert_eq!(listed(&p, "severity"), Severity::NAMES);
        assert_eq!(listed(&p, "stage"), Stage::NAMES);
        assert_eq!(listed(&p, "category"), Category::NAMES);
        assert_eq!(listed(&p, "evidence_type"), EvidenceType::NAMES);
        assert_eq!(listed(&p, "confidence"), Confidence::NAMES);
        for c in Category::ALL {
            assert!(
                p.contains(&format!("- {}: {}\n", c.as_str(), c.describe())),
                "{c:?}"
            );
        }
    }

    #[test]
    fn the_example_passes_the_validator() {
        let p = prompt(&opts());
        let start = p.find("```json\n").unwrap() + "```json\n".len();
        let end = start + p[start..].find("\n```").unwrap();
        let f = validate(&p.as_bytes()[start..end]).unwrap();
        assert_eq!(f.findings.len(), 1);
        assert_eq!(f.problems, vec![]);
    }

    #[test]
    fn paths_and_cap_are_in_the_prompt() {
        let p = prompt(&opts());
        for s in [
            "/work/paper.md",
            "/work/repo",
            "/out/findings.json",
            "at most 25 findings",
        ] {
            assert!(p.contains(s), "{s}");
        }
        assert!(p.contains("Do not execute"));
        assert!(p.contains("no internet"));
    }

    #[test]
    fn no_order_ablation_drops_exactly_the_order_sentences() {
        let with = prompt(&opts());
        let without = prompt(&PromptOptions {
            order_instruction: false,
            ..opts()
        });
        let with_lines: Vec<&str> = with.lines().collect();
        let without_lines: Vec<&str> = without.lines().collect();
        let dropped: Vec<&&str> = with_lines
            .iter()
            .filter(|l| !without_lines.contains(l))
            .collect();
        let added: Vec<&&str> = without_lines
            .iter()
            .filter(|l| !with_lines.contains(l))
            .collect();
        assert_eq!(dropped.len(), 2, "{dropped:?}");
        assert!(dropped.iter().all(|l| l.contains("likely")));
        assert_eq!(
            added,
            vec![&"- findings: array of finding objects; each has"]
        );
        assert!(!without.contains("ranking"));
        assert!(!without.contains("Order the findings"));
        assert!(without.contains("rank_reason"));
    }

    #[test]
    fn no_paper_ablation_never_mentions_a_paper_file() {
        let without = prompt(&PromptOptions {
            paper_file: None,
            ..opts()
        });
        assert!(!without.contains("/work/paper.md"));
        assert!(!without.contains("following the README and the paper"));
        assert!(!without.contains("paper's file name"));
        assert!(without.contains("No paper is given"));
        // The schema is the same: `paper` stays a valid evidence type for the validator.
        assert_eq!(listed(&without, "evidence_type"), EvidenceType::NAMES);
        assert!(without.contains("/work/repo"));
    }
}
