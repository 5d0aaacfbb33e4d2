//! Idmapped bind mounts: a mount's `uidMappings`/`gidMappings` and the `idmap`/`ridmap`
//! options (runtime-spec config.md, "Mounts"), checked the way the kernel checks a
//! `uid_map` so that a bad mapping is refused here, naming the mount, and not at start.

use std::path::Path;

use super::{bad, ConvertError};
use crate::oci::spec;
use crate::plan::mounts::MountIdmap;
use crate::plan::{IdMap, Namespace, NsJoin, ParentMaps};

/// The most lines a `uid_map` may have (the kernel's `UID_GID_MAP_MAX_EXTENTS`).
const MAX_LINES: usize = 340;

/// The container's user namespace, where a bare `idmap` takes its mapping from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Userns<'a> {
    /// No user namespace of the container's own.
    None,
    /// A new one with these maps (`linux.uidMappings`/`gidMappings`).
    Maps(&'a ParentMaps),
    /// One joined by path.
    Joined(&'a Path),
}

/// The id mapping of mount `m`, if it is an idmapped mount: it has `uidMappings` or
/// `gidMappings`, or the option `idmap` (`option` = `Some(false)`) or `ridmap`
/// (`Some(true)`). The mount's own mappings win; without them the container's are used,
/// as runc does; with neither it is refused (the runtime-spec's "MUST error").
pub(super) fn mount_idmap(
    m: &spec::Mount,
    option: Option<bool>,
    userns: Userns,
) -> Result<Option<MountIdmap>, String> {
    let given = !m.uid_mappings.is_empty() || !m.gid_mappings.is_empty();
    let recursive = option == Some(true);
    if given {
        if m.uid_mappings.is_empty() || m.gid_mappings.is_empty() {
            return Err("uidMappings and gidMappings must be given together".into());
        }
        return Ok(Some(MountIdmap {
            uid: lines("uidMappings", &m.uid_mappings)?,
            gid: lines("gidMappings", &m.gid_mappings)?,
            userns: None,
            recursive,
        }));
    }
    let Some(recursive) = option else {
        return Ok(None);
    };
    let word = if recursive { "ridmap" } else { "idmap" };
    match userns {
        Userns::Maps(maps) => Ok(Some(MountIdmap {
            uid: maps.uid.clone(),
            gid: maps.gid.clone(),
            userns: None,
            recursive,
        })),
        Userns::Joined(path) => Ok(Some(MountIdmap {
            uid: Vec::new(),
            gid: Vec::new(),
            userns: Some(path.to_path_buf()),
            recursive,
        })),
        Userns::None => Err(format!(
            "option {word:?} without uidMappings and gidMappings takes the container's user namespace mapping, and the container has no user namespace; give the mount uidMappings and gidMappings"
        )),
    }
}

/// One OCI id mapping (`containerID`, `hostID`, `size`) as a `uid_map` line.
pub(super) fn id_map(m: &spec::IdMapping) -> IdMap {
    IdMap::new(m.container_id, m.host_id, m.size)
}

/// `maps` (the list at `field`) as `uid_map` lines, refused as the kernel would refuse
/// them: no empty or wrapping range, no two ranges overlapping on either side, at most
/// [`MAX_LINES`].
pub(super) fn lines(field: &str, maps: &[spec::IdMapping]) -> Result<Vec<IdMap>, String> {
    if maps.len() > MAX_LINES {
        return Err(format!(
            "{field}: {} ranges; the kernel takes at most {MAX_LINES}",
            maps.len()
        ));
    }
    let last = u64::from(u32::MAX);
    for (j, m) in maps.iter().enumerate() {
        if m.size == 0 {
            return Err(format!("{field}[{j}]: size must be at least 1"));
        }
        for (name, start) in [("containerID", m.container_id), ("hostID", m.host_id)] {
            if u64::from(start) + u64::from(m.size) > last {
                return Err(format!(
                    "{field}[{j}]: {name} {start} + size {} goes past the largest id, {}",
                    m.size,
                    last - 1
                ));
            }
        }
    }
    let overlap = |a: u32, b: u32, n: u32, m: u32| {
        let (a, b, n, m) = (u64::from(a), u64::from(b), u64::from(n), u64::from(m));
        a < b + m && b < a + n
    };
    for (j, a) in maps.iter().enumerate() {
        for (k, b) in maps.iter().enumerate().skip(j + 1) {
            for (name, x, y) in [
                ("containerID", a.container_id, b.container_id),
                ("hostID", a.host_id, b.host_id),
            ] {
                if overlap(x, y, a.size, b.size) {
                    return Err(format!(
                        "{field}[{j}] and {field}[{k}]: their {name} ranges overlap"
                    ));
                }
            }
        }
    }
    Ok(maps.iter().map(id_map).collect())
}

/// Refuses idmapped mounts in a container that joins a mount namespace by path: `create`
/// makes their trees from its own mount namespace, where the sources could be other files
/// than in the joined one (where every other bind's source is looked up).
pub(super) fn own_mount_namespace(
    mounts: &[spec::Mount],
    join: &[NsJoin],
) -> Result<(), ConvertError> {
    if !join.iter().any(|j| j.ns == Namespace::Mount) {
        return Ok(());
    }
    match mounts.iter().position(is_idmapped) {
        Some(i) => Err(bad(
            format!("mounts[{i}]"),
            "idmapped mounts in a container that joins a mount namespace by path are not supported",
        )),
        None => Ok(()),
    }
}

/// Whether `m` is an idmapped mount (see [`mount_idmap`]); `create` names a mount whose
/// idmapped tree the kernel refuses by its index among these.
pub(crate) fn is_idmapped(m: &spec::Mount) -> bool {
    !m.uid_mappings.is_empty()
        || !m.gid_mappings.is_empty()
        || m.options.iter().any(|o| o == "idmap" || o == "ridmap")
}
