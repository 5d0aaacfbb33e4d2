//! Paths named by a sandboxed process, looked up by the host-side supervisor as the process
//! itself would resolve them, and never outside its root: every lookup is an `openat2` with
//! RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS from the process's root directory (held open), so
//! `..`, absolute symbolic links and procfs magic links (`/proc/N/root`, `/proc/N/cwd`, ...)
//! cannot lead to a host file. The host's `/proc/PID/...` is never a prefix of a path named
//! by the process. A relative path is joined onto its start directory's path inside the root,
//! which is checked to name that very directory (same mount and inode) before use; when it
//! cannot be checked, the lookup fails (the caller then treats the file as nothing to patch).
//! `/proc/self` inside the sandbox cannot be resolved by the supervisor (it names the reader,
//! which has no pid in the sandbox's pid namespace), so `/proc/self/...` paths fail, except
//! exactly `/proc/self/exe` and `/proc/thread-self/exe` (busybox re-executes itself so): these
//! are the process's own executable, found through the kernel's link for that process.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::unistd::Pid;

/// Where a relative path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The process's working directory.
    Cwd,
    /// One of its descriptors (`execveat`'s dirfd).
    Fd(i32),
}

/// One sandboxed process's view of the filesystem: its root directory, held open.
pub(crate) struct ProcessFs {
    pid: Pid,
    root: File,
}

impl ProcessFs {
    /// The view of process (or thread) `pid`; `None` when it is gone or out of reach.
    pub(crate) fn of(pid: Pid) -> Option<ProcessFs> {
        let root = open_path(&format!("/proc/{pid}/root"), true)?;
        Some(ProcessFs { pid, root })
    }

    /// An O_PATH descriptor for what `path` names for the process (relative paths from
    /// `start`). Whatever the file's type: nothing is opened for I/O.
    pub(crate) fn find(&self, start: Start, path: &[u8]) -> Option<File> {
        self.lookup(start, path, true)
    }

    /// [`ProcessFs::find`] without following a symbolic link in the last component
    /// (`execveat`'s AT_SYMLINK_NOFOLLOW): such a link is found as itself.
    pub(crate) fn find_nofollow(&self, start: Start, path: &[u8]) -> Option<File> {
        self.lookup(start, path, false)
    }

    fn lookup(&self, start: Start, path: &[u8], follow: bool) -> Option<File> {
        if path.is_empty() {
            return None;
        }
        if is_own_exe(path) {
            // A link itself (the kernel refuses to exec it without following).
            return follow
                .then(|| open_path(&format!("/proc/{}/exe", self.pid), false))
                .flatten();
        }
        let full = if path.first() == Some(&b'/') {
            path.to_vec()
        } else {
            join(&self.start_path(start)?, path)
        };
        let flags = libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW };
        let resolve = crate::sys::RESOLVE_IN_ROOT | crate::sys::RESOLVE_NO_MAGICLINKS;
        crate::sys::openat2(
            &self.root,
            Path::new(OsStr::from_bytes(&full)),
            flags,
            resolve,
        )
        .ok()
    }

    /// An O_PATH descriptor for `start` itself (`execveat` with AT_EMPTY_PATH): the file the
    /// process holds open (or its working directory).
    pub(crate) fn find_start(&self, start: Start) -> Option<File> {
        open_path(&self.start_link(start), false)
    }

    /// What `path` names, opened for reading only if it is a regular file.
    pub(crate) fn open_regular(&self, start: Start, path: &[u8]) -> Option<File> {
        crate::sys::reopen_regular(&self.find(start, path)?, false).ok()
    }

    /// The host's magic link to `start` (only ever opened itself, never a path prefix).
    fn start_link(&self, start: Start) -> String {
        match start {
            Start::Cwd => format!("/proc/{}/cwd", self.pid),
            Start::Fd(fd) => format!("/proc/{}/fd/{fd}", self.pid),
        }
    }

    /// The path inside the process's root of the directory `start`, checked to name that
    /// very directory (same mount, device and inode).
    fn start_path(&self, start: Start) -> Option<Vec<u8>> {
        let link = self.start_link(start);
        let dir = open_path(&link, true)?;
        let dir_name = std::fs::read_link(&link).ok()?;
        let root_name = std::fs::read_link(format!("/proc/{}/root", self.pid)).ok()?;
        let inside = strip_root(
            root_name.as_os_str().as_bytes(),
            dir_name.as_os_str().as_bytes(),
        )?;
        let found = crate::sys::find_in_root(&self.root, Path::new(OsStr::from_bytes(&inside)));
        same_directory(&dir, &found.ok()?).then_some(inside)
    }
}

/// Whether two descriptors name the same directory through the same mount.
fn same_directory(a: &File, b: &File) -> bool {
    let (Ok(ma), Ok(mb)) = (a.metadata(), b.metadata()) else {
        return false;
    };
    let (Ok(ia), Ok(ib)) = (crate::sys::mount_id(a), crate::sys::mount_id(b)) else {
        return false;
    };
    ma.is_dir() && ma.dev() == mb.dev() && ma.ino() == mb.ino() && ia == ib
}

/// Opens `path` with O_PATH (and O_DIRECTORY when `dir`), close-on-exec.
fn open_path(path: &str, dir: bool) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = libc::O_PATH | if dir { libc::O_DIRECTORY } else { 0 };
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .ok()
}

/// Exactly the process's own executable through its procfs (nothing after it).
fn is_own_exe(path: &[u8]) -> bool {
    path == b"/proc/self/exe" || path == b"/proc/thread-self/exe"
}

/// `dir`'s path relative to `root` (both as the host reads their links), as an absolute path
/// inside the root; `None` when `dir` is not below `root`.
fn strip_root(root: &[u8], dir: &[u8]) -> Option<Vec<u8>> {
    if root.first() != Some(&b'/') || dir.first() != Some(&b'/') {
        return None;
    }
    if root == b"/" {
        return Some(dir.to_vec());
    }
    let rest = dir.strip_prefix(root)?;
    match rest.first() {
        None => Some(b"/".to_vec()),
        Some(b'/') => Some(rest.to_vec()),
        Some(_) => None, // a sibling such as /rootfs2 for root /rootfs
    }
}

/// `dir/rel`.
fn join(dir: &[u8], rel: &[u8]) -> Vec<u8> {
    let mut out = dir.to_vec();
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(rel);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_below_the_root_are_made_relative_to_it() {
        assert_eq!(strip_root(b"/", b"/usr/bin"), Some(b"/usr/bin".to_vec()));
        assert_eq!(strip_root(b"/r", b"/r/usr"), Some(b"/usr".to_vec()));
        assert_eq!(strip_root(b"/r", b"/r"), Some(b"/".to_vec()));
        assert_eq!(strip_root(b"/r", b"/r2/usr"), None);
        assert_eq!(strip_root(b"/r", b"/etc"), None);
        assert_eq!(strip_root(b"/", b"pipe:[12]"), None);
        assert_eq!(strip_root(b"", b"/x"), None);
    }

    #[test]
    fn joins_and_own_exe() {
        assert_eq!(join(b"/", b"x"), b"/x");
        assert_eq!(join(b"/a", b"../x"), b"/a/../x");
        assert!(is_own_exe(b"/proc/self/exe"));
        assert!(is_own_exe(b"/proc/thread-self/exe"));
        assert!(!is_own_exe(b"/proc/self/exe/"));
        assert!(!is_own_exe(b"/proc/self/../self/exe"));
        assert!(!is_own_exe(b"/proc/self/root/bin/sh"));
    }

    #[test]
    fn this_process_resolves_like_the_kernel_and_never_leaves_its_root() {
        let me = ProcessFs::of(nix::unistd::getpid()).unwrap();
        let sh = me.open_regular(Start::Cwd, b"/bin/sh").unwrap();
        assert!(sh.metadata().unwrap().is_file());
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let fifo = fifo.as_os_str().as_bytes();
        // Found (O_PATH) but never opened: not a regular file.
        assert!(me.find(Start::Cwd, fifo).is_some());
        assert!(me.open_regular(Start::Cwd, fifo).is_none());
        // Magic links are refused; /proc/self/exe alone is the process's own executable.
        assert!(me.find(Start::Cwd, b"/proc/self/root/bin/sh").is_none());
        assert!(me.find(Start::Cwd, b"/proc/1/root").is_none());
        assert!(me.open_regular(Start::Cwd, b"/proc/self/exe").is_some());
        assert!(me.find(Start::Cwd, b"").is_none());
        // Without following the last link: the link itself.
        let link = dir.path().join("sh");
        std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
        let link = link.as_os_str().as_bytes();
        assert!(me.open_regular(Start::Cwd, link).is_some());
        let itself = me.find_nofollow(Start::Cwd, link).unwrap();
        assert!(itself.metadata().unwrap().file_type().is_symlink());
        assert!(me.find_nofollow(Start::Cwd, b"/proc/self/exe").is_none());
        // Relative paths start from the working directory (`..` stays in the root).
        let rel = me.open_regular(Start::Cwd, b"Cargo.toml");
        assert!(rel.is_some(), "the test runs in the package directory");
        let up = b"../../../../../../../../../../../../../../bin/sh";
        assert!(me.open_regular(Start::Cwd, up).is_some());
    }
}
