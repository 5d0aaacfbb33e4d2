//! `reprorun audit judge-plan`, then `audit work` and `audit merge` on its tasks: `audit
//! judge` on a batch cluster (`spec/cluster.md`, "The audit pipeline"). The units are the
//! recorded runs the judge has not judged; `judge-plan` reads them from the study (with the
//! findings each judge needs, copied into `results/logs/`), so a worker never opens SQLite;
//! `merge` records each judgment and its pair labels exactly once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::{JudgeArgs, JudgeError};
use crate::judgment::{Judgment, PairLabel};
use crate::run::cluster::key;
use crate::run::store::{RunRow, Store};
use reprorun_pipeline::cluster::{self, ChunkRef, LogDir};
use reprorun_pipeline::host::Host;
use reprorun_pipeline::store::sha256_hex;
use reprorun_pipeline::tasks::{self, Done};

/// `tasks/manifest.json`'s format.
pub(crate) const MANIFEST_FORMAT: &str = "reprorun-judge-tasks/1";
const CHUNK_FORMAT: &str = "reprorun-judge-chunk/1";
const SHARD_FORMAT: &str = "reprorun-judge-result/1";

/// `tasks/manifest.json` of a judging plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub format: String,
    pub reprorun_version: String,
    pub db: PathBuf,
    pub results: PathBuf,
    /// The study's corpus (its meta `corpus`).
    pub corpus: String,
    /// The judge's name (`builtin`, `codex`, ...).
    pub judge: String,
    /// The study meta `judge:NAME` the judgments are of.
    pub judge_fingerprint: String,
    /// The `audit judge` options, as arguments.
    pub judge_args: Vec<String>,
    pub chunks: Vec<ChunkRef>,
}

/// One judging: a recorded run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Unit {
    pub key: String,
    pub row: RunRow,
}

impl cluster::Indexed for Unit {
    fn idx(&self) -> u32 {
        self.row.repeat
    }
}

/// `results/runs/KEY.json` of a judging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shard {
    format: String,
    manifest_sha256: String,
    key: String,
    chunk: u32,
    judgment: Judgment,
    labels: Vec<PairLabel>,
    host: Host,
    finished_at: i64,
}

/// `reprorun audit judge-plan` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Units: the recorded runs the judge has not judged. Writes DIR/manifest.json, DIR/chunks/NNNN.json and the sbatch scripts (run `audit work` and `audit merge`); the findings the judges read go to RESULTS/logs/. Exit status: 0, or 125 on bad input. Formats: spec/cluster.md."
)]
pub struct JudgePlanArgs {
    #[command(flatten)]
    pub judge: JudgeArgs,
    #[command(flatten)]
    pub plan: reprorun_pipeline::cluster_args::PlanOut,
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `args` as the arguments that give them again (`--jobs`, `--json` left out).
fn to_argv(a: &JudgeArgs) -> Vec<String> {
    let mut v = vec![
        "--db".to_string(),
        absolute(&a.db).to_string_lossy().into_owned(),
        "--judge".into(),
        a.judge.name().into(),
        "--timeout".into(),
        format!("{}ms", a.timeout.as_millis()),
    ];
    for (flag, value) in [
        ("--judge-cmd", &a.judge_cmd),
        ("--model", &a.model),
        ("--model-base-url", &a.model_base_url),
    ] {
        if let Some(value) = value {
            v.extend([flag.to_string(), value.clone()]);
        }
    }
    for r in &a.allow_host {
        v.extend(["--allow-host".into(), r.to_string()]);
    }
    for (name, ip) in &a.add_host {
        v.extend(["--add-host".into(), format!("{name}={ip}")]);
    }
    for name in &a.pass_env {
        v.extend(["--pass-env".into(), name.clone()]);
    }
    v
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct ReJudge {
    #[command(flatten)]
    judge: JudgeArgs,
}

fn format_err(path: &Path) -> impl Fn(String) -> JudgeError + '_ {
    move |reason| JudgeError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

/// Writes the plan; returns the manifest.
pub(crate) fn plan(a: &JudgePlanArgs, reprorun: &Path) -> Result<Manifest, JudgeError> {
    let study = super::resolve(&a.judge)?;
    let store = Store::open(&study.db, false)?;
    let corpus = store.db.meta("corpus")?.unwrap_or_default();
    let out = absolute(&a.plan.out);
    let results = match &a.plan.results {
        Some(r) => absolute(r),
        None => out.parent().unwrap_or(Path::new("/")).join("results"),
    };
    let logs = LogDir(results.join("logs"));
    let mut units = Vec::new();
    for row in store.rows()? {
        if store.has_judgment(&row.group_id, row.repeat, study.name())? {
            continue;
        }
        if let Some(sha) = &row.findings_sha256 {
            let bytes = store.db.log(sha).ok_or_else(|| {
                JudgeError::Usage(format!(
                    "run {} #{}: log {sha} is missing",
                    row.group_id, row.repeat
                ))
            })?;
            logs.put(&bytes)?;
        }
        units.push(Unit {
            key: key(&row.group_id, row.repeat),
            row,
        });
    }
    let (files, chunks) = cluster::chunk_texts(
        &out,
        cluster::numbered(
            CHUNK_FORMAT,
            cluster::layout(&units, a.plan.chunk, false, None),
        ),
    );
    let manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: env!("CARGO_PKG_VERSION").into(),
        db: study.db.clone(),
        results,
        corpus,
        judge: study.name().into(),
        judge_fingerprint: super::fingerprint(&study),
        judge_args: to_argv(&a.judge),
        chunks,
    };
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    cluster::write_plan(&out, &files, &text)?.map_err(JudgeError::Usage)?;
    cluster::Scripts {
        pipeline: "audit",
        tasks: &out,
        results: &manifest.results,
        db: &manifest.db,
        reprorun: &absolute(reprorun),
    }
    .write(&manifest.chunks, &a.plan.sbatch_args)?;
    Ok(manifest)
}

impl tasks::Plan for Manifest {
    type Unit = Unit;
    const FORMAT: &'static str = MANIFEST_FORMAT;
    const CHUNK_FORMAT: &'static str = CHUNK_FORMAT;
    fn format(&self) -> &str {
        &self.format
    }
    fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }
    fn key(u: &Unit) -> &str {
        &u.key
    }
}

/// A judging plan read back: the manifest, its digest, every unit by key with its chunk.
struct Tasks {
    manifest: Manifest,
    digest: String,
    units: BTreeMap<String, (u32, Unit)>,
}

/// Whether `u` is a judging a plan can hold: its key is its run's.
fn is_unit(u: &Unit) -> bool {
    u.key == key(&u.row.group_id, u.row.repeat)
}

fn open(dir: &Path) -> Result<Tasks, JudgeError> {
    let (manifest, digest) = tasks::open::<Manifest>(dir)?;
    let units = tasks::units(&manifest, dir, is_unit)?;
    Ok(Tasks {
        manifest,
        digest,
        units,
    })
}

/// Judges the chunk's runs that have no result yet.
pub(crate) fn work(
    tasks_dir: &Path,
    chunk_file: &Path,
    results: &Path,
) -> Result<Done, JudgeError> {
    let tasks = open(tasks_dir)?;
    let chunk = tasks::chunk(&tasks.manifest, chunk_file, is_unit)?;
    let args = ReJudge::try_parse_from(&tasks.manifest.judge_args)
        .map_err(|e| {
            format_err(tasks_dir)(format!(
                "judge_args: {}",
                e.to_string().lines().next().unwrap_or_default()
            ))
        })?
        .judge;
    let (kind, pass_env) = super::kind_and_env(&args)?;
    let mut study = super::resolve_in(
        &args,
        absolute(&args.db),
        &tasks.manifest.corpus,
        pass_env,
        kind,
    )?;
    if super::fingerprint(&study) != tasks.manifest.judge_fingerprint {
        return Err(JudgeError::Usage(format!(
            "{}: the corpus or the judge's configuration differs from the plan's on this node; plan again",
            tasks_dir.display()
        )));
    }
    cluster::catch_stop()?;
    let host = Host::current();
    let scratch = cluster::scratch_dir(&host);
    if let Some(sb) = study.sandbox.as_mut() {
        let root = scratch.join("judge-root");
        crate::run::request::prepare_root(&root).map_err(|e| JudgeError::Io {
            path: root.clone(),
            source: e,
        })?;
        sb.root = Some(root);
    }
    let logs = LogDir(results.join("logs"));
    let (done, result) = tasks::work_units(
        &chunk.units,
        results,
        |u| &u.key,
        |u| {
            let (judgment, labels) =
                super::judge_run(&study, &logs, &scratch.join("judge"), &u.row)?;
            let shard = Shard {
                format: SHARD_FORMAT.into(),
                manifest_sha256: tasks.digest.clone(),
                key: u.key.clone(),
                chunk: chunk.index,
                judgment,
                labels,
                host: host.clone(),
                finished_at: reprorun_pipeline::unix_now_ms() / 1000,
            };
            let text = serde_json::to_string_pretty(&shard).unwrap_or_default() + "\n";
            cluster::write_result(results, &u.key, text.as_bytes(), &host.job)?;
            Ok::<(), JudgeError>(())
        },
    );
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    Ok(done)
}

/// Why result file `name` is not a judging of this plan, if it is not.
fn check(tasks: &Tasks, results: &Path, name: &str, text: &str) -> Result<Shard, String> {
    let s: Shard = serde_json::from_str(text).map_err(|e| format!("not a result file: {e}"))?;
    let j = &s.judgment;
    let logs = LogDir(results.join("logs"));
    cluster::check_result(
        cluster::ResultHead {
            format: &s.format,
            manifest_sha256: &s.manifest_sha256,
            key: &s.key,
            chunk: s.chunk,
            row_key: key(&j.group_id, j.repeat),
            row_name: format!("judgment ({} #{} by {})", j.group_id, j.repeat, j.judge),
        },
        SHARD_FORMAT,
        &tasks.digest,
        |k| tasks.units.get(k).map(|(c, _)| *c),
        name,
        &logs,
        &judgment_logs(j),
    )?;
    if j.judge != tasks.manifest.judge {
        return Err(format!(
            "its judgment is by {}, the plan's judge is {}",
            j.judge, tasks.manifest.judge
        ));
    }
    if s.labels.iter().any(|l| {
        (l.group_id.as_str(), l.repeat, l.judge.as_str())
            != (j.group_id.as_str(), j.repeat, j.judge.as_str())
    }) {
        return Err("a pair label is not of its judgment".into());
    }
    // The labels are the ones its result.json gives on its task.
    let mut labels: Vec<(String, usize, crate::judgment::Label)> = s
        .labels
        .iter()
        .map(|l| (l.hidden_issue_id.clone(), l.finding_index as usize, l.label))
        .collect();
    labels.sort();
    let expected = match (j.status.as_str(), &j.result_sha256) {
        ("ok", Some(r)) => {
            let task: super::task::Task = serde_json::from_slice(&logs.check(&j.task_sha256)?)
                .map_err(|e| format!("its task.json: {e}"))?;
            super::result::validate(&logs.check(r)?, &task)
                .map_err(|e| format!("its result.json: {e}"))?
                .into_iter()
                .map(|((issue, index), label)| (issue, index, label))
                .collect()
        }
        _ => Vec::new(),
    };
    if labels != expected {
        return Err("its pair labels are not the ones its result.json gives".into());
    }
    Ok(s)
}

fn judgment_logs(j: &Judgment) -> Vec<&str> {
    let mut v = vec![j.task_sha256.as_str()];
    v.extend(j.result_sha256.as_deref());
    v.extend(j.stdout_sha256.as_deref());
    v.extend(j.stderr_sha256.as_deref());
    v
}

const CLUSTER_SQL: &str = "
CREATE TABLE IF NOT EXISTS judgment_hosts (
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    judge TEXT NOT NULL,
    shard_sha256 TEXT NOT NULL,
    hostname TEXT NOT NULL,
    machine_id TEXT NOT NULL,
    job TEXT NOT NULL,
    PRIMARY KEY (group_id, repeat, judge)
);
CREATE INDEX IF NOT EXISTS judgment_hosts_shard ON judgment_hosts (shard_sha256);
CREATE TABLE IF NOT EXISTS judgment_attempts (
    shard_sha256 TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    judge TEXT NOT NULL,
    shard TEXT NOT NULL
);
";

/// Checks every result, records each judgment once; returns (inserted, attempts, already,
/// coverage).
pub(crate) fn merge(
    tasks_dir: &Path,
    results: &Path,
    db: &Path,
) -> Result<(u32, u32, u32, cluster::Coverage), JudgeError> {
    let tasks = open(tasks_dir)?;
    let mut checked = Vec::new();
    for name in cluster::result_names(results)? {
        let path = results.join("runs").join(&name);
        let text = std::fs::read_to_string(&path).map_err(cluster::read_err(&path))?;
        let shard = check(&tasks, results, &name, &text).map_err(|reason| JudgeError::Refused {
            path: path.clone(),
            reason,
        })?;
        checked.push((sha256_hex(text.as_bytes()), text, shard));
    }
    checked.sort_by(|(_, _, a), (_, _, b)| (&a.key, a.finished_at).cmp(&(&b.key, b.finished_at)));
    let lock = reprorun_pipeline::store::lock(db)?;
    let store = Store::open(db, false)?;
    let judge = tasks.manifest.judge.clone();
    let meta = format!("judge:{judge}");
    let recorded = store
        .db
        .meta_or_set(&meta, &tasks.manifest.judge_fingerprint)?;
    if recorded != tasks.manifest.judge_fingerprint {
        return Err(JudgeError::Usage(format!(
            "--db {}: the {judge} judge judged this study with other options ({recorded}); the plan's are {}",
            db.display(),
            tasks.manifest.judge_fingerprint
        )));
    }
    let conn = store.db.conn();
    conn.execute_batch(CLUSTER_SQL).map_err(store.db.err())?;
    let (mut inserted, mut attempts, mut already) = (0, 0, 0);
    for (digest, text, s) in &checked {
        let j = &s.judgment;
        let has = store.has_judgment(&j.group_id, j.repeat, &judge)?;
        let ours = conn
            .query_row(
                "SELECT 1 FROM judgment_hosts WHERE shard_sha256 = ?1 UNION SELECT 1 FROM judgment_attempts WHERE shard_sha256 = ?1",
                params![digest],
                |_| Ok(()),
            )
            .optional()
            .map_err(store.db.err())?
            .is_some();
        if ours && has {
            already += 1;
        } else if has {
            conn.execute(
                "INSERT OR IGNORE INTO judgment_attempts VALUES (?1, ?2, ?3, ?4, ?5)",
                params![digest, j.group_id, j.repeat, judge, text],
            )
            .map_err(store.db.err())?;
            attempts += 1;
        } else {
            let logs = LogDir(results.join("logs"));
            for d in judgment_logs(j) {
                let bytes = logs.check(d).map_err(|reason| JudgeError::Refused {
                    path: logs.0.join(d),
                    reason,
                })?;
                store.db.put_log(&bytes)?;
            }
            // The host first: a merge killed between the two inserts finds it and records
            // the judgment when run again.
            conn.execute(
                "INSERT OR REPLACE INTO judgment_hosts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    j.group_id,
                    j.repeat,
                    judge,
                    digest,
                    s.host.hostname,
                    s.host.machine_id,
                    s.host.job
                ],
            )
            .map_err(store.db.err())?;
            store.insert_judgment(j, &s.labels)?;
            inserted += 1;
        }
    }
    let mut rec = Vec::new();
    for (chunk, u) in tasks.units.values() {
        rec.push((
            *chunk,
            store.has_judgment(&u.row.group_id, u.row.repeat, &judge)?,
        ));
    }
    drop(lock);
    Ok((inserted, attempts, already, cluster::coverage(rec)))
}

/// The format of the plan in `dir` (`audit work` and `merge` run either kind).
pub(crate) fn plan_format(dir: &Path) -> Option<String> {
    let bytes = std::fs::read(dir.join("manifest.json")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("format")?.as_str().map(str::to_string)
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
