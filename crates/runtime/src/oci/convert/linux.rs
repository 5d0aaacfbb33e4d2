//! `linux`: namespaces, id mappings, devices, sysctls, the seccomp profile and resources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::mounts::absolute_dest;
use super::{bad, ConvertError};
use crate::oci::spec;
use crate::plan::{MountOp, Namespace, NsJoin, ParentMaps};
use crate::security::{CgroupFile, DeviceRule, Resources, SeccompProfile};

/// `linux.namespaces`: the namespaces to create, and those to join by path.
pub(super) fn namespaces(
    list: &[spec::NamespaceSpec],
) -> Result<(Vec<Namespace>, Vec<NsJoin>), ConvertError> {
    let mut namespaces = Vec::new();
    let mut join = Vec::new();
    for (i, ns) in list.iter().enumerate() {
        let field = format!("linux.namespaces[{i}]");
        let kind = match ns.kind.as_str() {
            "pid" => Namespace::Pid,
            "network" => Namespace::Net,
            "mount" => Namespace::Mount,
            "ipc" => Namespace::Ipc,
            "uts" => Namespace::Uts,
            "user" => Namespace::User,
            "cgroup" => Namespace::Cgroup,
            "time" => Namespace::Time,
            other => return Err(bad(field, format!("unknown namespace type {other:?}"))),
        };
        if namespaces.contains(&kind) || join.iter().any(|j: &NsJoin| j.ns == kind) {
            return Err(bad(field, format!("namespace {:?} listed twice", ns.kind)));
        }
        match &ns.path {
            Some(p) if !p.is_empty() => join.push(NsJoin {
                ns: kind,
                path: PathBuf::from(p),
            }),
            _ => namespaces.push(kind),
        }
    }
    Ok((namespaces, join))
}

/// `linux.uidMappings` and `gidMappings`, as the creating process writes them.
pub(super) fn parent_maps(linux: &spec::Linux) -> ParentMaps {
    let maps = |m: &[spec::IdMapping]| m.iter().map(super::idmap::id_map).collect::<Vec<_>>();
    ParentMaps {
        uid: maps(&linux.uid_mappings),
        gid: maps(&linux.gid_mappings),
    }
}

/// `personality(2)`'s 32-bit Linux execution domain.
const PER_LINUX32: u32 = 0x0008;

/// `linux.personality` as the execution domain `personality(2)` takes: `LINUX` (`PER_LINUX`,
/// 0) or `LINUX32` (`PER_LINUX32`, 8); another domain is refused, as crun refuses it. Its
/// `flags` (the runtime-spec defines none yet) are not applied, as crun does not apply them.
pub(super) fn personality(p: Option<&spec::Personality>) -> Result<Option<u32>, ConvertError> {
    let Some(p) = p else {
        return Ok(None);
    };
    match p.domain.as_str() {
        "LINUX" => Ok(Some(0)),
        "LINUX32" => Ok(Some(PER_LINUX32)),
        other => Err(bad(
            "linux.personality.domain",
            format!("{other:?}: must be LINUX or LINUX32"),
        )),
    }
}

/// The machine `uname` reports in execution domain `domain`: under `PER_LINUX32` an x86_64
/// kernel says `i686` (its `override_architecture`); anything else is reported as it is.
pub(super) fn machine_in(domain: Option<u32>, machine: &str) -> String {
    match (domain, machine) {
        (Some(PER_LINUX32), "x86_64") => "i686".into(),
        _ => machine.into(),
    }
}

/// `linux.devices` as nodes made in the container.
pub(super) fn devices(list: &[spec::Device]) -> Result<Vec<MountOp>, ConvertError> {
    let mut ops = Vec::new();
    for (i, d) in list.iter().enumerate() {
        let field = format!("linux.devices[{i}]");
        let kind = match d.kind.as_str() {
            "c" | "u" => 'c',
            "b" => 'b',
            "p" => 'p',
            other => return Err(bad(field, format!("unknown device type {other:?}"))),
        };
        let dest = absolute_dest(&d.path).map_err(|r| bad(&field, r))?;
        ops.push(MountOp::Device {
            dest,
            kind,
            major: d.major,
            minor: d.minor,
            mode: d.file_mode.unwrap_or(0o666),
            uid: d.uid.unwrap_or(0),
            gid: d.gid.unwrap_or(0),
        });
    }
    Ok(ops)
}

/// The devices every container may use, as runc allows them: `mknod` of any node (the
/// access rules still apply to using it), null, zero, full, random, urandom, tty, console,
/// the pty slaves and ptmx, and tun.
const DEFAULT_DEVICE_RULES: [&str; 12] = [
    "c *:* m",
    "b *:* m",
    "c 1:3 rwm",
    "c 1:5 rwm",
    "c 1:7 rwm",
    "c 1:8 rwm",
    "c 1:9 rwm",
    "c 5:0 rwm",
    "c 5:1 rwm",
    "c 136:* rwm",
    "c 5:2 rwm",
    "c 10:200 rwm",
];

/// The device cgroup's rules: `linux.resources.devices` in order, then the default devices,
/// then each of `linux.devices` (runc's order).
pub(super) fn device_rules(
    rules: &[spec::DeviceRule],
    devices: &[spec::Device],
) -> Result<Vec<DeviceRule>, ConvertError> {
    let number = |n: Option<i64>| {
        n.filter(|n| *n >= 0)
            .map_or("*".to_string(), |n| n.to_string())
    };
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let field = format!("linux.resources.devices[{i}]");
        let kind = r.kind.as_deref().unwrap_or("a");
        if !matches!(kind, "a" | "c" | "b") {
            return Err(bad(field, format!("type {kind:?}: expected a, c or b")));
        }
        let access = r.access.as_deref().unwrap_or("rwm");
        if access.is_empty() || !access.chars().all(|c| matches!(c, 'r' | 'w' | 'm')) {
            return Err(bad(
                field,
                format!("access {access:?}: expected letters of rwm"),
            ));
        }
        out.push(DeviceRule {
            allow: r.allow,
            rule: format!("{kind} {}:{} {access}", number(r.major), number(r.minor)),
        });
    }
    out.extend(DEFAULT_DEVICE_RULES.iter().map(|r| DeviceRule {
        allow: true,
        rule: r.to_string(),
    }));
    for d in devices {
        let kind = match d.kind.as_str() {
            "b" => 'b',
            "p" => continue,
            _ => 'c',
        };
        out.push(DeviceRule {
            allow: true,
            rule: format!("{kind} {}:{} rwm", d.major, d.minor),
        });
    }
    Ok(out)
}

/// Whether `key` is a sysctl name (dotted or slashed words, no `..`).
pub(super) fn sysctl_name(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        && !key.split(['.', '/']).any(|p| p.is_empty() || p == "..")
}

/// Whether the (dotted) sysctl `key` belongs to a namespace among `namespaces` (as runc
/// allows): any other would change the host.
pub(super) fn sysctl_namespaced(key: &str, namespaces: &[Namespace]) -> bool {
    let ipc = [
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.sem",
        "kernel.shmall",
        "kernel.shmmax",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
    ];
    ((ipc.contains(&key) || key.starts_with("fs.mqueue.")) && namespaces.contains(&Namespace::Ipc))
        || (key.starts_with("net.") && namespaces.contains(&Namespace::Net))
        || (matches!(key, "kernel.hostname" | "kernel.domainname")
            && namespaces.contains(&Namespace::Uts))
}

/// `linux.sysctl` (already checked) as writes in the container.
pub(super) fn sysctls(sysctl: &BTreeMap<String, String>) -> Vec<MountOp> {
    sysctl
        .iter()
        .map(|(key, value)| MountOp::Sysctl {
            key: key.replace('/', "."),
            value: value.clone(),
        })
        .collect()
}

/// `linux.seccomp`: unconfined when absent; a profile that does not compile is refused.
pub(super) fn seccomp(
    value: Option<&serde_json::Value>,
    bundle: &Path,
) -> Result<SeccompProfile, ConvertError> {
    let Some(value) = value else {
        return Ok(SeccompProfile::Unconfined);
    };
    let parsed =
        serde_json::from_value(value.clone()).map_err(|e| bad("linux.seccomp", e.to_string()))?;
    let profile = SeccompProfile::Oci {
        path: bundle.join("config.json"),
        spec: parsed,
    };
    crate::security::seccomp::compile(&profile).map_err(|e| bad("linux.seccomp", e.to_string()))?;
    Ok(profile)
}

/// The range of cgroup v1 `cpu.shares`.
const CPU_SHARES_MIN: u64 = 2;
const CPU_SHARES_MAX: u64 = 262_144;

/// A controller file with the same value on v1 and v2 (where each has one).
fn file(v1: Option<&str>, v2: Option<&str>, value: i64) -> CgroupFile {
    CgroupFile {
        v1: v1.map(|n| (n.to_string(), value.to_string())),
        v2: v2.map(|n| (n.to_string(), value.to_string())),
    }
}

/// `linux.resources` as cgroup limits and files.
pub(super) fn resources(r: Option<&spec::Resources>) -> Result<Resources, ConvertError> {
    let mut out = Resources::default();
    let Some(r) = r else { return Ok(out) };
    if let Some(m) = &r.memory {
        if let Some(limit) = m.limit.filter(|l| *l > 0) {
            out.memory = Some(limit as u64);
        }
        if let Some(r) = m.reservation.filter(|v| *v > 0) {
            out.files.push(file(
                Some("memory.soft_limit_in_bytes"),
                Some("memory.low"),
                r,
            ));
        }
        // Memory plus swap (OCI's meaning, v1's memsw); v2 counts the swap alone.
        match (m.swap.filter(|v| *v != 0), m.limit.filter(|l| *l > 0)) {
            (Some(-1), _) => out.files.push(CgroupFile {
                v1: Some(("memory.memsw.limit_in_bytes".into(), "-1".into())),
                v2: Some(("memory.swap.max".into(), "max".into())),
            }),
            (Some(swap), limit) if swap > 0 => out.files.push(CgroupFile {
                v1: Some(("memory.memsw.limit_in_bytes".into(), swap.to_string())),
                v2: limit.map(|l| ("memory.swap.max".into(), (swap - l).max(0).to_string())),
            }),
            _ => {}
        }
        if let Some(s) = m.swappiness.filter(|s| *s <= 100) {
            out.files
                .push(file(Some("memory.swappiness"), None, s as i64));
        }
        if m.disable_oom_killer == Some(true) {
            out.files.push(file(Some("memory.oom_control"), None, 1));
        }
        // `kernel`, `kernelTCP`: deprecated kernel-memory limits, ignored (runc on this
        // kernel leaves them unset too).
    }
    if let Some(c) = &r.cpu {
        if let Some(quota) = c.quota.filter(|q| *q > 0) {
            let period = c.period.filter(|p| *p > 0).unwrap_or(100_000);
            out.cpu_milli = Some(((quota as u64) * 1000 / period).max(10));
            // The exact values (cpu_milli is what the determinism layer reports).
            out.files
                .push(file(Some("cpu.cfs_period_us"), None, period as i64));
            out.files.push(file(Some("cpu.cfs_quota_us"), None, quota));
            out.files.push(CgroupFile {
                v1: None,
                v2: Some(("cpu.max".into(), format!("{quota} {period}"))),
            });
        }
        for (value, v1, v2) in [
            (c.cpus.as_deref(), "cpuset.cpus", "cpuset.cpus"),
            (c.mems.as_deref(), "cpuset.mems", "cpuset.mems"),
        ] {
            if let Some(v) = value.filter(|v| !v.is_empty()) {
                out.files.push(CgroupFile {
                    v1: Some((v1.into(), v.into())),
                    v2: Some((v2.into(), v.into())),
                });
            }
        }
        // Real-time scheduling budget (v1 with CONFIG_RT_GROUP_SCHED): the period first.
        if let Some(p) = c.realtime_period.filter(|v| *v > 0) {
            out.files
                .push(file(Some("cpu.rt_period_us"), None, p as i64));
        }
        if let Some(r) = c.realtime_runtime.filter(|v| *v != 0) {
            out.files.push(file(Some("cpu.rt_runtime_us"), None, r));
        }
        if let Some(b) = c.burst.filter(|v| *v > 0) {
            out.files.push(file(
                Some("cpu.cfs_burst_us"),
                Some("cpu.max.burst"),
                b as i64,
            ));
        }
        if let Some(i) = c.idle.filter(|v| *v != 0) {
            out.files.push(file(None, Some("cpu.idle"), i));
        }
        // 0 is unset (as runc reads it); else clamped to the kernel's range, as v1 does.
        out.cpu_shares = c
            .shares
            .filter(|s| *s > 0)
            .map(|s| s.clamp(CPU_SHARES_MIN, CPU_SHARES_MAX));
    }
    if let Some(p) = &r.pids {
        if p.limit > 0 {
            out.pids = Some(p.limit as u64);
        }
    }
    super::cgroup_fields::add(r, &mut out)?;
    Ok(out)
}
