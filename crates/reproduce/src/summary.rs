//! The study's results: from every recorded run ([`InstanceRuns`]) to the [`Summary`] that
//! `reprorun reproduce --json` prints and `report.json`/`summary.json` hold.
//!
//! Pure: no I/O. Statistics come from [`super::stats`]; failure-mode evidence was attached to
//! each run by [`super::evidence::detect`] when it was recorded.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

mod counts;

pub(crate) use counts::{
    BaselineExplained, ClassCounts, Drift, FailureModes, InfraCounts, McNemar, OverheadRuns,
    Resolved,
};

use super::stats::{self, Class};
use super::{Arm, Infra, InstanceRuns, Mode, Pin, RunResult};
use reprorun_pipeline::stats as pstats;

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
pub(crate) struct Summary {
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
    /// The spread of those per-instance overheads: `[25th, 75th percentile]` (linear
    /// interpolation). Omitted with `overhead_median`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_iqr: Option<[f64; 2]>,
    /// How many instances (paired shim and no-shim runs) the overhead is over.
    #[serde(default)]
    pub overhead_instances: u64,
    /// How many runs the overhead compares, per arm: only runs that ran the tests (no
    /// infra failure, no `error`) of the `overhead_instances` are timed, so the figure
    /// compares the same work.
    #[serde(default)]
    pub overhead_runs: OverheadRuns,
    /// SWE-bench's resolved rate per arm (the number a leaderboard publishes), keyed by arm
    /// name (`shim`, `no_shim`, `baseline_shim`, ...); arms without runs are absent.
    #[serde(default)]
    pub resolved: BTreeMap<String, Resolved>,
    /// Dependency-drift half-life in days, ln 2 / λ̂ of the exponential hazard fitted to
    /// `drift` ([`pstats::fit_exponential_hazard`]). `null` when the fit is not estimable
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
    /// The per-test part: the ledger (`reproduce ledger`) with what finding the causes
    /// cost (`spec/reproduce.md`, *Ledger*). Omitted for a study without stored test lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<crate::ledger::LedgerPart>,
}

/// One instance's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct InstanceSummary {
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
    /// Resolved runs per arm name (arms without runs are absent): with `runs`, this
    /// instance's resolved rate in each arm.
    #[serde(default)]
    pub resolved_runs: BTreeMap<String, u64>,
    /// The per-test view: each listed test that did not pass in some run that ran the tests,
    /// with those runs (`shim#0`, `no_shim#2`, ...), failed or missing alike. Tests that
    /// passed in every such run are absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_tests: BTreeMap<String, Vec<String>>,
    /// Distinct hosts (hostname and machine id) its runs were made on, for a study merged
    /// from a cluster (`reproduce merge`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_hosts: Option<u32>,
}

/// What the pass over the instances gathers for the study-wide numbers.
#[derive(Default)]
struct Totals {
    runs: u64,
    infra: InfraCounts,
    overheads: Vec<f64>,
    overhead_runs: OverheadRuns,
    resolved: BTreeMap<Arm, Resolved>,
    points: Vec<(f64, bool)>,
    /// The first no-shim run's start of each observation, seconds since the epoch.
    measured: Vec<i64>,
    any_no_shim: bool,
    any_baseline_shim: bool,
    any_baseline_no_shim: bool,
}

/// One instance's row, from its first `k` runs per arm; adds to `t`.
fn instance_row(inst: &InstanceRuns, k: u32, t: &mut Totals) -> InstanceSummary {
    let mut arms: BTreeMap<Arm, Vec<&RunResult>> = BTreeMap::new();
    for run in inst.runs.iter().filter(|r| r.idx < k) {
        arms.entry(run.arm).or_default().push(run);
        t.runs += 1;
        if let Some(i) = run.infra {
            t.infra.add(i);
        }
    }
    let arm_runs = |arm: Arm| arms.get(&arm).map(Vec::as_slice).unwrap_or(&[]);
    let recorded = inst.recorded_resolved;

    let r_shim = patch_rate(arm_runs(Arm::Shim), recorded);
    let r_no_shim = patch_rate(arm_runs(Arm::NoShim), recorded);
    let class_shim = patch_class(arm_runs(Arm::Shim), r_shim);
    let class_no_shim = patch_class(arm_runs(Arm::NoShim), r_no_shim);
    let baseline_shim = baseline_rate(arm_runs(Arm::BaselineShim));
    let baseline_no_shim = baseline_rate(arm_runs(Arm::BaselineNoShim));
    t.any_no_shim |= r_no_shim.is_some();
    t.any_baseline_shim |= baseline_shim.is_some();
    t.any_baseline_no_shim |= baseline_no_shim.is_some();

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

    overhead(arm_runs(Arm::Shim), arm_runs(Arm::NoShim), t);
    for (arm, list) in &arms {
        let r = t.resolved.entry(*arm).or_insert(Resolved {
            runs: 0,
            resolved: 0,
            errors: 0,
            rate: None,
            instances: 0,
            instances_resolved_every_run: 0,
        });
        r.runs += list.len() as u64;
        r.resolved += list
            .iter()
            .filter(|x| x.resolved && x.infra.is_none())
            .count() as u64;
        r.errors += list
            .iter()
            .filter(|x| x.infra == Some(Infra::NoTests))
            .count() as u64;
        r.instances += 1;
        r.instances_resolved_every_run +=
            u64::from(list.iter().all(|x| x.resolved && x.infra.is_none()));
    }

    let first_no_shim = arm_runs(Arm::NoShim).iter().map(|r| r.started_at).min();
    let age_days =
        first_no_shim.map(|start| (i128::from(start) - i128::from(inst.bench_date)) as f64 / DAY);
    if let (Some(age), Some(start)) = (age_days.filter(|a| *a > 0.0), first_no_shim) {
        t.points
            .push((age, modes_no_shim.contains(&Mode::DependencyDrift)));
        t.measured.push(start);
    }

    let runs = arms
        .iter()
        .map(|(arm, list)| (arm.name(), list.len() as u64))
        .collect();
    let infra_kinds = Infra::ALL
        .into_iter()
        .filter(|i| arms.values().flatten().any(|r| r.infra == Some(*i)))
        .collect();
    let resolved_runs = arms
        .iter()
        .map(|(arm, list)| {
            let n = list
                .iter()
                .filter(|x| x.resolved && x.infra.is_none())
                .count();
            (arm.name(), n as u64)
        })
        .collect();
    let mut failed_tests: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (arm, list) in &arms {
        for run in list.iter().filter(|r| r.infra.is_none()) {
            for test in &run.failed_tests {
                let runs = failed_tests.entry(test.clone()).or_default();
                runs.push(format!("{}#{}", arm.name(), run.idx));
            }
        }
    }

    InstanceSummary {
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
        resolved_runs,
        failed_tests,
        distinct_hosts: None,
    }
}

/// McNemar's test over the instances classified in both patched arms (reproducible or
/// not); `None` without such a pair.
fn mcnemar(rows: &[InstanceSummary]) -> Option<McNemar> {
    let mut pairs = 0_u64;
    let (mut b, mut c) = (0_u64, 0_u64);
    for row in rows {
        if let (Some(s), Some(n)) = (row.class_shim, row.class_no_shim) {
            // A pair with an arm whose runs never ran a listed test compares nothing.
            if s == Class::Error || n == Class::Error {
                continue;
            }
            pairs += 1;
            let s = s == Class::Reproducible;
            let n = n == Class::Reproducible;
            b += u64::from(s && !n);
            c += u64::from(!s && n);
        }
    }
    (pairs > 0).then(|| McNemar {
        b,
        c,
        p: pstats::mcnemar_exact(b, c),
    })
}

/// Summarizes a study run with `k` runs per arm; see [`Summary`] for every rule.
pub(crate) fn summarize(instances: &[InstanceRuns], k: u32) -> Summary {
    let mut ordered: Vec<&InstanceRuns> = instances.iter().collect();
    ordered.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));

    let mut t = Totals::default();
    let rows: Vec<InstanceSummary> = ordered
        .into_iter()
        .map(|inst| instance_row(inst, k, &mut t))
        .collect();
    let Totals {
        runs: runs_total,
        infra,
        mut overheads,
        overhead_runs,
        resolved,
        points,
        measured,
        any_no_shim,
        any_baseline_shim,
        any_baseline_no_shim,
    } = t;

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

    let mcnemar = mcnemar(&rows);

    let fit = pstats::fit_exponential_hazard(&points);
    let drift = any_no_shim.then(|| Drift {
        observations: points.len() as u64,
        events: points.iter().filter(|(_, e)| *e).count() as u64,
        points,
        measured_at: measured
            .iter()
            .min()
            .zip(measured.iter().max())
            .map(|(a, b)| {
                let date =
                    |s: i64| reprorun_runtime::determinism::date::rfc3339_secs(s)[..10].to_string();
                [date(*a), date(*b)]
            }),
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
        overhead_median: pstats::median(&mut overheads),
        overhead_iqr: pstats::quartiles(&mut overheads),
        overhead_instances: overheads.len() as u64,
        overhead_runs,
        resolved: resolved
            .into_iter()
            .map(|(arm, mut r)| {
                r.rate = (r.runs > 0).then(|| r.resolved as f64 / r.runs as f64);
                (arm.name(), r)
            })
            .collect(),
        half_life_days: fit.map(|f| f.half_life_days),
        half_life_ci: fit.map(|f| [f.ci_low, f.ci_high]),
        drift,
        failure_modes,
        infra,
        instances: rows,
        ledger: None,
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

/// Whether no run ran a listed test and one at least ran the test command to its end: the
/// arm's class is `error` ([`crate::outcome::Grade::error`]).
fn errored(runs: &[&RunResult]) -> bool {
    runs.iter().all(|r| r.infra.is_some()) && runs.iter().any(|r| r.infra == Some(Infra::NoTests))
}

/// The class of a patched arm with rate `r`: `error` when [`errored`], else from r.
fn patch_class(runs: &[&RunResult], r: Option<f64>) -> Option<Class> {
    let r = r?;
    Some(if errored(runs) {
        Class::Error
    } else {
        stats::classify(r)
    })
}

/// Adds an instance's overhead, from the runs of each arm that ran the tests, to `t`; or
/// counts it left out when it has runs in both arms but one arm has no such run.
fn overhead(shim: &[&RunResult], no_shim: &[&RunResult], t: &mut Totals) {
    let (s_n, shim_wall) = median_wall(shim);
    let (n_n, no_shim_wall) = median_wall(no_shim);
    match (shim_wall, no_shim_wall) {
        (Some(s), Some(n)) if n > 0.0 => {
            t.overheads.push(s / n - 1.0);
            t.overhead_runs.shim += s_n;
            t.overhead_runs.no_shim += n_n;
        }
        _ if !shim.is_empty() && !no_shim.is_empty() => t.overhead_runs.instances_left_out += 1,
        _ => {}
    }
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
    let class = if errored(runs) {
        Class::Error
    } else if runs.iter().all(|r| r.infra.is_some()) {
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

/// Median `wall_ms` over the runs that ran the tests (no infra failure, no `error`), and
/// how many those are.
fn median_wall(runs: &[&RunResult]) -> (u64, Option<f64>) {
    let mut walls: Vec<f64> = runs
        .iter()
        .filter(|r| r.infra.is_none())
        .map(|r| r.wall_ms as f64)
        .collect();
    (walls.len() as u64, pstats::median(&mut walls))
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
mod tests;
