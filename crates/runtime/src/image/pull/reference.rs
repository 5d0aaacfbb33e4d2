//! Registry references as Docker and podman write them: `python:3.11-slim` (Docker Hub's
//! `library/python`), `ghcr.io/owner/name:tag`, `host:port/name@sha256:HEX`, a tag and a
//! digest together (`name:tag@sha256:HEX`, the digest wins).

use super::super::digest::Digest;
use super::super::name::ImageName;

/// Docker Hub as references name it, and the host its API answers on.
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_API: &str = "registry-1.docker.io";

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `docker.io`, `ghcr.io`, `localhost:5000`.
    pub registry: String,
    /// The repository on the registry (`library/python` on Docker Hub).
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
    /// The name the store records (`python:3.11-slim` as written, tag defaulted to
    /// `latest`); `None` for a reference by digest alone.
    pub name: Option<String>,
}

impl Reference {
    pub fn parse(text: &str) -> Result<Reference, String> {
        let (name_part, digest) = match text.split_once('@') {
            Some((n, d)) => {
                let digest = Digest::parse(d)
                    .ok_or_else(|| format!("digest {d:?} must be sha256: and 64 hex digits"))?;
                (n, Some(digest))
            }
            None => (text, None),
        };
        let parsed = ImageName::parse(name_part)?;
        let last_slash = name_part.rfind('/').map_or(0, |i| i + 1);
        let tag = name_part[last_slash..]
            .contains(':')
            .then(|| parsed.tag.clone());
        let (registry, mut repository) = match parsed.repository.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), parsed.repository.clone()),
        };
        let registry = match registry.as_str() {
            "index.docker.io" | DOCKER_HUB_API => DOCKER_HUB.to_string(),
            _ => registry,
        };
        if registry == DOCKER_HUB && !repository.contains('/') {
            repository = format!("library/{repository}");
        }
        let name = match (&tag, &digest) {
            (None, Some(_)) => None,
            _ => Some(parsed.to_string()),
        };
        let tag = match (&tag, &digest) {
            (None, None) => Some(parsed.tag.clone()),
            _ => tag,
        };
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
            name,
        })
    }

    /// The host (and port) the registry's API answers on.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }

    /// What the manifest is asked for by: the digest when given, else the tag.
    pub fn selector(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => super::super::name::DEFAULT_TAG.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn docker_hub_short_names_are_library_repositories() {
        let r = Reference::parse("python:3.11-slim").unwrap();
        assert_eq!(r.registry, "docker.io");
        assert_eq!(r.api_host(), "registry-1.docker.io");
        assert_eq!(r.repository, "library/python");
        assert_eq!(r.tag.as_deref(), Some("3.11-slim"));
        assert_eq!(r.name.as_deref(), Some("python:3.11-slim"));
        let r = Reference::parse("busybox").unwrap();
        assert_eq!(r.selector(), "latest");
        assert_eq!(r.name.as_deref(), Some("busybox:latest"));
        let r = Reference::parse("docker.io/bitnami/redis:7").unwrap();
        assert_eq!(r.repository, "bitnami/redis");
        let r = Reference::parse("index.docker.io/library/alpine").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("docker.io", "library/alpine")
        );
    }

    #[test]
    fn other_registries_ports_and_digests() {
        let r = Reference::parse(
            "ghcr.io/epoch-research/swe-bench.eval.x86_64.astropy__astropy-12907:latest",
        )
        .unwrap();
        assert_eq!(r.registry, "ghcr.io");
        assert_eq!(
            r.repository,
            "epoch-research/swe-bench.eval.x86_64.astropy__astropy-12907"
        );
        let text = format!("localhost:5000/team/app@sha256:{HEX}");
        let r = Reference::parse(&text).unwrap();
        assert_eq!(r.api_host(), "localhost:5000");
        assert_eq!(r.repository, "team/app");
        assert_eq!(r.tag, None);
        assert_eq!(r.name, None);
        assert_eq!(r.selector(), format!("sha256:{HEX}"));
        let r = Reference::parse(&format!("127.0.0.1:5000/app:1@sha256:{HEX}")).unwrap();
        assert_eq!(r.tag.as_deref(), Some("1"));
        assert_eq!(r.name.as_deref(), Some("127.0.0.1:5000/app:1"));
        assert_eq!(r.selector(), format!("sha256:{HEX}"));
    }

    #[test]
    fn bad_references_are_refused() {
        for bad in [
            "",
            "UPPER/case",
            "a@sha256:12",
            "a@md5:00",
            "a:b:c",
            "x:-tag",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
    }
}
