//! Resolution of a request (CLI flags today; OCI bundles and pipelines later) into a [`Plan`]:
//! a printable, testable value that says everything the executor will do. Resolution reads
//! the host (it lists the root filesystem and checks that sources exist) but changes nothing.

mod base;
pub mod image;
pub mod mounts;
mod sockets;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub(crate) use base::{pinned_identity, DEFAULT_DOMAINNAME, DEFAULT_HOSTNAME};
pub use mounts::MountOp;

use crate::determinism::clock::{PRELOAD_PATH, RUN_DIR};
use crate::determinism::identity::DEFAULT_CPUS;
use crate::determinism::{
    ClockMode, ClockPlan, DateChoice, EnvError, EnvProfile, Identity, RandomMode, DEFAULT_EPOCH,
};
use crate::parse::BindSpec;
use crate::security::{default_rlimits, Resources, Rlimit, SeccompProfile, Security};

/// Plan format version; bumped when a field changes meaning.
pub const PLAN_VERSION: u32 = 1;
/// CLOCK_MONOTONIC and CLOCK_BOOTTIME read this many seconds when the workload starts.
pub const UPTIME_START_SECS: i64 = 10;
/// The working directory inside the sandbox.
pub const WORKDIR: &str = "/work";
/// Top-level entries the sandbox always provides itself instead of taking from the rootfs.
const PROVIDED: &[&str] = &["dev", "home", "proc", "run", "sys", "tmp", "work"];
/// Paths hidden from the workload (as Docker and runc hide them): kernel memory, keys,
/// timers and hardware details.
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
    #[error("{what} {path}: crosses the symbolic link {link} (a link, perhaps planted by an earlier run, must not redirect a mount); pass the resolved path, or --follow-symlinks")]
    SymlinkSource {
        what: &'static str,
        path: PathBuf,
        link: PathBuf,
    },
    #[error("no command given: pass the command after `--`, e.g. `reprorun exec -- python3 -V`")]
    EmptyCommand,
    #[error("{0}")]
    Env(#[from] EnvError),
    #[error("current directory: {0}; pass --workdir")]
    Cwd(std::io::Error),
    #[error("--cpus {asked}: must be between 1 and {available} (the CPUs this process may use)")]
    Cpus { asked: u32, available: u32 },
    #[error("--image and --rootfs cannot be combined: pass one root")]
    ImageAndRootfs,
    #[error("--image needs namespaces (the image is mounted as the root): drop --isolation=none")]
    ImageIsolation,
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

/// An extra mount the user asked for, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraMount {
    Bind(BindSpec),
    Tmpfs(PathBuf),
}

/// What the caller asked for, independent of how it was asked (CLI, OCI, pipeline).
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub rootfs: Option<PathBuf>,
    /// `--image`: run on this image's root (a fresh writable overlay) instead of `rootfs`.
    pub image: Option<image::ImageRoot>,
    pub workdir: Option<PathBuf>,
    pub extra_mounts: Vec<ExtraMount>,
    /// The working directory gets a fresh writable overlay (a tmpfs upper that ends with the
    /// run) instead of a read-write bind: the run cannot change the host directory.
    pub workdir_overlay: bool,
    pub net: NetMode,
    /// User additions, applied in order over the pins.
    pub env: Vec<(String, String)>,
    /// Start from the pinned environment (else from nothing but `HOME`, for a host-like run
    /// whose caller passes its own environment in `env`).
    pub pinned_env: bool,
    pub hostname: String,
    pub user: Option<(u32, u32)>,
    pub timeout: Option<Duration>,
    pub isolation: Isolation,
    /// `--date`; `None` means the caller's SOURCE_DATE_EPOCH, else [`DEFAULT_EPOCH`].
    pub date: Option<DateChoice>,
    pub clock: ClockMode,
    /// `--seed`: drives every seeded source (hash seeds, entropy streams).
    pub seed: u64,
    pub random: RandomMode,
    /// `--cpus`; `None` means [`DEFAULT_CPUS`].
    pub cpus: Option<u32>,
    pub seccomp: SeccompProfile,
    pub cap_add: Vec<String>,
    pub preserve_fds: u32,
    /// `--rlimit` entries, over the defaults.
    pub rlimits: Vec<Rlimit>,
    pub resources: Resources,
    /// `--tmpfs-size`: the size of /tmp.
    pub tmpfs_size: Option<u64>,
    /// `--share-tty`: the workload gets the caller's terminal descriptors as they are,
    /// instead of a pseudo-terminal of its own.
    pub share_tty: bool,
    /// `--follow-symlinks`: `--workdir` and bind sources may cross symbolic links.
    pub follow_symlinks: bool,
    /// Route the workload's clock, entropy, identity, directory and exec calls to the
    /// supervisor (off for a host-like run, which pins nothing).
    pub intercept: bool,
    /// List directories in name order (off for a run that leaves that pin out).
    pub sorted_dirs: bool,
    pub argv: Vec<String>,
}

impl ExecRequest {
    /// A request with every option at its default.
    pub fn new(argv: Vec<String>) -> Self {
        ExecRequest {
            rootfs: None,
            image: None,
            workdir: None,
            extra_mounts: Vec::new(),
            workdir_overlay: false,
            net: NetMode::None,
            env: Vec::new(),
            pinned_env: true,
            hostname: DEFAULT_HOSTNAME.into(),
            user: None,
            timeout: None,
            isolation: Isolation::Full,
            date: None,
            clock: ClockMode::StartAt,
            seed: 0,
            random: RandomMode::Seeded,
            cpus: None,
            seccomp: SeccompProfile::Default,
            cap_add: Vec::new(),
            preserve_fds: 0,
            rlimits: Vec::new(),
            resources: Resources::default(),
            tmpfs_size: None,
            share_tty: false,
            follow_symlinks: false,
            intercept: true,
            sorted_dirs: true,
            argv,
        }
    }

    /// Attaches the dependency mirror in `dir` (`--mirror`): its clients' environment after
    /// what `env` holds so far, its read-only bind before every other extra mount.
    pub fn attach_mirror(&mut self, dir: &Path) -> Result<(), crate::mirror::MirrorError> {
        let (clients, bind) = crate::mirror::attach(dir)?;
        self.env.extend(clients);
        self.extra_mounts.insert(0, ExtraMount::Bind(bind));
        Ok(())
    }
}

/// Facts about the caller that resolution depends on, gathered once.
#[derive(Debug, Clone)]
pub struct HostFacts {
    pub uid: u32,
    pub gid: u32,
    pub cwd: PathBuf,
    /// The caller's `SOURCE_DATE_EPOCH`, if it is set to an integer.
    pub source_date_epoch: Option<i64>,
    /// The real time now, seconds since the epoch (what `--date now` pins).
    pub now: i64,
    /// How many CPUs the caller may run on (its affinity mask).
    pub cpus_available: u32,
    /// The named unix sockets the host has bound (`/proc/net/unix`), covered in a sandbox
    /// on the host root.
    pub unix_sockets: Vec<PathBuf>,
}

impl HostFacts {
    pub fn current() -> Result<Self, PlanError> {
        Ok(HostFacts {
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            cwd: std::env::current_dir().map_err(PlanError::Cwd)?,
            source_date_epoch: std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|v| v.parse().ok()),
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            unix_sockets: sockets::host_sockets(),
            cpus_available: nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))
                .map(|set| {
                    (0..nix::sched::CpuSet::count())
                        .filter(|i| set.is_set(*i).unwrap_or(false))
                        .count() as u32
                })
                .unwrap_or(1)
                .max(1),
        })
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

/// Resolves a request into a plan.
pub fn resolve(req: &ExecRequest, host: &HostFacts) -> Result<Plan, PlanError> {
    // With an image and no command, the image's Entrypoint and Cmd.
    let argv = match &req.image {
        Some(img) if req.argv.is_empty() => &img.argv,
        _ => &req.argv,
    };
    if argv.is_empty() || argv[0].is_empty() {
        return Err(PlanError::EmptyCommand);
    }
    let absolute = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            host.cwd.join(p)
        }
    };

    let host_root = req.rootfs.is_none() && req.image.is_none();
    let isolation = match &req.image {
        Some(_) if req.rootfs.is_some() => return Err(PlanError::ImageAndRootfs),
        Some(_) => image::isolation(req.isolation)?,
        None => req.isolation,
    };
    let rootfs = match &req.rootfs {
        None if !host_root => req
            .image
            .as_ref()
            .map(|i| i.rootfs.clone())
            .unwrap_or_default(),
        None => PathBuf::from("/"),
        Some(dir) => {
            let dir = absolute(dir);
            if !dir.is_dir() {
                return Err(PlanError::Rootfs(dir));
            }
            dir
        }
    };
    let workdir = match &req.workdir {
        None => host.cwd.clone(),
        Some(dir) => absolute(dir),
    };
    if !workdir.is_dir() {
        return Err(PlanError::Workdir(workdir));
    }
    let workdir = host_source(workdir, req.follow_symlinks, "--workdir")?;

    let mut mounts = vec![MountOp::Tmpfs {
        dest: "/".into(),
        mode: 0o755,
        size: None,
    }];
    let cpus = req.cpus.unwrap_or(DEFAULT_CPUS);
    if cpus == 0 || cpus > host.cpus_available {
        return Err(PlanError::Cpus {
            asked: cpus,
            available: host.cpus_available,
        });
    }
    let identity = base::pinned_identity(cpus, &req.hostname, base::DEFAULT_DOMAINNAME);
    let seeded = req.random == RandomMode::Seeded;
    match &req.image {
        Some(img) => mounts = image::root_mounts(img),
        None => mounts.extend(rootfs_binds(&rootfs, host_root)?),
    }
    mounts.extend(system_mounts(seeded, req.tmpfs_size));
    let boot_epoch = match req.date {
        Some(DateChoice::Pinned(epoch)) => epoch,
        Some(DateChoice::Now) => host.now,
        None => host.source_date_epoch.unwrap_or(DEFAULT_EPOCH),
    } - UPTIME_START_SECS;
    mounts.extend(
        identity
            .files(boot_epoch)
            .into_iter()
            .map(|(dest, contents)| MountOp::File {
                dest: dest.into(),
                contents,
            }),
    );
    mounts.extend(MASKED.iter().map(|p| MountOp::Mask { dest: p.into() }));
    mounts.extend(
        READONLY
            .iter()
            .map(|p| MountOp::ReadonlyPath { dest: p.into() }),
    );
    let clock = match req.date {
        Some(DateChoice::Now) => None,
        Some(DateChoice::Pinned(epoch)) => Some(ClockPlan {
            epoch,
            mode: req.clock,
        }),
        None => Some(ClockPlan {
            epoch: host.source_date_epoch.unwrap_or(DEFAULT_EPOCH),
            mode: req.clock,
        }),
    };
    if clock.is_some() || seeded {
        mounts.extend(runtime_mounts(clock, seeded.then_some(req.seed)));
    }
    mounts.push(if req.workdir_overlay {
        MountOp::Overlay {
            lower: workdir.clone(),
            dest: WORKDIR.into(),
        }
    } else {
        MountOp::Bind {
            src: workdir.clone(),
            dest: WORKDIR.into(),
            readonly: false,
        }
    });
    // Host paths the caller gives the sandbox on purpose (bind sources).
    let mut given = Vec::new();
    for extra in &req.extra_mounts {
        mounts.push(match extra {
            ExtraMount::Bind(b) => {
                let src = absolute(&b.src);
                if std::fs::symlink_metadata(&src).is_err() {
                    return Err(PlanError::BindSource(src));
                }
                let src = host_source(src, req.follow_symlinks, "--bind source")?;
                given.push(src.clone());
                MountOp::Bind {
                    src,
                    dest: b.dest.clone(),
                    readonly: b.readonly,
                }
            }
            ExtraMount::Tmpfs(dest) => MountOp::Tmpfs {
                dest: dest.clone(),
                mode: 0o755,
                size: None,
            },
        });
    }
    if host_root {
        let given: Vec<&Path> = std::iter::once(workdir.as_path())
            .chain(given.iter().map(PathBuf::as_path))
            .collect();
        let masks = sockets::masks(&host.unix_sockets, PROVIDED, &given);
        mounts.extend(masks);
    }
    if req.image.is_some() {
        image::writable_etc(&mut mounts);
    } else {
        mounts.push(MountOp::ReadonlyRoot);
    }

    let mut env = if req.pinned_env {
        EnvProfile::pinned(clock.map_or(host.now, |c| c.epoch), req.seed)
    } else {
        let mut env = EnvProfile::empty();
        env.set("HOME", crate::determinism::env::HOME_DIR)?;
        env
    };
    if let Some(img) = &req.image {
        image::apply_env(&mut env, img)?;
    }
    for (k, v) in &req.env {
        env.set(k, v)?;
    }

    let image_user = req.image.as_ref().and_then(|i| i.user);
    let (in_uid, in_gid) = req.user.or(image_user).unwrap_or((0, 0));
    let mut namespaces = base::ALL_NAMESPACES.to_vec();
    if req.net == NetMode::Host {
        namespaces.retain(|ns| *ns != Namespace::Net);
    }

    let mut rlimits = default_rlimits();
    for r in &req.rlimits {
        rlimits.retain(|d| d.name != r.name);
        rlimits.push(r.clone());
    }
    rlimits.sort_by(|a, b| a.name.cmp(&b.name));
    let mut cap_add = req.cap_add.clone();
    cap_add.sort();
    cap_add.dedup();

    Ok(Plan {
        isolation,
        namespaces,
        uid_map: IdMap {
            inside: in_uid,
            outside: host.uid,
            count: 1,
        },
        gid_map: IdMap {
            inside: in_gid,
            outside: host.gid,
            count: 1,
        },
        mounts,
        hostname: req.hostname.clone(),
        host_workdir: workdir,
        env: env.to_vec(),
        timeout_ms: req
            .timeout
            .map(|d| d.as_millis().min(u64::MAX as u128) as u64),
        clock,
        seed: req.seed,
        random: req.random,
        identity,
        security: Security {
            seccomp: req.seccomp.clone(),
            cap_add,
            preserve_fds: req.preserve_fds,
            rlimits,
            caps: None,
        },
        resources: req.resources,
        share_tty: req.share_tty,
        intercept: req.intercept,
        sorted_dirs: req.sorted_dirs,
        ..Plan::base(rootfs, argv.clone())
    })
}

/// A host path the caller named as a mount source, resolved (the plan, and so the run
/// record, holds the path actually mounted). Unless `follow`, a path that crosses a symbolic
/// link is refused, naming the link: a run that may write the directory (an earlier
/// sandbox's `/work`) could have planted it to turn a later mount into one of a host path.
fn host_source(path: PathBuf, follow: bool, what: &'static str) -> Result<PathBuf, PlanError> {
    if let Some(link) = crate::sys::first_link(&path).filter(|_| !follow) {
        return Err(PlanError::SymlinkSource { what, path, link });
    }
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// Read-only binds of the rootfs's top-level entries into the skeleton root, in name order.
/// On the host root, `/root` is replaced by an empty directory (the host admin's files stay
/// out of the sandbox).
fn rootfs_binds(rootfs: &Path, host_root: bool) -> Result<Vec<MountOp>, PlanError> {
    let list_err = |source| PlanError::ListRootfs {
        path: rootfs.to_path_buf(),
        source,
    };
    let mut names: Vec<_> = std::fs::read_dir(rootfs)
        .map_err(list_err)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    names.sort();
    let mut ops = Vec::new();
    for name in names {
        let Some(text) = name.to_str() else { continue };
        if PROVIDED.contains(&text) {
            continue;
        }
        let src = rootfs.join(&name);
        let dest = Path::new("/").join(&name);
        if host_root && text == "root" {
            ops.push(MountOp::Dir { dest, mode: 0o700 });
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&src) else {
            continue;
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(list_err)?;
            ops.push(MountOp::Symlink { target, dest });
        } else if ft.is_dir() || ft.is_file() {
            ops.push(MountOp::Bind {
                src,
                dest,
                readonly: true,
            });
        }
    }
    Ok(ops)
}

/// The mounts every sandbox gets: /proc, /sys, a minimal /dev, private /run, /tmp and HOME.
/// With seeded entropy, /dev/urandom and /dev/random are one FIFO that init keeps filled
/// from the seeded stream (read-only: a writer would block once the pipe is full).
fn system_mounts(seeded: bool, tmp_size: Option<u64>) -> Vec<MountOp> {
    let mut ops = vec![
        MountOp::Proc {
            dest: "/proc".into(),
        },
        MountOp::Sysfs {
            dest: "/sys".into(),
        },
        MountOp::Tmpfs {
            dest: "/dev".into(),
            mode: 0o755,
            size: None,
        },
    ];
    ops.extend(device_nodes(seeded));
    ops.push(MountOp::Devpts {
        dest: "/dev/pts".into(),
    });
    ops.push(MountOp::Symlink {
        target: "pts/ptmx".into(),
        dest: "/dev/ptmx".into(),
    });
    ops.push(MountOp::Tmpfs {
        dest: "/dev/shm".into(),
        mode: 0o1777,
        size: None,
    });
    for (target, dest) in [
        ("/proc/self/fd", "/dev/fd"),
        ("/proc/self/fd/0", "/dev/stdin"),
        ("/proc/self/fd/1", "/dev/stdout"),
        ("/proc/self/fd/2", "/dev/stderr"),
    ] {
        ops.push(MountOp::Symlink {
            target: target.into(),
            dest: dest.into(),
        });
    }
    ops.push(MountOp::Tmpfs {
        dest: "/run".into(),
        mode: 0o755,
        size: None,
    });
    ops.push(MountOp::Tmpfs {
        dest: "/tmp".into(),
        mode: 0o1777,
        size: tmp_size,
    });
    ops.push(MountOp::Tmpfs {
        dest: "/home".into(),
        mode: 0o755,
        size: None,
    });
    ops.push(MountOp::Dir {
        dest: crate::determinism::HOME_DIR.into(),
        mode: 0o755,
    });
    ops
}

/// The device nodes of every sandbox and OCI container (runc's list), as binds of the
/// host's nodes; with seeded entropy /dev/urandom and /dev/random are one FIFO that init
/// keeps filled from the seeded stream (read-only: a writer would block once it is full).
pub fn device_nodes(seeded: bool) -> Vec<MountOp> {
    let mut ops = Vec::new();
    let random: &[&str] = if seeded { &[] } else { &["random", "urandom"] };
    for node in ["null", "zero", "full", "tty"].iter().chain(random) {
        ops.push(MountOp::DevNode {
            src: Path::new("/dev").join(node),
            dest: Path::new("/dev").join(node),
        });
    }
    if seeded {
        ops.push(MountOp::Fifo {
            dest: ENTROPY_FIFO.into(),
            mode: 0o444,
            links: vec!["/dev/random".into()],
        });
    }
    ops
}

/// The runtime page (clock, seed) and preload library in a private tmpfs, and
/// `/etc/ld.so.preload` naming the library. The tmpfs stays writable only in `tick` mode (the
/// shared read counter).
fn runtime_mounts(clock: Option<ClockPlan>, seed: Option<u64>) -> Vec<MountOp> {
    let mut ops = vec![
        MountOp::Tmpfs {
            dest: RUN_DIR.into(),
            mode: 0o755,
            size: Some(1 << 20),
        },
        MountOp::RuntimeFiles {
            dir: RUN_DIR.into(),
            clock,
            seed,
        },
        MountOp::Preload {
            etc: "/etc".into(),
            lib: PRELOAD_PATH.into(),
        },
    ];
    if !clock.is_some_and(|c| matches!(c.mode, ClockMode::Tick { .. })) {
        ops.push(MountOp::Readonly {
            dest: RUN_DIR.into(),
        });
    }
    ops
}

#[cfg(test)]
mod tests;
