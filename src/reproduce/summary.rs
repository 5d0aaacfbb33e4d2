//! The study's results: from every recorded run ([`InstanceRuns`]) to the [`Summary`] that
//! `reprorun reproduce --json` prints and `report.json`/`summary.json` hold.
//!
//! Pure: no I/O. Statistics come from [`super::stats`]; failure-mode evidence was attached to
//! each run by [`super::evidence::detect`] when it was recorded.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::stats::{self, Class};
use super::{Arm, Infra, InstanceRuns, Mode, Pin, RunResult};

/// Seconds in a day, for patch ages.
const DAY: f64 = 86_400.0;

/// The study's summary: the stable JSON document of `reprorun reproduce --json` and of the
/// report's `summary.json`.
///
/// Conventions for every field:
/// - Only runs with `idx < k` count; rows with a larger index are ignored.
/// - A rate is computed over however many runs an arm has (fewer than k while a study is
///   unfinished); an arm without runs gives `null`, never 0.
/// - For the patched arms (`shim`, `no_shim`, `shim_without_<pin>`), run i's outcome T_i is
///   its `resolved` (false for an infra failure) and T_0 is the instance's
///   `recorded_resolved`; r = share of runs with T_i = T_0; reproducible if r = 1, flaky if
///   0 < r < 1, broken if r = 0.
/// - Objects marked "omitted" are absent from the JSON (not `null`) when their condition
///   does not hold; fields marked "`null`" are always present.
/// - Fractions are plain numbers in [0, 1] (0.068 means 6.8%), not percentages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Runs per arm the study asked for (`--k`); runs with `idx >= k` are ignored.
    pub k: u32,
    /// Instances summarized (entries of the input, duplicates of an id included).
    pub instances_total: u64,
    /// Runs counted, all arms together (after dropping `idx >= k`).
    pub runs_total: u64,
    /// Patch classes in the shim arm, over instances that have at least one shim run.
    pub shim: ClassCounts,
    /// Patch classes in the no-shim arm (`--compare-shim`), over instances with no-shim
    /// runs. Omitted when no instance has a no-shim run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_shim: Option<ClassCounts>,
    /// Classes of the unpatched repositories under the shim's conditions (`--baseline`;
    /// `baseline_shim` runs). A baseline has no recorded outcome: its T_0 is the instance's
    /// modal `signature` among its baseline runs of that arm (ties: the lexicographically
    /// smallest); r_baseline = share of runs with that signature; reproducible if r = 1,
    /// else flaky; broken only when every run is an infra failure. Omitted when no
    /// instance has such a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<ClassCounts>,
    /// The same under the no-shim conditions (`--baseline --compare-shim`;
    /// `baseline_no_shim` runs). Omitted when no instance has such a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_no_shim: Option<ClassCounts>,
    /// How much of the patches' flakiness the baseline's flakiness explains, per arm.
    /// Omitted when `baseline` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_explained: Option<BaselineExplained>,
    /// The exact McNemar test of reproducibility with against without the shim, over the
    /// instances that have runs in both arms (the pairs). Omitted when there is no pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcnemar: Option<McNemar>,
    /// `mcnemar.p`, or `null` when `mcnemar` is omitted.
    pub mcnemar_p: Option<f64>,
    /// The median over instances of the shim's wall-clock overhead, a fraction (0.068 =
    /// 6.8% slower with the shim). Per instance: (median `wall_ms` of its shim runs) /
    /// (median `wall_ms` of its no-shim runs) − 1, both over runs without an infra failure;
    /// instances lacking either median, or with a no-shim median of 0, are left out. `null`
    /// when no instance qualifies.
    pub overhead_median: Option<f64>,
    /// Dependency-drift half-life in days, ln 2 / λ̂ of the exponential hazard fitted to
    /// `drift` ([`stats::fit_exponential_hazard`]). `null` when the fit is not estimable
    /// (no observation, no drift event, or every observation drifted).
    pub half_life_days: Option<f64>,
    /// The 95% Wald confidence interval of `half_life_days`, `[low, high]`; `null` with it.
    pub half_life_ci: Option<[f64; 2]>,
    /// The observations behind the drift fit. Omitted when no instance has a no-shim run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// Non-reproducing patches per failure mode and arm.
    pub failure_modes: FailureModes,
    /// Runs without a test outcome, per cause, all arms together.
    pub infra: InfraCounts,
    /// One entry per instance, sorted by `instance_id` (byte order; equal ids keep their
    /// input order).
    pub instances: Vec<InstanceSummary>,
}

/// How many instances fall in each class, and their shares.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ClassCounts {
    /// Instances with r = 1 (for baselines: every run with the modal signature).
    pub reproducible: u64,
    /// Instances with 0 < r < 1.
    pub flaky: u64,
    /// Instances with r = 0 (for baselines: every run an infra failure).
    pub broken: u64,
    /// reproducible / (reproducible + flaky + broken); `null` when that sum is 0.
    pub rate_reproducible: Option<f64>,
    /// flaky / (reproducible + flaky + broken); `null` when that sum is 0.
    pub rate_flaky: Option<f64>,
    /// broken / (reproducible + flaky + broken); `null` when that sum is 0.
    pub rate_broken: Option<f64>,
}

impl ClassCounts {
    /// Counts and shares of `classes`.
    pub fn from_classes(classes: impl IntoIterator<Item = Class>) -> ClassCounts {
        let mut counts = ClassCounts::default();
        for class in classes {
            match class {
                Class::Reproducible => counts.reproducible += 1,
                Class::Flaky => counts.flaky += 1,
                Class::Broken => counts.broken += 1,
            }
        }
        let total = counts.total();
        let share = |n: u64| (total > 0).then(|| n as f64 / total as f64);
        counts.rate_reproducible = share(counts.reproducible);
        counts.rate_flaky = share(counts.flaky);
        counts.rate_broken = share(counts.broken);
        counts
    }

    /// Instances classified.
    pub fn total(&self) -> u64 {
        self.reproducible + self.flaky + self.broken
    }

    /// The count of one class.
    pub fn get(&self, class: Class) -> u64 {
        match class {
            Class::Reproducible => self.reproducible,
            Class::Flaky => self.flaky,
            Class::Broken => self.broken,
        }
    }
}

/// Per arm: of the patches flaky in that arm that have a baseline in that arm, the share
/// whose baseline is flaky too (the flakiness the unpatched repository already shows).
/// `null` when no patch is flaky in that arm with a baseline there.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaselineExplained {
    pub shim: Option<f64>,
    pub no_shim: Option<f64>,
}

/// The exact McNemar test on the paired shim/no-shim classes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    /// Pairs reproducible (r = 1) with the shim but not without it.
    pub b: u64,
    /// Pairs reproducible without the shim but not with it.
    pub c: u64,
    /// Two-sided exact p-value ([`stats::mcnemar_exact`]).
    pub p: f64,
}

/// The dependency-drift observations (current-status data: one per instance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Instances with no-shim runs and a positive age.
    pub observations: u64,
    /// Of those, how many have `dependency_drift` in their no-shim failure modes.
    pub events: u64,
    /// One `[age_days, drifted]` pair per observation, in `instances` order. The age is
    /// (earliest `started_at` of the instance's no-shim runs − `bench_date`) / 86400.
    #[serde(default)]
    pub points: Vec<(f64, bool)>,
}

/// Non-reproducing patches per failure mode. Every mode is a key (in the order
/// `dependency_drift`, `time`, `hash_ordering`, `randomness`, `network`, `environment`,
/// `timeout_resource`, `other`), zero included. A patch with several modes counts once
/// under each, so the counts can sum to more than the non-reproducing patches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureModes {
    /// Over patches not reproducible in the shim arm (`InstanceSummary::modes_shim`).
    pub shim: BTreeMap<Mode, u64>,
    /// Over patches not reproducible in the no-shim arm. Omitted when `no_shim` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_shim: Option<BTreeMap<Mode, u64>>,
}

/// Runs that produced no test outcome, per cause ([`Infra`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InfraCounts {
    pub patch_apply: u64,
    pub timeout: u64,
    pub oom: u64,
    pub runtime: u64,
}

impl InfraCounts {
    fn add(&mut self, infra: Infra) {
        match infra {
            Infra::PatchApply => self.patch_apply += 1,
            Infra::Timeout => self.timeout += 1,
            Infra::Oom => self.oom += 1,
            Infra::Runtime => self.runtime += 1,
        }
    }

    /// The count for one cause.
    pub fn get(&self, infra: Infra) -> u64 {
        match infra {
            Infra::PatchApply => self.patch_apply,
            Infra::Timeout => self.timeout,
            Infra::Oom => self.oom,
            Infra::Runtime => self.runtime,
        }
    }
}

/// One instance's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceSummary {
    pub instance_id: String,
    /// r of the shim arm; `null` without shim runs.
    pub r_shim: Option<f64>,
    pub class_shim: Option<Class>,
    /// r of the no-shim arm; `null` without no-shim runs.
    pub r_no_shim: Option<f64>,
    pub class_no_shim: Option<Class>,
    /// Share of the baseline-shim runs with the modal signature; `null` without such runs.
    pub r_baseline_shim: Option<f64>,
    pub class_baseline_shim: Option<Class>,
    /// Share of the baseline-no-shim runs with the modal signature; `null` without such runs.
    pub r_baseline_no_shim: Option<f64>,
    pub class_baseline_no_shim: Option<Class>,
    /// Failure modes when the patch is not reproducible with the shim (empty otherwise):
    /// the log evidence of the shim runs whose outcome differs from the recorded one, plus
    /// `timeout_resource` when one of those runs timed out or was OOM-killed; `other` when
    /// neither gives a mode.
    pub modes_shim: Vec<Mode>,
    /// Failure modes when the patch is not reproducible without the shim (empty otherwise):
    /// the modes of `pins` when there are any (the leave-one-out experiment takes
    /// precedence), else the log evidence of the no-shim runs whose outcome differs from
    /// the recorded one; plus `timeout_resource` when one of those runs timed out or was
    /// OOM-killed; `other` when nothing gives a mode.
    pub modes_no_shim: Vec<Mode>,
    /// Pins whose removal changes the outcome: the patch reproduces with the shim (r = 1)
    /// but not with that pin left out (`shim_without_<pin>` runs with r < 1). In the order
    /// `clock`, `hash_seed`, `random`, `env`, `mirror`.
    pub pins: Vec<Pin>,
    /// Runs counted per arm name (`shim`, `no_shim`, `baseline_shim`, `baseline_no_shim`,
    /// `shim_without_<pin>`); arms without runs are absent.
    pub runs: BTreeMap<String, u64>,
    /// The infra failures among its runs (any arm), each cause once, in the order
    /// `patch_apply`, `timeout`, `oom`, `runtime`.
    pub infra: Vec<Infra>,
    /// (Earliest `started_at` of its no-shim runs − `bench_date`) / 86400, possibly ≤ 0 for
    /// inconsistent dates (such instances are left out of `drift`); `null` without no-shim
    /// runs.
    pub age_days: Option<f64>,
}

/// Summarizes a study run with `k` runs per arm; see [`Summary`] for every rule.
pub fn summarize(instances: &[InstanceRuns], k: u32) -> Summary {
    let mut ordered: Vec<&InstanceRuns> = instances.iter().collect();
    ordered.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));

    let mut runs_total = 0_u64;
    let mut infra = InfraCounts::default();
    let mut rows = Vec::with_capacity(ordered.len());
    let mut overheads = Vec::new();
    let mut points = Vec::new();
    let mut any_no_shim = false;
    let mut any_baseline_shim = false;
    let mut any_baseline_no_shim = false;

    for inst in ordered {
        let mut arms: BTreeMap<Arm, Vec<&RunResult>> = BTreeMap::new();
        for run in inst.runs.iter().filter(|r| r.idx < k) {
            arms.entry(run.arm).or_default().push(run);
            runs_total += 1;
            if let Some(i) = run.infra {
                infra.add(i);
            }
        }
        let arm_runs = |arm: Arm| arms.get(&arm).map(Vec::as_slice).unwrap_or(&[]);
        let recorded = inst.recorded_resolved;

        let r_shim = patch_rate(arm_runs(Arm::Shim), recorded);
        let r_no_shim = patch_rate(arm_runs(Arm::NoShim), recorded);
        let class_shim = r_shim.map(stats::classify);
        let class_no_shim = r_no_shim.map(stats::classify);
        let baseline_shim = baseline_rate(arm_runs(Arm::BaselineShim));
        let baseline_no_shim = baseline_rate(arm_runs(Arm::BaselineNoShim));
        any_no_shim |= r_no_shim.is_some();
        any_baseline_shim |= baseline_shim.is_some();
        any_baseline_no_shim |= baseline_no_shim.is_some();

        let pins: Vec<Pin> = if class_shim == Some(Class::Reproducible) {
            Pin::ALL
                .into_iter()
                .filter(|&p| {
                    patch_rate(arm_runs(Arm::ShimWithout(p)), recorded)
                        .is_some_and(|r| stats::classify(r) != Class::Reproducible)
                })
                .collect()
        } else {
            Vec::new()
        };
        let pin_modes: BTreeSet<Mode> = pins.iter().map(|p| p.mode()).collect();

        let modes_shim = match class_shim {
            Some(c) if c != Class::Reproducible => {
                taxonomy(arm_runs(Arm::Shim), recorded, &BTreeSet::new())
            }
            _ => Vec::new(),
        };
        let modes_no_shim = match class_no_shim {
            Some(c) if c != Class::Reproducible => {
                taxonomy(arm_runs(Arm::NoShim), recorded, &pin_modes)
            }
            _ => Vec::new(),
        };

        let shim_wall = median_wall(arm_runs(Arm::Shim));
        let no_shim_wall = median_wall(arm_runs(Arm::NoShim));
        if let (Some(s), Some(n)) = (shim_wall, no_shim_wall) {
            if n > 0.0 {
                overheads.push(s / n - 1.0);
            }
        }

        let age_days = arm_runs(Arm::NoShim)
            .iter()
            .map(|r| r.started_at)
            .min()
            .map(|start| (i128::from(start) - i128::from(inst.bench_date)) as f64 / DAY);
        if let Some(age) = age_days.filter(|a| *a > 0.0) {
            points.push((age, modes_no_shim.contains(&Mode::DependencyDrift)));
        }

        let runs = arms
            .iter()
            .map(|(arm, list)| (arm.name(), list.len() as u64))
            .collect();
        let infra_kinds = [
            Infra::PatchApply,
            Infra::Timeout,
            Infra::Oom,
            Infra::Runtime,
        ]
        .into_iter()
        .filter(|i| arms.values().flatten().any(|r| r.infra == Some(*i)))
        .collect();

        rows.push(InstanceSummary {
            instance_id: inst.instance_id.clone(),
            r_shim,
            class_shim,
            r_no_shim,
            class_no_shim,
            r_baseline_shim: baseline_shim.map(|(r, _)| r),
            class_baseline_shim: baseline_shim.map(|(_, c)| c),
            r_baseline_no_shim: baseline_no_shim.map(|(r, _)| r),
            class_baseline_no_shim: baseline_no_shim.map(|(_, c)| c),
            modes_shim,
            modes_no_shim,
            pins,
            runs,
            infra: infra_kinds,
            age_days,
        });
    }

    let shim = ClassCounts::from_classes(rows.iter().filter_map(|r| r.class_shim));
    let no_shim =
        any_no_shim.then(|| ClassCounts::from_classes(rows.iter().filter_map(|r| r.class_no_shim)));

    let any_baseline = any_baseline_shim || any_baseline_no_shim;
    let baseline = any_baseline_shim
        .then(|| ClassCounts::from_classes(rows.iter().filter_map(|r| r.class_baseline_shim)));
    let baseline_no_shim = any_baseline_no_shim
        .then(|| ClassCounts::from_classes(rows.iter().filter_map(|r| r.class_baseline_no_shim)));
    let baseline_explained = any_baseline.then(|| BaselineExplained {
        shim: explained(rows.iter().map(|r| (r.class_shim, r.class_baseline_shim))),
        no_shim: explained(
            rows.iter()
                .map(|r| (r.class_no_shim, r.class_baseline_no_shim)),
        ),
    });

    let mut pairs = 0_u64;
    let (mut b, mut c) = (0_u64, 0_u64);
    for row in &rows {
        if let (Some(s), Some(n)) = (row.class_shim, row.class_no_shim) {
            pairs += 1;
            let s = s == Class::Reproducible;
            let n = n == Class::Reproducible;
            b += u64::from(s && !n);
            c += u64::from(!s && n);
        }
    }
    let mcnemar = (pairs > 0).then(|| McNemar {
        b,
        c,
        p: stats::mcnemar_exact(b, c),
    });

    let fit = stats::fit_exponential_hazard(&points);
    let drift = any_no_shim.then(|| Drift {
        observations: points.len() as u64,
        events: points.iter().filter(|(_, e)| *e).count() as u64,
        points,
    });

    let failure_modes = FailureModes {
        shim: mode_counts(rows.iter().map(|r| &r.modes_shim)),
        no_shim: any_no_shim.then(|| mode_counts(rows.iter().map(|r| &r.modes_no_shim))),
    };

    Summary {
        k,
        instances_total: rows.len() as u64,
        runs_total,
        shim,
        no_shim,
        baseline,
        baseline_no_shim,
        baseline_explained,
        mcnemar_p: mcnemar.map(|m| m.p),
        mcnemar,
        overhead_median: stats::median(&mut overheads),
        half_life_days: fit.map(|f| f.half_life_days),
        half_life_ci: fit.map(|f| [f.ci_low, f.ci_high]),
        drift,
        failure_modes,
        infra,
        instances: rows,
    }
}

/// r of a patched arm: the share of runs whose `resolved` equals the recorded outcome.
fn patch_rate(runs: &[&RunResult], recorded: bool) -> Option<f64> {
    // An infrastructure failure reproduces nothing, not even a recorded failure: T_i is
    // taken as the opposite of T_0 for it.
    let outcomes: Vec<bool> = runs
        .iter()
        .map(|r| {
            if r.infra.is_some() {
                !recorded
            } else {
                r.resolved
            }
        })
        .collect();
    stats::reproduction_rate(&outcomes, recorded)
}

/// r and class of a baseline arm (see [`Summary::baseline`]).
fn baseline_rate(runs: &[&RunResult]) -> Option<(f64, Class)> {
    if runs.is_empty() {
        return None;
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for run in runs {
        *counts.entry(run.signature.as_str()).or_default() += 1;
    }
    // BTreeMap order and a strict `>`: among equal counts the smallest signature wins.
    let mut modal = 0;
    for &n in counts.values() {
        if n > modal {
            modal = n;
        }
    }
    let r = modal as f64 / runs.len() as f64;
    let class = if runs.iter().all(|r| r.infra.is_some()) {
        Class::Broken
    } else if modal == runs.len() {
        Class::Reproducible
    } else {
        Class::Flaky
    };
    Some((r, class))
}

/// Failure modes of a patch that does not reproduce in an arm (see
/// [`InstanceSummary::modes_no_shim`]).
fn taxonomy(runs: &[&RunResult], recorded: bool, pin_modes: &BTreeSet<Mode>) -> Vec<Mode> {
    let differing = || runs.iter().filter(|r| r.resolved != recorded);
    let mut modes = pin_modes.clone();
    if modes.is_empty() {
        modes.extend(differing().flat_map(|r| r.evidence.iter().copied()));
    }
    if differing().any(|r| matches!(r.infra, Some(Infra::Timeout | Infra::Oom))) {
        modes.insert(Mode::TimeoutResource);
    }
    if modes.is_empty() {
        modes.insert(Mode::Other);
    }
    modes.into_iter().collect()
}

/// Median `wall_ms` over the runs without an infra failure.
fn median_wall(runs: &[&RunResult]) -> Option<f64> {
    let mut walls: Vec<f64> = runs
        .iter()
        .filter(|r| r.infra.is_none())
        .map(|r| r.wall_ms as f64)
        .collect();
    stats::median(&mut walls)
}

/// Of the (patch class, baseline class) pairs with a flaky patch and a baseline, the share
/// with a flaky baseline.
fn explained(pairs: impl Iterator<Item = (Option<Class>, Option<Class>)>) -> Option<f64> {
    let (mut flaky, mut both) = (0_u64, 0_u64);
    for (patch, baseline) in pairs {
        if let (Some(Class::Flaky), Some(baseline)) = (patch, baseline) {
            flaky += 1;
            both += u64::from(baseline == Class::Flaky);
        }
    }
    (flaky > 0).then(|| both as f64 / flaky as f64)
}

fn mode_counts<'a>(lists: impl Iterator<Item = &'a Vec<Mode>>) -> BTreeMap<Mode, u64> {
    let mut counts: BTreeMap<Mode, u64> = Mode::ALL.into_iter().map(|m| (m, 0)).collect();
    for mode in lists.flatten() {
        *counts.entry(*mode).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_600_000_000;

    fn run(arm: Arm, idx: u32, resolved: bool) -> RunResult {
        RunResult {
            arm,
            idx,
            resolved,
            infra: None,
            wall_ms: 1000,
            started_at: T0,
            signature: if resolved { "pass" } else { "fail" }.into(),
            evidence: Vec::new(),
        }
    }

    /// Runs 0, 1, ... of `arm` with these outcomes.
    fn runs(arm: Arm, outcomes: &[bool]) -> Vec<RunResult> {
        outcomes
            .iter()
            .enumerate()
            .map(|(i, &t)| run(arm, i as u32, t))
            .collect()
    }

    fn inst(id: &str, recorded: bool, runs: Vec<RunResult>) -> InstanceRuns {
        InstanceRuns {
            instance_id: id.into(),
            recorded_resolved: recorded,
            bench_date: T0,
            runs,
        }
    }

    fn row<'a>(s: &'a Summary, id: &str) -> &'a InstanceSummary {
        match s.instances.iter().find(|r| r.instance_id == id) {
            Some(r) => r,
            None => panic!("no instance {id}"),
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    fn json(s: &Summary) -> serde_json::Value {
        match serde_json::to_value(s) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn an_infra_failure_reproduces_no_outcome() {
        let timeout = |idx| RunResult {
            infra: Some(crate::reproduce::Infra::Timeout),
            ..run(Arm::Shim, idx, false)
        };
        // Recorded unresolved: two genuine failures reproduce it, the timeout does not.
        let data = vec![inst(
            "u",
            false,
            vec![
                run(Arm::Shim, 0, false),
                run(Arm::Shim, 1, false),
                timeout(2),
            ],
        )];
        let s = summarize(&data, 3);
        assert!(close(row(&s, "u").r_shim, 2.0 / 3.0));
        assert_eq!(row(&s, "u").class_shim, Some(Class::Flaky));
        // Recorded resolved: the timeout is a mismatch too.
        let data = vec![inst("v", true, vec![timeout(0)])];
        assert_eq!(
            row(&summarize(&data, 1), "v").class_shim,
            Some(Class::Broken)
        );
    }

    #[test]
    fn classes_counts_and_rates() {
        let data = vec![
            inst("c", true, runs(Arm::Shim, &[false, false, false])),
            inst("a", true, runs(Arm::Shim, &[true, true, true])),
            inst("b", true, runs(Arm::Shim, &[true, false, true])),
            // T_0 = false: failing runs reproduce it.
            inst("d", false, runs(Arm::Shim, &[false, false, false])),
        ];
        let s = summarize(&data, 3);
        assert_eq!((s.k, s.instances_total, s.runs_total), (3, 4, 12));
        let ids: Vec<&str> = s.instances.iter().map(|r| r.instance_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d"]);
        // 2 reproducible (a, d), 1 flaky (b), 1 broken (c) of 4.
        assert_eq!(
            (s.shim.reproducible, s.shim.flaky, s.shim.broken),
            (2, 1, 1)
        );
        assert_eq!(s.shim.rate_reproducible, Some(0.5));
        assert_eq!(s.shim.rate_flaky, Some(0.25));
        assert_eq!(s.shim.rate_broken, Some(0.25));
        // b: 2 of 3 runs equal T_0.
        assert!(close(row(&s, "b").r_shim, 2.0 / 3.0));
        assert_eq!(row(&s, "b").class_shim, Some(Class::Flaky));
        assert_eq!(row(&s, "c").r_shim, Some(0.0));
        assert_eq!(row(&s, "d").class_shim, Some(Class::Reproducible));
        assert_eq!(row(&s, "a").r_no_shim, None);
        assert_eq!(row(&s, "a").class_no_shim, None);
        assert_eq!(row(&s, "a").runs.get("shim"), Some(&3));
        // Without the other arms those objects are omitted and the scalars are null.
        let v = json(&s);
        for absent in [
            "no_shim",
            "baseline",
            "baseline_no_shim",
            "baseline_explained",
            "mcnemar",
            "drift",
        ] {
            assert!(v.get(absent).is_none(), "{absent} present");
        }
        for null in [
            "mcnemar_p",
            "overhead_median",
            "half_life_days",
            "half_life_ci",
        ] {
            assert!(v.get(null).is_some_and(|x| x.is_null()), "{null}");
        }
        assert!(v["failure_modes"].get("no_shim").is_none());
        assert_eq!(v["instances"][1]["class_shim"], "flaky");
        assert!(v["instances"][1]["r_no_shim"].is_null());
    }

    #[test]
    fn k_cap_and_partial_studies() {
        let mut extra = runs(Arm::Shim, &[true, true, false, false]);
        extra.push(run(Arm::NoShim, 7, false));
        let data = vec![
            // Rows with idx >= k = 2 are ignored: r = 2/2.
            inst("capped", true, extra),
            // A partial study: 1 run of k = 2 so far, r over that one run.
            inst("partial", true, runs(Arm::Shim, &[false])),
        ];
        let s = summarize(&data, 2);
        assert_eq!(s.runs_total, 3);
        assert_eq!(row(&s, "capped").class_shim, Some(Class::Reproducible));
        assert_eq!(row(&s, "capped").runs.len(), 1);
        // The no-shim row had idx 7: no no-shim arm at all.
        assert_eq!(s.no_shim, None);
        assert_eq!(row(&s, "partial").r_shim, Some(0.0));
        assert_eq!(row(&s, "partial").runs.get("shim"), Some(&1));
        // k = 0 counts nothing.
        let s0 = summarize(&data, 0);
        assert_eq!(s0.runs_total, 0);
        assert_eq!(s0.shim.total(), 0);
        assert_eq!(s0.shim.rate_reproducible, None);
    }

    #[test]
    fn mcnemar_pairs() {
        let both = |id: &str, shim: bool, no_shim: bool| {
            let mut r = runs(Arm::Shim, &[shim, shim]);
            r.extend(runs(Arm::NoShim, &[no_shim, true]));
            inst(id, true, r)
        };
        let data = vec![
            // b: reproducible with the shim, not without (no-shim r = 1/2).
            both("b1", true, false),
            both("b2", true, false),
            both("b3", true, false),
            both("b4", true, false),
            both("b5", true, false),
            // Concordant pairs.
            both("same1", true, true),
            both("same2", false, false),
            // Not a pair: shim only.
            inst("shim_only", true, runs(Arm::Shim, &[false, false])),
        ];
        let s = summarize(&data, 2);
        // b = 5, c = 0: p = 2 · C(5,0)/2^5 = 2/32 = 0.0625.
        assert_eq!(s.mcnemar.map(|m| (m.b, m.c)), Some((5, 0)));
        assert!(close(s.mcnemar.map(|m| m.p), 0.0625));
        assert_eq!(s.mcnemar_p, s.mcnemar.map(|m| m.p));
        let no_shim = s.no_shim.unwrap_or_default();
        // no_shim: same1 reproducible; b1..b5 and same2 flaky (1 of 2).
        assert_eq!(
            (no_shim.reproducible, no_shim.flaky, no_shim.broken),
            (1, 6, 0)
        );
        // One reversed pair: b = 5, c = 1 → p = 2·(1 + 6)/64 = 0.21875.
        let mut data = data;
        data.push(both("c1", false, true));
        let s = summarize(&data, 2);
        assert_eq!(s.mcnemar.map(|m| (m.b, m.c)), Some((5, 1)));
        assert!(close(s.mcnemar_p, 0.21875));
    }

    #[test]
    fn overhead_median() {
        let timed = |arm: Arm, walls: &[u64]| -> Vec<RunResult> {
            walls
                .iter()
                .enumerate()
                .map(|(i, &w)| RunResult {
                    wall_ms: w,
                    ..run(arm, i as u32, true)
                })
                .collect()
        };
        let mut one = timed(Arm::Shim, &[1100, 1000, 1200]); // median 1100
        one.extend(timed(Arm::NoShim, &[1000, 900, 1000])); // median 1000 → +0.1
        let mut infra_shim = RunResult {
            infra: Some(Infra::Timeout),
            wall_ms: 900_000,
            ..run(Arm::Shim, 3, false)
        };
        infra_shim.resolved = false;
        one.push(infra_shim); // ignored for timing
        let mut two = timed(Arm::Shim, &[2000, 2100]); // median 2050
        two.extend(timed(Arm::NoShim, &[2000, 2000])); // median 2000 → +0.025
        let mut three = timed(Arm::Shim, &[500]);
        three.push(RunResult {
            infra: Some(Infra::PatchApply),
            ..run(Arm::NoShim, 0, false)
        }); // no no-shim timing: left out
        let mut four = timed(Arm::Shim, &[500]);
        four.extend(timed(Arm::NoShim, &[0])); // median 0: left out
        let data = vec![
            inst("one", true, one),
            inst("two", true, two),
            inst("three", true, three),
            inst("four", true, four),
        ];
        let s = summarize(&data, 5);
        // Median of {0.1, 0.025} = 0.0625.
        let Some(o) = s.overhead_median else {
            panic!("no overhead");
        };
        assert!((o - 0.0625).abs() < 1e-12, "{o}");
    }

    #[test]
    fn baselines_and_explained_share() {
        let signed = |arm: Arm, sigs: &[&str]| -> Vec<RunResult> {
            sigs.iter()
                .enumerate()
                .map(|(i, s)| RunResult {
                    signature: (*s).into(),
                    ..run(arm, i as u32, false)
                })
                .collect()
        };
        // p1: flaky patch (shim), flaky baseline (a, a, b: r = 2/3).
        let mut p1 = runs(Arm::Shim, &[true, false, true]);
        p1.extend(signed(Arm::BaselineShim, &["a", "a", "b"]));
        p1.extend(signed(Arm::BaselineNoShim, &["x", "x", "x"]));
        // p2: flaky patch, reproducible baseline.
        let mut p2 = runs(Arm::Shim, &[true, false, false]);
        p2.extend(signed(Arm::BaselineShim, &["z", "z", "z"]));
        // p3: flaky patch without a baseline: not in the share.
        let p3 = runs(Arm::Shim, &[false, true, true]);
        // p4: tie b/a: modal "a" by byte order, r = 1/2 (not 1: a tie is no mode of all).
        let mut p4 = runs(Arm::Shim, &[true, true]);
        p4.extend(signed(Arm::BaselineShim, &["b", "a"]));
        // p5: every baseline run an infra failure: broken, though the signatures agree.
        let mut p5 = runs(Arm::Shim, &[true]);
        p5.extend(
            signed(Arm::BaselineShim, &["infra:timeout", "infra:timeout"])
                .into_iter()
                .map(|r| RunResult {
                    infra: Some(Infra::Timeout),
                    ..r
                }),
        );
        let data = vec![
            inst("p1", true, p1),
            inst("p2", true, p2),
            inst("p3", true, p3),
            inst("p4", true, p4),
            inst("p5", true, p5),
        ];
        let s = summarize(&data, 3);
        assert!(close(row(&s, "p1").r_baseline_shim, 2.0 / 3.0));
        assert_eq!(row(&s, "p1").class_baseline_shim, Some(Class::Flaky));
        assert_eq!(row(&s, "p1").r_baseline_no_shim, Some(1.0));
        assert_eq!(
            row(&s, "p1").class_baseline_no_shim,
            Some(Class::Reproducible)
        );
        assert_eq!(row(&s, "p4").r_baseline_shim, Some(0.5));
        assert_eq!(row(&s, "p4").class_baseline_shim, Some(Class::Flaky));
        assert_eq!(row(&s, "p5").r_baseline_shim, Some(1.0));
        assert_eq!(row(&s, "p5").class_baseline_shim, Some(Class::Broken));
        assert_eq!(row(&s, "p3").r_baseline_shim, None);
        let Some(baseline) = s.baseline else {
            panic!("no baseline");
        };
        // Baseline shim: p1 flaky, p2 reproducible, p4 flaky, p5 broken.
        assert_eq!(
            (baseline.reproducible, baseline.flaky, baseline.broken),
            (1, 2, 1)
        );
        assert_eq!(s.baseline_no_shim.map(|c| c.reproducible), Some(1));
        // Flaky patches with a shim baseline: p1 (flaky baseline), p2 (not) → 1/2; p3 has no
        // baseline. No no-shim runs: no flaky patch there → null.
        assert_eq!(
            s.baseline_explained,
            Some(BaselineExplained {
                shim: Some(0.5),
                no_shim: None
            })
        );
        let v = json(&s);
        assert!(v["baseline_explained"]["no_shim"].is_null());
        assert_eq!(v["baseline_no_shim"]["reproducible"], 1);
        assert_eq!(v["baseline"]["flaky"], 2);
        // Baselines do not change the patch counts.
        assert_eq!(s.shim.flaky, 3);
    }

    #[test]
    fn taxonomy_pins_and_evidence() {
        let failing = |arm: Arm, n: usize, evidence: &[Mode]| -> Vec<RunResult> {
            (0..n)
                .map(|i| RunResult {
                    evidence: evidence.to_vec(),
                    ..run(arm, i as u32, false)
                })
                .collect()
        };
        // pinned: reproducible with the shim, not without; without the clock pin it fails,
        // without the mirror it still passes. The pin beats the log's network evidence.
        let mut pinned = runs(Arm::Shim, &[true, true]);
        pinned.extend(failing(Arm::NoShim, 2, &[Mode::Network]));
        pinned.extend(failing(Arm::ShimWithout(Pin::Clock), 1, &[]));
        pinned.extend(runs(Arm::ShimWithout(Pin::Mirror), &[true, true]));
        pinned.extend(runs(Arm::ShimWithout(Pin::HashSeed), &[true, false]));
        // logs: no leave-one-out runs; the union of the differing runs' evidence. A no-shim
        // run that passes (matches T_0) contributes nothing.
        let mut logs = runs(Arm::Shim, &[true, true]);
        logs.extend(failing(Arm::NoShim, 1, &[Mode::DependencyDrift]));
        logs.push(RunResult {
            evidence: vec![Mode::Network, Mode::DependencyDrift],
            ..run(Arm::NoShim, 1, false)
        });
        logs.push(RunResult {
            evidence: vec![Mode::Environment],
            ..run(Arm::NoShim, 2, true)
        });
        // timeout: an infra timeout without evidence.
        let mut timeout = runs(Arm::Shim, &[true]);
        timeout.push(RunResult {
            infra: Some(Infra::Timeout),
            ..run(Arm::NoShim, 0, false)
        });
        // nothing: no evidence at all → other.
        let mut nothing = runs(Arm::Shim, &[true]);
        nothing.extend(failing(Arm::NoShim, 1, &[]));
        // shim_fails: not reproducible with the shim: log evidence only, and no pins even
        // though a leave-one-out arm fails.
        let mut shim_fails = failing(Arm::Shim, 2, &[Mode::Randomness]);
        shim_fails.extend(failing(Arm::ShimWithout(Pin::Random), 1, &[]));
        shim_fails.extend(failing(Arm::NoShim, 1, &[Mode::Randomness]));
        let data = vec![
            inst("pinned", true, pinned),
            inst("logs", true, logs),
            inst("timeout", true, timeout),
            inst("nothing", true, nothing),
            inst("shim_fails", true, shim_fails),
        ];
        let s = summarize(&data, 3);
        let pinned = row(&s, "pinned");
        assert_eq!(pinned.pins, vec![Pin::Clock, Pin::HashSeed]);
        assert_eq!(pinned.modes_no_shim, vec![Mode::Time, Mode::HashOrdering]);
        assert_eq!(pinned.modes_shim, vec![]);
        assert_eq!(
            pinned.runs.get("shim_without_clock").copied(),
            Some(1),
            "{:?}",
            pinned.runs
        );
        assert_eq!(
            row(&s, "logs").modes_no_shim,
            vec![Mode::DependencyDrift, Mode::Network]
        );
        assert_eq!(row(&s, "logs").pins, vec![]);
        assert_eq!(
            row(&s, "timeout").modes_no_shim,
            vec![Mode::TimeoutResource]
        );
        assert_eq!(row(&s, "timeout").infra, vec![Infra::Timeout]);
        assert_eq!(row(&s, "nothing").modes_no_shim, vec![Mode::Other]);
        let sf = row(&s, "shim_fails");
        assert_eq!(sf.pins, vec![]);
        assert_eq!(sf.modes_shim, vec![Mode::Randomness]);
        assert_eq!(sf.modes_no_shim, vec![Mode::Randomness]);
        let no_shim = s.failure_modes.no_shim.clone().unwrap_or_default();
        assert_eq!(no_shim.get(&Mode::Time), Some(&1));
        assert_eq!(no_shim.get(&Mode::Network), Some(&1));
        assert_eq!(no_shim.get(&Mode::DependencyDrift), Some(&1));
        assert_eq!(no_shim.get(&Mode::Randomness), Some(&1));
        assert_eq!(no_shim.get(&Mode::Other), Some(&1));
        assert_eq!(no_shim.get(&Mode::Environment), Some(&0));
        assert_eq!(no_shim.len(), Mode::ALL.len());
        assert_eq!(s.failure_modes.shim.get(&Mode::Randomness), Some(&1));
        assert_eq!(s.failure_modes.shim.values().sum::<u64>(), 1);
        let v = json(&s);
        assert_eq!(v["failure_modes"]["no_shim"]["time"], 1);
        assert_eq!(v["instances"][2]["pins"][0], "clock");
        assert_eq!(v["instances"][2]["modes_no_shim"][1], "hash_ordering");
    }

    #[test]
    fn drift_observations_and_half_life() {
        // Ten instances aged 100 days at their first no-shim run, three drifted: the fit of
        // stats::hazard_equal_ages_by_hand, half-life 100·ln2/−ln(0.7) = 194.33582098747314.
        let mut data = Vec::new();
        for i in 0..10 {
            let mut r = runs(Arm::Shim, &[true]);
            for idx in 0..2_u32 {
                r.push(RunResult {
                    // The earliest start counts: 100 days, then a day later.
                    started_at: T0 + (100 + i64::from(idx)) * 86_400,
                    evidence: if i < 3 {
                        vec![Mode::DependencyDrift]
                    } else {
                        vec![]
                    },
                    ..run(Arm::NoShim, idx, i >= 3)
                });
            }
            data.push(inst(&format!("i{i}"), true, r));
        }
        // Not an observation: a start before the benchmark date.
        let mut early = runs(Arm::NoShim, &[false]);
        early[0].started_at = T0 - 86_400;
        early[0].evidence = vec![Mode::DependencyDrift];
        data.push(inst("early", true, early));
        // No no-shim runs: no age.
        data.push(inst("shim_only", true, runs(Arm::Shim, &[true])));
        let s = summarize(&data, 2);
        let Some(drift) = &s.drift else {
            panic!("no drift");
        };
        assert_eq!((drift.observations, drift.events), (10, 3));
        assert_eq!(drift.points[0], (100.0, true));
        assert_eq!(drift.points[9], (100.0, false));
        assert_eq!(row(&s, "early").age_days, Some(-1.0));
        assert_eq!(row(&s, "shim_only").age_days, None);
        assert_eq!(row(&s, "i0").age_days, Some(100.0));
        let Some(h) = s.half_life_days else {
            panic!("no half-life");
        };
        assert!((h - 194.335_820_987_473_14).abs() < 1e-6, "{h}");
        let Some([lo, hi]) = s.half_life_ci else {
            panic!("no CI");
        };
        assert!((lo - 62.302_042_624_800_26).abs() < 1e-5, "{lo}");
        assert!((hi - 606.182_554_018_569_9).abs() < 1e-5, "{hi}");
        let v = json(&s);
        assert_eq!(v["drift"]["points"][0][0], 100.0);
        assert_eq!(v["drift"]["points"][0][1], true);
    }

    #[test]
    fn infra_counts_all_arms() {
        let with = |arm: Arm, idx: u32, infra: Infra| RunResult {
            infra: Some(infra),
            ..run(arm, idx, false)
        };
        let data = vec![inst(
            "x",
            true,
            vec![
                with(Arm::Shim, 0, Infra::PatchApply),
                with(Arm::NoShim, 0, Infra::Timeout),
                with(Arm::BaselineShim, 0, Infra::Oom),
                with(Arm::ShimWithout(Pin::Env), 0, Infra::Runtime),
                with(Arm::BaselineNoShim, 0, Infra::Timeout),
                with(Arm::Shim, 9, Infra::Runtime), // idx >= k: ignored
            ],
        )];
        let s = summarize(&data, 1);
        assert_eq!(
            s.infra,
            InfraCounts {
                patch_apply: 1,
                timeout: 2,
                oom: 1,
                runtime: 1
            }
        );
        assert_eq!(
            row(&s, "x").infra,
            vec![
                Infra::PatchApply,
                Infra::Timeout,
                Infra::Oom,
                Infra::Runtime
            ]
        );
        // A timed-out no-shim run is a failure mode, a patch-apply failure is not.
        assert_eq!(row(&s, "x").modes_no_shim, vec![Mode::TimeoutResource]);
        assert_eq!(row(&s, "x").modes_shim, vec![Mode::Other]);
        assert_eq!(json(&s)["instances"][0]["infra"][0], "patch_apply");
    }

    #[test]
    fn empty_input() {
        let s = summarize(&[], 5);
        assert_eq!((s.instances_total, s.runs_total), (0, 0));
        assert_eq!(s.shim, ClassCounts::default());
        assert_eq!(s.overhead_median, None);
        assert_eq!(s.failure_modes.shim.len(), Mode::ALL.len());
        let v = json(&s);
        assert!(v["shim"]["rate_reproducible"].is_null());
        assert_eq!(v["instances"], serde_json::json!([]));
    }

    #[test]
    fn json_field_names_and_round_trip() {
        let mut r = runs(Arm::Shim, &[true, false]);
        r.extend(runs(Arm::NoShim, &[true, true]));
        r.extend(runs(Arm::BaselineShim, &[false, false]));
        r.extend(runs(Arm::BaselineNoShim, &[false, true]));
        let s = summarize(&[inst("x", true, r)], 2);
        let v = json(&s);
        let Some(top) = v.as_object() else {
            panic!("not an object");
        };
        let keys: BTreeSet<&str> = top.keys().map(String::as_str).collect();
        let expected: BTreeSet<&str> = [
            "k",
            "instances_total",
            "runs_total",
            "shim",
            "no_shim",
            "baseline",
            "baseline_no_shim",
            "baseline_explained",
            "mcnemar",
            "mcnemar_p",
            "overhead_median",
            "half_life_days",
            "half_life_ci",
            "drift",
            "failure_modes",
            "infra",
            "instances",
        ]
        .into_iter()
        .collect();
        assert_eq!(keys, expected);
        let counts: BTreeSet<&str> = match v["shim"].as_object() {
            Some(o) => o.keys().map(String::as_str).collect(),
            None => panic!("shim"),
        };
        let expected: BTreeSet<&str> = [
            "reproducible",
            "flaky",
            "broken",
            "rate_reproducible",
            "rate_flaky",
            "rate_broken",
        ]
        .into_iter()
        .collect();
        assert_eq!(counts, expected);
        let instance: BTreeSet<&str> = match v["instances"][0].as_object() {
            Some(o) => o.keys().map(String::as_str).collect(),
            None => panic!("instance"),
        };
        let expected: BTreeSet<&str> = [
            "instance_id",
            "r_shim",
            "class_shim",
            "r_no_shim",
            "class_no_shim",
            "r_baseline_shim",
            "class_baseline_shim",
            "r_baseline_no_shim",
            "class_baseline_no_shim",
            "modes_shim",
            "modes_no_shim",
            "pins",
            "runs",
            "infra",
            "age_days",
        ]
        .into_iter()
        .collect();
        assert_eq!(instance, expected);
        assert_eq!(v["mcnemar"]["b"], 0);
        assert_eq!(v["mcnemar"]["c"], 1);
        assert_eq!(v["runs_total"], 8);
        assert_eq!(v["instances"][0]["runs"]["baseline_no_shim"], 2);
        let text = match serde_json::to_string(&s) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        };
        let back: Summary = match serde_json::from_str(&text) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(back, s);
        // Omitted objects read back as absent.
        let bare = summarize(&[inst("y", true, runs(Arm::Shim, &[true]))], 1);
        let text = serde_json::to_string(&bare).unwrap_or_default();
        let back: Option<Summary> = serde_json::from_str(&text).ok();
        assert_eq!(back, Some(bare));
    }
}
