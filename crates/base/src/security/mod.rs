//! Hardening and limits as data: the seccomp profile, capabilities to keep, descriptors to
//! pass, resource limits (rlimits and cgroup limits). Parsed and resolved here, applied by
//! the sandbox executor (`sandbox::workload` and `sandbox::isolation::cgroup`).

pub mod seccomp;
pub mod setid;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use seccomp::{SeccompError, SeccompProfile};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LimitError {
    #[error("--cap-add {0:?}: unknown capability; use a name such as NET_RAW or CAP_SYS_PTRACE (see capabilities(7))")]
    Capability(String),
    #[error("--rlimit {0:?}: expected NAME=SOFT[:HARD] with NAME one of {names} and values a number or \"unlimited\"", names = rlimit_names())]
    Rlimit(String),
    #[error("--rlimit {0:?}: the soft limit is above the hard limit")]
    RlimitOrder(String),
    #[error("{option} {value:?}: expected a size such as 512m, 2g or 1048576 (bytes; k, m, g, t suffixes are powers of 1024)")]
    Size { option: &'static str, value: String },
    #[error("--pids {0:?}: expected a positive number of processes")]
    Pids(String),
    #[error("--cpus-quota {0:?}: expected a number of CPUs from 0.01 up, such as 0.5 or 2")]
    CpuQuota(String),
}

/// Parses a capability name (`NET_RAW`, `cap_net_raw`, `CAP_NET_RAW`) into its canonical
/// `CAP_*` form.
pub fn capability(text: &str) -> Result<String, LimitError> {
    let upper = text.trim().to_ascii_uppercase();
    let name = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    name.parse::<caps::Capability>()
        .map(|c| c.to_string())
        .map_err(|_| LimitError::Capability(text.to_string()))
}

/// One resource limit: `None` is unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimit {
    pub name: String,
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// The rlimit names `--rlimit` takes, with their resources.
// (`as u32`: glibc declares the resources unsigned, musl `int`; a cast to the same type on
// glibc.)
#[allow(clippy::unnecessary_cast)]
const RLIMITS: &[(&str, u32)] = &[
    ("as", libc::RLIMIT_AS as u32),
    ("core", libc::RLIMIT_CORE as u32),
    ("cpu", libc::RLIMIT_CPU as u32),
    ("data", libc::RLIMIT_DATA as u32),
    ("fsize", libc::RLIMIT_FSIZE as u32),
    ("locks", libc::RLIMIT_LOCKS as u32),
    ("memlock", libc::RLIMIT_MEMLOCK as u32),
    ("msgqueue", libc::RLIMIT_MSGQUEUE as u32),
    ("nice", libc::RLIMIT_NICE as u32),
    ("nofile", libc::RLIMIT_NOFILE as u32),
    ("nproc", libc::RLIMIT_NPROC as u32),
    ("rss", libc::RLIMIT_RSS as u32),
    ("rtprio", libc::RLIMIT_RTPRIO as u32),
    ("rttime", libc::RLIMIT_RTTIME as u32),
    ("sigpending", libc::RLIMIT_SIGPENDING as u32),
    ("stack", libc::RLIMIT_STACK as u32),
];
/// The names `--rlimit` takes, for messages.
fn rlimit_names() -> String {
    RLIMITS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Rlimit {
    /// The resource number for `setrlimit(2)`.
    pub fn resource(&self) -> u32 {
        RLIMITS
            .iter()
            .find(|(n, _)| *n == self.name)
            .map_or(u32::MAX, |(_, r)| *r)
    }
}

/// Parses `--rlimit NAME=SOFT[:HARD]` (HARD defaults to SOFT; `unlimited` allowed).
pub fn rlimit(text: &str) -> Result<Rlimit, LimitError> {
    let err = || LimitError::Rlimit(text.to_string());
    let (name, values) = text.split_once('=').ok_or_else(err)?;
    let name = name.trim().to_ascii_lowercase();
    let name = name.strip_prefix("rlimit_").unwrap_or(&name);
    let name = RLIMITS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, _)| *n)
        .ok_or_else(err)?;
    let value = |v: &str| -> Result<Option<u64>, LimitError> {
        match v.trim() {
            "unlimited" | "infinity" | "-1" => Ok(None),
            n => n.parse().map(Some).map_err(|_| err()),
        }
    };
    let (soft, hard) = match values.split_once(':') {
        Some((s, h)) => (value(s)?, value(h)?),
        None => {
            let v = value(values)?;
            (v, v)
        }
    };
    let above = match (soft, hard) {
        (None, Some(_)) => true,
        (Some(s), Some(h)) => s > h,
        _ => false,
    };
    if above {
        return Err(LimitError::RlimitOrder(text.to_string()));
    }
    Ok(Rlimit {
        name: name.to_string(),
        soft,
        hard,
    })
}

/// The limits every sandbox gets unless `--rlimit` says otherwise: no core dumps, and 1024
/// open files (hard 524288, lowered to the caller's hard limit where that is less).
pub fn default_rlimits() -> Vec<Rlimit> {
    vec![
        Rlimit {
            name: "core".into(),
            soft: Some(0),
            hard: Some(0),
        },
        Rlimit {
            name: "nofile".into(),
            soft: Some(1024),
            hard: Some(524_288),
        },
    ]
}

/// Parses a size: bytes, or a number with a k/m/g/t suffix (powers of 1024; `KiB`, `MB`
/// and the like are read the same way).
pub fn size(option: &'static str, text: &str) -> Result<u64, LimitError> {
    let err = || LimitError::Size {
        option,
        value: text.to_string(),
    };
    let t = text.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 10),
        Some((i, 'm')) => (&t[..i], 20),
        Some((i, 'g')) => (&t[..i], 30),
        Some((i, 't')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| err())?;
    let bytes = n.checked_mul(1u64 << shift).ok_or_else(err)?;
    if bytes == 0 {
        return Err(err());
    }
    Ok(bytes)
}

/// Parses `--pids N`.
pub fn pids(text: &str) -> Result<u64, LimitError> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(LimitError::Pids(text.to_string())),
    }
}

/// Parses `--cpus-quota F` into thousandths of a CPU.
pub fn cpu_quota(text: &str) -> Result<u64, LimitError> {
    let err = || LimitError::CpuQuota(text.to_string());
    let f: f64 = text.trim().parse().map_err(|_| err())?;
    // The kernel's CFS quota is at least 1 ms per 100 ms period: 0.01 CPU.
    if !f.is_finite() || !(0.01..=65_536.0).contains(&f) {
        return Err(err());
    }
    Ok((f * 1000.0).round() as u64)
}

/// Cgroup limits for the whole sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Memory in bytes (no swap beyond it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Processes and threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// CPU time per wall time, in thousandths of a CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_milli: Option<u64>,
    /// Relative CPU weight as cgroup v1 `cpu.shares` (2 ..= 262144; OCI
    /// `linux.resources.cpu.shares`): written as is on v1, as `cpu.weight` on v2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_shares: Option<u64>,
    /// The device cgroup (OCI `linux.resources.devices`, then the devices every container
    /// may use): every device denied, then each rule in order. On cgroup v1's `devices`
    /// controller, by root only; not a limit [`Resources::any`] counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRule>,
    /// OCI `linux.resources.unified`: cgroup v2 files written as given (each must be
    /// written); on cgroup v1 refused, as runc refuses it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unified: BTreeMap<String, String>,
    /// Further controller files (OCI `linux.resources` fields), written in order after the
    /// limits above: on v1 the `v1` one, on v2 the `v2` one; a file the kernel does not
    /// offer is skipped (as runc does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<CgroupFile>,
}

/// One controller file and its value, by hierarchy version (`None`: none there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupFile {
    pub v1: Option<(String, String)>,
    pub v2: Option<(String, String)>,
}

/// One device cgroup rule: `TYPE MAJOR:MINOR ACCESS` (`c 1:3 rwm`, `a *:* rwm`) allowed or
/// denied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRule {
    pub allow: bool,
    pub rule: String,
}

impl Resources {
    pub fn any(&self) -> bool {
        self.memory.is_some()
            || self.pids.is_some()
            || self.cpu_milli.is_some()
            || self.cpu_shares.is_some()
            || !self.files.is_empty()
            || !self.unified.is_empty()
    }
}

/// Everything about the workload's privilege: profile, capabilities kept, descriptors
/// passed, rlimits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Security {
    pub seccomp: SeccompProfile,
    /// Capabilities kept (canonical `CAP_*` names); every other one is dropped.
    pub cap_add: Vec<String>,
    /// Descriptors 3..3+N passed to the workload (`--preserve-fds`).
    pub preserve_fds: u32,
    pub rlimits: Vec<Rlimit>,
    /// OCI `process.capabilities`: each set given apart (then `cap_add` is unused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<CapSets>,
    /// Set-id modes refused whatever the profile ([`setid`]): an `exec` sandbox's writes
    /// reach the host as the caller's files. Off for OCI containers (the engine's choice,
    /// as with runc).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refuse_setid: bool,
}

/// The five capability sets of OCI `process.capabilities` (canonical `CAP_*` names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapSets {
    pub bounding: Vec<String>,
    pub effective: Vec<String>,
    pub permitted: Vec<String>,
    pub inheritable: Vec<String>,
    pub ambient: Vec<String>,
    /// OCI `process.noNewPrivileges` false: no_new_privs is left unset (the determinism
    /// layer's filters are then installed while the process still has CAP_SYS_ADMIN).
    #[serde(default)]
    pub allow_new_privs: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_parse_in_any_spelling() {
        assert_eq!(capability("NET_RAW").unwrap(), "CAP_NET_RAW");
        assert_eq!(capability("cap_sys_ptrace").unwrap(), "CAP_SYS_PTRACE");
        assert!(capability("FLY").is_err());
        assert!(capability("").is_err());
    }

    #[test]
    fn rlimits_parse_and_refuse_bad_input() {
        assert_eq!(
            rlimit("nofile=100:200").unwrap(),
            Rlimit {
                name: "nofile".into(),
                soft: Some(100),
                hard: Some(200)
            }
        );
        assert_eq!(rlimit("CORE=0").unwrap().hard, Some(0));
        assert_eq!(rlimit("stack=unlimited").unwrap().soft, None);
        assert_eq!(rlimit("RLIMIT_NPROC=5").unwrap().name, "nproc");
        for bad in [
            "nofile",
            "nofile=",
            "nofile=x",
            "bogus=1",
            "=1",
            "nofile=1:2:3",
        ] {
            assert!(matches!(rlimit(bad), Err(LimitError::Rlimit(_))), "{bad}");
        }
        assert!(matches!(
            rlimit("nofile=10:5"),
            Err(LimitError::RlimitOrder(_))
        ));
        assert!(rlimit("nofile=unlimited:5").is_err());
        for r in default_rlimits() {
            assert_ne!(r.resource(), u32::MAX);
        }
    }

    #[test]
    fn sizes_pids_and_quotas() {
        assert_eq!(size("--memory", "512m").unwrap(), 512 << 20);
        assert_eq!(size("--memory", "2G").unwrap(), 2 << 30);
        assert_eq!(size("--memory", "64KiB").unwrap(), 64 << 10);
        assert_eq!(size("--memory", "1000").unwrap(), 1000);
        for bad in [
            "",
            "0",
            "-1",
            "1.5g",
            "lots",
            "99999999999999999999",
            "16777216t",
        ] {
            assert!(size("--memory", bad).is_err(), "{bad}");
        }
        assert_eq!(pids("64").unwrap(), 64);
        assert!(pids("0").is_err());
        assert_eq!(cpu_quota("0.5").unwrap(), 500);
        assert_eq!(cpu_quota("2").unwrap(), 2000);
        for bad in ["0", "-1", "nan", "inf", "x", "0.005"] {
            assert!(cpu_quota(bad).is_err(), "{bad}");
        }
    }
}
