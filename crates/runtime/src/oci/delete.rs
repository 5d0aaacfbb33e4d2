//! `delete`: a stopped (or, with `--force`, any) container's processes, cgroup and state
//! removed, after its poststop hooks.

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::kill::signal_init;
use super::ps::pids;
use super::state::{self, Dir, Root, Saved, StateError, Status};
use super::transitions::{decide, Command, Decision};
use super::{hooks, state_bytes, OciError};

/// `delete`: refuses a running container unless `force` (then kills it); removes it.
/// With `force`, a container that is already gone is no error (runc's contract: an engine's
/// shim deletes once more after the container went); an id that is not a valid name still is.
pub fn delete(root: &Root, id: &str, force: bool) -> Result<i32, OciError> {
    let dir = match root.get(id) {
        Err(StateError::NotFound(_)) if force && state::check_id(id).is_ok() => return Ok(0),
        other => other?,
    };
    let saved = dir.load()?;
    let status = dir.status(&saved);
    let decision = decide(Command::Delete { force }, status);
    if let Decision::Refuse(hint) = decision {
        return Err(OciError::Status {
            id: id.into(),
            status,
            hint,
        });
    }
    if decision == Decision::KillFirst {
        for pid in pids(&saved) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = signal_init(&saved, Signal::SIGKILL as i32);
        for _ in 0..5000 {
            if state::start_time(saved.pid) != Some(saved.pid_start) {
                break;
            }
            // Our own child (after `run`): reap it.
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(saved.pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    finish(dir, &saved);
    Ok(0)
}

/// After the container stopped: poststop hooks, the cgroup, the state directory.
pub(super) fn finish(dir: Dir, saved: &Saved) {
    for e in hooks::run_each(
        "poststop",
        &saved.hooks.poststop,
        &state_bytes(saved, Status::Stopped),
    ) {
        eprintln!("reprorun: warning: {e}");
    }
    crate::sandbox::remove_cgroup(&saved.cgroup_dirs);
    // The monitor leaves by itself once init is gone.
    let _ = dir.remove();
}
