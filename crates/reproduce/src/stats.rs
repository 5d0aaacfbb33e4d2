//! Pure statistics for `reprorun reproduce`: reproduction rates and classes. The generic
//! helpers (the exact McNemar test, medians, the exponential hazard fit) are in
//! [`reprorun_pipeline::stats`].
//!
//! Nothing here panics on data: empty inputs and NaN give `None` (or the documented neutral
//! value) rather than a panic or a NaN in the output.

use serde::{Deserialize, Serialize};

/// The class of a patch (or a baseline) from its reproduction rate r.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Class {
    /// r = 1: every run gave the recorded outcome.
    Reproducible,
    /// 0 < r < 1: some runs did, some did not.
    Flaky,
    /// r = 0: no run did.
    Broken,
    /// No run ran any of the listed tests (SWE-bench's `error_ids`): no outcome to compare.
    /// Set from the runs, never from r ([`classify`] does not give it).
    Error,
}

impl Class {
    #[cfg(test)]
    pub(crate) const ALL: [Class; 4] = [
        Class::Reproducible,
        Class::Flaky,
        Class::Broken,
        Class::Error,
    ];

    /// The class's name in JSON and in reports: `reproducible`, `flaky`, `broken`, `error`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Class::Reproducible => "reproducible",
            Class::Flaky => "flaky",
            Class::Broken => "broken",
            Class::Error => "error",
        }
    }
}

/// r(π) = (1/k) Σ 1[T_i = T_0]: the share of `results` (each run's `resolved`, T_i) equal
/// to `recorded` (T_0). `None` for no runs.
pub(crate) fn reproduction_rate(results: &[bool], recorded: bool) -> Option<f64> {
    if results.is_empty() {
        return None;
    }
    let same = results.iter().filter(|&&t| t == recorded).count();
    Some(same as f64 / results.len() as f64)
}

/// Reproducible if r ≥ 1, flaky if 0 < r < 1, broken otherwise (r ≤ 0, and NaN: a rate that
/// is not a number shows no reproduction).
pub(crate) fn classify(r: f64) -> Class {
    if r >= 1.0 {
        Class::Reproducible
    } else if r > 0.0 {
        Class::Flaky
    } else {
        Class::Broken
    }
}

#[cfg(test)]
mod tests;
