//! Resolution of a request (CLI flags today; OCI bundles and pipelines later) into a [`Plan`]:
//! a printable, testable value that says everything the executor will do. Resolution reads
//! the host (it lists the root filesystem and checks that sources exist) but changes nothing.
//!
//! Every front end starts from one base plan (`base`: each default set once); `request`
//! holds what a caller asks, `resolve` turns it into a plan in steps, `system` adds the
//! mounts every sandbox gets.

mod base;
pub mod idmaps;
pub mod image;
pub mod mounts;
mod request;
mod resolve;
pub mod sched;
mod sockets;
pub(crate) mod system;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub(crate) use base::{pinned_identity, DEFAULT_DOMAINNAME, DEFAULT_HOSTNAME};
pub use mounts::MountOp;
pub use request::{ExecRequest, ExtraMount, HostFacts, NetChoice, WorkdirMode};
pub use resolve::proxy_env;
pub use resolve::refuse_link;
pub use resolve::resolve;
pub use system::device_nodes;

use crate::determinism::{ClockPlan, EnvError, Identity, RandomMode};
use crate::security::{Resources, Security};

/// Plan format version; bumped when a field changes meaning.
pub const PLAN_VERSION: u32 = 1;
/// CLOCK_MONOTONIC and CLOCK_BOOTTIME read this many seconds when the workload starts.
pub const UPTIME_START_SECS: i64 = 10;
/// The working directory inside the sandbox.
pub const WORKDIR: &str = "/work";
/// Top-level entries the sandbox always provides itself instead of taking from the rootfs.
const PROVIDED: &[&str] = &["dev", "home", "proc", "run", "sys", "tmp", "work"];
/// Paths hidden from the workload (as Docker and runc hide them): kernel memory, keys,
/// timers and hardware details; and what would tell the host's disks, memory size and CPU
/// count beside the pinned identity (block devices, per-node and per-zone memory,
/// per-CPU scheduler counters; /proc/partitions and /proc/diskstats are generated empty,
/// `identity`).
pub const MASKED: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    "/sys/kernel/vmcoreinfo",
    "/proc/pressure",
    "/proc/zoneinfo",
    "/proc/buddyinfo",
    "/proc/schedstat",
    "/sys/block",
    "/sys/class/block",
    "/sys/dev/block",
    "/sys/devices/system/node",
];
/// Paths made read-only (writes there would reach the kernel).
pub const READONLY: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];
/// The FIFO that stands for /dev/urandom (and, hard-linked, /dev/random) with seeded entropy.
pub const ENTROPY_FIFO: &str = "/dev/urandom";

#[derive(Debug, Error)]
pub enum PlanError {
    #[error("--rootfs {0}: not a directory; pass the path of an unpacked root filesystem")]
    Rootfs(PathBuf),
    #[error("read root filesystem {path}: {source}")]
    ListRootfs {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--workdir {0}: not a directory; pass an existing directory to mount at /work")]
    Workdir(PathBuf),
    #[error("--bind source {0}: no such file or directory")]
    BindSource(PathBuf),
    #[error("--import-tool {0}: no program of that name on your PATH")]
    ImportTool(String),
    #[error("--keep-changes {0}: {1}; pass a new or empty directory")]
    KeepChanges(PathBuf, String),
    #[error("--keep-changes needs --workdir-mode overlay (it keeps that overlay's upper layer)")]
    KeepChangesMode,
    #[error("{what} {path}: crosses the symbolic link {link} (a link, perhaps planted by an earlier run, must not choose a host path reprorun mounts, reads or writes); pass the resolved path, or --follow-symlinks")]
    SymlinkSource {
        what: &'static str,
        path: PathBuf,
        link: PathBuf,
    },
    #[error("--user {0}:{1}: a root caller's sandbox has the ids 0 to 65535 (mapped to unprivileged host ids, spec/security.md); choose ids in that range")]
    UserRange(u32, u32),
    #[error("--cap-add SETFCAP: a file capability the workload sets on a file under /work or a writable --bind would hold on the host; it cannot be kept (spec/security.md)")]
    SetFcap,
    #[error("no command given: pass the command after `--`, e.g. `reprorun exec -- python3 -V`")]
    EmptyCommand,
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("current directory: {0}; pass --workdir")]
    Cwd(std::io::Error),
    #[error("--cpus {asked}: must be between 1 and {available} (the CPUs this process may use)")]
    Cpus { asked: u32, available: u32 },
    #[error("--image and --rootfs cannot be combined: pass one root")]
    ImageAndRootfs,
    #[error("--image needs namespaces (the image is mounted as the root): drop --isolation=none")]
    ImageIsolation,
    #[error("--net allow needs a network namespace of its own: drop --isolation=none")]
    EgressIsolation,
    #[error("--mirror {0}: its npm part is served on the sandbox's own loopback (127.0.0.1:4873), which needs a network namespace of its own: drop --net host and --isolation=none")]
    RegistryNet(PathBuf),
    #[error("--allow-host, --allow-file, --add-host and --net-log need --net allow (implied when --net is not given), not --net {0}")]
    EgressNet(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// Namespaces are required; refuse to run without them.
    Full,
    /// Use namespaces when the host allows them, else run with pins only and warn.
    Auto,
    /// No namespaces: environment and determinism pins only.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum NetMode {
    /// A new network namespace with only loopback up.
    None,
    /// The host's network namespace.
    Host,
    /// A new network namespace whose only way out is the egress proxy: named hosts and
    /// nothing else (`--allow-host`, `spec/network.md`).
    Allow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Namespace {
    User,
    Pid,
    Mount,
    Net,
    Uts,
    Ipc,
    Cgroup,
    Time,
}

impl Namespace {
    /// The `clone(2)`/`unshare(2)` flag for this namespace.
    pub fn flag(self) -> libc::c_int {
        match self {
            Namespace::User => libc::CLONE_NEWUSER,
            Namespace::Pid => libc::CLONE_NEWPID,
            Namespace::Mount => libc::CLONE_NEWNS,
            Namespace::Net => libc::CLONE_NEWNET,
            Namespace::Uts => libc::CLONE_NEWUTS,
            Namespace::Ipc => libc::CLONE_NEWIPC,
            Namespace::Cgroup => libc::CLONE_NEWCGROUP,
            Namespace::Time => libc::CLONE_NEWTIME,
        }
    }
}

/// One line of `/proc/PID/uid_map` or `gid_map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdMap {
    pub inside: u32,
    pub outside: u32,
    pub count: u32,
}

impl IdMap {
    /// `count` ids from `inside` in the namespace onto `outside` in its parent, as a
    /// `uid_map` line reads: `inside outside count`.
    pub const fn new(inside: u32, outside: u32, count: u32) -> IdMap {
        IdMap {
            inside,
            outside,
            count,
        }
    }
}

/// The sandbox, fully resolved. `reprorun exec --dry-run` prints this as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub version: u32,
    pub isolation: Isolation,
    pub namespaces: Vec<Namespace>,
    pub uid_map: IdMap,
    pub gid_map: IdMap,
    pub rootfs: PathBuf,
    pub mounts: Vec<MountOp>,
    pub hostname: String,
    pub domainname: String,
    /// Working directory inside the sandbox.
    pub cwd: PathBuf,
    /// The host directory bound at `cwd`; the working directory of a pins-only run.
    pub host_workdir: PathBuf,
    pub env: Vec<String>,
    #[serde(with = "mounts::octal")]
    pub umask: u32,
    pub argv: Vec<String>,
    pub timeout_ms: Option<u64>,
    /// Seconds CLOCK_MONOTONIC and CLOCK_BOOTTIME read at start (time namespace offsets).
    pub uptime_start_secs: i64,
    /// The fake wall clock; `None` with `--date now`.
    pub clock: Option<ClockPlan>,
    pub seed: u64,
    pub random: RandomMode,
    /// CPUs, memory and uname as the workload sees them.
    pub identity: Identity,
    pub security: Security,
    pub resources: Resources,
    /// OCI `process.user`: the workload switches to these ids itself (no user namespace
    /// needed; with one, they are ids inside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_user: Option<ProcessUser>,
    /// Existing namespaces to join instead of creating new ones (OCI `linux.namespaces` paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join: Vec<NsJoin>,
    /// OCI `process.oomScoreAdj`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i32>,
    /// OCI `process.scheduler`, `ioPriority` (and `execCPUAffinity` for `exec --process`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<sched::Scheduling>,
    /// OCI `linux.personality`: the execution domain (`personality(2)`'s `PER_LINUX` 0 or
    /// `PER_LINUX32` 8) the container's processes run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub personality: Option<u32>,
    /// OCI `process.terminal`: the workload runs on a new pseudo-terminal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    /// OCI `linux.uidMappings`/`gidMappings`: written by the creating process (which may map
    /// ranges), instead of init's one line `uid_map`/`gid_map`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_maps: Option<ParentMaps>,
    /// Whether the workload's clock, entropy, identity, directory and exec calls are routed
    /// to the supervisor (off only for an OCI container with the determinism layer off).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub intercept: bool,
    /// Directory listings in name order (off only where a caller asks, e.g. `reprorun
    /// reproduce` leaving that pin out).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub sorted_dirs: bool,
    /// `--share-tty`: standard descriptors that are the caller's terminal reach the workload
    /// as they are; otherwise they are replaced by a pseudo-terminal of the sandbox's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share_tty: bool,
    /// `--net allow`: the egress policy the proxy enforces (`spec/network.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::net::Egress>,
    /// `--net-log`: the file the proxy appends one JSON line to per connection attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_log: Option<PathBuf>,
    /// `--mirror` with an npm part: the mirror directory whose npm tree the supervisor
    /// serves on 127.0.0.1:4873 inside the sandbox (`spec/mirror.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The ids the workload runs as (OCI `process.user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessUser {
    pub uid: u32,
    pub gid: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_gids: Vec<u32>,
}

/// A namespace joined by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsJoin {
    pub ns: Namespace,
    pub path: PathBuf,
}

/// Id maps of several ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentMaps {
    pub uid: Vec<IdMap>,
    pub gid: Vec<IdMap>,
}

impl Plan {
    pub fn has(&self, ns: Namespace) -> bool {
        self.namespaces.contains(&ns)
    }

    /// `clone(2)` flags for every namespace except time and those joined, which init enters by `unshare` so
    /// that its offsets can be written before the workload is forked into it.
    pub fn clone_flags(&self) -> libc::c_int {
        self.namespaces
            .iter()
            .filter(|ns| **ns != Namespace::Time && !self.join.iter().any(|j| j.ns == **ns))
            .fold(0, |acc, ns| acc | ns.flag())
    }
}

#[cfg(test)]
mod tests;
