//! Descriptor-relative file operations of the extractor (no path is followed through a link)
//! and entry-path normalization.

use super::*;

/// Normalizes an entry path: leading `/` and `./` are dropped, `.` components skipped, and
/// `..` anywhere refused. `None` for the root itself.
pub fn normalize(raw: &[u8], shown: &str) -> Result<Option<PathBuf>, ExtractError> {
    if raw.len() > MAX_PATH {
        return Err(ExtractError::TooLong {
            path: shown.chars().take(80).collect(),
        });
    }
    let mut out = PathBuf::new();
    for part in Path::new(OsStr::from_bytes(raw)).components() {
        match part {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                return Err(ExtractError::Traversal {
                    path: shown.to_string(),
                })
            }
            Component::Normal(p) => out.push(p),
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

pub(super) fn fs_err(step: &'static str, path: impl AsRef<Path>, errno: Errno) -> ExtractError {
    ExtractError::Fs {
        step,
        path: path.as_ref().display().to_string(),
        errno,
    }
}

pub(super) fn timespec(secs: u64) -> nix::sys::time::TimeSpec {
    nix::sys::time::TimeSpec::new(secs.min(i64::MAX as u64) as i64, 0)
}

pub(super) fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: every caller passes a descriptor a successful open/openat/dup just returned,
    // which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub(super) fn dup(fd: RawFd) -> Result<OwnedFd, Errno> {
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(0)).map(own)
}

pub(super) fn open_dir(parent: RawFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    openat(
        Some(parent),
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map(own)
}

pub(super) fn mkdir(parent: RawFd, name: &OsStr) -> Result<(), Errno> {
    nix::sys::stat::mkdirat(Some(parent), name, Mode::from_bits_truncate(0o755))
}

/// The names in a directory (without `.` and `..`).
pub(super) fn list(dirfd: RawFd) -> Result<Vec<std::ffi::OsString>, Errno> {
    let fd = dup(dirfd)?;
    let mut dir = nix::dir::Dir::from_fd(std::os::fd::IntoRawFd::into_raw_fd(fd))?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(names)
}

/// Removes `name` in `parent` and, if it is a directory, everything below it, without ever
/// following a link. Directories are made writable first (an image may hold 0555 ones).
pub fn remove_all(parent: RawFd, name: &OsStr) -> Result<(), Errno> {
    let st = fstatat(Some(parent), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
        return unlinkat(Some(parent), name, UnlinkatFlags::NoRemoveDir);
    }
    let dir = open_dir(parent, name)?;
    let _ = nix::sys::stat::fchmod(dir.as_raw_fd(), Mode::from_bits_truncate(0o700));
    for child in list(dir.as_raw_fd())? {
        remove_all(dir.as_raw_fd(), &child)?;
    }
    drop(dir);
    unlinkat(Some(parent), name, UnlinkatFlags::RemoveDir)
}

/// Removes a directory tree at `path` (a path of the caller's own, e.g. a store directory),
/// without following links inside it.
pub fn remove_tree(path: &Path) -> Result<(), Errno> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().ok_or(Errno::EINVAL)?;
    let fd = nix::fcntl::open(
        parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map(own)?;
    remove_all(fd.as_raw_fd(), name)
}

/// Counts (and caps) the bytes read from a layer stream.
pub(super) struct Counted<R> {
    pub(super) inner: R,
    pub(super) left: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other("unpack limit reached"));
        }
        let max = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}
