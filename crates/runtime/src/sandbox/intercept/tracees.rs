//! Waits shared by the supervisor's main thread and its notification thread, which traces
//! static and Go programs at their exec. In a pins-only run the workload (and every orphan)
//! is the supervisor's own child, and Linux lets any thread of the tracer's process wait for a
//! tracee that is also its natural child, reporting the tracee's ptrace stops to such a wait
//! whatever its options: the main thread's reaping would take the stops the tracing thread
//! waits for, leaving the tracee stopped for good. So:
//! - the tracing thread holds [`tracing`] from its attach to its detach;
//! - the main thread reaps only while it can take that lock ([`may_reap`]);
//! - an exit the tracing thread collects (a tracee killed while traced) is kept for the main
//!   thread ([`take_exit`]);
//! - every wait of the tracing thread has a deadline ([`wait`]).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::sys::Usage;

static TRACING: Mutex<()> = Mutex::new(());

/// Exits of natural children that the tracing thread collected: pid, raw status, usage.
static EXITS: Mutex<Vec<(Pid, libc::c_int, Usage)>> = Mutex::new(Vec::new());

/// How long the tracing thread waits for one state change of a tracee.
pub(in crate::sandbox) const WAIT_LIMIT: Duration = Duration::from_secs(2);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held by the tracing thread while it has a tracee.
pub(in crate::sandbox) fn tracing() -> MutexGuard<'static, ()> {
    lock(&TRACING)
}

/// The main thread's leave to reap now (`None`: a tracee is being handled; try again soon).
pub(in crate::sandbox) fn may_reap() -> Option<MutexGuard<'static, ()>> {
    match TRACING.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// The main thread's leave to reap, waiting for the tracing thread to let go.
pub(in crate::sandbox) fn reap_guard() -> MutexGuard<'static, ()> {
    lock(&TRACING)
}

/// An exit of `pid` (`None`: any) the tracing thread collected, taken.
pub(in crate::sandbox) fn take_exit(pid: Option<Pid>) -> Option<(Pid, libc::c_int, Usage)> {
    let mut exits = lock(&EXITS);
    let at = exits.iter().position(|e| pid.map_or(true, |p| p == e.0))?;
    Some(exits.remove(at))
}

/// The tracing thread's wait for `pid` (-1: any tracee of this thread) with `flags`
/// (`__WALL | __WNOTHREAD` are added): the first state change within [`WAIT_LIMIT`], or
/// ETIMEDOUT. With WNOHANG, returns at once (`StillAlive`: nothing yet). An exit it collects
/// is kept for the main thread.
pub(in crate::sandbox) fn wait(pid: Pid, flags: libc::c_int) -> Result<WaitStatus, Errno> {
    let flags = flags | libc::__WALL | libc::__WNOTHREAD;
    let once = flags & libc::WNOHANG != 0;
    let deadline = Instant::now() + WAIT_LIMIT;
    let mut pause = Duration::from_micros(20);
    loop {
        match crate::sys::wait4(pid, flags | libc::WNOHANG)? {
            Some((p, status, usage)) => {
                if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                    lock(&EXITS).push((p, status, usage));
                }
                return WaitStatus::from_raw(p, status);
            }
            None if once => return Ok(WaitStatus::StillAlive),
            None if Instant::now() >= deadline => return Err(Errno::ETIMEDOUT),
            None => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
        }
    }
}

/// Stops tracing a seized tracee that may be running (PTRACE_DETACH needs a stopped one):
/// interrupts it, waits for it to stop and detaches. A signal-delivery stop that comes
/// first serves as well, and its signal is passed on at the detach. The stop is awaited from
/// any tracee of this thread (it has only this one): a thread that completes an exec
/// meanwhile stops under its leader's pid. Nothing is left to do when it died meanwhile.
/// Every wait has a deadline: a tracee whose stop never shows is detached if it is stopped,
/// and killed rather than left traced if it cannot be.
pub(in crate::sandbox) fn release(pid: Pid) {
    if ptrace::interrupt(pid).is_err() {
        return; // gone (or not ours)
    }
    match wait_stop(Pid::from_raw(-1)) {
        Ok(WaitStatus::Stopped(p, sig)) => {
            let _ = ptrace::detach(p, sig);
        }
        Ok(WaitStatus::PtraceEvent(p, ..) | WaitStatus::PtraceSyscall(p)) => {
            let _ = ptrace::detach(p, None);
        }
        Err(Errno::ETIMEDOUT) => {
            if ptrace::detach(pid, None).is_err() {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            }
        }
        // Exited or killed meanwhile, or no tracee left.
        Ok(_) | Err(_) => {}
    }
}

/// The next state change of tracee `pid` (-1: any tracee of this thread), within
/// `tracees::WAIT_LIMIT`. __WNOTHREAD keeps the supervisor's own child (init) out of reach.
pub(in crate::sandbox) fn wait_stop(pid: Pid) -> Result<WaitStatus, Errno> {
    wait(pid, 0)
}
