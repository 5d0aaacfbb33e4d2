//! `reprorun reproduce plan`: the study's phase-1 runs as chunk files, a manifest that lets
//! `work` rebuild each run exactly as `run`'s worker makes it, and the sbatch scripts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ClusterError, CondSpec, Manifest, Unit, CHUNK_FORMAT, MANIFEST_FORMAT};
use crate::input::{self, Instance};
use crate::store::Store;
use crate::study::{self, Options};
use crate::Arm;
use reprorun_pipeline::driver::{write_plan, PlanFiles};

/// `plan`'s options beyond `run`'s.
#[derive(Debug, Clone)]
pub(crate) struct PlanOptions {
    pub study: Options,
    pub out: PathBuf,
    pub results: PathBuf,
    /// Units per chunk; default: as few as keep the array under 1000 tasks.
    pub chunk: Option<u32>,
    /// Passed verbatim to every sbatch.
    pub sbatch_args: String,
    /// Each chunk holds one run index (the k runs of a patch are separate array tasks).
    pub spread_hosts: bool,
    /// The reprorun the scripts run (default: this binary).
    pub reprorun: PathBuf,
    /// Which of the study's phases to plan.
    pub phase: Phase,
}

/// `plan --phase`: the study's k runs per arm, or (after they are merged) the leave-one-out
/// pin runs and variation runs they call for, or one round of the clock sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Runs,
    Pins,
    Sweep,
}

/// One round of the clock sweep (`--phase sweep`): each day of `--clock-sweep` not yet in
/// the merged database, and the bisection's next day of every time bomb whose first failing
/// day is not known to the day. Planned again after each merge until it plans nothing.
fn sweep_units(o: &Options, instances: &[Instance]) -> Result<Vec<Unit>, ClusterError> {
    if o.clock_sweep.is_empty() {
        return Err(ClusterError::Usage(
            "--phase sweep needs --clock-sweep LIST".into(),
        ));
    }
    if !o.db.exists() {
        return Err(ClusterError::Usage(format!(
            "--phase sweep: {} does not exist; plan, run and merge phase 1 first",
            o.db.display()
        )));
    }
    let store = Store::open(&o.db, false)?;
    store.check_options(&o.conditions.fingerprint())?;
    let rows = store.rows()?;
    let now = reprorun_pipeline::unix_now_ms() / 1000;
    let mut units = Vec::new();
    for inst in instances {
        let mine: Vec<&crate::store::RunRow> = rows
            .iter()
            .filter(|r| r.instance_id == inst.instance_id)
            .collect();
        if !mine.iter().any(|r| r.arm == Arm::Shim) {
            return Err(ClusterError::Usage(format!(
                "--phase sweep: instance {} has no shim run in {}; run and merge phase 1 first",
                inst.instance_id,
                o.db.display()
            )));
        }
        let listed: Vec<String> = inst.listed_tests().into_iter().map(String::from).collect();
        let days = crate::sweep::days_to_run(&mine, inst.bench_date, &listed, &o.clock_sweep, now);
        units.extend(
            days.into_iter()
                .map(|d| Unit::new(&inst.instance_id, Arm::ShimAt(d), 0)),
        );
    }
    Ok(units)
}

/// The phase-2 units: each patch that reproduces with the shim and not without it in the
/// merged phase-1 runs, with one pin left out at a time, and the variation runs
/// ([`study::vary_jobs`]) with the tests they select (`Conditions::select`). Refused while
/// any phase-1 run is missing from the database (the decision needs all of them).
fn pin_units(o: &Options, instances: &[Instance]) -> Result<(Vec<Unit>, Selections), ClusterError> {
    if !o.compare_shim || o.pin_runs == 0 {
        return Err(ClusterError::Usage(
            "--phase pins needs --compare-shim and --pin-runs of at least 1".into(),
        ));
    }
    if !o.db.exists() {
        return Err(ClusterError::Usage(format!(
            "--phase pins: {} does not exist; plan, run and merge phase 1 first",
            o.db.display()
        )));
    }
    let store = Store::open(&o.db, false)?;
    store.check_options(&o.conditions.fingerprint())?;
    let rows = store.rows()?;
    let arms = study::arms(o);
    let have: BTreeSet<(&str, Arm, u32)> = rows
        .iter()
        .map(|r| (r.instance_id.as_str(), r.arm, r.idx))
        .collect();
    let planned = instances.len() * arms.len() * o.k as usize;
    let mut missing = 0;
    for i in instances {
        for &arm in &arms {
            missing += (0..o.k)
                .filter(|&idx| !have.contains(&(i.instance_id.as_str(), arm, idx)))
                .count();
        }
    }
    if missing > 0 {
        return Err(ClusterError::Usage(format!(
            "--phase pins: {missing} of {planned} phase-1 runs are not in {} yet; run the \
             missing chunks (reproduce merge --missing) and merge them first",
            o.db.display()
        )));
    }
    // A task makes one run at a time on a node whose CPUs are not known here: the CPU
    // pin is left out as for `run --jobs 1` on a host with more than one CPU.
    let one_worker = Options {
        jobs: 1,
        ..o.clone()
    };
    let mut units: Vec<Unit> = study::pin_runs(instances, &one_worker, &rows, u32::MAX)
        .into_iter()
        .map(|(i, arm, idx)| Unit::new(&instances[i].instance_id, arm, idx))
        .collect();
    // And the variation runs of the instances whose tests disagree, as `run` makes them.
    units.extend(
        study::vary_jobs(instances, &rows)
            .into_iter()
            .map(|j| Unit::new(&instances[j.inst].instance_id, j.arm, j.idx)),
    );
    Ok((units, crate::select::selections(instances, &rows)))
}

/// The tests each instance's variation runs select.
type Selections = std::collections::BTreeMap<String, Vec<String>>;

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn digest_of(path: &Path) -> Result<String, ClusterError> {
    // A directory of tasks or `--predictions gold` is digested as `reproduce run` reads it.
    Ok(crate::input::digest(path)?)
}

/// Writes the plan and returns its manifest; `None` when the phase has no run to make (a
/// pins phase where no patch needs one): nothing is written.
pub(crate) fn plan(p: &PlanOptions) -> Result<Option<Manifest>, ClusterError> {
    let o = &p.study;
    if o.k == 0 {
        return Err(ClusterError::Usage("--k must be at least 1".into()));
    }
    if let Some(m) = &o.conditions.no_shim_mirror {
        reprorun_runtime::mirror::read_lock(m)
            .map_err(|e| ClusterError::Usage(format!("--no-shim-mirror: {e}")))?;
    }
    let input = input::load(&o.instances, &o.predictions, &o.defaults)?;
    let arms = study::arms(o);
    let mut conditions = o.conditions.clone();
    let units = match p.phase {
        Phase::Runs => {
            let mut units = Vec::new();
            for idx in 0..o.k {
                for &arm in &arms {
                    for inst in &input.instances {
                        units.push(Unit::new(&inst.instance_id, arm, idx));
                    }
                }
            }
            units
        }
        Phase::Pins => {
            let (units, select) = pin_units(o, &input.instances)?;
            conditions.select = select;
            units
        }
        Phase::Sweep => sweep_units(o, &input.instances)?,
    };
    if units.is_empty() {
        return Ok(None);
    }
    let stagger_ms = o.stagger.map(|s| s.as_millis() as u64);
    let out = absolute(&p.out);
    let (db, results, exe) = (absolute(&o.db), absolute(&p.results), absolute(&p.reprorun));
    let files = PlanFiles {
        pipeline: "reproduce",
        out: &out,
        results: &results,
        db: &db,
        reprorun: &exe,
        sbatch_args: &p.sbatch_args,
        chunk_format: CHUNK_FORMAT,
        chunk: p.chunk,
        by_idx: p.spread_hosts || stagger_ms.is_some(),
        stagger_ms,
    };
    let (instances_sha256, predictions_sha256) =
        (digest_of(&o.instances)?, digest_of(&o.predictions)?);
    let manifest = write_plan(&files, &units, |chunks| Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: env!("CARGO_PKG_VERSION").into(),
        db: db.clone(),
        results: results.clone(),
        k: o.k,
        arms: arms.iter().map(|a| a.name()).collect(),
        instances_sha256,
        predictions_sha256,
        options_fingerprint: o.conditions.fingerprint(),
        conditions: CondSpec::of(&conditions),
        stagger_ms,
        spread_hosts: p.spread_hosts,
        phase: p.phase,
        instances: input.instances,
        without_prediction: input.without_prediction,
        chunks,
    })?
    .map_err(ClusterError::Usage)?;
    Ok(Some(manifest))
}
