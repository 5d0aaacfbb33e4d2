//! `reprorun reproduce plan|work|merge`: a study on a batch cluster (Slurm) without a
//! database many nodes write. `plan` writes the units into `tasks/` (a manifest, chunk files,
//! sbatch scripts); each array task runs `work` over one chunk and writes one result file per
//! run into `results/` (never SQLite); `merge`, the one writer, checks every result against
//! the manifest and inserts it exactly once. Formats: `spec/cluster.md`.

pub(crate) mod merge;
pub(crate) mod plan;
pub(crate) mod work;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::input::Instance;
use super::runner::Conditions;
use super::store::arm_name;
use super::Arm;
use reprorun_pipeline::store::sha256_hex;
use reprorun_pipeline::tasks::{self, TasksError};
use reprorun_runtime::plan::NetChoice;

pub(crate) use reprorun_pipeline::cluster::ChunkRef;

/// `tasks/manifest.json`'s format.
pub(crate) const MANIFEST_FORMAT: &str = "reprorun-tasks/1";
/// `tasks/chunks/NNNN.json`'s format.
pub(crate) const CHUNK_FORMAT: &str = "reprorun-chunk/1";
/// `results/runs/KEY.json`'s format.
pub(crate) const SHARD_FORMAT: &str = "reprorun-result/1";

/// What stops `plan`, `work` or `merge`; each is one line for the user.
#[derive(Debug, Error)]
pub enum ClusterError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    File(#[from] reprorun_pipeline::cluster::FileError),
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error(transparent)]
    Tasks(#[from] TasksError),
    #[error(transparent)]
    Merge(#[from] reprorun_pipeline::driver::MergeError),
    #[error(transparent)]
    Input(#[from] super::input::InputError),
    #[error(transparent)]
    Store(#[from] super::store::StoreError),
    #[error(transparent)]
    Lock(#[from] reprorun_pipeline::store::LockError),
    #[error(transparent)]
    Run(Box<super::ReproduceError>),
}

/// The options that shape a run, as the manifest carries them (`Conditions`, by value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CondSpec {
    pub timeout_ms: u64,
    pub memory: Option<u64>,
    pub seed: u64,
    pub no_shim_mirror: Option<PathBuf>,
    /// `--no-shim-net` as written (`none`, `host`, `allow:...`).
    pub no_shim_net: String,
    /// `--store`.
    pub store: Option<PathBuf>,
    /// The submitting shell's environment that host-like runs take (already filtered by
    /// `runner::host_like`): every node runs them with the same.
    pub host_env: Vec<(String, String)>,
    /// `Conditions::select`: the tests each instance's variation runs are about.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub select: std::collections::BTreeMap<String, Vec<String>>,
    /// The Go build cache (`--go-cache`); off in manifests that do not say.
    #[serde(default)]
    pub go_cache: bool,
}

impl CondSpec {
    pub(crate) fn of(c: &Conditions) -> CondSpec {
        CondSpec {
            timeout_ms: c.timeout.as_millis() as u64,
            memory: c.memory,
            seed: c.seed,
            no_shim_mirror: c.no_shim_mirror.clone(),
            no_shim_net: c.no_shim_net.to_string(),
            store: c.store.clone(),
            host_env: c.host_env.clone(),
            select: c.select.clone(),
            go_cache: c.go_cache,
        }
    }

    pub(crate) fn conditions(&self) -> Result<Conditions, String> {
        Ok(Conditions {
            timeout: Duration::from_millis(self.timeout_ms),
            memory: self.memory,
            seed: self.seed,
            no_shim_mirror: self.no_shim_mirror.clone(),
            no_shim_net: NetChoice::parse(&self.no_shim_net)?,
            host_env: self.host_env.clone(),
            store: self.store.clone(),
            select: self.select.clone(),
            go_cache: self.go_cache,
        })
    }
}

/// `tasks/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub format: String,
    pub reprorun_version: String,
    /// The study database `merge` writes (the plan's `--db`).
    pub db: PathBuf,
    /// The results directory the scripts pass to `work` and `merge`.
    pub results: PathBuf,
    pub k: u32,
    pub arms: Vec<String>,
    pub instances_sha256: String,
    pub predictions_sha256: String,
    /// `Conditions::fingerprint`: what the database's options check compares.
    pub options_fingerprint: String,
    pub conditions: CondSpec,
    pub stagger_ms: Option<u64>,
    pub spread_hosts: bool,
    /// `runs` (phase 1) or `pins` (phase 2); absent in plans from before phases: `runs`.
    #[serde(default = "runs_phase")]
    pub phase: plan::Phase,
    /// The instances as `run` resolves them (paths absolute, prediction attached).
    pub instances: Vec<Instance>,
    pub without_prediction: Vec<String>,
    pub chunks: Vec<ChunkRef>,
}

fn runs_phase() -> plan::Phase {
    plan::Phase::Runs
}

/// One run to make: an instance, an arm, a run index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Unit {
    pub key: String,
    pub instance_id: String,
    #[serde(with = "arm_name")]
    pub arm: Arm,
    pub idx: u32,
}

impl reprorun_pipeline::cluster::Indexed for Unit {
    fn idx(&self) -> u32 {
        self.idx
    }
}

impl Unit {
    pub(crate) fn new(instance_id: &str, arm: Arm, idx: u32) -> Unit {
        Unit {
            key: key(instance_id, arm, idx),
            instance_id: instance_id.to_string(),
            arm,
            idx,
        }
    }
}

/// `tasks/chunks/NNNN.json`.
pub(crate) type Chunk = reprorun_pipeline::cluster::Chunk<Unit>;

/// `results/runs/KEY.json`: one finished run.
#[cfg(test)]
pub(crate) type Shard = reprorun_pipeline::driver::Shard<merge::Body>;

/// A run's key, a file name: `<instance id, file-safe>.<8 hex of its sha256>.<arm>.<idx>`.
pub(crate) fn key(instance_id: &str, arm: Arm, idx: u32) -> String {
    format!(
        "{}.{}.{}.{}",
        reprorun_pipeline::unit::file_name_part(instance_id),
        &sha256_hex(instance_id.as_bytes())[..8],
        arm.name(),
        idx
    )
}

impl reprorun_pipeline::tasks::Plan for Manifest {
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

/// A planned study: the manifest, its digest, and (once read) its units by key.
pub(crate) struct Tasks {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub digest: String,
    pub instances: BTreeMap<String, Instance>,
    pub conditions: Conditions,
}

impl Tasks {
    /// Reads and checks `dir/manifest.json`.
    pub(crate) fn open(dir: &Path) -> Result<Tasks, ClusterError> {
        let (manifest, digest) = tasks::open::<Manifest>(dir)?;
        let bad = |reason: String| ClusterError::Format {
            path: dir.join("manifest.json"),
            reason,
        };
        let conditions = manifest.conditions.conditions().map_err(&bad)?;
        if conditions.fingerprint() != manifest.options_fingerprint {
            return Err(bad(
                "the conditions do not match options_fingerprint (edited after plan?)".into(),
            ));
        }
        let instances = manifest
            .instances
            .iter()
            .map(|i| (i.instance_id.clone(), i.clone()))
            .collect();
        Ok(Tasks {
            dir: dir.to_path_buf(),
            digest,
            manifest,
            instances,
            conditions,
        })
    }

    /// Whether `u` is a unit this plan can hold: its instance is planned, its key its own.
    fn is_unit(&self, u: &Unit) -> bool {
        self.instances.contains_key(&u.instance_id) && u.key == key(&u.instance_id, u.arm, u.idx)
    }

    /// Reads chunk `file` and checks it is the manifest's chunk it claims to be.
    pub(crate) fn chunk(&self, file: &Path) -> Result<Chunk, ClusterError> {
        Ok(tasks::chunk(&self.manifest, file, |u| self.is_unit(u))?)
    }

    /// Every planned unit by key, with its chunk index.
    pub(crate) fn units(&self) -> Result<BTreeMap<String, (u32, Unit)>, ClusterError> {
        Ok(tasks::units(&self.manifest, &self.dir, |u| {
            self.is_unit(u)
        })?)
    }
}
