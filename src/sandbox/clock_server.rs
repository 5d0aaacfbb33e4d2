//! Answers the workload's realtime clock system calls (and watches its execs, see `vdso`) (static and Go programs, whose vDSO was
//! stripped at exec) from a thread of the supervisor, through the seccomp notification
//! listener the workload sent. The clock is the sandbox's own clock page, mapped shared, so
//! the preload library and this server read the same offset and the same tick counter.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::unistd::Pid;

use crate::determinism::clock::{ClockMode, ClockPlan, PAGE_PATH};
use crate::sys::seccomp;

/// One page of the sandbox's clock file, mapped shared.
struct Page {
    ptr: *mut u8,
}

// SAFETY: the mapping is process-wide shared memory accessed only through volatile reads and
// an atomic counter; it is never unmapped while a reference exists (Drop takes &mut self).
unsafe impl Send for Page {}

impl Page {
    fn map(path: &Path, writable: bool) -> Option<Page> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .ok()?;
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: maps one page of a regular file we hold open; checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Page {
            ptr: ptr as *mut u8,
        })
    }

    fn offset_ns(&self) -> i64 {
        // SAFETY: offset 16 is within the 4096-byte mapping and 8-aligned.
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
        // SAFETY: unmaps exactly the mapping made in `map`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, 4096) };
    }
}

struct Server {
    clock: ClockPlan,
    init: Pid,
    page: Option<Page>,
}

impl Server {
    /// The in-process clock for static and Go programs; `None` in tick mode, whose shared
    /// counter only the server can advance.
    fn fake_clock(&mut self) -> Option<super::vdso::FakeClock> {
        use super::vdso::FakeClock;
        match self.clock.mode {
            ClockMode::Frozen => Some(FakeClock::Frozen {
                epoch: self.clock.epoch,
            }),
            ClockMode::StartAt => {
                self.map_page();
                self.page.as_ref().map(|p| FakeClock::StartAt {
                    offset_ns: p.offset_ns(),
                })
            }
            ClockMode::Tick { .. } => None,
        }
    }

    fn map_page(&mut self) {
        if self.page.is_none() && self.clock.mode != ClockMode::Frozen {
            let tick = matches!(self.clock.mode, ClockMode::Tick { .. });
            let path = format!("/proc/{}/root{PAGE_PATH}", self.init);
            self.page = Page::map(Path::new(&path), tick);
        }
    }

    fn now_ns(&mut self) -> i64 {
        let epoch_ns = self.clock.epoch.saturating_mul(1_000_000_000);
        self.map_page();
        match (self.clock.mode, &self.page) {
            (ClockMode::StartAt, Some(p)) => {
                let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
                    .map_or(0, |t| t.tv_sec() * 1_000_000_000 + t.tv_nsec());
                t + p.offset_ns()
            }
            (ClockMode::Tick { step_ns }, Some(p)) => {
                epoch_ns + p.next_tick() as i64 * step_ns as i64
            }
            // Frozen; or no page (the sandbox is already gone): the pinned date.
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
        if nr == libc::SYS_execve || nr == libc::SYS_execveat {
            let id = notif.id;
            let fake = self.fake_clock();
            super::vdso::on_exec(pid, nr, &notif.data.args, fake, || {
                let _ = seccomp::respond_continue(listener, id);
            });
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
        let mem = super::vdso::Remote(pid);
        let put = |addr: u64, bytes: &[u8]| {
            if addr == 0 {
                Ok(())
            } else {
                mem.write(addr, bytes)
            }
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
        // The id is still valid only if the caller is still waiting in this very call (it
        // was not killed and its pid not reused) — checked after writing, before answering.
        if seccomp::id_valid(listener, notif.id) {
            let (val, err) = match result {
                Ok(v) => (v, 0),
                Err(_) => (0, libc::EFAULT),
            };
            let _ = seccomp::respond(listener, notif.id, val, err);
        }
        Ok(())
    }
}

/// Starts the server thread now (so its start-up overlaps the sandbox's); it serves the
/// listener sent through the returned channel until no process uses the filter any more.
pub fn start(clock: ClockPlan, init: Pid) -> std::sync::mpsc::Sender<OwnedFd> {
    let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
    let mut server = Server {
        clock,
        init,
        page: None,
    };
    let _ = std::thread::Builder::new()
        .name("reprorun-clock".into())
        .spawn(move || {
            let Ok(listener) = rx.recv() else { return };
            // Ask the kernel to hand the CPU straight to us and back (a synchronous round trip);
            // an older kernel without the flag still works, with slower wake-ups. Blocking in
            // RECV (not in poll) is what the synchronous wake-up hands the CPU to.
            let _ = seccomp::set_sync_wakeup(&listener);
            while server.answer(&listener).is_ok() {}
        });
    tx
}
