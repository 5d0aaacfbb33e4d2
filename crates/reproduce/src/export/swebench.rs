//! `reprorun reproduce export --swebench DIR`: one arm's run #i of every instance written as
//! a SWE-bench evaluation run (`spec/reproduce.md`): per instance
//! `logs/run_evaluation/RUN_ID/MODEL/INSTANCE/{test_output.txt,patch.diff,report.json}`, and
//! the run summary `MODEL.RUN_ID.json`, with the fields and ids SWE-bench's own
//! `make_run_report` writes. Test names are the instance's own (pytest node ids), never
//! JUnit's dotted form. The export is resolved into an [`Export`] first (printable, tested
//! without files) and written by [`write`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rusqlite::params;
use serde_json::{json, Value};
use thiserror::Error;

use crate::input::Instance;
use crate::outcome::{self, Tests};
use crate::store::{RunRow, Store, StoreError};
use crate::{Arm, Infra};

#[derive(Debug, Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("--db {db}: {step}: {source}")]
    Db {
        db: PathBuf,
        step: &'static str,
        source: rusqlite::Error,
    },
    #[error("--db {0}: the study predates SWE-bench's inputs in the store; run `reprorun reproduce run` on it once with the same inputs, then export")]
    NoInputs(PathBuf),
    #[error("--db {db}: log {digest} of {id} is missing from the log store")]
    MissingLog {
        db: PathBuf,
        id: String,
        digest: String,
    },
    #[error("{what} {name:?} cannot be a directory name (SWE-bench's layout names a directory after it)")]
    Name { what: &'static str, name: String },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What SWE-bench's inputs the store keeps per instance (added without a schema bump:
/// an older study gets it on its next `run`).
const INPUTS_SQL: &str = "
CREATE TABLE IF NOT EXISTS swebench_inputs (
    instance_id TEXT PRIMARY KEY REFERENCES instances(instance_id),
    model_name TEXT NOT NULL,
    model_patch_sha256 TEXT NOT NULL,
    fail_to_pass TEXT NOT NULL,
    pass_to_pass TEXT NOT NULL
);
";

/// SWE-bench's markers in `test_output.txt` (its `harness/constants`).
const START: &str = ">>>>> Start Test Output";
const END: &str = ">>>>> End Test Output";
const APPLY_FAILED: &str = ">>>>> Patch Apply Failed";
const TIMED_OUT: &str = ">>>>> Tests Timed Out";
const ERRORED: &str = ">>>>> Tests Errored";

/// Records what the export needs of each instance: its model, its patch (in the log store)
/// and its two test lists.
pub(crate) fn record_inputs(store: &Store, instances: &[Instance]) -> Result<(), StoreError> {
    let db: &reprorun_pipeline::store::Db = store;
    let err = db.err();
    let conn = store.conn();
    conn.execute_batch(INPUTS_SQL)
        .map_err(|e| StoreError::Db(err(e)))?;
    for i in instances {
        let patch = store.put_log(i.model_patch.as_bytes())?;
        conn.execute(
            "INSERT OR REPLACE INTO swebench_inputs VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                i.instance_id,
                i.model_name,
                patch,
                serde_json::to_string(&i.fail_to_pass).unwrap_or_else(|_| "[]".into()),
                serde_json::to_string(&i.pass_to_pass).unwrap_or_else(|_| "[]".into()),
            ],
        )
        .map_err(|e| StoreError::Db(err(e)))?;
    }
    Ok(())
}

/// The study's run id: made once, from the study's start (`reprorun-2026-12-07T104839Z`).
pub(crate) fn run_id(store: &Store) -> Result<String, StoreError> {
    let started: i64 = match store.meta("started_at")?.and_then(|s| s.parse().ok()) {
        Some(s) => s,
        None => reprorun_pipeline::unix_now_ms() / 1000,
    };
    let stamp = reprorun_runtime::determinism::date::rfc3339_secs(started).replace(':', "");
    store.meta_or_set("run_id", &format!("reprorun-{stamp}"))
}

/// SWE-bench's outcome of one instance's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Class {
    Resolved,
    Unresolved,
    /// No report: the patch did not apply, the run timed out or could not run, or none of
    /// the listed tests appears in its output.
    Error,
    EmptyPatch,
}

/// One instance's files.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct InstanceFiles {
    pub instance_id: String,
    pub model: String,
    pub class: Class,
    pub patch: String,
    /// `None` for an empty patch (SWE-bench writes nothing then).
    pub test_output: Option<Vec<u8>>,
    /// `None` unless resolved or unresolved: SWE-bench counts an instance without a report
    /// as an error.
    pub report: Option<Value>,
}

/// The export, resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Export {
    pub run_id: String,
    pub instances: Vec<InstanceFiles>,
    /// Instances with no run of the asked arm and index (a study not finished).
    pub not_run: Vec<String>,
}

/// Whether a run's graded tests show none of the listed tests at all — the run is an error,
/// not an outcome, as SWE-bench's `error_ids`: the same rule as the `error` class
/// (`outcome::Grade::error`, recorded as `Infra::NoTests`), for runs recorded before it.
pub(crate) fn no_listed_test_found(tests: &Tests, listed: &[&str]) -> bool {
    let aliases = crate::runners::Aliases::new(tests);
    !listed.is_empty()
        && listed
            .iter()
            .all(|t| outcome::lookup(tests, &aliases, t).is_none())
}

/// SWE-bench's per-test report: each list split into the tests that passed and the rest.
fn tests_status(tests: &Tests, f2p: &[String], p2p: &[String]) -> Value {
    let aliases = crate::runners::Aliases::new(tests);
    let split = |list: &[String]| {
        let (ok, bad): (Vec<&String>, Vec<&String>) = list.iter().partition(|t| {
            outcome::lookup(tests, &aliases, t).is_some_and(outcome::Status::passes)
        });
        json!({"success": ok, "failure": bad})
    };
    let none = json!({"success": [], "failure": []});
    json!({
        "FAIL_TO_PASS": split(f2p),
        "PASS_TO_PASS": split(p2p),
        "FAIL_TO_FAIL": none,
        "PASS_TO_FAIL": none,
    })
}

/// One instance's inputs as the store keeps them.
struct Inputs {
    model: String,
    patch: String,
    f2p: Vec<String>,
    p2p: Vec<String>,
}

/// Resolves the export of `arm`'s run `idx` from the study at `db`.
pub(crate) fn resolve(store: &Store, db: &Path, arm: Arm, idx: u32) -> Result<Export, ExportError> {
    let inputs = read_inputs(store, db)?;
    let run_id = run_id(store)?;
    let run_id = if (arm, idx) == (Arm::Shim, 0) {
        run_id
    } else {
        format!("{run_id}.{}.{idx}", arm.name())
    };
    let rows: BTreeMap<String, RunRow> = store
        .rows()?
        .into_iter()
        .filter(|r| r.arm == arm && r.idx == idx)
        .map(|r| (r.instance_id.clone(), r))
        .collect();
    let log = |id: &str, digest: &str| {
        store.log(digest).ok_or_else(|| ExportError::MissingLog {
            db: db.to_path_buf(),
            id: id.to_string(),
            digest: digest.to_string(),
        })
    };
    let mut out = Export {
        run_id,
        instances: Vec::new(),
        not_run: Vec::new(),
    };
    for (id, i) in inputs {
        check_name("instance id", &id)?;
        let model = model_dir(&i.model);
        check_name("model name", &model)?;
        let empty = i.patch.trim().is_empty();
        let Some(row) = rows.get(&id) else {
            if empty {
                out.instances
                    .push(files(id, model, i.patch, Class::EmptyPatch, None, None));
            } else {
                out.not_run.push(id);
            }
            continue;
        };
        if empty {
            out.instances
                .push(files(id, model, i.patch, Class::EmptyPatch, None, None));
            continue;
        }
        let mut text = Vec::new();
        if let Some(kind) = row.infra {
            text.extend_from_slice(marker(kind).as_bytes());
            text.push(b'\n');
        }
        text.extend_from_slice(format!("{START}\n").as_bytes());
        text.extend(log(&id, &row.stdout_sha256)?);
        text.extend(log(&id, &row.stderr_sha256)?);
        text.extend_from_slice(format!("\n{END}\n").as_bytes());
        let tests: Tests = serde_json::from_str(&row.tests).unwrap_or_default();
        let listed: Vec<&str> = i.f2p.iter().chain(&i.p2p).map(String::as_str).collect();
        let class = if row.infra.is_some() || no_listed_test_found(&tests, &listed) {
            Class::Error
        } else if row.resolved {
            Class::Resolved
        } else {
            Class::Unresolved
        };
        let report = (class != Class::Error).then(|| {
            json!({ id.clone(): {
                "patch_is_None": false,
                "patch_exists": true,
                "patch_successfully_applied": true,
                "resolved": class == Class::Resolved,
                "tests_status": tests_status(&tests, &i.f2p, &i.p2p),
            }})
        });
        out.instances
            .push(files(id, model, i.patch, class, Some(text), report));
    }
    Ok(out)
}

fn files(
    instance_id: String,
    model: String,
    patch: String,
    class: Class,
    test_output: Option<Vec<u8>>,
    report: Option<Value>,
) -> InstanceFiles {
    InstanceFiles {
        instance_id,
        model,
        class,
        patch,
        test_output,
        report,
    }
}

fn marker(kind: Infra) -> &'static str {
    match kind {
        Infra::PatchApply => APPLY_FAILED,
        Infra::Timeout => TIMED_OUT,
        Infra::Oom | Infra::Runtime | Infra::NoTests => ERRORED,
    }
}

/// The model's directory name, as SWE-bench makes it.
fn model_dir(model: &str) -> String {
    if model.is_empty() {
        "unknown_model".into()
    } else {
        model.replace('/', "__")
    }
}

/// A name that becomes one directory: no separator, not `.` or `..`, no NUL.
fn check_name(what: &'static str, name: &str) -> Result<(), ExportError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(ExportError::Name {
            what,
            name: name.to_string(),
        });
    }
    Ok(())
}

fn read_inputs(store: &Store, db: &Path) -> Result<BTreeMap<String, Inputs>, ExportError> {
    let fail = |step: &'static str| {
        move |source| ExportError::Db {
            db: db.to_path_buf(),
            step,
            source,
        }
    };
    let conn = store.conn();
    let has = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'swebench_inputs'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(fail("read the schema"))?;
    if has == 0 {
        return Err(ExportError::NoInputs(db.to_path_buf()));
    }
    let mut stmt = conn
        .prepare("SELECT instance_id, model_name, model_patch_sha256, fail_to_pass, pass_to_pass FROM swebench_inputs ORDER BY instance_id")
        .map_err(fail("read swebench_inputs"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })
        .map_err(fail("read swebench_inputs"))?;
    let mut out = BTreeMap::new();
    for row in rows {
        let (id, model, digest, f2p, p2p) = row.map_err(fail("read swebench_inputs"))?;
        let patch = store.log(&digest).ok_or_else(|| ExportError::MissingLog {
            db: db.to_path_buf(),
            id: id.clone(),
            digest: digest.clone(),
        })?;
        out.insert(
            id,
            Inputs {
                model,
                patch: String::from_utf8_lossy(&patch).into_owned(),
                f2p: serde_json::from_str(&f2p).unwrap_or_default(),
                p2p: serde_json::from_str(&p2p).unwrap_or_default(),
            },
        );
    }
    Ok(out)
}

impl Export {
    /// SWE-bench's run summary of each model (`make_run_report`'s fields).
    pub(crate) fn summaries(&self) -> BTreeMap<String, Value> {
        let mut models: BTreeMap<&str, Vec<&InstanceFiles>> = BTreeMap::new();
        for i in &self.instances {
            models.entry(&i.model).or_default().push(i);
        }
        let total = self.instances.len() + self.not_run.len();
        models
            .into_iter()
            .map(|(model, insts)| {
                let ids = |c: Class| -> Vec<&str> {
                    insts
                        .iter()
                        .filter(|i| i.class == c)
                        .map(|i| i.instance_id.as_str())
                        .collect()
                };
                let mut errors: BTreeSet<&str> = ids(Class::Error).into_iter().collect();
                errors.extend(self.not_run.iter().map(String::as_str));
                let completed: Vec<&str> = insts
                    .iter()
                    .filter(|i| i.report.is_some())
                    .map(|i| i.instance_id.as_str())
                    .collect();
                let submitted: BTreeSet<&str> = insts
                    .iter()
                    .map(|i| i.instance_id.as_str())
                    .chain(self.not_run.iter().map(String::as_str))
                    .collect();
                let (resolved, unresolved, empty) = (
                    ids(Class::Resolved),
                    ids(Class::Unresolved),
                    ids(Class::EmptyPatch),
                );
                let summary = json!({
                    "total_instances": total,
                    "submitted_instances": submitted.len(),
                    "completed_instances": completed.len(),
                    "resolved_instances": resolved.len(),
                    "unresolved_instances": unresolved.len(),
                    "empty_patch_instances": empty.len(),
                    "error_instances": errors.len(),
                    "completed_ids": completed,
                    "incomplete_ids": Vec::<&str>::new(),
                    "empty_patch_ids": empty,
                    "submitted_ids": submitted,
                    "resolved_ids": resolved,
                    "unresolved_ids": unresolved,
                    "error_ids": errors,
                    "schema_version": 2,
                    "unstopped_instances": 0,
                    "unstopped_containers": Vec::<&str>::new(),
                    "unremoved_images": Vec::<&str>::new(),
                });
                (model.to_string(), summary)
            })
            .collect()
    }

    /// Where `id`'s logs are, relative to the export's directory.
    pub(crate) fn instance_dir(&self, model: &str, id: &str) -> PathBuf {
        Path::new("logs/run_evaluation")
            .join(&self.run_id)
            .join(model)
            .join(id)
    }
}

/// Writes the export under `dir`; returns the summaries' paths.
pub(crate) fn write(export: &Export, dir: &Path) -> Result<Vec<PathBuf>, ExportError> {
    let put = |path: PathBuf, bytes: &[u8]| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ExportError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, bytes).map_err(|source| ExportError::Write { path, source })
    };
    for i in &export.instances {
        if i.class == Class::EmptyPatch {
            continue;
        }
        let d = dir.join(export.instance_dir(&i.model, &i.instance_id));
        put(d.join("patch.diff"), i.patch.as_bytes())?;
        if let Some(text) = &i.test_output {
            put(d.join("test_output.txt"), text)?;
        }
        let report = d.join("report.json");
        match &i.report {
            Some(r) => put(report, pretty(r).as_bytes())?,
            // A report of an earlier export would make this error a result.
            None => match std::fs::remove_file(&report) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ExportError::Write {
                        path: report,
                        source,
                    })
                }
            },
        }
    }
    let mut out = Vec::new();
    for (model, summary) in export.summaries() {
        let path = dir.join(format!("{model}.{}.json", export.run_id));
        put(path.clone(), pretty(&summary).as_bytes())?;
        out.push(path);
    }
    Ok(out)
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

#[cfg(test)]
#[path = "swebench_tests.rs"]
mod tests;
