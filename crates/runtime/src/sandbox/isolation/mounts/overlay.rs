//! Writable overlays: an image's root (`exec --image`) and `--workdir-mode overlay`. The
//! lower layer is never written; the upper and work directories live in a tmpfs of their own
//! in the staging root (detached after the pivot; the overlay keeps it alive until the sandbox
//! ends), or with `--keep-changes` in a host directory that outlives the run.
//!
//! Every overlay is mounted in the sandbox's user namespace with `userxattr`: overlayfs then
//! keeps its metadata in `user.overlay.*` attributes, which it may write there, so a
//! directory of the lower layer can be renamed or removed (without it both fail, with
//! `EXDEV` and `EIO`).

use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use super::apply::{fail, HARDENED, READ_ONLY};
use super::{io_errno, Builder, MountError};
use crate::sys::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID};

impl Builder<'_> {
    /// Mounts a fresh writable overlay at `dest` over the host directory `lower` (looked up
    /// here: an unprivileged caller's sandbox). With `keep`, the layers go to that host
    /// directory, made without following a link.
    pub(super) fn overlay(
        &mut self,
        lower: &Path,
        dest: &Path,
        keep: Option<&Path>,
    ) -> Result<(), MountError> {
        let lower = self.host(lower);
        // The options string separates with ',' and ':'; such paths cannot be named there.
        if lower.to_string_lossy().contains([',', ':', '\\']) {
            let kind = "overlay (',', ':' or '\\' in the image's path)";
            return Err(fail(kind, dest)(Errno::EINVAL));
        }
        if !lower.is_dir() {
            return Err(fail("overlay (image root missing)", dest)(Errno::ENOENT));
        }
        let base = self.layers_dir(dest, "")?;
        match keep {
            Some(dir) => {
                let layer = fail("overlay layer", dest);
                let made = crate::sys::hostpath::make_dir(&self.host(dir), 0o755)
                    .map_err(|e| layer(host_errno(&e)))?;
                let tree = crate::sys::newmount::open_tree_clone_fd(made.as_fd(), false)
                    .map_err(&layer)?;
                self.sys.move_mount(tree.as_fd(), &base).map_err(&layer)?;
            }
            None => self.layer_tmpfs(&base, dest)?,
        }
        self.mount_overlay(&lower, &base, dest)
    }

    /// The overlay of a root caller's sandbox: its lower layer (and the directory of its kept
    /// layers) are the creator's detached trees, made on the host with the id mapping set;
    /// nothing of the host is looked up here.
    pub(super) fn overlay_on_trees(&mut self, dest: &Path, keep: bool) -> Result<(), MountError> {
        let lower = self.layers_dir(dest, ".lower")?;
        self.attach_tree(&lower, false, (READ_ONLY, 0), dest)?;
        let base = self.layers_dir(dest, "")?;
        match keep {
            true => self.attach_tree(
                &base,
                false,
                (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0),
                dest,
            )?,
            false => self.layer_tmpfs(&base, dest)?,
        }
        self.mount_overlay(&lower, &base, dest)
    }

    /// A directory of the staging root for `dest`'s layers (`suffix` tells them apart).
    fn layers_dir(&self, dest: &Path, suffix: &str) -> Result<PathBuf, MountError> {
        let name = format!("{}{suffix}", dest.to_string_lossy().replace('/', "_"));
        let dir = self.beside("overlay").join(name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| fail("overlay layer", dest)(io_errno(&e)))?;
        Ok(dir)
    }

    /// A tmpfs for the upper and work directories.
    fn layer_tmpfs(&self, base: &Path, dest: &Path) -> Result<(), MountError> {
        self.fs("tmpfs", base, HARDENED, Some("mode=0755"))
            .map_err(fail("overlay layer", dest))
    }

    /// `upper/` and `work/` in `base` (kept ones may be there already), then the overlay.
    fn mount_overlay(&mut self, lower: &Path, base: &Path, dest: &Path) -> Result<(), MountError> {
        let path = self.ensure_dir(dest)?;
        let layer = fail("overlay layer", dest);
        let (upper, work) = (base.join("upper"), base.join("work"));
        for dir in [&upper, &work] {
            match std::fs::DirBuilder::new().mode(0o755).create(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(layer(io_errno(&e)))
                }
                _ => {}
            }
        }
        // The root of the overlay takes the upper directory's mode.
        std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| layer(io_errno(&e)))?;
        let data = format!(
            "lowerdir={},upperdir={},workdir={},userxattr",
            lower.display(),
            upper.display(),
            work.display()
        );
        self.fs("overlay", &path, HARDENED, Some(data.as_str()))
            .map_err(fail("overlay", dest))
    }
}

/// The errno of a failed host-path step (a refused link reads as ELOOP).
fn host_errno(e: &crate::sys::hostpath::HostPathError) -> Errno {
    use crate::sys::hostpath::HostPathError as H;
    match e {
        H::Link(_) => Errno::ELOOP,
        H::NotDir => Errno::ENOTDIR,
        H::NotRegular => Errno::EINVAL,
        H::TooLarge(_) => Errno::EFBIG,
        H::Io { errno, .. } => *errno,
    }
}
