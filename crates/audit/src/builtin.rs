//! The built-in auditor: reprorun's rule-based, model-free baseline for `audit run
//! --agent builtin`. It reads a repository snapshot (and the paper's text, when given)
//! statically and writes the same `findings.json` an LLM agent writes; the same tree and
//! paper always give byte-identical output ([`Findings::to_json`]).
//!
//! Each rule looks for one kind of blocker users report on research code; its findings
//! are ranked by the rule's prior (how likely a reproducer is to hit and report that kind
//! of blocker; a judgment from the categories of reproducibility issues, not a measured
//! rate), then by how much evidence the finding has, then by key:
//!
//! | prior | rule (finding id prefix)  | what it reports                                          |
//! |------:|---------------------------|----------------------------------------------------------|
//! |    92 | `lfs_pointer`             | files that are Git LFS pointers, not content             |
//! |    88 | `missing_script`          | a README command runs a script or module not in the tree |
//! |    86 | `missing_checkpoint`      | a referenced checkpoint is absent, no download step       |
//! |    84 | `undeclared_import`       | a third-party import no dependency spec declares          |
//! |    82 | `no_dependency_spec`      | no requirements/setup/pyproject/environment file          |
//! |    80 | `missing_config`          | a referenced config file is absent                        |
//! |    78 | `missing_train_entry`     | training described, no training code                     |
//! |    76 | `coming_soon`             | README announces code/models/data as coming later         |
//! |    72 | `missing_eval_entry`      | evaluation described, no evaluation code                  |
//! |    70 | `unknown_flag`            | a README command passes a flag the script does not define |
//! |    68 | `empty_submodule`         | a `.gitmodules` path is empty, README never says `--recursive` |
//! |    64 | `missing_data`            | a referenced data path is absent, nowhere to download it  |
//! |    60 | `hardcoded_path`          | absolute paths of the authors' machines in code/configs   |
//! |    58 | `moved_script`            | a README command's script exists, but at another path     |
//! |    50 | `hyperparameter_mismatch` | the paper's lr/batch size/epochs differ from the code's   |
//! |    42 | `paper_dataset`           | a dataset the paper uses is never mentioned in the code   |
//! |    38 | `cuda_only`               | CUDA used with no `is_available()`/CPU fallback in a file |
//! |    34 | `paper_metric`            | a metric the paper reports is never computed in the code  |
//! |    26 | `hyperparameter_unset`    | a paper hyper-parameter the code never sets               |
//!
//! The tree is read under budgets ([`tree`]): files over 1 MiB, binary and non-UTF-8 files
//! are listed but not read, symlinks are never followed, depth and entry counts are capped.
//! At most [`MAX_FINDINGS`] findings are written, one per distinct cause.

mod commands;
mod paper;
mod paths;
mod pylex;
mod python;
mod readme;
mod stdlib;
mod tree;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Map;

use super::findings::detail::{Category, EvidenceType, Stage};
use super::findings::{
    Artifact, ArtifactItem, Assessment, Confidence, Evidence, Finding, Findings, LineRange,
    Overall, Severity, Verdict,
};
use pylex::Token;
use tree::Tree;

/// The most findings written.
pub(crate) const MAX_FINDINGS: usize = 50;

/// A rule, with its prior and the defaults of its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rule {
    LfsPointer,
    MissingScript,
    MissingCheckpoint,
    UndeclaredImport,
    NoDependencySpec,
    MissingConfig,
    MissingTrainEntry,
    ComingSoon,
    MissingEvalEntry,
    UnknownFlag,
    EmptySubmodule,
    MissingData,
    HardcodedPath,
    MovedScript,
    HyperparameterMismatch,
    PaperDataset,
    CudaOnly,
    PaperMetric,
    HyperparameterUnset,
}

/// A rule's prior and the defaults of its findings.
struct RuleRow {
    /// Which rule the row is (the table-order test reads it).
    #[cfg_attr(not(test), allow(dead_code))]
    rule: Rule,
    /// The finding id prefix.
    code: &'static str,
    prior: u32,
    category: Category,
    stage: Stage,
    severity: Severity,
    blocker: bool,
    confidence: Confidence,
    /// Why a reproducer hits and reports it (the finding's `rank_reason`).
    why: &'static str,
}

/// One row per [`Rule`], in its order (a unit test checks).
#[rustfmt::skip]
const RULES: &[RuleRow] = {
    use Category as C;
    use Confidence as F;
    use Severity as S;
    use Stage as T;
    macro_rules! row {
        ($rule:ident, $code:literal, $prior:literal, $cat:ident, $stage:ident, $sev:ident, $blocker:literal, $conf:ident, $why:literal) => {
            RuleRow { rule: Rule::$rule, code: $code, prior: $prior, category: C::$cat, stage: T::$stage, severity: S::$sev, blocker: $blocker, confidence: F::$conf, why: $why }
        };
    }
    &[
        row!(LfsPointer, "lfs_pointer", 92, IncompleteRelease, Inference, Critical, true, High, "a pointer file fails the moment it is loaded"),
        row!(MissingScript, "missing_script", 88, BrokenCommand, Documentation, High, true, High, "the documented command fails on its first run"),
        row!(MissingCheckpoint, "missing_checkpoint", 86, MissingCheckpoint, Inference, High, true, Medium, "evaluating released models is the first thing most users try"),
        row!(UndeclaredImport, "undeclared_import", 84, MissingDependency, EnvironmentSetup, High, true, High, "the import fails right after installing the declared dependencies"),
        row!(NoDependencySpec, "no_dependency_spec", 82, MissingDependency, EnvironmentSetup, High, true, High, "every user must guess the environment before anything runs"),
        row!(MissingConfig, "missing_config", 80, MissingFile, Training, High, true, High, "the referenced config is needed to start the run"),
        row!(MissingTrainEntry, "missing_train_entry", 78, MissingEntryPoint, Training, High, true, Medium, "users who want to retrain find no training code"),
        row!(ComingSoon, "coming_soon", 76, IncompleteRelease, Documentation, High, true, High, "announced-but-missing artifacts draw 'when will it be released?' issues"),
        row!(MissingEvalEntry, "missing_eval_entry", 72, MissingEntryPoint, Evaluation, High, true, Medium, "users who want the paper's numbers find no evaluation code"),
        row!(UnknownFlag, "unknown_flag", 70, BrokenCommand, Documentation, Medium, true, Medium, "the documented command stops at argument parsing"),
        row!(EmptySubmodule, "empty_submodule", 68, IncompleteRelease, EnvironmentSetup, High, true, Medium, "a plain clone leaves the submodule empty"),
        row!(MissingData, "missing_data", 64, MissingData, DataPreparation, High, true, Medium, "the data step has no documented source"),
        row!(HardcodedPath, "hardcoded_path", 60, HardcodedPath, Training, Medium, true, High, "the path exists only on the authors' machine"),
        row!(MovedScript, "moved_script", 58, BrokenCommand, Documentation, Low, false, Medium, "the script exists at another path; the README's command needs a cd"),
        row!(HyperparameterMismatch, "hyperparameter_mismatch", 50, PaperCodeMismatch, Training, Medium, false, Medium, "users comparing paper and code ask which value is right"),
        row!(PaperDataset, "paper_dataset", 42, MissingData, DataPreparation, Medium, true, Low, "users who want the paper's other experiments find no code for them"),
        row!(CudaOnly, "cuda_only", 38, HardwareAssumption, Inference, Medium, true, Medium, "users without a CUDA GPU hit it; many have one"),
        row!(PaperMetric, "paper_metric", 34, PaperCodeMismatch, Evaluation, Medium, false, Low, "the reported metric cannot be recomputed with the release"),
        row!(HyperparameterUnset, "hyperparameter_unset", 26, PaperCodeMismatch, Training, Low, false, Low, "the setting may be a framework default; users may ask"),
    ]
};

impl Rule {
    fn row(self) -> &'static RuleRow {
        // `RULES` has one row per variant in declaration order (`tests::rule_table_order`).
        &RULES[self as usize]
    }

    fn code(self) -> &'static str {
        self.row().code
    }

    fn prior(self) -> u32 {
        self.row().prior
    }
}

/// A finding before ranking.
#[derive(Debug, Clone)]
struct Candidate {
    rule: Rule,
    /// The distinct cause within the rule (a path, a distribution, a flag...).
    key: String,
    /// Ranks candidates of one rule: more is first (usually the number of places).
    weight: usize,
    severity: Severity,
    stage: Stage,
    category: Category,
    title: String,
    symptom: String,
    trigger: String,
    cause: String,
    evidence: Vec<Evidence>,
    impact: String,
    claims: Vec<String>,
    blocker: bool,
    confidence: Confidence,
}

impl Candidate {
    /// A candidate with its rule's defaults; the rule fills in the text.
    fn new(rule: Rule, key: impl Into<String>) -> Candidate {
        let row = rule.row();
        Candidate {
            rule,
            key: key.into(),
            weight: 1,
            severity: row.severity,
            stage: row.stage,
            category: row.category,
            title: String::new(),
            symptom: String::new(),
            trigger: String::new(),
            cause: String::new(),
            evidence: Vec::new(),
            impact: String::new(),
            claims: Vec::new(),
            blocker: row.blocker,
            confidence: row.confidence,
        }
    }
}

/// One piece of evidence.
fn ev(path: &str, lines: &[u32], kind: EvidenceType, summary: impl Into<String>) -> Evidence {
    let mut sorted: Vec<u32> = lines.iter().copied().filter(|&l| l > 0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    Evidence {
        path: path.to_string(),
        line_refs: sorted.into_iter().map(LineRange::line).collect(),
        evidence_type: Some(kind.paper()),
        summary: summary.into(),
        extra: extension(&[("reprorun_evidence_type", kind.as_str())]),
    }
}

/// reprorun's finer values, written beside the paper's as extension fields.
fn extension(fields: &[(&str, &str)]) -> Map<String, serde_json::Value> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect()
}

/// The evidence type of a repository file by its name.
fn kind_of(path: &str) -> EvidenceType {
    let ext = tree::ext(path);
    let name = tree::file_name(path).to_ascii_lowercase();
    if name.starts_with("readme") || matches!(ext.as_str(), "md" | "rst" | "markdown") {
        EvidenceType::Documentation
    } else if matches!(
        ext.as_str(),
        "yaml" | "yml" | "json" | "toml" | "cfg" | "ini" | "txt" | "lock"
    ) || name == "pipfile"
        || name == "dockerfile"
    {
        EvidenceType::Config
    } else {
        EvidenceType::Code
    }
}

/// What every rule reads: the tree, the tokens of each Python file, the documentation
/// files and the paper.
struct Ctx<'a> {
    tree: Tree,
    py: BTreeMap<String, Vec<Token>>,
    /// README files anywhere (depth ≤ 3) and Markdown/reST files at the root or in `docs/`.
    docs: Vec<String>,
    paper: Option<&'a str>,
}

impl Ctx<'_> {
    /// Every documentation file with its text.
    fn doc_texts(&self) -> impl Iterator<Item = (&str, &str)> {
        self.docs
            .iter()
            .filter_map(|p| self.tree.text(p).map(|t| (p.as_str(), t)))
    }

    /// Whether any code file (Python, shell, notebook) is in the tree.
    fn has_code(&self) -> bool {
        self.tree
            .files()
            .any(|p| matches!(tree::ext(p).as_str(), "py" | "ipynb" | "sh"))
    }
}

fn is_doc(path: &str) -> bool {
    let ext = tree::ext(path);
    if !matches!(ext.as_str(), "md" | "rst" | "markdown" | "txt" | "") {
        return false;
    }
    let name = tree::file_name(path).to_ascii_lowercase();
    let depth = path.matches('/').count();
    (name.starts_with("readme") && depth <= 3)
        || (ext != "txt"
            && !ext.is_empty()
            && (depth == 0 || (depth == 1 && path.starts_with("docs/"))))
}

/// Audits the repository at `repo` (and the paper's text, if given).
pub(crate) fn audit(repo: &Path, paper: Option<&str>) -> Findings {
    let mut tree = Tree::scan(repo);
    tree.set_aside_vendored();
    let py = tree
        .texts_with(&["py"])
        .map(|(p, t)| (p.to_string(), pylex::lex(t)))
        .collect();
    let docs = tree
        .texts()
        .map(|(p, _)| p)
        .filter(|p| is_doc(p))
        .map(str::to_string)
        .collect();
    let ctx = Ctx {
        tree,
        py,
        docs,
        paper,
    };
    let mut candidates = Vec::new();
    candidates.extend(paths::lfs_pointers(&ctx));
    candidates.extend(commands::commands(&ctx));
    candidates.extend(python::dependencies(&ctx));
    candidates.extend(paths::missing_references(&ctx));
    candidates.extend(readme::entry_points(&ctx));
    candidates.extend(readme::coming_soon(&ctx));
    candidates.extend(paths::submodules(&ctx));
    candidates.extend(paths::hardcoded(&ctx));
    candidates.extend(paper::paper_rules(&ctx));
    candidates.extend(python::cuda_only(&ctx));
    assemble(&ctx, candidates)
}

/// Ranks, deduplicates, caps and writes the document.
fn assemble(ctx: &Ctx, mut candidates: Vec<Candidate>) -> Findings {
    candidates.sort_by(|a, b| {
        (b.rule.prior(), b.weight, &a.key, a.rule)
            .cmp(&(a.rule.prior(), a.weight, &b.key, b.rule))
            .then_with(|| a.title.cmp(&b.title))
    });
    let mut seen = std::collections::BTreeSet::new();
    candidates.retain(|c| seen.insert((c.rule, c.key.clone())));
    candidates.truncate(MAX_FINDINGS);
    let mut artifacts = Vec::new();
    let findings: Vec<Finding> = candidates
        .into_iter()
        .map(|c| {
            if matches!(
                c.rule,
                Rule::MissingCheckpoint
                    | Rule::MissingData
                    | Rule::MissingConfig
                    | Rule::LfsPointer
                    | Rule::EmptySubmodule
            ) {
                artifacts.push(Artifact::Item(ArtifactItem {
                    artifact: c.key.clone(),
                    why: c.cause.clone(),
                    extra: Map::new(),
                }));
            }
            let id: String = format!("{}:{}", c.rule.code(), c.key)
                .chars()
                .take(100)
                .collect();
            Finding {
                finding_id: id,
                rank_reason: format!(
                    "built-in rule {} (prior {}): {}",
                    c.rule.code(),
                    c.rule.prior(),
                    c.rule.row().why
                ),
                severity: Some(c.severity),
                stage: Some(c.stage.paper()),
                category: Some(c.category.paper(c.stage)),
                issue_title: c.title,
                user_symptom: c.symptom,
                trigger_context: c.trigger,
                root_cause: c.cause,
                evidence: c.evidence,
                impact: c.impact,
                affected_claims_or_metrics: c.claims,
                reproducibility_blocker: Some(c.blocker),
                confidence: Some(c.confidence),
                extra: extension(&[
                    ("reprorun_stage", c.stage.as_str()),
                    ("reprorun_category", c.category.as_str()),
                ]),
            }
        })
        .collect();
    let blockers = findings
        .iter()
        .filter(|f| f.reproducibility_blocker == Some(true))
        .count();
    let overall = if ctx.tree.entries.is_empty() {
        Overall::Unknown
    } else if findings
        .iter()
        .any(|f| f.severity == Some(Severity::Critical))
        || !ctx.has_code()
    {
        Overall::UnlikelyReproducible
    } else if blockers > 0 {
        Overall::PartiallyReproducible
    } else {
        Overall::LikelyReproducible
    };
    let summary = format!(
        "reprorun built-in static audit (rules, no model): {} finding(s), {} blocking; {} path(s) listed, {} skipped by the scan budgets{}.",
        findings.len(),
        blockers,
        ctx.tree.entries.len(),
        ctx.tree.skipped,
        if ctx.paper.is_some() { "; paper text compared" } else { "; no paper text" }
    );
    Findings {
        reproducibility_assessment: Assessment::Verdict(Verdict {
            overall,
            summary,
            extra: Map::new(),
        }),
        findings,
        missing_or_ambiguous_artifacts: artifacts,
        extra: Map::new(),
        problems: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
