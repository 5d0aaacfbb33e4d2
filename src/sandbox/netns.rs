//! The sandbox's network namespace, made beside init instead of by init's `clone` (issue 20):
//! a new network namespace is the costliest part of the clone (about 0.4–0.6 ms here). For a
//! one-shot run (`reprorun exec`, the pipelines), the supervisor clones init without
//! `CLONE_NEWNET` and starts a helper ([`Helper`]) that joins init's user namespace, makes the network
//! namespace there (so it belongs to the sandbox's user namespace, exactly as one made by the
//! clone would) and brings its loopback up, while init builds the new root. The helper hands
//! the namespace to init over init's socket; init joins it before it mounts `sysfs` (which
//! needs the network namespace its user namespace owns). Where the helper fails, init makes
//! the namespace itself, as before: the sandbox is the same either way.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

mod raw;

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
/// opens in the namespace before its root is built), for a run, not an OCI container, on
/// x86-64 (the helper's raw system calls, `raw`).
pub(crate) fn by_helper(plan: &Plan, oci: bool) -> bool {
    cfg!(target_arch = "x86_64")
        && !oci
        && plan.has(Namespace::Net)
        && !plan.join.iter().any(|j| j.ns == Namespace::Net)
        && plan.egress.is_none()
        && plan.registry.is_none()
}

/// The helper process: a child that shares the supervisor's memory (`CLONE_VM`), so that
/// making it copies no page tables and its exit unmaps nothing (a fork of the 12 MB
/// supervisor cost about 0.1 ms to make and as much to end, issue 20). It runs on a stack of
/// its own and makes raw system calls only: no allocation, no `errno`, nothing that touches
/// the supervisor's thread-local state, which it shares. Reaped (and its stack freed) by
/// [`Helper::reap`] or on drop, never before it has exited.
pub(super) struct Helper {
    pid: Pid,
    stack: *mut libc::c_void,
    /// What the child reads: kept alive until it has exited.
    _args: Box<HelperArgs>,
}

/// The helper's inputs, made before the clone.
struct HelperArgs {
    /// `/proc/INIT/ns/user`, NUL-terminated.
    user_ns: std::ffi::CString,
    /// Init's socket (the supervisor's end).
    sock: libc::c_int,
}

const HELPER_STACK: usize = 64 * 1024;

impl Helper {
    /// Waits for the helper to end (it exits once it has sent), then frees its stack.
    pub(super) fn reap(self) {
        drop(self);
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // ECHILD: reaped elsewhere already, so it has exited too.
        while let Err(Errno::EINTR) = nix::sys::wait::waitpid(self.pid, None) {}
        // SAFETY: the child that ran on this stack has exited; the mapping is ours.
        unsafe { libc::munmap(self.stack, HELPER_STACK) };
    }
}

/// Starts the helper. Returns it for the caller to reap; where it cannot be started, tells
/// init to make the namespace itself and returns `None`.
pub(super) fn spawn_helper(init: Pid, sock: &OwnedFd) -> Option<Helper> {
    let failed = || {
        let _ = nix::sys::socket::send(
            sock.as_raw_fd(),
            &[FAILED_TAG],
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
        None
    };
    let Ok(user_ns) = std::ffi::CString::new(format!("/proc/{init}/ns/user")) else {
        return failed();
    };
    let args = Box::new(HelperArgs {
        user_ns,
        sock: sock.as_raw_fd(),
    });
    // SAFETY: an anonymous private mapping with constant arguments; checked below.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            HELPER_STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return failed();
    }
    let arg = &*args as *const HelperArgs as *mut libc::c_void;
    // SAFETY: the child runs `helper_main` on its own stack (the top of the fresh mapping)
    // with `arg`, which outlives it (both are dropped only after it has been reaped); it
    // shares memory but not files' state, signal handlers or thread group with this process,
    // and `helper_main` touches nothing but its arguments and its stack.
    let pid = unsafe {
        libc::clone(
            helper_main,
            stack.cast::<u8>().add(HELPER_STACK).cast(),
            libc::CLONE_VM | libc::SIGCHLD,
            arg,
        )
    };
    if pid < 0 {
        // SAFETY: no child uses the mapping.
        unsafe { libc::munmap(stack, HELPER_STACK) };
        return failed();
    }
    crate::trace::step("supervisor", "start the network namespace's helper");
    Some(Helper {
        pid: Pid::from_raw(pid),
        stack,
        _args: args,
    })
}

/// The helper: joins init's user namespace, makes a network namespace there with its
/// loopback up, and sends a descriptor of it to init (or says it failed). Raw system calls
/// only (see [`Helper`]).
extern "C" fn helper_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the HelperArgs the parent keeps alive until this child has exited.
    let args = unsafe { &*(arg as *const HelperArgs) };
    let sent = match raw::make_net(args.user_ns.as_ptr()) {
        Some(ns) => raw::send(args.sock, NET_TAG, Some(ns)),
        None => false,
    };
    if !sent {
        raw::send(args.sock, FAILED_TAG, None);
    }
    0
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

    fn pair() -> (OwnedFd, OwnedFd) {
        use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
        let flags = SockFlag::SOCK_CLOEXEC;
        socketpair(AddressFamily::Unix, SockType::SeqPacket, None, flags).unwrap()
    }

    /// Waits for one datagram on `sock`.
    fn next(sock: &OwnedFd) -> crate::sys::Packet {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(5000u16)).unwrap();
        crate::sys::recv_packet(sock).unwrap().unwrap()
    }

    #[test]
    fn the_helpers_raw_send_passes_a_tag_and_a_descriptor() {
        use std::os::fd::IntoRawFd;
        use std::os::unix::fs::MetadataExt;
        let (ours, theirs) = pair();
        let file = std::fs::File::open("/dev/null").unwrap();
        let (dev, ino) = (
            file.metadata().unwrap().dev(),
            file.metadata().unwrap().ino(),
        );
        assert!(raw::send(
            ours.as_raw_fd(),
            NET_TAG,
            Some(file.into_raw_fd())
        ));
        let (bytes, fd) = next(&theirs);
        assert_eq!(bytes, [NET_TAG]);
        let got = std::fs::File::from(fd.expect("a descriptor"))
            .metadata()
            .unwrap();
        assert_eq!((got.dev(), got.ino()), (dev, ino));
        assert!(raw::send(ours.as_raw_fd(), FAILED_TAG, None));
        let (bytes, fd) = next(&theirs);
        assert_eq!((bytes, fd.is_none()), (vec![FAILED_TAG], true));
        drop(theirs);
        assert!(
            !raw::send(ours.as_raw_fd(), FAILED_TAG, None),
            "peer gone: no SIGPIPE"
        );
    }

    #[test]
    fn a_helper_that_cannot_join_says_so_and_is_reaped() {
        let (ours, theirs) = pair();
        // No such process: the helper cannot open its user namespace.
        let helper = spawn_helper(Pid::from_raw(i32::MAX), &ours).expect("started");
        let (bytes, fd) = next(&theirs);
        assert_eq!((bytes, fd.is_none()), (vec![FAILED_TAG], true));
        helper.reap();
    }

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
