//! Skips that CI can count. A runtime test that cannot run on this machine says so in one
//! line on the runner's own stderr (not captured, so it shows in every run):
//!
//! ```text
//! SKIPPED oci::runc_generated_config_runs: needs `runc` on PATH (.ci/setup installs it)
//! ```
//!
//! and returns. With `REPRORUN_STRICT_SKIPS=1` (set by `.ci/run`, whose machine is root and has
//! everything `.ci/setup` installs) the test fails instead, naming what was missing. A need
//! marked `optional` is one a CI machine may lack for a reason no set-up can fix (the host's
//! cgroup layout, its disks, a browser `.ci/setup` does not install): its skip is printed
//! but never fails the run. Use `require!(Need::Root, Need::Tool("npm"))` before the test's
//! work, `skip!("why")` where the reason is only known later (a daemon that did not start),
//! and `if part_runs("busybox cases", &[..]) { .. }` for a part of a test whose other parts
//! still run.

use std::io::Write;
use std::path::Path;

/// The environment variable that turns a skip into a failure.
pub const STRICT: &str = "REPRORUN_STRICT_SKIPS";

/// Something a runtime test needs from the machine it runs on.
#[derive(Debug, Clone, Copy)]
pub enum Need<'a> {
    /// Root: namespaces for another uid, cgroups, mounts on the host, the rootless user.
    Root,
    /// An executable of this name on PATH.
    Tool(&'a str),
    /// A path on the host (a cgroup controller's file, a device, a namespace kind), and what
    /// it stands for.
    Path(&'a str, &'a str),
    /// At least this many CPUs.
    Cpus(usize),
}

impl Need<'_> {
    /// Why the test cannot run, when this need is not met here.
    pub fn unmet(&self) -> Option<String> {
        match *self {
            Need::Root if super::is_root() => None,
            Need::Root => Some(format!(
                "needs root (running as uid {})",
                nix::unistd::geteuid()
            )),
            Need::Tool(name) if on_path(name) => None,
            Need::Tool(name) => Some(format!("needs `{name}` on PATH (.ci/setup installs it)")),
            Need::Path(path, _) if Path::new(path).exists() => None,
            Need::Path(path, what) => Some(format!("needs {what} ({path} does not exist)")),
            Need::Cpus(n) => {
                let here = std::thread::available_parallelism().map_or(1, |c| c.get());
                (here < n).then(|| format!("needs {n} CPUs (this machine has {here})"))
            }
        }
    }
}

/// Whether an executable file `name` is in a directory of PATH.
pub fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// The reasons of the needs not met here, joined; `None` when all are met.
pub fn unmet(needs: &[Need]) -> Option<String> {
    let why: Vec<String> = needs.iter().filter_map(Need::unmet).collect();
    (!why.is_empty()).then(|| why.join("; "))
}

/// Whether skips fail the run (`REPRORUN_STRICT_SKIPS=1`).
pub fn strict() -> bool {
    std::env::var(STRICT).is_ok_and(|v| v == "1")
}

/// The running test's name (libtest names each test's thread after it).
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed test thread>")
        .to_string()
}

/// Reports that the running test (or the part of it named in `reason`) does not run: one
/// `SKIPPED <test>: <reason>` line on the real stderr; under strict skips, unless
/// `optional`, a panic naming what was missing.
#[track_caller]
pub fn skipped(reason: &str, optional: bool) {
    let test = test_name();
    let tag = if optional { " (optional)" } else { "" };
    // Straight to the file descriptor (libtest captures `eprintln!` of passing tests), in one
    // write, so that the line is not split by the runner's own lines.
    let line = format!("SKIPPED {test}: {reason}{tag}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if strict() && !optional {
        panic!("{test} was skipped under {STRICT}=1, which allows no skip: {reason}");
    }
}

/// Whether the part of the running test named `part` can run here: when a need is not met,
/// reports `SKIPPED <test>: its <part>: <reason>` (as `skipped`) and returns false, so the
/// test goes on with its other parts.
#[track_caller]
pub fn part_runs(part: &str, needs: &[Need]) -> bool {
    match unmet(needs) {
        None => true,
        Some(why) => {
            skipped(&format!("its {part}: {why}"), false);
            false
        }
    }
}

/// Skips the calling test (returns `Default::default()` from the calling function: `()` from
/// a test, `None` from a helper that hands out a fixture): `skip!("containerd did not start:
/// {log}")`, or `skip!(optional: ...)` for a need a CI machine may lack.
macro_rules! skip {
    (optional: $($reason:tt)+) => {{
        $crate::common::skip::skipped(&format!($($reason)+), true);
        return Default::default();
    }};
    ($($reason:tt)+) => {{
        $crate::common::skip::skipped(&format!($($reason)+), false);
        return Default::default();
    }};
}

/// Skips the calling test unless every need is met here: `require!(Need::Root,
/// Need::Tool("npm"))`, or `require!(optional: Need::Path(..))`.
macro_rules! require {
    (optional: $($need:expr),+ $(,)?) => {
        if let Some(why) = $crate::common::skip::unmet(&[$($need),+]) {
            skip!(optional: "{why}");
        }
    };
    ($($need:expr),+ $(,)?) => {
        if let Some(why) = $crate::common::skip::unmet(&[$($need),+]) {
            skip!("{why}");
        }
    };
}
