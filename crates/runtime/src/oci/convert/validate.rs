//! What reprorun refuses in a bundle's config, checked before anything is built. Every
//! refusal is one line naming the JSON path. [`validate`] reads the sections in the order a
//! config is written (so the first problem named is the same whatever else is wrong) and
//! returns them parsed as a [`Checked`] config, which the builder assembles without failing.

use std::path::{Path, PathBuf};

use super::annotations::{self, Determinism, ANNOTATION_PREFIX};
use super::{bad, bundle_path, idmap, linux, mounts, process, unsupported, ConvertError};
use crate::oci::spec::{self, Spec};
use crate::plan::{MountOp, Namespace, NsJoin, ParentMaps, DEFAULT_DOMAINNAME, DEFAULT_HOSTNAME};
use crate::security::{CapSets, Resources, Rlimit, SeccompProfile};

/// A config reprorun can run, its sections parsed.
#[derive(Debug)]
pub(crate) struct Checked<'a> {
    pub process: &'a spec::Process,
    /// `root.path`, resolved (the executor reaches host paths from a staging root, where an
    /// absolute symbolic link would point elsewhere).
    pub rootfs: PathBuf,
    pub root_readonly: bool,
    pub det: Determinism,
    pub namespaces: Vec<Namespace>,
    pub join: Vec<NsJoin>,
    pub hostname: String,
    pub domainname: String,
    pub parent_maps: Option<ParentMaps>,
    /// The config's `mounts`, in order.
    pub mounts: Vec<MountOp>,
    /// Whether /dev is a fresh tmpfs among `mounts`.
    pub dev_tmpfs: bool,
    pub devices: Vec<MountOp>,
    pub sysctls: Vec<MountOp>,
    pub masked: Vec<MountOp>,
    pub readonly: Vec<MountOp>,
    pub propagation: Option<MountOp>,
    pub env: Vec<(String, String)>,
    pub caps: CapSets,
    pub rlimits: Vec<Rlimit>,
    pub seccomp: SeccompProfile,
    pub resources: Resources,
    pub hooks: spec::Hooks,
    pub cgroups_path: Option<String>,
    pub scheduling: Option<crate::plan::sched::Scheduling>,
    pub personality: Option<u32>,
}

/// Checks `spec` (read from `bundle`); `cpus_available` bounds the `org.reprorun.cpus`
/// annotation.
pub(crate) fn validate<'a>(
    spec: &'a Spec,
    bundle: &Path,
    cpus_available: u32,
) -> Result<Checked<'a>, ConvertError> {
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
    let rootfs = rootfs(bundle, &root.path)?;
    let linux = spec.linux.clone().unwrap_or_default();
    let det = annotations::determinism(&spec.annotations, &process.env)?;
    if det.cpus > cpus_available {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}cpus"),
            format!("at most {cpus_available} (the CPUs this process may use)"),
        ));
    }
    let (namespaces, join) = linux::namespaces(&linux.namespaces)?;
    required_namespaces(&namespaces, &join, &linux)?;
    if det.egress.is_some() && !namespaces.contains(&Namespace::Net) {
        return Err(bad(
            format!("annotations.{ANNOTATION_PREFIX}net.allow"),
            "needs a network namespace of the container's own: a linux.namespaces entry of type network without a path",
        ));
    }
    let uts_joined = join.iter().any(|j| j.ns == Namespace::Uts);
    let (hostname, domainname) = names(spec, &namespaces, uts_joined)?;
    let parent_maps = id_mappings(&linux, &namespaces)?;
    unsupported_linux(&linux)?;
    let userns = match (&parent_maps, join.iter().find(|j| j.ns == Namespace::User)) {
        (Some(maps), _) => idmap::Userns::Maps(maps),
        (None, Some(j)) => idmap::Userns::Joined(&j.path),
        (None, None) => idmap::Userns::None,
    };
    let (mounts, dev_tmpfs) = mounts::spec_mounts(&spec.mounts, bundle, userns)?;
    idmap::own_mount_namespace(&spec.mounts, &join)?;
    if det.seeded_dev() && !dev_tmpfs {
        return Err(bad(
            "mounts",
            "a seeded /dev/urandom (org.reprorun.dev-urandom=seeded) needs a tmpfs mounted at /dev (reprorun puts it there); add one, or leave the annotation out",
        ));
    }
    let devices = linux::devices(&linux.devices)?;
    if !linux.sysctl.is_empty() {
        let own = super::joined::own_namespaces(&namespaces, &join);
        for key in linux.sysctl.keys() {
            check_sysctl(key, &own)?;
        }
    }
    let masked = mounts::path_ops(&linux.masked_paths, "linux.maskedPaths", |dest| {
        MountOp::Mask { dest }
    })?;
    let readonly = mounts::path_ops(&linux.readonly_paths, "linux.readonlyPaths", |dest| {
        MountOp::ReadonlyPath { dest }
    })?;
    let propagation = mounts::root_propagation(linux.rootfs_propagation.as_deref())?;
    let env = process::env(process)?;
    let (caps, rlimits) = process::process_privilege(process, det.force_no_new_privs)?;
    let seccomp = linux::seccomp(linux.seccomp.as_ref(), bundle)?;
    let mut resources = linux::resources(linux.resources.as_ref())?;
    let rules = linux.resources.as_ref().map_or(&[][..], |r| &r.devices[..]);
    resources.devices = linux::device_rules(rules, &linux.devices)?;
    let hooks = hooks(spec)?;
    let cgroups_path = cgroups_path(&linux)?;
    let scheduling = super::sched::scheduling(process, false)?;
    let personality = linux::personality(linux.personality.as_ref())?;
    Ok(Checked {
        process,
        rootfs,
        root_readonly: root.readonly,
        det,
        namespaces,
        join,
        hostname,
        domainname,
        parent_maps,
        mounts,
        dev_tmpfs,
        devices,
        sysctls: linux::sysctls(&linux.sysctl),
        masked,
        readonly,
        propagation,
        env,
        caps,
        rlimits,
        seccomp,
        resources,
        hooks,
        cgroups_path,
        scheduling,
        personality,
    })
}

/// `root.path` (relative to the bundle) resolved: it must be a directory.
fn rootfs(bundle: &Path, path: &str) -> Result<PathBuf, ConvertError> {
    let rootfs = bundle_path(bundle, path);
    match std::fs::canonicalize(&rootfs) {
        Ok(p) if p.is_dir() => Ok(p),
        _ => Err(bad(
            "root.path",
            format!("{}: not a directory", rootfs.display()),
        )),
    }
}

/// The root is built in a mount namespace of the container's own (new or joined by path:
/// as with runc, the root is then built there), or, with none, in the caller's, entered by
/// chroot (runc's behaviour: the config's mounts land in the caller's mount namespace). Like
/// runc, masked and read-only paths need a mount namespace of the container's own. (A pid
/// namespace may be new, joined or the caller's, as with runc: without one of its own,
/// `delete --force` and `kill --all` reach the container's processes through its cgroup.)
fn required_namespaces(
    namespaces: &[Namespace],
    join: &[NsJoin],
    linux: &spec::Linux,
) -> Result<(), ConvertError> {
    let joined = join.iter().any(|j| j.ns == Namespace::Mount);
    if namespaces.contains(&Namespace::Mount) || joined {
        return Ok(());
    }
    let field = match (
        linux.masked_paths.is_empty(),
        linux.readonly_paths.is_empty(),
    ) {
        (false, _) => "linux.maskedPaths",
        (_, false) => "linux.readonlyPaths",
        _ => return Ok(()),
    };
    Err(bad(
        field,
        "needs a mount namespace of the container's own (runc refuses it too: unable to restrict sys entries without a private MNT namespace)",
    ))
}

/// The host and domain names; a hostname needs a uts namespace of the container's own or
/// one joined by path (set there, as runc does; without names given, a joined one's are
/// left as they are: both empty here).
fn names(
    spec: &Spec,
    namespaces: &[Namespace],
    uts_joined: bool,
) -> Result<(String, String), ConvertError> {
    if uts_joined {
        let given = |v: &Option<String>| v.clone().unwrap_or_default();
        return Ok((given(&spec.hostname), given(&spec.domainname)));
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
    Ok((hostname, domainname))
}

/// Id mappings go with a new user namespace, and only with one.
fn id_mappings(
    linux: &spec::Linux,
    namespaces: &[Namespace],
) -> Result<Option<ParentMaps>, ConvertError> {
    let given = !linux.uid_mappings.is_empty() || !linux.gid_mappings.is_empty();
    if namespaces.contains(&Namespace::User) {
        if linux.uid_mappings.is_empty() || linux.gid_mappings.is_empty() {
            return Err(bad(
                "linux.uidMappings",
                "a new user namespace needs uidMappings and gidMappings",
            ));
        }
        Ok(Some(linux::parent_maps(linux)))
    } else if given {
        Err(bad(
            "linux.uidMappings",
            "given without a new user namespace",
        ))
    } else {
        Ok(None)
    }
}

/// Whether the host enforces SELinux labels. Where it does not, an SELinux label in the
/// config has nothing to apply to and is ignored (as runc's and crun's label calls are
/// no-ops there); where it does, reprorun refuses it (it cannot set labels).
fn selinux_enabled() -> bool {
    Path::new("/sys/fs/selinux/enforce").exists()
}

/// `linux` fields reprorun has no way to honour.
fn unsupported_linux(linux: &spec::Linux) -> Result<(), ConvertError> {
    for (set, field) in [
        (linux.intel_rdt.is_some(), "linux.intelRdt"),
        (linux.time_offsets.is_some(), "linux.timeOffsets"),
        (
            linux.mount_label.as_deref().is_some_and(|l| !l.is_empty()) && selinux_enabled(),
            "linux.mountLabel",
        ),
    ] {
        if set {
            return Err(unsupported(field));
        }
    }
    Ok(())
}

/// A sysctl must be named as one and belong to a namespace the container has of its own
/// (`own`: new, or joined by path and not the host's; as runc allows): anything else would
/// change the host.
fn check_sysctl(key: &str, namespaces: &[Namespace]) -> Result<(), ConvertError> {
    if !linux::sysctl_name(key) {
        return Err(bad(format!("linux.sysctl.{key}"), "not a sysctl name"));
    }
    if !linux::sysctl_namespaced(&key.replace('/', "."), namespaces) {
        return Err(bad(
            format!("linux.sysctl.{key}"),
            "not a sysctl of a namespace the container has of its own; it would change the host",
        ));
    }
    Ok(())
}

/// The hooks, `prestart` (the deprecated name of createRuntime) first among createRuntime;
/// startContainer hooks are refused.
fn hooks(spec: &Spec) -> Result<spec::Hooks, ConvertError> {
    let mut hooks = spec.hooks.clone().unwrap_or_default();
    if !hooks.start_container.is_empty() {
        return Err(unsupported("hooks.startContainer"));
    }
    let prestart = std::mem::take(&mut hooks.prestart);
    hooks.create_runtime.splice(0..0, prestart);
    Ok(hooks)
}

/// `linux.cgroupsPath`, when given: a cgroupfs path without `..`.
fn cgroups_path(linux: &spec::Linux) -> Result<Option<String>, ConvertError> {
    match linux.cgroups_path.clone().filter(|p| !p.is_empty()) {
        Some(p)
            if p.contains(':')
                || p.split('/').any(|c| c == ".." || c == ".")
                || p.contains("//") =>
        {
            Err(bad(
                "linux.cgroupsPath",
                format!("{p:?}: expected a cgroupfs path without '..' (systemd's slice:prefix:name form needs --systemd-cgroup)"),
            ))
        }
        other => Ok(other),
    }
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
        (process.user.username.is_some(), "process.user.username"),
        (
            process
                .selinux_label
                .as_deref()
                .is_some_and(|l| !l.is_empty())
                && selinux_enabled(),
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
