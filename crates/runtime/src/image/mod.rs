//! Container images: `reprorun image import|ls|inspect|rm`, and the root filesystem
//! `exec --image` runs on (see `spec/image.md`).
//!
//! Import reads an OCI image layout (a directory or a tar archive) or a `docker save`
//! archive, verifies every blob against its descriptor (index → manifest → config and
//! layers, and each uncompressed layer against the config's diff ids), and unpacks the layers
//! safely ([`extract`]) into one flattened root per image in a content-addressed [`store`].
//! Everything happens in a private directory inside the store, renamed into place only when
//! all of it verified: a failed import leaves the store as it was.

pub mod build;
pub mod cli;
pub mod digest;
pub mod extract;
mod import;
pub mod name;
pub mod oci;
pub mod pull;
pub mod source;
pub mod store;
mod zstd;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use thiserror::Error;

use digest::Digest;
use extract::ExtractError;
pub use import::{import, ImportRequest};
use name::ImageName;
use store::Store;

/// Largest index, manifest or config blob accepted.
const MAX_JSON: u64 = 4 << 20;
/// Most layers one image may have (Docker's own limit is 127).
const MAX_LAYERS: usize = 256;
/// How deep image indexes may nest.
const MAX_INDEX_DEPTH: usize = 4;

#[derive(Debug, Error)]
pub enum ImageError {
    #[error("image store: neither HOME nor XDG_DATA_HOME is set; pass --store DIR or set REPRORUN_STORE")]
    NoStore,
    #[error("image store {path}: {detail}")]
    Store { path: PathBuf, detail: String },
    #[error("image store {path}: corrupt record: {detail}; remove the image with `reprorun image rm` and import it again")]
    Corrupt { path: PathBuf, detail: String },
    #[error("import {path}: {detail}")]
    Input { path: PathBuf, detail: String },
    #[error("import {0}: not an OCI image layout or docker-save archive (no index.json or manifest.json); pass a layout directory or an archive")]
    NotAnImage(PathBuf),
    #[error("import {what}: {detail}; nothing was imported")]
    Format { what: String, detail: String },
    #[error("import: {what}: sha256 is {actual}, but its descriptor says {expected}; the image is corrupt or was tampered with — nothing was imported")]
    Digest {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("import: {what}: {actual} bytes, but its descriptor says {expected}; the image is corrupt or was tampered with — nothing was imported")]
    Size {
        what: String,
        expected: u64,
        actual: String,
    },
    #[error("import: layer {index} ({digest}): {source}; nothing was imported")]
    Layer {
        index: usize,
        digest: String,
        source: ExtractError,
    },
    #[error(transparent)]
    Pull(#[from] pull::PullError),
    #[error(transparent)]
    Build(#[from] build::BuildError),
    #[error("import {path}: no image for linux/{arch} in the index; nothing was imported")]
    NoPlatform { path: PathBuf, arch: &'static str },
    #[error("--name {name}: the input holds {count} images; import it without --name (each keeps its own name)")]
    NameForMany { name: String, count: usize },
    #[error("image name {name:?}: {why}")]
    Name { name: String, why: String },
    #[error("image reference {0:?}: a digest is sha256: followed by 64 (or a unique prefix of at least 12) hex digits")]
    Reference(String),
    #[error("image {0}: more than one image has this digest prefix; give more digits")]
    Ambiguous(String),
    #[error("image {reference}: not in the store {store}; see `reprorun image ls` or import it with `reprorun image import`")]
    NotFound { reference: String, store: PathBuf },
    #[error("image {reference}: config User {user:?}: {why}; pass --user UID:GID")]
    User {
        reference: String,
        user: String,
        why: String,
    },
    #[error("image {reference}: {path} is missing; remove the image and import it again")]
    Missing { reference: String, path: PathBuf },
}

impl ImageError {
    pub fn store(path: &Path, e: std::io::Error) -> ImageError {
        ImageError::Store {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

pub(crate) fn sniff(path: &Path) -> Result<Compression, ImageError> {
    let mut magic = [0u8; 4];
    let mut f = std::fs::File::open(path).map_err(|e| ImageError::store(path, e))?;
    let n = f.read(&mut magic).map_err(|e| ImageError::store(path, e))?;
    Ok(match &magic[..n] {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd] => Compression::Zstd,
        _ => Compression::None,
    })
}

pub(crate) fn read_small(path: &Path, what: &str) -> Result<Vec<u8>, ImageError> {
    let f = std::fs::File::open(path).map_err(|e| ImageError::Format {
        what: what.to_string(),
        detail: e.to_string(),
    })?;
    let mut bytes = Vec::new();
    f.take(MAX_JSON + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ImageError::Format {
            what: what.to_string(),
            detail: e.to_string(),
        })?;
    if bytes.len() as u64 > MAX_JSON {
        return Err(ImageError::Format {
            what: what.to_string(),
            detail: format!("larger than {MAX_JSON} bytes"),
        });
    }
    Ok(bytes)
}

pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> Result<T, ImageError> {
    serde_json::from_slice(bytes).map_err(|e| ImageError::Format {
        what: what.to_string(),
        detail: format!("malformed JSON: {e}"),
    })
}

/// Removes names (or, for `sha256:…`, every name of that image) and then every image and
/// blob nothing refers to. Returns the names removed and the images deleted.
pub fn remove(
    store: &Store,
    references: &[String],
) -> Result<(Vec<String>, Vec<Digest>), ImageError> {
    let _lock = store.lock()?;
    let mut refs = store.refs()?;
    let mut untagged = Vec::new();
    let mut doomed = BTreeSet::new();
    for reference in references {
        let digest = store.resolve(reference)?;
        if reference.starts_with("sha256:") {
            doomed.insert(digest.clone());
            let names = store::names_of(&refs, &digest);
            for n in names {
                refs.remove(&n);
                untagged.push(n);
            }
        } else {
            let n = ImageName::parse(reference)
                .map(|n| n.to_string())
                .unwrap_or_default();
            refs.remove(&n);
            untagged.push(n);
            doomed.insert(digest);
        }
    }
    store.write_refs(&refs)?;
    let removed = store.collect_garbage(&refs, &doomed)?;
    Ok((untagged, removed))
}

/// The root filesystem and run settings of an image, for `exec --image`.
pub fn run_root(
    store: &Store,
    reference: &str,
) -> Result<crate::plan::image::ImageRoot, ImageError> {
    let digest = store.resolve(reference)?;
    let rec = store.record(&digest)?;
    let rootfs = store.image_dir(&digest).join("rootfs");
    if !rootfs.is_dir() {
        return Err(ImageError::Missing {
            reference: reference.to_string(),
            path: rootfs,
        });
    }
    let env = rec
        .config
        .env
        .iter()
        .flatten()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let argv = rec
        .config
        .entrypoint
        .iter()
        .flatten()
        .chain(rec.config.cmd.iter().flatten())
        .cloned()
        .collect();
    let user = match rec.config.user.as_deref().filter(|u| !u.is_empty()) {
        None => None,
        Some(u) => Some(image_user(&rootfs, u).map_err(|why| ImageError::User {
            reference: reference.to_string(),
            user: u.to_string(),
            why,
        })?),
    };
    Ok(crate::plan::image::ImageRoot {
        reference: reference.to_string(),
        digest: digest.to_string(),
        rootfs,
        env,
        argv,
        user,
    })
}

/// The ids of an image's `User` (`UID`, `UID:GID`, `NAME`, `NAME:GROUP`), names looked up
/// in the image's own /etc/passwd and /etc/group (never through a link).
fn image_user(rootfs: &Path, user: &str) -> Result<(u32, u32), String> {
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let lookup = |file: &str, name: &str, field: usize| -> Result<(u32, Option<u32>), String> {
        let etc = rootfs.join("etc");
        let path = etc.join(file);
        for p in [&etc, &path] {
            let meta = std::fs::symlink_metadata(p)
                .map_err(|_| format!("the image has no /etc/{file}"))?;
            if meta.file_type().is_symlink() {
                return Err(format!(
                    "the image's /etc/{file} is reached through a symbolic link"
                ));
            }
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("/etc/{file}: {e}"))?;
        for line in text.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.first() == Some(&name) && fields.len() > field {
                let id = fields[field]
                    .parse()
                    .map_err(|_| format!("/etc/{file}: bad id for {name}"))?;
                let gid = fields.get(3).and_then(|g| g.parse().ok());
                return Ok((
                    id,
                    if field == 2 && file == "passwd" {
                        gid
                    } else {
                        None
                    },
                ));
            }
        }
        Err(format!("{name} is not in the image's /etc/{file}"))
    };
    let (uid, primary) = match u.parse::<u32>() {
        Ok(id) => (id, None),
        Err(_) => lookup("passwd", u, 2)?,
    };
    let gid = match g {
        Some(g) => match g.parse::<u32>() {
            Ok(id) => id,
            Err(_) => lookup("group", g, 2)?.0,
        },
        None => primary.unwrap_or(0),
    };
    Ok((uid, gid))
}

/// The image `reference` names in the store at `store` (the default store when `None`), as
/// the root of a run: the one lookup `exec --image`, `reproduce` and its input check share.
pub fn lookup(
    store: Option<PathBuf>,
    reference: &str,
) -> Result<crate::plan::image::ImageRoot, ImageError> {
    let store = store::Store::new(store)?;
    run_root(&store, reference)
}

#[cfg(test)]
mod tests;
