//! A caller of a notified system call: its thread, memory and process.

use super::*;

/// A thread that made a notified call, kept between its calls: a pidfd of that very thread
/// (while it has not exited, its id cannot name another thread), its memory, and its process.
pub(super) struct Caller {
    /// `None` where the kernel gives no thread pidfds: then nothing is kept.
    pub(super) pidfd: Option<OwnedFd>,
    pub(super) mem: std::fs::File,
    pub(super) tid: Pid,
    /// (host tgid, tgid in the sandbox), read when first needed.
    pub(super) process: Option<(i32, u64)>,
}

impl Caller {
    /// Opens the caller `tid` of notification `id`: the descriptors first, then the check that
    /// the notification (and so the thread) is still the caller's.
    pub(super) fn open(listener: &OwnedFd, tid: Pid, id: u64) -> Option<Caller> {
        let pidfd = crate::sys::pidfd_open(tid).ok();
        let mem = open_mem(tid)?;
        seccomp::id_valid(listener, id).then_some(Caller {
            pidfd,
            mem,
            tid,
            process: None,
        })
    }

    pub(super) fn exited(&self) -> bool {
        exited(self.pidfd.as_ref())
    }

    /// Writes into the caller's memory (the descriptor names the memory it had when it was
    /// opened; every exec empties the cache, so that is the caller's current memory: the one
    /// exec the server is not told of, the workload's own, is preceded by no routed call of
    /// that process, see `exec::install_filters`).
    pub(super) fn put(&mut self, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        if addr == 0 {
            return Err(Errno::EFAULT);
        }
        self.mem
            .write_all_at(bytes, addr)
            .map_err(|_| Errno::EFAULT)
    }

    /// The caller's process: its host tgid and its tgid in the sandbox.
    pub(super) fn process(&mut self) -> Result<(i32, u64), Errno> {
        if self.process.is_none() {
            let [host, inner] = status_ids(self.tid, ["Tgid", "NStgid"]);
            self.process = host.and_then(|t| i32::try_from(t).ok()).zip(inner);
        }
        self.process.ok_or(Errno::ESRCH)
    }
}

pub(super) fn open_mem(tid: Pid) -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{tid}/mem"))
        .ok()
}

/// Fields of /proc/TID/status, such as `Tgid` or `NStgid`, read in one go: each one's
/// innermost value (for the `NS*` fields, the id in the sandbox's pid namespace).
pub(super) fn status_ids<const N: usize>(tid: Pid, fields: [&str; N]) -> [Option<u64>; N] {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
    fields.map(|field| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    })
}

/// Whether the process or thread behind a pidfd has exited (no pidfd: as good as exited,
/// since nothing tells it from a later one with its id).
pub(super) fn exited(pidfd: Option<&OwnedFd>) -> bool {
    let Some(pidfd) = pidfd else {
        return true;
    };
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

/// The kernel's cpumask size in bytes, as sched_getaffinity reports it.
pub(super) fn cpumask_bytes() -> usize {
    let mut buf = vec![0u8; 8192];
    // SAFETY: the kernel writes at most buf.len() bytes into the exclusively borrowed buf.
    let n = unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0, buf.len(), buf.as_mut_ptr()) };
    if n > 0 {
        n as usize
    } else {
        8
    }
}
