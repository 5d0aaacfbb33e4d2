//! The worker pool: units made `workers` at a time, each in a process of its own, forked
//! per unit (no state, thread or descriptor carries from one unit to the next). A worker
//! gets its own share of the caller's CPUs, dies with the coordinator (PDEATHSIG), and
//! reports back over a socket: `+` when its unit is recorded, or `-` and one line.

use std::fmt::Display;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;
use thiserror::Error;

use super::progress::Progress;

/// Why the pool stopped; no new unit starts after one, the units in flight finish.
#[derive(Debug, Error)]
pub enum PoolError {
    /// A system call of the coordinator's failed.
    #[error("{step}: {errno}")]
    Sys { step: &'static str, errno: Errno },
    /// A unit failed; its worker's one line.
    #[error("{0}")]
    Unit(String),
    /// A worker ended without a word (killed, or it crashed).
    #[error("a worker process died before recording its run; start the study again to resume")]
    Died,
    /// SIGTERM or SIGINT came ([`stop_on_signals`]): the units in flight were ended.
    #[error("stopped by {signal}")]
    Stopped {
        signal: &'static str,
        in_flight: usize,
    },
    #[error("install the SIGTERM handler: {0}")]
    Signal(Errno),
}

/// The signal that asked the pool to stop (0: none).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

/// SIGTERM and SIGINT stop [`Pool::run`] instead of ending the process: no new unit
/// starts, the units in flight are ended (their workers killed; a resumed study makes them
/// again) and `run` returns [`PoolError::Stopped`], so the caller can say how to resume.
/// Without this call a signal keeps its usual effect.
pub fn stop_on_signals() -> Result<(), PoolError> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_stop_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &act) }.map_err(PoolError::Signal)?;
    }
    Ok(())
}

/// The stop signal's name, once one came.
fn stop_signal() -> Option<&'static str> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        _ => Some("SIGTERM"),
    }
}

fn sys(step: &'static str) -> impl Fn(Errno) -> PoolError {
    move |errno| PoolError::Sys { step, errno }
}

/// Where the pool's units run and what the coordinator keeps from them.
pub struct Pool<'p> {
    /// Units made at a time.
    pub workers: usize,
    /// Descriptors of the coordinator's that a worker closes first (the study lock: no
    /// sandbox may hold it).
    pub close_in_worker: Vec<RawFd>,
    pub progress: &'p mut Progress,
}

/// A worker process making one unit, and our end of its socket.
struct Running {
    pid: Pid,
    sock: OwnedFd,
    label: String,
}

impl Pool<'_> {
    /// Makes every unit of `pending`, none before its `eligible_at` (Unix milliseconds),
    /// running `work` in a worker process for each; `label` names a unit for progress.
    /// On an error no new unit starts; the units in flight finish.
    pub fn run<U, E: Display>(
        &mut self,
        pending: Vec<U>,
        eligible_at: impl Fn(&U) -> i64,
        label: impl Fn(&U) -> String,
        work: impl Fn(&U) -> Result<(), E>,
    ) -> Result<(), PoolError> {
        self.run_until(pending, eligible_at, label, work, || false)
    }

    /// [`Pool::run`], and no new unit starts once `stop` says so (a SIGTERM to an array
    /// task); the units in flight finish.
    pub fn run_until<U, E: Display>(
        &mut self,
        mut pending: Vec<U>,
        eligible_at: impl Fn(&U) -> i64,
        label: impl Fn(&U) -> String,
        work: impl Fn(&U) -> Result<(), E>,
        stop: impl Fn() -> bool,
    ) -> Result<(), PoolError> {
        if pending.is_empty() {
            return Ok(());
        }
        self.progress.add(pending.len());
        let slots = self.workers.max(1).min(pending.len());
        let mut running: Vec<Option<Running>> = (0..slots).map(|_| None).collect();
        let mut error: Option<PoolError> = None;
        loop {
            if let Some(signal) = stop_signal() {
                return Err(self.stop(&mut running, signal));
            }
            let now = super::unix_now_ms();
            if stop() {
                pending.clear();
            }
            if error.is_none() {
                for slot in 0..slots {
                    if running[slot].is_some() {
                        continue;
                    }
                    let Some(pos) = pending.iter().position(|u| eligible_at(u) <= now) else {
                        break;
                    };
                    let unit = pending.remove(pos);
                    match self.spawn(|| work(&unit), (slot, slots), &running) {
                        Ok((pid, sock)) => {
                            running[slot] = Some(Running {
                                pid,
                                sock,
                                label: label(&unit),
                            })
                        }
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
            }
            let idle = running.iter().all(Option::is_none);
            if idle && (pending.is_empty() || error.is_some()) {
                return error.map_or(Ok(()), Err);
            }
            let wait = if idle {
                pending
                    .iter()
                    .map(&eligible_at)
                    .min()
                    .map_or(1000, |t| (t - now).clamp(1, 1000))
            } else {
                1000
            };
            self.collect(&mut running, wait, &mut error)?;
            self.progress.tick();
        }
    }

    /// Ends the units in flight (their workers, and with them their sandboxes) after a
    /// stop signal.
    fn stop(&mut self, running: &mut [Option<Running>], signal: &'static str) -> PoolError {
        let mut in_flight = 0;
        for slot in running.iter_mut() {
            if let Some(r) = slot.take() {
                in_flight += 1;
                let _ = nix::sys::signal::kill(r.pid, nix::sys::signal::Signal::SIGKILL);
                let _ = nix::sys::wait::waitpid(r.pid, None);
            }
        }
        PoolError::Stopped { signal, in_flight }
    }

    /// Waits up to `wait` ms for workers to report, and reaps those that did.
    fn collect(
        &mut self,
        running: &mut [Option<Running>],
        wait: i64,
        error: &mut Option<PoolError>,
    ) -> Result<(), PoolError> {
        let mut fds: Vec<PollFd> = running
            .iter()
            .flatten()
            .map(|r| PollFd::new(r.sock.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(
            &mut fds,
            PollTimeout::try_from(wait as i32).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(sys("poll")(e)),
        }
        let ready: Vec<bool> = fds.iter().map(|f| f.any().unwrap_or(false)).collect();
        drop(fds);
        let mut ready = ready.into_iter();
        for slot in running.iter_mut() {
            let Some(r) = slot.as_ref() else { continue };
            if !ready.next().unwrap_or(false) {
                continue;
            }
            let mut buf = vec![0u8; 4096];
            let got = recv(r.sock.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap_or(0);
            match buf.first() {
                Some(b'+') if got > 0 => self.progress.done(&r.label),
                Some(b'-') if got > 0 => {
                    let msg = String::from_utf8_lossy(&buf[1..got]).into_owned();
                    error.get_or_insert(PoolError::Unit(msg));
                }
                _ => {
                    error.get_or_insert(PoolError::Died);
                }
            }
            let _ = nix::sys::wait::waitpid(r.pid, None);
            *slot = None;
        }
        Ok(())
    }

    /// Forks the worker for one unit. The coordinator has no other threads and no
    /// database connection open, so the fork is safe; the worker closes the descriptors it
    /// must not keep, runs `work`, reports `+` (or `-` and one line) and exits. It dies
    /// with the coordinator.
    fn spawn<E: Display>(
        &self,
        work: impl FnOnce() -> Result<(), E>,
        (slot, slots): (usize, usize),
        others: &[Option<Running>],
    ) -> Result<(Pid, OwnedFd), PoolError> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(sys("socketpair"))?;
        let parent = nix::unistd::getpid();
        // SAFETY: the coordinator is single-threaded (no sandbox, server thread, progress
        // thread or database connection lives in it), so the child may run ordinary code;
        // it leaves with _exit.
        match unsafe { nix::unistd::fork() }.map_err(sys("fork"))? {
            nix::unistd::ForkResult::Parent { child } => Ok((child, ours)),
            nix::unistd::ForkResult::Child => {
                // SAFETY: prctl with constant arguments.
                unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
                if nix::unistd::getppid() != parent {
                    // SAFETY: leaving the child without running destructors.
                    unsafe { libc::_exit(1) };
                }
                drop(ours);
                for &fd in &self.close_in_worker {
                    // SAFETY: closing our inherited copy of a coordinator's descriptor (the
                    // coordinator keeps its own); never used again here.
                    unsafe { libc::close(fd) };
                }
                for r in others.iter().flatten() {
                    // SAFETY: closing our inherited copy of another worker's socket; the
                    // OwnedFd in this copy of memory is never used or dropped (we _exit).
                    unsafe { libc::close(r.sock.as_raw_fd()) };
                }
                cpu_slice(slot, slots);
                let reply = |msg: &[u8]| {
                    let _ = send(theirs.as_raw_fd(), msg, MsgFlags::MSG_NOSIGNAL);
                };
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
                match ran {
                    Ok(Ok(())) => reply(b"+"),
                    Ok(Err(e)) => reply(format!("-{e}").as_bytes()),
                    Err(_) => reply(b"-a worker panicked; start the study again to resume"),
                }
                // SAFETY: as above.
                unsafe { libc::_exit(0) }
            }
        }
    }
}

/// Gives worker slot `w` of `n` its own share of the caller's CPUs, so that concurrent
/// units do not contend for one CPU (a pinned run takes one CPU of its worker's share; a
/// host-like run the whole share). Best effort: on failure the worker keeps the mask.
fn cpu_slice(w: usize, n: usize) {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    let me = Pid::from_raw(0);
    let Ok(current) = sched_getaffinity(me) else {
        return;
    };
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|c| current.is_set(*c).unwrap_or(false))
        .collect();
    if cpus.is_empty() {
        return;
    }
    let share: Vec<usize> = if cpus.len() >= n {
        cpus[w * cpus.len() / n..(w + 1) * cpus.len() / n].to_vec()
    } else {
        vec![cpus[w % cpus.len()]]
    };
    let mut set = CpuSet::new();
    for c in share {
        let _ = set.set(c);
    }
    let _ = sched_setaffinity(me, &set);
}
