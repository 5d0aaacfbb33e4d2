//! Directory lookups of the extractor: beneath the root, never through a link, the last one
//! kept open.

use super::*;

impl Extractor {
    /// Forgets the directory kept open by [`Self::resolve_dir`].
    pub(super) fn forget_dirs(&self) {
        self.last_dir.borrow_mut().take();
    }

    /// Opens `dir` (relative to the root) without following any link. `None` when a
    /// component is missing and `create` is false.
    ///
    /// The directory last opened is reused; otherwise one `openat2` beneath the root with
    /// no symbolic link allowed anywhere; where that fails (a component missing or not a
    /// directory, a link on the way, an older kernel), the walk one component at a time,
    /// which creates what is missing and says which component was in the way.
    pub(super) fn resolve_dir(
        &self,
        dir: &Path,
        shown: &str,
        create: bool,
    ) -> Result<Option<Rc<OwnedFd>>, ExtractError> {
        if let Some((path, fd)) = self.last_dir.borrow().as_ref() {
            if path == dir {
                return Ok(Some(Rc::clone(fd)));
            }
        }
        let fd = match self.open_beneath(dir) {
            Some(fd) => fd,
            None => match self.walk_dir(dir, shown, create)? {
                Some(fd) => fd,
                None => return Ok(None),
            },
        };
        let fd = Rc::new(fd);
        *self.last_dir.borrow_mut() = Some((dir.to_path_buf(), Rc::clone(&fd)));
        Ok(Some(fd))
    }

    /// One `openat2` of `dir` beneath the root, refusing every symbolic link; `None` if it
    /// fails for any reason (the walk then decides).
    fn open_beneath(&self, dir: &Path) -> Option<OwnedFd> {
        if dir.as_os_str().is_empty() {
            return dup(self.root.as_raw_fd()).ok();
        }
        let resolve = crate::sys::RESOLVE_BENEATH
            | crate::sys::RESOLVE_NO_SYMLINKS
            | crate::sys::RESOLVE_NO_MAGICLINKS;
        crate::sys::openat2(
            &self.root,
            dir,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            resolve,
        )
        .ok()
        .map(OwnedFd::from)
    }

    /// The walk of [`Self::resolve_dir`], one component at a time with `O_NOFOLLOW`.
    fn walk_dir(
        &self,
        dir: &Path,
        shown: &str,
        create: bool,
    ) -> Result<Option<OwnedFd>, ExtractError> {
        let mut fd = dup(self.root.as_raw_fd()).map_err(|e| fs_err("open root for", shown, e))?;
        let mut walked = PathBuf::new();
        for part in dir.components() {
            let Component::Normal(part) = part else {
                continue;
            };
            walked.push(part);
            let next = match open_dir(fd.as_raw_fd(), part) {
                Ok(next) => next,
                Err(Errno::ENOENT) if create => {
                    mkdir(fd.as_raw_fd(), part)
                        .map_err(|e| fs_err("create directory", shown, e))?;
                    open_dir(fd.as_raw_fd(), part).map_err(|e| fs_err("open", shown, e))?
                }
                Err(Errno::ENOENT) => return Ok(None),
                Err(Errno::ELOOP) => {
                    return Err(ExtractError::ThroughLink {
                        path: shown.to_string(),
                        link: walked.display().to_string(),
                    })
                }
                Err(Errno::ENOTDIR) => {
                    // O_NOFOLLOW|O_DIRECTORY on a link gives ENOTDIR on some paths: tell which.
                    let st = fstatat(
                        Some(fd.as_raw_fd()),
                        part,
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    );
                    let link = st.is_ok_and(|s| {
                        SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
                    });
                    return Err(if link {
                        ExtractError::ThroughLink {
                            path: shown.to_string(),
                            link: walked.display().to_string(),
                        }
                    } else {
                        ExtractError::NotDir {
                            path: shown.to_string(),
                            parent: walked.display().to_string(),
                        }
                    });
                }
                Err(e) => return Err(fs_err("open", shown, e)),
            };
            fd = next;
        }
        Ok(Some(fd))
    }
}
