//! `reprorun audit merge` of an `audit plan`: every result checked against the plan (the
//! first that fails refuses all), then each run recorded exactly once.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::{key, RunError, Shard, Tasks, Unit, SHARD_FORMAT};
use crate::run::store::{RunRow, Store};
use reprorun_pipeline::cluster::{self, LogDir};
use reprorun_pipeline::store::sha256_hex;

/// What a merge did, and what is still to run.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Merged {
    pub inserted: u32,
    pub attempts: u32,
    pub already: u32,
    #[serde(flatten)]
    pub coverage: cluster::Coverage,
}

const CLUSTER_SQL: &str = "
CREATE TABLE IF NOT EXISTS run_hosts (
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
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
    PRIMARY KEY (group_id, repeat)
);
CREATE INDEX IF NOT EXISTS run_hosts_shard ON run_hosts (shard_sha256);
CREATE TABLE IF NOT EXISTS run_attempts (
    shard_sha256 TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    shard TEXT NOT NULL
);
";

fn logs_of(r: &RunRow) -> Vec<&str> {
    let mut v = vec![r.stdout_sha256.as_str(), r.stderr_sha256.as_str()];
    v.extend(r.findings_sha256.as_deref());
    v.extend(r.raw_sha256.as_deref());
    v
}

/// Why result file `name` (with `text`) is not a result of this plan, if it is not.
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
            row_key: key(&r.group_id, r.repeat),
            row_name: format!("run ({} #{})", r.group_id, r.repeat),
        },
        SHARD_FORMAT,
        &tasks.digest,
        |k| units.get(k).map(|(c, _)| *c),
        name,
        &LogDir(results.join("logs")),
        &logs_of(r),
    )?;
    Ok(shard)
}

/// One checked result into the study: the run, an attempt, or nothing (merged before).
fn merge_one(
    store: &Store,
    results: &Path,
    text: &str,
    shard: &Shard,
    m: &mut Merged,
) -> Result<(), RunError> {
    let db = &store.db;
    let digest = sha256_hex(text.as_bytes());
    let seen = db
        .conn()
        .query_row(
            "SELECT 1 FROM run_hosts WHERE shard_sha256 = ?1 UNION SELECT 1 FROM run_attempts WHERE shard_sha256 = ?1",
            params![digest],
            |_| Ok(()),
        )
        .optional()
        .map_err(db.err())?
        .is_some();
    if seen {
        m.already += 1;
        return Ok(());
    }
    let r = &shard.row;
    let logs = LogDir(results.join("logs"));
    for d in logs_of(r) {
        // Checked above; read again so what is stored is what is read now.
        let bytes = logs.check(d).map_err(|reason| RunError::Refused {
            path: results.join("logs").join(d),
            reason: format!("changed while merging: {reason}"),
        })?;
        db.put_log(&bytes)?;
    }
    let tx = db.conn().unchecked_transaction().map_err(db.err())?;
    if store.has_run(&r.group_id, r.repeat)? {
        tx.execute(
            "INSERT OR IGNORE INTO run_attempts VALUES (?1, ?2, ?3, ?4)",
            params![digest, r.group_id, r.repeat, text],
        )
        .map_err(db.err())?;
        m.attempts += 1;
    } else {
        store.insert(r)?;
        let h = &shard.host;
        tx.execute(
            "INSERT INTO run_hosts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                r.group_id,
                r.repeat,
                digest,
                h.hostname,
                h.kernel,
                h.cpu_model,
                h.cpus,
                h.mem_bytes as i64,
                h.os,
                h.machine_id,
                h.reprorun_version,
                h.job
            ],
        )
        .map_err(db.err())?;
        m.inserted += 1;
    }
    tx.commit().map_err(db.err())?;
    Ok(())
}

/// Checks every result (the first that fails refuses all), merges those not merged, sets
/// the study meta, and says what is missing.
pub(crate) fn merge(tasks_dir: &Path, results: &Path, db: &Path) -> Result<Merged, RunError> {
    let tasks = Tasks::open(tasks_dir)?;
    let units = tasks.units()?;
    let mut checked = Vec::new();
    for name in cluster::result_names(results)? {
        let path = results.join("runs").join(&name);
        let text = std::fs::read_to_string(&path).map_err(cluster::read_err(&path))?;
        let shard = check(&tasks, &units, results, &name, &text)
            .map_err(|reason| RunError::Refused { path, reason })?;
        checked.push((text, shard));
    }
    // The first result of a run is the run; later ones are attempts.
    checked.sort_by(|(_, a), (_, b)| {
        (&a.key, a.row.started_at, a.finished_at).cmp(&(&b.key, b.row.started_at, b.finished_at))
    });
    let lock = reprorun_pipeline::store::lock(db)?;
    let store = Store::open(db, true)?;
    store
        .db
        .check_options(&tasks.manifest.options_fingerprint)?;
    store
        .db
        .set_meta("corpus", &tasks.manifest.corpus.to_string_lossy())?;
    store.db.set_meta("agent", &tasks.manifest.agent)?;
    store
        .db
        .conn()
        .execute_batch(CLUSTER_SQL)
        .map_err(store.db.err())?;
    let mut m = Merged::default();
    for (text, shard) in &checked {
        merge_one(&store, results, text, shard, &mut m)?;
    }
    let mut recorded = Vec::new();
    for (chunk, u) in units.values() {
        recorded.push((*chunk, store.has_run(&u.group_id, u.repeat)?));
    }
    m.coverage = cluster::coverage(recorded);
    drop(lock);
    Ok(m)
}
