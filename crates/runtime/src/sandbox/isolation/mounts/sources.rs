//! Read-only sources made once per root and bound many times: the generated files, an empty
//! directory for the masks of directories, and the host's null device for the masks of
//! files. A bind copies the flags of the mount it is made from, so a bind from the read-only
//! view made here is read-only, `nosuid` and `nodev` without a `mount_setattr` of its own,
//! and a directory mask is a bind rather than a tmpfs of its own (a superblock made and torn
//! down per mask): issue 20.
//!
//! Beside the new root (in the staging root, detached after the pivot; each bind keeps what
//! it shows): `generated/` is written, `generated-ro/` is `generated/` bound read-only, and
//! `generated-ro/null` has the host's null device bound on it (read-only too).
//!
//! Each distinct content is written once, to a new file (`O_EXCL`, no truncation), and bound
//! wherever it is pinned: `/sys/devices/system/cpu/{online,possible,present}` are one file.
//! Creating a tmpfs file was the largest single cost of a pinned fact at start-up (issue 42's
//! profile: more than the bind itself), and the mode is set through the descriptor only where
//! the umask, read once, would narrow it.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::apply::{fail, READ_ONLY};
use super::{io_errno, write_new_file, Builder, MountError};

/// Which sources are made (their paths follow from the staging root).
#[derive(Debug, Default)]
pub(super) struct Sources {
    /// `generated/` and its read-only view `generated-ro/`.
    view: bool,
    /// The null device, bound at `generated-ro/null`.
    null: bool,
    /// The file name in `generated/` of each content written so far.
    written: std::collections::HashMap<String, String>,
    /// The process's umask, read on the first generated file.
    umask: Option<u32>,
}

/// Where generated files are written, beside the new root.
const WRITTEN: &str = "generated";
/// `WRITTEN` bound read-only: what is bound from.
const VIEW: &str = "generated-ro";
/// The directory name of the empty directory in `generated/`.
const EMPTY: &str = "empty";
/// The file name the null device is bound on in `generated-ro/`.
const NULL: &str = "null";

impl Builder<'_> {
    /// `generated-ro/`, made (with `generated/`, its empty directory and the null device's
    /// mount point) on first use.
    fn view(&mut self, dest: &Path) -> Result<PathBuf, MountError> {
        let view = self.beside(VIEW);
        if self.sources.view {
            return Ok(view);
        }
        let written = self.beside(WRITTEN);
        let made = |path: &Path, mode: u32| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(path)
        };
        // `generated/` itself writable by its owner (a recursive create would give it the
        // empty directory's mode).
        made(&written, 0o755)
            .and_then(|()| made(&written.join(EMPTY), 0o555))
            .and_then(|()| made(&view, 0o755))
            .and_then(|()| std::fs::File::create(written.join(NULL)).map(drop))
            .map_err(|e| fail("generated files", dest)(io_errno(&e)))?;
        self.bind(&written, &view, false, READ_ONLY, "generated files", dest)?;
        self.sources.view = true;
        Ok(view)
    }

    /// A generated file bound read-only over `dest`.
    pub(super) fn generated(&mut self, dest: &Path, contents: &str) -> Result<(), MountError> {
        let view = self.view(dest)?;
        let name = match self.sources.written.get(contents) {
            Some(name) => name.clone(),
            None => {
                // Numbered, so that two destinations never name one file (`/a_b`, `/a/b`).
                let n = self.sources.written.len();
                let flat = dest
                    .to_string_lossy()
                    .trim_start_matches('/')
                    .replace('/', "_");
                let name = format!("{n}-{flat}");
                let umask = *self.sources.umask.get_or_insert_with(current_umask);
                let written = self.beside(WRITTEN).join(&name);
                write_new_file(&written, contents.as_bytes(), 0o444, umask, dest)?;
                self.sources
                    .written
                    .insert(contents.to_owned(), name.clone());
                name
            }
        };
        let path = self.ensure_file(dest)?;
        self.bind_as_is(&view.join(name), &path, "bind", dest)
    }

    /// An empty read-only directory over the directory `path` (`dest` in the new root).
    pub(super) fn mask_dir(&mut self, path: &Path, dest: &Path) -> Result<(), MountError> {
        let empty = self.view(dest)?.join(EMPTY);
        self.bind_as_is(&empty, path, "mask", dest)
    }

    /// The host's null device, read-only, over the file `path` (`dest` in the new root). The
    /// device is opened without following links and checked to be the real `/dev/null`
    /// (character device 1:3) before it is bound, through its descriptor, so a replaced node
    /// cannot turn the mask into a bind of something else (CVE-2025-31133).
    pub(super) fn mask_file(&mut self, path: &Path, dest: &Path) -> Result<(), MountError> {
        use std::os::fd::AsRawFd;
        let null = self.view(dest)?.join(NULL);
        if !self.sources.null {
            let fd = super::open_null_device(&self.host(Path::new("/dev/null"))).map_err(
                |(kind, errno)| MountError::Op {
                    kind,
                    dest: dest.to_path_buf(),
                    errno,
                },
            )?;
            // Through the sandbox's own procfs (mounted already): the staging root has none.
            let src = self.staged(Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())));
            self.bind(&src, &null, false, READ_ONLY, "mask", dest)?;
            self.sources.null = true;
        }
        self.bind_as_is(&null, path, "mask", dest)
    }

    /// Binds `src` onto `path` as it is: the new mount has the flags of `src`'s.
    fn bind_as_is(
        &self,
        src: &Path,
        path: &Path,
        kind: &'static str,
        dest: &Path,
    ) -> Result<(), MountError> {
        let flags = nix::mount::MsFlags::MS_BIND;
        self.sys
            .mount(Some(src), path, None, flags, None)
            .map_err(fail(kind, dest))
    }
}

/// The process's umask (two calls: reading it sets it).
fn current_umask() -> u32 {
    use nix::sys::stat::{umask, Mode};
    let old = umask(Mode::from_bits_truncate(0o022));
    umask(old);
    old.bits()
}
