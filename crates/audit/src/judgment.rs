//! The judge's verdicts as the study database keeps them: written by `audit judge`, read
//! by `audit metrics` and `audit report`. One `judgments` row per (group, repeat, judge)
//! and, for a valid result, one `pair_labels` row per (hidden issue, finding) of that run:
//! every pair is labelled, so top-k matches are computed exactly. The tables are created
//! with the study (`run::store`'s schema).

use rusqlite::{params, OptionalExtension};

use crate::run::store::Store;
use reprorun_pipeline::store::StoreError;

/// A judge's label for a (hidden issue, finding) pair.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Label {
    /// The finding describes the issue's problem itself.
    Exact,
    /// The same problem in other words, or the right cause with a different symptom.
    Semantic,
    None,
}

impl Label {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Label::Exact => "exact",
            Label::Semantic => "semantic",
            Label::None => "none",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Label> {
        match s {
            "exact" => Some(Label::Exact),
            "semantic" => Some(Label::Semantic),
            "none" => Some(Label::None),
            _ => None,
        }
    }
}

/// One judging of one run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Judgment {
    pub(crate) group_id: String,
    pub(crate) repeat: u32,
    /// The judge's name (`builtin`, `codex`, `claude-code`, `cmd`).
    pub(crate) judge: String,
    /// `ok`, `invalid_output`, `no_output`, `timeout`, `oom`, `judge_missing`, or `skipped`
    /// (the run had no valid findings: nothing to judge; every issue unmatched).
    pub(crate) status: String,
    pub(crate) reason: Option<String>,
    /// 1, or 2 after an invalid first answer.
    pub(crate) attempts: u32,
    pub(crate) task_sha256: String,
    pub(crate) result_sha256: Option<String>,
    pub(crate) stdout_sha256: Option<String>,
    pub(crate) stderr_sha256: Option<String>,
    pub(crate) input_tokens: u64,
    pub(crate) cached_input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) cost_usd: Option<f64>,
}

/// One pair's label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct PairLabel {
    pub(crate) group_id: String,
    pub(crate) repeat: u32,
    pub(crate) judge: String,
    /// `owner/name#N`.
    pub(crate) hidden_issue_id: String,
    /// The finding's 0-based position in the agent's ranked list.
    pub(crate) finding_index: u32,
    pub(crate) label: Label,
}

impl Store {
    /// Whether run (`group`, `repeat`) has a settled judgment of `judge`: `ok` or
    /// `skipped`. Any other status (the judge failed, timed out, was missing) is judged
    /// again by the next `audit judge`.
    pub(crate) fn has_judgment(
        &self,
        group: &str,
        repeat: u32,
        judge: &str,
    ) -> Result<bool, StoreError> {
        self.db
            .conn()
            .prepare_cached(
                "SELECT 1 FROM judgments WHERE group_id = ?1 AND repeat = ?2 AND judge = ?3 \
                 AND status IN ('ok', 'skipped')",
            )
            .and_then(|mut st| {
                st.query_row(params![group, repeat, judge], |_| Ok(()))
                    .optional()
            })
            .map(|r| r.is_some())
            .map_err(self.db.err())
    }

    /// Records a judgment and its pair labels in one transaction, once.
    pub(crate) fn insert_judgment(
        &self,
        j: &Judgment,
        labels: &[PairLabel],
    ) -> Result<bool, StoreError> {
        let conn = self.db.conn();
        let err = self.db.err();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(&err)?;
        match self.insert_judgment_rows(j, labels) {
            Ok(inserted) => {
                conn.execute_batch("COMMIT").map_err(&err)?;
                Ok(inserted)
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// How many judgments of `judge` did not settle (not `ok` or `skipped`): the next judging
    /// retries them.
    pub(crate) fn unsettled_judgments(&self, judge: &str) -> Result<u64, StoreError> {
        self.db
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM judgments WHERE judge = ?1 AND status NOT IN ('ok', 'skipped')",
                params![judge],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(self.db.err())
    }

    /// Forgets everything `judge` recorded in the study: its judgments, pair labels and
    /// configuration (`audit judge --replace`). Returns how many judgments went.
    pub(crate) fn forget_judge(&self, judge: &str) -> Result<u64, StoreError> {
        let conn = self.db.conn();
        let err = self.db.err();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(&err)?;
        let r = (|| {
            conn.execute("DELETE FROM pair_labels WHERE judge = ?1", params![judge])?;
            let n = conn.execute("DELETE FROM judgments WHERE judge = ?1", params![judge])?;
            conn.execute(
                "DELETE FROM meta WHERE key = ?1",
                params![format!("judge:{judge}")],
            )?;
            Ok(n as u64)
        })();
        match r {
            Ok(n) => {
                conn.execute_batch("COMMIT").map_err(&err)?;
                Ok(n)
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(err(e))
            }
        }
    }

    /// [`Self::insert_judgment`] inside the caller's transaction (a merge's batch). An
    /// unsettled judgment of the same run and judge is replaced; a settled one is kept.
    pub(crate) fn insert_judgment_rows(
        &self,
        j: &Judgment,
        labels: &[PairLabel],
    ) -> Result<bool, StoreError> {
        let conn = self.db.conn();
        let err = self.db.err();
        conn.prepare_cached(
            "DELETE FROM judgments WHERE group_id = ?1 AND repeat = ?2 AND judge = ?3 \
             AND status NOT IN ('ok', 'skipped')",
        )
        .and_then(|mut st| st.execute(params![j.group_id, j.repeat, j.judge]))
        .map_err(&err)?;
        let n = conn
            .prepare_cached(
                "INSERT OR IGNORE INTO judgments VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    j.group_id, j.repeat, j.judge, j.status, j.reason, j.attempts, j.task_sha256,
                    j.result_sha256, j.stdout_sha256, j.stderr_sha256, j.input_tokens as i64,
                    j.cached_input_tokens as i64, j.output_tokens as i64, j.cost_usd,
                ])
            })
            .map_err(&err)?;
        if n > 0 {
            let mut st = conn
                .prepare_cached("INSERT OR IGNORE INTO pair_labels VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .map_err(&err)?;
            for l in labels {
                st.execute(params![
                    l.group_id,
                    l.repeat,
                    l.judge,
                    l.hidden_issue_id,
                    l.finding_index,
                    l.label.as_str()
                ])
                .map_err(&err)?;
            }
        }
        Ok(n > 0)
    }

    /// Every judgment, by group, repeat and judge.
    pub(crate) fn judgments(&self) -> Result<Vec<Judgment>, StoreError> {
        let conn = self.db.conn();
        let mut stmt = conn
            .prepare("SELECT * FROM judgments ORDER BY group_id, repeat, judge")
            .map_err(self.db.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Judgment {
                    group_id: r.get(0)?,
                    repeat: r.get(1)?,
                    judge: r.get(2)?,
                    status: r.get(3)?,
                    reason: r.get(4)?,
                    attempts: r.get(5)?,
                    task_sha256: r.get(6)?,
                    result_sha256: r.get(7)?,
                    stdout_sha256: r.get(8)?,
                    stderr_sha256: r.get(9)?,
                    input_tokens: r.get::<_, i64>(10)? as u64,
                    cached_input_tokens: r.get::<_, i64>(11)? as u64,
                    output_tokens: r.get::<_, i64>(12)? as u64,
                    cost_usd: r.get(13)?,
                })
            })
            .map_err(self.db.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.db.err())
    }

    /// Every pair label of `judge`.
    pub(crate) fn pair_labels(&self, judge: &str) -> Result<Vec<PairLabel>, StoreError> {
        let conn = self.db.conn();
        let mut stmt = conn
            .prepare("SELECT group_id, repeat, judge, hidden_issue_id, finding_index, label FROM pair_labels WHERE judge = ?1 ORDER BY group_id, repeat, hidden_issue_id, finding_index")
            .map_err(self.db.err())?;
        let rows = stmt
            .query_map(params![judge], |r| {
                let label: String = r.get(5)?;
                Ok(PairLabel {
                    group_id: r.get(0)?,
                    repeat: r.get(1)?,
                    judge: r.get(2)?,
                    hidden_issue_id: r.get(3)?,
                    finding_index: r.get(4)?,
                    label: Label::parse(&label).unwrap_or(Label::None),
                })
            })
            .map_err(self.db.err())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.db.err())
    }
}
