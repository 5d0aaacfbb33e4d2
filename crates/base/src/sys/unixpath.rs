//! Unix socket addresses for paths of any length. `sun_path` holds 108 bytes with its NUL;
//! a container engine's state paths are often longer (Docker's runtime root and a 64-digit
//! container id come to about 110 bytes before the socket's name), and `bind`/`connect` on
//! such a path fail with `ENAMETOOLONG`. A longer path is reached as runc reaches it: its
//! directory is opened `O_PATH` and the socket named `/proc/self/fd/N/NAME`, which the kernel
//! resolves through the descriptor.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr};

/// The longest path `sun_path` takes (its last byte is the NUL).
pub const SUN_PATH_MAX: usize = 107;

/// A unix socket's address, and the directory it goes through when the path was too long
/// (kept open while the address is used).
#[derive(Debug)]
pub struct SocketPath {
    addr: UnixAddr,
    _dir: Option<File>,
}

impl SocketPath {
    /// The address to `bind` or `connect` to while `self` lives.
    pub fn addr(&self) -> &UnixAddr {
        &self.addr
    }
}

/// The address of the socket at `path`: the path itself when it fits, else
/// `/proc/self/fd/N/NAME` through its directory opened `O_PATH` (close-on-exec).
/// `ENAMETOOLONG` when even the socket's own name does not fit.
pub fn socket_path(path: &Path) -> Result<SocketPath, Errno> {
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok(SocketPath {
            addr: UnixAddr::new(path)?,
            _dir: None,
        });
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Errno::ENAMETOOLONG);
    };
    let dir = open_dir_path(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    if short.as_os_str().len() > SUN_PATH_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(SocketPath {
        addr: UnixAddr::new(&short)?,
        _dir: Some(dir),
    })
}

/// `dir` as an `O_PATH` descriptor (std opens it close-on-exec).
fn open_dir_path(dir: &Path) -> Result<File, Errno> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// A stream socket connected to the one at `path`, however long the path.
pub fn connect_stream(path: &Path) -> Result<UnixStream, Errno> {
    let to = socket_path(path)?;
    let sock: OwnedFd = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    nix::sys::socket::connect(sock.as_raw_fd(), to.addr())?;
    Ok(UnixStream::from(sock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;

    /// A directory whose path is `len` bytes long or more.
    fn deep_dir(root: &Path, len: usize) -> PathBuf {
        let mut dir = root.to_path_buf();
        while dir.as_os_str().len() < len {
            dir.push("d".repeat(40));
        }
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Docker's case: a socket whose path is longer than `sun_path` is bound and reached
    /// (std's own bind fails there with ENAMETOOLONG).
    #[test]
    fn a_socket_path_longer_than_sun_path_binds_and_connects() {
        let tmp = tempfile::tempdir().unwrap();
        let path = deep_dir(tmp.path(), 120).join("exec.sock");
        assert!(path.as_os_str().len() > 108);
        assert!(UnixListener::bind(&path).is_err());
        let at = socket_path(&path).unwrap();
        let l: OwnedFd = nix::sys::socket::socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        nix::sys::socket::bind(l.as_raw_fd(), at.addr()).unwrap();
        nix::sys::socket::listen(&l, nix::sys::socket::Backlog::new(1).unwrap()).unwrap();
        drop(at);
        assert!(path.exists(), "the socket is made at the long path itself");
        let listener = UnixListener::from(l);
        let mut c = connect_stream(&path).unwrap();
        c.write_all(b"hi").unwrap();
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 2];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hi");
    }

    #[test]
    fn a_short_path_is_used_as_it_is_and_bad_paths_fail_with_an_errno() {
        let at = socket_path(Path::new("/run/x.sock")).unwrap();
        assert_eq!(at.addr().path(), Some(Path::new("/run/x.sock")));
        let tmp = tempfile::tempdir().unwrap();
        let long_name = tmp.path().join("n".repeat(120));
        assert_eq!(socket_path(&long_name).unwrap_err(), Errno::ENAMETOOLONG);
        let missing = tmp.path().join("d".repeat(120)).join("s.sock");
        assert_eq!(socket_path(&missing).unwrap_err(), Errno::ENOENT);
        let nobody = deep_dir(tmp.path(), 120).join("none.sock");
        assert_eq!(connect_stream(&nobody).unwrap_err(), Errno::ENOENT);
    }
}
