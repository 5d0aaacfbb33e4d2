//! `image import`: every image of an OCI layout or `docker save` archive verified blob by
//! blob, unpacked into a private directory inside the store, and moved into place only when
//! all of it verified.

use std::collections::BTreeSet;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

mod docker;

use super::digest::{copy_verified, Digest, Hashing, Mismatch};
use super::extract::{self, ExtractError, Extractor, Limits, Options, SkippedDevices};
use super::name::ImageName;
use super::oci::{self, ConfigFile, Descriptor, DockerEntry, Index, Manifest};
use super::source::Source;
use super::store::{self, ImageRecord, Store};
use super::{
    parse_json, read_small, sniff, Compression, ImageError, MAX_INDEX_DEPTH, MAX_JSON, MAX_LAYERS,
};

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
            skipped_devices: Default::default(),
        };
        record.names = names;
        // Already in the store, unpacked the same way: nothing to unpack.
        if let Ok(existing) = self.store.record(&digest) {
            if (existing.keep_setuid, existing.keep_caps) == (record.keep_setuid, record.keep_caps)
                && self.store.image_dir(&digest).join("rootfs").is_dir()
            {
                record.size = existing.size;
                record.skipped_devices = existing.skipped_devices;
                return Ok(Staged { record, dir: None });
            }
        }
        let (dir, size, devices) = self.unpack(&digest, &manifest, &diff_ids)?;
        record.size = size;
        record.skipped_devices = devices;
        Ok(Staged {
            record,
            dir: Some(dir),
        })
    }

    /// Unpacks the verified layers of `manifest` into a staged image directory, checking
    /// each uncompressed layer against its diff id; returns the directory, the bytes
    /// unpacked and the device nodes skipped.
    fn unpack(
        &self,
        digest: &Digest,
        manifest: &Manifest,
        diff_ids: &[Digest],
    ) -> Result<(PathBuf, u64, SkippedDevices), ImageError> {
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
                Compression::Zstd => Box::new(super::zstd::MultiZstd::new(reader)),
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
        let size = x.bytes();
        let devices = x.finish().map_err(|source| ImageError::Layer {
            index: manifest.layers.len(),
            digest: digest.to_string(),
            source,
        })?;
        Ok((dir, size, devices))
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
