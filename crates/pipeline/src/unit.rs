//! One unit of work in a sandbox: a request resolved to a plan and run by reprorun's own
//! library (never its command line), with its own stdout and stderr files and an output
//! directory bound at [`OUT_DIR`]; and the reader for what the sandbox wrote, which is
//! untrusted (no links, no FIFOs or devices, capped at [`LOG_CAP`]). The pipelines' only
//! door into the sandbox: what a unit came to is a [`UnitOutcome`] (it ran, its command is
//! missing, or the host failed), so no pipeline matches the sandbox's errors itself.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use thiserror::Error;

use reprorun_runtime::plan::{ExecRequest, HostFacts, Plan, PlanError};
use reprorun_runtime::sandbox::SandboxError;

/// What a unit's command did when it ran: its exit status, whether it timed out or was
/// killed for memory, what it used.
pub use reprorun_runtime::sandbox::Outcome;

/// Where a unit's output directory is bound, inside the sandbox.
pub const OUT_DIR: &str = "/.reprorun/out";

/// The most of a log or result file kept: beyond it, the file is cut with a note.
pub(crate) const LOG_CAP: u64 = 64 << 20;

/// Why a unit could not be run (the sandbox's own errors are returned apart: they may be
/// the unit's fault).
#[derive(Debug, Error)]
pub enum UnitError {
    /// The request could not be resolved to a plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The null device for the unit's standard input could not be opened.
    #[error("open /dev/null: {0}")]
    Redirect(#[source] std::io::Error),
    /// A unit's scratch runs one sandbox, once.
    #[error("the unit has already run")]
    AlreadyRun,
    /// The unit's scratch directory or files could not be made.
    #[error("{path}: {source}")]
    Scratch {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What running a unit came to.
#[derive(Debug)]
pub enum UnitOutcome {
    /// The command ran (whatever its exit status).
    Ran(Outcome),
    /// The command could not be executed (not found, not executable): the unit's own
    /// failure, to be recorded as such.
    CommandMissing(CommandMissing),
    /// The sandbox could not be made or kept: the host's failure, not the unit's; a study
    /// stops on it (resumably) rather than record it.
    HostFailure(HostFailure),
}

/// A unit's command that could not be executed; prints as `PROGRAM: command not found`.
#[derive(Debug, Error)]
#[error(transparent)]
pub struct CommandMissing(SandboxError);

impl CommandMissing {
    /// The exit status reprorun reports for it (127 not found, 126 not executable).
    pub fn exit_code(&self) -> i32 {
        self.0.exit_code()
    }
}

/// Why the host could not run a unit's sandbox (the sandbox's own error).
#[derive(Debug, Error)]
#[error(transparent)]
pub struct HostFailure(SandboxError);

impl From<Result<Outcome, SandboxError>> for UnitOutcome {
    fn from(r: Result<Outcome, SandboxError>) -> UnitOutcome {
        match r {
            Ok(o) => UnitOutcome::Ran(o),
            Err(e @ SandboxError::Exec { .. }) => UnitOutcome::CommandMissing(CommandMissing(e)),
            Err(e) => UnitOutcome::HostFailure(HostFailure(e)),
        }
    }
}

/// The plan a unit's request resolves to (what [`sandboxed`] runs).
pub fn resolve(req: &ExecRequest, host: &HostFacts) -> Result<Plan, UnitError> {
    Ok(reprorun_runtime::plan::resolve(req, host)?)
}

/// Resolves `req` and runs it with its stdout and stderr on the given files. The error:
/// the sandbox could not even be planned.
pub fn sandboxed(
    req: &ExecRequest,
    host: &HostFacts,
    stdout: &File,
    stderr: &File,
) -> Result<UnitOutcome, UnitError> {
    let plan = resolve(req, host)?;
    let null = File::open("/dev/null").map_err(UnitError::Redirect)?;
    let stdio = reprorun_runtime::sandbox::Stdio {
        stdin: null.as_fd(),
        stdout: stdout.as_fd(),
        stderr: stderr.as_fd(),
    };
    Ok(reprorun_runtime::sandbox::run_with(&plan, Some(stdio), &mut |_| {}).into())
}

/// An id (an instance's, a snapshot group's) as a file-name part: ASCII letters, digits, `-`
/// and `.` kept, anything else `_`, at most 80 characters.
pub fn file_name_part(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}

/// A unit's own files under one scratch directory: `out/` (bound at [`OUT_DIR`] by the
/// caller's request), `stdout` and `stderr`. The directory is removed when dropped.
pub struct Scratch {
    dir: PathBuf,
    stdio: Option<(File, File)>,
}

impl Scratch {
    /// Makes `dir` afresh (whatever a killed unit left there is removed first).
    pub fn create(dir: PathBuf) -> Result<Scratch, UnitError> {
        let _ = std::fs::remove_dir_all(&dir);
        let io = |source| UnitError::Scratch {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(dir.join("out")).map_err(io)?;
        // std opens with O_CLOEXEC: no sandbox inherits these but through its stdio.
        let stdout = File::create(dir.join("stdout")).map_err(io)?;
        let stderr = File::create(dir.join("stderr")).map_err(io)?;
        Ok(Scratch {
            dir,
            stdio: Some((stdout, stderr)),
        })
    }

    /// The directory the sandbox may write its results into.
    pub fn out_dir(&self) -> PathBuf {
        self.dir.join("out")
    }

    /// Runs the unit ([`sandboxed`]) with its stdio on this scratch's files; they are
    /// closed when it ends, so a unit runs once.
    pub fn run(&mut self, req: &ExecRequest, host: &HostFacts) -> Result<UnitOutcome, UnitError> {
        let Some((stdout, stderr)) = self.stdio.take() else {
            return Err(UnitError::AlreadyRun);
        };
        sandboxed(req, host, &stdout, &stderr)
    }

    /// What the unit printed on stdout, capped ([`read_capped`]).
    pub fn stdout(&self) -> Vec<u8> {
        read_capped(&self.dir, "stdout")
    }

    /// What the unit printed on stderr, capped.
    pub fn stderr(&self) -> Vec<u8> {
        read_capped(&self.dir, "stderr")
    }

    /// A file the sandbox wrote into `out/`, read as untrusted.
    pub fn read_out(&self, name: &str) -> Option<Vec<u8>> {
        read_untrusted(&self.out_dir(), name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads `name` in `dir`, a directory the sandbox could write: only a regular file, never
/// through a link, never opening a FIFO or device (looked up with O_PATH first), at most
/// [`LOG_CAP`] bytes.
pub fn read_untrusted(dir: &Path, name: &str) -> Option<Vec<u8>> {
    read_untrusted_sized(dir, name).map(|(bytes, _)| bytes)
}

/// [`read_untrusted`], with the file's full size.
fn read_untrusted_sized(dir: &Path, name: &str) -> Option<(Vec<u8>, u64)> {
    use std::io::Read;
    // Opened with nix, not std's OpenOptions: std drops O_PATH from custom flags on musl
    // (whose O_ACCMODE includes it), and the probe would open a FIFO for reading, blocking.
    let probe = nix::fcntl::open(
        &dir.join(name),
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    // SAFETY: `open` just returned this descriptor, which nothing else owns.
    let probe = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(probe) };
    let file = reprorun_runtime::sys::reopen_regular(&probe, false).ok()?;
    let size = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(LOG_CAP).read_to_end(&mut bytes).ok()?;
    Some((bytes, size))
}

/// A log file, at most [`LOG_CAP`] bytes (a note marks the cut); empty when unreadable.
pub(crate) fn read_capped(dir: &Path, name: &str) -> Vec<u8> {
    let (mut bytes, full) = read_untrusted_sized(dir, name).unwrap_or_default();
    if full > LOG_CAP {
        bytes.extend_from_slice(
            format!("\n[reprorun: log cut at {LOG_CAP} of {full} bytes]\n").as_bytes(),
        );
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_files_are_read_safely() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ok.xml"), "<x/>").unwrap();
        assert_eq!(read_untrusted(dir.path(), "ok.xml").unwrap(), b"<x/>");
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.xml")).unwrap();
        assert!(
            read_untrusted(dir.path(), "link.xml").is_none(),
            "no link followed"
        );
        nix::unistd::mkfifo(&dir.path().join("fifo.xml"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(
            read_untrusted(dir.path(), "fifo.xml").is_none(),
            "no FIFO blocks"
        );
        assert!(read_untrusted(dir.path(), "absent").is_none());
        // A device is never opened (opening some has effects: a watchdog starts).
        std::os::unix::fs::symlink("/dev/null", dir.path().join("dev.xml")).unwrap();
        assert!(read_untrusted(dir.path(), "dev.xml").is_none());
        let dev = nix::sys::stat::SFlag::S_IFCHR;
        let made = nix::sys::stat::mknod(
            &dir.path().join("null.xml"),
            dev,
            nix::sys::stat::Mode::S_IRUSR,
            nix::sys::stat::makedev(1, 3),
        );
        if made.is_ok() {
            assert!(read_untrusted(dir.path(), "null.xml").is_none());
        }
    }

    #[test]
    fn a_scratch_holds_the_units_files_and_goes_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("unit");
        std::fs::create_dir_all(path.join("stale")).unwrap();
        let scratch = Scratch::create(path.clone()).unwrap();
        assert!(
            !path.join("stale").exists(),
            "a killed unit's files are removed"
        );
        assert!(scratch.out_dir().is_dir());
        std::fs::write(scratch.out_dir().join("r"), "x").unwrap();
        assert_eq!(scratch.read_out("r").unwrap(), b"x");
        assert!(scratch.stdout().is_empty() && scratch.stderr().is_empty());
        drop(scratch);
        assert!(!path.exists());
    }
}
