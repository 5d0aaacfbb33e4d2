//! `reprorun reproduce merge`: the study database's one writer. Every result file is
//! checked against the plan first (its manifest digest, its unit, its logs' digests); one
//! that fails is refused and nothing is merged. Then each run is inserted exactly once: a
//! second result for a run already recorded (a requeued task) goes to `attempts`, a result
//! already merged adds nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::{key, read_err, ClusterError, Shard, Tasks, Unit, SHARD_FORMAT};
use crate::store::{Store, StoreError};
use reprorun_pipeline::cluster::{self, LogDir};
use reprorun_pipeline::store::sha256_hex;

/// `merge`'s options.
#[derive(Debug, Clone)]
pub(crate) struct MergeOptions {
    pub tasks: PathBuf,
    pub results: PathBuf,
    pub db: PathBuf,
}

/// What a merge did, and what is still to run.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Merged {
    /// Runs recorded by this merge.
    pub inserted: u32,
    /// Results of runs already recorded, kept in `attempts`.
    pub attempts: u32,
    /// Results merged before (nothing added).
    pub already: u32,
    /// Planned runs recorded in the database, of `planned`.
    pub recorded: u32,
    pub planned: u32,
    /// Array indices (chunks) with a run not yet recorded.
    pub missing_chunks: Vec<u32>,
}

const CLUSTER_SQL: &str = "
CREATE TABLE IF NOT EXISTS hosts (
    instance_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    idx INTEGER NOT NULL,
    shard_sha256 TEXT NOT NULL,
    hostname TEXT NOT NULL,
    kernel TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cpus INTEGER NOT NULL,
    mem_bytes INTEGER NOT NULL,
    os TEXT NOT NULL,
    machine_id TEXT NOT NULL,
    reprorun_version TEXT NOT NULL,
    job TEXT NOT NULL,
    PRIMARY KEY (instance_id, arm, idx)
);
CREATE INDEX IF NOT EXISTS hosts_shard ON hosts (shard_sha256);
CREATE TABLE IF NOT EXISTS attempts (
    shard_sha256 TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL,
    arm TEXT NOT NULL,
    idx INTEGER NOT NULL,
    shard TEXT NOT NULL
);
";

/// A result file that passed the checks.
struct Checked {
    path: PathBuf,
    digest: String,
    text: String,
    shard: Shard,
}

/// Why the result file `name` (with `text`) is not a result of this plan, if it is not.
pub(crate) fn check(
    tasks: &Tasks,
    units: &BTreeMap<String, (u32, Unit)>,
    results: &Path,
    name: &str,
    text: &str,
) -> Result<Shard, String> {
    let shard: Shard = serde_json::from_str(text).map_err(|e| format!("not a result file: {e}"))?;
    let r = &shard.row;
    cluster::check_result(
        cluster::ResultHead {
            format: &shard.format,
            manifest_sha256: &shard.manifest_sha256,
            key: &shard.key,
            chunk: shard.chunk,
            row_key: key(&r.instance_id, r.arm, r.idx),
            row_name: format!("run ({} {} #{})", r.instance_id, r.arm.name(), r.idx),
        },
        SHARD_FORMAT,
        &tasks.digest,
        |k| units.get(k).map(|(c, _)| *c),
        name,
        &LogDir(results.join("logs")),
        &logs_of(&shard),
    )?;
    Ok(shard)
}

fn logs_of(s: &Shard) -> Vec<&str> {
    let r = &s.row;
    let mut v = vec![r.stdout_sha256.as_str(), r.stderr_sha256.as_str()];
    v.extend(r.junit_sha256.as_deref());
    v
}

/// Every result file under `results/runs`, checked; the first that fails refuses all.
fn read_results(
    tasks: &Tasks,
    units: &BTreeMap<String, (u32, Unit)>,
    results: &Path,
) -> Result<Vec<Checked>, ClusterError> {
    let dir = results.join("runs");
    let names = cluster::result_names(results)?;
    let mut out = Vec::new();
    for name in names {
        let path = dir.join(&name);
        let text = std::fs::read_to_string(&path).map_err(read_err(&path))?;
        let shard =
            check(tasks, units, results, &name, &text).map_err(|reason| ClusterError::Refused {
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
    // The first result of a run is the run; later ones are attempts.
    out.sort_by(|a, b| {
        (
            &a.shard.key,
            a.shard.row.started_at,
            a.shard.finished_at,
            &a.path,
        )
            .cmp(&(
                &b.shard.key,
                b.shard.row.started_at,
                b.shard.finished_at,
                &b.path,
            ))
    });
    Ok(out)
}

/// Where one checked result goes.
fn merge_one(
    store: &Store,
    results: &Path,
    c: &Checked,
    m: &mut Merged,
    copied: &mut bool,
) -> Result<(), StoreError> {
    let err = |e: rusqlite::Error| StoreError::Db(reprorun_pipeline::store::Db::err(store)(e));
    let conn = store.conn();
    let seen = conn
        .prepare_cached(
            "SELECT 1 FROM hosts WHERE shard_sha256 = ?1 UNION SELECT 1 FROM attempts WHERE shard_sha256 = ?1",
        )
        .and_then(|mut st| st.query_row(params![c.digest], |_| Ok(())).optional())
        .map_err(err)?
        .is_some();
    if seen {
        m.already += 1;
        return Ok(());
    }
    for d in logs_of(&c.shard) {
        // Checked above; hashed again as stored.
        *copied |= store.adopt_log(&results.join("logs").join(d), d)?;
    }
    let r = &c.shard.row;
    if store.has_run(&r.instance_id, r.arm, r.idx)? {
        conn.execute(
            "INSERT OR IGNORE INTO attempts VALUES (?1, ?2, ?3, ?4, ?5)",
            params![c.digest, r.instance_id, r.arm.name(), r.idx, c.text],
        )
        .map_err(err)?;
        m.attempts += 1;
    } else {
        store.insert(r)?;
        let h = &c.shard.host;
        let mut st = conn
            .prepare_cached(
                "INSERT INTO hosts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )
            .map_err(err)?;
        st.execute(params![
            r.instance_id,
            r.arm.name(),
            r.idx,
            c.digest,
            h.hostname,
            h.kernel,
            h.cpu_model,
            h.cpus,
            h.mem_bytes as i64,
            h.os,
            h.machine_id,
            h.reprorun_version,
            h.job
        ])
        .map_err(err)?;
        m.inserted += 1;
    }
    Ok(())
}

/// Results merged per transaction: a merge killed midway keeps whole batches only (merging
/// again redoes the rest), and a batch's logs are made durable by one `syncfs` before its
/// rows commit.
const BATCH: usize = 2000;

/// Checks every result, merges those not merged, and says what is missing.
pub(crate) fn merge(o: &MergeOptions) -> Result<Merged, ClusterError> {
    let tasks = Tasks::open(&o.tasks)?;
    let units = tasks.units()?;
    let checked = read_results(&tasks, &units, &o.results)?;
    let lock = reprorun_pipeline::store::lock(&o.db)?;
    let store = Store::open(&o.db, true)?;
    store.register(&tasks.manifest.instances)?;
    store.check_options(&tasks.manifest.options_fingerprint)?;
    store.set_meta("k", &tasks.manifest.k.to_string())?;
    store
        .conn()
        .execute_batch(CLUSTER_SQL)
        .map_err(|e| StoreError::Db(reprorun_pipeline::store::Db::err(&store)(e)))?;
    let mut m = Merged::default();
    let err = |e: rusqlite::Error| StoreError::Db(reprorun_pipeline::store::Db::err(&store)(e));
    for batch in checked.chunks(BATCH) {
        let tx = store.conn().unchecked_transaction().map_err(err)?;
        let mut copied = false;
        for c in batch {
            merge_one(&store, &o.results, c, &mut m, &mut copied)?;
        }
        store.sync_logs(copied).map_err(StoreError::Db)?;
        tx.commit().map_err(err)?;
    }
    let mut recorded = Vec::new();
    for (chunk, u) in units.values() {
        recorded.push((*chunk, store.has_run(&u.instance_id, u.arm, u.idx)?));
    }
    let c = cluster::coverage(recorded);
    (m.recorded, m.planned, m.missing_chunks) = (c.recorded, c.planned, c.missing_chunks);
    drop(lock);
    Ok(m)
}

/// The summary's distinct hosts per instance (instances merged from a cluster only).
pub(crate) fn distinct_hosts(store: &Store) -> Result<BTreeMap<String, u32>, StoreError> {
    let conn = store.conn();
    let err = |e: rusqlite::Error| StoreError::Db(reprorun_pipeline::store::Db::err(store)(e));
    let has = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hosts'",
            [],
            |_| Ok(()),
        )
        .optional()
        .map_err(err)?
        .is_some();
    if !has {
        return Ok(BTreeMap::new());
    }
    let mut stmt = conn
        .prepare("SELECT instance_id, COUNT(DISTINCT hostname || '/' || machine_id) FROM hosts GROUP BY instance_id")
        .map_err(err)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))
        .map_err(err)?;
    let mut out = BTreeMap::new();
    for row in rows {
        let (id, n) = row.map_err(err)?;
        out.insert(id, n);
    }
    Ok(out)
}
