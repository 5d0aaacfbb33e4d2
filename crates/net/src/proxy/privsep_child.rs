//! The proxy helper process itself (see `privsep`): confined first, then serving.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::unistd::{Gid, Pid, Uid};

use super::privsep::{Asker, HELPER_NAME};
use super::{start_with, Broker, Config};

/// The unprivileged id used where the sandbox's own host id is root's.
const NOBODY: u32 = 65534;

/// Confines this process and serves until told to stop; returns the exit code.
pub(super) fn run(
    control: OwnedFd,
    parent: Pid,
    join_cgroup: &dyn Fn() -> bool,
    uid: u32,
    gid: u32,
    config: Config,
) -> i32 {
    reprorun_base::sys::stdio_to_null();
    let keep = control.as_raw_fd() as u32;
    // SAFETY: close_range takes plain integers; every other descriptor of the supervisor's
    // (init's socket, the logs, the caller's files) is closed in this copy.
    unsafe {
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, keep - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
    }
    if !join_cgroup() || confine(uid, gid).is_err() {
        return 1;
    }
    // It may hold `--inject-env` values and the run's CA key: no core dump, no ptrace by
    // its uid's other processes (whatever the id change did).
    if nix::sys::prctl::set_dumpable(false).is_err() {
        return 1;
    }
    // A change of ids clears the parent-death signal: set it now, then check the parent.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if nix::unistd::getppid() != parent {
        return 1;
    }
    let _ = nix::sys::prctl::set_name(&std::ffi::CString::new(HELPER_NAME).unwrap_or_default());
    serve(control, config)
}

/// Leaves root for the sandbox's ids (no supplementary groups), drops every capability
/// (bounding and ambient sets too) and sets no_new_privs.
fn confine(uid: u32, gid: u32) -> Result<(), Errno> {
    use caps::CapSet;
    let eperm = |_| Errno::EPERM;
    if nix::unistd::geteuid().is_root() {
        for cap in caps::all() {
            caps::drop(None, CapSet::Bounding, cap).map_err(eperm)?;
        }
        let uid = if uid == 0 { NOBODY } else { uid };
        let gid = if gid == 0 { NOBODY } else { gid };
        nix::unistd::setgroups(&[])?;
        let (u, g) = (Uid::from_raw(uid), Gid::from_raw(gid));
        nix::unistd::setresgid(g, g, g)?;
        nix::unistd::setresuid(u, u, u)?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(eperm)?;
    }
    nix::sys::prctl::set_no_new_privs()
}

/// Waits for the listener, serves it, and on `S` (or the supervisor gone) ends every
/// connection, then says `D`.
fn serve(control: OwnedFd, config: Config) -> i32 {
    let mut proxy = None;
    loop {
        let mut fds = [PollFd::new(control.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
        match reprorun_base::sys::recv_packet(&control) {
            Ok(Some((bytes, Some(listener)))) if bytes == b"L" && proxy.is_none() => {
                let asker = match control.try_clone() {
                    Ok(c) => Asker::new(c),
                    Err(_) => break,
                };
                match start_with(listener, Broker::Remote(asker), config.clone(), None) {
                    Ok(p) => proxy = Some(p),
                    Err(_) => break,
                }
            }
            Ok(Some((bytes, _))) if bytes == b"S" => break,
            Ok(Some(_)) => {}
            Ok(None) => {
                if fds[0]
                    .revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLHUP))
                {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    if let Some(p) = proxy {
        // Every record was sent as its connection ended.
        drop(p.stop());
    }
    super::timing::flush();
    let _ = nix::sys::socket::send(
        control.as_raw_fd(),
        b"D",
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    );
    0
}
