//! Mount points of reprorun's own files made from outside, for a container whose root is
//! mapped to a host id other than 0: its root directory's files (owned by the host's root)
//! are not writable by that user inside, so init could not make `/run/reprorun` or
//! `/etc/ld.so.preload` there (runc mounts nothing the config does not ask for, so it never
//! needs to). `create` makes the missing ones, resolving every path inside the root
//! (`openat2` RESOLVE_IN_ROOT and no symbolic links: the image cannot point them outside).

use std::os::fd::AsRawFd;
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::sys::stat::Mode;

use crate::plan::{MountOp, Plan};

/// The mount points `plan` adds for the determinism layer: directories and files.
fn own_mount_points(plan: &Plan) -> Vec<(&Path, bool)> {
    plan.mounts
        .iter()
        .filter_map(|m| match m {
            MountOp::Tmpfs { dest, .. } => Some((dest.as_path(), true)),
            MountOp::File { dest, .. } => Some((dest.as_path(), false)),
            _ => None,
        })
        .filter(|(d, _)| !["/proc", "/sys", "/dev"].iter().any(|p| d.starts_with(p)))
        .collect()
}

/// Makes the missing mount points of [`own_mount_points`] in `plan.rootfs`. Errors are left
/// to init, which reports the mount point it cannot make.
pub(crate) fn mount_points(plan: &Plan) {
    let Ok(root) = std::fs::File::open(&plan.rootfs) else {
        return;
    };
    for (dest, dir) in own_mount_points(plan) {
        let _ = make(&root, dest, dir);
    }
}

fn make(root: &std::fs::File, dest: &Path, dir: bool) -> Result<(), Errno> {
    let resolve = crate::sys::RESOLVE_IN_ROOT | crate::sys::RESOLVE_NO_SYMLINKS;
    let parts: Vec<_> = dest
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let Some((last, parents)) = parts.split_last() else {
        return Ok(());
    };
    let mut at = crate::sys::openat2(
        root,
        Path::new("."),
        libc::O_PATH | libc::O_DIRECTORY,
        resolve,
    )?;
    for (i, name) in parents.iter().chain([last]).enumerate() {
        let is_last = i == parents.len();
        let made = if is_last && !dir {
            nix::fcntl::openat(
                Some(at.as_raw_fd()),
                *name,
                nix::fcntl::OFlag::O_CREAT
                    | nix::fcntl::OFlag::O_EXCL
                    | nix::fcntl::OFlag::O_WRONLY
                    | nix::fcntl::OFlag::O_NOFOLLOW
                    | nix::fcntl::OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o644),
            )
            .map(|fd| {
                let _ = nix::unistd::close(fd);
            })
        } else {
            nix::sys::stat::mkdirat(Some(at.as_raw_fd()), *name, Mode::from_bits_truncate(0o755))
        };
        match made {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(e),
        }
        if !is_last {
            at = crate::sys::openat2(
                &at,
                Path::new(name),
                libc::O_PATH | libc::O_DIRECTORY,
                resolve,
            )?;
        }
    }
    Ok(())
}
