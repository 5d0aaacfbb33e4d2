//! The supervisor's seccomp-notification server: a thread that answers the system calls the
//! workload's filter ([`filter`]) sends it, so that what a program learns from the kernel is
//! the same on every host, for static and Go programs as much as for dynamic ones:
//! - realtime clock calls (answered from the sandbox's clock page) and execs (handed to
//!   `vdso`: the in-process clock and seeded AT_RANDOM for static and Go programs);
//! - `getrandom(2)`: one seeded stream per process (per process, not per thread: runtimes
//!   such as Go move a goroutine between threads), keyed by its lineage, not its pid (see
//!   `lineage`);
//! - `uname(2)`, `sysinfo(2)`, `sched_getaffinity(2)`: the pinned identity;
//! - `getdents64(2)`/`getdents(2)`: listings in name order (see `dirs`).
//!
//! The clock page is the file init wrote at /run/reprorun/clock; the server maps it before it
//! answers anything (so before any program of the workload's gets an answer), opened
//! inside the sandbox's root without following any link, and checked to be a regular file of
//! a full page, so the preload library and this server share one offset and one tick counter.

mod caller;
mod calls;
mod filter;
mod lineage;
mod page;
mod server;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::unistd::Pid;

use super::dirs::{self, Listings};
use crate::determinism::clock::{ClockMode, ClockPlan, PAGE_PATH, PAGE_SIZE};
use crate::determinism::entropy::{self, Stream};
use crate::determinism::Identity;
use crate::sandbox::intercept::vdso::{ClockPatch, ExecPatch};
use crate::sys::seccomp;

/// What the server answers with: the sandbox's clock, entropy seed and identity.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The fake wall clock; `None`: real time (clock calls are not routed here).
    pub(crate) clock: Option<ClockPlan>,
    /// The entropy seed; `None`: real entropy (getrandom is not routed here).
    pub(crate) seed: Option<u64>,
    pub(crate) identity: Identity,
    /// What the sandbox's uptime reads when the workload starts.
    pub(crate) uptime_start_secs: i64,
    /// Directory listings in name order (`getdents` routed here).
    pub(crate) sorted_dirs: bool,
    /// The sandbox's CPU quota in thousandths of a CPU (`--cpus-quota`), which the server's
    /// own CPU time is held to (see `throttle`); `None`: its CPU count (`--cpus`).
    pub(crate) cpu_milli: Option<u64>,
    /// `--net allow`: `connect` and `sendto` with an address are routed here, and an
    /// attempt at an address outside the sandbox is refused and noted in `journal`.
    pub(crate) egress: bool,
    pub(crate) journal: Option<std::sync::Arc<crate::net::log::Journal>>,
    /// Trace static and Go programs at their exec (their clock and AT_RANDOM); off where the
    /// host refuses ptrace (a pins-only run in a container).
    pub(crate) trace_execs: bool,
}

impl Config {
    pub(crate) fn from_plan(plan: &crate::plan::Plan) -> Config {
        Config {
            clock: plan.clock,
            seed: (plan.random == entropy::RandomMode::Seeded).then_some(plan.seed),
            identity: plan.identity.clone(),
            uptime_start_secs: plan.uptime_start_secs,
            sorted_dirs: plan.sorted_dirs,
            cpu_milli: plan.resources.cpu_milli,
            egress: plan.egress.is_some(),
            journal: None,
            trace_execs: true,
        }
    }

    /// The CPU the server may use, in thousandths of a CPU: the sandbox's quota, else its
    /// CPU count.
    fn cpu_rate_milli(&self) -> u64 {
        self.cpu_milli
            .unwrap_or(u64::from(self.identity.cpus).saturating_mul(1000))
    }

    /// Whether an exec may be changed by the server (a static or Go program's clock or
    /// AT_RANDOM): with neither a fake clock nor seeded entropy, or without ptrace, every
    /// exec is let go on as it is.
    pub(crate) fn patches_execs(&self) -> bool {
        self.trace_execs && (self.clock.is_some() || self.seed.is_some())
    }

    /// The workload's filter for this configuration.
    pub(crate) fn filter(&self) -> Vec<libc::sock_filter> {
        filter(
            self.clock.map(|c| c.mode),
            self.seed.is_some(),
            self.sorted_dirs,
            self.egress,
        )
    }
}

use caller::*;
pub(crate) use filter::{filter, passing_exec};
use lineage::Lineage;
use page::*;
use server::*;

/// The server thread and the channel that hands it the workload's listener.
pub(crate) struct NotifyServer {
    pub(crate) listener: Sender<OwnedFd>,
    thread: JoinHandle<()>,
}

impl NotifyServer {
    /// Whether the server is done (no process uses its filter any more).
    pub(crate) fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Ends a server that never got a listener (the sandbox failed before its workload ran):
    /// the thread sees the channel close and returns.
    pub(crate) fn stop_unused(self) {
        drop(self.listener);
        // A thread that got a listener (the workload's exec failed) may sit in RECV, which a
        // kernel before 6.11 does not wake when the last filtered process is gone: wait a
        // little, then leave it (no fork follows on that path; the process ends soon).
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while !self.thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if self.thread.is_finished() {
            let _ = self.thread.join();
        }
    }
}

/// Where the clock page is: `path` resolved inside `root`, without following links.
pub(crate) struct PageAt {
    pub(crate) root: PathBuf,
    pub(crate) path: PathBuf,
}

impl PageAt {
    /// The page of the sandbox whose init is `init`.
    pub(crate) fn sandbox(init: Pid) -> PageAt {
        PageAt {
            root: PathBuf::from(format!("/proc/{init}/root")),
            path: PathBuf::from(PAGE_PATH),
        }
    }
}

/// Starts the server thread now (so its start-up overlaps the sandbox's); it serves the
/// listener sent through the channel until no process uses the filter any more.
pub(crate) fn start(config: Config, at: PageAt) -> Result<NotifyServer, Errno> {
    let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
    let thread = std::thread::Builder::new()
        .name("reprorun-notify".into())
        .spawn(move || {
            let Ok(listener) = rx.recv() else { return };
            // The workload sent its listener just before its first exec, which may wait for
            // us (see `program`): map the page before answering anything.
            let page = match config.clock.map(|c| c.mode) {
                None | Some(ClockMode::Frozen) => None,
                Some(mode) => Page::open(&at, matches!(mode, ClockMode::Tick { .. })).ok(),
            };
            // The server's CPU time is the sandbox's: held to its quota.
            let mut throttle =
                crate::sandbox::intercept::throttle::Throttle::new(config.cpu_rate_milli());
            let mut server = Server::new(config, page);
            // Ask the kernel to hand the CPU straight to us and back (a synchronous round
            // trip); an older kernel without the flag still works, with slower wake-ups.
            // Blocking in RECV (not in poll) is what the synchronous wake-up hands the CPU to.
            let _ = seccomp::set_sync_wakeup(&listener);
            while server.answer(&listener).is_ok() {
                throttle.pace();
            }
        })
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EAGAIN)))?;
    Ok(NotifyServer {
        listener: tx,
        thread,
    })
}
