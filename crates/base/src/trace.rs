//! Start-up profiling: with `REPRORUN_TRACE_STEPS=1` in the caller's environment, every setup
//! step of a run prints one line to stderr when it ends:
//!
//! ```text
//! reprorun-trace <who> <µs since the supervisor started> <step>
//! ```
//!
//! `who` is `supervisor`, `init`, `workload` (the forked process before its `execve`) or
//! `server` (the supervisor's notification thread: each exec it is told of). The
//! clock is `CLOCK_REALTIME`, the one clock a time namespace does not shift, so lines of all
//! three processes share one origin. A debug facility, not an interface: the variable is
//! read once, and with it unset a step costs one load and one branch.
//! `runtime-tests/bench/startup-steps.sh` turns the lines into a per-step table.

use std::sync::OnceLock;

/// The environment variable that turns tracing on (any value but empty or `0`).
pub(crate) const ENV: &str = "REPRORUN_TRACE_STEPS";

/// The origin of the timestamps (ns of `CLOCK_REALTIME`), `None` when tracing is off.
static START: OnceLock<Option<i64>> = OnceLock::new();

/// Reads [`ENV`] once and, when tracing is on, takes now as the origin. Later calls do
/// nothing (the clone and the fork copy the origin into init and the workload).
pub fn init() {
    START.get_or_init(|| {
        std::env::var_os(ENV)
            .filter(|v| !v.is_empty() && v != "0")
            .map(|_| now_ns())
    });
}

/// Marks the end of step `what` of process `who`.
#[inline]
pub fn step(who: &str, what: &str) {
    if let Some(Some(t0)) = START.get() {
        emit(*t0, who, what);
    }
}

/// [`step`] whose name is made only when tracing is on.
#[inline]
pub fn step_with(who: &str, what: impl FnOnce() -> String) {
    if let Some(Some(t0)) = START.get() {
        emit(*t0, who, &what());
    }
}

fn now_ns() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .map_or(0, |t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
}

/// One line in one `write` (the three processes share the caller's stderr), straight to
/// descriptor 2: no lock of std's stderr, which a forked child must not wait on.
#[cold]
fn emit(t0: i64, who: &str, what: &str) {
    let us = (now_ns() - t0) / 1000;
    let line = format!("reprorun-trace {who} {us} {what}\n");
    // SAFETY: fd 2 is only written; `line` is valid for its length during the call.
    let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}
