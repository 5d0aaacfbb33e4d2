//! seccomp user notification: installing a filter with a listener, and the listener's ioctls.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`: installs a classic-BPF filter on the
/// calling thread (inherited by its children and across exec). The caller must have
/// no_new_privs set. Returns what the kernel returns (a listener with NEW_LISTENER).
fn set_filter<F>(prog: &[F], flags: libc::c_ulong) -> Result<libc::c_long, Errno> {
    // The kernel's `struct sock_filter` (libc's and seccompiler's types share its layout).
    assert_eq!(
        std::mem::size_of::<F>(),
        std::mem::size_of::<libc::sock_filter>()
    );
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| Errno::EINVAL)?,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points to `prog`, which outlives the call; the kernel copies the program.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    Errno::result(r)
}

/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` (Linux 5.19): once the server has received a
/// notification, only a fatal signal ends the caller's wait. Without it a signal arriving
/// while the server answers (a child's SIGCHLD) makes the call fail with EINTR when the
/// handler lacks SA_RESTART.
const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;

/// Installs a filter and returns its notification listener (close-on-exec). Waits the
/// server has taken up are killable only (where the kernel knows the flag).
pub fn install_with_listener(prog: &[libc::sock_filter]) -> Result<OwnedFd, Errno> {
    let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as libc::c_ulong;
    let fd = match set_filter(prog, listener | WAIT_KILLABLE_RECV) {
        Err(Errno::EINVAL) => set_filter(prog, listener)?,
        other => other?,
    } as RawFd;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    nix::fcntl::fcntl(
        owned.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )?;
    Ok(owned)
}

/// Installs a filter (a compiled security profile).
pub fn install(prog: &[seccompiler::sock_filter]) -> Result<(), Errno> {
    set_filter(prog, 0).map(drop)
}

/// Receives one pending notification.
pub fn recv(listener: &OwnedFd) -> Result<libc::seccomp_notif, Errno> {
    // SAFETY: seccomp_notif is plain old data; the kernel requires it zeroed on entry.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into the valid, exclusively borrowed struct.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif,
        )
    };
    Errno::result(ret).map(|_| notif)
}

/// Whether the notification is still pending (its thread did not die or get a signal).
pub fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from a valid pointer.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

/// Answers a notification: the system call returns `val`, or fails with `error` (positive).
pub fn respond(listener: &OwnedFd, id: u64, val: i64, error: i32) -> Result<(), Errno> {
    send(
        listener,
        libc::seccomp_notif_resp {
            id,
            val,
            error: -error,
            flags: 0,
        },
    )
}

/// Lets the notified system call run as if no filter had stopped it.
pub fn respond_continue(listener: &OwnedFd, id: u64) -> Result<(), Errno> {
    let flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
    send(
        listener,
        libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags,
        },
    )
}

fn send(listener: &OwnedFd, mut resp: libc::seccomp_notif_resp) -> Result<(), Errno> {
    // SAFETY: the ioctl reads one seccomp_notif_resp from a valid pointer.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp,
        )
    };
    Errno::result(ret).map(drop)
}

/// Asks for synchronous wake-ups between the notifying thread and the listener's reader
/// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6): lower latency per notification.
pub fn set_sync_wakeup(listener: &OwnedFd) -> Result<(), Errno> {
    const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104; // _IOW('!', 4, __u64)
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the ioctl takes the flags by value; no pointer is passed.
    let ret = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    Errno::result(ret).map(drop)
}
