//! One mount operation of a plan, performed by the [`Builder`].

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MsFlags;

use super::{io_errno, write_file, Builder, Found, MountError};
use crate::plan::MountOp;
use crate::sys::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};

/// The attributes of every read-only bind reprorun makes.
pub(super) const READ_ONLY: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

/// The attributes of a host device node bound into the sandbox: the mount is read-only, so
/// nothing inside can `chmod`, `chown` or `touch` the host's node (reads and writes of the
/// device itself do not write the mount and still work).
pub(super) const DEVICE_BIND: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;

/// Mount flags of every filesystem reprorun mounts itself.
pub(super) const HARDENED: MsFlags = MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV);

/// The error of one step on `dest`.
pub(super) fn fail(kind: &'static str, dest: &Path) -> impl Fn(Errno) -> MountError {
    let dest = dest.to_path_buf();
    move |errno| MountError::Op {
        kind,
        dest: dest.clone(),
        errno,
    }
}

fn target_error(dest: &Path) -> impl Fn(std::io::Error) -> MountError + '_ {
    move |e| MountError::Target {
        dest: dest.to_path_buf(),
        errno: io_errno(&e),
    }
}

/// `MOUNT_ATTR_*` (set, clear) for the flag words of a bind.
pub(super) fn bind_attrs(words: &[String]) -> (u64, u64) {
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

impl Builder<'_> {
    /// A filesystem of type `fstype` (its own source name) at `path`.
    pub(super) fn fs(
        &self,
        fstype: &str,
        path: &Path,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<(), Errno> {
        self.sys
            .mount(Some(Path::new(fstype)), path, Some(fstype), flags, data)
    }

    /// Binds `src` onto `path` (with everything mounted below it when `recursive`) and sets
    /// `attrs` (MOUNT_ATTR_*) on the new mount — and, when recursive, on every mount below.
    pub(super) fn bind(
        &self,
        src: &Path,
        path: &Path,
        recursive: bool,
        attrs: u64,
        kind: &'static str,
        dest: &Path,
    ) -> Result<(), MountError> {
        self.bind_with(src, path, recursive, (attrs, 0), kind, dest)
    }

    /// [`Builder::bind`] that also clears attributes: `(set, clear)`.
    fn bind_with(
        &self,
        src: &Path,
        path: &Path,
        recursive: bool,
        (set, clear): (u64, u64),
        kind: &'static str,
        dest: &Path,
    ) -> Result<(), MountError> {
        let mut flags = MsFlags::MS_BIND;
        if recursive {
            flags |= MsFlags::MS_REC;
        }
        self.sys
            .mount(Some(src), path, None, flags, None)
            .map_err(fail(kind, dest))?;
        self.sys
            .mount_setattr(path, recursive, set, clear)
            .map_err(fail(kind, dest))
    }

    /// Applies a propagation change (`MS_PRIVATE`, `MS_SLAVE`, ... with `MS_REC`).
    pub(super) fn propagate(
        &self,
        path: &Path,
        propagation: Option<u64>,
        dest: &Path,
    ) -> Result<(), MountError> {
        let Some(p) = propagation else { return Ok(()) };
        let flags = MsFlags::from_bits_truncate(p as libc::c_ulong);
        self.sys
            .mount(None, path, None, flags, None)
            .map_err(fail("propagation", dest))
    }

    /// A host source and the mount point made for it at `dest`: a directory for a directory,
    /// an empty file for anything else.
    fn bind_point(&mut self, src: &Path, dest: &Path) -> Result<(PathBuf, PathBuf), MountError> {
        let source = self.host(src);
        let path = if source.is_dir() {
            self.ensure_dir(dest)?
        } else {
            self.ensure_file(dest)?
        };
        Ok((source, path))
    }

    /// The host's /sys, read-only, where a fresh sysfs is refused (the net namespace is not
    /// ours).
    fn host_sysfs(&self, path: &Path, dest: &Path) -> Result<(), MountError> {
        let sys = self.host(Path::new("/sys"));
        self.bind(&sys, path, true, READ_ONLY, "sysfs", dest)
    }

    /// Hides `dest`: a directory under an empty read-only directory, anything else under
    /// the host's null device (both bound from the read-only sources, `sources.rs`).
    fn mask(&mut self, dest: &Path) -> Result<(), MountError> {
        let path = self.staged(dest);
        match self.reject_links(dest)? {
            Found::Missing => Ok(()), // nothing there on this kernel
            Found::Dir => self.mask_dir(&path, dest),
            Found::Other => self.mask_file(&path, dest),
        }
    }

    /// Makes a device node (OCI `linux.devices`); where mknod is refused (a user namespace),
    /// the host's node at the same path is bound instead, read-only, if it is the same device.
    fn device(
        &mut self,
        dest: &Path,
        kind: char,
        (major, minor): (i64, i64),
        mode: u32,
        (uid, gid): (u32, u32),
    ) -> Result<(), MountError> {
        use nix::sys::stat::{mknod, Mode, SFlag};
        if let Some(parent) = dest.parent() {
            self.ensure_dir(parent)?;
        }
        self.reject_links(dest)?;
        let path = self.staged(dest);
        let fail = fail("device", dest);
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
                .map_err(&fail)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(|e| fail(io_errno(&e)))
            }
            Err(Errno::EPERM) => {
                let src = self.host(dest);
                let same = std::fs::metadata(&src).is_ok_and(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.rdev() == dev
                });
                if !same {
                    return Err(fail(Errno::EPERM));
                }
                let path = self.ensure_file(dest)?;
                self.bind(&src, &path, false, DEVICE_BIND, "device", dest)
            }
            Err(e) => Err(fail(e)),
        }
    }

    /// Performs one operation.
    pub(super) fn apply(&mut self, op: &MountOp) -> Result<(), MountError> {
        let remount_ro = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | HARDENED;
        match op {
            MountOp::Tmpfs { dest, mode, size } => self.tmpfs(dest, *mode, *size),
            MountOp::Proc { dest } => {
                let path = self.ensure_dir(dest)?;
                self.fs("proc", &path, HARDENED | MsFlags::MS_NOEXEC, None)
                    .map_err(fail("proc", dest))
            }
            MountOp::Sysfs { dest } => self.sysfs(dest),
            MountOp::Devpts { dest } => {
                let path = self.ensure_dir(dest)?;
                let flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
                let data = "newinstance,ptmxmode=0666,mode=0620";
                self.fs("devpts", &path, flags, Some(data))
                    .map_err(fail("devpts", dest))
            }
            MountOp::Fs {
                fstype,
                source,
                dest,
                flags,
                data,
            } => self.oci_fs(fstype, source, dest, flags, data),
            MountOp::Bind {
                src,
                dest,
                readonly,
                idmap,
            } => {
                let attrs = match readonly {
                    true => READ_ONLY,
                    false => MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                };
                if idmap.is_some() {
                    // The creator's tree: the source is never looked up here.
                    let path = self.tree_point(dest)?;
                    return self.attach_tree(&path, true, (attrs, 0), dest);
                }
                let (source, path) = self.bind_point(src, dest)?;
                self.bind(&source, &path, true, attrs, "bind", dest)
            }
            MountOp::DevNode { src, dest } => {
                let path = self.ensure_file(dest)?;
                self.bind(&self.host(src), &path, false, DEVICE_BIND, "device", dest)
            }
            MountOp::FlagBind {
                src,
                dest,
                recursive,
                flags,
                idmap,
            } => self.flag_bind(src, dest, *recursive, flags, idmap.is_some()),
            MountOp::RootBind { src } => self.root_bind(src),
            MountOp::Overlay {
                lower,
                dest,
                keep,
                idmap,
            } => match idmap {
                Some(_) => self.overlay_on_trees(dest, keep.is_some()),
                None => self.overlay(lower, dest, keep.as_deref()),
            },
            MountOp::Mask { dest } => self.mask(dest),
            MountOp::ReadonlyPath { dest } => {
                if self.reject_links(dest)? == Found::Missing {
                    return Ok(()); // nothing there on this kernel
                }
                let path = self.staged(dest);
                self.bind(&path, &path, true, READ_ONLY, "read-only bind", dest)
            }
            MountOp::Readonly { dest } => self
                .sys
                .mount(None, &self.staged(dest), None, remount_ro, None)
                .map_err(fail("read-only remount", dest)),
            MountOp::ReadonlyRoot => self
                .sys
                .mount(None, &self.newroot(), None, remount_ro, None)
                .map_err(fail("read-only remount", Path::new("/"))),
            // After the pivot (a shared root cannot be pivoted): [`super::build_root`].
            MountOp::RootPropagation { .. } => Ok(()),
            MountOp::Symlink { target, dest } => {
                if let Some(parent) = dest.parent() {
                    self.ensure_dir(parent)?;
                }
                symlink(target, self.staged(dest)).map_err(target_error(dest))
            }
            MountOp::Dir { dest, mode } => {
                let path = self.ensure_dir(dest)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
                    .map_err(target_error(dest))
            }
            MountOp::RuntimeFiles { dir, clock, seed } => {
                let dir_path = self.ensure_dir(dir)?;
                crate::sandbox::write_runtime_files(&dir_path, *clock, *seed)
                    .map_err(|e| fail("runtime files", dir)(io_errno(&e)))
            }
            MountOp::File { dest, contents } => self.generated(dest, contents),
            MountOp::Fifo { dest, mode, links } => self.fifo(dest, *mode, links),
            MountOp::Preload { etc, lib } => self.preload(etc, lib),
            MountOp::PreloadFile { etc, lib } => self.preload_file(etc, lib),
            MountOp::Sysctl { key, value } => {
                let rel = key.replace('.', "/");
                let path = self.staged(&Path::new("/proc/sys").join(&rel));
                let dest = PathBuf::from(format!("/proc/sys/{rel}"));
                std::fs::write(&path, value).map_err(|e| fail("sysctl", &dest)(io_errno(&e)))
            }
            MountOp::Device {
                dest,
                kind,
                major,
                minor,
                mode,
                uid,
                gid,
            } => self.device(dest, *kind, (*major, *minor), *mode, (*uid, *gid)),
        }
    }

    fn tmpfs(&mut self, dest: &Path, mode: u32, size: Option<u64>) -> Result<(), MountError> {
        let path = self.ensure_dir(dest)?;
        let mut data = format!("mode={mode:04o}");
        if let Some(size) = size {
            data.push_str(&format!(",size={size}"));
        }
        self.fs("tmpfs", &path, HARDENED, Some(data.as_str()))
            .map_err(fail("tmpfs", dest))
    }

    fn sysfs(&mut self, dest: &Path) -> Result<(), MountError> {
        let path = self.ensure_dir(dest)?;
        let flags = HARDENED | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY;
        if self.fs("sysfs", &path, flags, None).is_err() {
            // Not the owner of the net namespace (--net host): the host's, read-only.
            self.host_sysfs(&path, dest)?;
        }
        Ok(())
    }

    /// OCI: a filesystem mount with flag words and data.
    fn oci_fs(
        &mut self,
        fstype: &str,
        source: &str,
        dest: &Path,
        flags: &[String],
        data: &str,
    ) -> Result<(), MountError> {
        let path = self.ensure_dir(dest)?;
        let (bits, propagation) = crate::plan::mounts::flag_bits(flags);
        let ms = MsFlags::from_bits_truncate(bits as libc::c_ulong);
        let data = (!data.is_empty()).then_some(data);
        let source = Path::new(source);
        // `tmpcopyup`: the covered directory, kept open to copy from once the tmpfs is on it.
        let below = match flags.iter().any(|f| f == "tmpcopyup") {
            true => Some(std::fs::File::open(&path).map_err(|e| MountError::Op {
                kind: "tmpcopyup",
                dest: dest.to_path_buf(),
                errno: io_errno(&e),
            })?),
            false => None,
        };
        let copy_up = || match &below {
            Some(dir) => super::copy_up::copy_tree(dir, &path).map_err(|e| MountError::Op {
                kind: "tmpcopyup",
                dest: dest.to_path_buf(),
                errno: io_errno(&e),
            }),
            None => Ok(()),
        };
        match self.sys.mount(Some(source), &path, Some(fstype), ms, data) {
            Ok(()) => copy_up()?,
            Err(Errno::EPERM | Errno::EACCES) if fstype == "sysfs" => {
                // Not the owner of the net namespace: the host's, read-only.
                self.host_sysfs(&path, dest)?;
            }
            other => other.map_err(fail("filesystem", dest))?,
        }
        self.propagate(&path, propagation, dest)
    }

    /// OCI: a bind with flag words applied to it afterwards; `idmapped`: the creator's
    /// detached idmapped tree of `src` is attached instead ([`Builder::attach_tree`]).
    fn flag_bind(
        &mut self,
        src: &Path,
        dest: &Path,
        recursive: bool,
        flags: &[String],
        idmapped: bool,
    ) -> Result<(), MountError> {
        let (source, path) = self.bind_point(src, dest)?;
        match idmapped {
            true => self.attach_tree(&path, recursive, bind_attrs(flags), dest)?,
            false => self.bind_with(&source, &path, recursive, bind_attrs(flags), "bind", dest)?,
        }
        let propagation = crate::plan::mounts::flag_bits(flags).1;
        self.propagate(&path, propagation, dest)
    }

    /// OCI: the bundle's root filesystem as the new root.
    fn root_bind(&mut self, src: &Path) -> Result<(), MountError> {
        let rec = MsFlags::MS_BIND | MsFlags::MS_REC;
        let (root, newroot) = (Path::new("/"), self.newroot());
        self.sys
            .mount(Some(&self.host(src)), &newroot, None, rec, None)
            .map_err(fail("root bind", root))?;
        if self.layout.private_root {
            let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
            self.sys
                .mount(None, &newroot, None, private, None)
                .map_err(fail("root bind (private)", root))?;
        }
        // Device nodes of the image are never honoured (/dev is the engine's tmpfs).
        self.sys
            .mount_setattr(&newroot, true, MOUNT_ATTR_NODEV, 0)
            .map_err(fail("root bind", root))
    }

    /// A FIFO at `dest` with hard links at `links`.
    fn fifo(&mut self, dest: &Path, mode: u32, links: &[PathBuf]) -> Result<(), MountError> {
        if let Some(parent) = dest.parent() {
            self.ensure_dir(parent)?;
        }
        self.reject_links(dest)?;
        let path = self.staged(dest);
        let target = |errno| MountError::Target {
            dest: dest.to_path_buf(),
            errno,
        };
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(mode))
            .map_err(target)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| target(io_errno(&e)))?;
        for link in links {
            self.reject_links(link)?;
            std::fs::hard_link(&path, self.staged(link)).map_err(target_error(link))?;
        }
        Ok(())
    }

    /// Covers `etc` with a read-only overlay whose top layer holds an `ld.so.preload` naming
    /// `lib`. The layer lives in the staging root; the overlay keeps it alive.
    fn preload(&mut self, etc: &Path, lib: &Path) -> Result<(), MountError> {
        let top = self.beside("preload-etc");
        std::fs::create_dir_all(&top).map_err(|e| fail("preload layer", etc)(io_errno(&e)))?;
        let line = format!("{}\n", lib.display());
        write_file(&top.join("ld.so.preload"), line.as_bytes(), 0o644, etc)?;
        let lower = self.ensure_dir(etc)?;
        let data = format!("lowerdir={}:{}", top.display(), lower.display());
        self.fs(
            "overlay",
            &lower,
            HARDENED | MsFlags::MS_RDONLY,
            Some(data.as_str()),
        )
        .map_err(fail("overlay", etc))
    }

    /// Writes `etc/ld.so.preload` naming `lib` on a writable root. Whatever is there (a file,
    /// or a link, which is removed rather than followed) is replaced; the new file is created
    /// exclusively, so it cannot be written through a link.
    fn preload_file(&mut self, etc: &Path, lib: &Path) -> Result<(), MountError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let dir = self.ensure_dir(etc)?;
        let dest = etc.join("ld.so.preload");
        let io = |e: std::io::Error| fail("preload file", &dest)(io_errno(&e));
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
}
