//! `reprorun reproduce regrade`: every recorded run graded again from its stored logs
//! (stdout, stderr, JUnit XML in `FILE.logs/`) under the current grading rules
//! ([`outcome::grade_logs`]), without re-running anything; rows whose grade changed are
//! updated in one transaction. Runs whose test command did not run to its end
//! (infrastructure failures) keep their row: there is nothing to grade; a run in the `error`
//! class (`no_tests`) is graded again, and may leave it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use super::outcome;
use super::provenance::{self, Mixed};
use super::store::{RunRow, Store, StoreError};
use reprorun_pipeline::store::LockError;

#[derive(Debug, Error)]
pub enum RegradeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("--exclude {path}: {why}")]
    Exclude { path: PathBuf, why: String },
    #[error("--db {db}: instance {id} has no stored test lists (the study predates them); run `reprorun reproduce run` on it once with the same inputs, then regrade")]
    NoLists { db: PathBuf, id: String },
    #[error("--db {db}: {id} {arm}: its runs were made in {environments} environments ({what} differ); pass --allow-mixed to regrade them together ({groups} instance/arm group(s) mixed in all)")]
    Mixed {
        db: PathBuf,
        id: String,
        arm: String,
        environments: usize,
        what: String,
        groups: usize,
    },
    #[error("--db {db}: run {id} {arm} #{idx}: log {digest} is missing from the log store; it cannot be regraded")]
    MissingLog {
        db: PathBuf,
        id: String,
        arm: String,
        idx: u32,
        digest: String,
    },
}

/// One run whose grade changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Change {
    pub instance_id: String,
    pub arm: String,
    pub idx: u32,
    pub resolved_before: bool,
    pub resolved_after: bool,
}

/// What a regrade did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Regraded {
    /// Runs in the study.
    pub runs: u64,
    /// Runs graded again (those whose test command ran to its end).
    pub graded: u64,
    /// Of those, runs in the `error` class now (no listed test in the output).
    #[serde(default)]
    pub errors: u64,
    /// Infrastructure failures, kept as they are.
    pub infra: u64,
    /// Runs whose stored grade (resolved, signature, evidence or test statuses) changed.
    pub changed: u64,
    /// Of those, runs unresolved before and resolved now, and the other way round.
    pub now_resolved: u64,
    pub now_unresolved: u64,
    pub changes: Vec<Change>,
    /// Instance/arm groups whose runs were made in different environments, regraded
    /// together under `--allow-mixed`.
    pub mixed: Vec<Mixed>,
    /// Listed tests left out of grading by `--exclude` (each instance's, counted once).
    #[serde(default)]
    pub excluded: u64,
}

/// Regrades the study at `db` (holding its lock: no `run` may record meanwhile). Runs of
/// one instance and arm made in different environments ([`provenance::mixed`]) are
/// refused unless `allow_mixed`.
pub(crate) fn regrade(
    db: &Path,
    allow_mixed: bool,
    exclude: Option<&Path>,
) -> Result<Regraded, RegradeError> {
    let exclusions = match exclude {
        Some(path) => {
            super::ledger::read_exclusions(path).map_err(|why| RegradeError::Exclude {
                path: path.to_path_buf(),
                why,
            })?
        }
        None => Default::default(),
    };
    let store = Store::open(db, false)?;
    let _lock = reprorun_pipeline::store::lock(db)?;
    let mut lists = store.graded_lists()?;
    let mut excluded = 0;
    for (id, (_, listed)) in lists.iter_mut() {
        if let (Some(drop), Some(listed)) = (exclusions.get(id), listed.as_mut()) {
            let before = listed.len();
            listed.retain(|t| !drop.contains(t));
            excluded += (before - listed.len()) as u64;
        }
    }
    let rows = store.rows()?;
    let mixed = provenance::mixed(&rows);
    if let (Some(m), false) = (mixed.first(), allow_mixed) {
        return Err(RegradeError::Mixed {
            db: db.to_path_buf(),
            id: m.instance_id.clone(),
            arm: m.arm.clone(),
            environments: m.environments,
            what: m.what.join(", "),
            groups: mixed.len(),
        });
    }
    let mut out = Regraded {
        mixed,
        excluded,
        ..Regraded::default()
    };
    let mut updated = Vec::new();
    for row in rows {
        out.runs += 1;
        if row.infra.is_some_and(|i| !i.graded()) {
            out.infra += 1;
            continue;
        }
        out.graded += 1;
        let (recorded, listed) = match lists.get(&row.instance_id) {
            Some((recorded, Some(listed))) => (*recorded, listed),
            _ => {
                return Err(RegradeError::NoLists {
                    db: db.to_path_buf(),
                    id: row.instance_id,
                })
            }
        };
        // A variation run of some tests alone is graded on those (of the listed ones).
        let alone: Option<Vec<String>> = crate::provenance::ran_alone(&row)
            .map(|a| listed.iter().filter(|t| a.contains(t)).cloned().collect());
        let new = graded(
            &store,
            db,
            &row,
            recorded,
            alone.as_deref().unwrap_or(listed),
        )?;
        out.errors += u64::from(new.infra == Some(super::Infra::NoTests));
        if new == row {
            continue;
        }
        out.changed += 1;
        match (row.resolved, new.resolved) {
            (false, true) => out.now_resolved += 1,
            (true, false) => out.now_unresolved += 1,
            _ => {}
        }
        out.changes.push(Change {
            instance_id: row.instance_id.clone(),
            arm: row.arm.name(),
            idx: row.idx,
            resolved_before: row.resolved,
            resolved_after: new.resolved,
        });
        updated.push(new);
    }
    store.update_grades(&updated)?;
    Ok(out)
}

/// `row` graded again from its logs.
fn graded(
    store: &Store,
    db: &Path,
    row: &RunRow,
    recorded: bool,
    listed: &[String],
) -> Result<RunRow, RegradeError> {
    let log = |digest: &str| {
        store.log(digest).ok_or_else(|| RegradeError::MissingLog {
            db: db.to_path_buf(),
            id: row.instance_id.clone(),
            arm: row.arm.name(),
            idx: row.idx,
            digest: digest.to_string(),
        })
    };
    let stdout = log(&row.stdout_sha256)?;
    let stderr = log(&row.stderr_sha256)?;
    let junit = row.junit_sha256.as_deref().map(log).transpose()?;
    let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
    let g = outcome::grade_logs(
        &listed,
        recorded,
        row.exit_code,
        &stdout,
        &stderr,
        junit.as_deref(),
    );
    Ok(RunRow {
        resolved: g.resolved,
        signature: g.signature,
        infra: g.infra,
        evidence: g.evidence,
        tests: g.tests,
        ..row.clone()
    })
}

impl Regraded {
    /// The counts, and one line per changed run.
    pub(crate) fn text(&self) -> String {
        let mut t = format!(
            "regraded {} of {} runs ({} infrastructure failures kept): {} changed, {} now resolved, {} no longer resolved, {} error (no listed test in the output)\n",
            self.graded, self.runs, self.infra, self.changed, self.now_resolved, self.now_unresolved, self.errors
        );
        if self.excluded > 0 {
            t.push_str(&format!(
                "  {} listed test(s) left out by --exclude\n",
                self.excluded
            ));
        }
        for m in &self.mixed {
            t.push_str(&format!(
                "  mixed (--allow-mixed): {} {}: {} environments ({} differ)\n",
                m.instance_id,
                m.arm,
                m.environments,
                m.what.join(", ")
            ));
        }
        for c in &self.changes {
            let word = |r: bool| if r { "resolved" } else { "unresolved" };
            t.push_str(&format!(
                "  {} {} #{}: {} -> {}\n",
                c.instance_id,
                c.arm,
                c.idx,
                word(c.resolved_before),
                word(c.resolved_after)
            ));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_counts_and_names_each_change() {
        let r = Regraded {
            runs: 3,
            graded: 2,
            infra: 1,
            errors: 0,
            changed: 1,
            now_resolved: 1,
            now_unresolved: 0,
            changes: vec![Change {
                instance_id: "a".into(),
                arm: "shim".into(),
                idx: 0,
                resolved_before: false,
                resolved_after: true,
            }],
            mixed: vec![],
            excluded: 0,
        };
        assert_eq!(
            r.text(),
            "regraded 2 of 3 runs (1 infrastructure failures kept): 1 changed, 1 now resolved, 0 no longer resolved, 0 error (no listed test in the output)\n  a shim #0: unresolved -> resolved\n"
        );
        let r = Regraded { excluded: 2, ..r };
        assert!(r
            .text()
            .contains("\n  2 listed test(s) left out by --exclude\n"));
    }
}
