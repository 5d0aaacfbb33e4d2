//! Idmapped binds, init's half: the creator's detached idmapped tree of the source
//! ([`crate::sandbox::isolation::idmap`]) attached at the mount point, then the bind's flag words.

use std::os::fd::AsFd;
use std::path::Path;

use super::apply::fail;
use super::{Builder, MountError};

impl Builder<'_> {
    /// The mount point for the next tree, at `dest`: a directory for a directory's tree, an
    /// empty file for a file's.
    pub(super) fn tree_point(&mut self, dest: &Path) -> Result<std::path::PathBuf, MountError> {
        let is_dir = match self.trees.front() {
            Some(tree) => {
                nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&tree.fd))
                    .map_err(fail("idmapped bind", dest))?
                    .st_mode
                    & libc::S_IFMT
                    == libc::S_IFDIR
            }
            None => {
                return Err(MountError::NoTree {
                    dest: dest.to_path_buf(),
                })
            }
        };
        match is_dir {
            true => self.ensure_dir(dest),
            false => self.ensure_file(dest),
        }
    }

    /// Attaches the next idmapped tree at `path` (the staging path of `dest`), makes it
    /// private (a copy of a shared host mount joins its peer group: nothing mounted below
    /// it may reach the host), then sets the bind's attributes `(set, clear)` — on every
    /// mount of the tree when `recursive` — as for any bind.
    pub(super) fn attach_tree(
        &mut self,
        path: &Path,
        recursive: bool,
        (set, clear): (u64, u64),
        dest: &Path,
    ) -> Result<(), MountError> {
        let tree = match self.trees.pop_front() {
            Some(tree) if tree.dest == dest => tree,
            _ => {
                return Err(MountError::NoTree {
                    dest: dest.to_path_buf(),
                })
            }
        };
        self.sys
            .move_mount(tree.fd.as_fd(), path)
            .map_err(fail("idmapped bind", dest))?;
        drop(tree);
        let private = match recursive {
            true => libc::MS_PRIVATE | libc::MS_REC,
            false => libc::MS_PRIVATE,
        };
        self.propagate(path, Some(private), dest)?;
        self.sys
            .mount_setattr(path, recursive, set, clear)
            .map_err(fail("idmapped bind", dest))
    }
}
