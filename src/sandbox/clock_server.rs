//! The supervisor's side of the time path for programs that bypass libc (static, Go): a
//! thread that answers the workload's seccomp notifications — realtime clock calls (answered
//! from the sandbox's clock page) and execs (handed to `vdso`, which gives static and Go
//! programs the clock in-process).
//!
//! The page is the file init wrote at /run/reprorun/clock; the server maps it before it
//! answers anything (so before the workload runs a single instruction of its own), opened
//! inside the sandbox's root without following any link, and checked to be a regular file of
//! a full page, so the preload library and this server share one offset and one tick counter.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::unistd::Pid;

use crate::determinism::clock::{ClockMode, ClockPlan, PAGE_PATH, PAGE_SIZE};
use crate::sys::seccomp;

/// The clock page, mapped shared.
struct Page {
    ptr: *mut u8,
}

// SAFETY: the mapping is process-wide shared memory accessed only through volatile reads and
// an atomic counter; it stays mapped for the Page's whole life.
unsafe impl Send for Page {}

/// Address of the tick-mode mapping, for the SIGBUS guard.
static GUARDED: AtomicUsize = AtomicUsize::new(0);

/// In tick mode the page file is writable from inside, so the workload could truncate it and
/// make our next access fault. The guard replaces the mapping with a private zero page and
/// lets the access retry: only that sandbox's clock is affected, never the supervisor.
extern "C" fn sigbus_guard(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = GUARDED.load(Ordering::Relaxed);
    if page != 0 && (page..page + PAGE_SIZE).contains(&addr) {
        // SAFETY: remaps exactly our own page (async-signal-safe system call).
        unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        return;
    }
    // SAFETY: not our fault: restore the default action and re-raise (async-signal-safe).
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

impl Page {
    /// Maps the clock page at `path` inside the directory `root` (init's root for a sandbox).
    fn open(at: &PageAt, writable: bool) -> Result<Page, Errno> {
        let root = std::fs::File::open(&at.root)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let file = crate::sys::open_in_root_with(&root, &at.path, writable, true)?;
        let meta = file.metadata().map_err(|_| Errno::EIO)?;
        if !meta.is_file() || meta.len() < PAGE_SIZE as u64 {
            return Err(Errno::EINVAL);
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: maps one page of a regular file of at least that size; checked against
        // MAP_FAILED; unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        if writable {
            GUARDED.store(ptr as usize, Ordering::Relaxed);
            let guard = nix::sys::signal::SigAction::new(
                nix::sys::signal::SigHandler::SigAction(sigbus_guard),
                nix::sys::signal::SaFlags::SA_SIGINFO,
                nix::sys::signal::SigSet::empty(),
            );
            // SAFETY: the handler only makes async-signal-safe calls.
            unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGBUS, &guard) }?;
        }
        Ok(Page {
            ptr: ptr as *mut u8,
        })
    }

    fn offset_ns(&self) -> i64 {
        // SAFETY: offset 16 is within the mapping and 8-aligned.
        unsafe { std::ptr::read_volatile(self.ptr.add(16) as *const i64) }
    }

    fn next_tick(&self) -> u64 {
        // SAFETY: offset 64 holds the page's 8-aligned AtomicU64 read counter, shared with
        // the preload library in the sandbox.
        let counter = unsafe { &*(self.ptr.add(64) as *const std::sync::atomic::AtomicU64) };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, PAGE_SIZE) };
    }
}

struct Server {
    clock: ClockPlan,
    page: Option<Page>,
}

impl Server {
    /// The in-process clock for static and Go programs; `None` in tick mode, whose shared
    /// counter only the server and the preload library advance.
    fn fake_clock(&self) -> Option<super::vdso::FakeClock> {
        use super::vdso::FakeClock;
        match self.clock.mode {
            ClockMode::Frozen => Some(FakeClock::Frozen {
                epoch: self.clock.epoch,
            }),
            ClockMode::StartAt => self.page.as_ref().map(|p| FakeClock::StartAt {
                offset_ns: p.offset_ns(),
            }),
            ClockMode::Tick { .. } => None,
        }
    }

    fn now_ns(&self) -> i64 {
        let epoch_ns = self.clock.epoch.saturating_mul(1_000_000_000);
        match (self.clock.mode, &self.page) {
            (ClockMode::StartAt, Some(p)) => {
                let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
                    .map_or(0, |t| t.tv_sec() * 1_000_000_000 + t.tv_nsec());
                t + p.offset_ns()
            }
            (ClockMode::Tick { step_ns }, Some(p)) => {
                epoch_ns + p.next_tick() as i64 * step_ns as i64
            }
            // Frozen; or no page (it could not be opened safely): the pinned date.
            _ => epoch_ns,
        }
    }

    /// Answers one notification; Err when the listener is finished.
    fn answer(&mut self, listener: &OwnedFd) -> Result<(), Errno> {
        let notif = match seccomp::recv(listener) {
            Ok(n) => n,
            Err(Errno::EINTR) => return Ok(()),
            // The caller died before we read its call, or no process uses the filter any
            // more: in the latter case the listener has hung up and we are done.
            Err(Errno::ENOENT) => {
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::NONE);
                let hup = fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLHUP));
                return if hup { Err(Errno::ENOENT) } else { Ok(()) };
            }
            Err(e) => return Err(e),
        };
        let nr = notif.data.nr as i64;
        let pid = Pid::from_raw(notif.pid as i32);
        let id = notif.id;
        if nr == libc::SYS_execve || nr == libc::SYS_execveat {
            let fake = self.fake_clock();
            super::vdso::on_exec(
                pid,
                nr,
                &notif.data.args,
                fake,
                || seccomp::id_valid(listener, id),
                || {
                    let _ = seccomp::respond_continue(listener, id);
                },
            );
            return Ok(());
        }
        // The vDSO itself falls back to the system call when the clocksource cannot be read
        // from user space; its caller (the preload library or the injected page) adds the
        // offset itself, so such a call must read the real clock.
        if from_vdso(pid, notif.data.instruction_pointer) {
            let _ = seccomp::respond_continue(listener, id);
            return Ok(());
        }
        // Open the caller's memory first, then check that the notification (and so the pid)
        // is still the caller's: the descriptor keeps naming that process even if the pid is
        // reused afterwards.
        let Ok(mem) = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{pid}/mem"))
        else {
            return Ok(()); // the caller is gone
        };
        if !seccomp::id_valid(listener, id) {
            return Ok(());
        }
        let now = self.now_ns();
        let (secs, nanos) = (now.div_euclid(1_000_000_000), now.rem_euclid(1_000_000_000));
        let args = notif.data.args;
        let pair = |a: i64, b: i64| {
            let mut buf = [0u8; 16];
            buf[..8].copy_from_slice(&a.to_ne_bytes());
            buf[8..].copy_from_slice(&b.to_ne_bytes());
            buf
        };
        let put = |addr: u64, bytes: &[u8]| match addr {
            0 => Ok(()),
            _ => mem.write_all_at(bytes, addr).map_err(|_| Errno::EFAULT),
        };
        let result = if nr == libc::SYS_clock_gettime {
            put(args[1], &pair(secs, nanos)).map(|_| 0)
        } else if nr == libc::SYS_gettimeofday {
            put(args[0], &pair(secs, nanos / 1000))
                .and_then(|_| put(args[1], &[0u8; 8]))
                .map(|_| 0)
        } else {
            put(args[0], &secs.to_ne_bytes()).map(|_| secs) // time(2)
        };
        let (val, err) = match result {
            Ok(v) => (v, 0),
            Err(_) => (0, libc::EFAULT),
        };
        let _ = seccomp::respond(listener, id, val, err);
        Ok(())
    }
}

/// Whether `ip` lies in the vDSO of process `pid` (read from /proc/PID/maps).
fn from_vdso(pid: Pid, ip: u64) -> bool {
    // The vDSO sits just below the stack, at the top of the address space; a program's own
    // text (static binaries, the usual callers here) is far below. Skip the read for those.
    if ip < 0x7f00_0000_0000 {
        return false;
    }
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    maps.lines().filter(|l| l.ends_with("[vdso]")).any(|l| {
        let range = l.split_whitespace().next().unwrap_or("");
        let mut ends = range
            .split('-')
            .map(|h| u64::from_str_radix(h, 16).unwrap_or(0));
        match (ends.next(), ends.next()) {
            (Some(lo), Some(hi)) => (lo..hi).contains(&ip),
            _ => false,
        }
    })
}

/// The clock server thread and the channel that hands it the workload's listener.
pub struct ClockServer {
    pub listener: Sender<OwnedFd>,
    thread: JoinHandle<()>,
}

impl ClockServer {
    /// Ends a server that never got a listener (the sandbox failed before its workload ran):
    /// the thread sees the channel close and returns.
    pub fn stop_unused(self) {
        drop(self.listener);
        let _ = self.thread.join();
    }
}

/// Where the clock page is: `path` resolved inside `root`, without following links.
pub struct PageAt {
    pub root: PathBuf,
    pub path: PathBuf,
}

impl PageAt {
    /// The page of the sandbox whose init is `init`.
    pub fn sandbox(init: Pid) -> PageAt {
        PageAt {
            root: PathBuf::from(format!("/proc/{init}/root")),
            path: PathBuf::from(PAGE_PATH),
        }
    }
}

/// Starts the server thread now (so its start-up overlaps the sandbox's); it serves the
/// listener sent through the channel until no process uses the filter any more.
pub fn start(clock: ClockPlan, at: PageAt) -> Result<ClockServer, Errno> {
    let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
    let thread = std::thread::Builder::new()
        .name("reprorun-clock".into())
        .spawn(move || {
            let Ok(listener) = rx.recv() else { return };
            // The workload sent its listener just before its first exec, which now waits for
            // us: map the page before answering anything.
            let tick = matches!(clock.mode, ClockMode::Tick { .. });
            let page = match clock.mode {
                ClockMode::Frozen => None,
                _ => Page::open(&at, tick).ok(),
            };
            let mut server = Server { clock, page };
            // Ask the kernel to hand the CPU straight to us and back (a synchronous round
            // trip); an older kernel without the flag still works, with slower wake-ups.
            // Blocking in RECV (not in poll) is what the synchronous wake-up hands the CPU to.
            let _ = seccomp::set_sync_wakeup(&listener);
            while server.answer(&listener).is_ok() {}
        })
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EAGAIN)))?;
    Ok(ClockServer {
        listener: tx,
        thread,
    })
}
