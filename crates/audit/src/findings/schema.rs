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

str_enum!(
    /// Where in the reproduction a user meets a finding.
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

str_enum!(
    /// How sure the auditor is that a real reproducer would hit a finding.
    Confidence {
        High => "high": "the blocker is certain from the evidence",
        Medium => "medium": "the blocker is likely but depends on the user's setup or an unread file",
        Low => "low": "the blocker is plausible; the evidence is indirect",
    }
);
