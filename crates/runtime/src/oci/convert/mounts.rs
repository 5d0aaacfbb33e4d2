//! `mounts`, `linux.maskedPaths`/`readonlyPaths`, `linux.rootfsPropagation`, and the mounts
//! reprorun adds itself (device nodes in a fresh /dev, the determinism layer's runtime files).

use std::path::{Path, PathBuf};

use super::idmap::{mount_idmap, Userns};
use super::{bad, bundle_path, ConvertError};
use crate::determinism::clock::{ClockMode, ClockPlan, PRELOAD_PATH};
use crate::oci::spec;
use crate::plan::MountOp;

/// Filesystem types a mount may have.
const FS_TYPES: &[&str] = &["proc", "tmpfs", "sysfs", "devpts", "mqueue"];

/// A destination inside the container: absolute, without `..`.
pub(super) fn absolute_dest(p: &str) -> Result<PathBuf, String> {
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

/// The config's `mounts` as mount operations, and whether one of them is a tmpfs at /dev.
/// `userns`: the container's user namespace (a bare `idmap` option takes its mapping).
pub(super) fn spec_mounts(
    mounts: &[spec::Mount],
    bundle: &Path,
    userns: Userns,
) -> Result<(Vec<MountOp>, bool), ConvertError> {
    let mut ops = Vec::new();
    let mut dev_tmpfs = false;
    for (i, m) in mounts.iter().enumerate() {
        let op =
            mount_op(m, bundle, userns).map_err(|reason| bad(format!("mounts[{i}]"), reason))?;
        if matches!(&op, MountOp::Fs { fstype, dest, .. } if fstype == "tmpfs" && dest == Path::new("/dev"))
        {
            dev_tmpfs = true;
        }
        ops.push(op);
    }
    Ok((ops, dev_tmpfs))
}

/// One entry of `mounts` as a mount operation.
fn mount_op(m: &spec::Mount, bundle: &Path, userns: Userns) -> Result<MountOp, String> {
    let dest = absolute_dest(&m.destination)?;
    let mut flags = Vec::new();
    let mut data = Vec::new();
    let (mut bind, mut recursive) = (false, false);
    // `idmap` (Some(false)) or `ridmap` (Some(true)); the recursive one wins.
    let mut idmap_option = None;
    for o in &m.options {
        match o.as_str() {
            "bind" => bind = true,
            "rbind" => {
                bind = true;
                recursive = true
            }
            "idmap" => idmap_option = Some(idmap_option == Some(true)),
            "ridmap" => idmap_option = Some(true),
            w if w.starts_with("idmap=") || w.starts_with("ridmap=") => {
                return Err(format!(
                    "option {o:?} (crun's inline mapping) is not supported; give uidMappings and gidMappings"
                ))
            }
            w if crate::plan::mounts::flag_word(w).is_some() => flags.push(w.to_string()),
            "remount" => return Err("option \"remount\" is not supported".into()),
            // The directory's contents copied into the new tmpfs (podman's --tmpfs and
            // --read-only): a word the executor reads, no mount flag.
            "tmpcopyup" if m.kind.as_deref() == Some("tmpfs") => flags.push(o.clone()),
            "tmpcopyup" | "copy-symlink" => {
                return Err(format!("option {o:?} is not supported"))
            }
            other => data.push(other.to_string()),
        }
    }
    let kind = m.kind.as_deref().unwrap_or(if bind { "bind" } else { "" });
    let idmap = mount_idmap(m, idmap_option, userns)?;
    if idmap.is_some() && !(bind || kind == "bind") {
        return Err(
            "uidMappings, gidMappings, idmap and ridmap apply to bind mounts only (options bind or rbind)"
                .into(),
        );
    }
    if bind || kind == "bind" {
        // Filesystem data of a bind (`mode=755`, …): ignored, as mount(2) ignores it for a
        // bind (runc passes it on, to the same effect).
        let src = m.source.as_deref().ok_or("a bind mount needs a source")?;
        let src = bundle_path(bundle, src);
        let src = std::fs::canonicalize(&src)
            .map_err(|_| format!("source {}: no such file or directory", src.display()))?;
        return Ok(MountOp::FlagBind {
            src,
            dest,
            recursive,
            flags,
            idmap,
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
            idmap: None,
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

/// `paths` (the list at `field`) as mount operations made by `op`.
pub(super) fn path_ops(
    paths: &[String],
    field: &str,
    op: fn(PathBuf) -> MountOp,
) -> Result<Vec<MountOp>, ConvertError> {
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            absolute_dest(p)
                .map(op)
                .map_err(|r| bad(format!("{field}[{i}]"), r))
        })
        .collect()
}

/// `linux.rootfsPropagation`, when set.
pub(super) fn root_propagation(p: Option<&str>) -> Result<Option<MountOp>, ConvertError> {
    let Some(p) = p.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    match crate::plan::mounts::flag_word(p) {
        Some(crate::plan::mounts::FlagWord::Propagation(_)) => {
            Ok(Some(MountOp::RootPropagation { flag: p.into() }))
        }
        _ => Err(bad(
            "linux.rootfsPropagation",
            format!("{p:?}: expected private, rprivate, slave, rslave, shared, rshared, unbindable or runbindable"),
        )),
    }
}

/// The device nodes every container gets (runc's list), as binds of the host's nodes; with
/// seeded entropy /dev/urandom and /dev/random are the seeded FIFO. Only where /dev is a
/// fresh tmpfs (else the root filesystem's own /dev is used as it is).
pub(super) fn default_devices(seeded: bool, dev_tmpfs: bool) -> Vec<MountOp> {
    if !dev_tmpfs {
        return Vec::new();
    }
    let mut ops = crate::plan::device_nodes(seeded);
    ops.extend(crate::plan::system::dev_links());
    ops
}

/// The determinism layer's runtime page (clock, seed) in a private tmpfs, and
/// `/etc/ld.so.preload` naming the preload library.
pub(super) fn runtime_mounts(
    rootfs: &Path,
    clock: Option<ClockPlan>,
    mode: ClockMode,
    seed: Option<u64>,
) -> Vec<MountOp> {
    let mut ops = crate::plan::system::runtime_dir(clock, seed);
    // The container's root is writable: /etc/ld.so.preload is one generated file bound over
    // it (the image's own lines kept), not an overlay over all of /etc (engines bind
    // /etc/hosts and friends into it).
    let mut contents = format!("{PRELOAD_PATH}\n");
    for line in existing_preload(rootfs)
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        contents.push_str(line);
        contents.push('\n');
    }
    ops.push(MountOp::File {
        dest: "/etc/ld.so.preload".into(),
        contents,
    });
    let tick = matches!(mode, ClockMode::Tick { .. });
    ops.extend(crate::plan::system::runtime_dir_readonly(tick));
    ops
}

/// The root filesystem's own `/etc/ld.so.preload` (at most 64 KiB), read inside the rootfs
/// only: an image's link to a host file is not followed out.
fn existing_preload(rootfs: &Path) -> String {
    std::fs::File::open(rootfs)
        .ok()
        .and_then(|root| crate::sys::open_in_root(&root, Path::new("etc/ld.so.preload")).ok())
        .and_then(|f| {
            use std::io::Read;
            let mut s = String::new();
            f.take(64 * 1024).read_to_string(&mut s).ok().map(|_| s)
        })
        .unwrap_or_default()
}
