//! What a run's root filesystem was, for the run record (`rootfs` in `spec/record.md`), so
//! that two results can be compared honestly: an image by its manifest digest; the host's
//! root or a `--rootfs` directory by its distribution (`/etc/os-release`) and a digest of
//! its installed package list (dpkg or apk). Files outside the package manager's view
//! (`/usr/local`, a pip install into the system, edited configuration) are not covered: for
//! a hermetic root use `--image`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The root filesystem of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RootfsId {
    /// `--image`: the image as imported (its flattened root is never changed by a run).
    Image { reference: String, digest: String },
    /// The host's `/` (the default).
    Host(Described),
    /// `--rootfs DIR`.
    Dir(Described),
}

/// A root directory described by what it says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Described {
    pub(crate) path: PathBuf,
    /// `PRETTY_NAME` of its os-release (else `NAME VERSION_ID`); null when it has none.
    pub(crate) distribution: Option<String>,
    /// Its installed packages; null when no known package database is there.
    pub(crate) packages: Option<Packages>,
}

/// An installed package list: one `NAME:ARCH=VERSION` line per package, sorted, hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Packages {
    pub(crate) manager: &'static str,
    pub(crate) count: usize,
    /// `sha256:` of the sorted lines, each ending in a newline.
    pub(crate) digest: String,
}

impl Described {
    /// Reads `root`'s os-release and package database (links resolved inside `root`).
    pub fn of(root: &Path) -> Described {
        let read = |rel: &str| read_inside(root, Path::new(rel));
        let distribution = read("etc/os-release")
            .or_else(|| read("usr/lib/os-release"))
            .and_then(|t| distribution(&t));
        let packages = if let Some(t) = read("var/lib/dpkg/status") {
            Some(packages("dpkg", dpkg_lines(&t)))
        } else {
            read("lib/apk/db/installed").map(|t| packages("apk", apk_lines(&t)))
        };
        Described {
            path: root.to_path_buf(),
            distribution,
            packages,
        }
    }
}

/// The text of `rel` under `root`, following at most a few links, each resolved inside
/// `root` (an absolute link in a `--rootfs` names a path of that root, not of the host).
fn read_inside(root: &Path, rel: &Path) -> Option<String> {
    let mut rel = rel.to_path_buf();
    for _ in 0..8 {
        let path = root.join(&rel);
        match std::fs::read_link(&path) {
            Ok(target) if target.is_absolute() => {
                rel = target.strip_prefix("/").ok()?.to_path_buf();
            }
            Ok(target) => rel = rel.parent()?.join(target),
            Err(_) => return std::fs::read_to_string(path).ok(),
        }
    }
    None
}

fn packages(manager: &'static str, mut lines: Vec<String>) -> Packages {
    lines.sort();
    lines.dedup();
    let mut h = Sha256::new();
    for l in &lines {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Packages {
        manager,
        count: lines.len(),
        digest: format!("sha256:{hex}"),
    }
}

/// `PRETTY_NAME`, else `NAME VERSION_ID`, of an os-release file.
pub(crate) fn distribution(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().trim_matches(['"', '\'']).to_string())
            .filter(|v| !v.is_empty())
    };
    field("PRETTY_NAME").or_else(|| {
        let name = field("NAME")?;
        Some(match field("VERSION_ID") {
            Some(v) => format!("{name} {v}"),
            None => name,
        })
    })
}

/// The installed packages of a dpkg status file.
pub(crate) fn dpkg_lines(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|stanza| {
            let field = |key: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                    .map(str::trim)
            };
            field("Status")?.ends_with(" installed").then_some(())?;
            let arch = field("Architecture").unwrap_or("");
            Some(format!(
                "{}:{arch}={}",
                field("Package")?,
                field("Version")?
            ))
        })
        .collect()
}

/// The installed packages of an apk database (`/lib/apk/db/installed`).
pub(crate) fn apk_lines(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|stanza| {
            let field = |key: &str| stanza.lines().find_map(|l| l.strip_prefix(key));
            let arch = field("A:").unwrap_or("");
            Some(format!("{}:{arch}={}", field("P:")?, field("V:")?))
        })
        .collect()
}

#[cfg(test)]
mod tests;
