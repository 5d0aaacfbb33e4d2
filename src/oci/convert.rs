//! An OCI bundle's `config.json` resolved into a [`Plan`] (the same value `reprorun exec`
//! resolves to) plus what only the lifecycle needs (hooks, cgroup path, annotations).
//! Pure: reads the bundle's files, changes nothing. Every field reprorun cannot honour is
//! refused here with its JSON path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::spec::{self, Spec};
use crate::determinism::clock::{self, ClockMode, ClockPlan, DateChoice, PRELOAD_PATH, RUN_DIR};
use crate::determinism::{EnvProfile, RandomMode, DEFAULT_EPOCH};
use crate::plan::{
    IdMap, MountOp, Namespace, NsJoin, ParentMaps, Plan, ProcessUser, DEFAULT_DOMAINNAME,
    DEFAULT_HOSTNAME,
};
use crate::security::{CapSets, Resources, Rlimit, SeccompProfile, Security};

/// Annotation keys reprorun reads (all under this prefix).
pub const ANNOTATION_PREFIX: &str = "org.reprorun.";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConvertError {
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> ConvertError {
    ConvertError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

fn unsupported(field: &str) -> ConvertError {
    bad(
        field,
        "not supported by reprorun; remove it from the config (see spec/oci.md)",
    )
}

/// The determinism settings a container asked for through annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Determinism {
    pub enabled: bool,
    pub date: DateChoice,
    pub clock: ClockMode,
    pub seed: u64,
    pub random: RandomMode,
    pub cpus: u32,
}

impl Default for Determinism {
    fn default() -> Self {
        Determinism {
            enabled: true,
            date: DateChoice::Pinned(DEFAULT_EPOCH),
            clock: ClockMode::StartAt,
            seed: 0,
            random: RandomMode::Seeded,
            cpus: crate::determinism::identity::DEFAULT_CPUS,
        }
    }
}

/// Reads the `org.reprorun.*` annotations; an unknown key under the prefix is an error (a
/// typo would otherwise silently leave a pin at its default).
pub fn determinism(annotations: &BTreeMap<String, String>) -> Result<Determinism, ConvertError> {
    let mut d = Determinism::default();
    for (key, value) in annotations {
        let Some(name) = key.strip_prefix(ANNOTATION_PREFIX) else {
            continue;
        };
        let field = format!("annotations.{key}");
        match name {
            "determinism" => {
                d.enabled = match value.as_str() {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => return Err(bad(field, "expected on or off")),
                }
            }
            "date" => {
                d.date = clock::parse_date_choice(value).map_err(|e| bad(&field, e.to_string()))?
            }
            "clock" => {
                d.clock = clock::parse_clock_mode(value).map_err(|e| bad(&field, e.to_string()))?
            }
            "seed" => {
                d.seed = value
                    .parse()
                    .map_err(|_| bad(&field, "expected a non-negative integer"))?
            }
            "random" => {
                d.random = match value.as_str() {
                    "seeded" => RandomMode::Seeded,
                    "real" => RandomMode::Real,
                    _ => return Err(bad(field, "expected seeded or real")),
                }
            }
            "cpus" => {
                d.cpus = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(&field, "expected a positive number of CPUs"))?
            }
            _ => return Err(bad(
                field,
                "unknown reprorun annotation; known: determinism, date, clock, seed, random, cpus",
            )),
        }
    }
    Ok(d)
}

/// A container resolved from its bundle.
#[derive(Debug, Clone)]
pub struct Container {
    pub plan: Plan,
    pub hooks: spec::Hooks,
    /// `linux.cgroupsPath`, when given.
    pub cgroups_path: Option<String>,
    pub annotations: BTreeMap<String, String>,
}

/// Resolves `spec` (read from `bundle`) into a container. `cpus_available` bounds the
/// `org.reprorun.cpus` annotation.
pub fn resolve(spec: &Spec, bundle: &Path, cpus_available: u32) -> Result<Container, ConvertError> {
    if !spec.oci_version.starts_with("1.") {
        return Err(bad(
            "ociVersion",
            format!("{:?}: reprorun reads runtime-spec 1.x", spec.oci_version),
        ));
    }
    let process = spec
        .process
        .as_ref()
        .ok_or_else(|| bad("process", "missing; a container needs a process to run"))?;
    check_process(process)?;
    let root = spec
        .root
        .as_ref()
        .ok_or_else(|| bad("root", "missing; name the root filesystem directory"))?;
    let rootfs = bundle_path(bundle, &root.path);
    // Resolved now: the executor reaches host paths from a staging root, where an absolute
    // symbolic link would point elsewhere.
    let rootfs = match std::fs::canonicalize(&rootfs) {
        Ok(p) if p.is_dir() => p,
        _ => {
            return Err(bad(
                "root.path",
                format!("{}: not a directory", rootfs.display()),
            ))
        }
    };
    let linux = spec.linux.clone().unwrap_or_default();
    let det = determinism(&spec.annotations)?;
    if det.cpus > cpus_available {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}cpus"),
            format!("at most {cpus_available} (the CPUs this process may use)"),
        ));
    }

    // Namespaces: new ones, and joined ones.
    let mut namespaces = Vec::new();
    let mut join = Vec::new();
    for (i, ns) in linux.namespaces.iter().enumerate() {
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
            Some(p) if !p.is_empty() => {
                if matches!(kind, Namespace::Time | Namespace::Pid | Namespace::User) {
                    return Err(bad(
                        field,
                        format!("joining a {} namespace by path is not supported (reprorun's init must be pid 1 of a new pid namespace, in the caller's user namespace)", ns.kind),
                    ));
                }
                join.push(NsJoin {
                    ns: kind,
                    path: PathBuf::from(p),
                })
            }
            _ => namespaces.push(kind),
        }
    }
    if !namespaces.contains(&Namespace::Pid) {
        return Err(bad(
            "linux.namespaces",
            "a new pid namespace is required (init must be its pid 1, so that killing it ends every process)",
        ));
    }
    if !namespaces.contains(&Namespace::Mount) {
        return Err(bad(
            "linux.namespaces",
            "a new mount namespace is required (reprorun builds the root in one)",
        ));
    }
    if det.enabled && !namespaces.contains(&Namespace::Time) {
        // The workload's uptime clocks start at a pinned value.
        namespaces.push(Namespace::Time);
    }
    let has_uts = namespaces.contains(&Namespace::Uts);
    let hostname = match &spec.hostname {
        Some(h) if !h.is_empty() && !has_uts => {
            return Err(bad(
                "hostname",
                "set, but no new uts namespace is asked for",
            ))
        }
        Some(h) if !h.is_empty() => h.clone(),
        _ => DEFAULT_HOSTNAME.into(),
    };
    let domainname = spec
        .domainname
        .clone()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| DEFAULT_DOMAINNAME.into());

    let parent_maps = if namespaces.contains(&Namespace::User) {
        if linux.uid_mappings.is_empty() || linux.gid_mappings.is_empty() {
            return Err(bad(
                "linux.uidMappings",
                "a new user namespace needs uidMappings and gidMappings",
            ));
        }
        let maps = |m: &[spec::IdMapping]| {
            m.iter()
                .map(|m| IdMap {
                    inside: m.container_id,
                    outside: m.host_id,
                    count: m.size,
                })
                .collect::<Vec<_>>()
        };
        Some(ParentMaps {
            uid: maps(&linux.uid_mappings),
            gid: maps(&linux.gid_mappings),
        })
    } else {
        if !linux.uid_mappings.is_empty() || !linux.gid_mappings.is_empty() {
            return Err(bad(
                "linux.uidMappings",
                "given without a new user namespace",
            ));
        }
        None
    };
    for (set, field) in [
        (linux.personality.is_some(), "linux.personality"),
        (linux.intel_rdt.is_some(), "linux.intelRdt"),
        (linux.time_offsets.is_some(), "linux.timeOffsets"),
        (
            linux.mount_label.as_deref().is_some_and(|l| !l.is_empty()),
            "linux.mountLabel",
        ),
    ] {
        if set {
            return Err(unsupported(field));
        }
    }

    // Mounts, in the order the executor performs them.
    let seeded = det.enabled && det.random == RandomMode::Seeded;
    let mut mounts = vec![MountOp::RootBind {
        src: rootfs.clone(),
    }];
    let mut dev_tmpfs = false;
    for (i, m) in spec.mounts.iter().enumerate() {
        let op = mount_op(m, bundle).map_err(|reason| bad(format!("mounts[{i}]"), reason))?;
        if matches!(&op, MountOp::Fs { fstype, dest, .. } if fstype == "tmpfs" && dest == Path::new("/dev"))
        {
            dev_tmpfs = true;
        }
        mounts.push(op);
    }
    if seeded && !dev_tmpfs {
        return Err(bad(
            "mounts",
            "seeded entropy needs a tmpfs mounted at /dev (reprorun puts its seeded /dev/urandom there); add one, or set the annotation org.reprorun.random=real",
        ));
    }
    mounts.extend(default_devices(seeded, dev_tmpfs));
    for (i, d) in linux.devices.iter().enumerate() {
        let field = format!("linux.devices[{i}]");
        let kind = match d.kind.as_str() {
            "c" | "u" => 'c',
            "b" => 'b',
            "p" => 'p',
            other => return Err(bad(field, format!("unknown device type {other:?}"))),
        };
        let dest = absolute_dest(&d.path).map_err(|r| bad(&field, r))?;
        mounts.push(MountOp::Device {
            dest,
            kind,
            major: d.major,
            minor: d.minor,
            mode: d.file_mode.unwrap_or(0o666),
            uid: d.uid.unwrap_or(0),
            gid: d.gid.unwrap_or(0),
        });
    }
    for (key, value) in &linux.sysctl {
        let ok = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
            && !key.split(['.', '/']).any(|p| p.is_empty() || p == "..");
        if !ok {
            return Err(bad(format!("linux.sysctl.{key}"), "not a sysctl name"));
        }
        // Only sysctls of the container's own namespaces (as runc allows): anything else
        // would change the host.
        let k = key.replace('/', ".");
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
        let namespaced = ((ipc.contains(&k.as_str()) || k.starts_with("fs.mqueue."))
            && namespaces.contains(&Namespace::Ipc))
            || (k.starts_with("net.") && namespaces.contains(&Namespace::Net))
            || (matches!(k.as_str(), "kernel.hostname" | "kernel.domainname")
                && namespaces.contains(&Namespace::Uts));
        if !namespaced {
            return Err(bad(
                format!("linux.sysctl.{key}"),
                "not a sysctl of a namespace the container has of its own; it would change the host",
            ));
        }
        mounts.push(MountOp::Sysctl {
            key: key.replace('/', "."),
            value: value.clone(),
        });
    }
    let identity = crate::plan::pinned_identity(det.cpus, &hostname, &domainname);
    let clock = match (det.enabled, det.date) {
        (false, _) | (true, DateChoice::Now) => None,
        (true, DateChoice::Pinned(epoch)) => Some(ClockPlan {
            epoch,
            mode: det.clock,
        }),
    };
    if det.enabled {
        mounts.extend(
            identity
                .files(clock.map_or(0, |c| c.epoch - crate::plan::UPTIME_START_SECS))
                .into_iter()
                .map(|(dest, contents)| MountOp::File {
                    dest: dest.into(),
                    contents,
                }),
        );
        if clock.is_some() || seeded {
            mounts.push(MountOp::Tmpfs {
                dest: RUN_DIR.into(),
                mode: 0o755,
                size: Some(1 << 20),
            });
            mounts.push(MountOp::RuntimeFiles {
                dir: RUN_DIR.into(),
                clock,
                seed: seeded.then_some(det.seed),
            });
            // The container's root is writable: /etc/ld.so.preload is one generated file
            // bound over it (the image's own lines kept), not an overlay over all of /etc
            // (engines bind /etc/hosts and friends into it).
            // Read inside the rootfs only: an image's link to a host file is not followed out.
            let existing = std::fs::File::open(&rootfs)
                .ok()
                .and_then(|root| {
                    crate::sys::open_in_root(&root, Path::new("etc/ld.so.preload")).ok()
                })
                .and_then(|f| {
                    use std::io::Read;
                    let mut s = String::new();
                    f.take(64 * 1024).read_to_string(&mut s).ok().map(|_| s)
                })
                .unwrap_or_default();
            let mut contents = format!("{PRELOAD_PATH}\n");
            for line in existing.lines().filter(|l| !l.trim().is_empty()) {
                contents.push_str(line);
                contents.push('\n');
            }
            mounts.push(MountOp::File {
                dest: "/etc/ld.so.preload".into(),
                contents,
            });
            if !matches!(det.clock, ClockMode::Tick { .. }) {
                mounts.push(MountOp::Readonly {
                    dest: RUN_DIR.into(),
                });
            }
        }
    }
    for (i, p) in linux.masked_paths.iter().enumerate() {
        let dest = absolute_dest(p).map_err(|r| bad(format!("linux.maskedPaths[{i}]"), r))?;
        mounts.push(MountOp::Mask { dest });
    }
    for (i, p) in linux.readonly_paths.iter().enumerate() {
        let dest = absolute_dest(p).map_err(|r| bad(format!("linux.readonlyPaths[{i}]"), r))?;
        mounts.push(MountOp::ReadonlyPath { dest });
    }
    if let Some(p) = linux
        .rootfs_propagation
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        match crate::plan::mounts::flag_word(p) {
            Some(crate::plan::mounts::FlagWord::Propagation(_)) => {
                mounts.push(MountOp::RootPropagation { flag: p.into() })
            }
            _ => {
                return Err(bad(
                    "linux.rootfsPropagation",
                    format!("{p:?}: expected private, rprivate, slave, rslave, shared, rshared, unbindable or runbindable"),
                ))
            }
        }
    }
    if root.readonly {
        mounts.push(MountOp::ReadonlyRoot);
    }

    // The environment: the config's, with reprorun's pins filling what it leaves unset.
    let mut env = if det.enabled {
        let epoch = clock.map_or_else(
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64)
            },
            |c| c.epoch,
        );
        EnvProfile::pinned(epoch, det.seed)
    } else {
        EnvProfile::empty()
    };
    for (i, entry) in process.env.iter().enumerate() {
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| bad(format!("process.env[{i}]"), "expected KEY=VALUE"))?;
        env.set(k, v)
            .map_err(|e| bad(format!("process.env[{i}]"), e.to_string()))?;
    }

    let (caps, rlimits) = process_privilege(process, parent_maps.is_some())?;
    let seccomp = match &linux.seccomp {
        None => SeccompProfile::Unconfined,
        Some(value) => {
            let parsed = serde_json::from_value(value.clone())
                .map_err(|e| bad("linux.seccomp", e.to_string()))?;
            let profile = SeccompProfile::Oci {
                path: bundle.join("config.json"),
                spec: parsed,
            };
            crate::security::seccomp::compile(&profile)
                .map_err(|e| bad("linux.seccomp", e.to_string()))?;
            profile
        }
    };
    let resources = resources(linux.resources.as_ref())?;

    let plan = Plan {
        namespaces,
        mounts,
        hostname,
        domainname,
        cwd: PathBuf::from(&process.cwd),
        host_workdir: bundle.to_path_buf(),
        env: env.to_vec(),
        umask: process.user.umask.unwrap_or(0o022),
        clock,
        seed: det.seed,
        random: if det.enabled {
            det.random
        } else {
            RandomMode::Real
        },
        identity,
        security: Security {
            seccomp,
            cap_add: Vec::new(),
            preserve_fds: 0,
            rlimits,
            caps: Some(caps),
        },
        resources,
        process_user: Some(ProcessUser {
            uid: process.user.uid,
            gid: process.user.gid,
            additional_gids: process.user.additional_gids.clone(),
        }),
        join,
        oom_score_adj: process.oom_score_adj,
        terminal: process.terminal,
        parent_maps,
        intercept: det.enabled,
        ..Plan::base(rootfs, process.args.clone())
    };
    let mut hooks = spec.hooks.clone().unwrap_or_default();
    if !hooks.start_container.is_empty() {
        return Err(unsupported("hooks.startContainer"));
    }
    // `prestart` is the deprecated name of createRuntime.
    let prestart = std::mem::take(&mut hooks.prestart);
    hooks.create_runtime.splice(0..0, prestart);
    Ok(Container {
        plan,
        hooks,
        cgroups_path: match linux.cgroups_path.clone().filter(|p| !p.is_empty()) {
            Some(p)
                if p.contains(':')
                    || p.split('/').any(|c| c == ".." || c == ".")
                    || p.contains("//") =>
            {
                return Err(bad(
                    "linux.cgroupsPath",
                    format!("{p:?}: expected a cgroupfs path without '..' (systemd's slice:prefix:name form is not supported; use the engine's cgroupfs manager)"),
                ))
            }
            other => other,
        },
        annotations: spec.annotations.clone(),
    })
}

/// Refuses a process reprorun cannot run as asked (for `create` and `exec --process`).
pub fn check_process(process: &spec::Process) -> Result<(), ConvertError> {
    if process.args.is_empty() || process.args[0].is_empty() {
        return Err(bad("process.args", "empty; name the program to run"));
    }
    if !process.cwd.starts_with('/') {
        return Err(bad("process.cwd", "must be an absolute path"));
    }
    for (set, field) in [
        (process.scheduler.is_some(), "process.scheduler"),
        (process.io_priority.is_some(), "process.ioPriority"),
        (
            process.exec_cpu_affinity.is_some(),
            "process.execCPUAffinity",
        ),
        (process.command_line.is_some(), "process.commandLine"),
        (process.user.username.is_some(), "process.user.username"),
        (
            process
                .selinux_label
                .as_deref()
                .is_some_and(|l| !l.is_empty()),
            "process.selinuxLabel",
        ),
        (
            process
                .apparmor_profile
                .as_deref()
                .is_some_and(|l| !l.is_empty()),
            "process.apparmorProfile",
        ),
    ] {
        if set {
            return Err(unsupported(field));
        }
    }
    Ok(())
}

/// The capability sets and rlimits `process` asks for, checked (for `create` and
/// `exec --process`). Without a user namespace CAP_MKNOD is never granted.
pub fn process_privilege(
    process: &spec::Process,
    user_namespace: bool,
) -> Result<(CapSets, Vec<Rlimit>), ConvertError> {
    let mut caps = match &process.capabilities {
        None => CapSets::default(),
        Some(c) => {
            let names = |list: &[String], set: &str| -> Result<Vec<String>, ConvertError> {
                list.iter()
                    .map(|n| {
                        crate::security::capability(n).map_err(|_| {
                            bad(
                                format!("process.capabilities.{set}"),
                                format!("{n:?}: unknown capability"),
                            )
                        })
                    })
                    .collect()
            };
            CapSets {
                bounding: names(&c.bounding, "bounding")?,
                effective: names(&c.effective, "effective")?,
                permitted: names(&c.permitted, "permitted")?,
                inheritable: names(&c.inheritable, "inheritable")?,
                ambient: names(&c.ambient, "ambient")?,
            }
        }
    };
    if !user_namespace {
        // Without a user namespace, CAP_MKNOD would let the container make a node for a host
        // disk (there is no device cgroup): it is never granted.
        for set in [
            &mut caps.bounding,
            &mut caps.effective,
            &mut caps.permitted,
            &mut caps.inheritable,
            &mut caps.ambient,
        ] {
            set.retain(|c| c != "CAP_MKNOD");
        }
    }
    let mut rlimits = Vec::new();
    for (i, r) in process.rlimits.iter().enumerate() {
        let name = r
            .kind
            .strip_prefix("RLIMIT_")
            .map(|n| n.to_ascii_lowercase())
            .filter(|n| crate::security::rlimit(&format!("{n}=0")).is_ok())
            .ok_or_else(|| {
                bad(
                    format!("process.rlimits[{i}].type"),
                    format!("{:?}: unknown rlimit", r.kind),
                )
            })?;
        if r.soft > r.hard {
            return Err(bad(
                format!("process.rlimits[{i}]"),
                "soft limit above the hard limit",
            ));
        }
        let value = |v: u64| (v != u64::MAX).then_some(v);
        rlimits.push(Rlimit {
            name,
            soft: value(r.soft),
            hard: value(r.hard),
        });
    }
    Ok((caps, rlimits))
}

/// A path given in the config relative to the bundle.
fn bundle_path(bundle: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        bundle.join(p)
    }
}

/// A destination inside the container: absolute, without `..`.
fn absolute_dest(p: &str) -> Result<PathBuf, String> {
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err(format!("{p:?}: must be an absolute path"));
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("{p:?}: must not contain .."));
    }
    Ok(path.to_path_buf())
}

/// Filesystem types a mount may have.
const FS_TYPES: &[&str] = &["proc", "tmpfs", "sysfs", "devpts", "mqueue"];

/// One entry of `mounts` as a mount operation.
fn mount_op(m: &spec::Mount, bundle: &Path) -> Result<MountOp, String> {
    if !m.uid_mappings.is_empty() || !m.gid_mappings.is_empty() {
        return Err("idmapped mounts (uidMappings/gidMappings) are not supported".into());
    }
    let dest = absolute_dest(&m.destination)?;
    let mut flags = Vec::new();
    let mut data = Vec::new();
    let (mut bind, mut recursive) = (false, false);
    for o in &m.options {
        match o.as_str() {
            "bind" => bind = true,
            "rbind" => {
                bind = true;
                recursive = true
            }
            w if crate::plan::mounts::flag_word(w).is_some() => flags.push(w.to_string()),
            "remount" => return Err("option \"remount\" is not supported".into()),
            "tmpcopyup" | "idmap" | "ridmap" | "copy-symlink" => {
                return Err(format!("option {o:?} is not supported"))
            }
            other => data.push(other.to_string()),
        }
    }
    let kind = m.kind.as_deref().unwrap_or(if bind { "bind" } else { "" });
    if bind || kind == "bind" {
        if !data.is_empty() {
            return Err(format!("bind mount option {:?} is not understood", data[0]));
        }
        let src = m.source.as_deref().ok_or("a bind mount needs a source")?;
        let src = bundle_path(bundle, src);
        let src = std::fs::canonicalize(&src)
            .map_err(|_| format!("source {}: no such file or directory", src.display()))?;
        return Ok(MountOp::FlagBind {
            src,
            dest,
            recursive,
            flags,
        });
    }
    if kind == "cgroup" || kind == "cgroup2" {
        // The host's cgroup tree, read-only (documented): reprorun does not build a
        // per-container cgroup view.
        if !flags.iter().any(|f| f == "ro") {
            flags.push("ro".into());
        }
        return Ok(MountOp::FlagBind {
            src: PathBuf::from("/sys/fs/cgroup"),
            dest,
            recursive: true,
            flags,
        });
    }
    if !FS_TYPES.contains(&kind) {
        return Err(format!(
            "mount type {kind:?} is not supported; supported: bind, cgroup, {}",
            FS_TYPES.join(", ")
        ));
    }
    Ok(MountOp::Fs {
        fstype: kind.to_string(),
        source: m.source.clone().unwrap_or_else(|| kind.to_string()),
        dest,
        flags,
        data: data.join(","),
    })
}

/// The device nodes every container gets (runc's list), as binds of the host's nodes; with
/// seeded entropy /dev/urandom and /dev/random are the seeded FIFO. Only where /dev is a
/// fresh tmpfs (else the root filesystem's own /dev is used as it is).
fn default_devices(seeded: bool, dev_tmpfs: bool) -> Vec<MountOp> {
    if !dev_tmpfs {
        return Vec::new();
    }
    let mut ops = crate::plan::device_nodes(seeded);
    for (target, dest) in [
        ("pts/ptmx", "/dev/ptmx"),
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
    ops
}

/// `linux.resources` as cgroup limits; what cannot be enforced is refused.
fn resources(r: Option<&spec::Resources>) -> Result<Resources, ConvertError> {
    let mut out = Resources::default();
    let Some(r) = r else { return Ok(out) };
    if let Some(m) = &r.memory {
        if let Some(limit) = m.limit.filter(|l| *l > 0) {
            out.memory = Some(limit as u64);
        }
        for (set, field) in [
            (m.reservation.is_some_and(|v| v > 0), "reservation"),
            (m.kernel.is_some_and(|v| v > 0), "kernel"),
            (m.kernel_tcp.is_some_and(|v| v > 0), "kernelTCP"),
            (m.disable_oom_killer == Some(true), "disableOOMKiller"),
        ] {
            if set {
                return Err(unsupported(&format!("linux.resources.memory.{field}")));
            }
        }
    }
    if let Some(c) = &r.cpu {
        if let Some(quota) = c.quota.filter(|q| *q > 0) {
            let period = c.period.filter(|p| *p > 0).unwrap_or(100_000);
            out.cpu_milli = Some(((quota as u64) * 1000 / period).max(10));
        }
        for (set, field) in [
            (c.shares.is_some_and(|v| v > 0), "shares"),
            (c.burst.is_some_and(|v| v > 0), "burst"),
            (
                c.realtime_runtime.is_some_and(|v| v != 0),
                "realtimeRuntime",
            ),
            (c.realtime_period.is_some_and(|v| v > 0), "realtimePeriod"),
            (c.cpus.as_deref().is_some_and(|v| !v.is_empty()), "cpus"),
            (c.mems.as_deref().is_some_and(|v| !v.is_empty()), "mems"),
            (c.idle.is_some_and(|v| v != 0), "idle"),
        ] {
            if set {
                return Err(unsupported(&format!("linux.resources.cpu.{field}")));
            }
        }
    }
    if let Some(p) = &r.pids {
        if p.limit > 0 {
            out.pids = Some(p.limit as u64);
        }
    }
    for (set, field) in [
        (r.block_io.is_some(), "blockIO"),
        (
            r.hugepage_limits
                .as_ref()
                .is_some_and(|v| v.as_array().map_or(true, |a| !a.is_empty())),
            "hugepageLimits",
        ),
        (r.network.is_some(), "network"),
        (r.rdma.is_some(), "rdma"),
        (r.unified.as_ref().is_some_and(|u| !u.is_empty()), "unified"),
    ] {
        if set {
            return Err(unsupported(&format!("linux.resources.{field}")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
