//! `start`: a created container's process let run.

use std::os::unix::fs::OpenOptionsExt;

use super::state::{self, Dir, Root, Saved, Status};
use super::transitions::{decide, Command, Decision};
use super::{hooks, io, state_bytes, OciError};

/// Lets a created container's process run.
pub(super) fn start_dir(dir: &Dir, saved: &Saved) -> Result<(), OciError> {
    let status = dir.status(saved);
    if let Decision::Refuse(hint) = decide(Command::Start, status) {
        return Err(OciError::Status {
            id: saved.id.clone(),
            status,
            hint,
        });
    }
    let fifo = dir.fifo();
    // Non-blocking: the open returns at once, and init's blocked open for writing with it.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .map_err(io("open", &fifo))?;
    // Init opens the other end once we are here and writes one byte.
    let mut got = false;
    for _ in 0..20_000 {
        let mut b = [0u8; 1];
        match nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&f), &mut b) {
            Ok(1) => {
                got = true;
                break;
            }
            _ => {
                if state::start_time(saved.pid) != Some(saved.pid_start) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        }
    }
    if !got {
        let status = dir.status(saved);
        return Err(OciError::Status {
            id: saved.id.clone(),
            status,
            hint: if status == Status::Stopped {
                "its init exited before it could start"
            } else {
                "its init did not answer in 10 s; retry `reprorun start`"
            },
        });
    }
    let _ = std::fs::remove_file(&fifo);
    // A failed poststart hook is reported, not fatal, and the next ones run (runtime spec).
    for e in hooks::run_each(
        "poststart",
        &saved.hooks.poststart,
        &state_bytes(saved, Status::Running),
    ) {
        eprintln!("reprorun: warning: {e}");
    }
    Ok(())
}

/// `start`: the created container `id` let run.
pub fn start(root: &Root, id: &str) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    start_dir(&dir, &saved)?;
    Ok(0)
}
