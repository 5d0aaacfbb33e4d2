//! Landlock scoping (ABI 6 and later): a second wall, behind the namespaces, around what the
//! workload may reach outside its own processes. `LANDLOCK_SCOPE_SIGNAL` keeps it from
//! signalling any process that is not in its Landlock domain (the caller, reprorun itself);
//! `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` from connecting to abstract unix sockets made
//! outside it (with `--net host` they are the host's). No filesystem or network access right
//! is handled: named sockets on the host root are covered by the plan (`spec/security.md`).

use nix::errno::Errno;

const LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1;
const LANDLOCK_SCOPE_SIGNAL: u64 = 2;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// Puts the calling thread (and everything it starts) in a Landlock domain scoped for
/// signals and abstract unix sockets. `Ok(false)` where the kernel has no scopes (older than
/// ABI 6: the attribute's `scoped` field is unknown to it, E2BIG; or Landlock off or absent):
/// nothing is changed. Two system calls, no version query first (this is on every run's
/// start-up path). Needs no_new_privs (or CAP_SYS_ADMIN).
pub fn scope_self() -> Result<bool, Errno> {
    let attr = RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: 0,
        scoped: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL,
    };
    // SAFETY: `attr` is a valid ruleset attribute of the size passed, alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    let fd = match Errno::result(fd) {
        Ok(fd) => fd as libc::c_int,
        Err(Errno::E2BIG | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => return Ok(false),
        Err(e) => return Err(e),
    };
    // SAFETY: the kernel returned a new descriptor (close-on-exec by definition: Landlock
    // ruleset fds are O_CLOEXEC) that nothing else owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: restrict_self takes the ruleset descriptor and flags (0); it only changes this
    // thread's credentials.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            0u32,
        )
    };
    Errno::result(r).map(|_| true)
}
