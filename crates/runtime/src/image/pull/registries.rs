//! Where a reference is pulled from: podman's `registries.conf` (containers-registries.conf(5),
//! version 2: `[[registry]]` with `prefix`, `location`, `insecure`, `blocked` and
//! `[[registry.mirror]]`) and Docker's `daemon.json` (`registry-mirrors` for Docker Hub,
//! `insecure-registries`), read as data: [`Registries::endpoints`] turns a reference into the
//! places to try, mirrors first, which the pull then tries in order.
//!
//! Short names (`python:3.11`, no registry host) are qualified as podman qualifies them:
//! each of `unqualified-search-registries` in order ([`Registries::qualify`]), and Docker's
//! `docker.io` (`docker.io/library/python:3.11`) when no file names any. Short-name aliases
//! are not read.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use super::reference::Reference;

/// The largest configuration file read.
const MAX_CONF: u64 = 1 << 20;
/// Drop-in files read from one `registries.conf.d`.
const MAX_DROPINS: usize = 256;

#[derive(Debug, Error)]
pub enum RegistriesError {
    #[error(
        "registries configuration {path}: {detail}; fix the file or pass --registries-conf FILE"
    )]
    Read { path: PathBuf, detail: String },
    #[error("registries configuration {path}: {detail}")]
    Rule { path: PathBuf, detail: String },
    #[error("pull {reference}: the registry {prefix} is blocked by {path}")]
    Blocked {
        reference: String,
        prefix: String,
        path: PathBuf,
    },
}

/// Which references a mirror serves (`pull-from-mirror`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullFrom {
    #[default]
    All,
    DigestOnly,
    TagOnly,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct MirrorConf {
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    pull_from_mirror: PullFrom,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RegistryConf {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<MirrorConf>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfFile {
    #[serde(default)]
    registry: Vec<RegistryConf>,
    #[serde(default, rename = "unqualified-search-registries")]
    unqualified_search_registries: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct DaemonJson {
    #[serde(default)]
    registry_mirrors: Vec<String>,
    #[serde(default)]
    insecure_registries: Vec<String>,
}

/// One `[[registry]]`, with the file that said it.
#[derive(Debug, Clone)]
struct Rule {
    conf: RegistryConf,
    from: PathBuf,
}

/// The registry configuration: podman's rules and Docker's Hub mirrors.
#[derive(Debug, Clone, Default)]
pub struct Registries {
    rules: Vec<Rule>,
    /// `registry-mirrors` (hosts, with whether they are plain HTTP), for `docker.io`.
    hub_mirrors: Vec<(String, bool)>,
    /// `insecure-registries` (hosts).
    insecure: Vec<String>,
    /// `unqualified-search-registries`, as the last file that sets it says.
    search: Vec<String>,
}

/// A place to pull a reference from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `docker.io`, `127.0.0.1:5000`: where credentials and certificates are looked up.
    pub registry: String,
    /// The repository there (`library/busybox`).
    pub repository: String,
    /// No certificate check, plain HTTP allowed.
    pub insecure: bool,
    /// A mirror (a failure moves on to the next endpoint).
    pub mirror: bool,
}

impl Endpoint {
    /// The host its API answers on (Docker Hub's is `registry-1.docker.io`).
    pub fn api_host(&self) -> &str {
        if self.registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            &self.registry
        }
    }
}

/// The files read when no `--registries-conf` is given, podman's then Docker's:
/// `$CONTAINERS_REGISTRIES_CONF`, else `~/.config/containers/registries.conf` when it exists,
/// else `/etc/containers/registries.conf`, then the `.conf` drop-ins of
/// `/etc/containers/registries.conf.d` and `~/.config/containers/registries.conf.d`; and
/// `/etc/docker/daemon.json`. Missing files are skipped.
pub fn default_files(var: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let home = var("HOME").map(PathBuf::from);
    let user_dir = home.as_ref().map(|h| h.join(".config/containers"));
    let mut files = Vec::new();
    if let Some(f) = var("CONTAINERS_REGISTRIES_CONF").filter(|f| !f.is_empty()) {
        files.push(PathBuf::from(f));
    } else {
        let user = user_dir.as_ref().map(|d| d.join("registries.conf"));
        match user.filter(|u| u.is_file()) {
            Some(u) => files.push(u),
            None => files.push(PathBuf::from("/etc/containers/registries.conf")),
        }
        let mut dirs = vec![PathBuf::from("/etc/containers/registries.conf.d")];
        dirs.extend(user_dir.map(|d| d.join("registries.conf.d")));
        for dir in dirs {
            let mut dropins: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|e| e == "conf"))
                        .take(MAX_DROPINS)
                        .collect()
                })
                .unwrap_or_default();
            dropins.sort();
            files.extend(dropins);
        }
    }
    files.push(PathBuf::from("/etc/docker/daemon.json"));
    files.retain(|f| f.is_file());
    files
}

fn read_bounded(path: &Path) -> Result<String, RegistriesError> {
    use std::io::Read;
    let bad = |detail: String| RegistriesError::Read {
        path: path.to_path_buf(),
        detail,
    };
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut text = String::new();
    f.take(MAX_CONF + 1)
        .read_to_string(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    if text.len() as u64 > MAX_CONF {
        return Err(bad(format!("larger than {MAX_CONF} bytes")));
    }
    Ok(text)
}

/// `https://host:port/path` → (`host:port`, plain HTTP).
fn url_host(url: &str) -> (String, bool) {
    let (rest, http) = match url.split_once("://") {
        Some((scheme, rest)) => (rest, scheme.eq_ignore_ascii_case("http")),
        None => (url, false),
    };
    (rest.split('/').next().unwrap_or("").to_string(), http)
}

impl Registries {
    /// Reads `files` in order (a later `[[registry]]` with the same prefix replaces an
    /// earlier one). A file whose name ends in `.json`, or whose text starts with `{`, is
    /// Docker's `daemon.json`; anything else is a `registries.conf`.
    pub fn load(files: &[PathBuf]) -> Result<Registries, RegistriesError> {
        let mut r = Registries::default();
        for path in files {
            let text = read_bounded(path)?;
            let bad = |detail: String| RegistriesError::Read {
                path: path.clone(),
                detail,
            };
            if path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{') {
                let d: DaemonJson = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
                r.hub_mirrors
                    .extend(d.registry_mirrors.iter().map(|m| url_host(m)));
                r.insecure.extend(d.insecure_registries);
                continue;
            }
            let conf: ConfFile = toml::from_str(&text).map_err(|e| {
                let line = e.span().map_or(0, |r| {
                    text[..r.start.min(text.len())].lines().count().max(1)
                });
                let why: Vec<&str> = e.message().split_whitespace().collect();
                bad(format!("line {line}: {}", why.join(" ")))
            })?;
            if let Some(search) = conf.unqualified_search_registries {
                r.search = search;
            }
            for mut reg in conf.registry {
                if reg.prefix.is_empty() {
                    reg.prefix = reg.location.clone();
                }
                if reg.prefix.is_empty() {
                    return Err(RegistriesError::Rule {
                        path: path.clone(),
                        detail: "a [[registry]] has neither prefix nor location".into(),
                    });
                }
                r.rules.retain(|old| old.conf.prefix != reg.prefix);
                r.rules.push(Rule {
                    conf: reg,
                    from: path.clone(),
                });
            }
        }
        Ok(r)
    }

    /// The fully qualified references a `reference` may mean, in the order they are tried:
    /// itself when it names a registry host (a first component with `.` or `:`, or
    /// `localhost`); else each `unqualified-search-registries` entry before it, or
    /// `docker.io` when none is configured. On `docker.io` a one-component name is in
    /// `library/` (`python:3.11` → `docker.io/library/python:3.11`). The text is not checked
    /// here: [`Reference::parse`] checks each one.
    pub fn qualify(&self, reference: &str) -> Vec<String> {
        let name = reference.split('@').next().unwrap_or(reference);
        let qualified = name.split_once('/').is_some_and(|(first, _)| {
            first.contains('.') || first.contains(':') || first == "localhost"
        });
        if qualified {
            return vec![reference.to_string()];
        }
        let hub = ["docker.io".to_string()];
        let search = if self.search.is_empty() {
            &hub[..]
        } else {
            &self.search[..]
        };
        search
            .iter()
            .map(|reg| {
                let reg = reg.trim_end_matches('/');
                match reg {
                    "docker.io" | "index.docker.io" if !name.contains('/') => {
                        format!("docker.io/library/{reference}")
                    }
                    _ => format!("{reg}/{reference}"),
                }
            })
            .collect()
    }

    /// `--registries-conf FILE` when given (that file alone), else [`default_files`].
    pub fn for_flag(file: Option<&Path>) -> Result<Registries, RegistriesError> {
        match file {
            Some(f) => Registries::load(&[f.to_path_buf()]),
            None => Registries::load(&default_files(|k| std::env::var(k).ok())),
        }
    }

    /// The rule whose prefix matches `full` (`registry/repository`), the longest first.
    fn rule_for(&self, full: &str) -> Option<&Rule> {
        let host = full.split('/').next().unwrap_or("");
        self.rules
            .iter()
            .filter(|r| {
                let p = r.conf.prefix.as_str();
                match p.strip_prefix('*') {
                    Some(suffix) => host.ends_with(suffix) && host.len() > suffix.len(),
                    None => {
                        full.starts_with(p)
                            && matches!(full.as_bytes().get(p.len()), None | Some(b'/'))
                    }
                }
            })
            .max_by_key(|r| (!r.conf.prefix.starts_with('*'), r.conf.prefix.len()))
    }

    /// Where `reference` is pulled from, in order: the matching rule's mirrors that serve it
    /// (by tag or by digest), then its location; or Docker's Hub mirrors then Docker Hub; or
    /// the registry the reference names.
    pub fn endpoints(&self, reference: &Reference) -> Result<Vec<Endpoint>, RegistriesError> {
        let full = format!("{}/{}", reference.registry, reference.repository);
        let by_digest = reference.digest.is_some();
        let split = |loc: &str, insecure: bool, mirror: bool| {
            let (registry, repository) = loc.split_once('/').unwrap_or((loc, ""));
            let registry = match registry {
                "index.docker.io" | "registry-1.docker.io" => "docker.io",
                r => r,
            };
            Endpoint {
                registry: registry.to_string(),
                repository: repository.trim_matches('/').to_string(),
                insecure: insecure || self.insecure.iter().any(|h| h == registry),
                mirror,
            }
        };
        if let Some(rule) = self.rule_for(&full) {
            let c = &rule.conf;
            if c.blocked {
                return Err(RegistriesError::Blocked {
                    reference: full,
                    prefix: c.prefix.clone(),
                    path: rule.from.clone(),
                });
            }
            // A wildcard prefix matched the reference's host: locations replace the host.
            let matched = if c.prefix.starts_with('*') {
                reference.registry.len()
            } else {
                c.prefix.len()
            };
            let rest = &full[matched..];
            let rewrite = |loc: &str| format!("{loc}{rest}");
            let mut out = Vec::new();
            for m in &c.mirror {
                let serves = match (m.pull_from_mirror, c.mirror_by_digest_only) {
                    (_, true) | (PullFrom::DigestOnly, _) => by_digest,
                    (PullFrom::TagOnly, _) => !by_digest,
                    (PullFrom::All, false) => true,
                };
                if serves && !m.location.is_empty() {
                    out.push(split(&rewrite(&m.location), m.insecure, true));
                }
            }
            let location = if c.location.is_empty() {
                full.clone()
            } else {
                rewrite(&c.location)
            };
            out.push(split(&location, c.insecure, false));
            return Ok(out);
        }
        let mut out = Vec::new();
        if reference.registry == "docker.io" {
            for (host, http) in &self.hub_mirrors {
                out.push(split(
                    &format!("{host}/{}", reference.repository),
                    *http,
                    true,
                ));
            }
        }
        out.push(split(&full, false, false));
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
