//! Images from Dockerfiles: the host's engine (podman, else Docker) builds the Dockerfile,
//! saves the result as an archive, and `image import` takes it into the store under a name
//! derived from the digest of the Dockerfile and of its context
//! (`localhost/reprorun-build:HEX`), so the same Dockerfile and context are built once.
//!
//! The plan ([`plan`]) is data — the key, the name, the engine's command lines — and
//! [`build`] performs it. The engine reads its own configuration (storage, registries,
//! `CONTAINERS_CONF`, `DOCKER_HOST`), so base images come from wherever the engine finds them.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest as _, Sha256};
use thiserror::Error;

use super::digest::Digest;
use super::extract::{Limits, Options};
use super::store::Store;
use super::{ImageError, ImportRequest};

mod ignore;
pub use ignore::{Ignore, IgnoreError};

/// Entries of a build context hashed at most.
const MAX_CONTEXT_ENTRIES: u64 = 1_000_000;
/// Bytes of a build context hashed at most.
const MAX_CONTEXT_BYTES: u64 = 16 << 30;
/// The largest `.dockerignore` read.
const MAX_IGNORE_BYTES: u64 = 1 << 20;
/// Lines of the engine's output a failure quotes.
const TAIL_BYTES: usize = 600;
/// The store's names for built images.
pub const BUILD_REPOSITORY: &str = "localhost/reprorun-build";

#[derive(Debug, Error)]
pub enum BuildError {
    #[error("build {dockerfile}: no engine to build with: neither podman nor docker is on PATH; install one (podman is preferred) or build the image yourself and `reprorun image import` it")]
    NoEngine { dockerfile: PathBuf },
    #[error("build {path}: {detail}")]
    Context { path: PathBuf, detail: String },
    #[error("build {path}: {source}")]
    Ignore {
        path: PathBuf,
        source: ignore::IgnoreError,
    },
    #[error("build {path}: the context holds more than {what}; give a smaller context directory")]
    TooLarge { path: PathBuf, what: String },
    #[error("build {dockerfile}: `{command}` failed ({status}): {tail}")]
    Engine {
        dockerfile: PathBuf,
        command: String,
        status: String,
        tail: String,
    },
}

/// The engine that builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Podman,
    Docker,
}

impl Engine {
    /// podman when it is on PATH, else docker.
    pub fn detect(path: Option<&std::ffi::OsStr>) -> Option<Engine> {
        let on_path = |name: &str| {
            path.map(std::env::split_paths)
                .into_iter()
                .flatten()
                .any(|d| d.join(name).is_file())
        };
        if on_path("podman") {
            Some(Engine::Podman)
        } else if on_path("docker") {
            Some(Engine::Docker)
        } else {
            None
        }
    }

    pub fn program(self) -> &'static str {
        match self {
            Engine::Podman => "podman",
            Engine::Docker => "docker",
        }
    }
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub dockerfile: PathBuf,
    /// The build context (default: the Dockerfile's directory).
    pub context: PathBuf,
    pub engine: Engine,
    /// An OCI runtime for the build's `RUN` steps (podman's `--runtime`; Docker takes its
    /// daemon's runtime and ignores this).
    pub runtime: Option<PathBuf>,
}

/// A build as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPlan {
    /// sha256 of the Dockerfile and the context.
    pub key: Digest,
    /// The store's name for the result: `localhost/reprorun-build:HEX`.
    pub name: String,
    /// The engine's commands, in order: build, save.
    pub commands: Vec<Vec<String>>,
    /// The archive `save` writes and `image import` reads.
    pub archive: PathBuf,
    /// For podman: a file written before the build, and its text, the context's
    /// `.dockerignore` patterns as Docker reads them (empty without one), so podman sends
    /// what the key hashed: it would otherwise keep paths of a leading-`/` pattern, and
    /// read a `.containerignore` first.
    pub ignorefile: Option<(PathBuf, String)>,
}

/// The digest of a build: the Dockerfile's bytes, the context's `.dockerignore`, then every
/// entry of the context it does not exclude, in name order (its relative path, type,
/// executable bit, and a file's bytes or a link's target): what the engine is sent.
/// Bounded by [`MAX_CONTEXT_ENTRIES`] and [`MAX_CONTEXT_BYTES`]; links are never followed.
pub fn key(dockerfile: &Path, context: &Path) -> Result<Digest, BuildError> {
    keyed(dockerfile, context).map(|k| k.key)
}

/// A build's key and the `.dockerignore` it hashed, read once: [`build`] sends exactly what
/// was hashed, even if the file changes in between.
#[derive(Debug)]
pub struct Keyed {
    /// The build's [`key`].
    pub key: Digest,
    ignore: ignore::Ignore,
}

/// [`key`], and the parsed `.dockerignore` it was computed with.
pub fn keyed(dockerfile: &Path, context: &Path) -> Result<Keyed, BuildError> {
    let bad = |path: &Path, e: std::io::Error| BuildError::Context {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let mut h = Sha256::new();
    h.update(b"reprorun-dockerfile/1\0");
    let bytes = std::fs::read(dockerfile).map_err(|e| bad(dockerfile, e))?;
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(&bytes);
    let meta = std::fs::metadata(context).map_err(|e| bad(context, e))?;
    if !meta.is_dir() {
        return Err(BuildError::Context {
            path: context.to_path_buf(),
            detail: "the context is not a directory".into(),
        });
    }
    let ignore = read_ignore(context, &mut h)?;
    let (mut entries, mut total) = (0u64, 0u64);
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = context.join(&rel);
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&dir)
            .map_err(|e| bad(&dir, e))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(|e| bad(&dir, e))?;
        names.sort();
        // Directories are pushed in reverse so they pop in name order.
        let mut subdirs = Vec::new();
        for name in names {
            entries += 1;
            if entries > MAX_CONTEXT_ENTRIES {
                return Err(BuildError::TooLarge {
                    path: context.to_path_buf(),
                    what: format!("{MAX_CONTEXT_ENTRIES} entries"),
                });
            }
            let r = rel.join(&name);
            let p = context.join(&r);
            let m = std::fs::symlink_metadata(&p).map_err(|e| bad(&p, e))?;
            if ignore.excludes(&r.to_string_lossy()) {
                // Walked only when an exception may take back something it holds.
                if m.file_type().is_dir() && ignore.has_exceptions() {
                    subdirs.push(r);
                }
                continue;
            }
            let path_bytes = r.as_os_str().as_encoded_bytes();
            h.update((path_bytes.len() as u64).to_le_bytes());
            h.update(path_bytes);
            let ft = m.file_type();
            if ft.is_symlink() {
                let target = std::fs::read_link(&p).map_err(|e| bad(&p, e))?;
                h.update(b"l");
                h.update(target.as_os_str().as_encoded_bytes());
                h.update(b"\0");
            } else if ft.is_dir() {
                h.update(b"d");
                subdirs.push(r);
            } else if ft.is_file() {
                use std::os::unix::fs::PermissionsExt;
                total += m.len();
                if total > MAX_CONTEXT_BYTES {
                    return Err(BuildError::TooLarge {
                        path: context.to_path_buf(),
                        what: format!("{MAX_CONTEXT_BYTES} bytes"),
                    });
                }
                h.update(if m.permissions().mode() & 0o111 != 0 {
                    b"x"
                } else {
                    b"f"
                });
                h.update(m.len().to_le_bytes());
                let f = open_regular(&p).map_err(|e| bad(&p, e))?;
                let mut f = f.take(m.len());
                std::io::copy(&mut f, &mut h).map_err(|e| bad(&p, e))?;
            } else {
                // FIFOs, sockets, devices: named, never opened.
                h.update(b"o");
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    let key =
        Digest::from_hex(&super::digest::hex(&h.finalize())).expect("sha256 is 64 hex digits");
    Ok(Keyed { key, ignore })
}

/// The context's `.dockerignore` (none: nothing is excluded), its bytes hashed into `h`.
pub fn read_ignore(context: &Path, h: &mut Sha256) -> Result<ignore::Ignore, BuildError> {
    let path = context.join(ignore::FILE);
    let bad = |detail: String| BuildError::Context {
        path: path.clone(),
        detail,
    };
    let f = match open_regular(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            h.update(b"no-ignore\0");
            return Ok(ignore::Ignore::default());
        }
        Err(e) => return Err(bad(e.to_string())),
    };
    let mut bytes = Vec::new();
    f.take(MAX_IGNORE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > MAX_IGNORE_BYTES {
        return Err(bad(format!("longer than {MAX_IGNORE_BYTES} bytes")));
    }
    h.update(b"ignore\0");
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
    ignore::Ignore::parse(&text).map_err(|source| BuildError::Ignore { path, source })
}

/// Opens `path` for reading only if it is a regular file: never following a final link
/// (`O_NOFOLLOW`), never blocking on a FIFO swapped in after the lstat (`O_NONBLOCK`), and
/// checked on the fd itself (fstat), so a file replaced between the lstat and the open is
/// refused rather than read.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (it changed while the context was read)",
        ));
    }
    Ok(f)
}

/// The store's name for the image of the build keyed `key`.
pub fn name(key: &Digest) -> String {
    format!("{BUILD_REPOSITORY}:{}", key.hex())
}

/// The image of the build keyed `key`, when the store has it.
pub fn cached(store: &Store, key: &Digest) -> Option<Digest> {
    store.resolve(&name(key)).ok()
}

/// The plan of a build keyed `key` ([`key`]) whose context has the `.dockerignore` `ignore`
/// ([`read_ignore`]), its archive under `scratch`.
pub fn plan(req: &BuildRequest, key: &Digest, scratch: &Path, ignore: &Ignore) -> BuildPlan {
    // The engine's own tag: short, so `podman images` stays readable.
    let tag = format!("{BUILD_REPOSITORY}:{}", &key.hex()[..16]);
    let archive = scratch.join("image.tar");
    let s = |p: &Path| p.display().to_string();
    let mut build = vec![req.engine.program().to_string(), "build".into()];
    if let (Engine::Podman, Some(rt)) = (req.engine, &req.runtime) {
        build.push(format!("--runtime={}", rt.display()));
    }
    // Docker reads the context's `.dockerignore` itself.
    let ignorefile =
        (req.engine == Engine::Podman).then(|| (scratch.join("ignorefile"), ignore.podman_text()));
    if let Some((path, _)) = &ignorefile {
        build.push(format!("--ignorefile={}", path.display()));
    }
    build.extend([
        "--tag".into(),
        tag.clone(),
        "--file".into(),
        s(&req.dockerfile),
        s(&req.context),
    ]);
    let mut save = vec![req.engine.program().to_string(), "save".into()];
    if req.engine == Engine::Podman {
        save.extend(["--format".into(), "oci-archive".into()]);
    }
    save.extend(["--output".into(), s(&archive), tag]);
    BuildPlan {
        key: key.clone(),
        name: name(key),
        commands: vec![build, save],
        archive,
        ignorefile,
    }
}

/// Builds the Dockerfile of `req` (keyed by [`keyed`], whose `.dockerignore` it sends) and
/// imports the image; returns its digest. The engine's output goes to `log`.
pub fn build(
    store: &Store,
    req: &BuildRequest,
    keyed: &Keyed,
    log: &Path,
) -> Result<Digest, ImageError> {
    let key = &keyed.key;
    // Not STORE/tmp, which the import clears.
    let tmp = store.root.join("builds");
    std::fs::create_dir_all(&tmp).map_err(|e| ImageError::store(&tmp, e))?;
    let scratch = tempfile::Builder::new()
        .prefix("build-")
        .tempdir_in(&tmp)
        .map_err(|e| ImageError::store(&tmp, e))?;
    let plan = plan(req, key, scratch.path(), &keyed.ignore);
    if let Some((path, text)) = &plan.ignorefile {
        std::fs::write(path, text).map_err(|e| ImageError::store(path, e))?;
    }
    for argv in &plan.commands {
        run_logged(argv, log).map_err(|(status, tail)| BuildError::Engine {
            dockerfile: req.dockerfile.clone(),
            command: argv[..2].join(" "),
            status,
            tail,
        })?;
    }
    let recs = super::import(
        store,
        &ImportRequest {
            input: plan.archive.clone(),
            name: Some(plan.name.clone()),
            options: Options::default(),
            limits: Limits::default(),
        },
    )?;
    let rec = recs.into_iter().next().ok_or_else(|| BuildError::Engine {
        dockerfile: req.dockerfile.clone(),
        command: plan.commands[1][..2].join(" "),
        status: "exit 0".into(),
        tail: "the archive holds no image".into(),
    })?;
    Ok(rec.digest)
}

/// Runs `argv` with stdout and stderr appended to `log`; on failure, the status and the end
/// of the log.
fn run_logged(argv: &[String], log: &Path) -> Result<(), (String, String)> {
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    };
    let (out, err) = match (open(), open()) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => {
            return Err(("not started".into(), format!("{}: {e}", log.display())))
        }
    };
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| ("not started".to_string(), e.to_string()))?;
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read(log).unwrap_or_default();
    let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(TAIL_BYTES)..])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Err((
        status.to_string(),
        format!("{tail} (log: {})", log.display()),
    ))
}

#[cfg(test)]
mod tests;
