//! Cgroup limits for a sandbox (`--memory`, `--pids`, `--cpus-quota`): a child cgroup of the
//! caller's own, on cgroup v2 where the needed controllers are delegated there, else on the
//! v1 hierarchies (this host family is hybrid: both exist). The cgroup is made before the
//! sandbox starts, init joins it before it forks anything, and it is removed after the run;
//! whether the kernel's OOM killer struck is read from it at the end.

use std::io::Read;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;
use thiserror::Error;

use crate::security::Resources;

const ROOT: &str = "/sys/fs/cgroup";
const CPU_PERIOD_US: u64 = 100_000;
/// The name standing for the unified hierarchy among a v1 cgroup's controllers: the
/// directory there holds the device program where the v1 `devices` controller is missing.
const UNIFIED: &str = "";

#[derive(Debug, Error)]
pub enum CgroupError {
    #[error("resource limits{field} need the {0} cgroup controller, which this host does not offer (neither delegated on cgroup v2 nor mounted on v1)", field = field_of(.0))]
    NoController(&'static str),
    #[error("linux.resources.unified: cannot be used on cgroup v1 (the container's cgroup is on v1 here: runc refuses it too)")]
    UnifiedOnV1,
    #[error("create cgroup {path}: {source}; resource limits need root, or a cgroup v2 subtree delegated to this user (e.g. `systemd-run --user --scope -p Delegate=yes reprorun ...`)")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{MODE_VAR}={0:?}: expected auto, v1 or v2")]
    Mode(String),
    #[error("device rules need the v1 devices controller or a cgroup v2 hierarchy, and this host mounts neither")]
    NoDeviceCgroup,
    #[error("attach the device program (device rules on cgroup v2) to {path}: {errno}")]
    Devices {
        path: PathBuf,
        errno: nix::errno::Errno,
    },
    #[error("set {file}: {source}")]
    Write {
        file: PathBuf,
        source: std::io::Error,
    },
}

/// Which hierarchy a cgroup lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V2,
    V1,
}

/// A sandbox's cgroup: one directory on v2, one per controller on v1.
#[derive(Debug)]
pub(crate) struct Cgroup {
    version: Version,
    dirs: Vec<PathBuf>,
    /// v1: the controller of each directory, in the same order.
    controllers: Vec<&'static str>,
}

/// Where the cgroup hierarchies are and where this process sits in them: the host's
/// (`/sys/fs/cgroup`, `/proc/self/cgroup`, `/proc/self/mountinfo`), or in unit tests a
/// directory standing in for them.
#[derive(Debug, Clone)]
pub(crate) struct Hierarchy {
    /// The cgroup filesystem root (`/sys/fs/cgroup`).
    pub(crate) root: PathBuf,
    /// The text of `/proc/self/cgroup`.
    pub(crate) membership: String,
    /// The text of `/proc/self/mountinfo` (where the v1 hierarchies are mounted).
    pub(crate) mountinfo: String,
}

/// The environment variable that chooses the hierarchies reprorun uses: unset, empty or
/// `auto`, every one it finds; `v2`, only the unified one, as on a pure cgroup-v2 host (a
/// hybrid host's v1 hierarchies are ignored); `v1`, only the v1 ones, as on a host without
/// cgroup v2 (what tests of each path need on a hybrid host).
pub(crate) const MODE_VAR: &str = "REPRORUN_CGROUP";

impl Hierarchy {
    /// The host's, as this process sees it, as [`MODE_VAR`] asks.
    pub(crate) fn host() -> Result<Hierarchy, CgroupError> {
        Hierarchy::host_reading(true)
    }

    /// [`Hierarchy::host`], reading the v1 mounts (`/proc/self/mountinfo`) only if `mounts`.
    pub(crate) fn host_reading(mounts: bool) -> Result<Hierarchy, CgroupError> {
        // One read for the usual size (procfs reports none).
        let read = |p| {
            let mut text = String::with_capacity(4096);
            let read = std::fs::File::open(p).and_then(|mut f| f.read_to_string(&mut text));
            read.map(|_| text).unwrap_or_default()
        };
        let h = Hierarchy {
            root: ROOT.into(),
            membership: read("/proc/self/cgroup"),
            mountinfo: if mounts {
                read("/proc/self/mountinfo")
            } else {
                String::new()
            },
        };
        match std::env::var_os(MODE_VAR) {
            None => Ok(h),
            Some(v) => match v.to_str() {
                Some("" | "auto") => Ok(h),
                Some("v2") => Ok(h.only(true)),
                Some("v1") => Ok(h.only(false)),
                _ => Err(CgroupError::Mode(v.to_string_lossy().into_owned())),
            },
        }
    }

    /// The same host seen with only its v2 hierarchy (`v2`: only the `0::` membership line,
    /// no v1 mounts) or only its v1 ones (no `0::` line).
    pub(crate) fn only(self, v2: bool) -> Hierarchy {
        let membership = self.membership.lines();
        let membership = membership
            .filter(|l| l.starts_with("0::") == v2)
            .map(|l| format!("{l}\n"))
            .collect();
        let mountinfo = if v2 { String::new() } else { self.mountinfo };
        Hierarchy {
            root: self.root,
            membership,
            mountinfo,
        }
    }

    /// Our own cgroup's directory on the v2 hierarchy (pure v2 at the root, or a hybrid
    /// host's `unified`), where one is mounted.
    pub(crate) fn v2_own(&self) -> Option<PathBuf> {
        v2_base(self, &[])
    }

    /// Our own cgroup's directory on the v1 hierarchy of `controller`.
    pub(crate) fn v1_own(&self, controller: &'static str) -> Option<PathBuf> {
        v1_dir(self, controller).ok()
    }

    /// This process's cgroup path on the hierarchy named `key` (`""` for the v2 line
    /// `0::/path`, a controller name for v1).
    pub(crate) fn own_path(&self, key: &str) -> Option<String> {
        own_path_in(&self.membership, key)
    }
}

/// The cgroup path on the hierarchy named `key` in a `/proc/PID/cgroup` text.
fn own_path_in(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if key.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == key)
        };
        matches.then(|| path.to_string())
    })
}

fn write(file: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(file, value).map_err(|source| CgroupError::Write {
        file: file.to_path_buf(),
        source,
    })
}

/// The OCI field that asks for `controller`, for the error naming it.
fn field_of(controller: &str) -> &'static str {
    match controller {
        "blkio" => " (linux.resources.blockIO)",
        "hugetlb" => " (linux.resources.hugepageLimits)",
        "net_cls" | "net_prio" => " (linux.resources.network)",
        "rdma" => " (linux.resources.rdma)",
        _ => "",
    }
}

/// The controller (its v1 name) of a controller file, by the file's prefix.
fn controller_of(file: &str) -> Option<&'static str> {
    Some(match file.split('.').next()? {
        "cpuset" => "cpuset",
        "memory" => "memory",
        "cpu" => "cpu",
        "pids" => "pids",
        "blkio" | "io" => "blkio",
        "hugetlb" => "hugetlb",
        "net_cls" => "net_cls",
        "net_prio" => "net_prio",
        "rdma" => "rdma",
        _ => return None,
    })
}

/// A controller's name on cgroup v2.
fn v2_name(controller: &'static str) -> &'static str {
    match controller {
        "blkio" => "io",
        c => c,
    }
}

/// The controllers `res` needs, by their (v1) cgroup names.
fn needed(res: &Resources) -> Vec<&'static str> {
    let mut c = Vec::new();
    if res.memory.is_some() {
        c.push("memory");
    }
    if res.pids.is_some() {
        c.push("pids");
    }
    if res.cpu_milli.is_some() || res.cpu_shares.is_some() {
        c.push("cpu");
    }
    if !res.devices.is_empty() {
        c.push("devices");
    }
    // The controller of each further file: its name's prefix (`cpuset.cpus`: cpuset).
    let names = res
        .files
        .iter()
        .flat_map(|f| f.v1.iter().chain(f.v2.iter()));
    for name in names.map(|(n, _)| n).chain(res.unified.keys()) {
        if let Some(controller) = controller_of(name) {
            if !c.contains(&controller) {
                c.push(controller);
            }
        }
    }
    c
}

/// A new v1 cpuset cgroup starts with no CPUs and memory nodes (a process cannot join it):
/// `dir` and each new parent up to `top` get their parent's.
fn fill_cpuset(dir: &Path, top: &Path) {
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let empty =
            |d: &Path| std::fs::read_to_string(d.join(file)).is_ok_and(|v| v.trim().is_empty());
        let mut chain = Vec::new();
        let mut d = dir.to_path_buf();
        while empty(&d) && d.starts_with(top) && d != top {
            chain.push(d.clone());
            match d.parent() {
                Some(p) => d = p.to_path_buf(),
                None => break,
            }
        }
        for d in chain.iter().rev() {
            if let Some(parent) = d.parent() {
                if let Ok(v) = std::fs::read_to_string(parent.join(file)) {
                    let _ = std::fs::write(d.join(file), v.trim());
                }
            }
        }
    }
}

/// cgroup v2 `cpu.weight` (1 ..= 10000) for v1 `cpu.shares` (2 ..= 262144, clamped), by
/// runc's linear map: 2 → 1, 1024 (the default) → 39, 262144 → 10000.
pub(crate) fn cpu_weight(shares: u64) -> u64 {
    let shares = shares.clamp(2, 262_144);
    1 + ((shares - 2) * 9999) / 262_142
}

/// The v2 mount (pure v2 at /sys/fs/cgroup, or hybrid at /sys/fs/cgroup/unified) whose
/// cgroup of ours can give children all of `controllers`.
fn v2_base(h: &Hierarchy, controllers: &[&str]) -> Option<PathBuf> {
    let own = h.own_path("")?;
    for mount in [h.root.clone(), h.root.join("unified")] {
        if !mount.join("cgroup.controllers").exists() {
            continue;
        }
        let parent = mount.join(own.trim_start_matches('/'));
        if controllers.is_empty() {
            return Some(parent);
        }
        let offered =
            std::fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
        let missing: Vec<_> = controllers
            .iter()
            .filter(|c| !offered.split_whitespace().any(|o| o == **c))
            .collect();
        if missing.is_empty() {
            return Some(parent);
        }
        // Delegate them to our children, where the parent allows it (it has them itself
        // and holds no processes of its own, or is the root).
        let available =
            std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
        if missing
            .iter()
            .all(|c| available.split_whitespace().any(|a| a == **c))
        {
            let enable: Vec<String> = missing.iter().map(|c| format!("+{c}")).collect();
            if std::fs::write(parent.join("cgroup.subtree_control"), enable.join(" ")).is_ok() {
                return Some(parent);
            }
        }
    }
    None
}

/// The v1 hierarchy directory (mount point plus our path) of `controller`.
fn v1_dir(h: &Hierarchy, controller: &'static str) -> Result<PathBuf, CgroupError> {
    let own = h
        .own_path(controller)
        .ok_or(CgroupError::NoController(controller))?;
    // (mount point, the hierarchy path it shows) of the v1 mount whose super options name
    // the controller (e.g. "cpu,cpuacct").
    let (point, root) = h
        .mountinfo
        .lines()
        .filter(|l| l.contains(" - cgroup "))
        .find_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let opts = fields.last()?;
            let (root, point) = (fields.get(3)?, fields.get(4)?);
            opts.split(',')
                .any(|o| o == controller)
                .then(|| (PathBuf::from(point), root.to_string()))
        })
        .ok_or(CgroupError::NoController(controller))?;
    let rel = own.strip_prefix(root.as_str()).unwrap_or(&own);
    Ok(point.join(rel.trim_start_matches('/')))
}

impl Cgroup {
    /// Creates a cgroup with the limits in `res` at `path`: a relative path below reprorun's
    /// own cgroup (a sandbox's unique name), an absolute one from the hierarchy's root (an
    /// OCI container's `linux.cgroupsPath`). Parents are made as needed; the leaf must be new
    /// (one left over would bring old processes and counters).
    pub(crate) fn create(res: &Resources, path: &str) -> Result<Cgroup, CgroupError> {
        Cgroup::create_in(&Hierarchy::host()?, res, path)
    }

    /// [`Cgroup::create`] on the hierarchies `h` describes.
    pub(crate) fn create_in(
        h: &Hierarchy,
        res: &Resources,
        path: &str,
    ) -> Result<Cgroup, CgroupError> {
        let mut controllers = needed(res);
        // No v1 device controller (a pure cgroup-v2 host, or a hybrid one without it): the
        // device rules become a BPF program attached to a v2 cgroup ([`super::devfilter`]),
        // the container's own or, where its limits are on v1, one beside them.
        let bpf_devices = controllers.contains(&"devices") && v1_dir(h, "devices").is_err();
        if bpf_devices {
            controllers.retain(|c| *c != "devices");
        }
        let rel = path.trim_start_matches('/');
        // `mine`: our own cgroup's directory on a hierarchy; `own`: its path there.
        let place = |mine: PathBuf, own: Option<String>| -> Result<PathBuf, CgroupError> {
            let base = match own.filter(|_| path.starts_with('/')) {
                Some(own) => mine
                    .to_string_lossy()
                    .strip_suffix(own.trim_end_matches('/'))
                    .map(PathBuf::from)
                    .unwrap_or(mine),
                None => mine,
            };
            let dir = base.join(rel);
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(|source| CgroupError::Create {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::create_dir(&dir)
                .map(|_| dir.clone())
                .map_err(|source| CgroupError::Create { path: dir, source })
        };
        let on_v2: Vec<&str> = controllers.iter().map(|c| v2_name(c)).collect();
        let cg = match v2_base(h, &on_v2) {
            Some(base) => Cgroup {
                version: Version::V2,
                dirs: vec![place(base, h.own_path(""))?],
                controllers: Vec::new(),
            },
            None => {
                let mut cg = Cgroup {
                    version: Version::V1,
                    dirs: Vec::new(),
                    controllers: Vec::new(),
                };
                if bpf_devices {
                    // The device program's cgroup, on the unified hierarchy.
                    let base = v2_base(h, &[]).ok_or(CgroupError::NoDeviceCgroup)?;
                    cg.dirs.push(place(base, h.own_path(""))?);
                    cg.controllers.push(UNIFIED);
                }
                for c in &controllers {
                    let mine = v1_dir(h, c)?;
                    let dir = place(mine, h.own_path(c))?;
                    if *c == "cpuset" {
                        fill_cpuset(&dir, &h.root);
                    }
                    cg.dirs.push(dir);
                    cg.controllers.push(c);
                }
                cg
            }
        };
        cg.limit(res)?;
        Ok(cg)
    }

    /// No cgroup at all (an unprivileged caller's container without limits).
    pub(crate) fn none() -> Cgroup {
        Cgroup {
            version: Version::V2,
            dirs: Vec::new(),
            controllers: Vec::new(),
        }
    }

    /// Keeps the directories after this value is gone (an OCI container's cgroup outlives
    /// `create`); [`remove_dirs`] removes them.
    pub(crate) fn keep(self) -> Vec<PathBuf> {
        let dirs = self.dirs.clone();
        std::mem::forget(self);
        dirs
    }

    /// The path of the controller file `file` (`memory.max`, `cpu.cfs_quota_us`...): in the
    /// one directory on v2, in its controller's directory on v1.
    fn path_of(&self, file: &str) -> Option<PathBuf> {
        let dir = match self.version {
            Version::V2 => self.dirs.first(),
            Version::V1 => {
                let controller = file.split('.').next()?;
                let at = self.controllers.iter().position(|c| *c == controller)?;
                self.dirs.get(at)
            }
        };
        dir.map(|d| d.join(file))
    }

    /// The path of `file` if the kernel offers it (optional files such as `memory.swap.max`).
    fn file(&self, file: &str) -> Option<PathBuf> {
        self.path_of(file).filter(|p| p.exists())
    }

    fn limit(&self, res: &Resources) -> Result<(), CgroupError> {
        let set = |name: &str, value: String| match self.path_of(name) {
            Some(f) => write(&f, &value),
            None => Err(CgroupError::Write {
                file: PathBuf::from(name),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            }),
        };
        if let Some(bytes) = res.memory {
            match self.version {
                Version::V2 => {
                    set("memory.max", bytes.to_string())?;
                    // No swap beyond the limit, where swap is accounted.
                    if let Some(f) = self.file("memory.swap.max") {
                        let _ = std::fs::write(f, "0");
                    }
                }
                Version::V1 => {
                    set("memory.limit_in_bytes", bytes.to_string())?;
                    // Swap, and TCP socket buffers (v1 counts them apart, v2 in memory.max):
                    // unread loopback connections cannot pin host memory beyond `--memory`;
                    // where the kernel refuses one, it goes uncharged (spec/security.md).
                    for extra in [
                        "memory.memsw.limit_in_bytes",
                        "memory.kmem.tcp.limit_in_bytes",
                    ] {
                        if let Some(f) = self.file(extra) {
                            let _ = std::fs::write(f, bytes.to_string());
                        }
                    }
                }
            }
        }
        if let Some(n) = res.pids {
            set("pids.max", n.to_string())?;
        }
        if let Some(milli) = res.cpu_milli {
            let quota = milli * CPU_PERIOD_US / 1000;
            match self.version {
                Version::V2 => set("cpu.max", format!("{quota} {CPU_PERIOD_US}"))?,
                Version::V1 => {
                    set("cpu.cfs_period_us", CPU_PERIOD_US.to_string())?;
                    set("cpu.cfs_quota_us", quota.to_string())?;
                }
            }
        }
        if let Some(shares) = res.cpu_shares {
            match self.version {
                Version::V2 => set("cpu.weight", cpu_weight(shares).to_string())?,
                Version::V1 => set("cpu.shares", shares.to_string())?,
            }
        }
        for f in &res.files {
            let file = match self.version {
                Version::V1 => &f.v1,
                Version::V2 => &f.v2,
            };
            if let Some((name, value)) = file {
                if let Some(path) = self.file(name) {
                    write(&path, value)?;
                }
            }
        }
        let program_dir = match self.version {
            Version::V2 => self.dirs.first(),
            Version::V1 => self
                .controllers
                .iter()
                .position(|c| *c == UNIFIED)
                .and_then(|at| self.dirs.get(at)),
        };
        if let (false, Some(dir)) = (res.devices.is_empty(), program_dir) {
            super::devfilter::attach(dir, &res.devices).map_err(|errno| CgroupError::Devices {
                path: dir.clone(),
                errno,
            })?;
        }
        match self.version {
            Version::V1 if !res.unified.is_empty() => return Err(CgroupError::UnifiedOnV1),
            Version::V1 => {}
            Version::V2 => {
                for (name, value) in &res.unified {
                    set(name, value.clone())?;
                }
            }
        }
        if self.controllers.contains(&"devices") && !res.devices.is_empty() {
            // Deny everything, then the rules in order (the kernel keeps the exceptions).
            set("devices.deny", "a".into())?;
            for r in &res.devices {
                let file = if r.allow {
                    "devices.allow"
                } else {
                    "devices.deny"
                };
                set(file, r.rule.clone())?;
            }
        }
        Ok(())
    }

    /// Moves process `pid` (with its threads) into the cgroup; `0` is the caller itself.
    pub(crate) fn add(&self, pid: Pid) -> Result<(), CgroupError> {
        for dir in &self.dirs {
            write(&dir.join("cgroup.procs"), &pid.as_raw().to_string())?;
        }
        Ok(())
    }

    /// Whether the kernel's OOM killer killed a process of the cgroup.
    pub(crate) fn oom_killed(&self) -> bool {
        let (file, key) = match self.version {
            Version::V2 => ("memory.events", "oom_kill"),
            Version::V1 => ("memory.oom_control", "oom_kill"),
        };
        self.file(file)
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|text| {
                text.lines().find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (k == key).then(|| v.trim().parse::<u64>().ok())?
                })
            })
            .is_some_and(|n| n > 0)
    }
}

impl Drop for Cgroup {
    /// Kills whatever is left (nothing, after a sandbox: its pid namespace is gone) and
    /// removes the directories.
    fn drop(&mut self) {
        remove_dirs(&self.dirs);
    }
}

/// Kills every process left in the cgroup directories and removes them.
pub(crate) fn remove_dirs(dirs: &[PathBuf]) {
    {
        for dir in dirs {
            for _ in 0..100 {
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                if procs.trim().is_empty() {
                    break;
                }
                for pid in procs.lines().filter_map(|p| p.trim().parse().ok()) {
                    let _ = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::SIGKILL);
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_controllers_follow_the_limits() {
        let none = Resources::default();
        assert!(needed(&none).is_empty());
        let all = Resources {
            memory: Some(1),
            pids: Some(2),
            cpu_milli: Some(500),
            cpu_shares: Some(1024),
            devices: Vec::new(),
            files: Vec::new(),
            unified: Default::default(),
        };
        assert_eq!(needed(&all), ["memory", "pids", "cpu"]);
        let shares = Resources {
            cpu_shares: Some(2),
            ..Resources::default()
        };
        assert_eq!(needed(&shares), ["cpu"]);
    }

    #[test]
    fn cpu_shares_map_to_weight_as_runc_does() {
        // The ends of both ranges, the default and kubelet's figures for 0.1 and 1 CPU.
        for (shares, weight) in [
            (2, 1),
            (262_144, 10_000),
            (1024, 39),
            (102, 4),
            (512, 20),
            (4096, 157),
        ] {
            assert_eq!(cpu_weight(shares), weight, "shares {shares}");
        }
        // Out of range: clamped first.
        assert_eq!(cpu_weight(0), 1);
        assert_eq!(cpu_weight(1_000_000), 10_000);
        // Monotonic over the whole range.
        let mut last = 0;
        for shares in (2..=262_144).step_by(97) {
            let w = cpu_weight(shares);
            assert!(w >= last && (1..=10_000).contains(&w), "shares {shares}");
            last = w;
        }
    }

    /// A directory standing in for /sys/fs/cgroup, this process at `/user/me` in it.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        /// Pure v2: the root offers `offered` to children of `/user/me`, which has `has`.
        fn v2(has: &str, offered: &str) -> (Fake, Hierarchy) {
            let dir = tempfile::tempdir().unwrap();
            let me = dir.path().join("user/me");
            std::fs::create_dir_all(&me).unwrap();
            std::fs::write(dir.path().join("cgroup.controllers"), has).unwrap();
            std::fs::write(me.join("cgroup.controllers"), has).unwrap();
            std::fs::write(me.join("cgroup.subtree_control"), offered).unwrap();
            let h = Hierarchy {
                root: dir.path().to_path_buf(),
                membership: "0::/user/me\n".into(),
                mountinfo: String::new(),
            };
            (Fake { dir }, h)
        }

        /// v1 only: one hierarchy per controller, mounted at ROOT/NAME.
        fn v1(controllers: &[&str]) -> (Fake, Hierarchy) {
            let dir = tempfile::tempdir().unwrap();
            let mut membership = String::new();
            let mut mountinfo = String::new();
            for (i, c) in controllers.iter().enumerate() {
                let point = dir.path().join(c);
                std::fs::create_dir_all(point.join("user/me")).unwrap();
                membership.push_str(&format!("{}:{c}:/user/me\n", i + 1));
                mountinfo.push_str(&format!(
                    "{} 1 0:{} / {} rw - cgroup cgroup rw,{c}\n",
                    30 + i,
                    40 + i,
                    point.display()
                ));
            }
            let h = Hierarchy {
                root: dir.path().to_path_buf(),
                membership,
                mountinfo,
            };
            (Fake { dir }, h)
        }

        fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.dir.path().join(rel))
                .unwrap_or_else(|e| panic!("{rel}: {e}"))
        }
    }

    fn all() -> Resources {
        Resources {
            memory: Some(64 << 20),
            pids: Some(64),
            cpu_milli: Some(500),
            cpu_shares: Some(1024),
            devices: Vec::new(),
            files: Vec::new(),
            unified: Default::default(),
        }
    }

    fn device_rules() -> Resources {
        let rule = |allow, rule: &str| crate::security::DeviceRule {
            allow,
            rule: rule.into(),
        };
        Resources {
            devices: vec![rule(false, "b 8:0 rwm"), rule(true, "c 1:3 rwm")],
            ..Resources::default()
        }
    }

    #[test]
    fn device_rules_go_to_v1_devices_and_are_skipped_without_it() {
        let (fake, h) = Fake::v1(&["devices"]);
        let cg = Cgroup::create_in(&h, &device_rules(), "sbx").unwrap();
        // (A plain file keeps the last write of each: the kernel's files take each rule.)
        assert_eq!(fake.read("devices/user/me/sbx/devices.deny"), "b 8:0 rwm");
        assert_eq!(fake.read("devices/user/me/sbx/devices.allow"), "c 1:3 rwm");
        assert_eq!(cg.keep().len(), 1);
        // Pure v2 (no device controller there): the rules become a BPF program attached to
        // the v2 cgroup, which a plain directory is not (and an unprivileged caller cannot
        // load one): refused, naming it.
        let (fake, h) = Fake::v2("memory", "memory");
        let e = Cgroup::create_in(&h, &device_rules(), "sbx").unwrap_err();
        match e {
            CgroupError::Devices { path, .. } => {
                assert_eq!(path, fake.dir.path().join("user/me/sbx"))
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn device_rules_without_v1_devices_go_to_the_unified_hierarchy_beside_v1_limits() {
        // Hybrid: memory on v1, no v1 devices, the unified hierarchy mounted (no
        // controllers). The limits go to v1, the device program to a cgroup on the unified
        // hierarchy (which a plain directory refuses: the error names that cgroup).
        let (fake, mut h) = Fake::v1(&["memory"]);
        let unified = fake.dir.path().join("unified");
        std::fs::create_dir_all(unified.join("user/me")).unwrap();
        std::fs::write(unified.join("cgroup.controllers"), "").unwrap();
        h.membership.push_str("0::/user/me\n");
        let res = Resources {
            memory: Some(1 << 20),
            ..device_rules()
        };
        match Cgroup::create_in(&h, &res, "sbx").unwrap_err() {
            CgroupError::Devices { path, .. } => assert_eq!(path, unified.join("user/me/sbx")),
            other => panic!("{other}"),
        }
        // Removed again (the fake's v1 directory keeps the plain file written into it).
        assert!(!unified.join("user/me/sbx").exists());
        // Without the unified hierarchy either: refused, not run without the rules.
        let (_fake, h) = Fake::v1(&["memory"]);
        let e = Cgroup::create_in(&h, &res, "sbx").unwrap_err();
        assert!(matches!(e, CgroupError::NoDeviceCgroup), "{e}");
        // Seen as v2 only (REPRORUN_CGROUP=v2), a hybrid host's v1 devices are ignored.
        let (fake, h) = Fake::v1(&["devices"]);
        let mut h2 = h.clone();
        h2.membership.push_str("0::/user/me\n");
        assert!(h2.v1_own("devices").is_some());
        let v2 = h2.only(true);
        assert_eq!(v2.membership, "0::/user/me\n");
        assert!(v2.v1_own("devices").is_none());
        let e = Cgroup::create_in(&v2, &device_rules(), "sbx").unwrap_err();
        assert!(matches!(e, CgroupError::NoDeviceCgroup), "{e}");
        drop(fake);
    }

    #[test]
    fn v2_limits_go_into_one_child_of_our_own_cgroup() {
        let (fake, h) = Fake::v2("cpu memory pids", "cpu memory pids");
        let cg = Cgroup::create_in(&h, &all(), "sbx").unwrap();
        assert_eq!(fake.read("user/me/sbx/memory.max"), "67108864");
        assert_eq!(fake.read("user/me/sbx/pids.max"), "64");
        assert_eq!(fake.read("user/me/sbx/cpu.max"), "50000 100000");
        assert_eq!(fake.read("user/me/sbx/cpu.weight"), "39");
        let dirs = cg.keep();
        assert_eq!(dirs, vec![fake.dir.path().join("user/me/sbx")]);
    }

    #[test]
    fn v2_controllers_we_have_are_delegated_to_our_children() {
        let (fake, h) = Fake::v2("cpu memory pids", "memory");
        let _cg = Cgroup::create_in(&h, &all(), "sbx").unwrap();
        assert_eq!(fake.read("user/me/cgroup.subtree_control"), "+pids +cpu");
    }

    #[test]
    fn v1_limits_go_into_each_controllers_hierarchy() {
        let (fake, h) = Fake::v1(&["memory", "pids", "cpu"]);
        let cg = Cgroup::create_in(&h, &all(), "sbx").unwrap();
        assert_eq!(
            fake.read("memory/user/me/sbx/memory.limit_in_bytes"),
            "67108864"
        );
        assert_eq!(fake.read("pids/user/me/sbx/pids.max"), "64");
        assert_eq!(fake.read("cpu/user/me/sbx/cpu.cfs_quota_us"), "50000");
        assert_eq!(fake.read("cpu/user/me/sbx/cpu.cfs_period_us"), "100000");
        assert_eq!(fake.read("cpu/user/me/sbx/cpu.shares"), "1024");
        // No memsw file (swap not accounted): nothing written for it, no failure.
        assert!(!fake
            .dir
            .path()
            .join("memory/user/me/sbx/memory.memsw.limit_in_bytes")
            .exists());
        assert_eq!(cg.keep().len(), 3);
    }

    #[test]
    fn an_absolute_path_is_taken_from_the_hierarchys_root() {
        let (fake, h) = Fake::v2("memory", "memory");
        let res = Resources {
            memory: Some(1 << 20),
            ..Resources::default()
        };
        let cg = Cgroup::create_in(&h, &res, "/machine/ctr-1").unwrap();
        assert_eq!(fake.read("machine/ctr-1/memory.max"), "1048576");
        assert_eq!(cg.keep(), vec![fake.dir.path().join("machine/ctr-1")]);
    }

    #[test]
    fn missing_controllers_and_leftover_leaves_fail_clearly() {
        let (_fake, h) = Fake::v1(&["memory"]);
        let err = Cgroup::create_in(&h, &all(), "sbx").unwrap_err();
        assert!(matches!(err, CgroupError::NoController("pids")), "{err}");
        let (fake, h) = Fake::v2("memory", "memory");
        std::fs::create_dir(fake.dir.path().join("user/me/old")).unwrap();
        let res = Resources {
            memory: Some(1),
            ..Resources::default()
        };
        let err = Cgroup::create_in(&h, &res, "old").unwrap_err();
        assert!(matches!(err, CgroupError::Create { .. }), "{err}");
    }

    #[test]
    fn unified_is_written_on_v2_and_refused_on_v1_and_a_missing_controller_names_its_field() {
        let mut res = Resources::default();
        res.unified
            .insert("memory.high".into(), "1073741824".into());
        let (fake, h) = Fake::v2("memory", "memory");
        Cgroup::create_in(&h, &res, "sbx").unwrap().keep();
        assert_eq!(fake.read("user/me/sbx/memory.high"), "1073741824");
        let (_fake, h) = Fake::v1(&["memory"]);
        let e = Cgroup::create_in(&h, &res, "sbx").unwrap_err();
        assert!(matches!(e, CgroupError::UnifiedOnV1), "{e}");
        // A v1 host without hugetlb: refused naming the controller and the field.
        let mut res = Resources::default();
        res.files.push(crate::security::CgroupFile {
            v1: Some(("hugetlb.2MB.limit_in_bytes".into(), "4194304".into())),
            v2: Some(("hugetlb.2MB.max".into(), "4194304".into())),
        });
        let (_fake, h) = Fake::v1(&["memory"]);
        let e = Cgroup::create_in(&h, &res, "sbx").unwrap_err().to_string();
        assert!(
            e.contains("hugetlb cgroup controller") && e.contains("linux.resources.hugepageLimits"),
            "{e}"
        );
    }
}
