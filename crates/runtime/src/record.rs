//! The run record (`--record FILE`): what ran, how it was sandboxed, and how it ended.
//! Format documented in spec/record.md.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::plan::{Isolation, Plan};
use crate::sys::Usage;

/// Record format version; bumped when a field changes meaning.
pub const RECORD_VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum RecordError {
    #[error("--record {path}: {source}; pass a writable file path")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--record {path}: crosses the symbolic link {link} (a link, perhaps planted by an earlier run in /work, must not redirect the record onto another file); pass the resolved path, or --follow-symlinks")]
    Link { path: PathBuf, link: PathBuf },
    #[error("write run record {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Serialize)]
pub struct Rusage {
    pub(crate) user_s: f64,
    pub(crate) sys_s: f64,
    pub(crate) max_rss_kib: u64,
}

impl From<Usage> for Rusage {
    fn from(u: Usage) -> Self {
        Rusage {
            user_s: u.user_us as f64 / 1e6,
            sys_s: u.sys_us as f64 / 1e6,
            max_rss_kib: u.max_rss_kib,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RunRecord<'a> {
    pub record_version: u32,
    pub reprorun_version: &'static str,
    /// reprorun's own command line.
    pub argv: Vec<String>,
    pub plan: &'a Plan,
    /// What the root filesystem was: an image's digest, or the host root's (or `--rootfs`
    /// directory's) distribution and installed-package digest.
    pub rootfs: Option<crate::rootfs_id::RootfsId>,
    /// `full` or `none`; null when the run never started.
    pub isolation_used: Option<Isolation>,
    pub started_at: String,
    pub ended_at: String,
    pub duration_s: f64,
    pub exit_code: i32,
    pub timed_out: bool,
    /// The kernel's OOM killer killed a process of the sandbox (`--memory`).
    pub oom_killed: bool,
    /// The one-line error reprorun printed, if any.
    pub error: Option<String>,
    /// With `--net allow`: every connection attempt the egress proxy saw, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<crate::net::log::ConnRecord>>,
    /// With `--net allow`: the attempts not kept in `network` (over `log::KEPT` of a kind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_dropped: Option<u64>,
    pub rusage: Rusage,
}

pub use crate::determinism::date::timestamp;

/// The record file, opened (and so checked) before the run starts.
pub struct RecordSink {
    path: PathBuf,
    file: File,
}

impl RecordSink {
    /// The directory often is the sandbox's /work: only a regular file is written (created
    /// if missing, else truncated; a FIFO left there by an earlier run is refused, never
    /// opened), and a path that crosses a symbolic link is refused unless `follow`. The
    /// caller's own descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`) are always
    /// allowed, duplicated and never truncated: the record follows what is there
    /// (`crate::sys::hostpath`).
    pub fn open(path: &Path, follow: bool) -> Result<Self, RecordError> {
        use crate::sys::hostpath::{open_write, HostPathError, Write};
        let file = open_write(path, follow, Write::Truncate).map_err(|e| match e {
            HostPathError::Link(link) => RecordError::Link {
                path: path.to_path_buf(),
                link,
            },
            other => RecordError::Open {
                path: path.to_path_buf(),
                source: std::io::Error::other(other),
            },
        })?;
        Ok(RecordSink {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn write(mut self, record: &RunRecord) -> Result<(), RecordError> {
        let err = |source| RecordError::Write {
            path: self.path.clone(),
            source,
        };
        let mut text = serde_json::to_vec_pretty(record).map_err(|e| err(e.into()))?;
        text.push(b'\n');
        self.file.write_all(&text).map_err(err)?;
        self.file.sync_data().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_never_blocks_and_a_file_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(
            RecordSink::open(&fifo, false).is_err(),
            "no reader: refused, not blocked"
        );
        let file = dir.path().join("run.json");
        std::fs::write(&file, "old content, longer than the new").unwrap();
        let sink = RecordSink::open(&file, false).unwrap();
        drop(sink);
        assert_eq!(std::fs::read(&file).unwrap(), b"");
    }

    #[test]
    fn a_planted_link_is_refused_unless_followed_and_own_descriptors_work() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.path().join("run.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(matches!(
            RecordSink::open(&link, false),
            Err(RecordError::Link { .. })
        ));
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A link among the directories too.
        let sub = dir.path().join("sub");
        std::os::unix::fs::symlink(dir.path(), &sub).unwrap();
        assert!(RecordSink::open(&sub.join("new.json"), false).is_err());
        assert!(RecordSink::open(&link, true).is_ok(), "--follow-symlinks");
        assert!(RecordSink::open(Path::new("/dev/stderr"), false).is_ok());
    }
}
