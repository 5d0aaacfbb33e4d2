//! `reprorun audit plan|work|merge`: `audit run` on a batch cluster, the way `reproduce
//! plan|work|merge` runs a study (`spec/cluster.md`, "The audit pipeline"). `plan` writes
//! one unit per (snapshot group, repeat) into chunk files with a manifest that carries the
//! `audit run` options; each array task runs `work` over one chunk, making each run as
//! `audit run`'s worker does, and writes `results/runs/KEY.json` (the row and the host)
//! with the logs in `results/logs/` (never SQLite); `merge`, the one writer, checks every
//! result against the plan and records each run exactly once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::{Deserialize, Serialize};

use super::{RunArgs, RunError};
use crate::corpus::Corpus;
use reprorun_pipeline::cluster::{self, ChunkRef};
use reprorun_pipeline::cluster_args::PlanOut;
pub(crate) use reprorun_pipeline::cluster_args::{MergeArgs, WorkArgs};
use reprorun_pipeline::driver::{write_plan, PlanFiles, Worker};
use reprorun_pipeline::progress::{Progress, ProgressMode};
use reprorun_pipeline::store::sha256_hex;
use reprorun_pipeline::tasks::{self, Done};

/// `tasks/manifest.json`'s format.
pub(crate) const MANIFEST_FORMAT: &str = "reprorun-audit-tasks/1";
/// `tasks/chunks/NNNN.json`'s format.
pub(crate) const CHUNK_FORMAT: &str = "reprorun-audit-chunk/1";
/// `results/runs/KEY.json`'s format.
pub(crate) const SHARD_FORMAT: &str = "reprorun-audit-result/1";

/// `tasks/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub format: String,
    pub reprorun_version: String,
    /// The study database `merge` writes.
    pub db: PathBuf,
    pub results: PathBuf,
    /// The corpus (absolute), as the study meta records it.
    pub corpus: PathBuf,
    /// The agent's label (the study meta `agent`).
    pub agent: String,
    pub repeats: u32,
    /// What the database's options check compares (`audit run`'s fingerprint).
    pub options_fingerprint: String,
    /// The `audit run` options, as arguments: `work` resolves them again on the node and
    /// refuses to run when they no longer give `options_fingerprint`.
    pub run_args: Vec<String>,
    /// `--spread-hosts`: each chunk holds one repeat (absent in older plans: false).
    #[serde(default)]
    pub spread_hosts: bool,
    pub chunks: Vec<ChunkRef>,
}

/// One run to make: a snapshot group and a repeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Unit {
    pub key: String,
    pub group_id: String,
    pub repeat: u32,
}

impl cluster::Indexed for Unit {
    fn idx(&self) -> u32 {
        self.repeat
    }
}

/// A run's key, a file name: `<group id, file-safe>.<8 hex of its sha256>.<repeat>`.
pub(crate) fn key(group_id: &str, repeat: u32) -> String {
    format!(
        "{}.{}.{repeat}",
        reprorun_pipeline::unit::file_name_part(group_id),
        &sha256_hex(group_id.as_bytes())[..8],
    )
}

/// `tasks/chunks/NNNN.json`.
pub(crate) type Chunk = reprorun_pipeline::cluster::Chunk<Unit>;

/// `results/runs/KEY.json`: one finished run.
#[cfg(test)]
pub(crate) type Shard = reprorun_pipeline::driver::Shard<merging::Body>;

/// `reprorun audit plan` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes DIR/manifest.json, DIR/chunks/NNNN.json, DIR/submit.sh (sbatch --array over the chunks, then a merge job), DIR/task.sh and DIR/merge.sh. Exit status: 0, or 125 on bad input. Formats: spec/cluster.md."
)]
pub struct PlanArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub plan: PlanOut,
    /// One repeat per chunk: the repeats of a snapshot group are separate array tasks, so
    /// Slurm can place them on different nodes (the hosts are recorded in `run_hosts`).
    #[arg(long)]
    pub spread_hosts: bool,
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `args` as the arguments that give them again (paths absolute; `--jobs` and `--json`,
/// which do not shape a run, left out).
pub(crate) fn to_argv(a: &RunArgs) -> Vec<String> {
    let mut v = vec![
        "--corpus".to_string(),
        absolute(&a.corpus).to_string_lossy().into_owned(),
        "--db".into(),
        absolute(&a.db).to_string_lossy().into_owned(),
        "--repeats".into(),
        a.repeats.to_string(),
        "--timeout".into(),
        format!("{}ms", a.timeout.as_millis()),
        "--max-turns".into(),
        a.max_turns.to_string(),
    ];
    if let Some(k) = clap::ValueEnum::to_possible_value(&a.agent) {
        v.extend(["--agent".into(), k.get_name().to_string()]);
    }
    let mut opt = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            v.extend([flag.to_string(), value]);
        }
    };
    let path = |p: &Option<PathBuf>| p.as_deref().map(|p| absolute(p).to_string_lossy().into());
    opt("--agent-cmd", a.agent_cmd.clone());
    opt("--memory", a.memory.map(|m| m.to_string()));
    opt("--pids", a.pids.map(|m| m.to_string()));
    opt("--agent-root", path(&a.agent_root));
    opt("--image", a.image.clone());
    opt("--store", path(&a.store));
    opt("--model", a.model.clone());
    opt("--model-base-url", a.model_base_url.clone());
    opt("--prices", path(&a.prices));
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
    if a.no_paper {
        v.push("--no-paper".into());
    }
    if a.no_order_instruction {
        v.push("--no-order-instruction".into());
    }
    v
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct ReRun {
    #[command(flatten)]
    run: RunArgs,
}

/// The `audit run` options a manifest carries, parsed again.
pub(crate) fn from_argv(argv: &[String]) -> Result<RunArgs, String> {
    ReRun::try_parse_from(argv)
        .map(|r| r.run)
        .map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string())
}

/// Writes the plan; returns the manifest.
pub(crate) fn plan(a: &PlanArgs, reprorun: &Path) -> Result<Manifest, RunError> {
    let corpus = Corpus::open(&a.run.corpus)?;
    let study = super::resolve(&a.run.corpus, &a.run, corpus)?;
    let mut units = Vec::new();
    for repeat in 0..a.run.repeats {
        for g in &study.corpus.manifest.groups {
            units.push(Unit {
                key: key(&g.group_id, repeat),
                group_id: g.group_id.clone(),
                repeat,
            });
        }
    }
    let out = absolute(&a.plan.out);
    let results = match &a.plan.results {
        Some(r) => absolute(r),
        None => out.parent().unwrap_or(Path::new("/")).join("results"),
    };
    let files = PlanFiles {
        pipeline: "audit",
        out: &out,
        results: &results,
        db: &study.db,
        reprorun: &absolute(reprorun),
        sbatch_args: &a.plan.sbatch_args,
        chunk_format: CHUNK_FORMAT,
        chunk: a.plan.chunk,
        by_idx: a.spread_hosts,
        stagger_ms: None,
    };
    let manifest = write_plan(&files, &units, |chunks| Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: env!("CARGO_PKG_VERSION").into(),
        db: study.db.clone(),
        results: results.clone(),
        corpus: absolute(&a.run.corpus),
        agent: study.agent.label(),
        repeats: a.run.repeats,
        options_fingerprint: super::fingerprint(&study, &a.run),
        run_args: to_argv(&a.run),
        spread_hosts: a.spread_hosts,
        chunks,
    })?
    .map_err(RunError::Usage)?;
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

/// A planned audit: the manifest, its digest, every unit by key with its chunk.
pub(crate) struct Tasks {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub digest: String,
}

fn format_err(path: &Path) -> impl Fn(String) -> RunError + '_ {
    move |reason| RunError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

impl Tasks {
    pub(crate) fn open(dir: &Path) -> Result<Tasks, RunError> {
        let (manifest, digest) = tasks::open::<Manifest>(dir)?;
        Ok(Tasks {
            dir: dir.to_path_buf(),
            digest,
            manifest,
        })
    }

    /// Whether `u` is a unit this plan can hold: its key its own, its repeat planned.
    fn is_unit(&self, u: &Unit) -> bool {
        u.key == key(&u.group_id, u.repeat) && u.repeat < self.manifest.repeats
    }

    /// Reads chunk `file` and checks it is the manifest's chunk it claims to be.
    pub(crate) fn chunk(&self, file: &Path) -> Result<Chunk, RunError> {
        Ok(tasks::chunk(&self.manifest, file, |u| self.is_unit(u))?)
    }

    /// Every planned unit by key, with its chunk index.
    pub(crate) fn units(&self) -> Result<BTreeMap<String, (u32, Unit)>, RunError> {
        Ok(tasks::units(&self.manifest, &self.dir, |u| {
            self.is_unit(u)
        })?)
    }
}

/// Makes the chunk's runs that have no result yet.
pub(crate) fn work(a: &WorkArgs) -> Result<Done, RunError> {
    let tasks = Tasks::open(&a.tasks)?;
    let chunk = tasks.chunk(&a.chunk)?;
    let args = from_argv(&tasks.manifest.run_args)
        .map_err(|e| format_err(&a.tasks.join("manifest.json"))(format!("run_args: {e}")))?;
    let corpus = Corpus::open(&args.corpus)?;
    let mut study = super::resolve(&args.corpus, &args, corpus)?;
    if super::fingerprint(&study, &args) != tasks.manifest.options_fingerprint {
        return Err(RunError::Usage(format!(
            "{}: the corpus or the agent's configuration differs from the plan's on this node; plan again",
            a.tasks.display()
        )));
    }
    let worker = Worker::start(&a.results, &tasks.digest, chunk.index, SHARD_FORMAT)?;
    if study.sandbox.root.is_some() {
        // The agent's root is the node's, beside the runs' scratch.
        let root = worker.scratch.join("agent-root");
        super::request::prepare_root(&root).map_err(|e| RunError::Setup {
            group: "-".into(),
            step: "agent root",
            cause: e.into(),
        })?;
        study.sandbox.root = Some(root);
    }
    let mut progress = Progress::new(ProgressMode::for_stderr(), "runs");
    let runs = worker.scratch.join("runs");
    let groups = &study.corpus.manifest.groups;
    if let Some(u) = chunk
        .units
        .iter()
        .find(|u| !groups.iter().any(|g| g.group_id == u.group_id))
    {
        return Err(RunError::Usage(format!(
            "unit {}: no group {} in the corpus",
            u.key, u.group_id
        )));
    }
    let (done, result) = worker.run_jobs(
        &chunk.units,
        a.jobs(),
        &mut progress,
        |u| &u.key,
        |u| format!("{} #{}", u.group_id, u.repeat),
        |u| {
            let Some(group) = groups.iter().find(|g| g.group_id == u.group_id) else {
                return Err(RunError::Usage(format!("no group {}", u.group_id)));
            };
            let row = super::run_one(&study, &worker.logs, &runs, group, u.repeat)?;
            worker.write(&u.key, merging::Body { row })?;
            Ok::<(), RunError>(())
        },
    );
    progress.finish();
    result.map_err(RunError::from)?;
    Ok(done)
}

#[path = "cluster_merge.rs"]
mod merging;
#[cfg(test)]
use merging::check;
pub(crate) use merging::merge;

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
