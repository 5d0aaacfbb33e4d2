//! `run`: create, start, and (unless detached) wait and delete.

use nix::unistd::Pid;

use super::create::{make, CreateOpts, Made};
use super::delete::{delete, finish};
use super::start::start_dir;
use super::state::Root;
use super::OciError;
use crate::sandbox::container;

/// `run`: create, start, and (unless detached) wait and delete; exits with the container's
/// status.
pub fn run(root: &Root, o: &CreateOpts, detach: bool) -> Result<i32, OciError> {
    let made = make(root, o)?;
    let Made { dir, saved } = made;
    if let Err(e) = start_dir(&dir, &saved) {
        let id = saved.id.clone();
        drop(dir);
        let _ = delete(root, &id, true);
        return Err(e);
    }
    if detach {
        return Ok(0);
    }
    let code = container::wait_init(Pid::from_raw(saved.pid))?;
    finish(dir, &saved);
    Ok(code)
}
