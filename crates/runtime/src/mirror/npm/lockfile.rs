//! The registry packages an npm lockfile names: `package-lock.json` or
//! `npm-shrinkwrap.json`, lockfileVersion 2 or 3 (the `packages` map npm 7 and later
//! write). Version 1 files (npm 6) are refused with the way out: regenerate with npm 7+.

use serde_json::Value;

/// One registry package version a lockfile needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Locked {
    pub(crate) name: String,
    pub(crate) version: String,
    /// The lock's `integrity`, when it gives one.
    pub(crate) integrity: Option<String>,
}

/// The package name of a `packages` key: what follows its last `node_modules/`.
fn name_of_key(key: &str) -> Option<&str> {
    let at = key.rfind("node_modules/")?;
    Some(&key[at + "node_modules/".len()..])
}

/// The registry packages of the lockfile `text`, sorted, without duplicates. Workspace links,
/// bundled packages and the root are not fetched; a package resolved from anywhere but a
/// registry (a git URL, a local tarball) is an error naming it.
pub(crate) fn parse(text: &str) -> Result<Vec<Locked>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let version = doc["lockfileVersion"]
        .as_u64()
        .ok_or("no lockfileVersion: not an npm lockfile")?;
    if version < 2 {
        return Err(format!(
            "lockfileVersion {version} (npm 6) has no `packages` map; regenerate it with npm 7 or later (`npm install --package-lock-only`)"
        ));
    }
    let packages = doc["packages"]
        .as_object()
        .ok_or("no `packages` map: not an npm lockfile")?;
    let mut out = Vec::new();
    for (key, entry) in packages {
        if key.is_empty() {
            continue;
        }
        let Some(entry) = entry.as_object() else {
            return Err(format!("packages[{key:?}]: not an object"));
        };
        let flag = |f: &str| entry.get(f).and_then(Value::as_bool) == Some(true);
        if flag("link") || flag("inBundle") {
            continue;
        }
        // A workspace member's own directory (no node_modules/ in its key).
        let Some(key_name) = name_of_key(key) else {
            continue;
        };
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(key_name)
            .to_string();
        let version = entry
            .get("version")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("packages[{key:?}]: no version"))?
            .to_string();
        if let Some(resolved) = entry.get("resolved").and_then(Value::as_str) {
            if !(resolved.starts_with("https://") || resolved.starts_with("http://")) {
                return Err(format!(
                    "{name}@{version} is resolved from {resolved}, not a registry; the mirror holds registry packages only"
                ));
            }
        }
        if !super::valid_name(&name) {
            return Err(format!("packages[{key:?}]: {name:?} is not a package name"));
        }
        if !super::valid_version(&version) {
            return Err(format!(
                "packages[{key:?}]: version {version:?} is not a registry version"
            ));
        }
        let integrity = entry
            .get("integrity")
            .and_then(Value::as_str)
            .map(String::from);
        out.push(Locked {
            name,
            version,
            integrity,
        });
    }
    out.sort();
    // The same version at several places: one entry, with the integrity any of them gives.
    out.dedup_by(|later, kept| {
        let same = later.name == kept.name && later.version == kept.version;
        if same && kept.integrity.is_none() {
            kept.integrity = later.integrity.take();
        }
        same
    });
    Ok(out)
}
