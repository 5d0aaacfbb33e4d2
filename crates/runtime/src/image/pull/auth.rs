//! Credentials from the auth files Docker and podman write, and the registry's
//! `WWW-Authenticate` challenge.
//!
//! Files, first hit wins (podman's order, then Docker's): `$REGISTRY_AUTH_FILE`,
//! `$XDG_RUNTIME_DIR/containers/auth.json`, `$DOCKER_CONFIG/config.json`,
//! `~/.docker/config.json`. An entry of `auths` is keyed by the registry host (with or
//! without `https://` and a path; Docker Hub's is `https://index.docker.io/v1/`) and holds
//! `auth`, base64 of `USER:PASSWORD` (or `username` and `password`). Credential helpers
//! (`credsStore`) are not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use super::PullError;

/// Largest auth file read.
const MAX_AUTH_FILE: u64 = 1 << 20;

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <hidden>)", self.username)
    }
}

#[derive(Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The auth files to read, in order, from the environment given by `var`.
pub fn files(var: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(f) = var("REGISTRY_AUTH_FILE") {
        out.push(PathBuf::from(f));
    }
    if let Some(d) = var("XDG_RUNTIME_DIR") {
        out.push(Path::new(&d).join("containers/auth.json"));
    }
    if let Some(d) = var("DOCKER_CONFIG") {
        out.push(Path::new(&d).join("config.json"));
    }
    if let Some(h) = var("HOME") {
        out.push(Path::new(&h).join(".docker/config.json"));
    }
    out
}

/// The credentials for `registry` in the first of `files` that has them.
pub fn find(registry: &str, files: &[PathBuf]) -> Result<Option<Credentials>, PullError> {
    for path in files {
        let Ok(bytes) = read_bounded(path) else {
            continue; // a missing file is the usual case
        };
        let file: AuthFile = serde_json::from_slice(&bytes).map_err(|e| PullError::AuthFile {
            path: path.clone(),
            detail: format!("malformed JSON: {e}"),
        })?;
        for (key, entry) in &file.auths {
            if !key_matches(key, registry) {
                continue;
            }
            return entry_credentials(entry)
                .map(Some)
                .map_err(|detail| PullError::AuthFile {
                    path: path.clone(),
                    detail: format!("auths[{key:?}]: {detail}"),
                });
        }
    }
    Ok(None)
}

fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_AUTH_FILE)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn key_matches(key: &str, registry: &str) -> bool {
    let host = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = host.split('/').next().unwrap_or(host);
    let hub = |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
    host == registry || (hub(host) && hub(registry))
}

fn entry_credentials(entry: &Entry) -> Result<Credentials, String> {
    if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| "auth is not base64".to_string())?;
        let text = String::from_utf8(raw).map_err(|_| "auth is not UTF-8".to_string())?;
        let (u, p) = text
            .split_once(':')
            .ok_or_else(|| "auth is not base64 of USER:PASSWORD".to_string())?;
        return Ok(Credentials {
            username: u.to_string(),
            password: p.to_string(),
        });
    }
    match (&entry.username, &entry.password) {
        (Some(u), Some(p)) => Ok(Credentials {
            username: u.clone(),
            password: p.clone(),
        }),
        _ => Err("no auth (credential helpers are not supported)".into()),
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses `Bearer realm="…",service="…",scope="…"` or `Basic realm="…"`.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = BTreeMap::new();
    let mut s = rest.trim();
    while !s.is_empty() {
        let (key, after) = s.split_once('=')?;
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (q[..end].to_string(), &q[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_string(), &after[end..])
        };
        params.insert(key, value);
        s = next.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_of_docker_hub_ghcr_and_basic() {
        let hub = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/python:pull""#;
        assert_eq!(
            parse_challenge(hub),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".into(),
                service: Some("registry.docker.io".into()),
                scope: Some("repository:library/python:pull".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(parse_challenge(r#"Bearer service="x""#), None);
        assert_eq!(parse_challenge(r#"Bearer realm="unterminated"#), None);
    }

    #[test]
    fn auth_files_in_order_with_docker_hub_aliases() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        let enc = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        std::fs::write(
            &a,
            format!(
                r#"{{"auths":{{"localhost:5000":{{"auth":"{}"}}}}}}"#,
                enc("alice:pw:with:colons")
            ),
        )
        .unwrap();
        std::fs::write(&b, format!(r#"{{"auths":{{"https://index.docker.io/v1/":{{"auth":"{}"}},"localhost:5000":{{"auth":"{}"}}}}}}"#, enc("hub:x"), enc("bob:y"))).unwrap();
        let files = vec![dir.path().join("missing.json"), a.clone(), b.clone()];
        let c = find("localhost:5000", &files).unwrap().unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("alice", "pw:with:colons")
        );
        let c = find("docker.io", &files).unwrap().unwrap();
        assert_eq!(c.username, "hub");
        assert_eq!(find("ghcr.io", &files).unwrap(), None);
        assert!(!format!("{c:?}").contains('x'));
        std::fs::write(&a, "{not json").unwrap();
        assert!(matches!(
            find("ghcr.io", &files),
            Err(PullError::AuthFile { .. })
        ));
        std::fs::write(&a, r#"{"auths":{"ghcr.io":{"auth":"!!!"}}}"#).unwrap();
        assert!(find("ghcr.io", &files).is_err());
    }

    #[test]
    fn files_follow_podman_then_docker() {
        let env = |k: &str| match k {
            "REGISTRY_AUTH_FILE" => Some("/r.json".to_string()),
            "XDG_RUNTIME_DIR" => Some("/run/user/1".to_string()),
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        let f = files(env);
        assert_eq!(
            f,
            vec![
                PathBuf::from("/r.json"),
                "/run/user/1/containers/auth.json".into(),
                "/home/u/.docker/config.json".into()
            ]
        );
    }
}
