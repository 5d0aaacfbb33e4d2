//! Cgroup limits for a sandbox (`--memory`, `--pids`, `--cpus-quota`): a child cgroup of the
//! caller's own, on cgroup v2 where the needed controllers are delegated there, else on the
//! v1 hierarchies (this host family is hybrid: both exist). The cgroup is made before the
//! sandbox starts, init joins it before it forks anything, and it is removed after the run;
//! whether the kernel's OOM killer struck is read from it at the end.

use std::path::{Path, PathBuf};

use nix::unistd::Pid;
use thiserror::Error;

use crate::security::Resources;

const ROOT: &str = "/sys/fs/cgroup";
const CPU_PERIOD_US: u64 = 100_000;

#[derive(Debug, Error)]
pub enum CgroupError {
    #[error("resource limits need the {0} cgroup controller, which this host does not offer (neither delegated on cgroup v2 nor mounted on v1)")]
    NoController(&'static str),
    #[error("create cgroup {path}: {source}; resource limits need root, or a cgroup v2 subtree delegated to this user (e.g. `systemd-run --user --scope -p Delegate=yes reprorun ...`)")]
    Create {
        path: PathBuf,
        source: std::io::Error,
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
pub struct Cgroup {
    version: Version,
    dirs: Vec<PathBuf>,
}

/// The caller's own cgroup path on the hierarchy named `key` in /proc/self/cgroup (`""` for
/// the v2 line `0::/path`, a controller name for v1).
fn own_path(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
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

/// The controllers `res` needs, by their cgroup names.
fn needed(res: &Resources) -> Vec<&'static str> {
    let mut c = Vec::new();
    if res.memory.is_some() {
        c.push("memory");
    }
    if res.pids.is_some() {
        c.push("pids");
    }
    if res.cpu_milli.is_some() {
        c.push("cpu");
    }
    c
}

/// The v2 mount (pure v2 at /sys/fs/cgroup, or hybrid at /sys/fs/cgroup/unified) whose
/// cgroup of ours can give children all of `controllers`.
fn v2_base(controllers: &[&str]) -> Option<PathBuf> {
    let own = own_path("")?;
    for mount in [PathBuf::from(ROOT), Path::new(ROOT).join("unified")] {
        if !mount.join("cgroup.controllers").exists() {
            continue;
        }
        let parent = mount.join(own.trim_start_matches('/'));
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
fn v1_dir(controller: &'static str) -> Result<PathBuf, CgroupError> {
    let own = own_path(controller).ok_or(CgroupError::NoController(controller))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // The v1 mount whose super options name the controller (e.g. "cpu,cpuacct").
    // (mount point, the hierarchy path it shows) of the v1 mount whose super options name
    // the controller (e.g. "cpu,cpuacct").
    let (point, root) = mounts
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
    pub fn create(res: &Resources, path: &str) -> Result<Cgroup, CgroupError> {
        let controllers = needed(res);
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
        let cg = match v2_base(&controllers) {
            Some(base) => Cgroup {
                version: Version::V2,
                dirs: vec![place(base, own_path(""))?],
            },
            None => {
                let mut cg = Cgroup {
                    version: Version::V1,
                    dirs: Vec::new(),
                };
                for c in &controllers {
                    cg.dirs.push(place(v1_dir(c)?, own_path(c))?);
                }
                cg
            }
        };
        cg.limit(res)?;
        Ok(cg)
    }

    /// No cgroup at all (an unprivileged caller's container without limits).
    pub fn none() -> Cgroup {
        Cgroup {
            version: Version::V2,
            dirs: Vec::new(),
        }
    }

    /// Keeps the directories after this value is gone (an OCI container's cgroup outlives
    /// `create`); [`remove_dirs`] removes them.
    pub fn keep(self) -> Vec<PathBuf> {
        let dirs = self.dirs.clone();
        std::mem::forget(self);
        dirs
    }

    /// The directory holding `file` (v1: the first whose name says so).
    fn file(&self, file: &str) -> Option<PathBuf> {
        self.dirs.iter().map(|d| d.join(file)).find(|p| p.exists())
    }

    fn limit(&self, res: &Resources) -> Result<(), CgroupError> {
        let set = |name: &str, value: String| match self.file(name) {
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
                    if let Some(f) = self.file("memory.memsw.limit_in_bytes") {
                        let _ = std::fs::write(f, bytes.to_string());
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
        Ok(())
    }

    /// Moves process `pid` (with its threads) into the cgroup; `0` is the caller itself.
    pub fn add(&self, pid: Pid) -> Result<(), CgroupError> {
        for dir in &self.dirs {
            write(&dir.join("cgroup.procs"), &pid.as_raw().to_string())?;
        }
        Ok(())
    }

    /// Whether the kernel's OOM killer killed a process of the cgroup.
    pub fn oom_killed(&self) -> bool {
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
pub fn remove_dirs(dirs: &[PathBuf]) {
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
        };
        assert_eq!(needed(&all), ["memory", "pids", "cpu"]);
    }
}
