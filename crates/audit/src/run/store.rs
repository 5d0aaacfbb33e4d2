//! The audit study's tables on the shared pipeline database: one row per (snapshot group,
//! repeat), inserted once; logs, transcripts and findings content-addressed beside it.

use std::path::Path;

use rusqlite::{params, OptionalExtension};

use reprorun_pipeline::store::{Db, Schema, StoreError};

const RUNS_SQL: &str = "
CREATE TABLE IF NOT EXISTS runs (
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    exit_code INTEGER NOT NULL,
    wall_ms INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    n_findings INTEGER,
    findings_sha256 TEXT,
    raw_sha256 TEXT,
    stdout_sha256 TEXT NOT NULL,
    stderr_sha256 TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL,
    cost_source TEXT NOT NULL,
    PRIMARY KEY (group_id, repeat)
);

-- The judge's tables (audit::judgment).
CREATE TABLE IF NOT EXISTS judgments (
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    judge TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    attempts INTEGER NOT NULL,
    task_sha256 TEXT NOT NULL,
    result_sha256 TEXT,
    stdout_sha256 TEXT,
    stderr_sha256 TEXT,
    input_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL,
    PRIMARY KEY (group_id, repeat, judge)
);
CREATE TABLE IF NOT EXISTS pair_labels (
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    judge TEXT NOT NULL,
    hidden_issue_id TEXT NOT NULL,
    finding_index INTEGER NOT NULL,
    label TEXT NOT NULL,
    PRIMARY KEY (group_id, repeat, judge, hidden_issue_id, finding_index)
);";

static SCHEMA: Schema = Schema {
    sql: RUNS_SQL,
    version: 1,
    make: "reprorun audit run",
    options: "--corpus, --agent, --agent-cmd, --model, --model-base-url, --max-turns, --no-paper, --no-order-instruction, --allow-host, --add-host, --agent-root, --image, --timeout and --memory",
};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// A valid findings document.
    Ok,
    /// The agent wrote no findings document.
    NoOutput,
    /// It wrote one that does not validate (the reason says why).
    InvalidOutput,
    /// `--timeout` expired first.
    Timeout,
    /// The kernel's OOM killer ended it (`--memory`).
    Oom,
    /// The agent's command could not be executed (not found, not executable).
    AgentMissing,
}

impl Status {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NoOutput => "no_output",
            Status::InvalidOutput => "invalid_output",
            Status::Timeout => "timeout",
            Status::Oom => "oom",
            Status::AgentMissing => "agent_missing",
        }
    }
}

/// One recorded run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunRow {
    pub(crate) group_id: String,
    pub(crate) repeat: u32,
    pub(crate) status: String,
    pub(crate) reason: Option<String>,
    pub(crate) exit_code: i32,
    pub(crate) wall_ms: u64,
    pub(crate) started_at: i64,
    pub(crate) n_findings: Option<u64>,
    pub(crate) findings_sha256: Option<String>,
    pub(crate) raw_sha256: Option<String>,
    pub(crate) stdout_sha256: String,
    pub(crate) stderr_sha256: String,
    pub(crate) input_tokens: u64,
    pub(crate) cached_input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cost_usd: Option<f64>,
    pub(crate) cost_source: String,
    /// With a network: the proxy's record of the run's connections (`{"network": [...],
    /// "network_dropped": N}`, as `exec --record` writes them; which secret went to which
    /// host, never a value), kept in table `run_network`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) network_sha256: Option<String>,
}

/// The network record of each run, beside `runs` (made on open, so a study begun by an
/// earlier reprorun gains it without a new schema).
const NETWORK_SQL: &str = "
CREATE TABLE IF NOT EXISTS run_network (
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    network_sha256 TEXT NOT NULL,
    PRIMARY KEY (group_id, repeat)
);";

/// The audit study's database.
pub(crate) struct Store {
    pub(crate) db: Db,
}

impl Store {
    pub(crate) fn open(path: &Path, create: bool) -> Result<Store, StoreError> {
        let db = Db::open(path, create, &SCHEMA)?;
        db.conn().execute_batch(NETWORK_SQL).map_err(db.err())?;
        Ok(Store { db })
    }

    pub(crate) fn has_run(&self, group: &str, repeat: u32) -> Result<bool, StoreError> {
        self.db
            .conn()
            .prepare_cached("SELECT 1 FROM runs WHERE group_id = ?1 AND repeat = ?2")
            .and_then(|mut st| st.query_row(params![group, repeat], |_| Ok(())).optional())
            .map(|r| r.is_some())
            .map_err(self.db.err())
    }

    /// Inserts `row` unless that run is recorded already (a resumed worker's duplicate),
    /// with its network record, both or neither (a savepoint: the merge inserts inside a
    /// transaction of its own).
    pub(crate) fn insert(&self, r: &RunRow) -> Result<bool, StoreError> {
        let conn = self.db.conn();
        conn.execute_batch("SAVEPOINT run_insert")
            .map_err(self.db.err())?;
        let both = self.insert_row(r).and_then(|inserted| {
            if let (true, Some(net)) = (inserted, &r.network_sha256) {
                self.db.insert_once(
                    "INSERT OR IGNORE INTO run_network VALUES (?1, ?2, ?3)",
                    params![r.group_id, r.repeat, net],
                )?;
            }
            Ok(inserted)
        });
        let end = match both {
            Ok(_) => "RELEASE run_insert",
            Err(_) => "ROLLBACK TO run_insert; RELEASE run_insert",
        };
        conn.execute_batch(end).map_err(self.db.err())?;
        both
    }

    fn insert_row(&self, r: &RunRow) -> Result<bool, StoreError> {
        self.db.insert_once(
            "INSERT OR IGNORE INTO runs VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            params![
                r.group_id,
                r.repeat,
                r.status,
                r.reason,
                r.exit_code,
                r.wall_ms as i64,
                r.started_at,
                r.n_findings.map(|n| n as i64),
                r.findings_sha256,
                r.raw_sha256,
                r.stdout_sha256,
                r.stderr_sha256,
                r.input_tokens as i64,
                r.cached_input_tokens as i64,
                r.output_tokens as i64,
                r.cost_usd,
                r.cost_source,
            ],
        )
    }

    /// Every recorded run, by group and repeat.
    pub(crate) fn rows(&self) -> Result<Vec<RunRow>, StoreError> {
        let conn = self.db.conn();
        let mut stmt = conn
            .prepare(
                "SELECT runs.*, n.network_sha256 FROM runs LEFT JOIN run_network n \
                 USING (group_id, repeat) ORDER BY group_id, repeat",
            )
            .map_err(self.db.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(RunRow {
                    group_id: r.get(0)?,
                    repeat: r.get(1)?,
                    status: r.get(2)?,
                    reason: r.get(3)?,
                    exit_code: r.get(4)?,
                    wall_ms: r.get::<_, i64>(5)? as u64,
                    started_at: r.get(6)?,
                    n_findings: r.get::<_, Option<i64>>(7)?.map(|n| n as u64),
                    findings_sha256: r.get(8)?,
                    raw_sha256: r.get(9)?,
                    stdout_sha256: r.get(10)?,
                    stderr_sha256: r.get(11)?,
                    input_tokens: r.get::<_, i64>(12)? as u64,
                    cached_input_tokens: r.get::<_, i64>(13)? as u64,
                    output_tokens: r.get::<_, i64>(14)? as u64,
                    cost_usd: r.get(15)?,
                    cost_source: r.get(16)?,
                    network_sha256: r.get(17)?,
                })
            })
            .map_err(self.db.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.db.err())
    }
}
