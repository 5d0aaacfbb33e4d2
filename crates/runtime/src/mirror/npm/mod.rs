//! The npm half of a mirror (`spec/mirror.md`): per package a registry document
//! (packument) holding only the mirrored versions, generated from the lock, and the
//! tarballs, laid out as the registry serves them:
//!
//! ```text
//! npm/NAME/index.json              the packument (NAME is `@scope/name` for a scoped one)
//! npm/NAME/-/BASE-VERSION.tgz      the tarball (BASE: the name without its scope)
//! ```
//!
//! npm cannot read a registry from `file://`, so `exec --mirror` serves this tree over HTTP
//! on `127.0.0.1:4873` inside the sandbox ([`super::serve`]). Everything here is pure (the
//! lock in, bytes out) except [`verify`], [`integrity_of`] and the pull ([`pull`]).

pub(crate) mod lockfile;
pub(crate) mod pull;

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use serde_json::{Map, Value};
use sha2::Digest;

use super::layout::{NpmRecord, NPM_DIR};

/// Where `exec --mirror` serves the npm part inside the sandbox (Verdaccio's port).
pub(crate) const PORT: u16 = 4873;
/// The registry URL clients in the sandbox are pointed at; tarball URLs in the mirror's
/// packuments start with it.
pub(crate) const URL: &str = "http://127.0.0.1:4873";
pub(crate) const DEFAULT_REGISTRY: &str = "https://registry.npmjs.org";

/// The fields of a registry version document that clients install from (npm's abbreviated
/// metadata, less `dist`, which the mirror writes itself).
const MANIFEST_FIELDS: &[&str] = &[
    "name",
    "version",
    "deprecated",
    "dependencies",
    "optionalDependencies",
    "peerDependencies",
    "peerDependenciesMeta",
    "bundleDependencies",
    "bundledDependencies",
    "acceptDependencies",
    "bin",
    "directories",
    "engines",
    "os",
    "cpu",
    "libc",
    "hasInstallScript",
    "_hasShrinkwrap",
];

/// Whether `name` is an npm package name the mirror can lay out as a path: `name` or
/// `@scope/name`, each part non-empty, not starting with `.` or `_`, of URL-safe characters.
pub(crate) fn valid_name(name: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with('.')
            && !p.starts_with('_')
            && p.len() <= 214
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=".contains(c))
    };
    match name.strip_prefix('@') {
        Some(rest) => matches!(rest.split_once('/'), Some((s, n)) if part(s) && part(n)),
        None => part(name),
    }
}

/// Whether `version` is safe in a file name (semver characters only).
fn valid_version(version: &str) -> bool {
    !version.is_empty()
        && !version.starts_with('.')
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.+_".contains(c))
}

/// The name as a registry URL path segment: `@scope/name` → `@scope%2fname`.
pub(crate) fn escaped(name: &str) -> String {
    name.replacen('/', "%2f", 1)
}

/// The tarball's path relative to the mirror root: `npm/@s/n/-/n-1.0.0.tgz`.
pub(crate) fn tarball_rel(name: &str, version: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    format!("{NPM_DIR}/{name}/-/{base}-{version}.tgz")
}

/// The packument's path relative to the mirror root.
pub(crate) fn packument_rel(name: &str) -> String {
    format!("{NPM_DIR}/{name}/index.json")
}

/// The highest version that is not a prerelease, else the highest (npm's `latest`);
/// versions that are not semver are ignored.
pub(crate) fn latest<'a>(versions: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let parsed: Vec<semver::Version> = versions
        .into_iter()
        .filter_map(|v| semver::Version::parse(v).ok())
        .collect();
    let stable = parsed.iter().filter(|v| v.pre.is_empty()).max();
    stable
        .or_else(|| parsed.iter().max())
        .map(|v| v.to_string())
}

/// A registry document as it stood at `date`: only versions whose `time[version]` is at or
/// before it (a version without a time is dropped: nothing proves it existed), the `time`
/// map cut the same way, and `dist-tags` recomputed (`latest` only: other tags may have
/// been moved since).
pub(crate) fn cut(doc: &Value, date: i64) -> Value {
    let time = doc["time"].as_object().cloned().unwrap_or_default();
    let published = |v: &str| {
        time.get(v)
            .and_then(Value::as_str)
            .and_then(|t| crate::determinism::date::parse_date(t).ok())
            .is_some_and(|t| t <= date)
    };
    let mut out = doc.as_object().cloned().unwrap_or_default();
    let versions: Map<String, Value> = doc["versions"]
        .as_object()
        .map(|vs| {
            vs.iter()
                .filter(|(v, _)| published(v))
                .map(|(v, m)| (v.clone(), m.clone()))
                .collect()
        })
        .unwrap_or_default();
    let kept_time: Map<String, Value> = time
        .iter()
        .filter(|(k, _)| versions.contains_key(k.as_str()))
        .map(|(k, t)| (k.clone(), t.clone()))
        .collect();
    let mut tags = Map::new();
    if let Some(l) = latest(versions.keys().map(String::as_str)) {
        tags.insert("latest".into(), l.into());
    }
    out.insert("dist-tags".into(), tags.into());
    out.insert("time".into(), kept_time.into());
    out.insert("versions".into(), versions.into());
    out.into()
}

/// The fields of a registry version document the mirror keeps ([`MANIFEST_FIELDS`]).
pub(crate) fn manifest_of(version_doc: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for f in MANIFEST_FIELDS {
        if let Some(v) = version_doc.get(*f) {
            out.insert((*f).to_string(), v.clone());
        }
    }
    out
}

/// The mirror's packument of one package, from its records.
fn packument(name: &str, records: &[&NpmRecord]) -> Value {
    let mut versions = Map::new();
    let mut time = Map::new();
    for r in records {
        let mut m = r.manifest.clone();
        m.insert("name".into(), name.into());
        m.insert("version".into(), r.version.clone().into());
        m.insert("_id".into(), format!("{name}@{}", r.version).into());
        let mut dist = Map::new();
        dist.insert("integrity".into(), r.integrity.clone().into());
        if !r.shasum.is_empty() {
            dist.insert("shasum".into(), r.shasum.clone().into());
        }
        dist.insert(
            "tarball".into(),
            format!("{URL}/{}", &tarball_rel(name, &r.version)["npm/".len()..]).into(),
        );
        m.insert("dist".into(), dist.into());
        versions.insert(r.version.clone(), m.into());
        time.insert(r.version.clone(), r.time.clone().into());
    }
    let mut tags = Map::new();
    if let Some(l) = latest(records.iter().map(|r| r.version.as_str())) {
        tags.insert("latest".into(), l.into());
    }
    serde_json::json!({
        "_id": name,
        "name": name,
        "dist-tags": tags,
        "time": time,
        "versions": versions,
    })
}

/// Every packument the lock generates, as (path relative to the mirror root, bytes),
/// sorted by path: the same records give the same bytes.
pub(crate) fn tree(records: &[NpmRecord]) -> Vec<(String, Vec<u8>)> {
    let mut by_name: BTreeMap<&str, Vec<&NpmRecord>> = BTreeMap::new();
    for r in records {
        by_name.entry(&r.name).or_default().push(r);
    }
    let mut out: Vec<(String, Vec<u8>)> = by_name
        .into_iter()
        .map(|(name, rs)| {
            let json = serde_json::to_string_pretty(&packument(name, &rs)).unwrap_or_default();
            (packument_rel(name), (json + "\n").into_bytes())
        })
        .collect();
    out.sort();
    out
}

/// The sha512 SRI string (`sha512-BASE64`) and size of a file.
pub(crate) fn integrity_of(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = sha2::Sha512::new();
    let size = std::io::copy(&mut f, &mut h)?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(h.finalize());
    Ok((format!("sha512-{b64}"), size))
}

/// The sha1 hex of a file (`dist.shasum`).
pub(crate) fn sha1_of(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = sha1::Sha1::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether the records can be laid out: names and versions that are safe paths.
pub(crate) fn check_records(records: &[NpmRecord]) -> Result<(), String> {
    for r in records {
        if !valid_name(&r.name) || !valid_version(&r.version) {
            return Err(format!(
                "npm record {}@{} is not a package",
                r.name, r.version
            ));
        }
    }
    Ok(())
}

/// Problems with the npm tree against the lock: each tarball's sha512 and size, files the
/// lock does not list, and packuments that are not exactly what the lock generates.
pub(crate) fn verify(dir: &Path, records: &[NpmRecord]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expected = std::collections::BTreeSet::new();
    for r in records {
        let rel = tarball_rel(&r.name, &r.version);
        match integrity_of(&dir.join(&rel)) {
            Ok((i, size)) if i == r.integrity && size == r.size => {}
            Ok((i, size)) => problems.push(format!(
                "{rel}: {i} ({size} bytes), the lock says {} ({} bytes)",
                r.integrity, r.size
            )),
            Err(_) => problems.push(format!("{rel}: missing")),
        }
        expected.insert(rel);
    }
    for (rel, bytes) in tree(records) {
        match std::fs::read(dir.join(&rel)) {
            Ok(have) if have == bytes => {}
            Ok(_) => problems.push(format!("{rel}: differs from what the lock generates")),
            Err(_) => problems.push(format!("{rel}: missing")),
        }
        expected.insert(rel);
    }
    super::walk(&dir.join(NPM_DIR), dir, &mut |rel| {
        if !expected.contains(rel) {
            problems.push(format!("{rel}: not in the lock"));
        }
    });
    problems
}

/// Writes the packuments the records generate under `dir` (tarballs are in place).
pub(crate) fn write_tree(dir: &Path, records: &[NpmRecord]) -> Result<(), super::MirrorError> {
    for (rel, bytes) in tree(records) {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(super::io("create", parent))?;
        }
        super::write_atomic(&path, &bytes)?;
    }
    Ok(())
}

/// The file `path` (a request path, percent-decoded, without the query) names in the npm
/// tree, relative to the mirror root, and its content type; `None` for anything else.
pub(crate) fn resolve_request(path: &str) -> Option<(String, &'static str)> {
    let rest = path.strip_prefix('/')?.trim_end_matches('/');
    if let Some((name, file)) = rest.split_once("/-/") {
        // The file name of the characters a written one has (`tarball_rel`): no control
        // character, separator or NUL (found by the fuzz pass: `%00` was let through).
        let ok = valid_name(name)
            && file.ends_with(".tgz")
            && !file.starts_with('.')
            && file
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=".contains(c));
        return ok.then(|| {
            (
                format!("{NPM_DIR}/{name}/-/{file}"),
                "application/octet-stream",
            )
        });
    }
    valid_name(rest).then(|| (packument_rel(rest), "application/json"))
}

#[cfg(test)]
mod tests;
