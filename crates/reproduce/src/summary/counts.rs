//! The summary's counts and figures: the types [`super::Summary`] is made of.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::Class;
use crate::{Infra, Mode};

/// The runs an overhead figure compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct OverheadRuns {
    pub shim: u64,
    pub no_shim: u64,
    /// Instances with runs in both arms left out because one arm has no run that ran the
    /// tests (its runs errored, timed out or failed to start).
    pub instances_left_out: u64,
}

/// SWE-bench's resolved rate in one arm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Resolved {
    /// Runs counted in the arm.
    pub runs: u64,
    /// Of those, resolved (every FAIL_TO_PASS and PASS_TO_PASS test passed).
    pub resolved: u64,
    /// Of those, in the `error` class (no listed test in the output); not resolved.
    pub errors: u64,
    /// resolved / runs: the resolved rate averaged over the k runs (an error or an infra
    /// failure counts as not resolved, as in SWE-bench); `null` without runs.
    pub rate: Option<f64>,
    /// Instances with runs in the arm, and of those the ones resolved in every run.
    pub instances: u64,
    pub instances_resolved_every_run: u64,
}

/// How many instances fall in each class, and their shares.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct ClassCounts {
    /// Instances with r = 1 (for baselines: every run with the modal signature).
    pub reproducible: u64,
    /// Instances with 0 < r < 1.
    pub flaky: u64,
    /// Instances with r = 0 (for baselines: every run an infra failure).
    pub broken: u64,
    /// Instances none of whose runs in the arm ran a listed test, and at least one ran the
    /// test command to its end (runs in the `error` class, infra `no_tests`): no outcome.
    #[serde(default)]
    pub error: u64,
    /// reproducible / (reproducible + flaky + broken + error); `null` when that sum is 0.
    pub rate_reproducible: Option<f64>,
    /// flaky / (reproducible + flaky + broken + error); `null` when that sum is 0.
    pub rate_flaky: Option<f64>,
    /// broken / (reproducible + flaky + broken + error); `null` when that sum is 0.
    pub rate_broken: Option<f64>,
    /// error / (reproducible + flaky + broken + error); `null` when that sum is 0.
    #[serde(default)]
    pub rate_error: Option<f64>,
}

impl ClassCounts {
    /// Counts and shares of `classes`.
    pub(crate) fn from_classes(classes: impl IntoIterator<Item = Class>) -> ClassCounts {
        let mut counts = ClassCounts::default();
        for class in classes {
            match class {
                Class::Reproducible => counts.reproducible += 1,
                Class::Flaky => counts.flaky += 1,
                Class::Broken => counts.broken += 1,
                Class::Error => counts.error += 1,
            }
        }
        let total = counts.total();
        let share = |n: u64| (total > 0).then(|| n as f64 / total as f64);
        counts.rate_reproducible = share(counts.reproducible);
        counts.rate_flaky = share(counts.flaky);
        counts.rate_broken = share(counts.broken);
        counts.rate_error = share(counts.error);
        counts
    }

    /// Instances classified.
    pub(crate) fn total(&self) -> u64 {
        self.reproducible + self.flaky + self.broken + self.error
    }

    /// The count of one class.
    pub(crate) fn get(&self, class: Class) -> u64 {
        match class {
            Class::Reproducible => self.reproducible,
            Class::Flaky => self.flaky,
            Class::Broken => self.broken,
            Class::Error => self.error,
        }
    }
}

/// Per arm: of the patches flaky in that arm that have a baseline in that arm, the share
/// whose baseline is flaky too (the flakiness the unpatched repository already shows).
/// `null` when no patch is flaky in that arm with a baseline there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct BaselineExplained {
    pub shim: Option<f64>,
    pub no_shim: Option<f64>,
}

/// The exact McNemar test on the paired shim/no-shim classes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct McNemar {
    /// Pairs reproducible (r = 1) with the shim but not without it.
    pub b: u64,
    /// Pairs reproducible without the shim but not with it.
    pub c: u64,
    /// Two-sided exact p-value ([`pstats::mcnemar_exact`]).
    pub p: f64,
}

/// The dependency-drift observations (current-status data: one per instance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Drift {
    /// Instances with no-shim runs and a positive age.
    pub observations: u64,
    /// Of those, how many have `dependency_drift` in their no-shim failure modes.
    pub events: u64,
    /// One `[age_days, drifted]` pair per observation, in `instances` order. The age is
    /// (earliest `started_at` of the instance's no-shim runs − `bench_date`) / 86400.
    #[serde(default)]
    pub points: Vec<(f64, bool)>,
    /// The reference dates of the ages: the earliest and the latest of the observations'
    /// first no-shim run (UTC, YYYY-MM-DD). Ages grow with the day a study is run, and so
    /// does the half-life's footing. Omitted without observations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_at: Option<[String; 2]>,
}

/// Non-reproducing patches per failure mode. Every mode is a key (in the order
/// `dependency_drift`, `time`, `hash_ordering`, `randomness`, `network`, `environment`,
/// `timeout_resource`, `other`), zero included. A patch with several modes counts once
/// under each, so the counts can sum to more than the non-reproducing patches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FailureModes {
    /// Over patches not reproducible in the shim arm (`InstanceSummary::modes_shim`).
    pub shim: BTreeMap<Mode, u64>,
    /// Over patches not reproducible in the no-shim arm. Omitted when `no_shim` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_shim: Option<BTreeMap<Mode, u64>>,
}

/// Runs that produced no test outcome, per cause ([`Infra`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct InfraCounts {
    pub patch_apply: u64,
    pub timeout: u64,
    pub oom: u64,
    pub runtime: u64,
    /// Runs in the `error` class: the output names none of the listed tests.
    #[serde(default)]
    pub no_tests: u64,
}

impl InfraCounts {
    pub(crate) fn add(&mut self, infra: Infra) {
        match infra {
            Infra::PatchApply => self.patch_apply += 1,
            Infra::Timeout => self.timeout += 1,
            Infra::Oom => self.oom += 1,
            Infra::Runtime => self.runtime += 1,
            Infra::NoTests => self.no_tests += 1,
        }
    }

    /// The count for one cause.
    pub(crate) fn get(&self, infra: Infra) -> u64 {
        match infra {
            Infra::PatchApply => self.patch_apply,
            Infra::Timeout => self.timeout,
            Infra::Oom => self.oom,
            Infra::Runtime => self.runtime,
            Infra::NoTests => self.no_tests,
        }
    }
}
