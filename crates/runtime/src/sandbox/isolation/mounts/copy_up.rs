//! `tmpcopyup`: a directory's contents copied into the tmpfs mounted over it (runc's and
//! crun's mount extension, which podman's `--tmpfs` and `--read-only` use). Hand-written: a
//! copy that keeps owners and modes and never follows a link, from a descriptor of a
//! directory that a mount now covers (no /proc to name it by during the build), is a few
//! `*at` calls; no crate copies from a descriptor.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::{fchmodat, fstatat, mkdirat, FchmodatFlags, Mode, SFlag};

/// Copies what the directory `from` (an open descriptor of the covered directory) holds
/// into the directory `to`: directories, regular files, symbolic links (as links), with
/// their owners and modes; other kinds of files are skipped.
pub(super) fn copy_tree(from: &std::fs::File, to: &Path) -> std::io::Result<()> {
    let to = std::fs::File::open(to)?;
    copy_dir(from.as_fd().try_clone_to_owned()?, to.into()).map_err(std::io::Error::from)
}

fn open_dir(at: &OwnedFd, name: &std::ffi::OsStr) -> Result<OwnedFd, Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(Some(at.as_raw_fd()), name, flags, Mode::empty())?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn copy_dir(from: OwnedFd, to: OwnedFd) -> Result<(), Errno> {
    let mut dir = nix::dir::Dir::from_fd(from.as_raw_fd())?;
    std::mem::forget(from); // owned by `dir` now
    let names: Vec<std::ffi::OsString> = dir
        .iter()
        .filter_map(Result::ok)
        .map(|e| {
            use std::os::unix::ffi::OsStrExt;
            std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string()
        })
        .filter(|n| n != "." && n != "..")
        .collect();
    // SAFETY: a duplicate of `dir`'s descriptor, owned here, used for the *at calls below.
    let from = unsafe { OwnedFd::from_raw_fd(nix::unistd::dup(dir.as_raw_fd())?) };
    drop(dir);
    for name in names {
        let st = fstatat(
            Some(from.as_raw_fd()),
            name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )?;
        let kind = SFlag::from_bits_truncate(st.st_mode & libc::S_IFMT);
        let mode = Mode::from_bits_truncate(st.st_mode & 0o7777);
        if kind == SFlag::S_IFLNK {
            let target = nix::fcntl::readlinkat(Some(from.as_raw_fd()), name.as_os_str())?;
            nix::unistd::symlinkat(target.as_os_str(), Some(to.as_raw_fd()), name.as_os_str())?;
        } else if kind == SFlag::S_IFDIR {
            mkdirat(
                Some(to.as_raw_fd()),
                name.as_os_str(),
                Mode::from_bits_truncate(0o700),
            )?;
            copy_dir(open_dir(&from, &name)?, open_dir(&to, &name)?)?;
        } else if kind == SFlag::S_IFREG {
            let src = openat(
                Some(from.as_raw_fd()),
                name.as_os_str(),
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            let dst = openat(
                Some(to.as_raw_fd()),
                name.as_os_str(),
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )?;
            // SAFETY: both descriptors were just returned by openat and are owned here.
            let (mut src, mut dst) = unsafe {
                (
                    std::fs::File::from_raw_fd(src),
                    std::fs::File::from_raw_fd(dst),
                )
            };
            std::io::copy(&mut src, &mut dst)
                .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        } else {
            continue;
        }
        nix::unistd::fchownat(
            Some(to.as_raw_fd()),
            name.as_os_str(),
            Some(nix::unistd::Uid::from_raw(st.st_uid)),
            Some(nix::unistd::Gid::from_raw(st.st_gid)),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )?;
        if kind != SFlag::S_IFLNK {
            fchmodat(
                Some(to.as_raw_fd()),
                name.as_os_str(),
                mode,
                FchmodatFlags::FollowSymlink,
            )?;
        }
    }
    Ok(())
}
