//! `reprorun audit judge-plan`, then `audit work` and `audit merge` on its tasks: `audit
//! judge` on a batch cluster (`spec/cluster.md`, "The audit pipeline"). The units are the
//! recorded runs the judge has not judged; `judge-plan` reads them from the study (with the
//! findings each judge needs, copied into `results/logs/`), so a worker never opens SQLite;
//! `merge` records each judgment and its pair labels exactly once.

use reprorun_pipeline::progress::{Progress, ProgressMode};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

use super::{JudgeArgs, JudgeError};
use crate::judgment::{Judgment, PairLabel};
use crate::run::cluster::key;
use crate::run::store::{RunRow, Store};
use reprorun_pipeline::cluster::{ChunkRef, LogDir};
use reprorun_pipeline::driver::{
    write_plan, HostColumns, Merged, Pipeline, PlanFiles, Tables, Worker,
};
use reprorun_pipeline::store::Db;
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

impl reprorun_pipeline::cluster::Indexed for Unit {
    fn idx(&self) -> u32 {
        self.row.repeat
    }
}

/// What a result file of a judging holds beyond its head: the judgment and its labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Body {
    judgment: Judgment,
    labels: Vec<PairLabel>,
}

/// `results/runs/KEY.json` of a judging.
#[cfg(test)]
type Shard = reprorun_pipeline::driver::Shard<Body>;

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
    v.extend(a.keys.argv());
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
    let files = PlanFiles {
        pipeline: "audit",
        out: &out,
        results: &results,
        db: &study.db,
        reprorun: &absolute(reprorun),
        sbatch_args: &a.plan.sbatch_args,
        chunk_format: CHUNK_FORMAT,
        chunk: a.plan.chunk,
        by_idx: false,
        stagger_ms: None,
    };
    let manifest = write_plan(&files, &units, |chunks| Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: env!("CARGO_PKG_VERSION").into(),
        db: study.db.clone(),
        results: results.clone(),
        corpus,
        judge: study.name().into(),
        judge_fingerprint: super::fingerprint(&study),
        judge_args: to_argv(&a.judge),
        chunks,
    })?
    .map_err(JudgeError::Usage)?;
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
    jobs: usize,
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
    let worker = Worker::start(results, &tasks.digest, chunk.index, SHARD_FORMAT)?;
    if let Some(sb) = study.sandbox.as_mut() {
        let root = worker.scratch.join("judge-root");
        crate::run::request::prepare_root(&root).map_err(|e| JudgeError::Io {
            path: root.clone(),
            source: e,
        })?;
        sb.root = Some(root);
    }
    let scratch = worker.scratch.join("judge");
    let mut progress = Progress::new(ProgressMode::for_stderr(), "judgments");
    let (done, result) = worker.run_jobs(
        &chunk.units,
        jobs,
        &mut progress,
        |u| &u.key,
        |u| format!("{} #{}", u.row.group_id, u.row.repeat),
        |u| {
            let (judgment, labels) = super::judge_run(&study, &worker.logs, &scratch, &u.row)?;
            worker.write(&u.key, Body { judgment, labels })?;
            Ok::<(), JudgeError>(())
        },
    );
    progress.finish();
    result.map_err(JudgeError::from)?;
    Ok(done)
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

impl Pipeline for Tasks {
    type Unit = Unit;
    type Body = Body;
    /// The run judged, and the judge.
    type Id = (String, u32, String);
    type Store = Store;
    type Error = JudgeError;
    const RESULT_FORMAT: &'static str = SHARD_FORMAT;
    const TABLES: Tables = Tables {
        sql: CLUSTER_SQL,
        hosts: "judgment_hosts",
        attempts: "judgment_attempts",
        keys: 3,
        host_columns: HostColumns::Short,
    };

    fn digest(&self) -> &str {
        &self.digest
    }
    fn unit_id(&self, u: &Unit) -> Self::Id {
        let judge = self.manifest.judge.clone();
        (u.row.group_id.clone(), u.row.repeat, judge)
    }
    fn body_id(b: &Body) -> Self::Id {
        let j = &b.judgment;
        (j.group_id.clone(), j.repeat, j.judge.clone())
    }
    fn key((group, repeat, _): &Self::Id) -> String {
        key(group, *repeat)
    }
    fn name(b: &Body) -> String {
        let j = &b.judgment;
        format!("judgment ({} #{} by {})", j.group_id, j.repeat, j.judge)
    }
    fn columns((group, repeat, judge): &Self::Id) -> Vec<Value> {
        vec![
            Value::Text(group.clone()),
            Value::Integer(i64::from(*repeat)),
            Value::Text(judge.clone()),
        ]
    }
    fn logs(b: &Body) -> Vec<&str> {
        let j = &b.judgment;
        let mut v = vec![j.task_sha256.as_str()];
        v.extend(j.result_sha256.as_deref());
        v.extend(j.stdout_sha256.as_deref());
        v.extend(j.stderr_sha256.as_deref());
        v
    }
    /// The judge is the plan's; the labels are its judgment's, the ones its result.json
    /// gives on its task.
    fn check(&self, b: &Body, logs: &LogDir) -> Result<(), String> {
        let j = &b.judgment;
        if j.judge != self.manifest.judge {
            return Err(format!(
                "its judgment is by {}, the plan's judge is {}",
                j.judge, self.manifest.judge
            ));
        }
        if b.labels.iter().any(|l| {
            (l.group_id.as_str(), l.repeat, l.judge.as_str())
                != (j.group_id.as_str(), j.repeat, j.judge.as_str())
        }) {
            return Err("a pair label is not of its judgment".into());
        }
        let mut labels: Vec<(String, usize, crate::judgment::Label)> = b
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
        Ok(())
    }
    fn open_store(&self, db: &Path) -> Result<Store, JudgeError> {
        let store = Store::open(db, false)?;
        let (judge, planned) = (&self.manifest.judge, &self.manifest.judge_fingerprint);
        let recorded = store.db.meta_or_set(&format!("judge:{judge}"), planned)?;
        if recorded != *planned {
            return Err(JudgeError::Usage(format!(
                "--db {}: the {judge} judge judged this study with other options ({recorded}); the plan's are {planned}",
                db.display(),
            )));
        }
        Ok(store)
    }
    fn db(store: &Store) -> &Db {
        &store.db
    }
    fn recorded(store: &Store, (group, repeat, judge): &Self::Id) -> Result<bool, JudgeError> {
        Ok(store.has_judgment(group, *repeat, judge)?)
    }
    fn record(store: &Store, b: &Body) -> Result<(), JudgeError> {
        store.insert_judgment_rows(&b.judgment, &b.labels)?;
        Ok(())
    }
}

/// Why result file `name` is not a judging of this plan, if it is not.
#[cfg(test)]
fn check(tasks: &Tasks, results: &Path, name: &str, text: &str) -> Result<Shard, String> {
    reprorun_pipeline::driver::check(tasks, &tasks.units, results, name, text)
}

/// Checks every result, records each judgment once.
pub(crate) fn merge(tasks_dir: &Path, results: &Path, db: &Path) -> Result<Merged, JudgeError> {
    let tasks = open(tasks_dir)?;
    reprorun_pipeline::driver::merge(&tasks, &tasks.units, results, db)
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
