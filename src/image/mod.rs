//! Container images: `reprorun image import|ls|inspect|rm`, and the root filesystem
//! `exec --image` runs on (see `spec/image.md`).
//!
//! Import reads an OCI image layout (a directory or a tar archive) or a `docker save`
//! archive, verifies every blob against its descriptor (index → manifest → config and
//! layers, and each uncompressed layer against the config's diff ids), and unpacks the layers
//! safely ([`extract`]) into one flattened root per image in a content-addressed [`store`].
//! Everything happens in a private directory inside the store, renamed into place only when
//! all of it verified: a failed import leaves the store as it was.

pub mod cli;
pub mod digest;
pub mod extract;
pub mod name;
pub mod oci;
pub mod source;
pub mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use thiserror::Error;

use digest::{copy_verified, Digest, Hashing, Mismatch};
use extract::{ExtractError, Extractor, Limits, Options};
use name::ImageName;
use oci::{ConfigFile, Descriptor, DockerEntry, Index, Manifest};
use source::Source;
use store::{ImageRecord, Store};

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
    #[error("import: layer {index} ({digest}) is zstd-compressed, which this build cannot read; recompress it with `skopeo copy --dest-compress-format gzip` — nothing was imported")]
    Zstd { index: usize, digest: String },
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

/// What `image import` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct ImportRequest {
    pub input: PathBuf,
    pub name: Option<String>,
    pub options: Options,
    pub limits: Limits,
}

/// One image of the input, with its blobs verified and staged.
struct Staged {
    record: ImageRecord,
    /// The staged image directory (rootfs + image.json); `None` when the store has it.
    dir: Option<PathBuf>,
}

/// Imports every image of the input; returns their records (with their names).
pub fn import(store: &Store, req: &ImportRequest) -> Result<Vec<ImageRecord>, ImageError> {
    let name = req
        .name
        .as_deref()
        .map(|n| {
            ImageName::parse(n)
                .map(|n| n.to_string())
                .map_err(|why| ImageError::Name {
                    name: n.to_string(),
                    why,
                })
        })
        .transpose()?;
    let _lock = store.lock()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let work = store
        .tmp()
        .join(format!("import-{}-{nanos}", std::process::id()));
    let result = (|| {
        for dir in ["src", "blobs", "images"] {
            std::fs::create_dir_all(work.join(dir)).map_err(|e| ImageError::store(&work, e))?;
        }
        let mut import = Import {
            store,
            req,
            work: &work,
            blobs: BTreeSet::new(),
        };
        let staged = import.run(name.as_deref())?;
        import.commit(staged, name.as_deref())
    })();
    let _ = extract::remove_tree(&work);
    result
}

struct Import<'a> {
    store: &'a Store,
    req: &'a ImportRequest,
    work: &'a Path,
    /// Blobs verified and staged so far.
    blobs: BTreeSet<Digest>,
}

/// A manifest found in the input, before its blobs are read.
struct Found {
    /// The manifest's descriptor, or (docker save) the synthesized manifest itself.
    manifest: FoundManifest,
    names: Vec<String>,
}

enum FoundManifest {
    Oci(Descriptor),
    Docker(DockerEntry),
}

impl Import<'_> {
    fn run(&mut self, name: Option<&str>) -> Result<Vec<Staged>, ImageError> {
        let src = Source::open(&self.req.input, &self.work.join("src"), self.req.limits)?;
        let found = if src.has("index.json") {
            self.oci_index(&src)?
        } else if src.has("manifest.json") {
            self.docker_manifest(&src)?
        } else {
            return Err(ImageError::NotAnImage(self.req.input.clone()));
        };
        if let (Some(name), true) = (name, found.len() > 1) {
            return Err(ImageError::NameForMany {
                name: name.to_string(),
                count: found.len(),
            });
        }
        let mut staged = Vec::new();
        let mut seen = BTreeSet::new();
        for f in found {
            let s = match f.manifest {
                FoundManifest::Oci(desc) => {
                    if !seen.insert(desc.digest.clone()) {
                        continue;
                    }
                    let bytes = self.json_blob(&src, &desc, "manifest")?;
                    let manifest: Manifest =
                        parse_json(&bytes, &format!("manifest {}", desc.digest))?;
                    self.image(&src, desc.digest, manifest, f.names, |this, d, what| {
                        this.blob(&src, d, what).map(drop)
                    })?
                }
                FoundManifest::Docker(entry) => self.docker_image(&src, entry, f.names)?,
            };
            staged.push(s);
        }
        Ok(staged)
    }

    /// The images an OCI layout's index.json names (nested indexes: this platform's).
    fn oci_index(&mut self, src: &Source) -> Result<Vec<Found>, ImageError> {
        if src.has("oci-layout") {
            let bytes = read_small(&src.path("oci-layout")?, "oci-layout")?;
            let layout: serde_json::Value = parse_json(&bytes, "oci-layout")?;
            if layout
                .get("imageLayoutVersion")
                .and_then(|v| v.as_str())
                .is_none()
            {
                return Err(self.format("oci-layout has no imageLayoutVersion"));
            }
        }
        let bytes = read_small(&src.path("index.json")?, "index.json")?;
        let index: Index = parse_json(&bytes, "index.json")?;
        // Docker's archives name images in manifest.json (RepoTags) by config path.
        let docker: Vec<DockerEntry> = match src.path("manifest.json") {
            Ok(p) => parse_json(&read_small(&p, "manifest.json")?, "manifest.json")?,
            Err(_) => Vec::new(),
        };
        let mut found = Vec::new();
        for desc in index.manifests {
            self.collect(src, desc, 0, &mut found)?;
        }
        if found.is_empty() {
            return Err(ImageError::NoPlatform {
                path: self.req.input.clone(),
                arch: oci::host_arch(),
            });
        }
        for f in &mut found {
            let FoundManifest::Oci(desc) = &f.manifest else {
                continue;
            };
            // Names: docker RepoTags for this config, else the annotations.
            if !docker.is_empty() {
                let bytes = self.json_blob(src, desc, "manifest")?;
                let manifest: Manifest = parse_json(&bytes, &format!("manifest {}", desc.digest))?;
                let config_path = format!("blobs/sha256/{}", manifest.config.digest.hex());
                for entry in docker.iter().filter(|e| e.config == config_path) {
                    f.names.extend(entry.repo_tags.iter().flatten().cloned());
                }
            }
        }
        Ok(found)
    }

    fn collect(
        &mut self,
        src: &Source,
        desc: Descriptor,
        depth: usize,
        out: &mut Vec<Found>,
    ) -> Result<(), ImageError> {
        if desc.platform.as_ref().is_some_and(|p| !p.matches_host()) {
            return Ok(());
        }
        let is_index = desc.media_type == oci::MEDIA_INDEX || desc.media_type == oci::DOCKER_LIST;
        if !is_index {
            let mut names = Vec::new();
            if let Some(full) = desc.annotations.get(oci::ANNOTATION_NAME) {
                names.push(full.clone());
            } else if let Some(reference) = desc.annotations.get(oci::ANNOTATION_REF) {
                names.push(self.ref_name(reference));
            }
            out.push(Found {
                manifest: FoundManifest::Oci(desc),
                names,
            });
            return Ok(());
        }
        if depth >= MAX_INDEX_DEPTH {
            return Err(self.format("image indexes nest too deeply"));
        }
        let bytes = self.json_blob(src, &desc, "index")?;
        let index: Index = parse_json(&bytes, &format!("index {}", desc.digest))?;
        let mut inner = Vec::new();
        for child in index.manifests {
            self.collect(src, child, depth + 1, &mut inner)?;
        }
        // A nested index is one image for several platforms: take the first that runs here,
        // under the outer descriptor's names.
        if let Some(mut first) = inner.into_iter().next() {
            if let Some(full) = desc.annotations.get(oci::ANNOTATION_NAME) {
                first.names = vec![full.clone()];
            } else if let Some(reference) = desc.annotations.get(oci::ANNOTATION_REF) {
                first.names = vec![self.ref_name(reference)];
            }
            out.push(first);
        }
        Ok(())
    }

    /// A layout's `ref.name`: a full name (`busybox:1`, `localhost/busybox`), or only a tag
    /// (`latest`, as umoci and `skopeo copy oci:DIR:TAG` write), which is then put after the
    /// input's file name (`busybox-oci.tar` with tag `1` → `busybox-oci:1`).
    fn ref_name(&self, reference: &str) -> String {
        if reference.contains(':') || reference.contains('/') {
            return reference.to_string();
        }
        let stem = self
            .req
            .input
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let stem = [".tar.gz", ".tgz", ".tar", ".oci"]
            .iter()
            .find_map(|ext| stem.strip_suffix(ext))
            .unwrap_or(&stem)
            .to_lowercase();
        format!("{stem}:{reference}")
    }

    fn docker_manifest(&mut self, src: &Source) -> Result<Vec<Found>, ImageError> {
        let bytes = read_small(&src.path("manifest.json")?, "manifest.json")?;
        let entries: Vec<DockerEntry> = parse_json(&bytes, "manifest.json")?;
        if entries.is_empty() {
            return Err(self.format("manifest.json lists no image"));
        }
        Ok(entries
            .into_iter()
            .map(|e| Found {
                names: e.repo_tags.clone().unwrap_or_default(),
                manifest: FoundManifest::Docker(e),
            })
            .collect())
    }

    /// A docker-save image: the config is verified by its file name (`HEX.json`), each layer
    /// by the config's diff ids; an OCI manifest is made for it, whose digest names it.
    fn docker_image(
        &mut self,
        src: &Source,
        entry: DockerEntry,
        names: Vec<String>,
    ) -> Result<Staged, ImageError> {
        let stem = entry.config.rsplit('/').next().unwrap_or("");
        let config_digest = Digest::from_hex(stem.strip_suffix(".json").unwrap_or(stem))
            .ok_or_else(|| {
                self.format(&format!(
                "manifest.json: config {:?} is not named by its sha256, so it cannot be verified",
                entry.config
            ))
            })?;
        let path = src.path(&entry.config)?;
        let size = std::fs::metadata(&path)
            .map_err(|e| self.format(&e.to_string()))?
            .len();
        let config_desc = Descriptor {
            media_type: oci::MEDIA_CONFIG.into(),
            digest: config_digest,
            size,
            annotations: BTreeMap::new(),
            platform: None,
        };
        self.stage_file(&path, &config_desc, "config")?;
        let mut layers = Vec::new();
        for (i, rel) in entry.layers.iter().enumerate() {
            let path = src.path(rel)?;
            let digest = self.stage_unverified(&path, &format!("layer {i} ({rel})"))?;
            let size = std::fs::metadata(self.staged_blob(&digest))
                .map_err(|e| self.format(&e.to_string()))?
                .len();
            let gz = sniff(&self.staged_blob(&digest))? == Compression::Gzip;
            layers.push(Descriptor {
                media_type: if gz {
                    oci::MEDIA_LAYER_GZIP
                } else {
                    oci::MEDIA_LAYER_TAR
                }
                .into(),
                digest,
                size,
                annotations: BTreeMap::new(),
                platform: None,
            });
        }
        let manifest = Manifest {
            schema_version: 2,
            media_type: oci::MEDIA_MANIFEST.into(),
            config: config_desc,
            layers,
        };
        let bytes = serde_json::to_vec(&manifest).expect("manifests serialize");
        let digest = Digest::of(&bytes);
        let blob = self.staged_blob(&digest);
        std::fs::write(&blob, &bytes).map_err(|e| ImageError::store(&blob, e))?;
        self.blobs.insert(digest.clone());
        // The config and layers are staged already.
        self.image(src, digest, manifest, names, |_, _, _| Ok(()))
    }

    /// Verifies the config and layers of one manifest and unpacks them.
    fn image(
        &mut self,
        src: &Source,
        digest: Digest,
        manifest: Manifest,
        names: Vec<String>,
        fetch: impl Fn(&mut Self, &Descriptor, &str) -> Result<(), ImageError>,
    ) -> Result<Staged, ImageError> {
        let _ = src;
        if manifest.layers.len() > MAX_LAYERS {
            return Err(self.format(&format!(
                "manifest {digest} has more than {MAX_LAYERS} layers"
            )));
        }
        let config_bytes = if self.blobs.contains(&manifest.config.digest) {
            read_small(&self.staged_blob(&manifest.config.digest), "config")?
        } else {
            if manifest.config.size > MAX_JSON {
                return Err(self.format(&format!(
                    "config {} is larger than {MAX_JSON} bytes",
                    manifest.config.digest
                )));
            }
            fetch(self, &manifest.config, "config")?;
            read_small(&self.staged_blob(&manifest.config.digest), "config")?
        };
        let config: ConfigFile =
            parse_json(&config_bytes, &format!("config {}", manifest.config.digest))?;
        for (i, layer) in manifest.layers.iter().enumerate() {
            if !self.blobs.contains(&layer.digest) {
                fetch(self, layer, &format!("layer {i}"))?;
            }
        }
        let diff_ids = config
            .rootfs
            .as_ref()
            .map(|r| r.diff_ids.clone())
            .unwrap_or_default();
        if diff_ids.len() != manifest.layers.len() {
            return Err(self.format(&format!(
                "config {} lists {} diff ids for {} layers",
                manifest.config.digest,
                diff_ids.len(),
                manifest.layers.len()
            )));
        }
        let mut record = ImageRecord {
            digest: digest.clone(),
            names: Vec::new(),
            created: config.created.clone(),
            architecture: config.architecture.clone(),
            os: config.os.clone(),
            config_digest: manifest.config.digest.clone(),
            layers: manifest.layers.iter().map(|l| l.digest.clone()).collect(),
            diff_ids: diff_ids.clone(),
            size: 0,
            config: config.config.clone().unwrap_or_default(),
            keep_setuid: self.req.options.keep_setuid,
            keep_caps: self.req.options.keep_caps,
        };
        record.names = names;
        // Already in the store, unpacked the same way: nothing to unpack.
        if let Ok(existing) = self.store.record(&digest) {
            if (existing.keep_setuid, existing.keep_caps) == (record.keep_setuid, record.keep_caps)
                && self.store.image_dir(&digest).join("rootfs").is_dir()
            {
                record.size = existing.size;
                return Ok(Staged { record, dir: None });
            }
        }
        let dir = self.work.join("images").join(digest.hex());
        let rootfs = dir.join("rootfs");
        std::fs::create_dir_all(&rootfs).map_err(|e| ImageError::store(&rootfs, e))?;
        let mut x =
            Extractor::new(&rootfs, self.req.options, self.req.limits).map_err(|source| {
                ImageError::Layer {
                    index: 0,
                    digest: digest.to_string(),
                    source,
                }
            })?;
        for (i, layer) in manifest.layers.iter().enumerate() {
            let path = self.staged_blob(&layer.digest);
            let layer_err = |source| ImageError::Layer {
                index: i,
                digest: layer.digest.to_string(),
                source,
            };
            let file = std::fs::File::open(&path).map_err(|e| ImageError::store(&path, e))?;
            let reader = BufReader::new(file);
            let stream: Box<dyn Read> = match sniff(&path)? {
                Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
                Compression::Zstd => {
                    return Err(ImageError::Zstd {
                        index: i,
                        digest: layer.digest.to_string(),
                    })
                }
                Compression::None => Box::new(reader),
            };
            let mut hashing = Hashing::new(stream);
            x.layer(&mut hashing).map_err(layer_err)?;
            let (diff_id, _) = hashing
                .finish()
                .map_err(|e| layer_err(ExtractError::Read(e)))?;
            if diff_id != diff_ids[i] {
                return Err(ImageError::Digest {
                    what: format!("layer {i} ({}) uncompressed", layer.digest),
                    expected: diff_ids[i].to_string(),
                    actual: diff_id.to_string(),
                });
            }
        }
        record.size = x.bytes();
        x.finish().map_err(|source| ImageError::Layer {
            index: manifest.layers.len(),
            digest: digest.to_string(),
            source,
        })?;
        Ok(Staged {
            record,
            dir: Some(dir),
        })
    }

    /// Moves staged blobs and images into the store and points the names at them.
    fn commit(
        &mut self,
        staged: Vec<Staged>,
        name: Option<&str>,
    ) -> Result<Vec<ImageRecord>, ImageError> {
        for d in &self.blobs {
            let to = self.store.blob(d);
            if !to.exists() {
                let from = self.staged_blob(d);
                std::fs::rename(&from, &to).map_err(|e| ImageError::store(&to, e))?;
            }
        }
        let mut refs = self.store.refs()?;
        let mut out = Vec::new();
        // Images whose names move to the new ones: removed if left with none.
        let mut renamed = BTreeSet::new();
        for mut s in staged {
            let names: Vec<String> = match name {
                Some(n) => vec![n.to_string()],
                None => s
                    .record
                    .names
                    .iter()
                    .filter_map(|n| ImageName::parse(n).ok().map(|n| n.to_string()))
                    .collect(),
            };
            for n in &names {
                if let Some(old) = refs.insert(n.clone(), s.record.digest.clone()) {
                    renamed.insert(old);
                }
            }
            s.record.names = store::names_of(&refs, &s.record.digest);
            if let Some(dir) = s.dir {
                let mut rec = s.record.clone();
                rec.names = Vec::new();
                store::write_atomic(
                    &dir.join("image.json"),
                    &serde_json::to_vec_pretty(&rec).expect("records serialize"),
                )?;
                let to = self.store.image_dir(&s.record.digest);
                if to.exists() {
                    // Unpacked before with other --keep-* options: replace it.
                    let old = self.work.join("replaced");
                    std::fs::rename(&to, &old).map_err(|e| ImageError::store(&to, e))?;
                }
                std::fs::rename(&dir, &to).map_err(|e| ImageError::store(&to, e))?;
            }
            out.push(s.record);
        }
        self.store.write_refs(&refs)?;
        // Names moved to the new images may leave older ones unnamed: those go.
        self.store.collect_garbage(&refs, &renamed)?;
        let refs = self.store.refs()?;
        for rec in &mut out {
            rec.names = store::names_of(&refs, &rec.digest);
        }
        Ok(out)
    }

    fn staged_blob(&self, d: &Digest) -> PathBuf {
        self.work.join("blobs").join(d.hex())
    }

    fn format(&self, detail: &str) -> ImageError {
        ImageError::Format {
            what: self.req.input.display().to_string(),
            detail: detail.to_string(),
        }
    }

    /// Copies the blob `desc` names from the input, verifying size and digest.
    fn blob(&mut self, src: &Source, desc: &Descriptor, what: &str) -> Result<PathBuf, ImageError> {
        if !self.blobs.contains(&desc.digest) {
            let path = src.path(&format!("blobs/sha256/{}", desc.digest.hex()))?;
            self.stage_file(&path, desc, what)?;
        }
        Ok(self.staged_blob(&desc.digest))
    }

    fn stage_file(&mut self, path: &Path, desc: &Descriptor, what: &str) -> Result<(), ImageError> {
        let what = format!("{what} {}", desc.digest);
        let input = std::fs::File::open(path).map_err(|e| self.format(&format!("{what}: {e}")))?;
        let to = self.staged_blob(&desc.digest);
        let out = std::fs::File::create(&to).map_err(|e| ImageError::store(&to, e))?;
        let verdict = copy_verified(input, out, &desc.digest, desc.size)
            .map_err(|e| self.format(&format!("{what}: {e}")))?;
        match verdict {
            Ok(()) => {
                self.blobs.insert(desc.digest.clone());
                Ok(())
            }
            Err(Mismatch::Digest { expected, actual }) => Err(ImageError::Digest {
                what,
                expected: expected.to_string(),
                actual: actual.to_string(),
            }),
            Err(Mismatch::Size { expected, actual }) => Err(ImageError::Size {
                what,
                expected,
                actual: actual.map_or_else(|| "more".into(), |n| n.to_string()),
            }),
        }
    }

    /// Copies a file whose digest nothing declares (a docker-save layer, checked later
    /// against its diff id) and returns its digest.
    fn stage_unverified(&mut self, path: &Path, what: &str) -> Result<Digest, ImageError> {
        let input = std::fs::File::open(path).map_err(|e| self.format(&format!("{what}: {e}")))?;
        let tmp = self.work.join("blobs/incoming");
        let mut out = std::fs::File::create(&tmp).map_err(|e| ImageError::store(&tmp, e))?;
        let mut reader = Hashing::new(input.take(self.req.limits.max_bytes));
        std::io::copy(&mut reader, &mut out).map_err(|e| self.format(&format!("{what}: {e}")))?;
        let (digest, _) = reader
            .finish()
            .map_err(|e| self.format(&format!("{what}: {e}")))?;
        let to = self.staged_blob(&digest);
        std::fs::rename(&tmp, &to).map_err(|e| ImageError::store(&to, e))?;
        self.blobs.insert(digest.clone());
        Ok(digest)
    }

    /// A verified JSON blob (index, manifest), size-capped.
    fn json_blob(
        &mut self,
        src: &Source,
        desc: &Descriptor,
        what: &str,
    ) -> Result<Vec<u8>, ImageError> {
        if desc.size > MAX_JSON {
            return Err(self.format(&format!(
                "{what} {} is larger than {MAX_JSON} bytes",
                desc.digest
            )));
        }
        let path = self.blob(src, desc, what)?;
        read_small(&path, what)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

fn sniff(path: &Path) -> Result<Compression, ImageError> {
    let mut magic = [0u8; 4];
    let mut f = std::fs::File::open(path).map_err(|e| ImageError::store(path, e))?;
    let n = f.read(&mut magic).map_err(|e| ImageError::store(path, e))?;
    Ok(match &magic[..n] {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd] => Compression::Zstd,
        _ => Compression::None,
    })
}

fn read_small(path: &Path, what: &str) -> Result<Vec<u8>, ImageError> {
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

fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ImageError> {
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

#[cfg(test)]
mod tests;
