//! What a caller asks for ([`ExecRequest`], independent of how it was asked) and the facts
//! about the caller that resolution depends on ([`HostFacts`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{image, sockets, Isolation, NetMode, PlanError, DEFAULT_HOSTNAME};
use crate::determinism::{ClockMode, DateChoice, RandomMode};
use crate::parse::BindSpec;
use crate::security::{Resources, Rlimit, SeccompProfile};

/// An extra mount the user asked for, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraMount {
    Bind(BindSpec),
    Tmpfs(PathBuf),
}

/// Where `--import-tool` puts programs (on the sandbox's own /run).
pub(super) const TOOLS_DIR: &str = "/run/tools";

/// How the working directory is mounted at /work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkdirMode {
    /// A read-write bind: what the run writes stays in the host directory.
    Rw,
    /// A read-only bind.
    Ro,
    /// A fresh writable overlay (a tmpfs upper that ends with the run): the run cannot
    /// change the host directory.
    Overlay,
}

/// A network as one option names it (`reproduce --no-shim-net`): `none`, `host`, or
/// `allow:PATTERN,...` (the egress proxy with that allowlist; `allow` alone allows nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetChoice {
    pub mode: NetMode,
    pub egress: crate::net::Egress,
}

impl NetChoice {
    pub const NONE: NetChoice = NetChoice {
        mode: NetMode::None,
        egress: crate::net::Egress {
            rules: Vec::new(),
            hosts: Vec::new(),
            inject: Vec::new(),
            upstream_ca: None,
            record: None,
            replay: None,
        },
    };

    /// Parses `none`, `host`, `allow` or `allow:PATTERN,PATTERN,...`.
    pub fn parse(text: &str) -> Result<NetChoice, String> {
        let mode = |mode| NetChoice {
            mode,
            egress: Default::default(),
        };
        match text.split_once(':') {
            None if text == "none" => Ok(mode(NetMode::None)),
            None if text == "host" => Ok(mode(NetMode::Host)),
            None if text == "allow" => Ok(mode(NetMode::Allow)),
            Some(("allow", list)) => {
                let rules = list
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(crate::net::Rule::parse)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                Ok(NetChoice {
                    mode: NetMode::Allow,
                    egress: crate::net::Egress {
                        rules,
                        ..Default::default()
                    },
                })
            }
            _ => Err(format!(
                "{text:?}: expected none, host, or allow:PATTERN[:PORT],... (e.g. allow:pypi.org,files.pythonhosted.org)"
            )),
        }
    }
}

impl std::fmt::Display for NetChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.mode {
            NetMode::None => f.write_str("none"),
            NetMode::Host => f.write_str("host"),
            NetMode::Allow if self.egress.rules.is_empty() => f.write_str("allow"),
            NetMode::Allow => {
                let rules: Vec<String> = self.egress.rules.iter().map(|r| r.to_string()).collect();
                write!(f, "allow:{}", rules.join(","))
            }
        }
    }
}

/// What the caller asked for, independent of how it was asked (CLI, OCI, pipeline).
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub rootfs: Option<PathBuf>,
    /// `--image`: run on this image's root (a fresh writable overlay) instead of `rootfs`.
    pub image: Option<image::ImageRoot>,
    pub workdir: Option<PathBuf>,
    pub extra_mounts: Vec<ExtraMount>,
    /// How the working directory is mounted: read-write, read-only, or under a fresh
    /// writable overlay whose changes end with the run.
    pub workdir_mode: WorkdirMode,
    /// `--keep-changes`: where the overlay's layers go (`WorkdirMode::Overlay` only).
    pub keep_changes: Option<PathBuf>,
    pub net: NetMode,
    /// With `NetMode::Allow`: the allowlist and resolver overrides of the egress proxy.
    pub egress: crate::net::Egress,
    /// `--net-log`: where the proxy appends a JSON line per connection attempt.
    pub net_log: Option<PathBuf>,
    /// `--mirror` with an npm part: the mirror directory to serve on the sandbox's loopback.
    pub registry: Option<PathBuf>,
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
            workdir_mode: WorkdirMode::Rw,
            keep_changes: None,
            net: NetMode::None,
            egress: crate::net::Egress::default(),
            net_log: None,
            registry: None,
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

    /// `--import-tool NAME`: the program NAME on the caller's `path` (its real file, links
    /// followed), bound read-only at [`TOOLS_DIR`]`/NAME`, which goes first on the pinned
    /// PATH (an image's own PATH is left alone: the tool is then at its full path).
    pub fn import_tool(
        &mut self,
        name: &str,
        path: &std::ffi::OsStr,
    ) -> Result<(), super::PlanError> {
        let missing = || super::PlanError::ImportTool(name.to_string());
        let found = crate::hint::on_path(name, path).ok_or_else(missing)?;
        let src = std::fs::canonicalize(found).map_err(|_| missing())?;
        self.extra_mounts.push(ExtraMount::Bind(BindSpec {
            src,
            dest: Path::new(TOOLS_DIR).join(name),
            readonly: true,
        }));
        let path = format!("{TOOLS_DIR}:{}", crate::determinism::FROZEN_PATH);
        if self.image.is_none() && !self.env.iter().any(|(k, v)| k == "PATH" && *v == path) {
            self.env.push(("PATH".into(), path));
        }
        Ok(())
    }

    /// Attaches the dependency mirror in `dir` (`--mirror`): its clients' environment after
    /// what `env` holds so far, its read-only bind before every other extra mount.
    pub fn attach_mirror(&mut self, dir: &Path) -> Result<(), crate::mirror::MirrorError> {
        self.attach_mirror_as(dir, crate::mirror::Serve::File)
    }

    /// [`Self::attach_mirror`], with the PyPI part served as `serve` says (`--mirror-serve`).
    pub fn attach_mirror_as(
        &mut self,
        dir: &Path,
        serve: crate::mirror::Serve,
    ) -> Result<(), crate::mirror::MirrorError> {
        let m = crate::mirror::attach(dir, serve)?;
        self.env.extend(m.env);
        self.registry = m.served.then(|| m.bind.src.clone());
        self.extra_mounts.insert(0, ExtraMount::Bind(m.bind));
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
