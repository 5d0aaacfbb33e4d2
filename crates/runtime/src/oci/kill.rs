//! `kill`: a signal to the container's init (with `--all`, to every process of it).

use std::path::Path;

use nix::unistd::Pid;

use super::ps::pids;
use super::state::{self, Root, Saved};
use super::transitions::{decide, Command, Decision};
use super::{io, OciError};

/// `kill`: `signal` to init (with `all`, first to every process of the container).
pub fn kill(root: &Root, id: &str, signal: &str, all: bool) -> Result<i32, OciError> {
    let sig = super::parse_signal(signal)?;
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let status = dir.status(&saved);
    if let Decision::Refuse(hint) = decide(Command::Kill, status) {
        return Err(OciError::Status {
            id: id.into(),
            status,
            hint,
        });
    }
    if all {
        for pid in pids(&saved) {
            // SAFETY: kill(2) takes plain integers; a process gone meanwhile is no error.
            unsafe { libc::kill(pid, sig) };
        }
    }
    signal_init(&saved, sig)
        .map_err(|e| io("signal", Path::new(&format!("pid {}", saved.pid)))(e.into()))?;
    Ok(0)
}

/// Signals init through a pidfd checked against the saved start time (a recycled pid is
/// never signalled).
pub(super) fn signal_init(saved: &Saved, sig: i32) -> Result<(), nix::errno::Errno> {
    let pidfd = crate::sys::pidfd_open_process(Pid::from_raw(saved.pid))?;
    if state::start_time(saved.pid) != Some(saved.pid_start) {
        return Err(nix::errno::Errno::ESRCH);
    }
    crate::sys::pidfd_send_signal(&pidfd, sig)
}
