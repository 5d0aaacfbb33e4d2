//! The closed value sets of `findings.json`: each enum's values, in order, with a one-line
//! definition; the validator and the prompt both print them from here.

use serde::{Serialize, Serializer};

/// A closed set of snake_case strings: the enum, its names in order (`NAMES`, what the
/// prompt and the validator both print) and a one-line definition of each value.
macro_rules! str_enum {
    ($(#[$meta:meta])* $name:ident { $($var:ident => $s:literal : $doc:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(crate) enum $name { $(#[doc = $doc] $var,)+ }

        // Generated alike for every enum; not every enum uses every item.
        #[allow(dead_code)]
        impl $name {
            /// Every value, in the documented order.
            pub(crate) const ALL: &'static [$name] = &[$($name::$var,)+];
            /// Every value's string, in the documented order.
            pub(crate) const NAMES: &'static [&'static str] = &[$($s,)+];

            /// The value as written in `findings.json`.
            pub(crate) fn as_str(self) -> &'static str {
                match self { $($name::$var => $s,)+ }
            }

            /// The value's one-line definition.
            pub(crate) fn describe(self) -> &'static str {
                match self { $($name::$var => $doc,)+ }
            }

            /// The value named `s` exactly.
            pub(crate) fn parse(s: &str) -> Option<$name> {
                match s { $($s => Some($name::$var),)+ _ => None }
            }

            /// The value named `s` after folding case, and blanks, `-` and `_` alike
            /// (`"Install / Environment"`, `"install_environment"`).
            pub(crate) fn parse_loose(s: &str) -> Option<$name> {
                let want = fold(s);
                $name::ALL.iter().copied().find(|v| fold(v.as_str()) == want)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}

str_enum!(
    /// The auditor's verdict on the whole release.
    Overall {
        LikelyReproducible => "likely_reproducible": "a careful user can reproduce the main results from the release as it is",
        PartiallyReproducible => "partially_reproducible": "some results can be reproduced; others are blocked by the findings",
        UnlikelyReproducible => "unlikely_reproducible": "the main results cannot be reproduced from the release without the authors' help",
        Unknown => "unknown": "the auditor cannot tell (e.g. the release is too large or too unclear to judge)",
    }
);

str_enum!(
    /// How badly a finding stops a reproducer.
    Severity {
        Critical => "critical": "no result of the paper can be reproduced until this is fixed",
        High => "high": "a main result (training or evaluation of a reported number) is blocked",
        Medium => "medium": "a workaround exists but costs the user real effort, or a secondary result is blocked",
        Low => "low": "an annoyance: a wrong default, a misleading doc, a warning",
    }
);

/// `s` lower-cased with blanks, `-` and `_` dropped (also around `/`).
pub(crate) fn fold(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '_' | '\t'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

str_enum!(
    /// Where in the reproduction a user meets a finding: the paper's stages (ReproRepo,
    /// Appendix E.1).
    Stage {
        InstallEnvironment => "install/environment": "installing the dependencies and preparing the machine",
        DataModelAcquisition => "data/model acquisition": "obtaining datasets, preprocessed files, pretrained weights or checkpoints",
        TrainingFineTuning => "training/fine-tuning": "training or fine-tuning models",
        InferenceDemo => "inference/demo": "running released models or demos, loading checkpoints",
        EvaluationMetrics => "evaluation/metrics": "computing the paper's metrics and tables",
        ResultComparison => "result comparison/provenance": "comparing the numbers obtained with the paper's, and tracing where reported numbers come from",
    }
);

str_enum!(
    /// What kind of blocker a finding is: the paper's categories (ReproRepo, Appendix E.1).
    Category {
        EnvironmentSetup => "environment_setup": "the environment cannot be built as documented: undeclared packages, install steps that fail, missing system requirements",
        DependencyVersion => "dependency_version": "a dependency is unpinned or pinned to a version that conflicts, no longer installs or changes behaviour",
        DataAccess => "data_access": "a dataset or preprocessed file is needed but neither included nor obtainable as documented",
        ModelWeights => "model_weights": "pretrained weights or checkpoints needed to reproduce results are not released, linked or loadable",
        TrainingReproduction => "training_reproduction": "training cannot be run as the paper describes: no script, missing configs, announced but unreleased code",
        EvaluationReproduction => "evaluation_reproduction": "evaluation cannot be run as the paper describes: no script, missing metric code or protocol",
        RuntimeError => "runtime_error": "the documented path crashes: a missing file or module, a hard-coded path, a wrong flag, a bug",
        HardwareBackend => "hardware_backend": "the code assumes hardware or a backend (CUDA, several GPUs, a compiler, large memory) without a fallback or a stated requirement",
        ApiService => "api_service": "a paid or external API or service the code calls is unavailable, changed or needs credentials",
        ResultMismatch => "result_mismatch": "the code runs but gives numbers that differ from the paper's, or vary between runs beyond the reported variance",
        DocumentationGap => "documentation_gap": "the README or docs leave out or misstate what is needed to reproduce (steps, configs, versions)",
        PaperRepoMismatch => "paper_repo_mismatch": "hyper-parameters, datasets, metrics or methods differ between the paper and the repository",
    }
);

str_enum!(
    /// What a piece of evidence is: the paper's evidence types (ReproRepo, Appendix E.1).
    EvidenceType {
        File => "file": "a file of the repository (source code, scripts)",
        Command => "command": "a documented command and what it does",
        MissingArtifact => "missing_artifact": "a file, dataset, checkpoint or step that should exist but does not (path: where it was expected)",
        Documentation => "documentation": "the README or other documentation",
        Config => "config": "a configuration, requirements or environment file",
        PaperRepoMismatch => "paper_repo_mismatch": "a statement of the paper that the repository contradicts (path: the paper's file name or the file that differs)",
    }
);

/// reprorun's own finer value sets, written as the optional extension fields
/// `reprorun_stage`, `reprorun_category` and `reprorun_evidence_type` beside the paper's.
/// The built-in auditor uses them; a document that gives one of them in the paper's field
/// (an older prompt's output) is read as its paper value, the original kept as the extension.
pub(crate) mod detail {
    use super::fold;
    use serde::{Serialize, Serializer};

    str_enum!(
        /// Where in the reproduction a user meets a finding (reprorun's stages).
        Stage {
            EnvironmentSetup => "environment_setup": "installing the dependencies and preparing the machine",
            DataPreparation => "data_preparation": "obtaining and preprocessing datasets",
            Training => "training": "training or fine-tuning models",
            Evaluation => "evaluation": "computing the paper's metrics and tables",
            Inference => "inference": "running released models or demos, loading checkpoints",
            Documentation => "documentation": "reading the README and the paper to decide what to run",
        }
    );

    str_enum!(
        /// What kind of blocker a finding is.
        Category {
            MissingDependency => "missing_dependency": "the code imports or calls a package that no requirements file or install step declares",
            DependencyVersion => "dependency_version": "a dependency is unpinned or pinned to a version that conflicts or no longer installs",
            MissingFile => "missing_file": "a script, module or config file the code or README refers to is not in the release",
            MissingData => "missing_data": "a dataset or preprocessed file is needed but neither included nor obtainable as documented",
            MissingCheckpoint => "missing_checkpoint": "pretrained weights or checkpoints needed to reproduce results are not released or linked",
            HardcodedPath => "hardcoded_path": "an absolute path from the authors' machine is hard-coded in code or configs",
            HardwareAssumption => "hardware_assumption": "the code assumes hardware (CUDA GPU, several GPUs, large memory) without a fallback or a stated requirement",
            BrokenCommand => "broken_command": "a documented command fails as written (wrong script name, unknown flag, wrong arguments)",
            MissingEntryPoint => "missing_entry_point": "there is no script to train or to evaluate as the paper describes",
            ConfigMismatch => "config_mismatch": "configs or defaults disagree with each other or with the documented usage",
            PaperCodeMismatch => "paper_code_mismatch": "hyper-parameters, datasets, metrics or methods differ between the paper and the code",
            IncompleteRelease => "incomplete_release": "parts of the release are announced as coming later, stubbed, or stored as placeholders (Git LFS pointers, empty submodules)",
            Nondeterminism => "nondeterminism": "results vary between runs (unseeded randomness, nondeterministic kernels) beyond the paper's reported variance",
            CodeBug => "code_bug": "the code fails or computes a wrong result on its own documented path",
            Other => "other": "a reproducibility blocker that fits none of the categories above",
        }
    );

    str_enum!(
        /// What a piece of evidence is.
        EvidenceType {
            Code => "code": "a source file of the repository",
            Config => "config": "a configuration, requirements or environment file",
            Documentation => "documentation": "the README or other documentation",
            Paper => "paper": "the paper (path: the paper's file name)",
            Absence => "absence": "a file or step that should exist but does not (path: where it was expected)",
        }
    );

    impl Stage {
        /// The paper's stage this one falls in.
        pub(crate) fn paper(self) -> super::Stage {
            use super::Stage as P;
            match self {
                Stage::EnvironmentSetup | Stage::Documentation => P::InstallEnvironment,
                Stage::DataPreparation => P::DataModelAcquisition,
                Stage::Training => P::TrainingFineTuning,
                Stage::Evaluation => P::EvaluationMetrics,
                Stage::Inference => P::InferenceDemo,
            }
        }
    }

    impl Category {
        /// The paper's category this one falls in; `stage` decides for the kinds the paper
        /// splits by stage (an absent entry point, an incomplete release).
        pub(crate) fn paper(self, stage: Stage) -> super::Category {
            use super::Category as P;
            let by_stage = || match stage {
                Stage::Evaluation | Stage::Inference => P::EvaluationReproduction,
                Stage::Training => P::TrainingReproduction,
                Stage::DataPreparation => P::DataAccess,
                Stage::EnvironmentSetup | Stage::Documentation => P::DocumentationGap,
            };
            match self {
                Category::MissingDependency => P::EnvironmentSetup,
                Category::DependencyVersion => P::DependencyVersion,
                Category::MissingFile | Category::HardcodedPath | Category::BrokenCommand => {
                    P::RuntimeError
                }
                Category::CodeBug => P::RuntimeError,
                Category::MissingData => P::DataAccess,
                Category::MissingCheckpoint => P::ModelWeights,
                Category::HardwareAssumption => P::HardwareBackend,
                Category::MissingEntryPoint | Category::IncompleteRelease => by_stage(),
                Category::ConfigMismatch | Category::Other => P::DocumentationGap,
                Category::PaperCodeMismatch => P::PaperRepoMismatch,
                Category::Nondeterminism => P::ResultMismatch,
            }
        }
    }

    impl EvidenceType {
        /// The paper's evidence type this one falls in.
        pub(crate) fn paper(self) -> super::EvidenceType {
            use super::EvidenceType as P;
            match self {
                EvidenceType::Code => P::File,
                EvidenceType::Config => P::Config,
                EvidenceType::Documentation => P::Documentation,
                EvidenceType::Paper => P::PaperRepoMismatch,
                EvidenceType::Absence => P::MissingArtifact,
            }
        }
    }
}

str_enum!(
    /// How sure the auditor is that a real reproducer would hit a finding.
    Confidence {
        High => "high": "the blocker is certain from the evidence",
        Medium => "medium": "the blocker is likely but depends on the user's setup or an unread file",
        Low => "low": "the blocker is plausible; the evidence is indirect",
    }
);
