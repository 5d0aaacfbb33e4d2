//! `reprorun audit merge` of an `audit plan`: what the driver needs of an audit run (its
//! unit, key, row and tables); the driver checks every result against the plan (the first
//! that fails refuses all), then records each run exactly once.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

use super::{key, RunError, Tasks, Unit, SHARD_FORMAT};
use crate::run::store::{RunRow, Store};
use reprorun_pipeline::driver::{self, HostColumns, Pipeline, Tables};
use reprorun_pipeline::store::Db;

pub(crate) use reprorun_pipeline::driver::Merged;

/// What a result file of a run holds beyond its head: the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Body {
    pub row: RunRow,
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

impl Pipeline for Tasks {
    type Unit = Unit;
    type Body = Body;
    type Id = (String, u32);
    type Store = Store;
    type Error = RunError;
    const RESULT_FORMAT: &'static str = SHARD_FORMAT;
    const TABLES: Tables = Tables {
        sql: CLUSTER_SQL,
        hosts: "run_hosts",
        attempts: "run_attempts",
        keys: 2,
        host_columns: HostColumns::Full,
    };

    fn digest(&self) -> &str {
        &self.digest
    }
    fn unit_id(&self, u: &Unit) -> Self::Id {
        (u.group_id.clone(), u.repeat)
    }
    fn body_id(b: &Body) -> Self::Id {
        (b.row.group_id.clone(), b.row.repeat)
    }
    fn key((group, repeat): &Self::Id) -> String {
        key(group, *repeat)
    }
    fn name(b: &Body) -> String {
        format!("run ({} #{})", b.row.group_id, b.row.repeat)
    }
    fn columns((group, repeat): &Self::Id) -> Vec<Value> {
        vec![
            Value::Text(group.clone()),
            Value::Integer(i64::from(*repeat)),
        ]
    }
    fn logs(b: &Body) -> Vec<&str> {
        let r = &b.row;
        let mut v = vec![r.stdout_sha256.as_str(), r.stderr_sha256.as_str()];
        v.extend(r.findings_sha256.as_deref());
        v.extend(r.raw_sha256.as_deref());
        v.extend(r.network_sha256.as_deref());
        v
    }
    fn started_at(b: &Body) -> i64 {
        b.row.started_at
    }
    fn open_store(&self, db: &Path) -> Result<Store, RunError> {
        let store = Store::open(db, true)?;
        let m = &self.manifest;
        store.db.check_options(&m.options_fingerprint)?;
        store.db.set_meta("corpus", &m.corpus.to_string_lossy())?;
        store.db.set_meta("agent", &m.agent)?;
        Ok(store)
    }
    fn db(store: &Store) -> &Db {
        &store.db
    }
    fn recorded(store: &Store, (group, repeat): &Self::Id) -> Result<bool, RunError> {
        Ok(store.has_run(group, *repeat)?)
    }
    fn record(store: &Store, b: &Body) -> Result<(), RunError> {
        store.insert(&b.row)?;
        Ok(())
    }
}

/// Why result file `name` (with `text`) is not a result of this plan, if it is not.
#[cfg(test)]
pub(crate) fn check(
    tasks: &Tasks,
    units: &BTreeMap<String, (u32, Unit)>,
    results: &Path,
    name: &str,
    text: &str,
) -> Result<super::Shard, String> {
    driver::check(tasks, units, results, name, text)
}

/// Checks every result (the first that fails refuses all), merges those not merged, sets
/// the study meta, and says what is missing.
pub(crate) fn merge(tasks_dir: &Path, results: &Path, db: &Path) -> Result<Merged, RunError> {
    let tasks = Tasks::open(tasks_dir)?;
    let units: BTreeMap<String, (u32, Unit)> = tasks.units()?;
    driver::merge(&tasks, &units, results, db)
}
