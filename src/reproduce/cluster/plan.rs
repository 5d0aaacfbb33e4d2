//! `reprorun reproduce plan`: the study's phase-1 runs as chunk files, a manifest that lets
//! `work` rebuild each run exactly as `run`'s worker makes it, and the sbatch scripts.

use std::path::{Path, PathBuf};

use super::{
    chunk_file, write_err, Chunk, ChunkRef, ClusterError, CondSpec, Manifest, Unit, CHUNK_FORMAT,
    MANIFEST_FORMAT,
};
use crate::pipeline::store::sha256_hex;
use crate::reproduce::input;
use crate::reproduce::study::{self, Options};

/// Array tasks a plan keeps under by default (Slurm's default MaxArraySize is 1001).
pub(crate) const MAX_TASKS: usize = 1000;

/// `plan`'s options beyond `run`'s.
#[derive(Debug, Clone)]
pub(crate) struct PlanOptions {
    pub study: Options,
    pub out: PathBuf,
    pub results: PathBuf,
    /// Units per chunk; default: as few as keep the array under [`MAX_TASKS`].
    pub chunk: Option<u32>,
    /// Passed verbatim to every sbatch.
    pub sbatch_args: String,
    /// Each chunk holds one run index (the k runs of a patch are separate array tasks).
    pub spread_hosts: bool,
    /// The reprorun the scripts run (default: this binary).
    pub reprorun: PathBuf,
}

/// The chunks: units in `run`'s order, cut every `size`; with `by_idx`, a chunk never holds
/// two run indices. Each chunk's earliest start is its run index × `stagger_ms`.
pub(crate) fn layout(
    units: &[Unit],
    size: Option<u32>,
    by_idx: bool,
    stagger_ms: Option<u64>,
) -> Vec<(Vec<Unit>, u64)> {
    let cut = |size: usize| {
        let mut chunks: Vec<Vec<Unit>> = Vec::new();
        for u in units {
            let fresh = match chunks.last() {
                None => true,
                Some(c) => c.len() >= size || (by_idx && c[0].idx != u.idx),
            };
            if fresh {
                chunks.push(Vec::new());
            }
            if let Some(c) = chunks.last_mut() {
                c.push(u.clone());
            }
        }
        chunks
    };
    let chunks = match size {
        Some(n) => cut(n.max(1) as usize),
        None => {
            let mut n = units.len().div_ceil(MAX_TASKS).max(1);
            loop {
                let c = cut(n);
                if c.len() <= MAX_TASKS || n >= units.len() {
                    break c;
                }
                n += 1;
            }
        }
    };
    chunks
        .into_iter()
        .map(|c| {
            let begin = stagger_ms.map_or(0, |s| (s * c[0].idx as u64).div_ceil(1000));
            (c, begin)
        })
        .collect()
}

/// Quotes `s` for sh (single quotes).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `submit.sh`: one array per run of chunks with the same start time (split at the
/// cluster's MaxArraySize), then the merge job after all of them.
pub(crate) fn submit_script(m: &Manifest, tasks: &Path, reprorun: &Path, sbatch: &str) -> String {
    let mut s = String::from(
        "#!/bin/sh\n# Written by `reprorun reproduce plan` (spec/cluster.md). Submits the study's chunks as\n# Slurm job arrays and a merge job that runs after them; arguments are passed to the merge\n# job's sbatch (e.g. --wait to return when the study is merged, with merge's status).\nset -eu\n",
    );
    s.push_str(&format!(
        "TASKS={}\nRESULTS={}\nexport REPRORUN=\"${{REPRORUN:-{}}}\"\nSBATCH=\"${{SBATCH:-sbatch}}\"\n# Each sbatch is bounded (seconds); raise it for sbatch --wait.\nlimit=\"${{REPRORUN_SBATCH_TIMEOUT:-20}}\"\n",
        sh_quote(&tasks.to_string_lossy()),
        sh_quote(&m.results.to_string_lossy()),
        reprorun.to_string_lossy().replace(['"', '$', '`', '\\'], "_"),
    ));
    s.push_str(
        "max=$(timeout 20 scontrol show config 2>/dev/null | awk -F= '/^MaxArraySize/ {gsub(/ /, \"\", $2); print $2}') || max=\"\"\ncase \"$max\" in '' | *[!0-9]*) max=1000 ;; esac\n# Array indices run 0..MaxArraySize-1.\nmax=$((max - 1))\n[ \"$max\" -ge 1 ] || max=1\nmkdir -p \"$RESULTS/slurm\"\nids=\"\"\n",
    );
    s.push_str(&format!(
        "# submit FIRST LAST BEGIN: chunks FIRST..LAST, none before BEGIN seconds from now.\nsubmit() {{\n  start=$1\n  while [ \"$start\" -le \"$2\" ]; do\n    end=$((start + max - 1))\n    [ \"$end\" -le \"$2\" ] || end=$2\n    begin=\"\"\n    [ \"$3\" -eq 0 ] || begin=\"--begin=now+$3\"\n    id=$(timeout \"$limit\" $SBATCH --parsable --job-name=reprorun-work --array=0-$((end - start)) \\\n      --requeue --signal=B:TERM@120 $begin --output=\"$RESULTS/slurm/%A_%a.out\" \\\n      --export=ALL,REPRORUN_CHUNK_OFFSET=$start {sbatch} \"$TASKS/task.sh\")\n    ids=\"$ids:${{id%%;*}}\"\n    start=$((end + 1))\n  done\n}}\n",
    ));
    // Runs of chunks with one start time.
    let mut first = 0usize;
    for i in 1..=m.chunks.len() {
        if i == m.chunks.len() || m.chunks[i].begin_s != m.chunks[first].begin_s {
            s.push_str(&format!(
                "submit {} {} {}\n",
                m.chunks[first].index,
                m.chunks[i - 1].index,
                m.chunks[first].begin_s
            ));
            first = i;
        }
    }
    s.push_str(&format!(
        "echo \"reprorun: submitted array job(s) ${{ids#:}}\" >&2\ntimeout \"$limit\" $SBATCH --parsable --job-name=reprorun-merge --dependency=afterany$ids \\\n  --output=\"$RESULTS/slurm/merge-%j.out\" {sbatch} \"$@\" \"$TASKS/merge.sh\" || {{\n  # sbatch --wait returns the job's status; anything else is sbatch's own failure.\n  rc=$?; echo \"reprorun: merge job: sbatch exited $rc\" >&2; exit $rc\n}}\n"
    ));
    s
}

/// `task.sh`: one array task, `work` over chunk `SLURM_ARRAY_TASK_ID + REPRORUN_CHUNK_OFFSET`;
/// Slurm's SIGTERM (`--signal=B:TERM`, scancel, requeue) is passed on so no new run starts.
pub(crate) fn task_script(tasks: &Path, results: &Path, reprorun: &Path) -> String {
    format!(
        "#!/bin/sh\n# Written by `reprorun reproduce plan`: one array task (spec/cluster.md).\nset -u\nTASKS={}\nRESULTS={}\nREPRORUN=\"${{REPRORUN:-{}}}\"\ni=$(( ${{SLURM_ARRAY_TASK_ID:?not a Slurm array task}} + ${{REPRORUN_CHUNK_OFFSET:-0}} ))\n\"$REPRORUN\" reproduce work --tasks \"$TASKS\" --chunk \"$TASKS/chunks/$(printf %04d \"$i\").json\" --results \"$RESULTS\" &\npid=$!\ntrap 'kill -TERM $pid 2>/dev/null' TERM\nwait $pid\nrc=$?\n# A trapped signal ends the first wait early; the second returns work's own status.\nif [ $rc -gt 128 ]; then wait $pid; rc=$?; fi\nexit $rc\n",
        sh_quote(&tasks.to_string_lossy()),
        sh_quote(&results.to_string_lossy()),
        reprorun.to_string_lossy().replace(['"', '$', '`', '\\'], "_"),
    )
}

/// `merge.sh`: the merge job.
pub(crate) fn merge_script(m: &Manifest, tasks: &Path, reprorun: &Path) -> String {
    format!(
        "#!/bin/sh\n# Written by `reprorun reproduce plan`: the merge job (spec/cluster.md).\nset -u\nREPRORUN=\"${{REPRORUN:-{}}}\"\nexec \"$REPRORUN\" reproduce merge --tasks {} --results {} --db {}\n",
        reprorun.to_string_lossy().replace(['"', '$', '`', '\\'], "_"),
        sh_quote(&tasks.to_string_lossy()),
        sh_quote(&m.results.to_string_lossy()),
        sh_quote(&m.db.to_string_lossy()),
    )
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn digest_of(path: &Path) -> Result<String, ClusterError> {
    let bytes = std::fs::read(path).map_err(super::read_err(path))?;
    Ok(sha256_hex(&bytes))
}

fn write(path: &Path, text: &str, mode: u32) -> Result<(), ClusterError> {
    crate::sys::write_atomic(path, text.as_bytes(), mode).map_err(write_err(path))
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
    let mut files = Vec::new();
    let mut refs = Vec::new();
    for (i, (units, begin_s)) in chunks.into_iter().enumerate() {
        let chunk = Chunk {
            format: CHUNK_FORMAT.into(),
            index: i as u32,
            units,
        };
        let text = serde_json::to_string_pretty(&chunk).unwrap_or_default() + "\n";
        refs.push(ChunkRef {
            index: chunk.index,
            units: chunk.units.len() as u32,
            sha256: sha256_hex(text.as_bytes()),
            begin_s,
        });
        files.push((out.join(chunk_file(chunk.index)), text));
    }
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
    let path = out.join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    // A plan is made once: results made under one manifest are refused under another.
    if let Ok(old) = std::fs::read_to_string(&path) {
        if old != text {
            return Err(ClusterError::Usage(format!(
                "--out {}: holds another plan (manifest.json differs); use a new --out",
                out.display()
            )));
        }
    }
    let chunk_dir = out.join("chunks");
    std::fs::create_dir_all(&chunk_dir).map_err(write_err(&chunk_dir))?;
    for (file, chunk) in &files {
        write(file, chunk, 0o644)?;
    }
    write(&path, &text, 0o644)?;
    let exe = absolute(&p.reprorun);
    write(
        &out.join("submit.sh"),
        &submit_script(&manifest, &out, &exe, &p.sbatch_args),
        0o755,
    )?;
    write(
        &out.join("task.sh"),
        &task_script(&out, &manifest.results, &exe),
        0o755,
    )?;
    write(
        &out.join("merge.sh"),
        &merge_script(&manifest, &out, &exe),
        0o755,
    )?;
    Ok(manifest)
}
