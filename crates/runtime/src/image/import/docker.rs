//! `docker save` archives: manifest.json's images, each given an OCI manifest of its own.

use std::collections::BTreeMap;

use super::{Found, FoundManifest, Import, Staged};
use crate::image::digest::Digest;
use crate::image::oci::{self, Descriptor, DockerEntry, Manifest};
use crate::image::source::Source;
use crate::image::{parse_json, read_small, sniff, Compression, ImageError};

impl Import<'_> {
    /// The images a docker-save archive's manifest.json lists.
    pub(super) fn docker_manifest(&mut self, src: &Source) -> Result<Vec<Found>, ImageError> {
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
    pub(super) fn docker_image(
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
}
