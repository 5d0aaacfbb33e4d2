//! `reprorun image pull REF`: an image from an OCI registry (the distribution API) into the
//! store `image import` writes.
//!
//! The plan: resolve the reference ([`reference`]), find credentials ([`auth`]), fetch the
//! manifest by tag or digest (an OCI index or Docker manifest list gives the platform's
//! manifest), then download the config and layers a few at a time ([`blobs`]) into
//! `STORE/pulls/blobs/sha256/`, each verified by digest and bounded by its descriptor's size.
//! The verified blobs are hard-linked into a private OCI layout, which `image import` reads
//! like any other (verifying every blob again and every layer against its diff id), so a
//! pulled image and an imported one are the same thing in the store, recorded by manifest
//! digest.

pub mod auth;
mod blobs;
pub mod http;
pub mod reference;
pub mod registries;

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::digest::Digest;
use super::extract::{Limits, Options};
use super::oci::{self, Descriptor, Index, Manifest};
use super::store::{ImageRecord, Store};
use super::{parse_json, read_small, ImageError, ImportRequest, MAX_JSON};
use http::{Client, Tls};
use reference::Reference;
use registries::{Endpoint, Registries};

/// Blobs downloaded at once.
pub const JOBS: usize = 4;

/// Manifests a registry may answer with, in the `Accept` header.
const ACCEPT: [&str; 4] = [
    oci::MEDIA_INDEX,
    oci::MEDIA_MANIFEST,
    oci::DOCKER_LIST,
    DOCKER_MANIFEST,
];
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

#[derive(Debug, Error)]
pub enum PullError {
    #[error("pull {reference:?}: {why}")]
    Reference { reference: String, why: String },
    #[error(
        "pull --platform {0:?}: give OS/ARCH or OS/ARCH/VARIANT (linux/amd64, linux/arm64/v8)"
    )]
    Platform(String),
    #[error("pull: auth file {path}: {detail}; fix or remove the entry")]
    AuthFile { path: PathBuf, detail: String },
    #[error("pull: --cert-dir {path}: {detail}")]
    CertDir { path: PathBuf, detail: String },
    #[error("pull {url}: {detail}")]
    Http { url: String, detail: String },
    #[error("pull {url}: curl failed (exit {code}): {detail}; check the registry's address, or pass --tls-verify=false / --cert-dir DIR for a private registry")]
    Curl {
        url: String,
        code: i32,
        detail: String,
    },
    #[error("pull {url}: not authorized: {detail}; log in with `podman login` or `docker login` (reprorun reads their auth files)")]
    Unauthorized { url: String, detail: String },
    #[error("pull {url}: the registry answered {status}{detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
    },
    #[error("pull {what}: sha256 is {actual}, but {expected} was asked for; the registry or the path to it is corrupt or tampered with — nothing was imported")]
    Digest {
        what: String,
        expected: String,
        actual: String,
    },
    #[error(
        "pull {what}: {actual} bytes, but its descriptor says {expected}; nothing was imported"
    )]
    Size {
        what: String,
        expected: u64,
        actual: u64,
    },
    #[error("pull {what}: {detail}; nothing was imported")]
    Format { what: String, detail: String },
    #[error(
        "pull {reference}: no image for {platform} in its index (it has {have}); pass --platform"
    )]
    NoPlatform {
        reference: String,
        platform: String,
        have: String,
    },
    #[error("pull: store {path}: {detail}")]
    Store { path: PathBuf, detail: String },
    #[error(transparent)]
    Registries(#[from] registries::RegistriesError),
}

impl PullError {
    pub(crate) fn store(path: &Path, e: impl std::fmt::Display) -> PullError {
        PullError::Store {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }
    }
}

/// What `image pull` was asked to do.
#[derive(Debug, Clone)]
pub struct PullRequest {
    pub reference: String,
    /// `linux/amd64`, `linux/arm64/v8`; default linux and this machine's architecture.
    pub platform: Option<String>,
    pub tls: Tls,
    /// Where credentials are looked for, in order ([`auth::files`]).
    pub auth_files: Vec<PathBuf>,
    /// Mirrors and locations ([`registries`]); the default sends every reference to the
    /// registry it names.
    pub registries: Registries,
}

/// The platform a pull selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    pub fn parse(text: Option<&str>) -> Result<Platform, PullError> {
        let Some(text) = text else {
            return Ok(Platform {
                os: "linux".into(),
                architecture: oci::host_arch().into(),
                variant: None,
            });
        };
        let parts: Vec<&str> = text.split('/').collect();
        match parts.as_slice() {
            [os, arch] if !os.is_empty() && !arch.is_empty() => Ok(Platform {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: None,
            }),
            [os, arch, v] if !os.is_empty() && !arch.is_empty() && !v.is_empty() => Ok(Platform {
                os: os.to_string(),
                architecture: arch.to_string(),
                variant: Some(v.to_string()),
            }),
            _ => Err(PullError::Platform(text.to_string())),
        }
    }

    fn matches(&self, p: &serde_json::Value) -> bool {
        let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("");
        field("os") == self.os
            && field("architecture") == self.architecture
            && self
                .variant
                .as_deref()
                .map_or(true, |v| field("variant") == v)
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// Pulls one image into the store; returns its record. A short name (`python:3.11`) is
/// tried as each fully qualified reference the registry configuration makes of it
/// ([`Registries::qualify`]), in order, until one is pulled; the store names the image by
/// that full reference (`docker.io/library/python:3.11`) and by the short name as given.
pub fn pull(store: &Store, req: &PullRequest) -> Result<ImageRecord, ImageError> {
    let given = Reference::parse(&req.reference).map_err(|why| PullError::Reference {
        reference: req.reference.clone(),
        why,
    })?;
    let candidates = req.registries.qualify(&req.reference);
    let mut last = None;
    for (i, full) in candidates.iter().enumerate() {
        match pull_qualified(store, req, full) {
            Ok(mut rec) => {
                if let (Some(short), true) = (&given.name, full != &req.reference) {
                    add_name(store, &mut rec, short)?;
                }
                return Ok(rec);
            }
            Err(e) if i + 1 < candidates.len() => {
                eprintln!("reprorun: warning: {full}: {e}; trying the next search registry");
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        PullError::Reference {
            reference: req.reference.clone(),
            why: "no search registry to qualify it with".into(),
        }
        .into()
    }))
}

/// Names the pulled image `name` too (refs.json, then its record).
fn add_name(store: &Store, rec: &mut ImageRecord, name: &str) -> Result<(), ImageError> {
    let _lock = store.lock()?;
    let mut refs = store.refs()?;
    refs.insert(name.to_string(), rec.digest.clone());
    store.write_refs(&refs)?;
    if !rec.names.iter().any(|n| n == name) {
        rec.names.push(name.to_string());
        rec.names.sort();
    }
    store.write_record(rec)
}

/// [`pull`] of one fully qualified reference: the places the registry configuration names
/// for it are tried in order (mirrors first); a mirror that fails passes the pull on to the
/// next, and the last place's failure is the pull's.
fn pull_qualified(store: &Store, req: &PullRequest, full: &str) -> Result<ImageRecord, ImageError> {
    let reference = Reference::parse(full).map_err(|why| PullError::Reference {
        reference: full.to_string(),
        why,
    })?;
    let platform = Platform::parse(req.platform.as_deref())?;
    let endpoints = req
        .registries
        .endpoints(&reference)
        .map_err(PullError::from)?;
    let mut last = None;
    for ep in &endpoints {
        match pull_from(store, req, &reference, ep, &platform) {
            Ok(rec) => return Ok(rec),
            Err(e) if ep.mirror => {
                eprintln!(
                    "reprorun: warning: mirror {}/{}: {e}; trying the next place",
                    ep.registry, ep.repository
                );
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        PullError::Reference {
            reference: req.reference.clone(),
            why: "no registry to pull from".into(),
        }
        .into()
    }))
}

/// One attempt: `reference` from the registry and repository of `ep`.
fn pull_from(
    store: &Store,
    req: &PullRequest,
    reference: &Reference,
    ep: &Endpoint,
    platform: &Platform,
) -> Result<ImageRecord, ImageError> {
    let pulls = store.root.join("pulls");
    let cache = pulls.join("blobs/sha256");
    std::fs::create_dir_all(&cache).map_err(|e| PullError::store(&cache, e))?;
    let scratch = tempfile::Builder::new()
        .prefix("pull-")
        .tempdir_in(&pulls)
        .map_err(|e| PullError::store(&pulls, e))?;
    let creds = auth::find(&ep.registry, &req.auth_files)?;
    let tls = Tls {
        verify: req.tls.verify && !ep.insecure,
        cert_dir: req.tls.cert_dir.clone(),
    };
    let client = Client::new(ep.api_host(), &ep.repository, tls, creds, scratch.path())?;
    let (manifest_bytes, digest, media_type) =
        resolve_manifest(&client, reference, platform, scratch.path())?;
    let manifest: Manifest = parse_json(&manifest_bytes, &format!("manifest {digest}"))?;
    if manifest.layers.len() > super::MAX_LAYERS {
        return Err(PullError::Format {
            what: format!("manifest {digest}"),
            detail: format!("more than {} layers", super::MAX_LAYERS),
        }
        .into());
    }
    if manifest.config.size > MAX_JSON {
        return Err(PullError::Size {
            what: format!("config {}", manifest.config.digest),
            expected: MAX_JSON,
            actual: manifest.config.size,
        }
        .into());
    }
    let mut wanted: Vec<Descriptor> = vec![manifest.config.clone()];
    wanted.extend(manifest.layers.iter().cloned());
    let layout = scratch.path().join("layout");
    let layout_blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&layout_blobs).map_err(|e| PullError::store(&layout_blobs, e))?;
    let fetcher = blobs::Fetcher {
        client: &client,
        store,
        cache: &cache,
        into: &layout_blobs,
    };
    fetcher.fetch_all(&wanted)?;
    write_layout(
        &layout,
        &manifest_bytes,
        &digest,
        &media_type,
        reference.name.as_deref(),
    )?;
    let mut recs = super::import(
        store,
        &ImportRequest {
            input: layout,
            name: reference.name.clone(),
            options: Options::default(),
            limits: Limits::default(),
        },
    )?;
    fetcher.forget(&wanted);
    recs.pop().ok_or_else(|| {
        PullError::Format {
            what: req.reference.clone(),
            detail: "the import found no image".into(),
        }
        .into()
    })
}

/// The image manifest for `platform`: its bytes, digest and media type.
fn resolve_manifest(
    client: &Client,
    reference: &Reference,
    platform: &Platform,
    scratch: &Path,
) -> Result<(Vec<u8>, Digest, String), PullError> {
    let (bytes, digest, media) = fetch_manifest(
        client,
        &reference.selector(),
        reference.digest.as_ref(),
        None,
        scratch,
    )?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| PullError::Format {
            what: format!("manifest {digest}"),
            detail: format!("malformed JSON: {e}"),
        })?;
    let media = value
        .get("mediaType")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or(media);
    let is_index = media == oci::MEDIA_INDEX
        || media == oci::DOCKER_LIST
        || (value.get("manifests").is_some() && value.get("layers").is_none());
    if !is_index {
        return Ok((bytes, digest, media));
    }
    let desc = choose(&value, platform).map_err(|have| match have {
        None => PullError::Format {
            what: format!("index {digest}"),
            detail: "malformed index".into(),
        },
        Some(have) => PullError::NoPlatform {
            reference: reference.selector(),
            platform: platform.to_string(),
            have: if have.is_empty() {
                "none".into()
            } else {
                have.join(", ")
            },
        },
    })?;
    let (bytes, digest, media) = fetch_manifest(
        client,
        &desc.digest.to_string(),
        Some(&desc.digest),
        Some(desc.size),
        scratch,
    )?;
    let media = if desc.media_type.is_empty() {
        media
    } else {
        desc.media_type.clone()
    };
    Ok((bytes, digest, media))
}

/// The first entry of an index (OCI index or Docker manifest list) for `platform`; `Err`
/// holds the platforms it has (`None`: not an index).
fn choose(
    index: &serde_json::Value,
    platform: &Platform,
) -> Result<Descriptor, Option<Vec<String>>> {
    let parsed: Index = serde_json::from_value(index.clone()).map_err(|_| None)?;
    let raw = index
        .get("manifests")
        .and_then(|m| m.as_array())
        .cloned()
        .unwrap_or_default();
    let mut have = Vec::new();
    for (desc, raw) in parsed.manifests.into_iter().zip(&raw) {
        let p = raw.get("platform").cloned().unwrap_or_default();
        if platform.matches(&p) {
            return Ok(desc);
        }
        let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("?").to_string();
        have.push(format!("{}/{}", field("os"), field("architecture")));
    }
    Err(Some(have))
}

/// One manifest by tag or digest, verified against `expected` when given.
fn fetch_manifest(
    client: &Client,
    selector: &str,
    expected: Option<&Digest>,
    size: Option<u64>,
    scratch: &Path,
) -> Result<(Vec<u8>, Digest, String), PullError> {
    let out = scratch.join(format!("manifest-{}", selector.replace(':', "-")));
    let path = format!("manifests/{selector}");
    let answer = client.get(
        &path,
        &ACCEPT,
        &out,
        false,
        size.unwrap_or(MAX_JSON).min(MAX_JSON),
    )?;
    let url = client.url(&path);
    if answer.status != 200 {
        let body = read_small(&out, "answer").unwrap_or_default();
        let detail = String::from_utf8_lossy(&body[..body.len().min(300)])
            .trim()
            .to_string();
        let _ = std::fs::remove_file(&out);
        return Err(PullError::Status {
            url,
            status: answer.status,
            detail: if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            },
        });
    }
    let bytes = read_small(&out, "manifest").map_err(|e| PullError::Format {
        what: url.clone(),
        detail: e.to_string(),
    })?;
    let _ = std::fs::remove_file(&out);
    let digest = Digest::of(&bytes);
    if let Some(want) = expected {
        if &digest != want {
            return Err(PullError::Digest {
                what: format!("manifest {selector}"),
                expected: want.to_string(),
                actual: digest.to_string(),
            });
        }
    }
    if let Some(size) = size {
        if bytes.len() as u64 != size {
            return Err(PullError::Size {
                what: format!("manifest {selector}"),
                expected: size,
                actual: bytes.len() as u64,
            });
        }
    }
    let media = answer
        .header("content-type")
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    Ok((bytes, digest, media))
}

/// The OCI layout `image import` reads: the manifest, its blobs (linked in already) and an
/// index naming it.
fn write_layout(
    layout: &Path,
    manifest: &[u8],
    digest: &Digest,
    media_type: &str,
    name: Option<&str>,
) -> Result<(), PullError> {
    let put = |rel: &str, bytes: &[u8]| {
        let p = layout.join(rel);
        std::fs::write(&p, bytes).map_err(|e| PullError::store(&p, e))
    };
    put(&format!("blobs/sha256/{}", digest.hex()), manifest)?;
    put("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    let mut desc = serde_json::json!({
        "mediaType": if media_type.is_empty() { oci::MEDIA_MANIFEST } else { media_type },
        "digest": digest.to_string(),
        "size": manifest.len(),
    });
    if let Some(n) = name {
        desc["annotations"] = serde_json::json!({ oci::ANNOTATION_NAME: n });
    }
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [desc]});
    put("index.json", index.to_string().as_bytes())
}

#[cfg(test)]
mod tests;
