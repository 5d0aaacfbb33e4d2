//! A cluster plan read back (`tasks/`, `spec/cluster.md`): its manifest checked and
//! digested, each chunk checked against the manifest, and the loop `work` runs over a
//! chunk. One reader for the three plans (reproduce, audit run, audit judge); each says what
//! its manifest and units are through [`Plan`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use thiserror::Error;

use super::cluster::{chunk_file, read_err, result_path, stopped, Chunk, ChunkRef, FileError};
use super::store::sha256_hex;

/// A plan file that cannot be read, or is not what the plan says it is.
#[derive(Debug, Error)]
pub enum TasksError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
}

/// A pipeline's `tasks/manifest.json`.
pub trait Plan: DeserializeOwned {
    type Unit: DeserializeOwned;
    /// The manifest format this reprorun reads.
    const FORMAT: &'static str;
    /// The format of its chunk files.
    const CHUNK_FORMAT: &'static str;
    /// What the manifest says its format is.
    fn format(&self) -> &str;
    fn chunks(&self) -> &[ChunkRef];
    fn key(u: &Self::Unit) -> &str;
}

fn bad(path: &Path) -> impl Fn(String) -> TasksError + '_ {
    move |reason| TasksError::Format {
        path: path.to_path_buf(),
        reason,
    }
}

/// Reads `dir/manifest.json`; returns it with the sha256 of its bytes (what every result
/// made under it names).
pub fn open<M: Plan>(dir: &Path) -> Result<(M, String), TasksError> {
    let path = dir.join("manifest.json");
    let bytes = std::fs::read(&path).map_err(read_err(&path))?;
    let manifest: M =
        serde_json::from_slice(&bytes).map_err(|e| bad(&path)(format!("not a plan: {e}")))?;
    if manifest.format() != M::FORMAT {
        return Err(bad(&path)(format!(
            "format {:?}, this reprorun reads {:?}",
            manifest.format(),
            M::FORMAT
        )));
    }
    Ok((manifest, sha256_hex(&bytes)))
}

/// Reads chunk `file` and checks that it is the manifest's chunk it claims to be, byte for
/// byte, and that `is_unit` accepts each of its units.
pub fn chunk<M: Plan>(
    manifest: &M,
    file: &Path,
    is_unit: impl Fn(&M::Unit) -> bool,
) -> Result<Chunk<M::Unit>, TasksError> {
    let bytes = std::fs::read(file).map_err(read_err(file))?;
    let bad = bad(file);
    let chunk: Chunk<M::Unit> = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    if chunk.format != M::CHUNK_FORMAT {
        return Err(bad(format!("format {:?}", chunk.format)));
    }
    let Some(r) = manifest.chunks().iter().find(|c| c.index == chunk.index) else {
        return Err(bad(format!("chunk {} is not in the manifest", chunk.index)));
    };
    if r.sha256 != sha256_hex(&bytes) {
        return Err(bad(format!(
            "chunk {} differs from the one planned (digest)",
            chunk.index
        )));
    }
    if let Some(u) = chunk.units.iter().find(|u| !is_unit(u)) {
        return Err(bad(format!("unit {} is not a unit of the plan", M::key(u))));
    }
    Ok(chunk)
}

/// Every planned unit by key, with its chunk index.
pub fn units<M: Plan>(
    manifest: &M,
    dir: &Path,
    is_unit: impl Fn(&M::Unit) -> bool,
) -> Result<BTreeMap<String, (u32, M::Unit)>, TasksError> {
    let mut out = BTreeMap::new();
    for r in manifest.chunks() {
        let chunk = chunk(manifest, &dir.join(chunk_file(r.index)), &is_unit)?;
        for u in chunk.units {
            out.insert(M::key(&u).to_string(), (chunk.index, u));
        }
    }
    Ok(out)
}

/// What a `work` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Done {
    pub ran: u32,
    /// Units whose result was already there.
    pub skipped: u32,
    /// A SIGTERM or SIGINT came: the units after it were not started.
    pub stopped: bool,
}

/// `work`'s loop: `one` on each unit without a result in `results`, in order, until the
/// first error or a stop signal ([`super::cluster::catch_stop`]); no new unit starts after
/// either.
pub fn work_units<U, E>(
    units: &[U],
    results: &Path,
    key: impl Fn(&U) -> &str,
    mut one: impl FnMut(&U) -> Result<(), E>,
) -> (Done, Result<(), E>) {
    let mut done = Done::default();
    for u in units {
        if stopped() {
            done.stopped = true;
            break;
        }
        if result_path(results, key(u)).exists() {
            done.skipped += 1;
            continue;
        }
        if let Err(e) = one(u) {
            return (done, Err(e));
        }
        done.ran += 1;
    }
    done.stopped |= stopped();
    (done, Ok(()))
}

#[cfg(test)]
#[path = "tasks_tests.rs"]
mod tests;
