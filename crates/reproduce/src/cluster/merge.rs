//! `reprorun reproduce merge`: the study database's one writer. Every result file is
//! checked against the plan first (its manifest digest, its unit, its logs' digests); one
//! that fails is refused and nothing is merged. Then each run is inserted exactly once: a
//! second result for a run already recorded (a requeued task) goes to `attempts`, a result
//! already merged adds nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::OptionalExtension;

use super::{key, ClusterError, Tasks, Unit, SHARD_FORMAT};
use crate::store::{RunRow, Store, StoreError};
use crate::Arm;
use reprorun_pipeline::driver::{self, HostColumns, Pipeline, Tables};
use reprorun_pipeline::store::Db;

pub(crate) use reprorun_pipeline::driver::Merged;

/// `merge`'s options.
#[derive(Debug, Clone)]
pub(crate) struct MergeOptions {
    pub tasks: PathBuf,
    pub results: PathBuf,
    pub db: PathBuf,
}

/// What a result file of a run holds beyond its head: the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Body {
    pub row: RunRow,
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

impl Pipeline for Tasks {
    type Unit = Unit;
    type Body = Body;
    type Id = (String, Arm, u32);
    type Store = Store;
    type Error = ClusterError;
    const RESULT_FORMAT: &'static str = SHARD_FORMAT;
    const TABLES: Tables = Tables {
        sql: CLUSTER_SQL,
        hosts: "hosts",
        attempts: "attempts",
        keys: 3,
        host_columns: HostColumns::Full,
    };

    fn digest(&self) -> &str {
        &self.digest
    }
    fn unit_id(&self, u: &Unit) -> Self::Id {
        (u.instance_id.clone(), u.arm, u.idx)
    }
    fn body_id(b: &Body) -> Self::Id {
        (b.row.instance_id.clone(), b.row.arm, b.row.idx)
    }
    fn key((id, arm, idx): &Self::Id) -> String {
        key(id, *arm, *idx)
    }
    fn name(b: &Body) -> String {
        let r = &b.row;
        format!("run ({} {} #{})", r.instance_id, r.arm.name(), r.idx)
    }
    fn columns((id, arm, idx): &Self::Id) -> Vec<Value> {
        vec![
            Value::Text(id.clone()),
            Value::Text(arm.name()),
            Value::Integer(i64::from(*idx)),
        ]
    }
    fn logs(b: &Body) -> Vec<&str> {
        let r = &b.row;
        let mut v = vec![r.stdout_sha256.as_str(), r.stderr_sha256.as_str()];
        v.extend(r.junit_sha256.as_deref());
        v
    }
    fn started_at(b: &Body) -> i64 {
        b.row.started_at
    }
    fn open_store(&self, db: &Path) -> Result<Store, ClusterError> {
        let store = Store::open(db, true)?;
        store.register(&self.manifest.instances)?;
        crate::export::swebench::record_inputs(&store, &self.manifest.instances)?;
        store.check_options(&self.manifest.options_fingerprint)?;
        store.set_meta("k", &self.manifest.k.to_string())?;
        Ok(store)
    }
    fn db(store: &Store) -> &Db {
        store
    }
    fn recorded(store: &Store, (id, arm, idx): &Self::Id) -> Result<bool, ClusterError> {
        Ok(store.has_run(id, *arm, *idx)?)
    }
    fn record(store: &Store, b: &Body) -> Result<(), ClusterError> {
        Ok(store.insert(&b.row)?)
    }
}

/// Checks every result, merges those not merged, and says what is missing.
pub(crate) fn merge(o: &MergeOptions) -> Result<Merged, ClusterError> {
    let tasks = Tasks::open(&o.tasks)?;
    let units = tasks.units()?;
    driver::merge(&tasks, &units, &o.results, &o.db)
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
