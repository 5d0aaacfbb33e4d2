//! `reprorun reproduce work`: one chunk's runs, each made as `run`'s worker makes it (a
//! worker process per run, `runner::run`), its trees and scratch in node-local `$TMPDIR`,
//! its result written as one file (temp, fsync, link: never half a file, never over
//! another) with its logs beside it. Never opens SQLite. SIGTERM: no new run starts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use super::{write_err, ClusterError, Host, Shard, Tasks, Unit, SHARD_FORMAT};
use crate::pipeline::pool::Pool;
use crate::pipeline::progress::{Progress, ProgressMode};
use crate::pipeline::store::sha256_hex;
use crate::reproduce::runner::{self, RunSink};
use crate::reproduce::store::StoreError;
use crate::reproduce::ReproduceError;

/// `work`'s options.
#[derive(Debug, Clone)]
pub(crate) struct WorkOptions {
    pub tasks: PathBuf,
    pub chunk: PathBuf,
    pub results: PathBuf,
}

/// What a `work` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Done {
    pub ran: u32,
    /// Units whose result was already there.
    pub skipped: u32,
    /// A SIGTERM or SIGINT came: the units after it were not started.
    pub stopped: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn catch_stop() -> Result<(), ClusterError> {
    let act = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &act) }.map_err(ClusterError::Signal)?;
    }
    Ok(())
}

/// Logs into `results/logs/` (content-addressed), scratch in node-local `$TMPDIR`.
struct Sink {
    logs: PathBuf,
    work: PathBuf,
}

impl RunSink for Sink {
    fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let digest = sha256_hex(bytes);
        let path = self.logs.join(&digest);
        if !path.exists() {
            std::fs::create_dir_all(&self.logs)
                .and_then(|()| crate::sys::write_atomic(&path, bytes, 0o644))
                .map_err(|source| {
                    StoreError::Db(crate::pipeline::store::StoreError::Log { path, source })
                })?;
        }
        Ok(digest)
    }

    fn work_dir(&self) -> PathBuf {
        self.work.clone()
    }
}

/// Where the result of `key` goes.
pub(crate) fn result_path(results: &Path, key: &str) -> PathBuf {
    results.join("runs").join(format!("{key}.json"))
}

/// Writes a result file without ever replacing one: to `runs/KEY.json`, or, when that is
/// there (a requeued task that ran the same unit again), beside it as
/// `runs/KEY.JOB.MS.json`, which `merge` records as an attempt.
pub(crate) fn write_result(
    results: &Path,
    key: &str,
    bytes: &[u8],
    job: &str,
) -> Result<PathBuf, ClusterError> {
    let dir = results.join("runs");
    std::fs::create_dir_all(&dir).map_err(write_err(&dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{key}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(write_err(&dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(write_err(tmp.path()))?;
    let mut target = result_path(results, key);
    if let Err(e) = std::fs::hard_link(tmp.path(), &target) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(write_err(&target)(e));
        }
        let job = crate::pipeline::unit::file_name_part(job);
        let ms = crate::pipeline::unix_now_ms();
        target = dir.join(format!("{key}.{job}.{ms}.json"));
        std::fs::hard_link(tmp.path(), &target).map_err(write_err(&target))?;
    }
    // The name is durable once the directory is.
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err(&dir))?;
    Ok(target)
}

/// Node-local scratch: `$TMPDIR` (else /tmp), never the shared filesystem.
fn scratch_dir(host: &Host) -> PathBuf {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(format!(
        "reprorun-work-{}-{}",
        crate::pipeline::unit::file_name_part(&host.job),
        std::process::id()
    ))
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
        finished_at: crate::pipeline::unix_now_ms() / 1000,
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
        logs: o.results.join("logs"),
        work: scratch_dir(&host),
    };
    runner::check_work_dir(&sink.work).map_err(|e| ClusterError::Run(Box::new(e)))?;
    let mut progress = Progress::new(ProgressMode::for_stderr(), "runs");
    let mut pool = Pool {
        workers: 1,
        close_in_worker: Vec::new(),
        progress: &mut progress,
    };
    let mut done = Done::default();
    let mut result = Ok(());
    for u in &chunk.units {
        if STOP.load(Ordering::SeqCst) {
            done.stopped = true;
            break;
        }
        if result_path(&o.results, &u.key).exists() {
            done.skipped += 1;
            continue;
        }
        result = pool.run(
            vec![u.clone()],
            |_| 0,
            |u| format!("{} {} #{}", u.instance_id, u.arm.name(), u.idx),
            |u| one(&tasks, &sink, chunk.index, u, &host, &o.results),
        );
        if result.is_err() {
            break;
        }
        done.ran += 1;
    }
    progress.finish();
    // Trees and scratch are the node's, and of this task only.
    let _ = std::fs::remove_dir_all(&sink.work);
    result.map_err(|e| ClusterError::Run(Box::new(ReproduceError::Worker(e))))?;
    done.stopped |= STOP.load(Ordering::SeqCst);
    Ok(done)
}
