//! `reprorun reproduce plan`: the study's phase-1 runs as chunk files, a manifest that lets
//! `work` rebuild each run exactly as `run`'s worker makes it, and the sbatch scripts.

use std::path::{Path, PathBuf};

use super::{ClusterError, CondSpec, Manifest, Unit, CHUNK_FORMAT, MANIFEST_FORMAT};
use crate::pipeline::cluster::{self, layout};
use crate::pipeline::store::sha256_hex;
use crate::reproduce::input;
use crate::reproduce::study::{self, Options};

/// `plan`'s options beyond `run`'s.
#[derive(Debug, Clone)]
pub(crate) struct PlanOptions {
    pub study: Options,
    pub out: PathBuf,
    pub results: PathBuf,
    /// Units per chunk; default: as few as keep the array under [`cluster::MAX_TASKS`].
    pub chunk: Option<u32>,
    /// Passed verbatim to every sbatch.
    pub sbatch_args: String,
    /// Each chunk holds one run index (the k runs of a patch are separate array tasks).
    pub spread_hosts: bool,
    /// The reprorun the scripts run (default: this binary).
    pub reprorun: PathBuf,
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn digest_of(path: &Path) -> Result<String, ClusterError> {
    let bytes = std::fs::read(path).map_err(super::read_err(path))?;
    Ok(sha256_hex(&bytes))
}

/// Writes the plan; returns the manifest.
pub(crate) fn plan(p: &PlanOptions) -> Result<Manifest, ClusterError> {
    let o = &p.study;
    if o.k == 0 {
        return Err(ClusterError::Usage("--k must be at least 1".into()));
    }
    if let Some(m) = &o.conditions.no_shim_mirror {
        crate::mirror::read_lock(m)
            .map_err(|e| ClusterError::Usage(format!("--no-shim-mirror: {e}")))?;
    }
    let input = input::load(&o.instances, &o.predictions, &o.defaults)?;
    let arms = study::arms(o);
    let mut units = Vec::new();
    for idx in 0..o.k {
        for &arm in &arms {
            for inst in &input.instances {
                units.push(Unit::new(&inst.instance_id, arm, idx));
            }
        }
    }
    let stagger_ms = o.stagger.map(|s| s.as_millis() as u64);
    let by_idx = p.spread_hosts || stagger_ms.is_some();
    let chunks = layout(&units, p.chunk, by_idx, stagger_ms);

    let out = absolute(&p.out);
    let (files, refs) = cluster::chunk_texts(&out, cluster::numbered(CHUNK_FORMAT, chunks));
    let manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        reprorun_version: env!("CARGO_PKG_VERSION").into(),
        db: absolute(&o.db),
        results: absolute(&p.results),
        k: o.k,
        arms: arms.iter().map(|a| a.name()).collect(),
        instances_sha256: digest_of(&o.instances)?,
        predictions_sha256: digest_of(&o.predictions)?,
        options_fingerprint: o.conditions.fingerprint(),
        conditions: CondSpec::of(&o.conditions),
        stagger_ms,
        spread_hosts: p.spread_hosts,
        instances: input.instances,
        without_prediction: input.without_prediction,
        chunks: refs,
    };
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    cluster::write_plan(&out, &files, &text)?.map_err(ClusterError::Usage)?;
    let exe = absolute(&p.reprorun);
    cluster::Scripts {
        pipeline: "reproduce",
        tasks: &out,
        results: &manifest.results,
        db: &manifest.db,
        reprorun: &exe,
    }
    .write(&manifest.chunks, &p.sbatch_args)?;
    Ok(manifest)
}
