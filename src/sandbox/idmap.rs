//! Idmapped mounts, the creator's half: for every idmapped bind of a plan
//! ([`MountIdmap`]) a detached copy of its source with the id mapping applied, made before
//! init is cloned. It must be made here: the mapping's user namespace is written with host
//! ids only a privileged caller owns, and `MOUNT_ATTR_IDMAP` on a host filesystem needs
//! `CAP_SYS_ADMIN` in the initial user namespace, which init (inside the container's user
//! namespace) does not have. Init inherits the descriptors and attaches each tree at its
//! step of the mount list (`move_mount`), as runc's init does with the trees its parent
//! sends; a filesystem that refuses the mapping fails `create`, before any container exists.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use thiserror::Error;

use crate::plan::mounts::MountIdmap;
use crate::plan::{IdMap, MountOp};

/// The detached idmapped tree of one idmapped bind, for init to attach at `dest`.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) dest: PathBuf,
    pub(crate) fd: OwnedFd,
}

#[derive(Debug, Error)]
pub(crate) enum IdmapError {
    #[error("idmapped mounts need a root caller (the mapping's user namespace is written with host ids, as runc requires)")]
    NotRoot,
    #[error("the mapping's user namespace: {step}: {errno}")]
    Userns { step: &'static str, errno: Errno },
    #[error("open the user namespace {path}: {errno}")]
    JoinedUserns { path: PathBuf, errno: Errno },
    #[error("{src}: {error}")]
    Source {
        src: PathBuf,
        error: crate::sys::hostpath::HostPathError,
    },
    #[error("clone {src} (open_tree): {errno}")]
    OpenTree { src: PathBuf, errno: Errno },
    #[error("id mapping of {src} (mount_setattr MOUNT_ATTR_IDMAP): {errno}{hint}")]
    SetIdmap {
        src: PathBuf,
        errno: Errno,
        hint: &'static str,
    },
}

impl IdmapError {
    /// Whether the host refuses what trees need at all (a container whose seccomp profile
    /// denies user namespaces or the new mount API), rather than one source failing:
    /// `--isolation=auto` then falls back to pins only.
    pub(crate) fn is_refusal(&self) -> bool {
        let refused = |e: &Errno| matches!(e, Errno::EPERM | Errno::ENOSYS | Errno::EACCES);
        match self {
            IdmapError::Userns { errno, .. } | IdmapError::OpenTree { errno, .. } => refused(errno),
            IdmapError::SetIdmap { errno, .. } => refused(errno),
            _ => false,
        }
    }

    /// The refusal in the words of the step it stands for: the mapping's user namespace is
    /// the first namespace a root caller's run creates.
    pub(crate) fn refusal_reason(&self) -> String {
        match self {
            IdmapError::Userns {
                step: "clone",
                errno,
            } => format!("create namespaces: {errno}"),
            other => other.to_string(),
        }
    }
}

/// One idmapped bind whose tree could not be made: `nth` counts the plan's idmapped binds
/// from 0 (the OCI layer turns it back into the config's `mounts[i]`).
#[derive(Debug, Error)]
#[error("{error}")]
pub(crate) struct TreeFailed {
    pub(crate) nth: usize,
    pub(crate) error: IdmapError,
}

/// The detached trees of `ops`, in order: one per idmapped bind (OCI `FlagBind`, a root
/// caller's `Bind`), and for an overlay with an id mapping its lower layer, then (with
/// `--keep-changes`) the directory of its kept layers, made here with `upper/` and `work/`
/// owned by `workload` (the sandbox's host ids). One user namespace is made per distinct
/// mapping and dropped once the trees are made (a mount keeps its mapping).
///
/// A root caller's sources are opened without following a link in any component (the plan
/// resolved them; a link planted since, by a sandbox that can write a parent, is refused);
/// an OCI bind source is resolved as runc resolves it.
pub(crate) fn detached_trees(
    ops: &[MountOp],
    workload: (u32, u32),
) -> Result<Vec<Tree>, TreeFailed> {
    let mut namespaces: Vec<(&MountIdmap, OwnedFd)> = Vec::new();
    let mut trees = Vec::new();
    let mut nth = 0;
    for op in ops {
        // `plain`: an exec sandbox's tree goes without the mapping where its filesystem
        // has none (NFS, FUSE): its files then show as `nobody` (the host's ids are never
        // the workload's), readable and writable as any other user's; what the workload
        // makes there is owned by the sandbox's host ids. An OCI `idmap` is asked for: it
        // fails.
        let (src, dest, rbind, idmap, follow, plain) = match op {
            MountOp::FlagBind {
                src,
                dest,
                recursive,
                idmap: Some(idmap),
                ..
            } => (src, dest, *recursive, idmap, true, false),
            MountOp::Bind {
                src,
                dest,
                idmap: Some(idmap),
                ..
            } => (src, dest, true, idmap, false, true),
            MountOp::Overlay {
                lower,
                dest,
                idmap: Some(idmap),
                ..
            } => (lower, dest, false, idmap, false, true),
            _ => continue,
        };
        let failed = |error| TreeFailed { nth, error };
        if !nix::unistd::geteuid().is_root() {
            return Err(failed(IdmapError::NotRoot));
        }
        let known = namespaces.iter().position(|(m, _)| same_mapping(m, idmap));
        let at = match known {
            Some(at) => at,
            None => {
                namespaces.push((idmap, mapping_userns(idmap).map_err(failed)?));
                namespaces.len() - 1
            }
        };
        let source = Source { path: src, follow };
        let fd = match idmapped_tree(&source, rbind, idmap.recursive, &namespaces[at].1) {
            Err(IdmapError::SetIdmap {
                errno: Errno::EINVAL,
                ..
            }) if plain => source.clone_tree(rbind),
            other => other,
        }
        .map_err(failed)?;
        trees.push(Tree {
            dest: dest.clone(),
            fd,
        });
        if let MountOp::Overlay {
            keep: Some(keep), ..
        } = op
        {
            let fd = kept_layers(keep, workload).map_err(failed)?;
            trees.push(Tree {
                dest: dest.clone(),
                fd,
            });
        }
        nth += 1;
    }
    Ok(trees)
}

/// Where a tree's source is, and whether links may be followed on the way.
struct Source<'a> {
    path: &'a Path,
    follow: bool,
}

impl Source<'_> {
    /// The source's mount cloned (recursively with `rbind`) as a detached tree.
    fn clone_tree(&self, rbind: bool) -> Result<OwnedFd, IdmapError> {
        use crate::sys::newmount::{open_tree_clone, open_tree_clone_fd};
        let open_tree = |errno| IdmapError::OpenTree {
            src: self.path.to_path_buf(),
            errno,
        };
        if self.follow {
            return open_tree_clone(self.path, rbind).map_err(open_tree);
        }
        let fd = crate::sys::hostpath::find(self.path, false).map_err(|e| IdmapError::Source {
            src: self.path.to_path_buf(),
            error: e,
        })?;
        open_tree_clone_fd(fd.as_fd(), rbind).map_err(open_tree)
    }
}

/// The directory of an overlay's kept layers (`--keep-changes`): made if missing (the
/// parent must exist), with `upper/` and `work/` owned by the sandbox's host ids (its files
/// stay the sandbox's: a set-id file there is set-id to an unprivileged id), cloned as a
/// detached tree. No link is followed on the way.
fn kept_layers(dir: &Path, (uid, gid): (u32, u32)) -> Result<OwnedFd, IdmapError> {
    use crate::sys::hostpath;
    let fail = |e| IdmapError::Source {
        src: dir.to_path_buf(),
        error: e,
    };
    let top = hostpath::make_dir(dir, 0o755).map_err(fail)?;
    for name in ["upper", "work"] {
        let sub = hostpath::make_dir_in(&top, name, 0o755).map_err(fail)?;
        nix::unistd::fchown(
            sub.as_raw_fd(),
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(|errno| {
            fail(hostpath::HostPathError::Io {
                step: "chown",
                errno,
            })
        })?;
    }
    crate::sys::newmount::open_tree_clone_fd(top.as_fd(), false).map_err(|errno| {
        IdmapError::OpenTree {
            src: dir.to_path_buf(),
            errno,
        }
    })
}

fn same_mapping(a: &MountIdmap, b: &MountIdmap) -> bool {
    a.uid == b.uid && a.gid == b.gid && a.userns == b.userns
}

/// A detached copy of `src` (recursive for `rbind`) with the mapping of `userns` set on its
/// top mount, or on all of them for `ridmap`.
fn idmapped_tree(
    src: &Source,
    rbind: bool,
    ridmap: bool,
    userns: &OwnedFd,
) -> Result<OwnedFd, IdmapError> {
    let tree = src.clone_tree(rbind)?;
    let src = src.path;
    crate::sys::newmount::set_idmap(tree.as_fd(), userns.as_fd(), ridmap).map_err(|errno| IdmapError::SetIdmap {
        src: src.to_path_buf(),
        errno,
        hint: match errno {
            Errno::EINVAL => " (its filesystem does not support idmapped mounts on this kernel, or the mapping is refused)",
            Errno::EPERM => " (the caller lacks CAP_SYS_ADMIN over the source's mount)",
            _ => "",
        },
    })?;
    Ok(tree)
}

/// The user namespace whose maps are `idmap`'s (or the one it names by path), as a
/// close-on-exec descriptor.
fn mapping_userns(idmap: &MountIdmap) -> Result<OwnedFd, IdmapError> {
    if let Some(path) = &idmap.userns {
        return std::fs::File::open(path).map(OwnedFd::from).map_err(|e| {
            IdmapError::JoinedUserns {
                path: path.clone(),
                errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            }
        });
    }
    let step = |step| move |errno| IdmapError::Userns { step, errno };
    let (wait_r, wait_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(step("pipe"))?;
    // A child born in a new user namespace holds it while its maps are written and it is
    // opened; it exits once the pipe's write end closes.
    match crate::sys::clone_process(libc::CLONE_NEWUSER).map_err(step("clone"))? {
        None => {
            drop(wait_w);
            let mut byte = [0u8; 1];
            let _ = nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&wait_r), &mut byte);
            // SAFETY: _exit ends the helper at once, without the creator's atexit handlers.
            unsafe { libc::_exit(0) }
        }
        Some(child) => {
            drop(wait_r);
            let opened = write_maps(child, &idmap.uid, &idmap.gid).and_then(|()| {
                std::fs::File::open(format!("/proc/{child}/ns/user"))
                    .map(OwnedFd::from)
                    .map_err(|e| io_step("open ns/user", &e))
            });
            drop(wait_w);
            let _ = nix::sys::wait::waitpid(child, None);
            opened
        }
    }
}

fn io_step(step: &'static str, e: &std::io::Error) -> IdmapError {
    IdmapError::Userns {
        step,
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// Writes `child`'s uid and gid maps (the caller is root in the parent user namespace).
fn write_maps(child: nix::unistd::Pid, uid: &[IdMap], gid: &[IdMap]) -> Result<(), IdmapError> {
    for (file, maps) in [("uid_map", uid), ("gid_map", gid)] {
        std::fs::write(format!("/proc/{child}/{file}"), map_text(maps))
            .map_err(|e| io_step(file, &e))?;
    }
    Ok(())
}

/// The text of a `uid_map` or `gid_map`: one `inside outside count` line per range.
pub(crate) fn map_text(maps: &[IdMap]) -> String {
    maps.iter()
        .map(|m| format!("{} {} {}\n", m.inside, m.outside, m.count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_is_written_one_range_a_line() {
        let maps = [IdMap::new(1000, 100000, 1), IdMap::new(0, 200000, 1000)];
        assert_eq!(map_text(&maps), "1000 100000 1\n0 200000 1000\n");
    }

    #[test]
    fn a_plan_without_idmapped_binds_makes_no_tree() {
        let ops = [MountOp::FlagBind {
            src: "/tmp".into(),
            dest: "/data".into(),
            recursive: true,
            flags: Vec::new(),
            idmap: None,
        }];
        assert!(detached_trees(&ops, (0, 0)).unwrap().is_empty());
    }
}
