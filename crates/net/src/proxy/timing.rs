//! Debug timing of a request's steps (issue 50), off unless asked for: with
//! `REPRORUN_PROXY_TIMING=DIR` in the supervisor's environment, the proxy's helper and the
//! supervisor's broker note the `CLOCK_MONOTONIC` instant of each step of every connection
//! (one clock for both processes), in memory, and write them when the proxy stops, one file
//! per process: `DIR/rrnet-timing.PID`, a line `NANOSECONDS STEP` per step. The helper
//! writes as the sandbox's unprivileged ids: DIR must let them (`chmod 1777`). Files are
//! opened by the host-path rule: no symbolic link in any component of DIR, regular files only.
//! `runtime-tests/bench/proxy-steps.py` reads the files and prints the mean of each step.
//! At most [`MAX`] steps are kept per process (the rest are not noted).

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use reprorun_base::sys::hostpath;

use super::lock;

/// Steps kept per process.
const MAX: usize = 1 << 20;

/// The directory asked for, read once per process.
fn dir() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| std::env::var_os("REPRORUN_PROXY_TIMING").map(PathBuf::from))
        .as_ref()
}

static STEPS: Mutex<Vec<(u64, &'static str)>> = Mutex::new(Vec::new());

/// Notes that `step` happens now (nothing when timing is off).
pub(super) fn mark(step: &'static str) {
    if dir().is_none() {
        return;
    }
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    });
    let mut steps = lock(&STEPS);
    if steps.len() < MAX {
        steps.push((now, step));
    }
}

/// Writes the steps noted so far to this process's file (appending) and forgets them.
pub(super) fn flush() {
    let Some(dir) = dir() else { return };
    let steps = std::mem::take(&mut *lock(&STEPS));
    if steps.is_empty() {
        return;
    }
    let mut text = String::with_capacity(steps.len() * 32);
    for (ns, step) in steps {
        text.push_str(&format!("{ns} {step}\n"));
    }
    let path = dir.join(format!("rrnet-timing.{}", std::process::id()));
    // The host-path rule (`spec/security.md`): DIR may lie where a run can plant a link
    // or a FIFO (its work tree), and the broker writes as root: no link is followed in any
    // component, and only a regular file is appended to.
    let file = hostpath::open_write(&path, false, hostpath::Write::Append);
    if let Ok(mut f) = file {
        let _ = f.write_all(text.as_bytes());
    }
}
