//! The executor: turns a [`Plan`] into running processes. Nothing outside this module
//! creates namespaces or performs mounts.
//!
//! Process model (full isolation): the supervisor (caller's namespaces) clones init into new
//! user/pid/mount/net/uts/ipc/cgroup namespaces; init writes its id maps, builds the root,
//! enters a new time namespace and forks the workload, then reaps and forwards signals.

pub(crate) mod container;
pub(crate) mod intercept;
mod workload;

use isolation::{cgroup, devices};
mod init;
pub mod isolation;
mod pins_only;
#[cfg(test)]
mod preload_abi;
mod probe;
mod protocol;
mod signals;
mod spawn;
mod supervisor;
mod tty;

use nix::errno::Errno;
use thiserror::Error;

/// libreprotime.so, built from src/reprotime by build.rs; written into each sandbox that fakes
/// the clock.
pub(crate) static PRELOAD_LIB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libreprotime.so"));

use crate::exit::{ExitStatus, Status};
use crate::plan::{Isolation, MountOp, Plan};
use crate::sys::Usage;

#[derive(Debug, Error)]
pub enum SandboxError {
    /// The host refuses namespaces or mounts (e.g. a container's default seccomp profile).
    #[error("{reason}; isolation is unavailable here — pass --isolation=auto (or set REPRORUN_ISOLATION=auto) to fall back to environment pins only, or --isolation=none")]
    Unavailable { reason: String },
    /// A setup step init reported failing (its words come over init's socket).
    #[error("{step}")]
    Init { step: String },
    #[error(transparent)]
    Seccomp(#[from] crate::security::SeccompError),
    #[error(transparent)]
    Inject(#[from] crate::net::intercept::InjectError),
    #[error(transparent)]
    Cassette(#[from] crate::net::cassette::CassetteError),
    #[error(transparent)]
    Cgroup(#[from] cgroup::CgroupError),
    #[error(transparent)]
    Devices(#[from] devices::DevicesError),
    #[error("join namespace {path}: {errno}")]
    Join {
        path: std::path::PathBuf,
        errno: Errno,
    },
    #[error("open {path}: {source}{hint}")]
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
        /// What the failure likely means (may be empty).
        hint: &'static str,
    },
    #[error("write {file}: {source}; mapping ranges needs root (or newuidmap), a rootless caller may map only its own id")]
    IdMap {
        file: &'static str,
        source: std::io::Error,
    },
    #[error("container init exited during setup ({0})")]
    InitExited(String),
    #[error("container init exited before it was committed")]
    NotCommitted,
    #[error("connect to the container's monitor: {0}")]
    Monitor(Errno),
    #[error("{program}: {}", exec_reason(*.errno))]
    Exec { program: String, errno: Errno },
    #[error("{step}: {errno}")]
    Supervise { step: &'static str, errno: Errno },
    /// A step of the workload's own preparation before its exec (pins-only runs).
    #[error("{step}: {errno}")]
    Prepare { step: &'static str, errno: Errno },
}

fn exec_reason(errno: Errno) -> String {
    match errno {
        Errno::ENOENT | Errno::ENOTDIR => "command not found".into(),
        Errno::EACCES => "permission denied (not executable)".into(),
        e => format!("cannot execute: {e}"),
    }
}

impl ExitStatus for SandboxError {
    /// 126 or 127 for a command that could not be executed (as a shell), else 125.
    fn status(&self) -> Status {
        match self {
            SandboxError::Exec { errno, .. } => Status::exec_failed(*errno as i32),
            _ => Status::RuntimeError,
        }
    }
}

impl SandboxError {
    /// [`ExitStatus::status`] as a number, for callers that store it.
    pub fn exit_code(&self) -> i32 {
        self.status().code()
    }
}

/// Writes the runtime page (for a clock that starts now) and the preload library into `dir`.
fn write_runtime_files(
    dir: &std::path::Path,
    clock: Option<crate::determinism::ClockPlan>,
    seed: Option<u64>,
) -> std::io::Result<()> {
    use crate::determinism::clock::{runtime_page, PAGE_FILE, PRELOAD_FILE};
    use std::os::unix::fs::PermissionsExt;
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)?;
    let page = dir.join(PAGE_FILE);
    std::fs::write(
        &page,
        runtime_page(clock, seed, now.tv_sec() * 1_000_000_000 + now.tv_nsec()),
    )?;
    std::fs::set_permissions(&page, std::fs::Permissions::from_mode(0o644))?;
    let lib = dir.join(PRELOAD_FILE);
    std::fs::write(&lib, PRELOAD_LIB)?;
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755))
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What reprorun exits with: the workload's status, 128+N, or 124 on timeout.
    pub exit_code: i32,
    pub timed_out: bool,
    pub usage: Usage,
    /// The isolation actually used (`full` or `none`).
    pub isolation: Isolation,
    /// The kernel's OOM killer killed a process of the sandbox (`--memory`).
    pub oom_killed: bool,
    /// With `--net allow`: the egress proxy's record of the connection attempts (at most
    /// `log::KEPT` of each source) and the count of the others.
    pub network: crate::net::log::Network,
}

/// The workload's standard input, output and error, when they are not the caller's own
/// (a pipeline's unit writes to its own log files): put on descriptors 0, 1 and 2 of the
/// sandbox's first process, never of the caller.
#[derive(Debug, Clone, Copy)]
pub struct Stdio<'a> {
    pub stdin: std::os::fd::BorrowedFd<'a>,
    pub stdout: std::os::fd::BorrowedFd<'a>,
    pub stderr: std::os::fd::BorrowedFd<'a>,
}

impl Stdio<'_> {
    /// Makes them descriptors 0, 1 and 2 of the calling process (a child about to become
    /// the sandbox's first process).
    fn install(self) -> Result<(), Errno> {
        use std::os::fd::AsRawFd;
        for (fd, to) in [(self.stdin, 0), (self.stdout, 1), (self.stderr, 2)] {
            nix::unistd::dup2(fd.as_raw_fd(), to)?;
        }
        Ok(())
    }
}

/// Runs the plan with the caller's own stdio. With `Isolation::Auto`, a host that refuses
/// namespaces gets a pins-only run, announced through `warn` before the workload starts.
pub fn run(plan: &Plan, warn: &mut dyn FnMut(&str)) -> Result<Outcome, SandboxError> {
    run_with(plan, None, warn)
}

/// [`run`] with the workload's stdio on `stdio` (the caller's own with `None`).
pub fn run_with(
    plan: &Plan,
    stdio: Option<Stdio>,
    warn: &mut dyn FnMut(&str),
) -> Result<Outcome, SandboxError> {
    // The notification server keeps descriptors per live caller: use the whole soft limit
    // the caller allows (the workload gets its own limits, `spec/security.md`).
    crate::trace::init();
    raise_nofile();
    let (intercept, with_bundle) = intercept(plan)?;
    let cassette = cassette(plan)?;
    let plan = with_bundle.as_ref().unwrap_or(plan);
    let mut seccomp = crate::security::seccomp::compile(&plan.security.seccomp)?;
    if plan.security.refuse_setid {
        seccomp.extend(crate::security::setid::programs()?);
    }
    crate::trace::step("supervisor", "compile the seccomp profile");
    // The sandbox's device rules (`devices`): a root caller's sandbox, whose init waits for
    // the supervisor's word (it has id maps to write) and so joins the cgroup first.
    // Where the host mounts neither the v1 `devices` controller nor a v2 hierarchy, the run
    // goes without them (the user namespace and `nodev` mounts stand).
    let hierarchy = match plan.parent_maps.is_some() && plan.isolation != Isolation::None {
        true => devices::hierarchy()?,
        false => None,
    };
    let device_rules = hierarchy
        .as_ref()
        .map(|_| devices::rules(&workload_fds(stdio, plan.security.preserve_fds)));
    let cgroup = if plan.resources.any() {
        // Unique even against a cgroup left by a crashed run that had our pid.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("reprorun-{}-{nanos}", std::process::id());
        let mut resources = plan.resources.clone();
        resources.devices = device_rules.clone().unwrap_or_default();
        let cg = cgroup::Cgroup::create(&resources, &name)?;
        crate::trace::step("supervisor", "create the cgroup");
        Some(cg)
    } else {
        None
    };
    let shared = match (&cgroup, &device_rules, &hierarchy) {
        (None, Some(rules), Some(h)) => {
            let shared = match devices::Shared::for_rules(h, rules) {
                Err(e) if e.is_refusal() => None,
                other => other?,
            };
            crate::trace::step("supervisor", "find the device cgroup");
            shared
        }
        _ => None,
    };
    let res = Resources {
        seccomp: &seccomp,
        cgroup: cgroup.as_ref(),
        devices: shared.as_ref(),
        stdio,
        intercept,
        cassette,
    };
    let outcome = match plan.isolation {
        Isolation::None => pins_only::run(plan, &res, warn),
        Isolation::Full => supervisor::run(plan, &res),
        Isolation::Auto => match supervisor::run(plan, &res) {
            Err(SandboxError::Unavailable { reason }) => {
                warn(&format!(
                    "warning: full isolation unavailable ({reason}); running with environment pins only (--isolation=auto)"
                ));
                pins_only::run(plan, &res, warn)
            }
            other => other,
        },
    };
    outcome.map(|mut o| {
        o.oom_killed = cgroup.as_ref().is_some_and(|c| c.oom_killed());
        o
    })
}

/// `--inject-env`: the run's CA and the secrets (read from the caller's environment now),
/// and the plan with the CA bundle's text written in (none without injected secrets).
fn intercept(
    plan: &Plan,
) -> Result<
    (
        Option<std::sync::Arc<crate::net::intercept::Intercept>>,
        Option<Plan>,
    ),
    SandboxError,
> {
    use crate::net::intercept::{Intercept, CA_BUNDLE};
    let Some(egress) = plan.egress.as_ref().filter(|e| e.terminates_tls()) else {
        return Ok((None, None));
    };
    let icpt = Intercept::new(&egress.inject, egress.upstream_ca.as_deref(), &|name| {
        std::env::var(name).ok()
    })?
    .terminating_all(egress.record.is_some() || egress.replay.is_some());
    let mut plan = plan.clone();
    let bundle = icpt.bundle();
    for m in &mut plan.mounts {
        if let MountOp::File { dest, contents } = m {
            if dest.as_path() == std::path::Path::new(CA_BUNDLE) {
                contents.clone_from(&bundle);
            }
        }
    }
    crate::trace::step("supervisor", "make the run's CA (--inject-env)");
    Ok((Some(std::sync::Arc::new(icpt)), Some(plan)))
}

/// `--net-record`: the cassette's directory made (no link followed); `--net-replay`: the
/// cassette loaded and checked whole, before anything starts.
fn cassette(plan: &Plan) -> Result<Option<crate::net::cassette::Mode>, SandboxError> {
    use crate::net::cassette::{Cassette, Mode, Writer};
    use std::sync::Arc;
    let Some(egress) = plan.egress.as_ref() else {
        return Ok(None);
    };
    Ok(match (&egress.record, &egress.replay) {
        (Some(dir), _) => Some(Mode::Record(Arc::new(Writer::create(dir)?))),
        (None, Some(dir)) => Some(Mode::Replay(Arc::new(Cassette::load(dir)?))),
        (None, None) => None,
    })
}

/// Starts an OCI container's egress proxy on init's listener in the monitor (its records go
/// to the `org.reprorun.net.log` file as they happen; a monitor has nobody to report to),
/// recording or replaying `cassette`, terminating TLS with `intercept` (the run's CA, which
/// the container trusts through its CA bundle: `spec/oci.md`).
pub(super) fn serve_egress(
    plan: &Plan,
    listener: std::os::fd::OwnedFd,
    intercept: Option<std::sync::Arc<crate::net::intercept::Intercept>>,
    cassette: Option<crate::net::cassette::Mode>,
) -> Option<crate::net::proxy::Proxy> {
    let egress = plan.egress.clone()?;
    let log = supervisor::open_net_log(plan);
    let config = crate::net::proxy::Config::with_intercept(intercept).with_cassette(cassette);
    crate::net::proxy::start(listener, egress, config, log).ok()
}

/// The descriptors the workload gets: its standard ones (the caller's, or `stdio`) and the
/// `preserved` ones after them.
fn workload_fds(stdio: Option<Stdio>, preserved: u32) -> Vec<std::os::fd::RawFd> {
    use std::os::fd::AsRawFd;
    let mut fds = match stdio {
        Some(s) => vec![
            s.stdin.as_raw_fd(),
            s.stdout.as_raw_fd(),
            s.stderr.as_raw_fd(),
        ],
        None => vec![0, 1, 2],
    };
    fds.extend((0..preserved).filter_map(|i| i32::try_from(3 + u64::from(i)).ok()));
    fds
}

/// Kills what is left in an OCI container's cgroup directories and removes them.
pub(crate) fn remove_cgroup(dirs: &[std::path::PathBuf]) {
    cgroup::remove_dirs(dirs)
}

/// Raises the soft open-files limit of this process to its hard limit.
fn raise_nofile() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// What the executor prepared before any process starts.
pub(crate) struct Resources<'a> {
    /// The compiled security seccomp programs.
    pub(crate) seccomp: &'a [seccompiler::BpfProgram],
    /// The sandbox's cgroup, with `--memory`, `--pids` or `--cpus-quota`.
    pub(crate) cgroup: Option<&'a cgroup::Cgroup>,
    /// The shared device cgroup a sandbox without a cgroup of its own joins.
    pub(crate) devices: Option<&'a devices::Shared>,
    /// The workload's stdio, when not the caller's.
    pub(crate) stdio: Option<Stdio<'a>>,
    /// `--inject-env`: what the egress proxy terminates TLS with (the secrets, the run's CA).
    pub(crate) intercept: Option<std::sync::Arc<crate::net::intercept::Intercept>>,
    /// `--net-record`, `--net-replay`: the run's cassette.
    pub(crate) cassette: Option<crate::net::cassette::Mode>,
}
