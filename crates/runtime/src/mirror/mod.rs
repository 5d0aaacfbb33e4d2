//! Read-only dependency-index mirrors frozen at a date (`spec/mirror.md`): a directory with
//! `lock.json` (every file, its hash, size and upload time), the files under `pypi/files`,
//! a PEP 503 HTML + PEP 691 JSON simple index under `pypi/simple`, and a GOPROXY tree under
//! `go/` and an npm registry tree under `npm/`. `reprorun exec --mirror DIR` mounts it
//! read-only at `/mirror`, serves the npm tree on the sandbox's loopback and points every
//! client at it.

pub mod cli;
pub(crate) mod dist;
pub(crate) mod go;
mod into;
pub(crate) mod layout;
pub(crate) mod npm;
mod project;
pub(crate) mod pull;
mod python_release;
pub(crate) mod serve;

use std::path::{Path, PathBuf};

use thiserror::Error;

pub(crate) use layout::{GoRecord, Lock, Record};
use layout::{FILES_DIR, GO_DIR, LOCK_VERSION, SIMPLE_DIR};

/// Where a mirror appears inside the sandbox.
pub(crate) const MOUNT: &str = "/mirror";
pub(crate) const LOCK_FILE: &str = "lock.json";
/// The largest lock file read (a mirror of thousands of packages has a lock of a few MiB).
const LOCK_MAX: u64 = 64 << 20;

#[derive(Debug, Error)]
pub enum MirrorError {
    #[error("{path}: not a mirror (no {LOCK_FILE}); create one with `reprorun mirror add` or `mirror pull`")]
    NotAMirror { path: PathBuf },
    #[error("{path}: no such directory; create a mirror there with `reprorun mirror pull --out {path}` or `mirror add`")]
    Missing { path: PathBuf },
    #[error("{path}: {reason}")]
    BadLock { path: PathBuf, reason: String },
    #[error("{path}: not a wheel or sdist file name (NAME-VERSION-TAGS.whl, NAME-VERSION.tar.gz or .zip)")]
    BadFileName { path: PathBuf },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--date {0:?}: {1}")]
    Date(String, String),
    #[error("{0}")]
    Pull(String),
    #[error("{path} holds a different file named {filename} already (sha256 {existing}); remove it first")]
    Conflict {
        path: PathBuf,
        filename: String,
        existing: String,
    },
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> MirrorError {
    let path = path.to_path_buf();
    move |source| MirrorError::Io { what, path, source }
}

/// sha256 (hex) and size of a file, streamed (the image store's hashing reader).
pub(crate) fn hash_file(path: &Path) -> Result<(String, u64), MirrorError> {
    let f = std::fs::File::open(path).map_err(io("read", path))?;
    let (digest, size) = crate::image::digest::Hashing::new(f)
        .finish()
        .map_err(io("read", path))?;
    Ok((digest.hex().to_string(), size))
}

/// Parses a date option (RFC 3339, YYYY-MM-DD, @EPOCH) into seconds since the epoch.
pub(crate) fn parse_date(option: &str, text: &str) -> Result<i64, MirrorError> {
    crate::determinism::date::parse_date(text)
        .map_err(|e| MirrorError::Date(format!("{option} {text}"), e.to_string()))
}

pub(crate) use crate::determinism::date::rfc3339_secs as rfc3339;

/// Reads a mirror's lock.
pub fn read_lock(dir: &Path) -> Result<Lock, MirrorError> {
    let path = dir.join(LOCK_FILE);
    // Regular and bounded: a mirror may lie in an earlier run's /work.
    let read = crate::sys::hostpath::read_to_string(&path, true, LOCK_MAX);
    let text = match read.map_err(|e| match e {
        crate::sys::hostpath::HostPathError::Io { errno, .. } => std::io::Error::from(errno),
        other => std::io::Error::other(other),
    }) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let path = dir.to_path_buf();
            return Err(match dir.exists() {
                true => MirrorError::NotAMirror { path },
                false => MirrorError::Missing { path },
            });
        }
        Err(e) => return Err(io("read", &path)(e)),
    };
    let lock: Lock = serde_json::from_str(&text).map_err(|e| MirrorError::BadLock {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if lock.lock_version != LOCK_VERSION {
        return Err(MirrorError::BadLock {
            path,
            reason: format!(
                "lock_version {} (this reprorun reads {LOCK_VERSION})",
                lock.lock_version
            ),
        });
    }
    if let Err(reason) = npm::check_records(&lock.npm) {
        return Err(MirrorError::BadLock { path, reason });
    }
    for r in &lock.files {
        if dist::parse(&r.filename).is_none() {
            return Err(MirrorError::BadLock {
                path,
                reason: format!("file name {:?} is not a distribution", r.filename),
            });
        }
    }
    Ok(lock)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), MirrorError> {
    crate::sys::write_atomic(path, bytes, 0o644).map_err(io("write", path))
}

/// Writes the lock and regenerates the simple index from it (the index directory is built
/// aside and swapped in).
pub(crate) fn write(dir: &Path, lock: &Lock) -> Result<(), MirrorError> {
    let mut lock = lock.clone();
    lock.files
        .sort_by(|a, b| (&a.name, &a.filename).cmp(&(&b.name, &b.filename)));
    lock.go
        .sort_by(|a, b| (&a.module, &a.version).cmp(&(&b.module, &b.version)));
    lock.npm
        .sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    npm::write_tree(dir, &lock.npm)?;
    let simple = dir.join(SIMPLE_DIR);
    let pypi = dir.join("pypi");
    std::fs::create_dir_all(&pypi).map_err(io("create", &pypi))?;
    // Unique names beside the index (removed on every way out): the new tree, built whole,
    // then swapped in for the old one.
    let staging = |prefix: &str| {
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&pypi)
            .map_err(io("create", &pypi))
    };
    let fresh_dir = staging(".simple-")?;
    let fresh = fresh_dir.path();
    for (rel, bytes) in layout::simple_tree(&lock.files) {
        let rel = rel
            .strip_prefix(SIMPLE_DIR)
            .unwrap_or(&rel)
            .trim_start_matches('/');
        let path = fresh.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io("create", parent))?;
        }
        std::fs::write(&path, bytes).map_err(io("write", &path))?;
    }
    let old = staging(".simple-old-")?;
    if simple.exists() {
        // Onto the empty directory `old`, which its drop removes with the old tree.
        std::fs::rename(&simple, old.path()).map_err(io("rename", &simple))?;
    }
    // A temporary directory is private (0700); the index is for every reader.
    std::fs::set_permissions(fresh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(io("chmod", fresh))?;
    std::fs::rename(fresh, &simple).map_err(io("rename", fresh))?;
    let text = serde_json::to_string_pretty(&lock).expect("lock serializes") + "\n";
    write_atomic(&dir.join(LOCK_FILE), text.as_bytes())
}

fn empty_lock() -> Lock {
    Lock {
        lock_version: LOCK_VERSION,
        date: None,
        index: None,
        files: Vec::new(),
        go: Vec::new(),
        npm: Vec::new(),
    }
}

/// `mirror add`: copies distribution files in, with their upload time (default: now).
/// Creates the mirror if `dir` holds none.
pub(crate) fn add(
    dir: &Path,
    files: &[PathBuf],
    upload_time: Option<i64>,
) -> Result<usize, MirrorError> {
    let mut lock = match read_lock(dir) {
        Ok(l) => l,
        Err(MirrorError::NotAMirror { .. } | MirrorError::Missing { .. }) => empty_lock(),
        Err(e) => return Err(e),
    };
    let when = upload_time.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    });
    let files_dir = dir.join(FILES_DIR);
    std::fs::create_dir_all(&files_dir).map_err(io("create", &files_dir))?;
    // Everything is checked before anything is copied.
    let mut incoming = Vec::new();
    for f in files {
        let filename = f
            .file_name()
            .and_then(|n| n.to_str())
            .map(String::from)
            .ok_or_else(|| MirrorError::BadFileName { path: f.clone() })?;
        let name =
            dist::parse(&filename).ok_or_else(|| MirrorError::BadFileName { path: f.clone() })?;
        let (sha256, size) = hash_file(f)?;
        if let Some(existing) = lock.files.iter().find(|r| r.filename == filename) {
            if existing.sha256 != sha256 {
                return Err(MirrorError::Conflict {
                    path: dir.to_path_buf(),
                    filename,
                    existing: existing.sha256.clone(),
                });
            }
        }
        incoming.push((f, filename, name, sha256, size));
    }
    let n = incoming.len();
    for (src, filename, name, sha256, size) in incoming {
        let dest = files_dir.join(&filename);
        let tmp = files_dir.join(format!(".{filename}.tmp-{}", std::process::id()));
        std::fs::copy(src, &tmp).map_err(io("copy", src))?;
        std::fs::rename(&tmp, &dest).map_err(io("rename", &dest))?;
        lock.files.retain(|r| r.filename != filename);
        lock.files.push(Record {
            name: name.project,
            version: name.version,
            filename,
            sha256,
            size,
            upload_time: rfc3339(when),
            requires_python: None,
        });
    }
    write(dir, &lock)?;
    Ok(n)
}

/// `mirror index`: regenerates the index from the lock; with `date`, first drops (and
/// deletes) every file uploaded after it. Returns the number dropped.
pub(crate) fn index(dir: &Path, date: Option<i64>) -> Result<usize, MirrorError> {
    let mut lock = read_lock(dir)?;
    let mut dropped = 0;
    if let Some(date) = date {
        let (keep, drop): (Vec<Record>, Vec<Record>) = lock.files.into_iter().partition(|r| {
            crate::determinism::date::parse_date(&r.upload_time).is_ok_and(|t| t <= date)
        });
        for r in &drop {
            let _ = std::fs::remove_file(dir.join(FILES_DIR).join(&r.filename));
        }
        dropped = drop.len();
        lock.files = keep;
        lock.date = Some(rfc3339(date));
    }
    write(dir, &lock)?;
    Ok(dropped)
}

/// `mirror verify`: every problem found, as one line each (empty: the mirror verifies).
pub(crate) fn verify(dir: &Path) -> Result<Vec<String>, MirrorError> {
    let lock = read_lock(dir)?;
    let mut problems = Vec::new();
    let files_dir = dir.join(FILES_DIR);
    for r in &lock.files {
        let path = files_dir.join(&r.filename);
        match hash_file(&path) {
            Err(_) => problems.push(format!("{}: missing", r.filename)),
            Ok((sha, size)) if sha != r.sha256 || size != r.size => problems.push(format!(
                "{}: sha256 {sha} ({size} bytes), the lock says {} ({} bytes)",
                r.filename, r.sha256, r.size
            )),
            Ok(_) => {}
        }
    }
    if let Ok(entries) = std::fs::read_dir(&files_dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !lock.files.iter().any(|r| r.filename == name) {
                problems.push(format!("{FILES_DIR}/{name}: not in the lock"));
            }
        }
    }
    // The index must be exactly what the lock generates.
    let want = layout::simple_tree(&lock.files);
    let mut seen = std::collections::BTreeSet::new();
    for (rel, bytes) in &want {
        seen.insert(rel.clone());
        match std::fs::read(dir.join(rel)) {
            Ok(have) if &have == bytes => {}
            Ok(_) => problems.push(format!(
                "{rel}: differs from the lock (run `reprorun mirror index`)"
            )),
            Err(_) => problems.push(format!("{rel}: missing")),
        }
    }
    walk(&dir.join(SIMPLE_DIR), dir, &mut |rel| {
        if !seen.contains(rel) {
            problems.push(format!("{rel}: not generated from the lock"));
        }
    });
    problems.extend(go::verify(dir, &lock.go));
    problems.extend(npm::verify(dir, &lock.npm));
    Ok(problems)
}

/// Calls `f` with the mirror-relative path of every file below `at`.
pub(crate) fn walk(at: &Path, root: &Path, f: &mut dyn FnMut(&str)) {
    let Ok(entries) = std::fs::read_dir(at) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&p, root, f);
        } else if let Ok(rel) = p.strip_prefix(root) {
            f(&rel.to_string_lossy());
        }
    }
}

/// What a sandbox needs to use a mirror.
pub(crate) struct Attached {
    /// The clients' environment.
    pub(crate) env: Vec<(String, String)>,
    /// The read-only bind at [`MOUNT`].
    pub(crate) bind: crate::parse::BindSpec,
    /// Whether it is served on the sandbox's loopback ([`npm::URL`]): it has an npm part, or
    /// the PyPI part is asked for over HTTP.
    pub(crate) served: bool,
}

/// `--mirror-serve`: how pip and uv reach the PyPI part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Serve {
    /// `file:///mirror/pypi/simple` (PEP 503 HTML as pip reads a directory).
    #[default]
    File,
    /// `http://127.0.0.1:4873/pypi/simple/` (PEP 503 HTML and PEP 691 JSON with upload times).
    Http,
}

/// What a sandbox needs to use the mirror in `dir`.
pub(crate) fn attach(dir: &Path, serve: Serve) -> Result<Attached, MirrorError> {
    let lock = read_lock(dir)?;
    // The server reads the tree from the host's side: an absolute path, fixed at the start.
    let src = std::fs::canonicalize(dir).map_err(io("resolve", dir))?;
    let mut env = client_env(&lock);
    if serve == Serve::Http {
        let url = format!("{}/{SIMPLE_DIR}/", npm::URL);
        for (k, v) in env.iter_mut() {
            if ["PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"].contains(&k.as_str()) {
                *v = url.clone();
            }
        }
        env.push(("PIP_TRUSTED_HOST".into(), "127.0.0.1".into()));
    }
    Ok(Attached {
        env,
        bind: crate::parse::BindSpec {
            src,
            dest: MOUNT.into(),
            readonly: true,
        },
        served: !lock.npm.is_empty() || serve == Serve::Http,
    })
}

/// npm (and yarn and pnpm, which read the same `npm_config_*` variables) pointed at the
/// mirror's registry on the sandbox's loopback, with a private cache and nothing else
/// consulted (`spec/mirror.md`).
fn npm_env() -> Vec<(&'static str, String)> {
    vec![
        ("npm_config_registry", format!("{}/", npm::URL)),
        // Lockfiles name tarballs on the registry they were made with: fetch them from the
        // mirror whatever host they name.
        ("npm_config_replace_registry_host", "always".into()),
        ("npm_config_offline", "false".into()),
        ("npm_config_prefer_online", "false".into()),
        ("npm_config_audit", "false".into()),
        ("npm_config_fund", "false".into()),
        ("npm_config_update_notifier", "false".into()),
        ("npm_config_fetch_retries", "0".into()),
        ("npm_config_userconfig", "/dev/null".into()),
        ("npm_config_cache", "/tmp/.reprorun-npm-cache".into()),
    ]
}

/// The environment of a `--net none` run without a mirror: package clients give up at the
/// first failed connection instead of retrying for seconds (pip waited 7.9 s to fail), and
/// go does not look modules up (`spec/network.md`). `--env` still wins.
pub fn offline_env() -> Vec<(String, String)> {
    [
        ("PIP_RETRIES", "0"),
        ("UV_HTTP_RETRIES", "0"),
        ("npm_config_fetch_retries", "0"),
        ("GOPROXY", "off"),
        ("GOTOOLCHAIN", "local"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The environment `exec --mirror` gives the sandbox: every client pointed at `/mirror`,
/// nothing else consulted (`spec/mirror.md`).
pub(crate) fn client_env(lock: &Lock) -> Vec<(String, String)> {
    let simple = format!("file://{MOUNT}/{SIMPLE_DIR}");
    let mut env = vec![
        ("PIP_INDEX_URL", simple.clone()),
        ("PIP_NO_INPUT", "1".into()),
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1".into()),
        ("PIP_CONFIG_FILE", "/dev/null".into()),
        ("PIP_NO_CACHE_DIR", "1".into()),
        ("PIP_RETRIES", "0".into()),
        ("UV_INDEX_URL", simple.clone()),
        ("UV_DEFAULT_INDEX", simple),
        ("UV_NO_CONFIG", "1".into()),
        ("UV_NO_CACHE", "1".into()),
        ("UV_PYTHON_DOWNLOADS", "never".into()),
        ("GOPROXY", format!("file://{MOUNT}/{GO_DIR}")),
        ("GOFLAGS", "-mod=mod".into()),
        ("GOSUMDB", "off".into()),
        ("GOPRIVATE", "".into()),
        ("GONOPROXY", "".into()),
        ("GOTOOLCHAIN", "local".into()),
        ("REPRORUN_MIRROR", MOUNT.into()),
    ];
    // No UV_EXCLUDE_NEWER: the mirror is cut at its date already, and uv reads a file://
    // index as HTML, without upload times, so it would filter every file out.
    if let Some(date) = &lock.date {
        env.push(("REPRORUN_MIRROR_DATE", date.clone()));
    }
    if !lock.npm.is_empty() {
        env.extend(npm_env());
    }
    env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

#[cfg(test)]
mod tests;
