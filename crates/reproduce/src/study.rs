//! The study: which runs to make, made by worker processes, resumable. Nothing is decided
//! by the clock except `--stagger`: the runs still missing from the store are the runs to
//! make, so a study killed at any moment and started again finishes with every run
//! recorded once.
//!
//! Phase 1 makes k runs of every instance in every arm asked for (shim; with
//! `--compare-shim` no-shim; with `--baseline` the unpatched repository under each). Phase 2
//! (with `--compare-shim`) takes each patch that reproduces with the shim but not without
//! it and re-runs it with one pin of the shim left out at a time: the pins whose absence
//! breaks it are the failure modes.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use reprorun_pipeline::pool::{Pool, PoolError};
use reprorun_pipeline::progress::{Progress, ProgressMode};
use reprorun_pipeline::unix_now_ms;

use super::input::{self, Defaults, Instance};
use super::runner::{self, Conditions};
use super::store::Store;
use super::{Arm, Pin, ReproduceError, Variation};

/// `reprorun reproduce run`'s options.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub instances: PathBuf,
    pub predictions: PathBuf,
    pub db: PathBuf,
    pub k: u32,
    pub compare_shim: bool,
    pub baseline: bool,
    pub jobs: u32,
    pub stagger: Option<Duration>,
    /// Runs per left-out pin in phase 2 (0: no phase 2); at most `k`.
    pub pin_runs: u32,
    /// Phase 3's days (`--clock-sweep`); empty: no phase 3.
    pub clock_sweep: Vec<super::sweep::Point>,
    pub defaults: Defaults,
    pub conditions: Conditions,
    /// How progress is shown on stderr.
    pub progress: ProgressMode,
}

/// One run to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Job {
    pub(crate) inst: usize,
    pub(crate) arm: Arm,
    pub(crate) idx: u32,
}

/// Runs the study to completion (or to the first error that stops it) and returns the
/// instances that had no prediction and the number of predictions skipped for naming no
/// instance of the study.
pub(crate) fn run(opts: &Options) -> Result<(Vec<String>, usize), ReproduceError> {
    if opts.k == 0 {
        return Err(ReproduceError::Usage("--k must be at least 1".into()));
    }
    if opts.jobs == 0 {
        return Err(ReproduceError::Usage("--jobs must be at least 1".into()));
    }
    if let Some(m) = &opts.conditions.no_shim_mirror {
        reprorun_runtime::mirror::read_lock(m)
            .map_err(|e| ReproduceError::Usage(format!("--no-shim-mirror: {e}")))?;
    }
    // Everything is read and checked before the store is created.
    let input = input::load(&opts.instances, &opts.predictions, &opts.defaults)?;
    let insts = input.instances;
    if opts.compare_shim {
        for line in install_warnings(&insts, &opts.conditions) {
            eprintln!("{line}");
        }
    }
    let lock = reprorun_pipeline::store::lock(&opts.db)?;
    let lock_fd = lock.as_raw_fd();
    let start = {
        let store = Store::open(&opts.db, true)?;
        crate::tree::check_work_dir(&store.work_dir())?;
        store.register(&insts)?;
        crate::export::swebench::record_inputs(&store, &insts)?;
        store.check_options(&opts.conditions.fingerprint())?;
        store.set_meta("k", &opts.k.to_string())?;
        let now = unix_now_ms() / 1000;
        let start: i64 = store
            .meta_or_set("started_at", &now.to_string())?
            .parse()
            .unwrap_or(now);
        crate::export::swebench::run_id(&store)?;
        // Scratch of runs a killed study left; nothing else runs on this study (the lock).
        let _ = std::fs::remove_dir_all(store.work_dir().join("runs"));
        start
        // The coordinator's connection closes here: SQLite connections must not cross fork.
    };

    // SIGTERM or SIGINT: no new run, the runs in flight ended, one line on how to resume.
    reprorun_pipeline::pool::stop_on_signals()?;
    let arms = arms(opts);
    let mut phase1 = Vec::new();
    for idx in 0..opts.k {
        for &arm in &arms {
            for i in 0..insts.len() {
                phase1.push(Job { inst: i, arm, idx });
            }
        }
    }
    let mut progress = Progress::new(opts.progress, "runs");
    let mut pool = Pool {
        workers: opts.jobs as usize,
        close_in_worker: vec![lock_fd],
        progress: &mut progress,
    };
    let mut done = execute(&insts, opts, phase1, start, &mut pool);
    if done.is_ok() && opts.compare_shim && opts.pin_runs > 0 {
        let phase2 = pin_jobs(&insts, opts)?;
        done = execute(&insts, opts, phase2, start, &mut pool);
        if done.is_ok() {
            let rows = Store::open(&opts.db, false)?.rows()?;
            let mut vary = opts.clone();
            vary.conditions.select = super::select::selections(&insts, &rows);
            done = execute(&insts, &vary, vary_jobs(&insts, &rows), start, &mut pool);
        }
    }
    if done.is_ok() && !opts.clock_sweep.is_empty() {
        done = sweep(&insts, opts, start, &mut pool);
    }
    progress.finish();
    drop(lock);
    if let Err(ReproduceError::Worker(PoolError::Stopped { signal, in_flight })) = done {
        return Err(ReproduceError::Stopped {
            signal,
            recorded: Store::open(&opts.db, false)?.count_runs()?,
            in_flight,
            db: opts.db.clone(),
        });
    }
    done.map(|()| (input.without_prediction, input.unknown_predictions))
}

/// Installers a test command may run, as words of it.
const INSTALLERS: [&str; 9] = [
    "pip install",
    "pip3 install",
    "uv pip install",
    "npm ci",
    "npm install",
    "yarn install",
    "pnpm install",
    "go mod download",
    "poetry install",
];

/// One warning line per instance whose test command installs while the no-shim arm can
/// reach no index (`--no-shim-net none` and no `--no-shim-mirror`): its no-shim runs will
/// fail to install, which measures the set-up, not drift.
pub(crate) fn install_warnings(insts: &[Instance], cond: &Conditions) -> Vec<String> {
    if cond.no_shim_mirror.is_some()
        || cond.no_shim_net.mode != reprorun_runtime::plan::NetMode::None
    {
        return Vec::new();
    }
    insts
        .iter()
        .filter_map(|i| {
            let installer = INSTALLERS.iter().find(|w| i.test_cmd.contains(*w))?;
            Some(format!(
                "reprorun: warning: instance {}: its test command runs `{installer}` but the no-shim arm has no network (--no-shim-net none) and no --no-shim-mirror; its no-shim runs can only fail to install: pass --no-shim-net host (or allow:HOSTS) or --no-shim-mirror DIR",
                i.instance_id
            ))
        })
        .collect()
}

/// The arms of phase 1, in the order runs are made.
pub(crate) fn arms(opts: &Options) -> Vec<Arm> {
    let mut arms = vec![Arm::Shim];
    if opts.compare_shim {
        arms.push(Arm::NoShim);
    }
    if opts.baseline {
        arms.push(Arm::BaselineShim);
        if opts.compare_shim {
            arms.push(Arm::BaselineNoShim);
        }
    }
    arms
}

/// Phase 2: the leave-one-out runs of each patch that reproduces with the shim and not
/// without it.
fn pin_jobs(insts: &[Instance], opts: &Options) -> Result<Vec<Job>, ReproduceError> {
    let rows = Store::open(&opts.db, false)?.rows()?;
    let cpus = reprorun_runtime::plan::HostFacts::current().map_or(1, |h| h.cpus_available);
    Ok(pin_runs(insts, opts, &rows, cpus)
        .into_iter()
        .map(|(inst, arm, idx)| Job { inst, arm, idx })
        .collect())
}

/// The phase-2 runs (instance index, arm, run index) that phase 1's `rows` call for, on a
/// host with `cpus` CPUs: `run`'s second phase and `plan --phase pins`.
pub(crate) fn pin_runs(
    insts: &[Instance],
    opts: &Options,
    rows: &[super::store::RunRow],
    cpus: u32,
) -> Vec<(usize, Arm, u32)> {
    let reproduces = |id: &str, arm: Arm, recorded: bool| {
        let rs: Vec<bool> = rows
            .iter()
            .filter(|r| r.instance_id == id && r.arm == arm && r.idx < opts.k)
            .map(|r| r.infra.is_none() && r.resolved == recorded)
            .collect();
        !rs.is_empty() && rs.iter().all(|x| *x)
    };
    let cpus_per_worker = cpus / opts.jobs.max(1);
    let mut jobs = Vec::new();
    for idx in 0..opts.pin_runs.min(opts.k) {
        for (i, inst) in insts.iter().enumerate() {
            let id = inst.instance_id.as_str();
            if !reproduces(id, Arm::Shim, inst.recorded_resolved)
                || reproduces(id, Arm::NoShim, inst.recorded_resolved)
            {
                continue;
            }
            for pin in Pin::ALL {
                // A pin is left out only where leaving it out changes something: the
                // mirror needs one and a live index to replace it; the CPUs, a worker
                // share of more than one; the network, `--no-shim-net host`.
                let same = match pin {
                    Pin::Mirror => {
                        inst.mirror.is_none() || opts.conditions.no_shim_mirror.is_none()
                    }
                    Pin::Cpus => cpus_per_worker <= 1,
                    Pin::Network => {
                        opts.conditions.no_shim_net.mode == reprorun_runtime::plan::NetMode::None
                    }
                    _ => false,
                };
                if !same {
                    jobs.push((i, Arm::ShimWithout(pin), idx));
                }
            }
        }
    }
    jobs
}

/// The variation runs (one per reprotest variation, index 0) of each instance with a listed
/// test whose verdict differs between the shim and the no-shim runs: which variation the
/// shim neutralises flips it. An instance whose tests agree costs nothing more.
pub(crate) fn vary_jobs(insts: &[Instance], rows: &[super::store::RunRow]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for (i, inst) in insts.iter().enumerate() {
        if !super::select::differing(inst, rows).is_empty() {
            jobs.extend(Variation::ALL.iter().map(|v| Job {
                inst: i,
                arm: Arm::ShimVary(*v),
                idx: 0,
            }));
        }
    }
    jobs
}

/// The most bisection rounds of phase 3: a span of 2^40 days is far past any date.
const MAX_BISECT_ROUNDS: u32 = 40;

/// Phase 3 (`--clock-sweep`): the shim at each day of the list, then rounds of bisection
/// until every time bomb's first failing day is known to the day. Each day is one run
/// (index 0) per instance, recorded like any other: a killed study resumes.
fn sweep(
    insts: &[Instance],
    opts: &Options,
    start: i64,
    pool: &mut Pool,
) -> Result<(), ReproduceError> {
    let now = unix_now_ms() / 1000;
    let mut jobs = Vec::new();
    for (i, inst) in insts.iter().enumerate() {
        let days: std::collections::BTreeSet<i64> = opts
            .clock_sweep
            .iter()
            .map(|p| super::sweep::resolve(*p, inst.bench_date, now))
            .collect();
        jobs.extend(days.into_iter().map(|d| Job {
            inst: i,
            arm: Arm::ShimAt(d),
            idx: 0,
        }));
    }
    execute(insts, opts, jobs, start, pool)?;
    for _ in 0..MAX_BISECT_ROUNDS {
        let rows = Store::open(&opts.db, false)?.rows()?;
        let mut jobs = Vec::new();
        for (i, inst) in insts.iter().enumerate() {
            let mine: Vec<&super::store::RunRow> = rows
                .iter()
                .filter(|r| r.instance_id == inst.instance_id)
                .collect();
            let listed: Vec<String> = inst
                .fail_to_pass
                .iter()
                .chain(&inst.pass_to_pass)
                .cloned()
                .collect();
            for d in super::sweep::next_days(&mine, inst.bench_date, &listed) {
                jobs.push(Job {
                    inst: i,
                    arm: Arm::ShimAt(d),
                    idx: 0,
                });
            }
        }
        if jobs.is_empty() {
            return Ok(());
        }
        execute(insts, opts, jobs, start, pool)?;
    }
    Ok(())
}

/// Makes the jobs not yet recorded, `opts.jobs` at a time, each in a worker process of its
/// own ([`Pool`]). On an error no new run starts; the runs in flight finish and are
/// recorded.
fn execute(
    insts: &[Instance],
    opts: &Options,
    jobs: Vec<Job>,
    start: i64,
    pool: &mut Pool,
) -> Result<(), ReproduceError> {
    let mut pending = Vec::new();
    {
        let store = Store::open(&opts.db, false)?;
        for j in jobs {
            if !store.has_run(&insts[j.inst].instance_id, j.arm, j.idx)? {
                pending.push(j);
            }
        }
    }
    let stagger = opts.stagger.map_or(0, |s| s.as_millis() as i64);
    pool.run(
        pending,
        |j| start * 1000 + stagger * j.idx as i64,
        |j| format!("{} {} #{}", insts[j.inst].instance_id, j.arm.name(), j.idx),
        |j| worker(&insts[j.inst], *j, opts),
    )?;
    Ok(())
}

/// One run, recorded.
fn worker(inst: &Instance, job: Job, opts: &Options) -> Result<(), ReproduceError> {
    let store = Store::open(&opts.db, false)?;
    let row = runner::run(&store, inst, job.arm, job.idx, &opts.conditions)?;
    store.insert(&row)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(id: &str, cmd: &str) -> Instance {
        Instance {
            instance_id: id.into(),
            repo: String::new(),
            repo_path: "/repo".into(),
            base_commit: "abc".into(),
            test_patch: String::new(),
            model_patch: "p".into(),
            model_name: String::new(),
            fail_to_pass: vec![],
            pass_to_pass: vec![],
            test_cmd: cmd.into(),
            image: None,
            rootfs: None,
            mirror: None,
            cassette: None,
            bench_date: 0,
            recorded_resolved: true,
        }
    }

    #[test]
    fn an_arm_that_cannot_install_is_named_at_start() {
        let insts = [
            inst("js-1", "npm ci && npx mocha"),
            inst("py-1", "python3 -m pytest -q"),
        ];
        let mut cond = Conditions::new(Duration::from_secs(1), 0);
        let w = install_warnings(&insts, &cond);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("reprorun: warning: instance js-1: its test command runs `npm ci` but the no-shim arm has no network"),
            "{}",
            w[0]
        );
        cond.no_shim_mirror = Some("/m".into());
        assert!(install_warnings(&insts, &cond).is_empty());
        cond.no_shim_mirror = None;
        cond.no_shim_net =
            reprorun_runtime::plan::NetChoice::parse("host").unwrap_or(cond.no_shim_net);
        assert!(install_warnings(&insts, &cond).is_empty());
    }
}
