//! The state root (`--root`): one directory per container holding `state.json` (what
//! `reprorun state` prints plus what later commands need), `plan.json` (the resolved plan,
//! for `exec`), `exec.fifo` while the container is created but not started, and the
//! monitor's `exec.sock`. Commands on one container serialise on an exclusive `flock` of
//! its directory; commands on different containers never share a file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::spec::Hooks;

pub const STATE_FILE: &str = "state.json";
pub const PLAN_FILE: &str = "plan.json";
pub const EXEC_FIFO: &str = "exec.fifo";
pub const EXEC_SOCKET: &str = "exec.sock";
/// Written first by `create` with its pid: a directory holding only this file, whose
/// creator is gone, is the remains of a crashed create.
pub const CREATING_FILE: &str = "creating";

#[derive(Debug, Error)]
pub enum StateError {
    #[error("container {0:?} does not exist")]
    NotFound(String),
    #[error("container {0:?} already exists; pick another id or `reprorun delete` it")]
    Exists(String),
    #[error("container id {0:?} is invalid: use 1 to 1024 letters, digits, '_', '-', '.', not starting with '.'")]
    BadId(String),
    #[error("state root {path}: {source}; pass --root DIR to use another")]
    Root {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("state of container {id:?} is unreadable: {reason}; remove {path} by hand")]
    Corrupt {
        id: String,
        path: PathBuf,
        reason: String,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StateError {
    let path = path.to_path_buf();
    move |source| StateError::Io { what, path, source }
}

/// The default state root: `/run/reprorun` for root, `$XDG_RUNTIME_DIR/reprorun` otherwise
/// (or `/tmp/reprorun-UID` without it).
pub fn default_root() -> PathBuf {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/reprorun");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => Path::new(&dir).join("reprorun"),
        None => PathBuf::from(format!("/tmp/reprorun-{uid}")),
    }
}

/// Checks a container id: what runc accepts, and never a path.
pub fn check_id(id: &str) -> Result<(), StateError> {
    let ok = !id.is_empty()
        && id.len() <= 1024
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+'));
    if ok {
        Ok(())
    } else {
        Err(StateError::BadId(id.to_string()))
    }
}

/// What is saved about a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub id: String,
    pub pid: i32,
    /// Start time of `pid` (field 22 of /proc/PID/stat): tells a recycled pid apart.
    pub pid_start: u64,
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    pub created: String,
    pub annotations: BTreeMap<String, String>,
    pub owner: String,
    pub cgroup_dirs: Vec<PathBuf>,
    pub hooks: Hooks,
}

/// A container's status, as the OCI runtime spec names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Creating,
    Created,
    Running,
    Stopped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Stopped => "stopped",
        })
    }
}

/// The OCI state document (`reprorun state`, and hooks' standard input).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OciState {
    pub oci_version: String,
    pub id: String,
    pub status: Status,
    pub pid: i32,
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    pub created: String,
    pub annotations: BTreeMap<String, String>,
    pub owner: String,
}

/// Start time of a process, from /proc/PID/stat (field 22), if it lives.
pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count from the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); field 22 is index 19; a zombie counts as gone.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// The state root, opened (created if missing, mode 0711).
pub struct Root {
    pub path: PathBuf,
}

/// A container's directory, locked for the lifetime of this value.
pub struct Dir {
    pub id: String,
    pub path: PathBuf,
    /// The exclusive `flock` of the directory, while held.
    lock: Option<nix::fcntl::Flock<std::fs::File>>,
}

impl Root {
    pub fn open(path: &Path) -> Result<Root, StateError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(path)
            .map_err(|source| StateError::Root {
                path: path.to_path_buf(),
                source,
            })?;
        // Another user's directory (or a link planted at a predictable path) would let them
        // plant hooks or receive our listeners.
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).map_err(|source| StateError::Root {
            path: path.to_path_buf(),
            source,
        })?;
        let ours = meta.is_dir()
            && meta.uid() == nix::unistd::geteuid().as_raw()
            && meta.mode() & 0o022 == 0;
        if !ours {
            return Err(StateError::Root {
                path: path.to_path_buf(),
                source: std::io::Error::other(
                    "not a directory owned by this user without group or other write permission",
                ),
            });
        }
        Ok(Root {
            path: path.to_path_buf(),
        })
    }

    fn lock(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, StateError> {
        // std opens with O_CLOEXEC.
        let f = std::fs::File::open(path).map_err(io("open", path))?;
        nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| io("lock", path)(errno.into()))
    }

    /// Makes a new container directory (locked), clearing the remains of a crashed create
    /// of the same id first.
    pub fn create(&self, id: &str) -> Result<Dir, StateError> {
        check_id(id)?;
        let path = self.path.join(id);
        for _ in 0..2 {
            let made = {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new().mode(0o700).create(&path)
            };
            match made {
                Ok(()) => {
                    let lock = Self::lock(&path)?;
                    let mut f = std::fs::File::create(path.join(CREATING_FILE))
                        .map_err(io("write", &path))?;
                    let me = std::process::id() as i32;
                    let _ = write!(f, "{me} {}", start_time(me).unwrap_or(0));
                    return Ok(Dir {
                        id: id.to_string(),
                        path,
                        lock: Some(lock),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let lock = Self::lock(&path)?;
                    if !is_stale(&path) {
                        return Err(StateError::Exists(id.to_string()));
                    }
                    clear_stale(&path);
                    drop(lock);
                }
                Err(e) => return Err(io("create", &path)(e)),
            }
        }
        Err(StateError::Exists(id.to_string()))
    }

    /// Opens an existing container directory (locked).
    pub fn get(&self, id: &str) -> Result<Dir, StateError> {
        check_id(id).map_err(|_| StateError::NotFound(id.to_string()))?;
        let path = self.path.join(id);
        if !path.is_dir() {
            return Err(StateError::NotFound(id.to_string()));
        }
        let lock = Self::lock(&path)?;
        if !is_complete(&path) {
            if is_stale(&path) {
                clear_stale(&path);
            }
            return Err(StateError::NotFound(id.to_string()));
        }
        Ok(Dir {
            id: id.to_string(),
            path,
            lock: Some(lock),
        })
    }

    /// Every container id, sorted; remains of crashed creates are cleared on the way.
    pub fn ids(&self) -> Result<Vec<String>, StateError> {
        let mut ids = Vec::new();
        let entries = std::fs::read_dir(&self.path).map_err(|source| StateError::Root {
            path: self.path.clone(),
            source,
        })?;
        for e in entries.flatten() {
            let Some(name) = e.file_name().to_str().map(String::from) else {
                continue;
            };
            if is_complete(&e.path()) {
                ids.push(name);
            } else if is_stale(&e.path()) {
                if let Ok(lock) = Self::lock(&e.path()) {
                    if is_stale(&e.path()) {
                        clear_stale(&e.path());
                    }
                    drop(lock);
                }
            }
        }
        ids.sort();
        Ok(ids)
    }
}

/// A container whose `create` finished: its state is saved and `creating` is gone.
fn is_complete(path: &Path) -> bool {
    path.join(STATE_FILE).exists() && !path.join(CREATING_FILE).exists()
}

/// The remains of a `create` that did not finish and whose process is gone (killed, or
/// crashed): `creating` names a pid that no longer runs (with that start time).
fn is_stale(path: &Path) -> bool {
    if is_complete(path) {
        return false;
    }
    let text = std::fs::read_to_string(path.join(CREATING_FILE)).unwrap_or_default();
    let mut parts = text.split_whitespace().map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(pid), Some(start)) => start_time(pid as i32) != Some(start),
        (Some(pid), None) => start_time(pid as i32).is_none(),
        _ => !path.join(CREATING_FILE).exists(),
    }
}

/// Clears a stale directory: a container init that outlived its creator is killed, the
/// cgroup (if the state got that far) and the directory removed.
fn clear_stale(path: &Path) {
    if let Ok(saved) = std::fs::read_to_string(path.join(STATE_FILE))
        .map_err(|_| ())
        .and_then(|t| serde_json::from_str::<Saved>(&t).map_err(|_| ()))
    {
        if saved.pid > 0 && start_time(saved.pid) == Some(saved.pid_start) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(saved.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        crate::sandbox::remove_cgroup(&saved.cgroup_dirs);
    }
    let _ = std::fs::remove_dir_all(path);
}

/// Writes `bytes` to `path` atomically (temporary file, then rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    // Owner only: the plan holds the container's environment.
    crate::sys::write_atomic(path, bytes, 0o600).map_err(io("write", path))
}

impl Dir {
    /// Releases the lock early (before processes are started that would inherit it).
    pub fn unlock(&mut self) {
        self.lock = None;
    }

    pub fn save(&self, saved: &Saved) -> Result<(), StateError> {
        let bytes = serde_json::to_vec_pretty(saved).expect("state serializes");
        write_atomic(&self.path.join(STATE_FILE), &bytes)
    }

    /// Marks the create finished: from now on the container is visible to other commands.
    pub fn complete(&self) -> Result<(), StateError> {
        let path = self.path.join(CREATING_FILE);
        std::fs::remove_file(&path).map_err(io("remove", &path))
    }

    pub fn load(&self) -> Result<Saved, StateError> {
        let path = self.path.join(STATE_FILE);
        let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
        serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
            id: self.id.clone(),
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    pub fn save_plan(&self, plan: &crate::plan::Plan) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(plan).expect("plans serialize");
        write_atomic(&self.path.join(PLAN_FILE), &bytes)
    }

    pub fn load_plan(&self) -> Result<crate::plan::Plan, StateError> {
        let path = self.path.join(PLAN_FILE);
        let text = std::fs::read_to_string(&path).map_err(io("read", &path))?;
        serde_json::from_str(&text).map_err(|e| StateError::Corrupt {
            id: self.id.clone(),
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    pub fn fifo(&self) -> PathBuf {
        self.path.join(EXEC_FIFO)
    }

    pub fn exec_socket(&self) -> PathBuf {
        self.path.join(EXEC_SOCKET)
    }

    /// The container's status now.
    pub fn status(&self, saved: &Saved) -> Status {
        if saved.pid <= 0 {
            return Status::Creating;
        }
        if start_time(saved.pid) != Some(saved.pid_start) {
            return Status::Stopped;
        }
        if self.fifo().exists() {
            Status::Created
        } else {
            Status::Running
        }
    }

    /// Removes the directory (the lock goes with it).
    pub fn remove(self) -> Result<(), StateError> {
        std::fs::remove_dir_all(&self.path).map_err(io("remove", &self.path))
    }
}

impl Saved {
    pub fn oci_state(&self, status: Status) -> OciState {
        OciState {
            oci_version: super::OCI_VERSION.into(),
            id: self.id.clone(),
            status,
            pid: if status == Status::Stopped {
                0
            } else {
                self.pid
            },
            bundle: self.bundle.clone(),
            rootfs: self.rootfs.clone(),
            created: self.created.clone(),
            annotations: self.annotations.clone(),
            owner: self.owner.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_names_never_paths() {
        for ok in ["abc", "a.b-c_d", "61932a55be10938b", "x+y"] {
            assert!(check_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            ".hidden",
            "a b",
            &"x".repeat(1025),
        ] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn create_get_and_stale_remains() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::open(&tmp.path().join("state")).unwrap();
        let dir = root.create("c1").unwrap();
        // A create in progress (its creator lives: us) is not stale.
        drop(dir);
        assert!(matches!(root.create("c1"), Err(StateError::Exists(_))));
        assert!(matches!(root.get("c1"), Err(StateError::NotFound(_))));
        // A crashed creator: the remains are cleared and the id can be used again.
        std::fs::write(tmp.path().join("state/c1").join(CREATING_FILE), "999999999").unwrap();
        assert!(root.ids().unwrap().is_empty());
        assert!(!tmp.path().join("state/c1").exists());
        let dir = root.create("c1").unwrap();
        let saved = Saved {
            id: "c1".into(),
            pid: std::process::id() as i32,
            pid_start: start_time(std::process::id() as i32).unwrap(),
            bundle: "/b".into(),
            rootfs: "/b/rootfs".into(),
            created: "2026-01-01T00:00:00Z".into(),
            annotations: BTreeMap::new(),
            owner: "root".into(),
            cgroup_dirs: vec![],
            hooks: Hooks::default(),
        };
        dir.save(&saved).unwrap();
        // Saved but not complete: invisible, and its creator (us) lives: not stale.
        assert!(root.ids().unwrap().is_empty());
        dir.complete().unwrap();
        assert_eq!(dir.load().unwrap(), saved);
        assert_eq!(dir.status(&saved), Status::Running);
        let dead = Saved {
            pid_start: saved.pid_start + 1,
            ..saved.clone()
        };
        assert_eq!(dir.status(&dead), Status::Stopped);
        drop(dir);
        assert_eq!(root.ids().unwrap(), ["c1"]);
        root.get("c1").unwrap().remove().unwrap();
        assert!(matches!(root.get("c1"), Err(StateError::NotFound(_))));
    }
}
