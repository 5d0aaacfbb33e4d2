//! The per-test flakiness ledger (`reprorun reproduce ledger`): from every recorded run of a
//! study (all arms, all hosts, all repeats), per instance and per listed test, how often it
//! passed, failed, errored, was skipped or missing in each arm, a class with its evidence,
//! and the causes the study's own runs show. A pure function of the rows; the command reads
//! them from the database and prints or exports the result (`spec/reproduce.md`, *Ledger*).
//!
//! Classes, from the patched arms (`shim`, `no_shim`; baselines run the unpatched code and
//! leave-one-out arms change a pin on purpose, so neither decides a class):
//! - `flaky`: the test both passes and fails within the `shim` arm — under identical,
//!   pinned conditions — or within `no_shim` when the study has no `shim` runs;
//! - `environment`: stable within `shim` but not the same in `no_shim`, or not the same on
//!   two hosts: the environment decides it, and the shim holds it;
//! - `stable_pass` / `stable_fail`: the same in every patched run.
//!
//! Causes: a leave-one-out arm (`shim_without_PIN`) in which the test's status differs from
//! its stable `shim` status names the pin's failure mode (`time`, `hash_ordering`, ...) and
//! the pin (`clock`, `dir_order`, `cpus`, ...); a variation arm (`shim_vary_VARIATION`)
//! names `environment` and the variation (`timezone`, `locale`, `umask`, ...); without such runs, the failure modes the
//! instance's failing `no_shim` runs show; `host` when two hosts disagree.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::outcome::{self, Status, Tests};
use super::runners::Aliases;
use super::store::{GradedList, RunRow};
use super::Arm;

/// What one test did in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Seen {
    Passed,
    Failed,
    Error,
    Skipped,
    Missing,
}

impl Seen {
    fn of(tests: &Tests, aliases: &Aliases, id: &str) -> Seen {
        match outcome::lookup(tests, aliases, id) {
            Some(s) if s.passes() => Seen::Passed,
            Some(Status::Failed | Status::Xpass) => Seen::Failed,
            Some(Status::Error) => Seen::Error,
            Some(Status::Skipped) => Seen::Skipped,
            Some(_) => Seen::Failed,
            None => Seen::Missing,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Seen::Passed => "passed",
            Seen::Failed => "failed",
            Seen::Error => "error",
            Seen::Skipped => "skipped",
            Seen::Missing => "missing",
        }
    }

    /// SWE-bench's view: a listed test passes or it does not.
    fn passes(self) -> bool {
        self == Seen::Passed
    }
}

/// How often a test was seen each way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub error: u64,
    pub skipped: u64,
    pub missing: u64,
}

impl Counts {
    fn add(&mut self, s: Seen) {
        *match s {
            Seen::Passed => &mut self.passed,
            Seen::Failed => &mut self.failed,
            Seen::Error => &mut self.error,
            Seen::Skipped => &mut self.skipped,
            Seen::Missing => &mut self.missing,
        } += 1;
    }

    fn runs(&self) -> u64 {
        self.passed + self.failed + self.error + self.skipped + self.missing
    }

    /// `Some(true)`: every run passed; `Some(false)`: none did; `None`: both, or no run.
    fn stable(&self) -> Option<bool> {
        match (self.passed, self.runs() - self.passed) {
            (0, 0) => None,
            (_, 0) => Some(true),
            (0, _) => Some(false),
            _ => None,
        }
    }

    fn mixed(&self) -> bool {
        self.passed > 0 && self.passed < self.runs()
    }
}

/// A test's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Class {
    StablePass,
    StableFail,
    Flaky,
    Environment,
}

impl Class {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Class::StablePass => "stable_pass",
            Class::StableFail => "stable_fail",
            Class::Flaky => "flaky",
            Class::Environment => "environment",
        }
    }

    /// Whether a grader should not trust the test.
    pub(crate) fn untrusted(self) -> bool {
        matches!(self, Class::Flaky | Class::Environment)
    }
}

/// One run that shows a test's status: the minimal pair of a flaky or environment test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Witness {
    pub arm: String,
    pub idx: u32,
    pub status: Seen,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// One listed test of one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestEntry {
    pub id: String,
    pub class: Class,
    pub causes: Vec<String>,
    /// The first day the test fails at (a clock sweep's finding); `null` without one.
    pub fails_after: Option<String>,
    /// Whether `fails_after` is bisected to the day (the day before it, the test passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fails_after_exact: Option<bool>,
    /// Runs with a test outcome (infrastructure failures left out), every arm.
    pub runs: u64,
    /// Counts per arm, by arm name.
    pub arms: BTreeMap<String, Counts>,
    /// Counts per host of the patched arms (a study merged from a cluster), by hostname.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, Counts>,
    /// For a flaky or environment test: a run where it passed and one where it did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Witness>,
}

/// One instance's tests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct InstanceEntry {
    pub instance_id: String,
    pub tests: Vec<TestEntry>,
}

/// The ledger of a study.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Ledger {
    pub instances: Vec<InstanceEntry>,
}

/// The ledger's headline: how many tests of each class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Headline {
    pub instances: u64,
    pub tests: u64,
    pub stable_pass: u64,
    pub stable_fail: u64,
    pub flaky: u64,
    pub environment: u64,
    pub time_bombs: u64,
}

impl Ledger {
    pub(crate) fn headline(&self) -> Headline {
        let mut h = Headline {
            instances: self.instances.len() as u64,
            ..Headline::default()
        };
        for t in self.instances.iter().flat_map(|i| &i.tests) {
            h.tests += 1;
            *match t.class {
                Class::StablePass => &mut h.stable_pass,
                Class::StableFail => &mut h.stable_fail,
                Class::Flaky => &mut h.flaky,
                Class::Environment => &mut h.environment,
            } += 1;
            h.time_bombs += u64::from(t.fails_after.is_some());
        }
        h
    }
}

/// Builds the ledger from a study's rows, its graded lists and, for a merged study, the
/// host of each run (`(instance, arm, idx)` → hostname). Instances without stored lists
/// have no tests to follow and are left out.
pub(crate) fn build(
    rows: &[RunRow],
    lists: &BTreeMap<String, GradedList>,
    hosts: &BTreeMap<(String, String, u32), String>,
    bench_dates: &BTreeMap<String, i64>,
) -> Ledger {
    let mut by_instance: BTreeMap<&str, Vec<Graded>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.infra.is_none()) {
        let tests: Tests = serde_json::from_str(&r.tests).unwrap_or_default();
        let aliases = Aliases::new(&tests);
        by_instance
            .entry(r.instance_id.as_str())
            .or_default()
            .push((r, tests, aliases, alone(r)));
    }
    let mut ledger = Ledger::default();
    for (id, (_, listed)) in lists {
        let Some(listed) = listed else { continue };
        let runs = by_instance.get(id.as_str()).map_or(&[][..], Vec::as_slice);
        let all: Vec<&RunRow> = runs.iter().map(|(r, ..)| *r).collect();
        let tests = listed
            .iter()
            .map(|t| {
                let mut e = entry(id, t, runs, hosts);
                if let Some(bench) = bench_dates.get(id) {
                    if let Some((day, exact)) = super::sweep::fails_after(&all, *bench, t) {
                        e.fails_after = Some(super::sweep::day_name(day));
                        e.fails_after_exact = Some(exact);
                        if !e.causes.iter().any(|c| c == "time") {
                            e.causes.push("time".into());
                            e.causes.sort();
                        }
                    }
                }
                e
            })
            .collect();
        ledger.instances.push(InstanceEntry {
            instance_id: id.clone(),
            tests,
        });
    }
    ledger
}

/// A run with its tests, their aliases, and the tests it ran alone (a variation run of
/// some tests, `select`): `None` for a run of the whole command.
type Graded<'a> = (&'a RunRow, Tests, Aliases, Option<BTreeSet<String>>);

/// The tests a run ran alone, from its record.
fn alone(r: &RunRow) -> Option<BTreeSet<String>> {
    crate::provenance::ran_alone(r).map(|t| t.into_iter().collect())
}

/// One run as one test saw it.
struct Run<'a> {
    row: &'a RunRow,
    seen: Seen,
    host: Option<&'a String>,
}

/// One test across an instance's runs.
fn entry(
    instance: &str,
    test: &str,
    runs: &[Graded],
    hosts: &BTreeMap<(String, String, u32), String>,
) -> TestEntry {
    let mut arms: BTreeMap<String, Counts> = BTreeMap::new();
    let mut by_host: BTreeMap<String, Counts> = BTreeMap::new();
    let mut seen: Vec<Run> = Vec::new();
    for (r, tests, aliases, alone) in runs {
        if alone.as_ref().is_some_and(|a| !a.contains(test)) {
            // A run of other tests alone: it did not run this one.
            continue;
        }
        let s = Seen::of(tests, aliases, test);
        arms.entry(r.arm.name()).or_default().add(s);
        let host = hosts.get(&(instance.to_string(), r.arm.name(), r.idx));
        if matches!(r.arm, Arm::Shim | Arm::NoShim) {
            if let Some(h) = host {
                by_host.entry(h.clone()).or_default().add(s);
            }
        }
        seen.push(Run {
            row: r,
            seen: s,
            host,
        });
    }
    let counts = |arm: Arm| arms.get(&arm.name()).cloned().unwrap_or_default();
    let (shim, no_shim) = (counts(Arm::Shim), counts(Arm::NoShim));
    let hosts_disagree = by_host.len() > 1 && {
        let verdicts: BTreeSet<Option<bool>> = by_host.values().map(Counts::stable).collect();
        verdicts.len() > 1
    };
    let class = classify(&shim, &no_shim, hosts_disagree);
    let mut causes = Vec::new();
    let mut evidence = Vec::new();
    if class.untrusted() {
        causes = find_causes(&shim, &arms, &seen, hosts_disagree);
        evidence = witnesses(&seen, class);
    }
    TestEntry {
        id: test.to_string(),
        class,
        causes,
        fails_after: None,
        fails_after_exact: None,
        runs: arms.values().map(Counts::runs).sum(),
        arms,
        hosts: if by_host.len() > 1 {
            by_host
        } else {
            BTreeMap::new()
        },
        evidence,
    }
}

fn classify(shim: &Counts, no_shim: &Counts, hosts_disagree: bool) -> Class {
    let decided = if shim.runs() > 0 { shim } else { no_shim };
    if decided.mixed() {
        return Class::Flaky;
    }
    let differs = shim.runs() > 0 && no_shim.runs() > 0 && shim.stable() != no_shim.stable();
    if differs || hosts_disagree {
        return Class::Environment;
    }
    match decided.stable() {
        Some(true) => Class::StablePass,
        _ => Class::StableFail,
    }
}

/// The causes the study's own runs show (module docs).
fn find_causes(
    shim: &Counts,
    arms: &BTreeMap<String, Counts>,
    seen: &[Run],
    hosts_disagree: bool,
) -> Vec<String> {
    let mut causes: BTreeSet<String> = BTreeSet::new();
    if let Some(held) = shim.stable() {
        for (name, c) in arms {
            if c.runs() == 0 || c.stable() == Some(held) {
                continue;
            }
            match Arm::parse(name) {
                Some(Arm::ShimWithout(pin)) => {
                    causes.insert(pin.mode().name().to_string());
                    causes.insert(pin.name().to_string());
                }
                Some(Arm::ShimVary(v)) => {
                    causes.insert(crate::Mode::Environment.name().to_string());
                    causes.insert(v.name().to_string());
                }
                _ => {}
            }
        }
        if causes.is_empty() && held {
            // No leave-one-out run tells: the failure modes of the no-shim runs where the
            // test did not pass.
            for r in seen
                .iter()
                .filter(|r| r.row.arm == Arm::NoShim && !r.seen.passes())
            {
                causes.extend(r.row.evidence.iter().map(|m| m.name().to_string()));
            }
        }
    }
    if hosts_disagree {
        causes.insert("host".into());
    }
    causes.into_iter().collect()
}

/// A passing and a non-passing run of the arm that decided the class (`shim` for a flaky
/// test, `no_shim` first for an environment test), earliest first.
fn witnesses(seen: &[Run], class: Class) -> Vec<Witness> {
    let prefer = if class == Class::Flaky {
        Arm::Shim
    } else {
        Arm::NoShim
    };
    let pick = |want_pass: bool| {
        seen.iter()
            .filter(|r| matches!(r.row.arm, Arm::Shim | Arm::NoShim))
            .filter(|r| r.seen.passes() == want_pass)
            .min_by_key(|r| (r.row.arm != prefer, r.row.idx))
    };
    [pick(true), pick(false)]
        .into_iter()
        .flatten()
        .map(|r| Witness {
            arm: r.row.arm.name(),
            idx: r.row.idx,
            status: r.seen,
            host: r.host.cloned(),
        })
        .collect()
}

/// The manifest graders apply (`--export`, format `reprorun-known-flaky/1`): per instance,
/// the tests not to trust and why, and the time bombs with their day.
pub(crate) fn export(ledger: &Ledger, source: &str) -> serde_json::Value {
    let mut instances = serde_json::Map::new();
    for i in &ledger.instances {
        let exclude: Vec<serde_json::Value> = i
            .tests
            .iter()
            .filter(|t| t.class.untrusted() || t.fails_after.is_some())
            .map(|t| {
                serde_json::json!({
                    "test": t.id,
                    "class": t.class.name(),
                    "causes": t.causes,
                    "fails_after": t.fails_after,
                })
            })
            .collect();
        if !exclude.is_empty() {
            instances.insert(
                i.instance_id.clone(),
                serde_json::json!({ "exclude": exclude }),
            );
        }
    }
    serde_json::json!({
        "format": EXPORT_FORMAT,
        "source": source,
        "headline": ledger.headline(),
        "instances": instances,
    })
}

/// The format name of [`export`]'s document.
pub(crate) const EXPORT_FORMAT: &str = "reprorun-known-flaky/1";

/// The most bytes of a manifest read (`regrade --exclude`).
const MAX_MANIFEST: u64 = 16 << 20;

/// The tests not to trust, per instance: what a manifest excludes.
pub(crate) type Exclusions = BTreeMap<String, BTreeSet<String>>;

/// Reads a graders' manifest ([`export`]'s format) for `regrade --exclude`; one line on
/// what is wrong with it.
pub(crate) fn read_exclusions(path: &std::path::Path) -> Result<Exclusions, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_MANIFEST {
        return Err(format!("larger than {MAX_MANIFEST} bytes"));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    if v["format"] != EXPORT_FORMAT {
        return Err(format!(
            "not a {EXPORT_FORMAT} manifest (its format is {})",
            v["format"]
        ));
    }
    let instances = v["instances"]
        .as_object()
        .ok_or("`instances` is not an object")?;
    let mut out = Exclusions::new();
    for (id, entry) in instances {
        let list = entry["exclude"]
            .as_array()
            .ok_or_else(|| format!("instances.{id}.exclude is not an array"))?;
        for (k, t) in list.iter().enumerate() {
            let test = t["test"]
                .as_str()
                .ok_or_else(|| format!("instances.{id}.exclude[{k}].test is not a string"))?;
            out.entry(id.clone()).or_default().insert(test.to_string());
        }
    }
    Ok(out)
}

mod command;
mod part;
pub use command::LedgerArgs;
pub(crate) use command::{run, with_ledger};
pub(crate) use part::{part, ExtraRuns, LedgerPart};

#[cfg(test)]
mod tests;
