//! What every pipeline's cluster verbs (`plan|work|merge`, `spec/cluster.md`) share: the
//! chunk layout and the chunk references of a manifest, the sbatch scripts, the result
//! writer (temp, fsync, link: never half a file, never over another), the content-addressed
//! log directory a worker writes instead of the database, node-local scratch, SIGTERM, the
//! result files a merge reads, and the chunks still missing. `reproduce` and `audit` put
//! their own units and rows in these files; nothing here knows what a unit is.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::host::Host;
use super::store::sha256_hex;

/// Array tasks a plan keeps under by default (Slurm's default MaxArraySize is 1001).
pub(crate) const MAX_TASKS: usize = 1000;

/// A file step of a cluster verb that failed.
#[derive(Debug, Error)]
pub enum FileError {
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("install the SIGTERM handler: {0}")]
    Signal(nix::errno::Errno),
}

pub fn read_err(path: &Path) -> impl Fn(std::io::Error) -> FileError + '_ {
    move |source| FileError::Read {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn write_err(path: &Path) -> impl Fn(std::io::Error) -> FileError + '_ {
    move |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// One chunk as a manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkRef {
    /// The array index (`chunks/NNNN.json`).
    pub index: u32,
    pub units: u32,
    /// sha256 of the chunk file: a chunk changed after `plan` is refused.
    pub sha256: String,
    /// Seconds after submission before which the chunk may not start (`--stagger`).
    pub begin_s: u64,
}

/// A unit's run index (reproduce: the run of a patch; audit: the repeat), which `layout`
/// keeps chunks apart by.
pub trait Indexed {
    fn idx(&self) -> u32;
}

/// The chunk file's name for array index `i`.
pub fn chunk_file(i: u32) -> String {
    format!("chunks/{i:04}.json")
}

/// The chunks: units in the pipeline's order, cut every `size`; with `by_idx`, a chunk
/// never holds two run indices. Each chunk's earliest start is its run index × `stagger_ms`.
pub fn layout<U: Indexed + Clone>(
    units: &[U],
    size: Option<u32>,
    by_idx: bool,
    stagger_ms: Option<u64>,
) -> Vec<(Vec<U>, u64)> {
    let cut = |size: usize| {
        let mut chunks: Vec<Vec<U>> = Vec::new();
        for u in units {
            let fresh = match chunks.last() {
                None => true,
                Some(c) => c.len() >= size || (by_idx && c[0].idx() != u.idx()),
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
            let begin = stagger_ms.map_or(0, |s| (s * c[0].idx() as u64).div_ceil(1000));
            (c, begin)
        })
        .collect()
}

/// Chunk files as `plan` writes them: the JSON text of each and its reference.
/// `tasks/chunks/NNNN.json` of any pipeline: its format, its array index, its units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk<U> {
    pub format: String,
    pub index: u32,
    pub units: Vec<U>,
}

/// A layout's chunks numbered in order, each with its unit count and start delay (what
/// [`chunk_texts`] takes).
pub fn numbered<U>(format: &str, layout: Vec<(Vec<U>, u64)>) -> Vec<(Chunk<U>, u32, u64)> {
    layout
        .into_iter()
        .enumerate()
        .map(|(i, (units, begin))| {
            let n = units.len() as u32;
            let chunk = Chunk {
                format: format.into(),
                index: i as u32,
                units,
            };
            (chunk, n, begin)
        })
        .collect()
}

pub fn chunk_texts<C: Serialize>(
    out: &Path,
    chunks: impl IntoIterator<Item = (C, u32, u64)>,
) -> (Vec<(PathBuf, String)>, Vec<ChunkRef>) {
    let mut files = Vec::new();
    let mut refs = Vec::new();
    for (i, (chunk, units, begin_s)) in chunks.into_iter().enumerate() {
        let text = serde_json::to_string_pretty(&chunk).unwrap_or_default() + "\n";
        refs.push(ChunkRef {
            index: i as u32,
            units,
            sha256: sha256_hex(text.as_bytes()),
            begin_s,
        });
        files.push((out.join(chunk_file(i as u32)), text));
    }
    (files, refs)
}

/// Quotes `s` for sh (single quotes).
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn exe(reprorun: &Path) -> String {
    reprorun
        .to_string_lossy()
        .replace(['"', '$', '`', '\\'], "_")
}

/// The sbatch scripts of a plan: whose verbs (`reproduce`, `audit`) they run, where.
pub struct Scripts<'a> {
    /// The `reprorun` subcommand whose `work` and `merge` the scripts run.
    pub pipeline: &'a str,
    pub tasks: &'a Path,
    pub results: &'a Path,
    pub db: &'a Path,
    pub reprorun: &'a Path,
}

impl Scripts<'_> {
    /// `submit.sh`: one array per run of chunks with the same start time (split at the
    /// cluster's MaxArraySize), then the merge job after all of them. A one-chunk plan
    /// ([`Scripts::submit_one`]): its one task merges, no merge job.
    pub fn submit(&self, chunks: &[ChunkRef], sbatch: &str) -> String {
        if let [only] = chunks {
            return self.submit_one(only, sbatch);
        }
        let mut s = format!(
            "#!/bin/sh\n# Written by `reprorun {} plan` (spec/cluster.md). Submits the study's chunks as\n# Slurm job arrays and a merge job that runs after them; arguments are passed to the merge\n# job's sbatch (e.g. --wait to return when the study is merged, with merge's status).\nset -eu\n",
            self.pipeline
        );
        s.push_str(&format!(
            "TASKS={}\nRESULTS={}\nexport REPRORUN=\"${{REPRORUN:-{}}}\"\nSBATCH=\"${{SBATCH:-sbatch}}\"\n# Each sbatch is bounded (seconds); raise it for sbatch --wait.\nlimit=\"${{REPRORUN_SBATCH_TIMEOUT:-20}}\"\n",
            sh_quote(&self.tasks.to_string_lossy()),
            sh_quote(&self.results.to_string_lossy()),
            exe(self.reprorun),
        ));
        s.push_str(
            "max=$(timeout 20 scontrol show config 2>/dev/null | awk -F= '/^MaxArraySize/ {gsub(/ /, \"\", $2); print $2}') || max=\"\"\ncase \"$max\" in '' | *[!0-9]*) max=1000 ;; esac\n# Array indices run 0..MaxArraySize-1.\nmax=$((max - 1))\n[ \"$max\" -ge 1 ] || max=1\nmkdir -p \"$RESULTS/slurm\"\nids=\"\"\n",
        );
        s.push_str(&format!(
            "# submit FIRST LAST BEGIN: chunks FIRST..LAST, none before BEGIN seconds from now.\nsubmit() {{\n  start=$1\n  while [ \"$start\" -le \"$2\" ]; do\n    end=$((start + max - 1))\n    [ \"$end\" -le \"$2\" ] || end=$2\n    begin=\"\"\n    [ \"$3\" -eq 0 ] || begin=\"--begin=now+$3\"\n    id=$(timeout \"$limit\" $SBATCH --parsable --job-name=reprorun-work --array=0-$((end - start)) \\\n      --requeue --signal=B:TERM@120 $begin --output=\"$RESULTS/slurm/%A_%a.out\" \\\n      --export=ALL,REPRORUN_CHUNK_OFFSET=$start {sbatch} \"$TASKS/task.sh\")\n    ids=\"$ids:${{id%%;*}}\"\n    start=$((end + 1))\n  done\n}}\n",
        ));
        // Runs of chunks with one start time.
        let mut first = 0usize;
        for i in 1..=chunks.len() {
            if i == chunks.len() || chunks[i].begin_s != chunks[first].begin_s {
                s.push_str(&format!(
                    "submit {} {} {}\n",
                    chunks[first].index,
                    chunks[i - 1].index,
                    chunks[first].begin_s
                ));
                first = i;
            }
        }
        s.push_str(&format!(
            "echo \"reprorun: submitted array job(s) ${{ids#:}}\" >&2\ntimeout \"$limit\" $SBATCH --parsable --job-name=reprorun-merge --dependency=afterany$ids \\\n  --output=\"$RESULTS/slurm/merge-%j.out\" {sbatch} \"$@\" \"$TASKS/merge.sh\" || {{\n  # sbatch --wait returns the job's status; anything else is sbatch's own failure.\n  rc=$?; echo \"reprorun: merge job: sbatch exited $rc\" >&2; exit $rc\n}}\n"
        ));
        s
    }

    /// `submit.sh` of a one-chunk plan (issue 50: the fixed cost of the cluster path):
    /// one array of one task, which merges after its `work` (`REPRORUN_MERGE_IN_TASK`), so
    /// neither a merge job nor `scontrol show config` (index 0 fits any MaxArraySize); the
    /// script's arguments go to that task's sbatch (`--wait` returns when it has merged).
    fn submit_one(&self, chunk: &ChunkRef, sbatch: &str) -> String {
        let begin = match chunk.begin_s {
            0 => String::new(),
            s => format!("--begin=now+{s} "),
        };
        format!(
            "#!/bin/sh\n# Written by `reprorun {p} plan` (spec/cluster.md). Submits the study's one chunk as a\n# Slurm array of one task, which merges the study when its work ends (no merge job);\n# arguments are passed to its sbatch (e.g. --wait to return when the study is merged).\nset -eu\nTASKS={}\nRESULTS={}\nexport REPRORUN=\"${{REPRORUN:-{}}}\"\nSBATCH=\"${{SBATCH:-sbatch}}\"\n# Each sbatch is bounded (seconds); raise it for sbatch --wait.\nlimit=\"${{REPRORUN_SBATCH_TIMEOUT:-20}}\"\nmkdir -p \"$RESULTS/slurm\"\ntimeout \"$limit\" $SBATCH --parsable --job-name=reprorun-work --array=0-0 \\\n  --requeue --signal=B:TERM@120 {begin}--output=\"$RESULTS/slurm/%A_%a.out\" \\\n  --export=ALL,REPRORUN_CHUNK_OFFSET={},REPRORUN_MERGE_IN_TASK=1 {sbatch} \"$@\" \"$TASKS/task.sh\" || {{\n  # sbatch --wait returns the task's status; anything else is sbatch's own failure.\n  rc=$?; echo \"reprorun: work and merge job: sbatch exited $rc\" >&2; exit $rc\n}}\n",
            sh_quote(&self.tasks.to_string_lossy()),
            sh_quote(&self.results.to_string_lossy()),
            exe(self.reprorun),
            chunk.index,
            p = self.pipeline,
        )
    }

    /// `task.sh`: one array task, `work` over chunk `SLURM_ARRAY_TASK_ID +
    /// REPRORUN_CHUNK_OFFSET`; Slurm's SIGTERM (`--signal=B:TERM`, scancel, requeue) is
    /// passed on so no new unit starts.
    pub(crate) fn task(&self) -> String {
        format!(
            "#!/bin/sh\n# Written by `reprorun {p} plan`: one array task (spec/cluster.md).\nset -u\nTASKS={}\nRESULTS={}\nREPRORUN=\"${{REPRORUN:-{}}}\"\ni=$(( ${{SLURM_ARRAY_TASK_ID:?not a Slurm array task}} + ${{REPRORUN_CHUNK_OFFSET:-0}} ))\n\"$REPRORUN\" {p} work --tasks \"$TASKS\" --chunk \"$TASKS/chunks/$(printf %04d \"$i\").json\" --results \"$RESULTS\" &\npid=$!\ntrap 'kill -TERM $pid 2>/dev/null' TERM\nwait $pid\nrc=$?\n# A trapped signal ends the first wait early; the second returns work's own status.\nif [ $rc -gt 128 ]; then wait $pid; rc=$?; fi\n# A one-chunk plan's task merges (no merge job): the first failure is its status.\nif [ \"${{REPRORUN_MERGE_IN_TASK:-}}\" = 1 ]; then\n  REPRORUN=\"$REPRORUN\" \"$TASKS/merge.sh\"; m=$?\n  [ $rc -ne 0 ] || rc=$m\nfi\nexit $rc\n",
            sh_quote(&self.tasks.to_string_lossy()),
            sh_quote(&self.results.to_string_lossy()),
            exe(self.reprorun),
            p = self.pipeline,
        )
    }

    /// `merge.sh`: the merge job.
    pub(crate) fn merge(&self) -> String {
        format!(
            "#!/bin/sh\n# Written by `reprorun {p} plan`: the merge job (spec/cluster.md).\nset -u\nREPRORUN=\"${{REPRORUN:-{}}}\"\nexec \"$REPRORUN\" {p} merge --tasks {} --results {} --db {}\n",
            exe(self.reprorun),
            sh_quote(&self.tasks.to_string_lossy()),
            sh_quote(&self.results.to_string_lossy()),
            sh_quote(&self.db.to_string_lossy()),
            p = self.pipeline,
        )
    }

    /// Writes `submit.sh`, `task.sh` and `merge.sh` into the tasks directory.
    pub fn write(&self, chunks: &[ChunkRef], sbatch: &str) -> Result<(), FileError> {
        for (name, text) in [
            ("submit.sh", self.submit(chunks, sbatch)),
            ("task.sh", self.task()),
            ("merge.sh", self.merge()),
        ] {
            let path = self.tasks.join(name);
            reprorun_runtime::sys::write_atomic(&path, text.as_bytes(), 0o755)
                .map_err(write_err(&path))?;
        }
        Ok(())
    }
}

/// Writes a plan's chunk files and then its manifest (`text`), refusing to replace another
/// plan: results made under one manifest are refused under another.
pub fn write_plan(
    out: &Path,
    files: &[(PathBuf, String)],
    manifest: &str,
) -> Result<Result<(), String>, FileError> {
    let path = out.join("manifest.json");
    if let Ok(old) = std::fs::read_to_string(&path) {
        if old != manifest {
            return Ok(Err(format!(
                "--out {}: holds another plan (manifest.json differs); use a new --out",
                out.display()
            )));
        }
    }
    let chunk_dir = out.join("chunks");
    std::fs::create_dir_all(&chunk_dir).map_err(write_err(&chunk_dir))?;
    for (file, text) in files {
        reprorun_runtime::sys::write_atomic(file, text.as_bytes(), 0o644)
            .map_err(write_err(file))?;
    }
    reprorun_runtime::sys::write_atomic(&path, manifest.as_bytes(), 0o644)
        .map_err(write_err(&path))?;
    Ok(Ok(()))
}

/// Where a unit's logs go, content-addressed: the study database's log store, or a
/// worker's [`LogDir`].
pub trait LogSink {
    /// Writes a log and returns its digest.
    fn put_log(&self, bytes: &[u8]) -> Result<String, super::store::StoreError>;
    /// A log written before, if it is there and matches its digest.
    fn log(&self, digest: &str) -> Option<Vec<u8>>;
}

impl LogSink for super::store::Db {
    fn put_log(&self, bytes: &[u8]) -> Result<String, super::store::StoreError> {
        super::store::Db::put_log(self, bytes)
    }
    fn log(&self, digest: &str) -> Option<Vec<u8>> {
        super::store::Db::log(self, digest)
    }
}

impl LogSink for LogDir {
    fn put_log(&self, bytes: &[u8]) -> Result<String, super::store::StoreError> {
        self.put(bytes)
    }
    fn log(&self, digest: &str) -> Option<Vec<u8>> {
        self.check(digest).ok()
    }
}

/// Content-addressed logs in a results directory (`results/logs/DIGEST`): what a worker
/// writes where a study run writes the database's log store.
pub struct LogDir(pub PathBuf);

impl LogDir {
    pub fn put(&self, bytes: &[u8]) -> Result<String, super::store::StoreError> {
        let digest = sha256_hex(bytes);
        let path = self.0.join(&digest);
        if !path.exists() {
            std::fs::create_dir_all(&self.0)
                .and_then(|()| reprorun_runtime::sys::write_atomic(&path, bytes, 0o644))
                .map_err(|source| super::store::StoreError::Log { path, source })?;
        }
        Ok(digest)
    }

    /// Log `d` read back, if it is there and matches its digest.
    pub fn check(&self, d: &str) -> Result<Vec<u8>, String> {
        if !is_digest(d) {
            return Err(format!("log {d:?} is not a sha256 digest"));
        }
        let bytes = std::fs::read(self.0.join(d)).map_err(|e| format!("log {d}: {e}"))?;
        if sha256_hex(&bytes) != d {
            return Err(format!("log {d} does not match its digest"));
        }
        Ok(bytes)
    }
}

pub(crate) fn is_digest(d: &str) -> bool {
    d.len() == 64
        && d.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Where the result of `key` goes.
pub fn result_path(results: &Path, key: &str) -> PathBuf {
    results.join("runs").join(format!("{key}.json"))
}

/// Writes a result file without ever replacing one: to `runs/KEY.json`, or, when that is
/// there (a requeued task that ran the same unit again), beside it as
/// `runs/KEY.JOB.MS.json`, which `merge` records as an attempt.
pub fn write_result(
    results: &Path,
    key: &str,
    bytes: &[u8],
    job: &str,
) -> Result<PathBuf, FileError> {
    let dir = results.join("runs");
    std::fs::create_dir_all(&dir).map_err(write_err(&dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{key}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(write_err(&dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(write_err(tmp.path()))?;
    let mut target = result_path(results, key);
    if let Err(e) = std::fs::hard_link(tmp.path(), &target) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(write_err(&target)(e));
        }
        let job = super::unit::file_name_part(job);
        let ms = super::unix_now_ms();
        target = dir.join(format!("{key}.{job}.{ms}.json"));
        std::fs::hard_link(tmp.path(), &target).map_err(write_err(&target))?;
    }
    // The name is durable once the directory is.
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err(&dir))?;
    Ok(target)
}

/// The names of the result files under `results/runs`, sorted (temporaries of a writer
/// still at work, or killed, start with a dot and are not results).
pub fn result_names(results: &Path) -> Result<Vec<String>, FileError> {
    let dir = results.join("runs");
    let mut names = Vec::new();
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            for e in entries {
                let name = e.map_err(read_err(&dir))?.file_name();
                let name = name.to_string_lossy().into_owned();
                if name.ends_with(".json") && !name.starts_with('.') {
                    names.push(name);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(read_err(&dir)(e)),
    }
    names.sort();
    Ok(names)
}

/// Whether result file `name` names unit `key` (`KEY.json`, or an attempt `KEY.*.json`).
pub(crate) fn names_unit(name: &str, key: &str) -> bool {
    name == format!("{key}.json") || name.starts_with(&format!("{key}."))
}

/// How many planned units are recorded, of how many, and the chunks with one missing.
#[derive(Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub recorded: u32,
    pub planned: u32,
    pub missing_chunks: Vec<u32>,
}

/// The coverage of planned units given as (chunk, recorded).
pub fn coverage(units: impl IntoIterator<Item = (u32, bool)>) -> Coverage {
    let mut c = Coverage::default();
    let mut missing = std::collections::BTreeSet::new();
    for (chunk, recorded) in units {
        c.planned += 1;
        if recorded {
            c.recorded += 1;
        } else {
            missing.insert(chunk);
        }
    }
    c.missing_chunks = missing.into_iter().collect();
    c
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGTERM and SIGINT set [`stopped`] instead of ending the process: a worker starts no
/// new unit after one.
pub fn catch_stop() -> Result<(), FileError> {
    let act = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &act) }.map_err(FileError::Signal)?;
    }
    Ok(())
}

/// Whether a SIGTERM or SIGINT came since [`catch_stop`].
pub(crate) fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Node-local scratch: `$TMPDIR` (else /tmp), never the shared filesystem.
pub fn scratch_dir(host: &Host) -> PathBuf {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(format!(
        "reprorun-work-{}-{}",
        super::unit::file_name_part(&host.job),
        std::process::id()
    ))
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

/// What every result file says of itself, checked the same way by every pipeline's merge.
pub struct ResultHead<'a> {
    pub format: &'a str,
    pub manifest_sha256: &'a str,
    /// The unit the file claims to hold.
    pub key: &'a str,
    pub chunk: u32,
    /// The key its own row makes, and how the row names itself in a message.
    pub row_key: String,
    pub row_name: String,
}

/// Why a result file `name` is not one of this plan's (`expected_format`, manifest
/// `digest`, `units`: key → chunk), if it is not; then checks `logs` are stored as named.
pub fn check_result(
    head: ResultHead,
    expected_format: &str,
    digest: &str,
    chunk_of: impl Fn(&str) -> Option<u32>,
    name: &str,
    logs: &LogDir,
    log_digests: &[&str],
) -> Result<(), String> {
    if head.format != expected_format {
        return Err(format!(
            "format {:?}, expected {expected_format:?}",
            head.format
        ));
    }
    if head.manifest_sha256 != digest {
        return Err("made under another plan (its manifest digest differs)".into());
    }
    let Some(chunk) = chunk_of(head.key) else {
        return Err(format!("unknown unit {}: not in the manifest", head.key));
    };
    if head.row_key != head.key {
        return Err(format!("its {} is not unit {}", head.row_name, head.key));
    }
    if chunk != head.chunk {
        return Err(format!(
            "unit {} is in chunk {chunk}, not {}",
            head.key, head.chunk
        ));
    }
    if !names_unit(name, head.key) {
        return Err(format!("the file name does not name unit {}", head.key));
    }
    for d in log_digests {
        logs.check(d)?;
    }
    Ok(())
}
