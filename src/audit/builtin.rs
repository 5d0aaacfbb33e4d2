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
//! |    50 | `hyperparameter_mismatch` | the paper's lr/batch size/epochs differ from the code's   |
//! |    42 | `paper_dataset`           | a dataset the paper uses is never mentioned in the code   |
//! |    38 | `cuda_only`               | CUDA used with no `is_available()`/CPU fallback in a file |
//! |    34 | `paper_metric`            | a metric the paper reports is never computed in the code  |
//! |    26 | `hyperparameter_unset`    | a paper hyper-parameter the code never sets               |
//!
//! The tree is read under budgets ([`tree`]): files over 1 MiB, binary and non-UTF-8 files
//! are listed but not read, symlinks are never followed, depth and entry counts are capped.
//! At most [`MAX_FINDINGS`] findings are written, one per distinct cause.

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

use super::findings::{
    Artifact, ArtifactItem, Assessment, Category, Confidence, Evidence, EvidenceType, Finding, Findings, LineRange,
    Overall, Severity, Stage,
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
    HyperparameterMismatch,
    PaperDataset,
    CudaOnly,
    PaperMetric,
    HyperparameterUnset,
}

impl Rule {
    /// (id prefix, prior, category, stage, severity, blocker, confidence, what the prior means)
    fn table(self) -> (&'static str, u32, Category, Stage, Severity, bool, Confidence) {
        use Category as C;
        use Confidence as F;
        use Severity as S;
        use Stage as T;
        match self {
            Rule::LfsPointer => ("lfs_pointer", 92, C::IncompleteRelease, T::Inference, S::Critical, true, F::High),
            Rule::MissingScript => ("missing_script", 88, C::BrokenCommand, T::Documentation, S::High, true, F::High),
            Rule::MissingCheckpoint => ("missing_checkpoint", 86, C::MissingCheckpoint, T::Inference, S::High, true, F::Medium),
            Rule::UndeclaredImport => ("undeclared_import", 84, C::MissingDependency, T::EnvironmentSetup, S::High, true, F::High),
            Rule::NoDependencySpec => ("no_dependency_spec", 82, C::MissingDependency, T::EnvironmentSetup, S::High, true, F::High),
            Rule::MissingConfig => ("missing_config", 80, C::MissingFile, T::Training, S::High, true, F::High),
            Rule::MissingTrainEntry => ("missing_train_entry", 78, C::MissingEntryPoint, T::Training, S::High, true, F::Medium),
            Rule::ComingSoon => ("coming_soon", 76, C::IncompleteRelease, T::Documentation, S::High, true, F::High),
            Rule::MissingEvalEntry => ("missing_eval_entry", 72, C::MissingEntryPoint, T::Evaluation, S::High, true, F::Medium),
            Rule::UnknownFlag => ("unknown_flag", 70, C::BrokenCommand, T::Documentation, S::Medium, true, F::Medium),
            Rule::EmptySubmodule => ("empty_submodule", 68, C::IncompleteRelease, T::EnvironmentSetup, S::High, true, F::Medium),
            Rule::MissingData => ("missing_data", 64, C::MissingData, T::DataPreparation, S::High, true, F::Medium),
            Rule::HardcodedPath => ("hardcoded_path", 60, C::HardcodedPath, T::Training, S::Medium, true, F::High),
            Rule::HyperparameterMismatch => ("hyperparameter_mismatch", 50, C::PaperCodeMismatch, T::Training, S::Medium, false, F::Medium),
            Rule::PaperDataset => ("paper_dataset", 42, C::MissingData, T::DataPreparation, S::Medium, true, F::Low),
            Rule::CudaOnly => ("cuda_only", 38, C::HardwareAssumption, T::Inference, S::Medium, true, F::Medium),
            Rule::PaperMetric => ("paper_metric", 34, C::PaperCodeMismatch, T::Evaluation, S::Medium, false, F::Low),
            Rule::HyperparameterUnset => ("hyperparameter_unset", 26, C::PaperCodeMismatch, T::Training, S::Low, false, F::Low),
        }
    }

    fn code(self) -> &'static str {
        self.table().0
    }

    fn prior(self) -> u32 {
        self.table().1
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
        let (_, _, category, stage, severity, blocker, confidence) = rule.table();
        Candidate {
            rule,
            key: key.into(),
            weight: 1,
            severity,
            stage,
            category,
            title: String::new(),
            symptom: String::new(),
            trigger: String::new(),
            cause: String::new(),
            evidence: Vec::new(),
            impact: String::new(),
            claims: Vec::new(),
            blocker,
            confidence,
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
        evidence_type: kind,
        summary: summary.into(),
        extra: Map::new(),
    }
}

/// The evidence type of a repository file by its name.
fn kind_of(path: &str) -> EvidenceType {
    let ext = tree::ext(path);
    let name = tree::file_name(path).to_ascii_lowercase();
    if name.starts_with("readme") || matches!(ext.as_str(), "md" | "rst" | "markdown") {
        EvidenceType::Documentation
    } else if matches!(ext.as_str(), "yaml" | "yml" | "json" | "toml" | "cfg" | "ini" | "txt" | "lock")
        || name == "pipfile"
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
        self.docs.iter().filter_map(|p| self.tree.text(p).map(|t| (p.as_str(), t)))
    }

    /// Whether any code file (Python, shell, notebook) is in the tree.
    fn has_code(&self) -> bool {
        self.tree.files().any(|p| matches!(tree::ext(p).as_str(), "py" | "ipynb" | "sh"))
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
        || (ext != "txt" && !ext.is_empty() && (depth == 0 || (depth == 1 && path.starts_with("docs/"))))
}

/// Audits the repository at `repo` (and the paper's text, if given).
pub(crate) fn audit(repo: &Path, paper: Option<&str>) -> Findings {
    let tree = Tree::scan(repo);
    let py = tree
        .texts_with(&["py"])
        .map(|(p, t)| (p.to_string(), pylex::lex(t)))
        .collect();
    let docs = tree.texts().map(|(p, _)| p).filter(|p| is_doc(p)).map(str::to_string).collect();
    let ctx = Ctx { tree, py, docs, paper };
    let mut candidates = Vec::new();
    candidates.extend(paths::lfs_pointers(&ctx));
    candidates.extend(readme::commands(&ctx));
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
            if matches!(c.rule, Rule::MissingCheckpoint | Rule::MissingData | Rule::MissingConfig | Rule::LfsPointer | Rule::EmptySubmodule) {
                artifacts.push(Artifact::Item(ArtifactItem {
                    artifact: c.key.clone(),
                    why: c.cause.clone(),
                    extra: Map::new(),
                }));
            }
            let id: String = format!("{}:{}", c.rule.code(), c.key).chars().take(100).collect();
            Finding {
                finding_id: id,
                rank_reason: format!(
                    "built-in rule {} (prior {}): {}",
                    c.rule.code(),
                    c.rule.prior(),
                    rank_words(c.rule)
                ),
                severity: c.severity,
                stage: c.stage,
                category: c.category,
                issue_title: c.title,
                user_symptom: c.symptom,
                trigger_context: c.trigger,
                root_cause: c.cause,
                evidence: c.evidence,
                impact: c.impact,
                affected_claims_or_metrics: c.claims,
                reproducibility_blocker: c.blocker,
                confidence: c.confidence,
                extra: Map::new(),
            }
        })
        .collect();
    let blockers = findings.iter().filter(|f| f.reproducibility_blocker).count();
    let overall = if ctx.tree.entries.is_empty() {
        Overall::Unknown
    } else if findings.iter().any(|f| f.severity == Severity::Critical) || !ctx.has_code() {
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
        reproducibility_assessment: Assessment { overall, summary, extra: Map::new() },
        findings,
        missing_or_ambiguous_artifacts: artifacts,
        extra: Map::new(),
    }
}

fn rank_words(rule: Rule) -> &'static str {
    match rule {
        Rule::LfsPointer => "a pointer file fails the moment it is loaded",
        Rule::MissingScript => "the documented command fails on its first run",
        Rule::MissingCheckpoint => "evaluating released models is the first thing most users try",
        Rule::UndeclaredImport => "the import fails right after installing the declared dependencies",
        Rule::NoDependencySpec => "every user must guess the environment before anything runs",
        Rule::MissingConfig => "the referenced config is needed to start the run",
        Rule::MissingTrainEntry => "users who want to retrain find no training code",
        Rule::ComingSoon => "announced-but-missing artifacts draw 'when will it be released?' issues",
        Rule::MissingEvalEntry => "users who want the paper's numbers find no evaluation code",
        Rule::UnknownFlag => "the documented command stops at argument parsing",
        Rule::EmptySubmodule => "a plain clone leaves the submodule empty",
        Rule::MissingData => "the data step has no documented source",
        Rule::HardcodedPath => "the path exists only on the authors' machine",
        Rule::HyperparameterMismatch => "users comparing paper and code ask which value is right",
        Rule::PaperDataset => "users who want the paper's other experiments find no code for them",
        Rule::CudaOnly => "users without a CUDA GPU hit it; many have one",
        Rule::PaperMetric => "the reported metric cannot be recomputed with the release",
        Rule::HyperparameterUnset => "the setting may be a framework default; users may ask",
    }
}

#[cfg(test)]
mod tests;
