//! Safe unpacking of layer tar streams into one directory (the flattened root filesystem).
//!
//! Every path is resolved component by component from a descriptor of the root with
//! `O_NOFOLLOW`, so nothing is ever created, written, linked or removed through a symbolic
//! link, and `..` is refused outright: a layer cannot touch anything outside the root.
//! Whiteouts (`.wh.NAME`) and opaque markers (`.wh..wh..opq`) remove what lower layers made.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::ffi::{CString, OsStr};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};
use thiserror::Error;

mod devices;
mod fsops;
mod resolve;
pub use devices::SkippedDevices;
use fsops::*;
pub use fsops::{normalize, remove_all, remove_tree};

/// Whiteout prefix of the OCI image layer format.
pub const WHITEOUT: &str = ".wh.";
/// Marks a directory whose lower-layer contents are hidden.
pub const OPAQUE: &str = ".wh..wh..opq";
/// Longest entry path accepted (Linux's PATH_MAX).
const MAX_PATH: usize = 4096;

/// Caps on what one image may unpack to, summed over its layers.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of (decompressed) layer data, tar headers included.
    pub max_bytes: u64,
    /// Tar entries, whiteouts included.
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 64 << 30,
            max_entries: 2_000_000,
        }
    }
}

/// What may be kept of a layer's privileges.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Keep setuid and setgid bits of regular files.
    pub keep_setuid: bool,
    /// Keep `security.capability` extended attributes (file capabilities).
    pub keep_caps: bool,
}

#[derive(Debug, Error)]
pub enum ExtractError {
    #[error("{path}: path traversal (`..`) is refused")]
    Traversal { path: String },
    #[error("{path}: path longer than {MAX_PATH} bytes")]
    TooLong { path: String },
    #[error("{path}: {link} is a symbolic link, and nothing is written through links")]
    ThroughLink { path: String, link: String },
    #[error("{path}: {parent} is not a directory")]
    NotDir { path: String, parent: String },
    #[error("{path}: hard link to {target}: {reason}")]
    Hardlink {
        path: String,
        target: String,
        reason: String,
    },
    #[error("{path}: unsupported tar entry type {kind:?}")]
    EntryType { path: String, kind: u8 },
    #[error("{path}: bad whiteout: {reason}")]
    Whiteout { path: String, reason: String },
    #[error("more than {0} entries (the import limit)")]
    TooManyEntries(u64),
    #[error("more than {0} bytes unpacked (the import limit)")]
    TooBig(u64),
    #[error("{path}: set file capabilities: {errno}")]
    Caps { path: String, errno: Errno },
    #[error("{step} {path}: {errno}")]
    Fs {
        step: &'static str,
        path: String,
        errno: Errno,
    },
    #[error("read tar stream: {0}")]
    Read(std::io::Error),
}

/// Unpacks layers, in order, into one root directory.
pub struct Extractor {
    root: std::fs::File,
    /// The directory last resolved, kept open: a layer's entries come directory by
    /// directory, so most lookups are the one before. Forgotten whenever anything is
    /// removed (a removal is the only way a directory we hold can leave the tree).
    last_dir: RefCell<Option<(PathBuf, Rc<OwnedFd>)>>,
    opts: Options,
    limits: Limits,
    entries: u64,
    bytes: u64,
    /// Final modes and mtimes of directories, applied once every layer is in (a read-only
    /// directory must stay writable while later entries go into it).
    dirs: BTreeMap<PathBuf, (u32, u64)>,
    devices: SkippedDevices,
}

impl Extractor {
    /// `root` must be an empty directory the caller created.
    pub fn new(root: &Path, opts: Options, limits: Limits) -> Result<Extractor, ExtractError> {
        let fd = nix::fcntl::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| fs_err("open", root, errno))?;
        Ok(Extractor {
            root: std::fs::File::from(own(fd)),
            last_dir: RefCell::new(None),
            opts,
            limits,
            entries: 0,
            bytes: 0,
            dirs: BTreeMap::new(),
            devices: SkippedDevices::default(),
        })
    }

    /// Unpacks one (decompressed) layer tar stream.
    pub fn layer(&mut self, stream: impl Read) -> Result<(), ExtractError> {
        let budget = self.limits.max_bytes.saturating_sub(self.bytes);
        let mut counted = Counted {
            inner: stream,
            left: budget,
        };
        // The rest of the stream after the end-of-archive blocks is read too (it counts in
        // the layer's diff id) — under the same cap.
        let result = self
            .layer_entries(&mut counted)
            .and_then(|()| {
                std::io::copy(&mut counted, &mut std::io::sink()).map_err(ExtractError::Read)
            })
            .map(drop);
        self.bytes += budget - counted.left;
        if counted.left == 0 && result.is_err() {
            return Err(ExtractError::TooBig(self.limits.max_bytes));
        }
        result
    }

    fn layer_entries(&mut self, stream: &mut impl Read) -> Result<(), ExtractError> {
        let mut archive = tar::Archive::new(stream);
        // Paths this layer wrote, and their parents: an opaque marker or whiteout of this
        // layer hides lower layers only.
        let mut written: HashSet<PathBuf> = HashSet::new();
        for entry in archive.entries().map_err(ExtractError::Read)? {
            let mut entry = entry.map_err(ExtractError::Read)?;
            self.entries += 1;
            if self.entries > self.limits.max_entries {
                return Err(ExtractError::TooManyEntries(self.limits.max_entries));
            }
            let raw = entry.path_bytes().into_owned();
            let shown = String::from_utf8_lossy(&raw).into_owned();
            let Some(rel) = normalize(&raw, &shown)? else {
                continue; // the root itself
            };
            let kind = entry.header().entry_type();
            if kind == tar::EntryType::XGlobalHeader {
                continue;
            }
            let name = rel.file_name().unwrap_or_default().as_bytes();
            if name.starts_with(WHITEOUT.as_bytes()) {
                self.whiteout(&rel, &shown, &written)?;
                continue;
            }
            self.entry(&mut entry, &rel, &shown)?;
            for ancestor in rel.ancestors() {
                if !written.insert(ancestor.to_path_buf()) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        rel: &Path,
        shown: &str,
    ) -> Result<(), ExtractError> {
        use tar::EntryType as T;
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().map_err(ExtractError::Read)? & 0o7777;
        let mtime = header.mtime().unwrap_or(0);
        let (parent, name) = self.parent(rel, shown, true)?;
        let p = parent.as_raw_fd();
        match kind {
            T::Directory => {
                match fstatat(Some(p), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st)
                        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
                            == SFlag::S_IFDIR => {}
                    Ok(_) => {
                        self.forget_dirs();
                        remove_all(p, name).map_err(|e| fs_err("replace", shown, e))?;
                        mkdir(p, name).map_err(|e| fs_err("create directory", shown, e))?;
                    }
                    Err(_) => mkdir(p, name).map_err(|e| fs_err("create directory", shown, e))?,
                }
                self.dirs.insert(rel.to_path_buf(), (mode, mtime));
            }
            T::Regular | T::Continuous | T::GNUSparse => {
                self.regular(entry, p, name, shown, (mode, mtime))?;
            }
            T::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| t.into_owned())
                    .unwrap_or_default();
                if target.is_empty() {
                    return Err(fs_err("symlink", shown, Errno::EINVAL));
                }
                let make = || nix::unistd::symlinkat(OsStr::from_bytes(&target), Some(p), name);
                match make() {
                    Err(Errno::EEXIST) => {
                        self.replace(p, name, shown)?;
                        make()
                    }
                    other => other,
                }
                .map_err(|e| fs_err("symlink", shown, e))?;
                let t = timespec(mtime);
                let _ = nix::sys::stat::utimensat(
                    Some(p),
                    name,
                    &t,
                    &t,
                    nix::sys::stat::UtimensatFlags::NoFollowSymlink,
                );
            }
            T::Link => self.hardlink(entry, rel, p, name, shown)?,
            T::Fifo => {
                self.replace(p, name, shown)?;
                nix::sys::stat::mknodat(
                    Some(p),
                    name,
                    SFlag::S_IFIFO,
                    Mode::from_bits_truncate(mode & 0o777),
                    0,
                )
                .map_err(|e| fs_err("create fifo", shown, e))?;
            }
            // Skipped (the sandbox provides /dev), but they still hide what lower layers had.
            T::Char | T::Block => {
                self.replace(p, name, shown)?;
                self.devices.add(&rel.display().to_string());
            }
            other => {
                return Err(ExtractError::EntryType {
                    path: shown.to_string(),
                    kind: other.as_byte(),
                })
            }
        }
        Ok(())
    }

    /// A regular file: created exclusively (never through a link), its data, kept xattrs,
    /// mode (set-id bits dropped unless asked) and time.
    fn regular<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        p: RawFd,
        name: &OsStr,
        shown: &str,
        (mode, mtime): (u32, u64),
    ) -> Result<(), ExtractError> {
        let create = || {
            openat(
                Some(p),
                name,
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
        };
        // Created exclusively; only what is in the way is removed first (one system call
        // per new file instead of a look, then the create).
        let fd = match create() {
            Err(Errno::EEXIST) => {
                self.replace(p, name, shown)?;
                create()
            }
            other => other,
        }
        .map_err(|e| fs_err("create", shown, e))?;
        let mut file = std::fs::File::from(own(fd));
        std::io::copy(entry, &mut file).map_err(|e| match e.raw_os_error() {
            Some(n) => fs_err("write", shown, Errno::from_raw(n)),
            None => ExtractError::Read(e),
        })?;
        let mut mode = mode;
        if !self.opts.keep_setuid {
            mode &= !(libc::S_ISUID | libc::S_ISGID);
        }
        self.xattrs(entry, file.as_raw_fd(), shown)?;
        nix::sys::stat::fchmod(file.as_raw_fd(), Mode::from_bits_truncate(mode))
            .map_err(|e| fs_err("chmod", shown, e))?;
        let t = timespec(mtime);
        nix::sys::stat::futimens(file.as_raw_fd(), &t, &t)
            .map_err(|e| fs_err("set times of", shown, e))?;
        Ok(())
    }

    /// A hard link to an earlier entry of the image (never outside it, to a directory, or
    /// through a symbolic link).
    fn hardlink<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        rel: &Path,
        p: RawFd,
        name: &OsStr,
        shown: &str,
    ) -> Result<(), ExtractError> {
        let raw = entry
            .link_name_bytes()
            .map(|t| t.into_owned())
            .unwrap_or_default();
        let target_shown = String::from_utf8_lossy(&raw).into_owned();
        let hard = |reason: String| ExtractError::Hardlink {
            path: shown.to_string(),
            target: target_shown.clone(),
            reason,
        };
        let target = match normalize(&raw, &target_shown) {
            Ok(Some(t)) => t,
            Ok(None) => return Err(hard("the target is the root".into())),
            Err(ExtractError::Traversal { .. }) => {
                return Err(hard("the target is outside the image (`..`)".into()))
            }
            Err(e) => return Err(e),
        };
        let (tparent, tname) = self
            .parent(&target, &target_shown, false)
            .map_err(|e| match e {
                ExtractError::ThroughLink { link, .. } => hard(format!(
                    "{link} is a symbolic link, and links are not followed"
                )),
                ExtractError::Fs {
                    errno: Errno::ENOENT,
                    ..
                } => hard("the target does not exist in the image".into()),
                other => hard(other.to_string()),
            })?;
        let st = fstatat(
            Some(tparent.as_raw_fd()),
            tname,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| hard(format!("the target does not exist in the image ({e})")))?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            return Err(hard("the target is a directory".into()));
        }
        if target == rel {
            return Ok(());
        }
        self.replace(p, name, shown)?;
        nix::unistd::linkat(
            Some(tparent.as_raw_fd()),
            tname,
            Some(p),
            name,
            nix::fcntl::AtFlags::empty(),
        )
        .map_err(|e| fs_err("hard link", shown, e))?;
        Ok(())
    }

    /// Applies the entry's extended attributes that are kept: `user.*`, and
    /// `security.capability` with `keep_caps`. Everything else (including file capabilities
    /// by default) is dropped.
    fn xattrs<R: Read>(
        &self,
        entry: &mut tar::Entry<R>,
        fd: RawFd,
        shown: &str,
    ) -> Result<(), ExtractError> {
        let Ok(Some(exts)) = entry.pax_extensions() else {
            return Ok(());
        };
        for ext in exts.flatten() {
            let Ok(key) = ext.key() else { continue };
            let Some(attr) = key.strip_prefix("SCHILY.xattr.") else {
                continue;
            };
            let caps = attr == "security.capability";
            if !(attr.starts_with("user.") || (caps && self.opts.keep_caps)) {
                continue;
            }
            let Ok(cname) = CString::new(attr) else {
                continue;
            };
            let value = ext.value_bytes();
            // SAFETY: fd is an open descriptor of the file just written; cname is a valid
            // NUL-terminated string and value a live slice whose length is passed with it.
            let rc = unsafe {
                libc::fsetxattr(fd, cname.as_ptr(), value.as_ptr().cast(), value.len(), 0)
            };
            if rc != 0 && caps {
                return Err(ExtractError::Caps {
                    path: shown.to_string(),
                    errno: Errno::last(),
                });
            }
        }
        Ok(())
    }

    /// Removes whatever is at `name` (a directory with its contents) so a new entry can take
    /// its place; the removal never follows a link.
    fn replace(&self, parent: RawFd, name: &OsStr, shown: &str) -> Result<(), ExtractError> {
        self.forget_dirs();
        match remove_all(parent, name) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(fs_err("replace", shown, e)),
        }
    }

    fn whiteout(
        &mut self,
        rel: &Path,
        shown: &str,
        written: &HashSet<PathBuf>,
    ) -> Result<(), ExtractError> {
        self.forget_dirs();
        let name = rel.file_name().unwrap_or_default().as_bytes();
        let dir = rel.parent().unwrap_or(Path::new(""));
        let bad = |reason: &str| ExtractError::Whiteout {
            path: shown.to_string(),
            reason: reason.to_string(),
        };
        if name == OPAQUE.as_bytes() {
            let Some(dirfd) = self.resolve_dir(dir, shown, false)? else {
                return Ok(());
            };
            return self
                .clear_lower(dirfd.as_raw_fd(), dir, written)
                .map_err(|e| fs_err("opaque directory", shown, e));
        }
        if name.starts_with(b".wh..wh.") {
            return Ok(()); // aufs bookkeeping (.wh..wh.plnk, ...): nothing to apply
        }
        let victim = &name[WHITEOUT.len()..];
        if victim.is_empty() || victim == b"." || victim == b".." {
            return Err(bad("it names no file"));
        }
        let target = dir.join(OsStr::from_bytes(victim));
        if written.contains(&target) {
            return Ok(()); // hides lower layers only
        }
        let Some(dirfd) = self.resolve_dir(dir, shown, false)? else {
            return Ok(());
        };
        match remove_all(dirfd.as_raw_fd(), OsStr::from_bytes(victim)) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(fs_err("whiteout", shown, e)),
        }
        self.dirs.retain(|p, _| !p.starts_with(&target));
        Ok(())
    }

    /// Removes every entry below the directory `dir` that this layer did not write.
    fn clear_lower(
        &mut self,
        dirfd: RawFd,
        dir: &Path,
        written: &HashSet<PathBuf>,
    ) -> Result<(), Errno> {
        for name in list(dirfd)? {
            let path = dir.join(&name);
            if !written.contains(&path) {
                remove_all(dirfd, &name)?;
                self.dirs.retain(|p, _| !p.starts_with(&path));
                continue;
            }
            if let Ok(sub) = open_dir(dirfd, &name) {
                self.clear_lower(sub.as_raw_fd(), &path, written)?;
            }
        }
        Ok(())
    }

    /// Opens the directory that holds `rel` (creating missing directories when `create`)
    /// and returns it with the last component.
    fn parent<'a>(
        &self,
        rel: &'a Path,
        shown: &str,
        create: bool,
    ) -> Result<(Rc<OwnedFd>, &'a OsStr), ExtractError> {
        let name = rel.file_name().unwrap_or_default();
        let dir = rel.parent().unwrap_or(Path::new(""));
        match self.resolve_dir(dir, shown, create)? {
            Some(fd) => Ok((fd, name)),
            None => Err(ExtractError::Fs {
                step: "open parent of",
                path: shown.to_string(),
                errno: Errno::ENOENT,
            }),
        }
    }

    /// Bytes of layer data read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Applies the recorded directory modes and mtimes, deepest first; returns the device
    /// nodes skipped.
    pub fn finish(self) -> Result<SkippedDevices, ExtractError> {
        for (rel, (mode, mtime)) in self.dirs.iter().rev() {
            let shown = rel.display().to_string();
            let Ok(Some(fd)) = self.resolve_dir(rel, &shown, false) else {
                continue; // replaced by a non-directory later
            };
            nix::sys::stat::fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(*mode))
                .map_err(|e| fs_err("chmod", &shown, e))?;
            let t = timespec(*mtime);
            nix::sys::stat::futimens(fd.as_raw_fd(), &t, &t)
                .map_err(|e| fs_err("set times of", &shown, e))?;
        }
        Ok(self.devices)
    }
}

#[cfg(test)]
mod tests;
