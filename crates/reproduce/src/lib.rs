//! `reprorun reproduce`: re-runs recorded benchmark patches k times in fresh sandboxes, with
//! and without the determinism shim, stores every run in SQLite, and reports how many
//! reproduce (`spec/reproduce.md`).
//!
//! What is here is about patches; the study machinery is the shared `pipeline` layer below
//! (units in sandboxes, the worker pool, progress, the study database, the report document
//! and its charts, generic statistics). Data flows one way: `input` (SWE-bench files) →
//! `tree` (checkout + patches, once per instance and variant) → `runner` (one sandbox per
//! run, a pipeline unit) → `outcome` (grading, re-runnable by `regrade`) → `store`
//! (reproduce's tables on the pipeline's database) → `summary` (statistics from `stats`,
//! failure modes from `evidence`) → `report` (its sections on the pipeline's document:
//! Markdown, HTML with SVG, JSON).

pub mod cli;
pub mod cluster;
pub(crate) mod evidence;
pub(crate) mod export;
pub(crate) mod gocache;
pub(crate) mod input;
pub(crate) mod ledger;
pub(crate) mod outcome;
pub(crate) mod provenance;
pub(crate) mod regrade;
pub(crate) mod report;
pub(crate) mod runner;
pub(crate) mod runners;
pub(crate) mod select;
pub(crate) mod stats;
pub mod store;
pub(crate) mod study;
pub(crate) mod summary;
pub(crate) mod sweep;
pub(crate) mod tree;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What stops a study or a report; each is one line for the user.
#[derive(Debug, Error)]
pub enum ReproduceError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Lock(#[from] reprorun_pipeline::store::LockError),
    #[error(transparent)]
    Report(#[from] report::ReportError),
    #[error(transparent)]
    Regrade(#[from] regrade::RegradeError),
    #[error(transparent)]
    Export(#[from] export::swebench::ExportError),
    #[error("worker: {0}")]
    Worker(#[from] reprorun_pipeline::pool::PoolError),
    #[error("stopped by {signal}: {recorded} run(s) recorded, {in_flight} in flight ended; run the same command again to resume (--db {db})")]
    Stopped {
        signal: &'static str,
        recorded: u64,
        in_flight: usize,
        db: std::path::PathBuf,
    },
    #[error("instance {id}: {cause}; fix it and run the same command again to resume")]
    Setup {
        id: String,
        #[source]
        cause: Box<runner::SetupError>,
    },
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
    #[error("print summary: {0}")]
    Print(std::io::Error),
}

/// The conditions one run is made under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// The patch under reprorun's determinism profile: clock at the benchmark date, pinned
    /// environment and seeds, seeded entropy, the frozen mirror.
    Shim,
    /// The patch host-like: real clock, the host's environment, real entropy, the live index.
    NoShim,
    /// The unpatched repository (test patch only) under the shim's conditions.
    BaselineShim,
    /// The unpatched repository under the no-shim conditions.
    BaselineNoShim,
    /// The shim with one pin left out (which pin changes the outcome).
    ShimWithout(Pin),
    /// The shim with its clock on another day (days since the Unix epoch, at the
    /// benchmark's time of day): `--clock-sweep` and its bisection.
    ShimAt(i64),
    /// The shim with one of reprotest's variations applied (which variation flips a test).
    ShimVary(Variation),
}

/// A variation of Debian's reprotest that the shim neutralises and the no-shim arm may
/// meet on a user's machine; each is applied on top of the shim, one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variation {
    /// UTC+14 (reprotest's `GMT-14`; `Etc/GMT-14` where the root has the zone file), instead
    /// of `UTC`.
    Timezone,
    /// `LANG`/`LC_ALL` `fr_CH.UTF-8` (reprotest's), instead of `C.UTF-8`.
    Locale,
    /// umask 0002 instead of 0022.
    Umask,
    /// `HOME=/nonexistent/first-build` (reprotest's), instead of the pinned home.
    Home,
    /// Another host and domain name.
    Hostname,
    /// An extra directory at the head of `PATH`.
    ExecPath,
}

impl Variation {
    pub const ALL: [Variation; 6] = [
        Variation::Timezone,
        Variation::Locale,
        Variation::Umask,
        Variation::Home,
        Variation::Hostname,
        Variation::ExecPath,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variation::Timezone => "timezone",
            Variation::Locale => "locale",
            Variation::Umask => "umask",
            Variation::Home => "home",
            Variation::Hostname => "hostname",
            Variation::ExecPath => "exec_path",
        }
    }
}

/// One pin of the shim, for leave-one-out runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pin {
    /// The wall clock at the benchmark date (without: the real clock).
    Clock,
    /// Hash seeds (without: PYTHONHASHSEED=random and the other runtimes' defaults).
    HashSeed,
    /// Seeded entropy (without: the kernel's).
    Random,
    /// TZ, locale, PATH, HOME and the rest of the pinned environment (without: the host's).
    Env,
    /// The frozen dependency mirror (without: the live index).
    Mirror,
    /// Directory listings in name order (without: the filesystem's order).
    DirOrder,
    /// One CPU (without: all the CPUs of the worker's share).
    Cpus,
    /// No network but loopback (without: `--no-shim-net`'s network).
    Network,
}

impl Pin {
    pub const ALL: [Pin; 8] = [
        Pin::Clock,
        Pin::HashSeed,
        Pin::Random,
        Pin::Env,
        Pin::Mirror,
        Pin::DirOrder,
        Pin::Cpus,
        Pin::Network,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pin::Clock => "clock",
            Pin::HashSeed => "hash_seed",
            Pin::Random => "random",
            Pin::Env => "env",
            Pin::Mirror => "mirror",
            Pin::DirOrder => "dir_order",
            Pin::Cpus => "cpus",
            Pin::Network => "network",
        }
    }

    /// The failure mode a run that fails without this pin shows.
    pub fn mode(self) -> Mode {
        match self {
            Pin::Clock => Mode::Time,
            Pin::HashSeed => Mode::HashOrdering,
            Pin::Random => Mode::Randomness,
            Pin::Env => Mode::Environment,
            Pin::Mirror => Mode::DependencyDrift,
            Pin::DirOrder => Mode::HashOrdering,
            Pin::Cpus => Mode::Environment,
            Pin::Network => Mode::Network,
        }
    }
}

impl Arm {
    /// The arm's name in the store and in reports: `shim`, `no_shim`, `baseline_shim`,
    /// `baseline_no_shim`, `shim_without_clock`, ...
    pub fn name(self) -> String {
        match self {
            Arm::Shim => "shim".into(),
            Arm::NoShim => "no_shim".into(),
            Arm::BaselineShim => "baseline_shim".into(),
            Arm::BaselineNoShim => "baseline_no_shim".into(),
            Arm::ShimWithout(p) => format!("shim_without_{}", p.name()),
            Arm::ShimAt(day) => format!("shim_at_{}", sweep::day_name(day)),
            Arm::ShimVary(v) => format!("shim_vary_{}", v.name()),
        }
    }

    /// The inverse of [`Arm::name`].
    pub fn parse(name: &str) -> Option<Arm> {
        Some(match name {
            "shim" => Arm::Shim,
            "no_shim" => Arm::NoShim,
            "baseline_shim" => Arm::BaselineShim,
            "baseline_no_shim" => Arm::BaselineNoShim,
            other => {
                if let Some(day) = other.strip_prefix("shim_at_") {
                    return sweep::parse_day(day).map(Arm::ShimAt);
                }
                if let Some(v) = other.strip_prefix("shim_vary_") {
                    return Variation::ALL
                        .iter()
                        .find(|x| x.name() == v)
                        .map(|x| Arm::ShimVary(*x));
                }
                let pin = other.strip_prefix("shim_without_")?;
                Arm::ShimWithout(*Pin::ALL.iter().find(|p| p.name() == pin)?)
            }
        })
    }

    /// Whether the arm runs the unpatched repository.
    pub fn is_baseline(self) -> bool {
        matches!(self, Arm::BaselineShim | Arm::BaselineNoShim)
    }
}

/// The failure-mode taxonomy of a patch that does not reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    DependencyDrift,
    Time,
    HashOrdering,
    Randomness,
    Network,
    Environment,
    TimeoutResource,
    Other,
}

impl Mode {
    pub const ALL: [Mode; 8] = [
        Mode::DependencyDrift,
        Mode::Time,
        Mode::HashOrdering,
        Mode::Randomness,
        Mode::Network,
        Mode::Environment,
        Mode::TimeoutResource,
        Mode::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::DependencyDrift => "dependency_drift",
            Mode::Time => "time",
            Mode::HashOrdering => "hash_ordering",
            Mode::Randomness => "randomness",
            Mode::Network => "network",
            Mode::Environment => "environment",
            Mode::TimeoutResource => "timeout_resource",
            Mode::Other => "other",
        }
    }
}

/// Why a run produced no test outcome (kept apart from test failures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Infra {
    /// The patch (or the test patch) did not apply with any fallback.
    PatchApply,
    /// The test command ran past the timeout.
    Timeout,
    /// The kernel's OOM killer ended it (`--memory`).
    Oom,
    /// reprorun could not set up or supervise the sandbox.
    Runtime,
    /// The test command ran but its output names none of the listed tests: the `error`
    /// class (SWE-bench's `error_ids`; [`outcome::Grade::error`]). Set by grading, so
    /// `regrade` may set or clear it.
    NoTests,
}

impl Infra {
    pub fn name(self) -> &'static str {
        match self {
            Infra::PatchApply => "patch_apply",
            Infra::Timeout => "timeout",
            Infra::Oom => "oom",
            Infra::Runtime => "runtime",
            Infra::NoTests => "no_tests",
        }
    }

    /// Every cause, in report order.
    pub const ALL: [Infra; 5] = [
        Infra::PatchApply,
        Infra::Timeout,
        Infra::Oom,
        Infra::Runtime,
        Infra::NoTests,
    ];

    pub fn parse(name: &str) -> Option<Infra> {
        Infra::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Whether the run's test command ran to its end, so its logs can be graded (again).
    pub fn graded(self) -> bool {
        self == Infra::NoTests
    }
}

/// One recorded run, as the summary sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub arm: Arm,
    /// 0-based index of the run within its arm (0..k).
    pub idx: u32,
    /// SWE-bench's rule: every FAIL_TO_PASS and PASS_TO_PASS test passed (or, for an
    /// instance without test lists, the test command exited 0). False for an infra failure.
    pub resolved: bool,
    pub infra: Option<Infra>,
    /// Wall-clock time of the test command's sandbox, milliseconds.
    pub wall_ms: u64,
    /// When the run started, Unix seconds (host clock).
    pub started_at: i64,
    /// A digest of the outcome that matters (statuses of the listed tests, or the exit
    /// status, or the infra failure): equal signatures mean an equal outcome.
    pub signature: String,
    /// Failure modes the run's logs show evidence of ([`evidence::detect`]); empty for a
    /// resolved run.
    pub evidence: Vec<Mode>,
    /// The listed tests that did not pass in this run (failed, or missing from its output).
    #[serde(default)]
    pub failed_tests: Vec<String>,
}

/// Every recorded run of one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRuns {
    pub instance_id: String,
    /// T_0: the outcome the benchmark recorded.
    pub recorded_resolved: bool,
    /// The benchmark date (`bench_date`, else `created_at`), Unix seconds.
    pub bench_date: i64,
    pub runs: Vec<RunResult>,
}
