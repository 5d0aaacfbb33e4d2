//! `reprorun reproduce work`: one chunk's runs, each made as `run`'s worker makes it (a
//! worker process per run, `runner::run`), its trees and scratch in node-local `$TMPDIR`,
//! its result written as one file (temp, fsync, link: never half a file, never over
//! another) with its logs beside it. Never opens SQLite. SIGTERM: no new run starts.

use std::path::{Path, PathBuf};

use super::{ClusterError, Host, Shard, Tasks, Unit, SHARD_FORMAT};
use crate::runner::{self, RunSink};
use crate::store::StoreError;
use crate::ReproduceError;
use reprorun_pipeline::cluster::{catch_stop, scratch_dir, write_result, LogDir};
use reprorun_pipeline::pool::Pool;
use reprorun_pipeline::progress::{Progress, ProgressMode};
use reprorun_pipeline::tasks::work_units;
pub(crate) use reprorun_pipeline::tasks::Done;

/// `work`'s options.
#[derive(Debug, Clone)]
pub(crate) struct WorkOptions {
    pub tasks: PathBuf,
    pub chunk: PathBuf,
    pub results: PathBuf,
}

/// Logs into `results/logs/` (content-addressed), scratch in node-local `$TMPDIR`.
struct Sink {
    logs: LogDir,
    work: PathBuf,
}

impl RunSink for Sink {
    fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError> {
        self.logs.put(bytes).map_err(StoreError::Db)
    }

    fn work_dir(&self) -> PathBuf {
        self.work.clone()
    }
}

/// One run, made in a worker process, its result written.
fn one(
    tasks: &Tasks,
    sink: &Sink,
    chunk: u32,
    u: &Unit,
    host: &Host,
    results: &Path,
) -> Result<(), ClusterError> {
    let inst = tasks
        .instances
        .get(&u.instance_id)
        .ok_or_else(|| ClusterError::Usage(format!("unit {}: no such instance", u.key)))?;
    let row = runner::run(sink, inst, u.arm, u.idx, &tasks.conditions)
        .map_err(|e| ClusterError::Run(Box::new(e)))?;
    let shard = Shard {
        format: SHARD_FORMAT.into(),
        manifest_sha256: tasks.digest.clone(),
        key: u.key.clone(),
        chunk,
        row,
        host: host.clone(),
        finished_at: reprorun_pipeline::unix_now_ms() / 1000,
    };
    let text = serde_json::to_string_pretty(&shard).unwrap_or_default() + "\n";
    write_result(results, &u.key, text.as_bytes(), &host.job)?;
    Ok(())
}

/// Makes the chunk's runs that have no result yet.
pub(crate) fn work(o: &WorkOptions) -> Result<Done, ClusterError> {
    let tasks = Tasks::open(&o.tasks)?;
    let chunk = tasks.chunk(&o.chunk)?;
    catch_stop()?;
    let host = Host::current();
    let sink = Sink {
        logs: LogDir(o.results.join("logs")),
        work: scratch_dir(&host),
    };
    runner::check_work_dir(&sink.work).map_err(|e| ClusterError::Run(Box::new(e)))?;
    let mut progress = Progress::new(ProgressMode::for_stderr(), "runs");
    let mut pool = Pool {
        workers: 1,
        close_in_worker: Vec::new(),
        progress: &mut progress,
    };
    let (done, result) = work_units(
        &chunk.units,
        &o.results,
        |u| &u.key,
        |u| {
            pool.run(
                vec![u.clone()],
                |_| 0,
                |u| format!("{} {} #{}", u.instance_id, u.arm.name(), u.idx),
                |u| one(&tasks, &sink, chunk.index, u, &host, &o.results),
            )
        },
    );
    progress.finish();
    // Trees and scratch are the node's, and of this task only.
    let _ = std::fs::remove_dir_all(&sink.work);
    result.map_err(|e| ClusterError::Run(Box::new(ReproduceError::Worker(e))))?;
    Ok(done)
}
