//! One rule for every host path the caller names and a sandbox could have planted something
//! at (its `/work` is the caller's directory): no symbolic link is followed in any
//! component unless the caller opts in (`--follow-symlinks`), only regular files are read or
//! written (a FIFO, device or socket is never opened: no hang, no device side effect), opens
//! never block, and reads are bounded. `--record`, `--net-log`, `--env-file`,
//! `--keep-changes`, the files the mirror server sends, the allowlist and profile files all
//! go through here (`spec/security.md`, *One rule for host paths*).
//!
//! Lookups use `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` with `O_PATH` first, so
//! the kind of file is known before anything is opened; a regular file is then reopened
//! through its descriptor (`/proc/self/fd/N`), never through its path again.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use thiserror::Error;

use super::{cpath, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum HostPathError {
    #[error("crosses the symbolic link {0} (a link, perhaps planted by an earlier run, is not followed); pass the resolved path, or --follow-symlinks")]
    Link(PathBuf),
    #[error("not a regular file (a FIFO, device or socket is never opened)")]
    NotRegular,
    #[error("not a directory")]
    NotDir,
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    #[error("{step}: {errno}")]
    Io { step: &'static str, errno: Errno },
}

fn io(step: &'static str) -> impl Fn(Errno) -> HostPathError {
    move |errno| HostPathError::Io { step, errno }
}

/// How an existing regular file is opened for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Appended to (`--net-log`).
    Append,
    /// Emptied first (`--record`).
    Truncate,
    /// Neither (a lock file).
    Keep,
}

/// Whether `path` names one of the caller's own descriptors (`/dev/stdout`, `/dev/stderr`,
/// `/dev/fd/N`, `/proc/self/fd/N`): a pipe or terminal the caller chose, which no earlier run
/// can have planted; it is opened as named.
pub fn callers_own(path: &Path) -> bool {
    callers_fd(path).is_some()
}

/// The descriptor number [`callers_own`] names.
fn callers_fd(path: &Path) -> Option<RawFd> {
    let text = path.to_string_lossy();
    match text.as_ref() {
        "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => ["/dev/fd/", "/proc/self/fd/"].iter().find_map(|p| {
            text.strip_prefix(p)
                .and_then(|n| n.parse::<u32>().ok())
                .and_then(|n| RawFd::try_from(n).ok())
        }),
    }
}

/// The caller's own descriptor `path` names ([`callers_own`]), duplicated (close-on-exec):
/// written where the caller's own writes go, at the offset it shares with the caller, never
/// truncated (a run with `--record /dev/stderr` and `2>log` adds to the log; opening the
/// path again would start a new file description at offset 0, truncating or overwriting
/// it). `None` when `path` is not one.
pub fn dup_callers_own(path: &Path) -> Option<Result<std::fs::File, HostPathError>> {
    let fd = callers_fd(path)?;
    let dup = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(3));
    Some(
        dup.map(|raw| {
            // SAFETY: F_DUPFD_CLOEXEC returned a fresh descriptor that nothing else owns.
            std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) })
        })
        .map_err(|errno| HostPathError::Io {
            step: "open",
            errno,
        }),
    )
}

/// Finds `path` (relative ones from the current directory) as an `O_PATH` descriptor,
/// whatever its kind: nothing is opened. Unless `follow`, a symbolic link in any component
/// is refused, naming it.
pub fn find(path: &Path, follow: bool) -> Result<OwnedFd, HostPathError> {
    let resolve = match follow {
        true => 0,
        false => RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    super::openat2_at(libc::AT_FDCWD, path, libc::O_PATH, resolve).map_err(|errno| match errno {
        Errno::ELOOP if !follow => match super::first_link(path) {
            Some(link) => HostPathError::Link(link),
            None => HostPathError::Link(path.to_path_buf()),
        },
        e => HostPathError::Io {
            step: "open",
            errno: e,
        },
    })
}

/// Whether an open descriptor is a regular file, a directory, or something else.
fn kind(fd: &OwnedFd) -> Result<libc::mode_t, HostPathError> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(io("stat"))?;
    Ok(st.st_mode & libc::S_IFMT)
}

/// Reopens an `O_PATH` descriptor of a regular file through `/proc/self/fd` with `flags`
/// (`O_NONBLOCK` and `O_CLOEXEC` added): never through its path again.
fn reopen(fd: &OwnedFd, flags: libc::c_int) -> Result<std::fs::File, HostPathError> {
    if kind(fd)? != libc::S_IFREG {
        return Err(HostPathError::NotRegular);
    }
    super::reopen_fd(fd.as_fd(), flags).map_err(io("open"))
}

/// Opens a regular file for reading (non-blocking, close-on-exec).
pub(crate) fn open_read(path: &Path, follow: bool) -> Result<std::fs::File, HostPathError> {
    reopen(&find(path, follow)?, libc::O_RDONLY)
}

/// Reads a regular file of at most `max` bytes.
pub(crate) fn read(path: &Path, follow: bool, max: u64) -> Result<Vec<u8>, HostPathError> {
    let file = open_read(path, follow)?;
    read_bounded(file, max)
}

/// Reads a regular file of at most `max` bytes as UTF-8 text.
pub fn read_to_string(path: &Path, follow: bool, max: u64) -> Result<String, HostPathError> {
    String::from_utf8(read(path, follow, max)?).map_err(|_| HostPathError::Io {
        step: "read (not UTF-8 text)",
        errno: Errno::EILSEQ,
    })
}

/// Reads at most `max` bytes from `file`; more is an error, not a cut.
pub(crate) fn read_bounded(file: impl Read, max: u64) -> Result<Vec<u8>, HostPathError> {
    let mut out = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| HostPathError::Io {
            step: "read",
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })?;
    if out.len() as u64 > max {
        return Err(HostPathError::TooLarge(max));
    }
    Ok(out)
}

/// The parent directory of `path` (the current directory for a bare name), found as for
/// [`find`], and the last component.
fn parent_and_name(path: &Path, follow: bool) -> Result<(OwnedFd, PathBuf), HostPathError> {
    let name = path
        .file_name()
        .map(PathBuf::from)
        .ok_or(HostPathError::NotRegular)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = find(parent, follow)?;
    if kind(&dir)? != libc::S_IFDIR {
        return Err(HostPathError::NotDir);
    }
    Ok((dir, name))
}

/// Opens a regular file for writing, creating it (mode 0644, less the umask) if missing:
/// an existing one must be regular (appended to, or truncated); a new one is made with
/// `O_EXCL | O_NOFOLLOW` in its parent's descriptor. Writes on the result block again (a
/// full disk is waited on, not dropped).
pub fn open_write(path: &Path, follow: bool, how: Write) -> Result<std::fs::File, HostPathError> {
    if let Some(own) = dup_callers_own(path) {
        return own;
    }
    let flags = libc::O_WRONLY
        | match how {
            Write::Append => libc::O_APPEND,
            Write::Truncate => libc::O_TRUNC,
            Write::Keep => 0,
        };
    for _ in 0..2 {
        let file = match find(path, follow) {
            Ok(fd) => reopen(&fd, flags)?,
            Err(HostPathError::Io {
                errno: Errno::ENOENT,
                ..
            }) => match create(path, follow, flags) {
                Err(HostPathError::Io {
                    errno: Errno::EEXIST,
                    ..
                }) => continue, // made meanwhile: look again
                other => other?,
            },
            Err(e) => return Err(e),
        };
        nix::fcntl::fcntl(
            file.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(match how {
                Write::Append => nix::fcntl::OFlag::O_APPEND,
                Write::Truncate | Write::Keep => nix::fcntl::OFlag::empty(),
            }),
        )
        .map_err(io("fcntl"))?;
        return Ok(file);
    }
    Err(HostPathError::Io {
        step: "create",
        errno: Errno::EEXIST,
    })
}

fn create(path: &Path, follow: bool, flags: libc::c_int) -> Result<std::fs::File, HostPathError> {
    let (dir, name) = parent_and_name(path, follow)?;
    let c = cpath(&name).map_err(io("create"))?;
    let flags = flags | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is NUL-terminated; `dir` is an open directory descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o644 as libc::c_uint) };
    let fd = Errno::result(fd).map_err(io("create"))?;
    // SAFETY: openat returned a fresh descriptor that nothing else owns.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Makes the directory `path` and any missing parent (as `mkdir -p`, mode `mode` less the
/// umask) and returns it as an `O_PATH` descriptor. Each component is made and opened in its
/// parent's descriptor without following a link; an existing one must be a directory.
pub fn make_dir(path: &Path, mode: u32) -> Result<OwnedFd, HostPathError> {
    let start = if path.is_absolute() { "/" } else { "." };
    let mut dir = find(Path::new(start), false)?;
    for part in path.components() {
        match part {
            std::path::Component::Normal(name) => dir = make_dir_in(&dir, name, mode)?,
            std::path::Component::RootDir | std::path::Component::CurDir => {}
            _ => {
                return Err(HostPathError::Io {
                    step: "mkdir (a '..' component)",
                    errno: Errno::EINVAL,
                })
            }
        }
    }
    Ok(dir)
}

/// Makes `name` in the directory `dir` if missing (mode `mode`, less the umask) and opens
/// it without following a link: `O_PATH`, checked to be a directory.
pub fn make_dir_in(
    dir: &OwnedFd,
    name: impl AsRef<Path>,
    mode: u32,
) -> Result<OwnedFd, HostPathError> {
    let name = name.as_ref();
    match nix::sys::stat::mkdirat(
        Some(dir.as_raw_fd()),
        name,
        nix::sys::stat::Mode::from_bits_truncate(mode),
    ) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => {
            return Err(HostPathError::Io {
                step: "mkdir",
                errno: e,
            })
        }
    }
    let fd = super::openat2_at(
        dir.as_raw_fd(),
        name,
        libc::O_PATH | libc::O_DIRECTORY,
        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
    )
    .map_err(|errno| match errno {
        Errno::ELOOP | Errno::ENOTDIR => HostPathError::NotDir,
        e => HostPathError::Io {
            step: "open",
            errno: e,
        },
    })?;
    Ok(fd)
}

/// `RESOLVE_BENEATH`: no `..` above, no absolute path.
const RESOLVE_BENEATH: u64 = 0x08;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_in_any_component_are_refused_unless_followed() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("f"), "x").unwrap();
        symlink(&real, d.path().join("dir-link")).unwrap();
        symlink("real/f", d.path().join("rel-link")).unwrap();
        let via_dir = d.path().join("dir-link/f");
        assert_eq!(
            open_read(&via_dir, false).unwrap_err(),
            HostPathError::Link(d.path().join("dir-link"))
        );
        assert!(matches!(
            open_read(&d.path().join("rel-link"), false),
            Err(HostPathError::Link(_))
        ));
        assert_eq!(read(&via_dir, true, 10).unwrap(), b"x");
        // Writing through a link neither appends nor creates the target.
        assert!(open_write(&d.path().join("rel-link"), false, Write::Append).is_err());
        assert_eq!(std::fs::read(real.join("f")).unwrap(), b"x");
        let dangling = d.path().join("dangling");
        symlink(d.path().join("made-by-link"), &dangling).unwrap();
        assert!(open_write(&dangling, false, Write::Append).is_err());
        assert!(!d.path().join("made-by-link").exists());
    }

    #[test]
    fn fifos_and_devices_are_never_opened_and_reads_are_bounded() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        assert_eq!(
            open_read(&fifo, false).unwrap_err(),
            HostPathError::NotRegular
        );
        assert_eq!(
            open_write(&fifo, false, Write::Append).unwrap_err(),
            HostPathError::NotRegular
        );
        assert_eq!(
            read(Path::new("/dev/zero"), true, 1 << 20).unwrap_err(),
            HostPathError::NotRegular
        );
        let big = d.path().join("big");
        std::fs::write(&big, vec![b'a'; 4097]).unwrap();
        assert_eq!(
            read(&big, false, 4096).unwrap_err(),
            HostPathError::TooLarge(4096)
        );
        assert_eq!(read(&big, false, 4097).unwrap().len(), 4097);
    }

    #[test]
    fn writes_create_append_and_truncate_regular_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("log");
        open_write(&f, false, Write::Append)
            .unwrap()
            .write_all(b"a\n")
            .unwrap();
        open_write(&f, false, Write::Append)
            .unwrap()
            .write_all(b"b\n")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "a\nb\n");
        open_write(&f, false, Write::Truncate)
            .unwrap()
            .write_all(b"c")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "c");
        let missing_parent = d.path().join("no/such/file");
        assert!(open_write(&missing_parent, false, Write::Append).is_err());
        // The caller's own descriptors are opened as named.
        assert!(callers_own(Path::new("/dev/stderr")) && callers_own(Path::new("/dev/fd/2")));
        assert!(!callers_own(Path::new("/dev/fd/../../etc/passwd")));
        assert!(!callers_own(Path::new("/dev/stdoutx")));
        open_write(Path::new("/dev/stderr"), false, Write::Append).unwrap();
    }

    #[test]
    fn directories_are_made_without_following_links() {
        let d = tempfile::tempdir().unwrap();
        let made = make_dir(&d.path().join("keep"), 0o755).unwrap();
        assert_eq!(kind(&made).unwrap(), libc::S_IFDIR);
        make_dir(&d.path().join("keep"), 0o755).unwrap(); // already there: fine
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        symlink(&elsewhere, d.path().join("planted")).unwrap();
        assert_eq!(
            make_dir(&d.path().join("planted"), 0o755).unwrap_err(),
            HostPathError::NotDir
        );
        assert!(make_dir(&d.path().join("planted/sub"), 0o755).is_err());
        make_dir(&d.path().join("a/b/c"), 0o755).unwrap();
        assert!(d.path().join("a/b/c").is_dir());
        assert!(!elsewhere.join("sub").exists());
    }
}
