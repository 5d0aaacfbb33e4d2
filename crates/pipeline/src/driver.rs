//! The one plan/work/merge driver every pipeline's cluster verbs run (`spec/cluster.md`).
//! A pipeline says what its unit is, the unit's key, the row a result records and its
//! tables ([`Pipeline`]); the driver does the rest: cutting the units into chunks and
//! writing them with the manifest and the sbatch scripts ([`write_plan`]), running a chunk
//! and writing each result ([`Worker`]), and the merge ([`merge`]): every result checked
//! against the plan first (the first foreign one refuses all), then recorded exactly once,
//! a second result of a unit kept as an attempt, a result merged before adding nothing, in
//! batches of one transaction each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::OptionalExtension;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::cluster::{self, ChunkRef, FileError, Indexed, LogDir};
use super::host::Host;
use super::pool::{Pool, PoolError};
use super::progress::Progress;
use super::store::{sha256_hex, Db, LockError, StoreError};
use super::tasks::{work_units, Done};

/// What stops a merge in the driver's own steps; pipelines wrap it transparently.
#[derive(Debug, Error)]
pub enum MergeError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("{path}: refused: {reason}; nothing was merged (remove the file, or run its chunk again, and merge again)")]
    Refused { path: PathBuf, reason: String },
}

/// `results/runs/KEY.json` of any pipeline: the head every merge checks, the pipeline's
/// body (its row or rows, as fields of the same object), the host and the time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shard<B> {
    pub format: String,
    /// sha256 of the `manifest.json` the unit came from.
    pub manifest_sha256: String,
    pub key: String,
    pub chunk: u32,
    #[serde(flatten)]
    pub body: B,
    pub host: Host,
    /// When the result was written, Unix seconds.
    pub finished_at: i64,
}

/// Which facts of the host a pipeline's hosts table keeps, after the unit's key columns
/// and `shard_sha256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostColumns {
    /// hostname, kernel, cpu_model, cpus, mem_bytes, os, machine_id, reprorun_version, job.
    Full,
    /// hostname, machine_id, job.
    Short,
}

/// A pipeline's cluster tables: `hosts` (key columns, `shard_sha256`, the host) records
/// where each unit ran; `attempts` (`shard_sha256`, key columns, `shard`) keeps second
/// results.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    /// `CREATE TABLE IF NOT EXISTS` of both (and their indices).
    pub sql: &'static str,
    pub hosts: &'static str,
    pub attempts: &'static str,
    /// How many key columns the unit's identity fills ([`Pipeline::columns`]).
    pub keys: usize,
    pub host_columns: HostColumns,
}

/// What a pipeline supplies to the driver: its unit, the unit's key, the row a result
/// records and its tables. Implemented by the pipeline's plan as read back (`tasks/`).
pub trait Pipeline {
    /// A planned unit, as the chunk files hold it.
    type Unit;
    /// What a result holds beyond its head (see [`Shard`]).
    type Body: Serialize + DeserializeOwned;
    /// The unit's identity in the tables (what the key columns hold).
    type Id;
    /// The study database as the pipeline opens it.
    type Store;
    type Error: From<MergeError>;

    /// `results/runs/KEY.json`'s format.
    const RESULT_FORMAT: &'static str;
    const TABLES: Tables;

    /// sha256 of the plan's manifest.
    fn digest(&self) -> &str;
    fn unit_id(&self, u: &Self::Unit) -> Self::Id;
    fn body_id(b: &Self::Body) -> Self::Id;
    /// The unit key (a file name) of an identity.
    fn key(id: &Self::Id) -> String;
    /// How a result names itself in a message (`run (g #0)`).
    fn name(b: &Self::Body) -> String;
    /// The key columns' values.
    fn columns(id: &Self::Id) -> Vec<Value>;
    /// The digests of the logs a result names (all in `results/logs/`).
    fn logs(b: &Self::Body) -> Vec<&str>;
    /// When the unit started, if the body says: of two results of a unit, the earlier is
    /// the one recorded.
    fn started_at(_: &Self::Body) -> i64 {
        0
    }
    /// The pipeline's own checks of a result beyond the driver's.
    fn check(&self, _: &Self::Body, _: &LogDir) -> Result<(), String> {
        Ok(())
    }
    /// Opens the study database for a merge (created or not, its meta checked and set).
    fn open_store(&self, db: &Path) -> Result<Self::Store, Self::Error>;
    fn db(store: &Self::Store) -> &Db;
    fn recorded(store: &Self::Store, id: &Self::Id) -> Result<bool, Self::Error>;
    /// Records a result's rows (inside the driver's transaction).
    fn record(store: &Self::Store, b: &Self::Body) -> Result<(), Self::Error>;
}

/// How `plan` cuts units into chunks, and where it writes them.
pub struct PlanFiles<'a> {
    /// The `reprorun` subcommand whose `work` and `merge` the scripts run.
    pub pipeline: &'a str,
    /// The tasks directory (absolute).
    pub out: &'a Path,
    pub results: &'a Path,
    pub db: &'a Path,
    pub reprorun: &'a Path,
    pub sbatch_args: &'a str,
    pub chunk_format: &'a str,
    /// Units per chunk (default: as few as keep the array under 1000 tasks).
    pub chunk: Option<u32>,
    /// A chunk never holds two run indices.
    pub by_idx: bool,
    pub stagger_ms: Option<u64>,
}

/// Cuts `units` into chunks, makes the manifest from their references, writes the chunk
/// files, the manifest and the sbatch scripts. `Ok(Err(why))`: `out` holds another plan.
pub fn write_plan<U: Indexed + Clone + Serialize, M: Serialize>(
    p: &PlanFiles,
    units: &[U],
    manifest: impl FnOnce(Vec<ChunkRef>) -> M,
) -> Result<Result<M, String>, FileError> {
    let chunks = cluster::layout(units, p.chunk, p.by_idx, p.stagger_ms);
    let (files, refs) = cluster::chunk_texts(p.out, cluster::numbered(p.chunk_format, chunks));
    let m = manifest(refs.clone());
    let text = serde_json::to_string_pretty(&m).unwrap_or_default() + "\n";
    if let Err(why) = cluster::write_plan(p.out, &files, &text)? {
        return Ok(Err(why));
    }
    cluster::Scripts {
        pipeline: p.pipeline,
        tasks: p.out,
        results: p.results,
        db: p.db,
        reprorun: p.reprorun,
    }
    .write(&refs, p.sbatch_args)?;
    Ok(Ok(m))
}

/// One array task's side of `work`: SIGTERM caught, the host, node-local scratch, the
/// logs directory, and each result written as one file.
pub struct Worker<'a> {
    pub host: Host,
    /// Node-local scratch, removed by [`Worker::run`] when the chunk is done.
    pub scratch: PathBuf,
    pub logs: LogDir,
    results: &'a Path,
    digest: &'a str,
    chunk: u32,
    format: &'static str,
}

impl<'a> Worker<'a> {
    /// Catches SIGTERM (no new unit starts after it) and finds the host and scratch.
    pub fn start(
        results: &'a Path,
        digest: &'a str,
        chunk: u32,
        format: &'static str,
    ) -> Result<Worker<'a>, FileError> {
        cluster::catch_stop()?;
        let host = Host::current();
        Ok(Worker {
            scratch: cluster::scratch_dir(&host),
            host,
            logs: LogDir(results.join("logs")),
            results,
            digest,
            chunk,
            format,
        })
    }

    /// Writes unit `key`'s result (temp, fsync, link: never half a file, never over
    /// another).
    pub fn write<B: Serialize>(&self, key: &str, body: B) -> Result<(), FileError> {
        let shard = Shard {
            format: self.format.into(),
            manifest_sha256: self.digest.into(),
            key: key.into(),
            chunk: self.chunk,
            body,
            host: self.host.clone(),
            finished_at: super::unix_now_ms() / 1000,
        };
        let text = serde_json::to_string_pretty(&shard).unwrap_or_default() + "\n";
        cluster::write_result(self.results, key, text.as_bytes(), &self.host.job)?;
        Ok(())
    }

    /// `one` on each unit without a result, `jobs` at a time, each in a worker process of
    /// its own with its share of the task's CPUs ([`Pool`]), until the first error or a stop
    /// signal (the units in flight finish); then the scratch is removed. With `jobs` 1 the
    /// units run one after another, in order.
    pub fn run_jobs<U: Clone, E: std::fmt::Display>(
        &self,
        units: &[U],
        jobs: usize,
        progress: &mut Progress,
        key: impl Fn(&U) -> &str,
        label: impl Fn(&U) -> String,
        one: impl Fn(&U) -> Result<(), E>,
    ) -> (Done, Result<(), PoolError>) {
        let mut done = Done::default();
        let mut pending = Vec::new();
        for u in units {
            if cluster::result_path(self.results, key(u)).exists() {
                done.skipped += 1;
            } else {
                pending.push(u.clone());
            }
        }
        let mut pool = Pool {
            workers: jobs.max(1),
            close_in_worker: Vec::new(),
            progress,
        };
        let result = pool.run_until(pending.clone(), |_| 0, label, one, cluster::stopped);
        done.ran = pending
            .iter()
            .filter(|u| cluster::result_path(self.results, key(u)).exists())
            .count() as u32;
        done.stopped = cluster::stopped();
        // Trees and scratch are the node's, and of this task only.
        let _ = std::fs::remove_dir_all(&self.scratch);
        (done, result)
    }

    /// `one` on each unit without a result, in order, until the first error or a stop
    /// signal; then the scratch is removed.
    pub fn run<U, E>(
        &self,
        units: &[U],
        key: impl Fn(&U) -> &str,
        one: impl FnMut(&U) -> Result<(), E>,
    ) -> (Done, Result<(), E>) {
        let out = work_units(units, self.results, key, one);
        // Trees and scratch are the node's, and of this task only.
        let _ = std::fs::remove_dir_all(&self.scratch);
        out
    }
}

/// What a merge did, and what is still to run.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Merged {
    /// Units recorded by this merge.
    pub inserted: u32,
    /// Results of units already recorded, kept in the attempts table.
    pub attempts: u32,
    /// Results merged before (nothing added).
    pub already: u32,
    #[serde(flatten)]
    pub coverage: cluster::Coverage,
}

/// A result file that passed the checks.
pub struct Checked<B> {
    pub path: PathBuf,
    pub digest: String,
    pub text: String,
    pub shard: Shard<B>,
}

/// Why result file `name` (with `text`) is not a result of `p`'s plan (whose units are
/// `units`: key → chunk), if it is not.
pub fn check<P: Pipeline>(
    p: &P,
    units: &BTreeMap<String, (u32, P::Unit)>,
    results: &Path,
    name: &str,
    text: &str,
) -> Result<Shard<P::Body>, String> {
    let shard: Shard<P::Body> =
        serde_json::from_str(text).map_err(|e| format!("not a result file: {e}"))?;
    let logs = LogDir(results.join("logs"));
    cluster::check_result(
        cluster::ResultHead {
            format: &shard.format,
            manifest_sha256: &shard.manifest_sha256,
            key: &shard.key,
            chunk: shard.chunk,
            row_key: P::key(&P::body_id(&shard.body)),
            row_name: P::name(&shard.body),
        },
        P::RESULT_FORMAT,
        p.digest(),
        |k| units.get(k).map(|(c, _)| *c),
        name,
        &logs,
        &P::logs(&shard.body),
    )?;
    p.check(&shard.body, &logs)?;
    Ok(shard)
}

/// Every result file under `results/runs`, checked (the first that fails refuses all), in
/// the order they are recorded: by unit, the earliest first.
pub fn read_results<P: Pipeline>(
    p: &P,
    units: &BTreeMap<String, (u32, P::Unit)>,
    results: &Path,
) -> Result<Vec<Checked<P::Body>>, MergeError> {
    let dir = results.join("runs");
    let mut out = Vec::new();
    for name in cluster::result_names(results)? {
        let path = dir.join(&name);
        let text = std::fs::read_to_string(&path).map_err(cluster::read_err(&path))?;
        let shard =
            check(p, units, results, &name, &text).map_err(|reason| MergeError::Refused {
                path: path.clone(),
                reason,
            })?;
        out.push(Checked {
            digest: sha256_hex(text.as_bytes()),
            path,
            text,
            shard,
        });
    }
    // The first result of a unit is the unit; later ones are attempts.
    out.sort_by(|a, b| {
        let at = |c: &Checked<P::Body>| (P::started_at(&c.shard.body), c.shard.finished_at);
        (&a.shard.key, at(a), &a.path).cmp(&(&b.shard.key, at(b), &b.path))
    });
    Ok(out)
}

/// Results merged per transaction: a merge killed midway keeps whole batches only (merging
/// again redoes the rest), and a batch's logs are made durable by one `syncfs` before its
/// rows commit.
const BATCH: usize = 2000;

/// The SQL of the tables' three statements.
struct Sql {
    seen: String,
    attempt: String,
    host: String,
}

impl Sql {
    fn of(t: &Tables) -> Sql {
        let keys = t.keys;
        let marks = |n: usize| {
            (1..=n)
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let host = match t.host_columns {
            HostColumns::Full => 9,
            HostColumns::Short => 3,
        };
        Sql {
            seen: format!(
                "SELECT 1 FROM {h} WHERE shard_sha256 = ?1 UNION SELECT 1 FROM {a} WHERE shard_sha256 = ?1",
                h = t.hosts,
                a = t.attempts
            ),
            attempt: format!(
                "INSERT OR IGNORE INTO {} VALUES ({})",
                t.attempts,
                marks(keys + 2)
            ),
            host: format!(
                "INSERT OR REPLACE INTO {} VALUES ({})",
                t.hosts,
                marks(keys + 1 + host)
            ),
        }
    }
}

fn host_values(h: &Host, c: HostColumns) -> Vec<Value> {
    let s = |v: &str| Value::Text(v.to_string());
    match c {
        HostColumns::Full => vec![
            s(&h.hostname),
            s(&h.kernel),
            s(&h.cpu_model),
            Value::Integer(i64::from(h.cpus)),
            Value::Integer(h.mem_bytes as i64),
            s(&h.os),
            s(&h.machine_id),
            s(&h.reprorun_version),
            s(&h.job),
        ],
        HostColumns::Short => vec![s(&h.hostname), s(&h.machine_id), s(&h.job)],
    }
}

/// Where one checked result goes: nothing (merged before), an attempt, or the unit.
fn merge_one<P: Pipeline>(
    store: &P::Store,
    sql: &Sql,
    results: &Path,
    c: &Checked<P::Body>,
    m: &mut Merged,
    copied: &mut bool,
) -> Result<(), P::Error> {
    let db = P::db(store);
    let err = |e| MergeError::Store(db.err()(e));
    let conn = db.conn();
    let seen = conn
        .prepare_cached(&sql.seen)
        .and_then(|mut st| st.query_row([&c.digest], |_| Ok(())).optional())
        .map_err(err)?
        .is_some();
    let id = P::body_id(&c.shard.body);
    let recorded = P::recorded(store, &id)?;
    if seen && recorded {
        m.already += 1;
        return Ok(());
    }
    for d in P::logs(&c.shard.body) {
        // Checked above; hashed again as stored.
        *copied |= db
            .adopt_log(&results.join("logs").join(d), d)
            .map_err(MergeError::from)?;
    }
    let keys = P::columns(&id);
    if recorded {
        let mut values = vec![Value::Text(c.digest.clone())];
        values.extend(keys);
        values.push(Value::Text(c.text.clone()));
        conn.prepare_cached(&sql.attempt)
            .and_then(|mut st| st.execute(rusqlite::params_from_iter(values)))
            .map_err(err)?;
        m.attempts += 1;
    } else {
        let mut values = keys;
        values.push(Value::Text(c.digest.clone()));
        values.extend(host_values(&c.shard.host, P::TABLES.host_columns));
        // The host first: one transaction holds both.
        conn.prepare_cached(&sql.host)
            .and_then(|mut st| st.execute(rusqlite::params_from_iter(values)))
            .map_err(err)?;
        P::record(store, &c.shard.body)?;
        m.inserted += 1;
    }
    Ok(())
}

/// `merge`: checks every result (the first that fails refuses all, before the database is
/// touched), records those not recorded in batches, and says what is missing.
pub fn merge<P: Pipeline>(
    p: &P,
    units: &BTreeMap<String, (u32, P::Unit)>,
    results: &Path,
    db: &Path,
) -> Result<Merged, P::Error> {
    let checked = read_results(p, units, results)?;
    let lock = super::store::lock(db).map_err(MergeError::from)?;
    let store = p.open_store(db)?;
    let d = P::db(&store);
    let err = |e| MergeError::Store(d.err()(e));
    d.conn().execute_batch(P::TABLES.sql).map_err(err)?;
    let sql = Sql::of(&P::TABLES);
    let mut m = Merged::default();
    for batch in checked.chunks(BATCH) {
        let tx = d.conn().unchecked_transaction().map_err(err)?;
        let mut copied = false;
        for c in batch {
            merge_one::<P>(&store, &sql, results, c, &mut m, &mut copied)?;
        }
        d.sync_logs(copied).map_err(MergeError::from)?;
        tx.commit().map_err(err)?;
    }
    let mut recorded = Vec::new();
    for (chunk, u) in units.values() {
        recorded.push((*chunk, P::recorded(&store, &p.unit_id(u))?));
    }
    m.coverage = cluster::coverage(recorded);
    drop(lock);
    Ok(m)
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
