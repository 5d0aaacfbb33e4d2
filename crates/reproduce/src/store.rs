//! The study's store: the pipeline's study database ([`Db`]: meta, options fingerprint,
//! content-addressed logs in `FILE.logs/`) with reproduce's tables, one row per instance and
//! one per run. A run's row is inserted only when the run has finished and its logs are
//! written, in one statement, and `(instance_id, arm, idx)` is unique: a study killed at any
//! moment and started again records every run exactly once.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use rusqlite::{params, OptionalExtension};
use thiserror::Error;

use super::input::Instance;
use super::{Arm, Infra, InstanceRuns, Mode, RunResult};
use reprorun_pipeline::store::{sha256_hex, Db, Schema};

/// Bumped when the schema changes meaning.
pub const SCHEMA_VERSION: i64 = 1;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error(transparent)]
    Db(#[from] reprorun_pipeline::store::StoreError),
    #[error("--db {path}: instance {id} was recorded with a different {what}; a study's inputs cannot change: use a new --db")]
    Changed {
        path: PathBuf,
        id: String,
        what: &'static str,
    },
}

/// One finished run as stored (and, as JSON, in a cluster worker's result file).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRow {
    pub instance_id: String,
    /// By name (`shim`, `shim_without_clock`, ...).
    #[serde(with = "arm_name")]
    pub arm: Arm,
    pub idx: u32,
    pub resolved: bool,
    pub infra: Option<Infra>,
    pub exit_code: i32,
    pub wall_ms: u64,
    pub started_at: i64,
    pub signature: String,
    pub evidence: Vec<Mode>,
    /// How the patches applied (`model=git-apply test=git-apply`).
    pub apply: String,
    /// Per-test statuses, JSON.
    pub tests: String,
    pub stdout_sha256: String,
    pub stderr_sha256: String,
    pub junit_sha256: Option<String>,
    /// The one-line runtime error, for `Infra::Runtime`.
    pub error: Option<String>,
    /// What the run was made from (`provenance::Provenance`, JSON); `None` for a run
    /// recorded before it was kept.
    #[serde(default)]
    pub env: Option<String>,
}

/// An arm as its name ([`Arm::name`]) in JSON.
pub(crate) mod arm_name {
    use super::Arm;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(arm: &Arm, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&arm.name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arm, D::Error> {
        let name = String::deserialize(d)?;
        Arm::parse(&name).ok_or_else(|| D::Error::custom(format!("unknown arm {name:?}")))
    }
}

/// An instance's recorded outcome and its graded tests (`None`: not stored).
pub type GradedList = (bool, Option<Vec<String>>);

/// A reproduction study's database: the pipeline's [`Db`] (meta, logs, scratch) and the
/// tables below.
pub struct Store {
    db: Db,
    path: PathBuf,
}

impl Deref for Store {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

const RUNS_SQL: &str = "
CREATE TABLE IF NOT EXISTS instances (
    instance_id TEXT PRIMARY KEY,
    recorded_resolved INTEGER NOT NULL,
    bench_date INTEGER NOT NULL,
    base_commit TEXT NOT NULL,
    model_patch_sha256 TEXT NOT NULL,
    test_patch_sha256 TEXT NOT NULL,
    test_cmd TEXT NOT NULL,
    conditions_sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    instance_id TEXT NOT NULL REFERENCES instances(instance_id),
    arm TEXT NOT NULL,
    idx INTEGER NOT NULL,
    resolved INTEGER NOT NULL,
    infra TEXT,
    exit_code INTEGER NOT NULL,
    wall_ms INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    signature TEXT NOT NULL,
    evidence TEXT NOT NULL,
    apply TEXT NOT NULL,
    tests TEXT NOT NULL,
    stdout_sha256 TEXT NOT NULL,
    stderr_sha256 TEXT NOT NULL,
    junit_sha256 TEXT,
    error TEXT,
    PRIMARY KEY (instance_id, arm, idx)
);
";

/// The graded test lists of each instance (FAIL_TO_PASS ∪ PASS_TO_PASS, sorted, JSON), for
/// `regrade`. Added without a schema bump: an older study gets it on its next `run`.
const LISTED: &str = "
CREATE TABLE IF NOT EXISTS listed_tests (
    instance_id TEXT PRIMARY KEY REFERENCES instances(instance_id),
    tests TEXT NOT NULL
);
";

static SCHEMA: Schema = Schema {
    sql: RUNS_SQL,
    version: SCHEMA_VERSION,
    make: "reprorun reproduce run",
    options: "--seed, --timeout, --memory, --no-shim-mirror and --no-shim-net",
};

impl Store {
    /// Opens (creating if `create`) the study database.
    pub fn open(path: &Path, create: bool) -> Result<Store, StoreError> {
        let store = Store {
            db: Db::open(path, create, &SCHEMA)?,
            path: path.to_path_buf(),
        };
        store.add_env_column()?;
        Ok(store)
    }

    /// `runs.env` (a run's provenance), added without a schema bump: a study made before
    /// it gets the column, empty for its old runs.
    /// Every connection opening the study does this (the coordinator, its workers, a reader
    /// such as `report`): when two find the column missing at once, the second `ALTER` fails
    /// ("duplicate column name"), which is success if the column is there now.
    fn add_env_column(&self) -> Result<(), StoreError> {
        let conn = self.db.conn();
        let has = || {
            conn.prepare("SELECT 1 FROM pragma_table_info('runs') WHERE name = 'env'")
                .and_then(|mut st| st.exists([]))
                .map_err(self.err())
        };
        if !has()? {
            if let Err(e) = conn.execute_batch("ALTER TABLE runs ADD COLUMN env TEXT") {
                if !has()? {
                    return Err(self.err()(e));
                }
            }
        }
        Ok(())
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        let err = self.db.err();
        move |e| StoreError::Db(err(e))
    }

    /// Records the run options the first time; later, refuses different ones (runs made
    /// under other conditions would be mixed into one r).
    pub fn check_options(&self, options: &str) -> Result<(), StoreError> {
        Ok(self.db.check_options(options)?)
    }

    /// A meta value, set to `value` the first time it is asked for.
    pub fn meta_or_set(&self, key: &str, value: &str) -> Result<String, StoreError> {
        Ok(self.db.meta_or_set(key, value)?)
    }

    /// Sets a meta value (replacing it).
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        Ok(self.db.set_meta(key, value)?)
    }

    /// A meta value, if set.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.db.meta(key)?)
    }

    /// Writes a log (content-addressed; an existing one is kept) and returns its digest.
    pub fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError> {
        Ok(self.db.put_log(bytes)?)
    }

    /// Records the instances, or checks them against those recorded: a study's inputs
    /// cannot change under it.
    pub fn register(&self, instances: &[Instance]) -> Result<(), StoreError> {
        let tx = self.db.conn().unchecked_transaction().map_err(self.err())?;
        tx.execute_batch(LISTED).map_err(self.err())?;
        for i in instances {
            // What else decides a run's outcome: the graded tests, the repository, the root
            // and the mirror.
            let conditions = serde_json::json!([
                i.fail_to_pass,
                i.pass_to_pass,
                i.repo_path,
                i.image,
                i.rootfs,
                i.mirror
            ])
            .to_string();
            let row = (
                i.recorded_resolved,
                i.bench_date,
                i.base_commit.clone(),
                sha256_hex(i.model_patch.as_bytes()),
                sha256_hex(i.test_patch.as_bytes()),
                i.test_cmd.clone(),
                sha256_hex(conditions.as_bytes()),
            );
            type Row = (bool, i64, String, String, String, String, String);
            let old: Option<Row> = tx
                .query_row(
                    "SELECT recorded_resolved, bench_date, base_commit, model_patch_sha256, test_patch_sha256, test_cmd, conditions_sha256 FROM instances WHERE instance_id = ?1",
                    params![i.instance_id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
                )
                .optional()
                .map_err(self.err())?;
            match old {
                None => {
                    tx.execute(
                        "INSERT INTO instances VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        params![
                            i.instance_id,
                            row.0,
                            row.1,
                            row.2,
                            row.3,
                            row.4,
                            row.5,
                            row.6
                        ],
                    )
                    .map_err(self.err())?;
                }
                Some(old) if old == row => {}
                Some(old) => {
                    let what = if old.0 != row.0 {
                        "recorded outcome"
                    } else if old.1 != row.1 {
                        "benchmark date"
                    } else if old.2 != row.2 {
                        "base_commit"
                    } else if old.3 != row.3 {
                        "model_patch"
                    } else if old.4 != row.4 {
                        "test_patch"
                    } else if old.5 != row.5 {
                        "test command"
                    } else {
                        "FAIL_TO_PASS/PASS_TO_PASS, repository, image, rootfs or mirror"
                    };
                    return Err(StoreError::Changed {
                        path: self.path.clone(),
                        id: i.instance_id.clone(),
                        what,
                    });
                }
            }
        }
        for i in instances {
            let listed: Vec<&str> = i.listed_tests().into_iter().collect();
            tx.execute(
                "INSERT OR REPLACE INTO listed_tests VALUES (?1, ?2)",
                params![
                    i.instance_id,
                    serde_json::to_string(&listed).unwrap_or_else(|_| "[]".into())
                ],
            )
            .map_err(self.err())?;
        }
        tx.commit().map_err(self.err())
    }

    /// Whether this run is recorded.
    pub fn has_run(&self, id: &str, arm: Arm, idx: u32) -> Result<bool, StoreError> {
        // Cached: a merge asks once per result.
        self.db
            .conn()
            .prepare_cached("SELECT 1 FROM runs WHERE instance_id = ?1 AND arm = ?2 AND idx = ?3")
            .and_then(|mut st| {
                st.query_row(params![id, arm.name(), idx], |_| Ok(()))
                    .optional()
            })
            .map(|r| r.is_some())
            .map_err(self.err())
    }

    /// How many runs are recorded (the runtime tests' view of a study).
    pub fn count_runs(&self) -> Result<u64, StoreError> {
        self.db
            .conn()
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(self.err())
    }

    /// Records a finished run. A row already there (the same run finished twice, which the
    /// scheduler never does) is kept and this one dropped.
    pub fn insert(&self, r: &RunRow) -> Result<(), StoreError> {
        let evidence: Vec<&str> = r.evidence.iter().map(|m| m.name()).collect();
        self.db.insert_once(
                "INSERT OR IGNORE INTO runs (instance_id, arm, idx, resolved, infra, exit_code, wall_ms, started_at, signature, evidence, apply, tests, stdout_sha256, stderr_sha256, junit_sha256, error, env) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                params![
                    r.instance_id,
                    r.arm.name(),
                    r.idx,
                    r.resolved,
                    r.infra.map(Infra::name),
                    r.exit_code,
                    r.wall_ms as i64,
                    r.started_at,
                    r.signature,
                    serde_json::to_string(&evidence).unwrap_or_else(|_| "[]".into()),
                    r.apply,
                    r.tests,
                    r.stdout_sha256,
                    r.stderr_sha256,
                    r.junit_sha256,
                    r.error,
                    r.env,
                ],
            )?;
        Ok(())
    }

    /// Each instance's benchmark date (Unix seconds).
    pub fn bench_dates(&self) -> Result<BTreeMap<String, i64>, StoreError> {
        let mut stmt = self
            .db
            .conn()
            .prepare("SELECT instance_id, bench_date FROM instances")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(self.err())?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (k, v) = row.map_err(self.err())?;
            out.insert(k, v);
        }
        Ok(out)
    }

    /// The host of each run of a study merged from a cluster (`(instance, arm, idx)` →
    /// hostname); empty for a local study.
    pub fn run_hosts(&self) -> Result<BTreeMap<(String, String, u32), String>, StoreError> {
        let conn = self.db.conn();
        let has = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hosts'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map_err(self.err())?
            .is_some();
        let mut out = BTreeMap::new();
        if !has {
            return Ok(out);
        }
        let mut stmt = conn
            .prepare("SELECT instance_id, arm, idx, hostname FROM hosts")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, u32>(2)?,
                    ),
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(self.err())?;
        for row in rows {
            let (k, v) = row.map_err(self.err())?;
            out.insert(k, v);
        }
        Ok(out)
    }

    /// Each instance's recorded outcome and graded test lists (`None`: a study made
    /// before the lists were stored, and not run since).
    pub fn graded_lists(&self) -> Result<BTreeMap<String, GradedList>, StoreError> {
        let conn = self.db.conn();
        let has_lists = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'listed_tests'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map_err(self.err())?
            .is_some();
        let sql = if has_lists {
            "SELECT i.instance_id, i.recorded_resolved, l.tests FROM instances i LEFT JOIN listed_tests l ON l.instance_id = i.instance_id"
        } else {
            "SELECT instance_id, recorded_resolved, NULL FROM instances"
        };
        let mut stmt = conn.prepare(sql).map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, bool>(1)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            })
            .map_err(self.err())?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (id, recorded, tests) = row.map_err(self.err())?;
            let tests = tests.and_then(|t| serde_json::from_str(&t).ok());
            out.insert(id, (recorded, tests));
        }
        Ok(out)
    }

    /// Replaces the graded fields (resolved, signature, evidence, tests, and the `no_tests`
    /// infra grading sets or clears) of these runs, in
    /// one transaction.
    pub fn update_grades(&self, rows: &[RunRow]) -> Result<(), StoreError> {
        let tx = self.db.conn().unchecked_transaction().map_err(self.err())?;
        for r in rows {
            let evidence: Vec<&str> = r.evidence.iter().map(|m| m.name()).collect();
            tx.execute(
                "UPDATE runs SET resolved = ?1, signature = ?2, evidence = ?3, tests = ?4, infra = ?8 WHERE instance_id = ?5 AND arm = ?6 AND idx = ?7",
                params![
                    r.resolved,
                    r.signature,
                    serde_json::to_string(&evidence).unwrap_or_else(|_| "[]".into()),
                    r.tests,
                    r.instance_id,
                    r.arm.name(),
                    r.idx,
                    r.infra.map(Infra::name),
                ],
            )
            .map_err(self.err())?;
        }
        tx.commit().map_err(self.err())
    }

    /// Every run, grouped by instance, for the summary.
    pub fn instance_runs(&self) -> Result<Vec<InstanceRuns>, StoreError> {
        let mut out: Vec<InstanceRuns> = Vec::new();
        let mut stmt = self.db
            .conn()
            .prepare("SELECT instance_id, recorded_resolved, bench_date FROM instances ORDER BY instance_id")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(InstanceRuns {
                    instance_id: r.get(0)?,
                    recorded_resolved: r.get(1)?,
                    bench_date: r.get(2)?,
                    runs: Vec::new(),
                })
            })
            .map_err(self.err())?;
        for row in rows {
            out.push(row.map_err(self.err())?);
        }
        let lists = self.graded_lists()?;
        for r in self.rows()? {
            if let Some(inst) = out.iter_mut().find(|i| i.instance_id == r.instance_id) {
                let failed_tests = match (r.infra, lists.get(&r.instance_id)) {
                    (None, Some((_, Some(listed)))) => {
                        super::outcome::failed_listed(&r.tests, listed)
                    }
                    _ => Vec::new(),
                };
                inst.runs.push(RunResult {
                    arm: r.arm,
                    idx: r.idx,
                    resolved: r.resolved,
                    infra: r.infra,
                    wall_ms: r.wall_ms,
                    started_at: r.started_at,
                    signature: r.signature,
                    evidence: r.evidence,
                    failed_tests,
                });
            }
        }
        Ok(out)
    }

    /// Every run row, in (instance, arm, idx) order.
    pub fn rows(&self) -> Result<Vec<RunRow>, StoreError> {
        let mut stmt = self.db
            .conn()
            .prepare("SELECT instance_id, arm, idx, resolved, infra, exit_code, wall_ms, started_at, signature, evidence, apply, tests, stdout_sha256, stderr_sha256, junit_sha256, error, env FROM runs ORDER BY instance_id, arm, idx")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                let arm: String = r.get(1)?;
                let infra: Option<String> = r.get(4)?;
                let evidence: String = r.get(9)?;
                Ok((
                    arm,
                    infra,
                    evidence,
                    RunRow {
                        instance_id: r.get(0)?,
                        arm: Arm::Shim,
                        idx: r.get(2)?,
                        resolved: r.get(3)?,
                        infra: None,
                        exit_code: r.get(5)?,
                        wall_ms: r.get::<_, i64>(6)? as u64,
                        started_at: r.get(7)?,
                        signature: r.get(8)?,
                        evidence: Vec::new(),
                        apply: r.get(10)?,
                        tests: r.get(11)?,
                        stdout_sha256: r.get(12)?,
                        stderr_sha256: r.get(13)?,
                        junit_sha256: r.get(14)?,
                        error: r.get(15)?,
                        env: r.get(16)?,
                    },
                ))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (arm, infra, evidence, mut row) = row.map_err(self.err())?;
            // Rows name their arm and modes by text; an unknown one (a newer reprorun's)
            // is skipped rather than misread.
            let Some(arm) = Arm::parse(&arm) else {
                continue;
            };
            row.arm = arm;
            row.infra = infra.as_deref().and_then(Infra::parse);
            let names: Vec<String> = serde_json::from_str(&evidence).unwrap_or_default();
            row.evidence = names
                .iter()
                .filter_map(|n| Mode::ALL.iter().copied().find(|m| m.name() == n))
                .collect();
            out.push(row);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// A study made before `runs.env`, opened by several connections at once (a study's
    /// coordinator and workers, and a reader polling it): each adds the column if it finds
    /// it missing, and none fails because another added it first. (A reader polling a new
    /// study's database made the study fail so, rarely: `sigterm_stops_a_study_…`.)
    #[test]
    fn connections_adding_the_env_column_at_once_all_open_the_study() {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..20 {
            let db = dir.path().join(format!("s{round}.db"));
            Store::open(&db, true).unwrap();
            Connection::open(&db)
                .unwrap()
                .execute_batch("ALTER TABLE runs DROP COLUMN env")
                .unwrap();
            let gate = std::sync::Barrier::new(6);
            std::thread::scope(|s| {
                let opens: Vec<_> = (0..6)
                    .map(|_| {
                        s.spawn(|| {
                            gate.wait();
                            Store::open(&db, false).map(|_| ())
                        })
                    })
                    .collect();
                for o in opens {
                    let r = o.join().unwrap();
                    assert!(r.is_ok(), "round {round}: {}", r.unwrap_err());
                }
            });
        }
    }

    fn inst(id: &str, patch: &str) -> Instance {
        Instance {
            instance_id: id.into(),
            repo: String::new(),
            repo_path: "/repo".into(),
            base_commit: "abc".into(),
            test_patch: String::new(),
            model_patch: patch.into(),
            model_name: String::new(),
            fail_to_pass: vec![],
            pass_to_pass: vec![],
            test_cmd: "true".into(),
            image: None,
            rootfs: None,
            mirror: None,
            cassette: None,
            bench_date: 0,
            recorded_resolved: true,
        }
    }

    fn row(id: &str, arm: Arm, idx: u32) -> RunRow {
        RunRow {
            instance_id: id.into(),
            arm,
            idx,
            resolved: true,
            infra: None,
            exit_code: 0,
            wall_ms: 10,
            started_at: 5,
            signature: "s".into(),
            evidence: vec![Mode::Time, Mode::Network],
            apply: "model=git-apply test=none".into(),
            tests: "{}".into(),
            stdout_sha256: "a".into(),
            stderr_sha256: "b".into(),
            junit_sha256: None,
            error: None,
            env: Some("{\"commit\":\"c\"}".into()),
        }
    }

    #[test]
    fn runs_are_recorded_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let s = Store::open(&db, true).unwrap();
        s.register(&[inst("a", "p")]).unwrap();
        let r = row("a", Arm::ShimWithout(super::super::Pin::Clock), 0);
        s.insert(&r).unwrap();
        let mut again = r.clone();
        again.resolved = false;
        s.insert(&again).unwrap();
        assert_eq!(s.count_runs().unwrap(), 1);
        assert_eq!(s.rows().unwrap(), vec![r]);
        assert!(s
            .has_run("a", Arm::ShimWithout(super::super::Pin::Clock), 0)
            .unwrap());
        assert!(!s.has_run("a", Arm::Shim, 0).unwrap());
        let runs = s.instance_runs().unwrap();
        assert_eq!(runs[0].runs[0].evidence, vec![Mode::Time, Mode::Network]);
    }

    #[test]
    fn a_changed_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        Store::open(&db, true)
            .unwrap()
            .register(&[inst("a", "p")])
            .unwrap();
        let s = Store::open(&db, true).unwrap();
        s.register(&[inst("a", "p")]).unwrap();
        let e = s.register(&[inst("a", "q")]).unwrap_err().to_string();
        assert!(
            e.contains("instance a was recorded with a different model_patch"),
            "{e}"
        );
    }

    #[test]
    fn report_needs_an_existing_study_and_a_known_schema() {
        let dir = tempfile::tempdir().unwrap();
        let e = Store::open(&dir.path().join("none.db"), false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("no such study"), "{e}");
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '99');")
            .unwrap();
        let e = Store::open(&other, true).err().unwrap();
        assert!(e.to_string().contains("schema 99"), "{e}");
    }

    #[test]
    fn logs_are_content_addressed() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("s.db"), true).unwrap();
        let d = s.put_log(b"hello").unwrap();
        assert_eq!(d, sha256_hex(b"hello"));
        assert_eq!(s.put_log(b"hello").unwrap(), d);
        assert_eq!(s.log(&d).unwrap(), b"hello");
        assert!(s.log("../etc/passwd").is_none());
    }
}
