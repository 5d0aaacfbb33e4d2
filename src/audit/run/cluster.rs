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
use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::store::{RunRow, Store};
use super::{RunArgs, RunError};
use crate::audit::corpus::Corpus;
use crate::pipeline::cluster::{self, ChunkRef, LogDir};
use crate::pipeline::host::Host;
use crate::pipeline::pool::Pool;
use crate::pipeline::progress::{Progress, ProgressMode};
use crate::pipeline::store::sha256_hex;

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
        crate::pipeline::unit::file_name_part(group_id),
        &sha256_hex(group_id.as_bytes())[..8],
    )
}

/// `tasks/chunks/NNNN.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Chunk {
    pub format: String,
    pub index: u32,
    pub units: Vec<Unit>,
}

/// `results/runs/KEY.json`: one finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Shard {
    pub format: String,
    pub manifest_sha256: String,
    pub key: String,
    pub chunk: u32,
    pub row: RunRow,
    pub host: Host,
    pub finished_at: i64,
}

/// `reprorun audit plan` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes DIR/manifest.json, DIR/chunks/NNNN.json, DIR/submit.sh (sbatch --array over the chunks, then a merge job), DIR/task.sh and DIR/merge.sh. Exit status: 0, or 125 on bad input. Formats: spec/cluster.md."
)]
pub struct PlanArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// The tasks directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Where workers write results (default: `results` beside --out).
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Runs per chunk (array task); default: as few as keep the array under 1000 tasks.
    #[arg(long, value_name = "N")]
    pub chunk: Option<u32>,
    /// Arguments for every sbatch of submit.sh, verbatim (shell words).
    #[arg(
        long,
        value_name = "ARGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub sbatch_args: String,
}

/// `reprorun audit work` options.
#[derive(Debug, clap::Args)]
pub struct WorkArgs {
    /// The tasks directory `plan` wrote.
    #[arg(long, value_name = "DIR")]
    pub tasks: PathBuf,
    /// The chunk to run (DIR/chunks/NNNN.json).
    #[arg(long, value_name = "FILE")]
    pub chunk: PathBuf,
    /// The results directory (shared by every task).
    #[arg(long, value_name = "DIR")]
    pub results: PathBuf,
}

/// `reprorun audit merge` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "A result that does not belong to the plan is refused with one line and nothing is merged. A second result of a recorded run goes to the attempts table. Merging again adds nothing. Exit status: 0, or 125. Formats: spec/cluster.md."
)]
pub struct MergeArgs {
    /// The tasks directory `plan` wrote.
    #[arg(long, value_name = "DIR")]
    pub tasks: PathBuf,
    /// The results directory the workers wrote.
    #[arg(long, value_name = "DIR")]
    pub results: PathBuf,
    /// The study database (created, or added to).
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Print the array indices (chunks) with a run still unrecorded, comma-separated, for
    /// `sbatch --array=LIST` (an empty line when none).
    #[arg(long)]
    pub missing: bool,
    /// Print what was merged as one JSON object.
    #[arg(long)]
    pub json: bool,
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
    let out = absolute(&a.out);
    let results = match &a.results {
        Some(r) => absolute(r),
        None => out.parent().unwrap_or(Path::new("/")).join("results"),
    };
    let (files, chunks) = cluster::chunk_texts(
        &out,
        cluster::layout(&units, a.chunk, false, None)
            .into_iter()
            .enumerate()
            .map(|(i, (units, begin))| {
                let n = units.len() as u32;
                let chunk = Chunk {
                    format: CHUNK_FORMAT.into(),
                    index: i as u32,
                    units,
                };
                (chunk, n, begin)
            }),
    );
    let manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: env!("CARGO_PKG_VERSION").into(),
        db: study.db.clone(),
        results,
        corpus: absolute(&a.run.corpus),
        agent: study.agent.label(),
        repeats: a.run.repeats,
        options_fingerprint: super::fingerprint(&study, &a.run),
        run_args: to_argv(&a.run),
        chunks,
    };
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    cluster::write_plan(&out, &files, &text)?.map_err(RunError::Usage)?;
    cluster::Scripts {
        pipeline: "audit",
        tasks: &out,
        results: &manifest.results,
        db: &manifest.db,
        reprorun: &absolute(reprorun),
    }
    .write(&manifest.chunks, &a.sbatch_args)?;
    Ok(manifest)
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
        let path = dir.join("manifest.json");
        let bytes = std::fs::read(&path).map_err(cluster::read_err(&path))?;
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| format_err(&path)(format!("not an audit plan: {e}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(format_err(&path)(format!(
                "format {:?}, this reprorun reads {MANIFEST_FORMAT:?}",
                manifest.format
            )));
        }
        Ok(Tasks {
            dir: dir.to_path_buf(),
            digest: sha256_hex(&bytes),
            manifest,
        })
    }

    /// Reads chunk `file` and checks it is the manifest's chunk it claims to be.
    pub(crate) fn chunk(&self, file: &Path) -> Result<Chunk, RunError> {
        let bytes = std::fs::read(file).map_err(cluster::read_err(file))?;
        let bad = format_err(file);
        let chunk: Chunk = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if chunk.format != CHUNK_FORMAT {
            return Err(bad(format!("format {:?}", chunk.format)));
        }
        let Some(r) = self.manifest.chunks.iter().find(|c| c.index == chunk.index) else {
            return Err(bad(format!("chunk {} is not in the manifest", chunk.index)));
        };
        if r.sha256 != sha256_hex(&bytes) {
            return Err(bad(format!(
                "chunk {} differs from the one planned (digest)",
                chunk.index
            )));
        }
        for u in &chunk.units {
            if u.key != key(&u.group_id, u.repeat) || u.repeat >= self.manifest.repeats {
                return Err(bad(format!("unit {} is not a unit of the plan", u.key)));
            }
        }
        Ok(chunk)
    }

    /// Every planned unit by key, with its chunk index.
    pub(crate) fn units(&self) -> Result<BTreeMap<String, (u32, Unit)>, RunError> {
        let mut out = BTreeMap::new();
        for r in &self.manifest.chunks {
            let chunk = self.chunk(&self.dir.join(cluster::chunk_file(r.index)))?;
            for u in chunk.units {
                out.insert(u.key.clone(), (chunk.index, u));
            }
        }
        Ok(out)
    }
}

/// What a `work` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Done {
    pub ran: u32,
    pub skipped: u32,
    pub stopped: bool,
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
    cluster::catch_stop()?;
    let host = Host::current();
    let scratch = cluster::scratch_dir(&host);
    let logs = LogDir(a.results.join("logs"));
    if study.sandbox.root.is_some() {
        // The agent's root is the node's, beside the runs' scratch.
        let root = scratch.join("agent-root");
        super::request::prepare_root(&root).map_err(|e| RunError::Setup {
            group: "-".into(),
            step: "agent root",
            cause: e.to_string(),
        })?;
        study.sandbox.root = Some(root);
    }
    let mut progress = Progress::new(ProgressMode::for_stderr(), "runs");
    let mut pool = Pool {
        workers: 1,
        close_in_worker: Vec::new(),
        progress: &mut progress,
    };
    let mut done = Done::default();
    let mut result = Ok(());
    for u in &chunk.units {
        if cluster::stopped() {
            done.stopped = true;
            break;
        }
        if cluster::result_path(&a.results, &u.key).exists() {
            done.skipped += 1;
            continue;
        }
        let Some(group) = study
            .corpus
            .manifest
            .groups
            .iter()
            .find(|g| g.group_id == u.group_id)
        else {
            result = Err(RunError::Usage(format!(
                "unit {}: no group {} in the corpus",
                u.key, u.group_id
            )));
            break;
        };
        result = pool
            .run(
                vec![u.clone()],
                |_| 0,
                |u| format!("{} #{}", u.group_id, u.repeat),
                |u| {
                    let row =
                        super::run_one(&study, &logs, &scratch.join("runs"), group, u.repeat)?;
                    let shard = Shard {
                        format: SHARD_FORMAT.into(),
                        manifest_sha256: tasks.digest.clone(),
                        key: u.key.clone(),
                        chunk: chunk.index,
                        row,
                        host: host.clone(),
                        finished_at: crate::pipeline::unix_now_ms() / 1000,
                    };
                    let text = serde_json::to_string_pretty(&shard).unwrap_or_default() + "\n";
                    cluster::write_result(&a.results, &u.key, text.as_bytes(), &host.job)?;
                    Ok::<(), RunError>(())
                },
            )
            .map_err(RunError::from);
        if result.is_err() {
            break;
        }
        done.ran += 1;
    }
    progress.finish();
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    done.stopped |= cluster::stopped();
    Ok(done)
}

/// What a merge did, and what is still to run.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Merged {
    pub inserted: u32,
    pub attempts: u32,
    pub already: u32,
    #[serde(flatten)]
    pub coverage: cluster::Coverage,
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
CREATE TABLE IF NOT EXISTS run_attempts (
    shard_sha256 TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    shard TEXT NOT NULL
);
";

fn logs_of(r: &RunRow) -> Vec<&str> {
    let mut v = vec![r.stdout_sha256.as_str(), r.stderr_sha256.as_str()];
    v.extend(r.findings_sha256.as_deref());
    v.extend(r.raw_sha256.as_deref());
    v
}

/// Why result file `name` (with `text`) is not a result of this plan, if it is not.
pub(crate) fn check(
    tasks: &Tasks,
    units: &BTreeMap<String, (u32, Unit)>,
    results: &Path,
    name: &str,
    text: &str,
) -> Result<Shard, String> {
    let shard: Shard = serde_json::from_str(text).map_err(|e| format!("not a result file: {e}"))?;
    if shard.format != SHARD_FORMAT {
        return Err(format!(
            "format {:?}, expected {SHARD_FORMAT:?}",
            shard.format
        ));
    }
    if shard.manifest_sha256 != tasks.digest {
        return Err("made under another plan (its manifest digest differs)".into());
    }
    let Some((chunk, _)) = units.get(&shard.key) else {
        return Err(format!("unknown unit {}: not in the manifest", shard.key));
    };
    let r = &shard.row;
    if key(&r.group_id, r.repeat) != shard.key {
        return Err(format!(
            "its run ({} #{}) is not unit {}",
            r.group_id, r.repeat, shard.key
        ));
    }
    if *chunk != shard.chunk {
        return Err(format!(
            "unit {} is in chunk {chunk}, not {}",
            shard.key, shard.chunk
        ));
    }
    if !cluster::names_unit(name, &shard.key) {
        return Err(format!("the file name does not name unit {}", shard.key));
    }
    let logs = LogDir(results.join("logs"));
    for d in logs_of(r) {
        logs.check(d)?;
    }
    Ok(shard)
}

/// One checked result into the study: the run, an attempt, or nothing (merged before).
fn merge_one(
    store: &Store,
    results: &Path,
    text: &str,
    shard: &Shard,
    m: &mut Merged,
) -> Result<(), RunError> {
    let db = &store.db;
    let digest = sha256_hex(text.as_bytes());
    let seen = db
        .conn()
        .query_row(
            "SELECT 1 FROM run_hosts WHERE shard_sha256 = ?1 UNION SELECT 1 FROM run_attempts WHERE shard_sha256 = ?1",
            params![digest],
            |_| Ok(()),
        )
        .optional()
        .map_err(db.err())?
        .is_some();
    if seen {
        m.already += 1;
        return Ok(());
    }
    let r = &shard.row;
    let logs = LogDir(results.join("logs"));
    for d in logs_of(r) {
        // Checked above; read again so what is stored is what is read now.
        let bytes = logs.check(d).map_err(|reason| RunError::Refused {
            path: results.join("logs").join(d),
            reason: format!("changed while merging: {reason}"),
        })?;
        db.put_log(&bytes)?;
    }
    let tx = db.conn().unchecked_transaction().map_err(db.err())?;
    if store.has_run(&r.group_id, r.repeat)? {
        tx.execute(
            "INSERT OR IGNORE INTO run_attempts VALUES (?1, ?2, ?3, ?4)",
            params![digest, r.group_id, r.repeat, text],
        )
        .map_err(db.err())?;
        m.attempts += 1;
    } else {
        store.insert(r)?;
        let h = &shard.host;
        tx.execute(
            "INSERT INTO run_hosts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                r.group_id,
                r.repeat,
                digest,
                h.hostname,
                h.kernel,
                h.cpu_model,
                h.cpus,
                h.mem_bytes as i64,
                h.os,
                h.machine_id,
                h.reprorun_version,
                h.job
            ],
        )
        .map_err(db.err())?;
        m.inserted += 1;
    }
    tx.commit().map_err(db.err())?;
    Ok(())
}

/// Checks every result (the first that fails refuses all), merges those not merged, sets
/// the study meta, and says what is missing.
pub(crate) fn merge(tasks_dir: &Path, results: &Path, db: &Path) -> Result<Merged, RunError> {
    let tasks = Tasks::open(tasks_dir)?;
    let units = tasks.units()?;
    let mut checked = Vec::new();
    for name in cluster::result_names(results)? {
        let path = results.join("runs").join(&name);
        let text = std::fs::read_to_string(&path).map_err(cluster::read_err(&path))?;
        let shard = check(&tasks, &units, results, &name, &text)
            .map_err(|reason| RunError::Refused { path, reason })?;
        checked.push((text, shard));
    }
    // The first result of a run is the run; later ones are attempts.
    checked.sort_by(|(_, a), (_, b)| {
        (&a.key, a.row.started_at, a.finished_at).cmp(&(&b.key, b.row.started_at, b.finished_at))
    });
    let lock = crate::pipeline::store::lock(db)?;
    let store = Store::open(db, true)?;
    store
        .db
        .check_options(&tasks.manifest.options_fingerprint)?;
    store
        .db
        .set_meta("corpus", &tasks.manifest.corpus.to_string_lossy())?;
    store.db.set_meta("agent", &tasks.manifest.agent)?;
    store
        .db
        .conn()
        .execute_batch(CLUSTER_SQL)
        .map_err(store.db.err())?;
    let mut m = Merged::default();
    for (text, shard) in &checked {
        merge_one(&store, results, text, shard, &mut m)?;
    }
    let mut recorded = Vec::new();
    for (chunk, u) in units.values() {
        recorded.push((*chunk, store.has_run(&u.group_id, u.repeat)?));
    }
    m.coverage = cluster::coverage(recorded);
    drop(lock);
    Ok(m)
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
