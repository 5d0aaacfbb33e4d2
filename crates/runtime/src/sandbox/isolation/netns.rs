//! The sandbox's network namespace, made beside init instead of by init's `clone` (issue 20):
//! a new network namespace is the costliest part of the clone (about 0.4–0.6 ms here). For a
//! one-shot run (`reprorun exec`, the pipelines), the supervisor clones init without
//! `CLONE_NEWNET` and starts a helper (in the supervisor's memory, the supervisor suspended
//! meanwhile: see [`spawn_helper`]) that joins init's user namespace, makes the network
//! namespace there (so it belongs to the sandbox's user namespace, exactly as one made by the
//! clone would) and brings its loopback up, while init builds the new root. The helper hands
//! the namespace to init over init's socket; init joins it before it mounts `sysfs` (which
//! needs the network namespace its user namespace owns). Where the helper fails, init makes
//! the namespace itself, as before: the sandbox is the same either way.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::unistd::Pid;

use crate::plan::{Namespace, Plan};

/// Tags the helper's network namespace on init's socket.
const NET_TAG: u8 = b'E';
/// The helper could not make the namespace: init makes it.
const FAILED_TAG: u8 = b'F';

/// Whether `plan`'s network namespace is made by the helper: a new one with nothing inside
/// that init must set up before it forks (no egress proxy or registry listener, which init
/// opens in the namespace before its root is built), for a run, not an OCI container.
pub(crate) fn by_helper(plan: &Plan, oci: bool) -> bool {
    !oci && plan.has(Namespace::Net)
        && !plan.join.iter().any(|j| j.ns == Namespace::Net)
        && plan.egress.is_none()
        && plan.registry.is_none()
}

/// Starts the helper in the supervisor's memory (`CLONE_VM | CLONE_VFORK`, as `posix_spawn`
/// starts a child, on a stack of its own), the supervisor suspended until it has sent the
/// namespace and exited: nothing is copied to start it, and the supervisor's pages are not
/// made copy-on-write by it. Returns its pid for the caller to reap; where it cannot start,
/// tells init to make the namespace itself and returns `None`.
pub(in crate::sandbox) fn spawn_helper(init: Pid, sock: &OwnedFd) -> Option<Pid> {
    let failed = || {
        let _ = nix::sys::socket::send(
            sock.as_raw_fd(),
            &[FAILED_TAG],
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
    };
    let Ok(mut stack) = crate::sys::stack::Stack::new(HELPER_STACK) else {
        failed();
        return None;
    };
    // Set by the helper as soon as it has told init either way (see below).
    let told = std::cell::Cell::new(false);
    let user_ns = format!("/proc/{init}/ns/user");
    let run = || -> isize {
        let ns = make(&user_ns);
        let sent = ns.as_ref().map_err(|e| *e);
        if sent
            .and_then(|ns| crate::sys::send_fd(sock, ns, NET_TAG))
            .is_err()
        {
            failed();
        }
        told.set(true);
        drop(ns);
        0
    };
    // SAFETY: the caller is single-threaded here (`run` starts its notification thread after
    // this; a pipeline's units run in workers forked single-threaded), and CLONE_VFORK
    // suspends it until the child has exited, so the child runs in this memory as this
    // thread would, with nothing else running in it (the allocator's lock is free); it runs
    // on `stack`, which outlives it (dropped once clone has returned). What it allocates it
    // frees, unless a signal from outside kills it first, which the supervisor then survives
    // only to leave (below); its descriptors are its own (no CLONE_FILES). It also runs with this thread's
    // thread-local storage (no CLONE_SETTLS), so it must not abort: musl's abort signals the
    // thread id cached there, the supervisor's. Nothing in `make` and `send_fd` panics (their
    // errors are values; an allocation failure would abort either process alike).
    let cloned = unsafe {
        nix::sched::clone(
            Box::new(run),
            stack.as_mut_slice(),
            CloneFlags::CLONE_VM | CloneFlags::CLONE_VFORK,
            Some(libc::SIGCHLD),
        )
    };
    match cloned {
        Ok(_) if !told.get() => {
            // Killed from outside before it told init (nothing in it ends it otherwise): it
            // may have died inside the allocator, holding its lock or with the heap half
            // updated, in this memory. Nothing more is safe to do here but leave, without
            // allocating; init, its namespace's pid 1, dies with this process.
            const WHY: &[u8] = b"reprorun: the network namespace's helper was killed\n";
            // SAFETY: write and _exit take plain arguments and touch no heap.
            unsafe {
                libc::write(2, WHY.as_ptr().cast(), WHY.len());
                libc::_exit(crate::exit::RUNTIME_ERROR)
            }
        }
        Ok(child) => {
            crate::trace::step("supervisor", "the network namespace's helper (done)");
            Some(child)
        }
        Err(_) => {
            failed();
            None
        }
    }
}

/// The helper's stack: `make`'s calls need little.
const HELPER_STACK: usize = 256 << 10;

/// In the helper: joins init's user namespace, makes a network namespace there with its
/// loopback up, and returns a descriptor of it.
fn make(user_ns: &str) -> Result<OwnedFd, Errno> {
    let open = |path: &str| -> Result<OwnedFd, Errno> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .map(OwnedFd::from)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    };
    let user = open(user_ns)?;
    nix::sched::setns(user.as_fd(), CloneFlags::CLONE_NEWUSER)?;
    nix::sched::unshare(CloneFlags::CLONE_NEWNET)?;
    crate::sys::loopback_up()?;
    open("/proc/self/ns/net")
}

/// In init: waits for the helper's namespace and joins it; where the helper failed, makes a
/// new one (loopback up) itself.
pub(crate) fn join(sock: &OwnedFd) -> Result<(), Errno> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
        match crate::sys::recv_packet(sock)? {
            None => {
                if fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLHUP))
                {
                    return Err(Errno::EPIPE); // the supervisor is gone
                }
            }
            Some((bytes, Some(ns))) if bytes == [NET_TAG] => {
                return nix::sched::setns(ns.as_fd(), CloneFlags::CLONE_NEWNET);
            }
            Some(_) => {
                nix::sched::unshare(CloneFlags::CLONE_NEWNET)?;
                return crate::sys::loopback_up();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_runs_plain_new_network_namespace_is_made_beside_init() {
        let plan = Plan::base("/".into(), vec!["true".into()]);
        assert!(plan.has(Namespace::Net));
        assert!(by_helper(&plan, false));
        assert!(
            !by_helper(&plan, true),
            "an OCI container's init makes its own"
        );
        let mut host = plan.clone();
        host.namespaces.retain(|n| *n != Namespace::Net);
        assert!(!by_helper(&host, false), "--net host: no namespace at all");
        let mut joined = plan.clone();
        joined.join.push(crate::plan::NsJoin {
            ns: Namespace::Net,
            path: "/proc/1/ns/net".into(),
        });
        assert!(!by_helper(&joined, false));
    }
}
