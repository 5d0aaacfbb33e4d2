//! Performs a plan's mount operations inside the new mount namespace, bubblewrap-style: pivot
//! into a private staging tmpfs (old root at /oldroot), build the new root at /newroot from
//! the ordered operations, then pivot into it and detach everything else.
//!
//! The operations are carried out by a [`Builder`] over a [`Syscall`] layer and a [`Layout`]
//! of where the staging root and the host's root are, so that unit tests (`tests.rs`) run
//! them as an ordinary user under a temporary directory with a recording fake.

mod apply;
mod attach;
mod copy_up;
mod overlay;
mod sources;
mod syscall;
/// Opens the host's `/dev/null` (at `path`) without following links and checks it is the
/// null device.
fn open_null_device(
    path: &std::path::Path,
) -> Result<std::os::fd::OwnedFd, (&'static str, nix::errno::Errno)> {
    use std::os::fd::AsRawFd;
    let null = nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| ("mask (open /dev/null)", e))?;
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    let null = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(null) };
    let st = nix::sys::stat::fstat(null.as_raw_fd()).map_err(|e| ("mask (stat /dev/null)", e))?;
    let is_null = st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3);
    if !is_null {
        return Err((
            "mask (/dev/null is not the null device)",
            nix::errno::Errno::EPERM,
        ));
    }
    Ok(null)
}

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};
use thiserror::Error;

use crate::plan::MountOp;
use syscall::{Host, Syscall};

/// Host directories one of which hosts the staging tmpfs (inside our mount namespace only).
const STAGING_CANDIDATES: &[&str] = &["/tmp", "/run", "/mnt", "/var/tmp"];

#[derive(Debug, Error)]
pub(crate) enum MountError {
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
    #[error("chroot into the root filesystem: {0}")]
    Chroot(Errno),
    #[error(
        "no root filesystem to build in place (a container without a mount namespace of its own)"
    )]
    NoRootfs,
    #[error("idmapped mount on {dest}: no idmapped tree was made for it by the creator")]
    NoTree { dest: PathBuf },
    #[error("join the network namespace: {0}")]
    Network(Errno),
}

impl MountError {
    pub(crate) fn errno(&self) -> Errno {
        match self {
            MountError::Private(e)
            | MountError::Staging(_, e)
            | MountError::Pivot(e)
            | MountError::Detach(e)
            | MountError::Network(e)
            | MountError::Chroot(e)
            | MountError::Op { errno: e, .. }
            | MountError::Target { errno: e, .. } => *e,
            MountError::NoStaging | MountError::NoRootfs => Errno::ENOENT,
            MountError::NoTree { .. } => Errno::EINVAL,
            MountError::Link { .. } => Errno::ELOOP,
        }
    }

    /// Whether the failure means the kernel refuses mounts here at all (a locked-down
    /// container), rather than a problem with one of the user's paths.
    pub(crate) fn is_refusal(&self) -> bool {
        let perm = matches!(self.errno(), Errno::EPERM | Errno::EACCES | Errno::ENOSYS);
        match self {
            MountError::Private(_) | MountError::Staging(..) | MountError::Pivot(_) => perm,
            MountError::Op { kind, .. } => perm && matches!(*kind, "proc" | "sysfs" | "tmpfs"),
            _ => false,
        }
    }
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Where the builder works: the staging root (generated files and overlay layers live
/// there), the directory that becomes the new root, and where the host's root is seen.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) staging: PathBuf,
    pub(crate) oldroot: PathBuf,
    pub(crate) newroot: PathBuf,
    /// Whether the bundle's root, once bound, is made private (recursively): built in the
    /// caller's mount namespace, its mounts must not propagate to the host's peers.
    pub(crate) private_root: bool,
}

impl Layout {
    /// Inside init, after [`enter_staging`]: the staging tmpfs is `/`, the host's root
    /// `/oldroot`.
    fn sandbox() -> Layout {
        Layout {
            staging: "/".into(),
            oldroot: "/oldroot".into(),
            newroot: "/newroot".into(),
            private_root: false,
        }
    }
}

/// Carries out mount operations: the system calls through `sys`, mount points and files
/// under `layout.staging`.
pub(crate) struct Builder<'a> {
    sys: &'a dyn Syscall,
    layout: Layout,
    /// Paths inside the new root already found not to be symbolic links, and whether each is
    /// a directory. What lies below a mount point changes when something is mounted there, so
    /// every mount forgets what it covers ([`Builder::forget_below`]); a mount on a path keeps
    /// its kind (the kernel mounts a directory only on a directory).
    checked: HashMap<PathBuf, bool>,
    /// The read-only sources of generated files and masks, once made.
    sources: sources::Sources,
    /// The creator's detached idmapped trees, in the order of the idmapped binds.
    trees: std::collections::VecDeque<crate::sandbox::isolation::idmap::Tree>,
}

impl<'a> Builder<'a> {
    pub(crate) fn new(sys: &'a dyn Syscall, layout: Layout) -> Builder<'a> {
        Builder {
            sys,
            layout,
            checked: HashMap::new(),
            sources: Default::default(),
            trees: Default::default(),
        }
    }

    /// The builder with the creator's idmapped trees to attach.
    pub(crate) fn with_trees(
        mut self,
        trees: Vec<crate::sandbox::isolation::idmap::Tree>,
    ) -> Builder<'a> {
        self.trees = trees.into();
        self
    }

    /// Performs `ops` in order.
    pub(crate) fn run(&mut self, ops: &[MountOp]) -> Result<(), MountError> {
        self.run_joining(ops, None)
    }

    /// [`Builder::run`] that calls `join_net` once, before the first `sysfs` mount (which
    /// needs the network namespace the sandbox's user namespace owns), or after the last
    /// operation when there is none.
    pub(crate) fn run_joining(
        &mut self,
        ops: &[MountOp],
        mut join_net: Option<&dyn Fn() -> Result<(), Errno>>,
    ) -> Result<(), MountError> {
        for op in ops {
            if matches!(op, MountOp::Sysfs { .. }) {
                if let Some(join) = join_net.take() {
                    join().map_err(MountError::Network)?;
                    crate::trace::step("init", "  join the network namespace");
                }
            }
            self.apply(op)?;
            // Nothing lies below what a file, device, FIFO or link was mounted or made at.
            let leaf = matches!(
                op,
                MountOp::File { .. }
                    | MountOp::DevNode { .. }
                    | MountOp::Device { .. }
                    | MountOp::Fifo { .. }
                    | MountOp::Symlink { .. }
            );
            if let (Some(dest), false) = (op.dest(), leaf) {
                self.forget_below(dest);
            }
            crate::trace::step_with("init", || {
                let kind = format!("{op:?}");
                let kind = kind.split([' ', '{']).next().unwrap_or_default().to_owned();
                let dest = op.dest().map(|d| d.display().to_string());
                format!("  mount {kind} {}", dest.unwrap_or_default())
            });
        }
        match join_net {
            Some(join) => join().map_err(MountError::Network),
            None => Ok(()),
        }
    }

    /// The directory that becomes the new root.
    fn newroot(&self) -> PathBuf {
        self.layout.newroot.clone()
    }

    /// The staging path of a destination inside the new root.
    fn staged(&self, dest: &Path) -> PathBuf {
        self.newroot().join(dest.strip_prefix("/").unwrap_or(dest))
    }

    /// The staging path of a host source.
    fn host(&self, src: &Path) -> PathBuf {
        self.layout
            .oldroot
            .join(src.strip_prefix("/").unwrap_or(src))
    }

    /// A path in the staging root outside the new root (generated files, overlay layers).
    fn beside(&self, name: &str) -> PathBuf {
        self.layout.staging.join(name)
    }

    /// Refuses a mount target any of whose components is a symbolic link: following one
    /// could lead out of the new root (into the host's, at /oldroot), so a bind or a created
    /// mount point would land on the host (CVE-2021-30465 is this class of bug). Returns what
    /// `dest` is, from the same lookups (each path is looked up once: it was the most frequent
    /// system call of a sandbox's start, issue 20).
    fn reject_links(&mut self, dest: &Path) -> Result<Found, MountError> {
        let mut prefix = PathBuf::from("/");
        let mut found = Found::Dir; // the new root
        for part in dest.components().skip(1) {
            prefix.push(part);
            if let Some(is_dir) = self.checked.get(&prefix) {
                found = if *is_dir { Found::Dir } else { Found::Other };
                continue;
            }
            match std::fs::symlink_metadata(self.staged(&prefix)) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(MountError::Link {
                        dest: dest.to_path_buf(),
                        link: prefix,
                    });
                }
                Ok(meta) => {
                    found = if meta.is_dir() {
                        Found::Dir
                    } else {
                        Found::Other
                    };
                    self.checked.insert(prefix.clone(), meta.is_dir());
                }
                // The rest does not exist yet: plain directories follow.
                Err(_) => return Ok(Found::Missing),
            };
        }
        Ok(found)
    }

    /// Forgets the checks of every path strictly below `dest` (a new mount covers them).
    /// Compared as bytes: the keys are built component by component (no `.`, no doubled or
    /// trailing `/`), and `dest` is brought to the same form first. Path's own
    /// component-wise `starts_with` over every key after every operation was a tenth of
    /// init's root step (issue 42's start-up).
    fn forget_below(&mut self, dest: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let dest: PathBuf = dest.components().collect();
        let d = dest.as_os_str().as_bytes();
        let below = |p: &Path| {
            let p = p.as_os_str().as_bytes();
            p.len() > d.len() && p.starts_with(d) && (d == b"/" || p[d.len()] == b'/')
        };
        self.checked.retain(|p, _| !below(p));
    }

    fn ensure_dir(&mut self, dest: &Path) -> Result<PathBuf, MountError> {
        let found = self.reject_links(dest)?;
        let path = self.staged(dest);
        if found != Found::Dir {
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

    fn ensure_file(&mut self, dest: &Path) -> Result<PathBuf, MountError> {
        let found = self.reject_links(dest)?;
        let path = self.staged(dest);
        if found == Found::Missing {
            if let Some(parent) = dest.parent() {
                self.ensure_dir(parent)?;
            }
            std::fs::File::create(&path).map_err(|e| MountError::Target {
                dest: dest.to_path_buf(),
                errno: io_errno(&e),
            })?;
        }
        Ok(path)
    }
}

/// What a path in the new root is ([`Builder::reject_links`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Missing,
    Dir,
    /// A file, device, FIFO or socket.
    Other,
}

fn write_file(path: &Path, bytes: &[u8], mode: u32, dest: &Path) -> Result<(), MountError> {
    let io = |e: std::io::Error| MountError::Op {
        kind: "file",
        dest: dest.to_path_buf(),
        errno: io_errno(&e),
    };
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // The mode given at creation, and set through the descriptor only where the caller's
    // umask narrowed it: no second walk of the path for each of a run's twenty files.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    // Under the usual umask (022) the mode is already right.
    if file.metadata().map_err(io)?.permissions().mode() & 0o7777 != mode {
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
    }
    Ok(())
}

/// Writes a new file (`O_EXCL`: never one already there, so nothing to truncate) with `mode`,
/// set again through the descriptor only where `umask` takes bits from it: one `openat`, one
/// `write`, one `close` for each generated file under the usual umask (`openat`, not `open`:
/// musl's `open` follows an `O_CLOEXEC` open with an `fcntl` setting the flag again).
fn write_new_file(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    umask: u32,
    dest: &Path,
) -> Result<(), MountError> {
    use nix::fcntl::OFlag;
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let io = |e: std::io::Error| MountError::Op {
        kind: "file",
        dest: dest.to_path_buf(),
        errno: io_errno(&e),
    };
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
    let fd = nix::fcntl::openat(
        None,
        path,
        flags | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::from_bits_truncate(mode as libc::mode_t),
    )
    .map_err(|errno| MountError::Op {
        kind: "file",
        dest: dest.to_path_buf(),
        errno,
    })?;
    // SAFETY: openat returned a fresh descriptor that nothing else owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    if !bytes.is_empty() {
        file.write_all(bytes).map_err(io)?;
    }
    if mode & umask != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
    }
    Ok(())
}

/// Builds the new root from `ops` and pivots into it. On return the process's root is the
/// new root, the host's root is detached, and the working directory is `/`. Without a mount
/// namespace of the process's own (`own_namespace` false) the root is built in place
/// ([`build_root_in_place`]). `trees`: the creator's idmapped trees.
pub(crate) fn build_root(
    ops: &[MountOp],
    own_namespace: bool,
    trees: Vec<crate::sandbox::isolation::idmap::Tree>,
    join_net: Option<&dyn Fn() -> Result<(), Errno>>,
) -> Result<(), MountError> {
    if !own_namespace {
        if let Some(join) = join_net {
            join().map_err(MountError::Network)?;
        }
        return build_root_in_place(ops, trees);
    }
    let sys = Host;
    sys.mount(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )
    .map_err(MountError::Private)?;
    enter_staging(&sys)?;
    crate::trace::step("init", "  mount staging root");
    let mut builder = Builder::new(&sys, Layout::sandbox()).with_trees(trees);
    builder.run_joining(ops, join_net)?;
    let newroot = builder.newroot();
    drop(builder);
    std::env::set_current_dir(&newroot).map_err(|e| MountError::Pivot(io_errno(&e)))?;
    let here = Path::new(".");
    sys.pivot_root(here, here).map_err(MountError::Pivot)?;
    sys.umount2(here, MntFlags::MNT_DETACH)
        .map_err(MountError::Detach)?;
    nix::unistd::chdir("/").map_err(MountError::Pivot)?;
    root_propagation(&sys, ops)
}

/// The root's propagation (OCI `linux.rootfsPropagation`) once it is the root, as runc sets
/// it: `pivot_root` refuses a shared new root.
fn root_propagation(sys: &dyn Syscall, ops: &[MountOp]) -> Result<(), MountError> {
    for op in ops {
        if let MountOp::RootPropagation { flag } = op {
            let (_, propagation) = crate::plan::mounts::flag_bits(std::slice::from_ref(flag));
            if let Some(p) = propagation {
                let flags = MsFlags::from_bits_truncate(p as libc::c_ulong);
                sys.mount(None, Path::new("/"), None, flags, None)
                    .map_err(|errno| MountError::Op {
                        kind: "propagation",
                        dest: "/".into(),
                        errno,
                    })?;
            }
        }
    }
    Ok(())
}

/// A container without a mount namespace of its own (an OCI config without one), as runc
/// runs it: the root is built where the bundle's root filesystem is, in the caller's mount
/// namespace (where its mounts stay), and entered by chroot (`pivot_root` would change the
/// root of every process of that namespace). The bundle's root is first bound on itself and
/// made private, so nothing mounted in it propagates to the host's peers; generated files
/// live on a tmpfs on a fresh directory of the host's that is detached before the chroot
/// (the binds of its files keep them).
fn build_root_in_place(
    ops: &[MountOp],
    trees: Vec<crate::sandbox::isolation::idmap::Tree>,
) -> Result<(), MountError> {
    let sys = Host;
    let root = ops
        .iter()
        .find_map(|op| match op {
            MountOp::RootBind { src } => Some(src.clone()),
            _ => None,
        })
        .ok_or(MountError::NoRootfs)?;
    let base = STAGING_CANDIDATES
        .iter()
        .find(|p| Path::new(p).is_dir())
        .ok_or(MountError::NoStaging)?;
    let staging = |e| MountError::Staging(base.to_string(), e);
    let dir = tempfile::Builder::new()
        .prefix(".reprorun-staging-")
        .tempdir_in(base)
        .map_err(|e| staging(io_errno(&e)))?;
    sys.mount(
        Some(Path::new("tmpfs")),
        dir.path(),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m"),
    )
    .map_err(staging)?;
    let layout = Layout {
        staging: dir.path().to_path_buf(),
        oldroot: "/".into(),
        newroot: root.clone(),
        private_root: true,
    };
    let built = Builder::new(&sys, layout).with_trees(trees).run(ops);
    let detached = sys.umount2(dir.path(), MntFlags::MNT_DETACH);
    drop(dir);
    built?;
    detached.map_err(MountError::Detach)?;
    std::env::set_current_dir(&root).map_err(|e| MountError::Chroot(io_errno(&e)))?;
    nix::unistd::chroot(".").map_err(MountError::Chroot)?;
    nix::unistd::chdir("/").map_err(MountError::Chroot)?;
    root_propagation(&sys, ops)
}

/// Pivots into a fresh tmpfs on one of [`STAGING_CANDIDATES`], the host's root at
/// `/oldroot`, with an empty `/newroot` to build in.
fn enter_staging(sys: &dyn Syscall) -> Result<(), MountError> {
    let base = STAGING_CANDIDATES
        .iter()
        .find(|p| Path::new(p).is_dir())
        .ok_or(MountError::NoStaging)?;
    let staging = |e| MountError::Staging(base.to_string(), e);
    sys.mount(
        Some(Path::new("tmpfs")),
        Path::new(base),
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m"),
    )
    .map_err(staging)?;
    for dir in ["newroot", "oldroot"] {
        std::fs::create_dir(Path::new(base).join(dir)).map_err(|e| staging(io_errno(&e)))?;
    }
    sys.pivot_root(Path::new(base), &Path::new(base).join("oldroot"))
        .map_err(MountError::Pivot)?;
    nix::unistd::chdir("/").map_err(MountError::Pivot)
}
