//! Init in a user namespace joined by path (an OCI `linux.namespaces` entry of type user with
//! a `path`). The namespaces init creates must belong to that user namespace, as runc makes
//! them (join the user namespace first, then create the rest): created from the caller's,
//! init — root in the joined namespace only — could not mount in its own mount namespace.
//! The caller itself must stay outside (it writes the host's cgroup files), so a helper
//! forked from it joins the user namespace, becomes its root and clones init with
//! `CLONE_PARENT`: init is then the caller's child, as it is otherwise. The helper hands
//! init's pid and the caller's end of init's socket back, and leaves.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::unistd::Pid;

use crate::plan::Plan;
use crate::sandbox::{init, SandboxError};

/// Tags of the helper's reports.
const PID_TAG: u8 = b'p';
const JOIN_FAILED: u8 = b'j';
const CLONE_FAILED: u8 = b'c';

/// Clones init as [`crate::sandbox::supervisor::clone_init`] does, from inside the user namespace at
/// `user`. The caller must be single-threaded (it forks).
pub(in crate::sandbox) fn clone_init_in(
    user: &Path,
    plan: &Plan,
    seccomp: &[seccompiler::BpfProgram],
    lifecycle: &init::Lifecycle,
) -> Result<(Pid, OwnedFd), SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    let join = |errno| SandboxError::Join {
        path: user.to_path_buf(),
        errno,
    };
    let userns = std::fs::File::open(user)
        .map_err(|e| join(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
    let (back, helper_end) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(step("socketpair"))?;
    // SAFETY: the caller is single-threaded (the CLI starts no threads before `create`), so
    // the child may run ordinary code until it exits.
    let helper = match unsafe { nix::unistd::fork() }.map_err(step("fork"))? {
        nix::unistd::ForkResult::Child => {
            drop(back);
            helper(&userns, plan, seccomp, lifecycle, &helper_end);
            // SAFETY: _exit ends the helper without the caller's cleanup.
            unsafe { libc::_exit(0) }
        }
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop(helper_end);
    let _ = nix::sys::wait::waitpid(helper, None);
    let report = crate::sys::recv_packet(&back).ok().flatten();
    let errno = |b: &[u8]| {
        let raw = b.get(1..5).and_then(|b| b.try_into().ok());
        Errno::from_raw(raw.map_or(libc::EIO, i32::from_ne_bytes))
    };
    match report {
        Some((b, None)) if b.first() == Some(&JOIN_FAILED) => Err(join(errno(&b))),
        Some((b, None)) if b.first() == Some(&CLONE_FAILED) => Err(SandboxError::Unavailable {
            reason: String::from_utf8_lossy(&b[1..]).into_owned(),
        }),
        Some((b, Some(ours))) if b.first() == Some(&PID_TAG) => {
            let pid = crate::sys::recv_packet(&back).ok().flatten();
            match pid.and_then(|(b, _)| b.try_into().ok()) {
                Some(raw) => Ok((Pid::from_raw(i32::from_ne_bytes(raw)), ours)),
                None => Err(step("clone init in the joined user namespace")(Errno::EIO)),
            }
        }
        _ => Err(step("clone init in the joined user namespace")(Errno::EIO)),
    }
}

/// In the helper: join, become root there, clone init, report (a failure to clone as the
/// error's text).
fn helper(
    userns: &std::fs::File,
    plan: &Plan,
    seccomp: &[seccompiler::BpfProgram],
    lifecycle: &init::Lifecycle,
    sock: &OwnedFd,
) {
    let send = |bytes: &[u8]| {
        let _ = nix::sys::socket::send(
            sock.as_raw_fd(),
            bytes,
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
    };
    let fail = |e: Errno| send(&[&[JOIN_FAILED][..], &(e as i32).to_ne_bytes()].concat());
    if let Err(e) = nix::sched::setns(userns, nix::sched::CloneFlags::CLONE_NEWUSER) {
        return fail(e);
    }
    // Root of the joined namespace, as runc's init becomes (ids it does not map stay as they
    // are: EINVAL). A change of ids makes the process non-dumpable; init's /proc/self files
    // must stay its own.
    let zero = (nix::unistd::Gid::from_raw(0), nix::unistd::Uid::from_raw(0));
    for r in [
        nix::unistd::setresgid(zero.0, zero.0, zero.0),
        nix::unistd::setresuid(zero.1, zero.1, zero.1),
        nix::sys::prctl::set_dumpable(true),
    ] {
        if let Err(e) = r.or_else(|e| if e == Errno::EINVAL { Ok(()) } else { Err(e) }) {
            return fail(e);
        }
    }
    match crate::sandbox::supervisor::clone_init(
        plan,
        seccomp,
        Some(lifecycle),
        None,
        libc::CLONE_PARENT,
        None,
    ) {
        Ok((pid, ours)) => {
            if crate::sys::send_fd(sock, &ours, PID_TAG).is_ok() {
                send(&pid.as_raw().to_ne_bytes());
            }
        }
        Err(e) => send(&[&[CLONE_FAILED][..], e.to_string().as_bytes()].concat()),
    }
}
