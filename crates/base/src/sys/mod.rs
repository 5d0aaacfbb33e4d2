//! Thin, safe wrappers over the system calls that nix does not cover. Each returns the raw
//! errno as [`Errno`]; callers name the step that failed.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::errno::Errno;
use nix::unistd::Pid;

pub mod bpf;
pub mod hostpath;
pub mod landlock;
pub mod newmount;
pub mod sched;
pub mod seccomp;
pub mod stack;
pub mod unixpath;

/// `MOUNT_ATTR_*` bits for [`mount_setattr`].
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const AT_RECURSIVE: libc::c_uint = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The kernel's real-time signals, numbered as glibc and runc number them (`RTMIN` is 34):
/// musl's `SIGRTMIN()` is 35, as it keeps 34 for itself, so reprorun does not ask its libc.
pub const SIGRT_FIRST: i32 = 34;
/// The last real-time signal (`RTMAX`).
pub const SIGRT_LAST: i32 = 64;

fn cpath(path: &Path) -> Result<CString, Errno> {
    CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Errno::EINVAL)
}

/// Creates a child process in new namespaces, like `fork(2)` with namespace flags.
/// Returns `Ok(None)` in the child and `Ok(Some(pid))` in the parent.
///
/// The caller must be single-threaded: the child is a copy of the calling thread only, and
/// glibc's cached thread id in the child still names the parent's thread, so the child must
/// not use pthread functions that rely on it (it only mounts, forks and execs).
pub fn clone_process(flags: libc::c_int) -> Result<Option<Pid>, Errno> {
    // SAFETY: a raw clone without CLONE_VM and with a null stack behaves like fork(2): the
    // child gets a copy-on-write copy of the address space and continues on the same stack.
    // No pointer arguments are passed (parent_tid, child_tid and tls are null).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match ret {
        -1 => Err(Errno::last()),
        0 => Ok(None),
        pid => Ok(Some(Pid::from_raw(pid as libc::pid_t))),
    }
}

/// `struct clone_args` (linux/sched.h) up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP`: the child starts in the cgroup v2 directory `clone_args.cgroup`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// [`clone_process`] with the child created in the cgroup v2 directory `cgroup` (`clone3`
/// with `CLONE_INTO_CGROUP`): no migration afterwards, which on a kernel without
/// `favordynmods` waits for an RCU grace period (milliseconds) when no other migration came
/// just before; with a new cgroup namespace, its root is that cgroup.
pub fn clone_process_into(flags: libc::c_int, cgroup: BorrowedFd) -> Result<Option<Pid>, Errno> {
    let args = CloneArgs {
        flags: flags as u32 as u64 | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: as `clone_process`: without CLONE_VM and with no stack the child is a
    // copy-on-write copy continuing on the same stack; `args` is a valid `clone_args` of the
    // size passed, read by the call only, and holds no pointers.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match ret {
        -1 => Err(Errno::last()),
        0 => Ok(None),
        pid => Ok(Some(Pid::from_raw(pid as libc::pid_t))),
    }
}

/// Sets or clears mount attributes on the mount at `path` (and, with `recursive`, on every
/// mount below it) through `mount_setattr(2)`.
pub fn mount_setattr(path: &Path, recursive: bool, set: u64, clear: u64) -> Result<(), Errno> {
    let c = cpath(path)?;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `c` is a valid NUL-terminated string and `attr` a valid mount_attr whose size
    // is passed alongside; the kernel only reads both during the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    Errno::result(ret).map(drop)
}

/// `RESOLVE_*` bits of `openat2(2)`.
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
pub const RESOLVE_BENEATH: u64 = 0x08;
pub const RESOLVE_IN_ROOT: u64 = 0x10;

/// Opens `path` (absolute or relative) as seen from the directory `root` taken as the root:
/// `..` and absolute symlinks cannot leave it (`openat2` with RESOLVE_IN_ROOT), and no
/// procfs magic link is followed. Regular files only (looked up with O_PATH first, so no
/// FIFO, device or socket is ever opened). Read-only, close-on-exec, non-blocking.
pub fn open_in_root(root: &std::fs::File, path: &Path) -> Result<std::fs::File, Errno> {
    open_in_root_with(root, path, false, false)
}

/// Finds `path` inside `root` (as [`open_in_root`] resolves it) without opening it: an
/// O_PATH descriptor, whatever the file's type (no device's open runs).
pub fn find_in_root(root: &std::fs::File, path: &Path) -> Result<std::fs::File, Errno> {
    openat2(
        root,
        path,
        libc::O_PATH,
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    )
}

/// [`open_in_root`], optionally read-write, and optionally refusing every symbolic link on
/// the way (RESOLVE_NO_SYMLINKS).
pub fn open_in_root_with(
    root: &std::fs::File,
    path: &Path,
    write: bool,
    no_symlinks: bool,
) -> Result<std::fs::File, Errno> {
    let resolve =
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | if no_symlinks { RESOLVE_NO_SYMLINKS } else { 0 };
    let probe = openat2(root, path, libc::O_PATH, resolve)?;
    reopen_regular(&probe, write)
}

/// Reopens an O_PATH descriptor (through /proc/self/fd) for reading, or reading and
/// writing, if it names a regular file; EINVAL for any other kind of file.
pub fn reopen_regular(probe: &std::fs::File, write: bool) -> Result<std::fs::File, Errno> {
    let st = nix::sys::stat::fstat(probe.as_raw_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Errno::EINVAL);
    }
    reopen_fd(
        probe.as_fd(),
        if write { libc::O_RDWR } else { libc::O_RDONLY },
    )
}

/// Reopens an open file (an `O_PATH` descriptor will do) through `/proc/self/fd` with open
/// `flags` (`O_NONBLOCK` and `O_CLOEXEC` added): never through its path again. The caller
/// checks what kind of file it is first.
pub(crate) fn reopen_fd(fd: BorrowedFd, flags: libc::c_int) -> Result<std::fs::File, Errno> {
    let c = cpath(Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())))?;
    // SAFETY: `c` is a valid NUL-terminated path the kernel only reads during the call.
    let new = unsafe { libc::open(c.as_ptr(), flags | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    let new = Errno::result(new)?;
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(new) }))
}

/// `openat2(2)`: `path` from the directory `dir` with open `flags` (O_CLOEXEC added) and
/// `resolve` (`RESOLVE_*` bits).
pub fn openat2(
    dir: &std::fs::File,
    path: &Path,
    flags: libc::c_int,
    resolve: u64,
) -> Result<std::fs::File, Errno> {
    openat2_at(dir.as_raw_fd(), path, flags, resolve).map(std::fs::File::from)
}

/// [`openat2`] from a raw directory descriptor (`AT_FDCWD` for the current directory).
pub(crate) fn openat2_at(
    dir: RawFd,
    path: &Path,
    flags: libc::c_int,
    resolve: u64,
) -> Result<OwnedFd, Errno> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let c = cpath(path)?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: `c` is NUL-terminated and `how` a valid open_how whose size is passed; both
    // outlive the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    let fd = Errno::result(fd)? as RawFd;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The mount id of an open file (`statx` STATX_MNT_ID): with st_dev and st_ino, it tells
/// whether two descriptors name the same directory through the same mount.
pub fn mount_id(file: &std::fs::File) -> Result<u64, Errno> {
    const STATX_MNT_ID: u32 = 0x1000;
    // SAFETY: statx is plain old data; zeroed is a valid value that statx overwrites.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH names the descriptor itself;
    // `stx` is a valid, exclusively borrowed out-pointer.
    let ret = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_MNT_ID,
            &mut stx,
        )
    };
    Errno::result(ret)?;
    if stx.stx_mask & STATX_MNT_ID == 0 {
        return Err(Errno::ENOSYS);
    }
    Ok(stx.stx_mnt_id)
}

/// Points standard input, output and error at `/dev/null` (best effort): for a process that
/// must not hold the caller's stdio open (an OCI container's init, its monitor).
pub fn stdio_to_null() {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
        }
    }
}

/// The first component of `path` (as given: relative ones from the current directory) that
/// is a symbolic link, if any.
pub fn first_link(path: &Path) -> Option<std::path::PathBuf> {
    let mut prefix = std::path::PathBuf::new();
    for part in path.components() {
        prefix.push(part);
        if std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.is_symlink()) {
            return Some(prefix);
        }
    }
    None
}

/// `PTRACE_LISTEN`: lets a seized tracee in group-stop stay stopped while still reporting a
/// later SIGCONT (nix has no wrapper for it).
pub fn ptrace_listen(pid: Pid) -> Result<(), Errno> {
    // SAFETY: PTRACE_LISTEN takes no pointer arguments (addr and data are zero).
    let ret = unsafe { libc::ptrace(libc::PTRACE_LISTEN, pid.as_raw(), 0, 0) };
    Errno::result(ret).map(drop)
}

/// Marks every descriptor from `first` up close-on-exec (`close_range(2)`), so that only the
/// ones below `first` reach an exec'd program.
pub fn cloexec_from(first: u32) -> Result<(), Errno> {
    // SAFETY: close_range takes integers only; CLOSE_RANGE_CLOEXEC changes flags, closes none.
    // (The system call itself: musl has no wrapper.)
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    Errno::result(ret).map(drop)
}

/// `setdomainname(2)`.
pub fn setdomainname(name: &str) -> Result<(), Errno> {
    // SAFETY: the pointer and length describe `name`'s bytes, which outlive the call.
    let ret = unsafe { libc::setdomainname(name.as_ptr().cast(), name.len()) };
    Errno::result(ret).map(drop)
}

/// Resource usage of a reaped child.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    pub user_us: u64,
    pub sys_us: u64,
    pub max_rss_kib: u64,
}

impl Usage {
    fn of(ru: &libc::rusage) -> Usage {
        let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
        Usage {
            user_us: us(ru.ru_utime),
            sys_us: us(ru.ru_stime),
            max_rss_kib: ru.ru_maxrss as u64,
        }
    }
}

/// This process's resource usage together with that of every child it has waited for: what
/// its parent's `wait4` would show once it exits (less what the exit itself costs).
pub fn usage_so_far() -> Usage {
    let of = |who| {
        // SAFETY: rusage is plain old data; getrusage fills the one we own.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, exclusively borrowed out-pointer.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            Usage::of(&ru)
        } else {
            Usage::default()
        }
    };
    let (me, children) = (of(libc::RUSAGE_SELF), of(libc::RUSAGE_CHILDREN));
    Usage {
        user_us: me.user_us + children.user_us,
        sys_us: me.sys_us + children.sys_us,
        max_rss_kib: me.max_rss_kib.max(children.max_rss_kib),
    }
}

/// `wait4(2)`: waits for `pid` (or any child or tracee with -1) with `flags`; returns the
/// pid, raw wait status and resource usage (the child's own and that of every descendant it
/// waited for), or `None` with WNOHANG when nothing is ready.
pub fn wait4(pid: Pid, flags: libc::c_int) -> Result<Option<(Pid, libc::c_int, Usage)>, Errno> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value and wait4 overwrites it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let ret = loop {
        // SAFETY: status and ru are valid, exclusively borrowed out-pointers.
        let ret = unsafe { libc::wait4(pid.as_raw(), &mut status, flags, &mut ru) };
        match Errno::result(ret) {
            Ok(r) => break r,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    };
    if ret == 0 {
        return Ok(None);
    }
    Ok(Some((Pid::from_raw(ret), status, Usage::of(&ru))))
}

/// Brings the loopback interface up in the current network namespace.
pub fn loopback_up() -> Result<(), Errno> {
    // SAFETY: socket(2) with constant arguments; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let fd = Errno::result(fd)?;
    // SAFETY: fd is a socket we just created and own exclusively.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; zeroed is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCGIFFLAGS reads the interface name from and writes the flags into `req`,
    // a valid ifreq we own.
    Errno::result(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) })?;
    // SAFETY: the union's flags member is what SIOCGIFFLAGS just filled in.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: as above; SIOCSIFFLAGS only reads `req`.
    Errno::result(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) })?;
    Ok(())
}

/// A TCP socket listening on 127.0.0.1:`port` in the current network namespace.
pub fn listen_loopback(port: u16) -> Result<OwnedFd, Errno> {
    use nix::sys::socket::{bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType};
    let sock = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let addr = nix::sys::socket::SockaddrIn::new(127, 0, 0, 1, port);
    bind(sock.as_raw_fd(), &addr)?;
    listen(&sock, Backlog::new(1024).unwrap_or(Backlog::MAXCONN))?;
    Ok(sock)
}

/// Sends a descriptor over a unix socket (SCM_RIGHTS) with a one-byte tag.
pub fn send_fd(sock: &OwnedFd, fd: &OwnedFd, tag: u8) -> Result<(), Errno> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    use std::os::fd::AsRawFd;
    let fds = [fd.as_raw_fd()];
    let iov = [std::io::IoSlice::new(std::slice::from_ref(&tag))];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::MSG_NOSIGNAL, None).map(drop)
}

/// A received datagram: its bytes and the descriptor passed with it, if any.
pub type Packet = (Vec<u8>, Option<OwnedFd>);

/// One datagram from a SOCK_SEQPACKET socket without blocking: its bytes and any descriptor
/// passed with it (received close-on-exec). `Ok(None)` when nothing is queued or the peer hung up.
///
/// A peer that closed with datagrams of ours unread marks this end ECONNRESET, which the
/// kernel reports (once) before the datagrams the peer sent: those are still read (init's
/// last report when it failed before reading the network helper's namespace).
pub fn recv_packet(sock: &OwnedFd) -> Result<Option<Packet>, Errno> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; 8192];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut reset_seen = false;
    let msg = loop {
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(Errno::EAGAIN) => return Ok(None),
            // The error is cleared by reporting it: the next receive reads what is queued.
            Err(Errno::ECONNRESET) if !reset_seen => reset_seen = true,
            Err(e) => return Err(e),
        }
    };
    let n = msg.bytes;
    let mut fd = None;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: the kernel installed this descriptor for us; we take sole ownership
                // (a second one in the same message is closed by its own OwnedFd).
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                fd.get_or_insert(owned);
            }
        }
    }
    if n == 0 && fd.is_none() {
        return Ok(None);
    }
    buf.truncate(n);
    Ok(Some((buf, fd)))
}

/// A pidfd for thread `tid` (PIDFD_THREAD, Linux 6.9), or for its process where the kernel
/// only takes process ids. Close-on-exec.
pub fn pidfd_open(tid: Pid) -> Result<OwnedFd, Errno> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    for flags in [PIDFD_THREAD, 0] {
        // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid.as_raw(), flags) };
        match Errno::result(fd) {
            // SAFETY: a fresh descriptor that nothing else owns.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
            Err(Errno::EINVAL) if flags != 0 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EINVAL)
}

/// A pidfd for process `pid` (readable once the whole process has exited). Close-on-exec.
pub fn pidfd_open_process(pid: Pid) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    // SAFETY: a fresh descriptor that nothing else owns.
    Errno::result(fd).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A duplicate of descriptor `fd` of the process behind `pidfd`: the same open file
/// description, so its offset is shared. Close-on-exec (the kernel sets it).
pub fn pidfd_getfd(pidfd: &OwnedFd, fd: RawFd) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_getfd takes two descriptors and flags (0); it returns a new descriptor.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    // SAFETY: a fresh descriptor that nothing else owns.
    Errno::result(got).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sends `sig` to the process behind `pidfd` (`pidfd_send_signal(2)`).
pub fn pidfd_send_signal(pidfd: &OwnedFd, sig: i32) -> Result<(), Errno> {
    use std::os::fd::AsRawFd;
    // SAFETY: a null siginfo asks for the kernel's default; the descriptor is valid.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    Errno::result(r).map(drop)
}

/// Writes `path` so that readers see the old or the new content, never a mix: a temporary
/// file beside it (created with `mode`), synced, then renamed over it. The temporary file is
/// removed on failure.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // A unique name beside the target (same filesystem), removed if anything fails.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}
