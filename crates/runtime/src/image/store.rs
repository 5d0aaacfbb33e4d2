//! The content-addressed image store:
//!
//! ```text
//! STORE/blobs/sha256/HEX           verified blobs (manifests, configs, layers as imported)
//! STORE/images/HEX/rootfs/         the flattened root filesystem of manifest HEX (never written)
//! STORE/images/HEX/image.json      names, digests, config, size
//! STORE/refs.json                  {"NAME:TAG": "sha256:HEX"}, replaced atomically
//! STORE/tmp/                       imports in progress (renamed into place when verified)
//! STORE/lock                       flock(2) held by import and rm
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::digest::Digest;
use super::extract::SkippedDevices;
use super::oci::RunConfig;
use super::ImageError;

/// What the store records of one image (`images/HEX/image.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// The manifest digest: the image's identity.
    pub digest: Digest,
    /// Names pointing at it (kept in step with refs.json, which is authoritative).
    pub names: Vec<String>,
    pub created: Option<String>,
    pub architecture: Option<String>,
    pub os: Option<String>,
    pub config_digest: Digest,
    /// Layer blob digests, bottom first.
    pub layers: Vec<Digest>,
    /// Digests of the uncompressed layers, as verified.
    pub diff_ids: Vec<Digest>,
    /// Bytes of unpacked layer data.
    pub size: u64,
    pub config: RunConfig,
    pub keep_setuid: bool,
    pub keep_caps: bool,
    /// Device nodes the layers held, not unpacked (the sandbox provides `/dev`).
    #[serde(default, skip_serializing_if = "SkippedDevices::is_empty")]
    pub skipped_devices: SkippedDevices,
}

impl ImageRecord {
    /// Every blob the image holds on to.
    pub fn blobs(&self) -> impl Iterator<Item = &Digest> {
        [&self.digest, &self.config_digest]
            .into_iter()
            .chain(self.layers.iter())
    }
}

pub struct Store {
    pub root: PathBuf,
}

/// The default store: `/var/lib/reprorun` for root, else `$XDG_DATA_HOME/reprorun` or
/// `~/.local/share/reprorun`.
pub fn default_root() -> Result<PathBuf, ImageError> {
    if nix::unistd::geteuid().is_root() {
        return Ok(PathBuf::from("/var/lib/reprorun"));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| Path::new(v).is_absolute()) {
        return Ok(Path::new(&xdg).join("reprorun"));
    }
    match std::env::var_os("HOME").filter(|v| Path::new(v).is_absolute()) {
        Some(home) => Ok(Path::new(&home).join(".local/share/reprorun")),
        None => Err(ImageError::NoStore),
    }
}

impl Store {
    pub fn new(root: Option<PathBuf>) -> Result<Store, ImageError> {
        let root = match root {
            Some(r) if r.is_absolute() => r,
            Some(r) => std::env::current_dir()
                .map_err(|e| ImageError::store(&r, e))?
                .join(r),
            None => default_root()?,
        };
        Ok(Store { root })
    }

    pub fn blob(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(d.hex())
    }

    pub fn image_dir(&self, d: &Digest) -> PathBuf {
        self.root.join("images").join(d.hex())
    }

    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Creates the store's directories and takes the writers' lock. Imports left behind by
    /// a killed writer (anything in `tmp/`) are removed: no other writer can be running.
    pub fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, ImageError> {
        for dir in [
            self.root.join("blobs/sha256"),
            self.root.join("images"),
            self.tmp(),
        ] {
            std::fs::create_dir_all(&dir).map_err(|e| ImageError::store(&dir, e))?;
        }
        let path = self.root.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| ImageError::store(&path, e))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| ImageError::store(&path, std::io::Error::from(e)))?;
        let tmp = self.tmp();
        for entry in std::fs::read_dir(&tmp)
            .map_err(|e| ImageError::store(&tmp, e))?
            .flatten()
        {
            let _ = super::extract::remove_tree(&entry.path());
        }
        Ok(lock)
    }

    /// Name → digest.
    pub fn refs(&self) -> Result<BTreeMap<String, Digest>, ImageError> {
        let path = self.root.join("refs.json");
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| ImageError::Corrupt {
                path,
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(ImageError::store(&path, e)),
        }
    }

    /// Replaces refs.json (write a temporary file, then rename over), and brings every
    /// image's recorded names in step.
    pub fn write_refs(&self, refs: &BTreeMap<String, Digest>) -> Result<(), ImageError> {
        write_atomic(&self.root.join("refs.json"), &to_json(refs))?;
        for mut rec in self.images()? {
            let names = names_of(refs, &rec.digest);
            if rec.names != names {
                rec.names = names;
                self.write_record(&rec)?;
            }
        }
        Ok(())
    }

    pub fn write_record(&self, rec: &ImageRecord) -> Result<(), ImageError> {
        write_atomic(
            &self.image_dir(&rec.digest).join("image.json"),
            &to_json(rec),
        )
    }

    pub fn record(&self, d: &Digest) -> Result<ImageRecord, ImageError> {
        let path = self.image_dir(d).join("image.json");
        let bytes = std::fs::read(&path).map_err(|e| ImageError::store(&path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| ImageError::Corrupt {
            path,
            detail: e.to_string(),
        })
    }

    /// Every image in the store, by digest.
    pub fn images(&self) -> Result<Vec<ImageRecord>, ImageError> {
        let dir = self.root.join("images");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ImageError::store(&dir, e)),
        };
        let mut digests: Vec<Digest> = entries
            .flatten()
            .filter_map(|e| Digest::from_hex(&e.file_name().to_string_lossy()))
            .collect();
        digests.sort();
        digests.iter().map(|d| self.record(d)).collect()
    }

    /// Resolves `NAME[:TAG]`, `sha256:HEX`, or a unique prefix `sha256:HEX…` of at least 12
    /// digits, to an image digest.
    pub fn resolve(&self, reference: &str) -> Result<Digest, ImageError> {
        let not_found = || ImageError::NotFound {
            reference: reference.to_string(),
            store: self.root.clone(),
        };
        // NAME@sha256:HEX (as `image pull` takes it): the digest names the image.
        let reference = match reference.rsplit_once('@') {
            Some((_, digest)) if digest.starts_with("sha256:") => digest,
            _ => reference,
        };
        if let Some(hex) = reference.strip_prefix("sha256:") {
            if let Some(d) = Digest::from_hex(hex) {
                return match self.image_dir(&d).join("image.json").exists() {
                    true => Ok(d),
                    false => Err(not_found()),
                };
            }
            if hex.len() < 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ImageError::Reference(reference.to_string()));
            }
            let hits: Vec<Digest> = self
                .images()?
                .into_iter()
                .map(|r| r.digest)
                .filter(|d| d.hex().starts_with(hex))
                .collect();
            return match hits.len() {
                0 => Err(not_found()),
                1 => Ok(hits[0].clone()),
                _ => Err(ImageError::Ambiguous(reference.to_string())),
            };
        }
        let name = super::name::ImageName::parse(reference)
            .map_err(|why| ImageError::Name {
                name: reference.to_string(),
                why,
            })?
            .to_string();
        self.refs()?.get(&name).cloned().ok_or_else(not_found)
    }

    /// Removes the `candidates` no name points to any more, then blobs no image holds.
    /// (An image imported without a name stays until removed by digest.)
    pub fn collect_garbage(
        &self,
        refs: &BTreeMap<String, Digest>,
        candidates: &BTreeSet<Digest>,
    ) -> Result<Vec<Digest>, ImageError> {
        let live: BTreeSet<&Digest> = refs.values().collect();
        let mut removed = Vec::new();
        let mut keep_blobs = BTreeSet::new();
        for rec in self.images()? {
            if live.contains(&rec.digest) || !candidates.contains(&rec.digest) {
                keep_blobs.extend(rec.blobs().cloned());
                continue;
            }
            let dir = self.image_dir(&rec.digest);
            super::extract::remove_tree(&dir)
                .map_err(|e| ImageError::store(&dir, std::io::Error::from(e)))?;
            removed.push(rec.digest);
        }
        let blobs = self.root.join("blobs/sha256");
        if let Ok(entries) = std::fs::read_dir(&blobs) {
            for e in entries.flatten() {
                let keep = Digest::from_hex(&e.file_name().to_string_lossy())
                    .is_some_and(|d| keep_blobs.contains(&d));
                if !keep {
                    std::fs::remove_file(e.path())
                        .map_err(|err| ImageError::store(&e.path(), err))?;
                }
            }
        }
        Ok(removed)
    }
}

pub fn names_of(refs: &BTreeMap<String, Digest>, d: &Digest) -> Vec<String> {
    refs.iter()
        .filter(|(_, v)| *v == d)
        .map(|(k, _)| k.clone())
        .collect()
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("store records serialize");
    bytes.push(b'\n');
    bytes
}

/// Writes `path` so that readers see the old or the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    crate::sys::write_atomic(path, bytes, 0o644).map_err(|e| ImageError::store(path, e))
}
