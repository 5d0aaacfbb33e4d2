//! The system calls that change mounts, behind a trait: [`Host`] makes them, and the unit
//! tests' recording fake (in `tests.rs`) writes them down, so the order and flags of every
//! mount a plan leads to can be checked without root (youki's `Syscall` seam).

use std::os::fd::BorrowedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};

/// Mount-changing calls. Files and directories (mount points, generated files) are made with
/// ordinary file operations under the builder's staging root instead.
pub(crate) trait Syscall {
    /// `mount(2)`.
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<(), Errno>;
    /// `mount_setattr(2)`: set and clear `MOUNT_ATTR_*` bits, on every submount if recursive.
    fn mount_setattr(
        &self,
        path: &Path,
        recursive: bool,
        set: u64,
        clear: u64,
    ) -> Result<(), Errno>;
    /// `move_mount(2)`: attaches the detached tree `tree` at `target`.
    fn move_mount(&self, tree: BorrowedFd, target: &Path) -> Result<(), Errno>;
    /// `pivot_root(2)`.
    fn pivot_root(&self, new_root: &Path, put_old: &Path) -> Result<(), Errno>;
    /// `umount2(2)`.
    fn umount2(&self, target: &Path, flags: MntFlags) -> Result<(), Errno>;
}

/// The real system calls.
pub(crate) struct Host;

impl Syscall for Host {
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<(), Errno> {
        nix::mount::mount(source, target, fstype, flags, data)
    }

    fn mount_setattr(
        &self,
        path: &Path,
        recursive: bool,
        set: u64,
        clear: u64,
    ) -> Result<(), Errno> {
        crate::sys::mount_setattr(path, recursive, set, clear)
    }

    fn move_mount(&self, tree: BorrowedFd, target: &Path) -> Result<(), Errno> {
        crate::sys::newmount::move_mount(tree, target)
    }

    fn pivot_root(&self, new_root: &Path, put_old: &Path) -> Result<(), Errno> {
        nix::unistd::pivot_root(new_root, put_old)
    }

    fn umount2(&self, target: &Path, flags: MntFlags) -> Result<(), Errno> {
        nix::mount::umount2(target, flags)
    }
}
