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

/// The tag of a tree sent to an `exec` sandbox's init ([`send_trees`]).
pub(crate) const TREE_TAG: u8 = b'T';

/// An `exec` sandbox's trees, made once its init's id maps are written (so a tree whose
/// mapping is the sandbox's own takes init's user namespace: no namespace is made for a
/// root-owned work tree or an image) and sent to init ahead of the word to go; init pairs
/// them with [`tree_dests`]. A host that refuses what trees need is a refusal
/// (`--isolation=auto` falls back).
pub(crate) fn send_trees(
    plan: &crate::plan::Plan,
    init: nix::unistd::Pid,
    sock: &OwnedFd,
) -> Result<(), crate::sandbox::SandboxError> {
    let Some(maps) = &plan.parent_maps else {
        return Ok(());
    };
    let failed = |f: TreeFailed| match f.error.is_refusal() {
        true => crate::sandbox::SandboxError::Unavailable {
            reason: f.error.refusal_reason(),
        },
        false => crate::sandbox::SandboxError::Init {
            step: f.error.to_string(),
        },
    };
    let userns = std::fs::File::open(format!("/proc/{init}/ns/user")).map_err(|e| {
        failed(TreeFailed {
            nth: 0,
            error: io_step("open the sandbox's user namespace", &e),
        })
    })?;
    let workload = (plan.uid_map.outside, plan.gid_map.outside);
    let trees =
        detached_trees(&plan.mounts, workload, Some((maps, userns.as_fd()))).map_err(failed)?;
    for tree in &trees {
        crate::sys::send_fd(sock, &tree.fd, TREE_TAG).map_err(|errno| {
            crate::sandbox::SandboxError::Supervise {
                step: "send a tree to init",
                errno,
            }
        })?;
    }
    Ok(())
}

/// One tree to make for a mount operation.
struct Wanted<'a> {
    src: &'a Path,
    dest: &'a Path,
    rbind: bool,
    idmap: &'a MountIdmap,
    /// An OCI bind source is resolved as runc resolves it; a root caller's sources are
    /// opened without following a link in any component (the plan resolved them; a link
    /// planted since, by a sandbox that can write a parent, is refused).
    follow: bool,
    /// An exec sandbox's tree goes without the mapping where its filesystem has none (NFS,
    /// FUSE): its files then show as `nobody` (the host's ids are never the workload's),
    /// readable and writable as any other user's; what the workload makes there is owned by
    /// the sandbox's host ids. An OCI `idmap` is asked for: it fails.
    plain: bool,
    /// `--keep-changes`: the directory of an overlay's kept layers, a second tree.
    keep: Option<&'a Path>,
}

fn wanted(ops: &[MountOp]) -> impl Iterator<Item = Wanted<'_>> {
    ops.iter().filter_map(|op| {
        let w = |src, dest, rbind, idmap, follow, keep| Wanted {
            src,
            dest,
            rbind,
            idmap,
            follow,
            plain: !follow,
            keep,
        };
        match op {
            MountOp::FlagBind {
                src,
                dest,
                recursive,
                idmap: Some(idmap),
                ..
            } => Some(w(src, dest, *recursive, idmap, true, None)),
            MountOp::Bind {
                src,
                dest,
                idmap: Some(idmap),
                ..
            } => Some(w(src, dest, true, idmap, false, None)),
            MountOp::Overlay {
                lower,
                dest,
                idmap: Some(idmap),
                keep,
            } => Some(w(lower, dest, false, idmap, false, keep.as_deref())),
            _ => None,
        }
    })
}

/// Where the trees of `ops` go, in the order [`detached_trees`] makes them: init pairs the
/// descriptors it is sent with these.
pub(crate) fn tree_dests(ops: &[MountOp]) -> Vec<PathBuf> {
    wanted(ops)
        .flat_map(|w| {
            let twice = w.keep.is_some();
            std::iter::repeat(w.dest.to_path_buf()).take(1 + twice as usize)
        })
        .collect()
}

/// The sandbox's own user namespace (its init's) and its maps: a tree whose mapping is the
/// sandbox's takes it, with no namespace made for it.
pub(crate) type Sandbox<'a> = (&'a crate::plan::ParentMaps, std::os::fd::BorrowedFd<'a>);

/// The detached trees of `ops`, in order: one per idmapped bind (OCI `FlagBind`, a root
/// caller's `Bind`), and for an overlay with an id mapping its lower layer, then (with
/// `--keep-changes`) the directory of its kept layers, made here with `upper/` and `work/`
/// owned by `workload` (the sandbox's host ids). A mapping that is the `sandbox`'s own (a
/// root-owned work tree, an image) takes its user namespace; any other gets one made for it,
/// once per distinct mapping, dropped once the trees are made (a mount keeps its mapping).
pub(crate) fn detached_trees(
    ops: &[MountOp],
    workload: (u32, u32),
    sandbox: Option<Sandbox>,
) -> Result<Vec<Tree>, TreeFailed> {
    let mut namespaces: Vec<(&MountIdmap, OwnedFd)> = Vec::new();
    let mut trees = Vec::new();
    for (nth, w) in wanted(ops).enumerate() {
        let failed = |error| TreeFailed { nth, error };
        if !nix::unistd::geteuid().is_root() {
            return Err(failed(IdmapError::NotRoot));
        }
        let own = sandbox.filter(|(maps, _)| {
            maps.uid == w.idmap.uid && maps.gid == w.idmap.gid && w.idmap.userns.is_none()
        });
        let userns = match own {
            Some((_, fd)) => fd,
            None => {
                let known = namespaces
                    .iter()
                    .position(|(m, _)| same_mapping(m, w.idmap));
                let at = match known {
                    Some(at) => at,
                    None => {
                        namespaces.push((w.idmap, mapping_userns(w.idmap).map_err(failed)?));
                        namespaces.len() - 1
                    }
                };
                namespaces[at].1.as_fd()
            }
        };
        let source = Source {
            path: w.src,
            follow: w.follow,
        };
        let fd = match idmapped_tree(&source, w.rbind, w.idmap.recursive, userns) {
            Err(IdmapError::SetIdmap {
                errno: Errno::EINVAL,
                ..
            }) if w.plain => source.clone_tree(w.rbind),
            other => other,
        }
        .map_err(failed)?;
        trees.push(Tree {
            dest: w.dest.to_path_buf(),
            fd,
        });
        if let Some(keep) = w.keep {
            let fd = kept_layers(keep, workload).map_err(failed)?;
            trees.push(Tree {
                dest: w.dest.to_path_buf(),
                fd,
            });
        }
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
    userns: std::os::fd::BorrowedFd,
) -> Result<OwnedFd, IdmapError> {
    let tree = src.clone_tree(rbind)?;
    let src = src.path;
    crate::sys::newmount::set_idmap(tree.as_fd(), userns, ridmap).map_err(|errno| IdmapError::SetIdmap {
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
        assert!(detached_trees(&ops, (0, 0), None).unwrap().is_empty());
    }
}
