//! Performs a plan's mount operations inside the new mount namespace, bubblewrap-style: pivot
//! into a private staging tmpfs (old root at /oldroot), build the new root at /newroot from
//! the ordered operations, then pivot into it and detach everything else.

use std::os::unix::fs::{symlink, DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use thiserror::Error;

use crate::plan::MountOp;
use crate::sys::{
    mount_setattr, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
};

const NEWROOT: &str = "/newroot";
const OLDROOT: &str = "/oldroot";
/// Host directories one of which hosts the staging tmpfs (inside our mount namespace only).
const STAGING_CANDIDATES: &[&str] = &["/tmp", "/run", "/mnt", "/var/tmp"];

#[derive(Debug, Error)]
pub enum MountError {
    #[error("make mounts private: {0}")]
    Private(Errno),
    #[error("staging tmpfs: no usable directory among /tmp, /run, /mnt, /var/tmp")]
    NoStaging,
    #[error("staging tmpfs on {0}: {1}")]
    Staging(String, Errno),
    #[error("pivot_root: {0}")]
    Pivot(Errno),
    #[error("mount {kind} on {dest}: {errno}")]
    Op {
        kind: &'static str,
        dest: PathBuf,
        errno: Errno,
    },
    #[error("mount point {dest}: {errno}; its parent directory is read-only or missing — choose a target under /work, /tmp or an existing directory")]
    Target { dest: PathBuf, errno: Errno },
    #[error("mount target {dest}: {link} is a symbolic link, and links are not followed in mount targets — use the path it points to")]
    Link { dest: PathBuf, link: PathBuf },
    #[error("detach old root: {0}")]
    Detach(Errno),
}

impl MountError {
    pub fn errno(&self) -> Errno {
        match self {
            MountError::Private(e)
            | MountError::Staging(_, e)
            | MountError::Pivot(e)
            | MountError::Detach(e)
            | MountError::Op { errno: e, .. }
            | MountError::Target { errno: e, .. } => *e,
            MountError::NoStaging => Errno::ENOENT,
            MountError::Link { .. } => Errno::ELOOP,
        }
    }

    /// Whether the failure means the kernel refuses mounts here at all (a locked-down
    /// container), rather than a problem with one of the user's paths.
    pub fn is_refusal(&self) -> bool {
        let perm = matches!(self.errno(), Errno::EPERM | Errno::EACCES | Errno::ENOSYS);
        match self {
            MountError::Private(_) | MountError::Staging(..) | MountError::Pivot(_) => perm,
            MountError::Op { kind, .. } => perm && matches!(*kind, "proc" | "sysfs" | "tmpfs"),
            _ => false,
        }
    }
}

/// Builds the new root from `ops` and pivots into it. On return the process's root is the
/// new root, the host's root is detached, and the working directory is `/`.
pub fn build_root(ops: &[MountOp]) -> Result<(), MountError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(MountError::Private)?;
    enter_staging()?;
    CHECKED.with(|c| c.borrow_mut().clear());
    for op in ops {
        apply(op)?;
        if let Some(dest) = op.dest() {
            forget_below(dest);
        }
    }
    CHECKED.with(|c| c.borrow_mut().clear());
    std::env::set_current_dir(NEWROOT).map_err(|e| MountError::Pivot(io_errno(&e)))?;
    nix::unistd::pivot_root(".", ".").map_err(MountError::Pivot)?;
    umount2(".", MntFlags::MNT_DETACH).map_err(MountError::Detach)?;
    nix::unistd::chdir("/").map_err(MountError::Pivot)?;
    Ok(())
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

fn enter_staging() -> Result<(), MountError> {
    let base = STAGING_CANDIDATES
        .iter()
        .find(|p| Path::new(p).is_dir())
        .ok_or(MountError::NoStaging)?;
    let staging = |e| MountError::Staging(base.to_string(), e);
    mount(
        Some("tmpfs"),
        *base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m"),
    )
    .map_err(staging)?;
    for dir in ["newroot", "oldroot"] {
        std::fs::create_dir(Path::new(base).join(dir)).map_err(|e| staging(io_errno(&e)))?;
    }
    nix::unistd::pivot_root(*base, Path::new(base).join("oldroot").as_path())
        .map_err(MountError::Pivot)?;
    nix::unistd::chdir("/").map_err(MountError::Pivot)
}

/// The staging path of a destination inside the new root.
fn staged(dest: &Path) -> PathBuf {
    Path::new(NEWROOT).join(dest.strip_prefix("/").unwrap_or(dest))
}

/// The staging path of a host source (the host root sits at /oldroot).
fn host(src: &Path) -> PathBuf {
    Path::new(OLDROOT).join(src.strip_prefix("/").unwrap_or(src))
}

/// Refuses a mount target any of whose components is a symbolic link: following one could
/// lead out of the new root (into the host's, at /oldroot), so a bind or a created mount point
/// would land on the host (CVE-2021-30465 is this class of bug).
fn reject_links(dest: &Path) -> Result<(), MountError> {
    let mut prefix = PathBuf::from("/");
    for part in dest.components().skip(1) {
        prefix.push(part);
        if CHECKED.with(|c| c.borrow().contains(&prefix)) {
            continue;
        }
        match std::fs::symlink_metadata(staged(&prefix)) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(MountError::Link {
                    dest: dest.to_path_buf(),
                    link: prefix,
                });
            }
            Ok(_) => CHECKED.with(|c| c.borrow_mut().insert(prefix.clone())),
            Err(_) => return Ok(()), // the rest does not exist yet: we create plain directories
        };
    }
    Ok(())
}

thread_local! {
    /// Paths inside the new root already found not to be symbolic links. What lies below a
    /// mount point changes when something is mounted there, so every mount forgets what it
    /// covers ([`forget_below`]).
    static CHECKED: std::cell::RefCell<std::collections::HashSet<PathBuf>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

/// Forgets the checks of every path strictly below `dest` (a new mount covers them).
fn forget_below(dest: &Path) {
    CHECKED.with(|c| {
        c.borrow_mut()
            .retain(|p| !(p.starts_with(dest) && p.as_path() != dest))
    });
}

fn ensure_dir(dest: &Path) -> Result<PathBuf, MountError> {
    reject_links(dest)?;
    let path = staged(dest);
    if !path.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&path)
            .map_err(|e| MountError::Target {
                dest: dest.to_path_buf(),
                errno: io_errno(&e),
            })?;
    }
    Ok(path)
}

fn ensure_file(dest: &Path) -> Result<PathBuf, MountError> {
    reject_links(dest)?;
    let path = staged(dest);
    if let Some(parent) = dest.parent() {
        ensure_dir(parent)?;
    }
    if std::fs::symlink_metadata(&path).is_err() {
        std::fs::File::create(&path).map_err(|e| MountError::Target {
            dest: dest.to_path_buf(),
            errno: io_errno(&e),
        })?;
    }
    Ok(path)
}

fn write_file(path: &Path, bytes: &[u8], mode: u32, dest: &Path) -> Result<(), MountError> {
    let io = |e: std::io::Error| MountError::Op {
        kind: "file",
        dest: dest.to_path_buf(),
        errno: io_errno(&e),
    };
    std::fs::write(path, bytes).map_err(io)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io)
}

/// Hides `dest`: a directory under an empty read-only tmpfs, anything else under the host's
/// null device. The device is opened without following links and checked to be the real
/// `/dev/null` (character device 1:3) before it is bound, through its descriptor, so a
/// replaced node cannot turn the mask into a bind of something else (CVE-2025-31133).
fn mask(dest: &Path) -> Result<(), MountError> {
    let path = staged(dest);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(()); // nothing there on this kernel
    };
    reject_links(dest)?;
    let fail = |kind: &'static str| {
        let dest = dest.to_path_buf();
        move |errno| MountError::Op { kind, dest, errno }
    };
    if meta.is_dir() {
        return mount(
            Some("tmpfs"),
            &path,
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("mode=0555"),
        )
        .map_err(fail("mask"));
    }
    let null = NULL_DEVICE.with(|n| match n.get() {
        Some(fd) => Ok(*fd),
        None => {
            let fd = open_null_device().map_err(|(kind, errno)| MountError::Op {
                kind,
                dest: dest.to_path_buf(),
                errno,
            })?;
            // Kept open (close-on-exec) for the other masks; the workload's exec drops it.
            let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
            let _ = n.set(raw);
            Ok(raw)
        }
    })?;
    // Through the sandbox's own procfs (mounted already): the staging root has none.
    let src = format!("{NEWROOT}/proc/self/fd/{null}");
    bind(Path::new(&src), &path, false, READ_ONLY, "mask", dest)
}

/// A host source (seen from the staging root) and the mount point made for it at `dest`: a
/// directory for a directory, an empty file for anything else.
fn bind_point(src: &Path, dest: &Path) -> Result<(PathBuf, PathBuf), MountError> {
    let source = host(src);
    let path = if source.is_dir() {
        ensure_dir(dest)?
    } else {
        ensure_file(dest)?
    };
    Ok((source, path))
}

/// The host's /sys, read-only, where a fresh sysfs is refused (the net namespace is not
/// ours).
fn host_sysfs(path: &Path, dest: &Path) -> Result<(), MountError> {
    bind(
        &host(Path::new("/sys")),
        path,
        true,
        READ_ONLY,
        "sysfs",
        dest,
    )
}

/// Binds `src` onto `path` (with everything mounted below it when `recursive`) and sets
/// `attrs` (MOUNT_ATTR_*) on the new mount — and, when recursive, on every mount below.
fn bind(
    src: &Path,
    path: &Path,
    recursive: bool,
    attrs: u64,
    kind: &'static str,
    dest: &Path,
) -> Result<(), MountError> {
    bind_with(src, path, recursive, (attrs, 0), kind, dest)
}

/// [`bind`] that also clears attributes: `(set, clear)`.
fn bind_with(
    src: &Path,
    path: &Path,
    recursive: bool,
    (set, clear): (u64, u64),
    kind: &'static str,
    dest: &Path,
) -> Result<(), MountError> {
    let fail = |errno| MountError::Op {
        kind,
        dest: dest.to_path_buf(),
        errno,
    };
    let mut flags = MsFlags::MS_BIND;
    if recursive {
        flags |= MsFlags::MS_REC;
    }
    mount(Some(src), path, None::<&str>, flags, None::<&str>).map_err(fail)?;
    mount_setattr(path, recursive, set, clear).map_err(fail)
}

/// Applies a propagation change (`MS_PRIVATE`, `MS_SLAVE`, ... with `MS_REC`) to a mount.
fn propagate(path: &Path, propagation: Option<u64>, dest: &Path) -> Result<(), MountError> {
    let Some(p) = propagation else { return Ok(()) };
    let flags = MsFlags::from_bits_truncate(p as libc::c_ulong);
    mount(None::<&str>, path, None::<&str>, flags, None::<&str>).map_err(|errno| MountError::Op {
        kind: "propagation",
        dest: dest.to_path_buf(),
        errno,
    })
}

/// `MOUNT_ATTR_*` (set, clear) for the flag words of a bind.
fn bind_attrs(words: &[String]) -> (u64, u64) {
    const ATIME_MASK: u64 = 0x70;
    const NOATIME: u64 = 0x10;
    const STRICTATIME: u64 = 0x20;
    const NODIRATIME: u64 = 0x80;
    const NOSYMFOLLOW: u64 = 0x0020_0000;
    let (mut set, mut clear) = (0u64, 0u64);
    for w in words {
        let (s, c) = match w.as_str() {
            "ro" => (MOUNT_ATTR_RDONLY, 0),
            "nosuid" => (MOUNT_ATTR_NOSUID, 0),
            "nodev" => (MOUNT_ATTR_NODEV, 0),
            "noexec" => (MOUNT_ATTR_NOEXEC, 0),
            "nodiratime" => (NODIRATIME, 0),
            "nosymfollow" => (NOSYMFOLLOW, 0),
            "noatime" => (NOATIME, ATIME_MASK),
            "strictatime" => (STRICTATIME, ATIME_MASK),
            "relatime" => (0, ATIME_MASK),
            _ => (0, 0),
        };
        if c != 0 {
            set &= !c;
        }
        set |= s;
        clear |= c;
    }
    (set, clear)
}

/// Makes a device node (OCI `linux.devices`); where mknod is refused (a user namespace), the
/// host's node at the same path is bound instead, if it is the same device.
fn device(
    dest: &Path,
    kind: char,
    (major, minor): (i64, i64),
    mode: u32,
    (uid, gid): (u32, u32),
) -> Result<(), MountError> {
    use nix::sys::stat::{mknod, Mode, SFlag};
    if let Some(parent) = dest.parent() {
        ensure_dir(parent)?;
    }
    reject_links(dest)?;
    let path = staged(dest);
    let fail = |errno| MountError::Op {
        kind: "device",
        dest: dest.to_path_buf(),
        errno,
    };
    let sflag = match kind {
        'b' => SFlag::S_IFBLK,
        'p' => SFlag::S_IFIFO,
        _ => SFlag::S_IFCHR,
    };
    let dev = libc::makedev(major as u32, minor as u32);
    let _ = std::fs::remove_file(&path);
    match mknod(&path, sflag, Mode::from_bits_truncate(mode & 0o7777), dev) {
        Ok(()) => {
            nix::unistd::chown(
                &path,
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .map_err(fail)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
                .map_err(|e| fail(io_errno(&e)))
        }
        Err(Errno::EPERM) => {
            let src = host(dest);
            let same = std::fs::metadata(&src).is_ok_and(|m| {
                use std::os::unix::fs::MetadataExt;
                m.rdev() == dev
            });
            if !same {
                return Err(fail(Errno::EPERM));
            }
            let path = ensure_file(dest)?;
            bind(&src, &path, false, DEVICE_BIND, "device", dest)
        }
        Err(e) => Err(fail(e)),
    }
}

/// The attributes of every read-only bind reprorun makes.
const READ_ONLY: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

/// The attributes of a host device node bound into the sandbox: the mount is read-only, so
/// nothing inside can `chmod`, `chown` or `touch` the host's node (reads and writes of the
/// device itself do not write the mount and still work).
const DEVICE_BIND: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;

thread_local! {
    /// The host's null device, opened and checked once for every mask.
    static NULL_DEVICE: std::cell::OnceCell<std::os::fd::RawFd> = const { std::cell::OnceCell::new() };
}

/// Opens the host's `/dev/null` without following links and checks it is the null device.
fn open_null_device() -> Result<std::os::fd::OwnedFd, (&'static str, Errno)> {
    use std::os::fd::AsRawFd;
    let null = nix::fcntl::open(
        &host(Path::new("/dev/null")),
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| ("mask (open /dev/null)", e))?;
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    let null = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(null) };
    let st = nix::sys::stat::fstat(null.as_raw_fd()).map_err(|e| ("mask (stat /dev/null)", e))?;
    let is_null = st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3);
    if !is_null {
        return Err(("mask (/dev/null is not the null device)", Errno::EPERM));
    }
    Ok(null)
}

fn apply(op: &MountOp) -> Result<(), MountError> {
    let fail = |kind: &'static str, dest: &Path| {
        let dest = dest.to_path_buf();
        move |errno| MountError::Op { kind, dest, errno }
    };
    let hardened = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    match op {
        MountOp::Tmpfs { dest, mode, size } => {
            let path = ensure_dir(dest)?;
            let mut data = format!("mode={mode:04o}");
            if let Some(size) = size {
                data.push_str(&format!(",size={size}"));
            }
            mount(
                Some("tmpfs"),
                &path,
                Some("tmpfs"),
                hardened,
                Some(data.as_str()),
            )
            .map_err(fail("tmpfs", dest))?;
        }
        MountOp::Bind {
            src,
            dest,
            readonly,
        } => {
            let (source, path) = bind_point(src, dest)?;
            let attrs = if *readonly {
                READ_ONLY
            } else {
                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
            };
            bind(&source, &path, true, attrs, "bind", dest)?;
        }
        MountOp::DevNode { src, dest } => {
            let path = ensure_file(dest)?;
            bind(&host(src), &path, false, DEVICE_BIND, "device", dest)?;
        }
        MountOp::Proc { dest } => {
            let path = ensure_dir(dest)?;
            mount(
                Some("proc"),
                &path,
                Some("proc"),
                hardened | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .map_err(fail("proc", dest))?;
        }
        MountOp::Sysfs { dest } => {
            let path = ensure_dir(dest)?;
            let flags = hardened | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY;
            if mount(Some("sysfs"), &path, Some("sysfs"), flags, None::<&str>).is_err() {
                // Not the owner of the net namespace (--net host): show the host's, read-only.
                host_sysfs(&path, dest)?;
            }
        }
        MountOp::Devpts { dest } => {
            let path = ensure_dir(dest)?;
            mount(
                Some("devpts"),
                &path,
                Some("devpts"),
                MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                Some("newinstance,ptmxmode=0666,mode=0620"),
            )
            .map_err(fail("devpts", dest))?;
        }
        MountOp::Symlink { target, dest } => {
            if let Some(parent) = dest.parent() {
                ensure_dir(parent)?;
            }
            symlink(target, staged(dest)).map_err(|e| MountError::Target {
                dest: dest.clone(),
                errno: io_errno(&e),
            })?;
        }
        MountOp::Dir { dest, mode } => {
            let path = ensure_dir(dest)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).map_err(
                |e| MountError::Target {
                    dest: dest.clone(),
                    errno: io_errno(&e),
                },
            )?;
        }
        MountOp::RuntimeFiles { dir, clock, seed } => {
            let dir_path = ensure_dir(dir)?;
            super::write_runtime_files(&dir_path, *clock, *seed).map_err(|e| MountError::Op {
                kind: "runtime files",
                dest: dir.clone(),
                errno: io_errno(&e),
            })?;
        }
        MountOp::File { dest, contents } => {
            // The file lives in the staging root, which is detached later; the bind keeps it.
            let dir = Path::new("/generated");
            std::fs::create_dir_all(dir).map_err(|e| MountError::Op {
                kind: "generated file",
                dest: dest.clone(),
                errno: io_errno(&e),
            })?;
            let src = dir.join(
                dest.to_string_lossy()
                    .trim_start_matches('/')
                    .replace('/', "_"),
            );
            write_file(&src, contents.as_bytes(), 0o444, dest)?;
            let path = ensure_file(dest)?;
            bind(&src, &path, false, READ_ONLY, "bind", dest)?;
        }
        MountOp::Fifo { dest, mode, links } => {
            if let Some(parent) = dest.parent() {
                ensure_dir(parent)?;
            }
            reject_links(dest)?;
            let path = staged(dest);
            let target = |errno| MountError::Target {
                dest: dest.clone(),
                errno,
            };
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(*mode))
                .map_err(target)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
                .map_err(|e| target(io_errno(&e)))?;
            for link in links {
                reject_links(link)?;
                std::fs::hard_link(&path, staged(link)).map_err(|e| MountError::Target {
                    dest: link.clone(),
                    errno: io_errno(&e),
                })?;
            }
        }
        MountOp::Preload { etc, lib } => {
            // The overlay's top layer lives in the staging root, which is detached later;
            // the overlay keeps it alive.
            let top = Path::new("/preload-etc");
            std::fs::create_dir_all(top).map_err(|e| MountError::Op {
                kind: "preload layer",
                dest: etc.clone(),
                errno: io_errno(&e),
            })?;
            let line = format!("{}\n", lib.display());
            write_file(&top.join("ld.so.preload"), line.as_bytes(), 0o644, etc)?;
            let lower = ensure_dir(etc)?;
            let data = format!("lowerdir={}:{}", top.display(), lower.display());
            mount(
                Some("overlay"),
                &lower,
                Some("overlay"),
                hardened | MsFlags::MS_RDONLY,
                Some(data.as_str()),
            )
            .map_err(fail("overlay", etc))?;
        }
        MountOp::Mask { dest } => mask(dest)?,
        MountOp::ReadonlyPath { dest } => {
            let path = staged(dest);
            if std::fs::symlink_metadata(&path).is_err() {
                return Ok(()); // nothing there on this kernel
            }
            reject_links(dest)?;
            bind(&path, &path, true, READ_ONLY, "read-only bind", dest)?;
        }
        MountOp::Readonly { dest } => {
            let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | hardened;
            mount(
                None::<&str>,
                &staged(dest),
                None::<&str>,
                flags,
                None::<&str>,
            )
            .map_err(fail("read-only remount", dest))?;
        }
        MountOp::RootBind { src } => {
            let rec = MsFlags::MS_BIND | MsFlags::MS_REC;
            mount(Some(&host(src)), NEWROOT, None::<&str>, rec, None::<&str>)
                .map_err(fail("root bind", Path::new("/")))?;
            // Device nodes of the image are never honoured (/dev is the engine's tmpfs).
            mount_setattr(Path::new(NEWROOT), true, MOUNT_ATTR_NODEV, 0)
                .map_err(fail("root bind", Path::new("/")))?;
        }
        MountOp::Fs {
            fstype,
            source,
            dest,
            flags,
            data,
        } => {
            let path = ensure_dir(dest)?;
            let (bits, propagation) = crate::plan::mounts::flag_bits(flags);
            let ms = MsFlags::from_bits_truncate(bits as libc::c_ulong);
            let data = (!data.is_empty()).then_some(data.as_str());
            let mounted = mount(
                Some(source.as_str()),
                &path,
                Some(fstype.as_str()),
                ms,
                data,
            );
            match mounted {
                Err(Errno::EPERM | Errno::EACCES) if fstype == "sysfs" => {
                    // Not the owner of the net namespace: the host's, read-only.
                    host_sysfs(&path, dest)?;
                }
                other => other.map_err(fail("filesystem", dest))?,
            }
            propagate(&path, propagation, dest)?;
        }
        MountOp::FlagBind {
            src,
            dest,
            recursive,
            flags,
        } => {
            let (source, path) = bind_point(src, dest)?;
            bind_with(&source, &path, *recursive, bind_attrs(flags), "bind", dest)?;
            propagate(&path, crate::plan::mounts::flag_bits(flags).1, dest)?;
        }
        MountOp::Sysctl { key, value } => {
            let rel = key.replace('.', "/");
            let path = staged(&Path::new("/proc/sys").join(&rel));
            std::fs::write(&path, value).map_err(|e| MountError::Op {
                kind: "sysctl",
                dest: PathBuf::from(format!("/proc/sys/{rel}")),
                errno: io_errno(&e),
            })?;
        }
        MountOp::Device {
            dest,
            kind,
            major,
            minor,
            mode,
            uid,
            gid,
        } => device(dest, *kind, (*major, *minor), *mode, (*uid, *gid))?,
        MountOp::RootPropagation { flag } => {
            let (_, propagation) = crate::plan::mounts::flag_bits(std::slice::from_ref(flag));
            propagate(Path::new(NEWROOT), propagation, Path::new("/"))?;
        }
        MountOp::Overlay { lower, dest } => overlay(lower, dest)?,
        MountOp::PreloadFile { etc, lib } => preload_file(etc, lib)?,
        MountOp::ReadonlyRoot => {
            let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | hardened;
            mount(None::<&str>, NEWROOT, None::<&str>, flags, None::<&str>)
                .map_err(fail("read-only remount", Path::new("/")))?;
        }
    }
    Ok(())
}

/// Mounts a fresh writable overlay at `dest` over the host directory `lower`. Its upper and
/// work directories live in a tmpfs of their own in the staging root (which is detached after
/// the pivot; the overlay keeps the tmpfs alive until the sandbox ends), so nothing a run
/// writes reaches `lower` or outlives the run.
fn overlay(lower: &Path, dest: &Path) -> Result<(), MountError> {
    let fail = |kind: &'static str| {
        let dest = dest.to_path_buf();
        move |errno| MountError::Op { kind, dest, errno }
    };
    let lower = host(lower);
    // The options string separates with ',' and ':'; such paths cannot be named there.
    if lower.to_string_lossy().contains([',', ':', '\\']) {
        return Err(fail("overlay (',', ':' or '\\' in the image's path)")(
            Errno::EINVAL,
        ));
    }
    if !lower.is_dir() {
        return Err(fail("overlay (image root missing)")(Errno::ENOENT));
    }
    let path = ensure_dir(dest)?;
    let name = dest.to_string_lossy().replace('/', "_");
    let base = Path::new("/overlay").join(name);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)
        .map_err(|e| fail("overlay layer")(io_errno(&e)))?;
    mount(
        Some("tmpfs"),
        &base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(fail("overlay layer"))?;
    let (upper, work) = (base.join("upper"), base.join("work"));
    for dir in [&upper, &work] {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(dir)
            .map_err(|e| fail("overlay layer")(io_errno(&e)))?;
    }
    // The root of the overlay takes the upper directory's mode.
    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| fail("overlay layer")(io_errno(&e)))?;
    let data = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    mount(
        Some("overlay"),
        &path,
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(data.as_str()),
    )
    .map_err(fail("overlay"))
}

/// Writes `etc/ld.so.preload` naming `lib` on a writable root. Whatever is there (a file, or
/// a link, which is removed rather than followed) is replaced; the new file is created
/// exclusively, so it cannot be written through a link.
fn preload_file(etc: &Path, lib: &Path) -> Result<(), MountError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = ensure_dir(etc)?;
    let dest = etc.join("ld.so.preload");
    let io = |e: std::io::Error| MountError::Op {
        kind: "preload file",
        dest: dest.clone(),
        errno: io_errno(&e),
    };
    let path = dir.join("ld.so.preload");
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io)?;
    file.write_all(format!("{}\n", lib.display()).as_bytes())
        .map_err(io)
}
