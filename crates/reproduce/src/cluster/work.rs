//! `reprorun reproduce work`: one chunk's runs, each made as `run`'s worker makes it (a
//! worker process per run, `runner::run`), its trees and scratch in node-local `$TMPDIR`,
//! its result written as one file (temp, fsync, link: never half a file, never over
//! another) with its logs beside it. Never opens SQLite. SIGTERM: no new run starts.

use std::path::PathBuf;

use super::merge::Body;
use super::{ClusterError, Tasks, Unit, SHARD_FORMAT};
use crate::runner::{self, RunSink};
use crate::store::StoreError;
use crate::ReproduceError;
use reprorun_pipeline::cluster::LogDir;
use reprorun_pipeline::driver::Worker;
use reprorun_pipeline::progress::{Progress, ProgressMode};
pub(crate) use reprorun_pipeline::tasks::Done;

/// `work`'s options.
#[derive(Debug, Clone)]
pub(crate) struct WorkOptions {
    pub tasks: PathBuf,
    pub chunk: PathBuf,
    pub results: PathBuf,
    /// Runs made at a time.
    pub jobs: usize,
}

/// Logs into `results/logs/` (content-addressed), scratch in node-local `$TMPDIR`.
struct Sink<'a> {
    logs: &'a LogDir,
    work: PathBuf,
}

impl RunSink for Sink<'_> {
    fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.logs.put(bytes).map_err(StoreError::Db)
    }

    fn work_dir(&self) -> PathBuf {
        self.work.clone()
    }
}

/// One run, made in a worker process, its result written.
fn one(tasks: &Tasks, sink: &Sink, u: &Unit, worker: &Worker) -> Result<(), ClusterError> {
    let inst = tasks
        .instances
        .get(&u.instance_id)
        .ok_or_else(|| ClusterError::Usage(format!("unit {}: no such instance", u.key)))?;
    let row = runner::run(sink, inst, u.arm, u.idx, &tasks.conditions)
        .map_err(|e| ClusterError::Run(Box::new(e)))?;
    worker.write(&u.key, Body { row })?;
    Ok(())
}

/// Makes the chunk's runs that have no result yet.
pub(crate) fn work(o: &WorkOptions) -> Result<Done, ClusterError> {
    let tasks = Tasks::open(&o.tasks)?;
    let chunk = tasks.chunk(&o.chunk)?;
    let worker = Worker::start(&o.results, &tasks.digest, chunk.index, SHARD_FORMAT)?;
    let sink = Sink {
        logs: &worker.logs,
        work: worker.scratch.clone(),
    };
    crate::tree::check_work_dir(&sink.work).map_err(|e| ClusterError::Run(Box::new(e)))?;
    let mut progress = Progress::new(ProgressMode::for_stderr(), "runs");
    let (done, result) = worker.run_jobs(
        &chunk.units,
        o.jobs,
        &mut progress,
        |u| &u.key,
        |u| format!("{} {} #{}", u.instance_id, u.arm.name(), u.idx),
        |u| one(&tasks, &sink, u, &worker),
    );
    progress.finish();
    result.map_err(|e| ClusterError::Run(Box::new(ReproduceError::Worker(e))))?;
    Ok(done)
}
