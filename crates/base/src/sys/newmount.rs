//! The new mount API calls behind idmapped mounts: a detached copy of a tree
//! (`open_tree`), an id mapping set on it (`mount_setattr` with `MOUNT_ATTR_IDMAP`), and
//! the tree attached somewhere (`move_mount`).

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;

use super::{cpath, MountAttr, AT_RECURSIVE};

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// `MOUNT_ATTR_IDMAP`: the mount takes the id mapping of `userns_fd`.
pub(crate) const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// A detached copy of the mount at `path` (with every mount below it when `recursive`), as
/// a close-on-exec descriptor; the copy lives as long as the descriptor unless it is
/// attached with [`move_mount`].
pub fn open_tree_clone(path: &Path, recursive: bool) -> Result<OwnedFd, Errno> {
    let c = cpath(path)?;
    let mut flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: `c` is a valid NUL-terminated path the kernel only reads during the call.
    let ret = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c.as_ptr(), flags) };
    let fd = Errno::result(ret)?;
    // SAFETY: open_tree returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// [`open_tree_clone`] of the mount an open descriptor (`O_PATH` will do) names: the
/// directory itself, never a path looked up again.
pub fn open_tree_clone_fd(dir: BorrowedFd, recursive: bool) -> Result<OwnedFd, Errno> {
    let mut flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: the path is an empty NUL-terminated string the kernel only reads during the
    // call; `dir` is an open descriptor.
    let ret = unsafe { libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), c"".as_ptr(), flags) };
    let fd = Errno::result(ret)?;
    // SAFETY: open_tree returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Gives the detached tree `tree` the id mapping of the user namespace `userns` (on every
/// mount of the tree when `recursive`, else on its top mount only).
pub fn set_idmap(tree: BorrowedFd, userns: BorrowedFd, recursive: bool) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: the path is an empty NUL-terminated string and `attr` a valid mount_attr whose
    // size is passed alongside; the kernel only reads both during the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    Errno::result(ret).map(drop)
}

/// Attaches the detached tree `tree` at `target`.
pub fn move_mount(tree: BorrowedFd, target: &Path) -> Result<(), Errno> {
    let c = cpath(target)?;
    // SAFETY: the source path is an empty NUL-terminated string and `c` a valid one; the
    // kernel only reads them during the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    Errno::result(ret).map(drop)
}
