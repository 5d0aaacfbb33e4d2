//! The mirror's files, generated from its lock: a static PEP 503 HTML tree (what pip reads
//! from a `file://` index) and PEP 691 JSON pages with api-version 1.1 (PEP 700:
//! `upload-time`, `size`), side by side. Pure: the lock in, (path, bytes) pairs out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::util::escape_html;

/// One distribution file in the mirror: the lock's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Normalised project name (PEP 503).
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) filename: String,
    pub(crate) sha256: String,
    pub(crate) size: u64,
    /// RFC 3339, UTC.
    pub(crate) upload_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) requires_python: Option<String>,
}

/// `lock.json`: what the mirror holds and as of when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub(crate) lock_version: u32,
    /// The date the mirror was cut at (RFC 3339), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) date: Option<String>,
    /// The index it was pulled from, if pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) index: Option<String>,
    pub(crate) files: Vec<Record>,
    /// Go modules (GOPROXY tree under `go/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) go: Vec<GoRecord>,
    /// npm package versions (registry tree under `npm/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) npm: Vec<NpmRecord>,
}

/// One npm package version in the mirror: everything its packument entry is generated from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NpmRecord {
    /// The package name, `@scope/name` for a scoped one.
    pub(crate) name: String,
    pub(crate) version: String,
    /// RFC 3339: the registry's `time[version]`.
    pub(crate) time: String,
    /// `dist.integrity` (sha512 SRI) of the tarball, checked at the pull.
    pub(crate) integrity: String,
    /// `dist.shasum` (sha1 hex) as the registry gave it, kept for old clients.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) shasum: String,
    pub(crate) size: u64,
    /// The fields of the registry's version document clients install from (dependencies,
    /// bin, engines, os, cpu, ...), keys sorted.
    pub(crate) manifest: serde_json::Map<String, serde_json::Value>,
}

/// One Go module version in the mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GoRecord {
    pub(crate) module: String,
    pub(crate) version: String,
    /// RFC 3339, from the version's `.info`.
    pub(crate) time: String,
    /// sha256 of the `.zip` and the `.mod`.
    pub(crate) zip_sha256: String,
    pub(crate) mod_sha256: String,
}

pub(crate) const LOCK_VERSION: u32 = 1;
/// Where the distribution files live, relative to the mirror's root.
pub(crate) const FILES_DIR: &str = "pypi/files";
pub(crate) const SIMPLE_DIR: &str = "pypi/simple";
pub(crate) const GO_DIR: &str = "go";
pub(crate) const NPM_DIR: &str = "npm";

/// Every generated index file, as (path relative to the mirror root, contents), sorted.
pub(crate) fn simple_tree(records: &[Record]) -> Vec<(String, Vec<u8>)> {
    let mut by_project: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_project.entry(&r.name).or_default().push(r);
    }
    let mut out = Vec::new();
    // The root: every project.
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\"><title>Simple index</title></head><body>\n",
    );
    for p in by_project.keys() {
        html.push_str(&format!("<a href=\"{0}/\">{0}</a><br>\n", escape_html(p)));
    }
    html.push_str("</body></html>\n");
    out.push((format!("{SIMPLE_DIR}/index.html"), html.into_bytes()));
    let root_json = serde_json::json!({
        "meta": {"api-version": "1.1"},
        "projects": by_project.keys().map(|p| serde_json::json!({"name": p})).collect::<Vec<_>>(),
    });
    out.push((
        format!("{SIMPLE_DIR}/index.json"),
        (serde_json::to_string_pretty(&root_json).expect("json") + "\n").into_bytes(),
    ));
    for (project, mut files) in by_project {
        files.sort_by(|a, b| a.filename.cmp(&b.filename));
        let mut html = format!(
            "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\"><title>Links for {0}</title></head><body>\n<h1>Links for {0}</h1>\n",
            escape_html(project)
        );
        let mut json_files = Vec::new();
        for f in &files {
            let href = format!("../../files/{}#sha256={}", f.filename, f.sha256);
            let rp = f
                .requires_python
                .as_deref()
                .map(|r| format!(" data-requires-python=\"{}\"", escape_html(r)))
                .unwrap_or_default();
            html.push_str(&format!(
                "<a href=\"{}\"{rp}>{}</a><br>\n",
                escape_html(&href),
                escape_html(&f.filename)
            ));
            let mut entry = serde_json::json!({
                "filename": f.filename,
                "url": format!("../../files/{}", f.filename),
                "hashes": {"sha256": f.sha256},
                "size": f.size,
                "upload-time": f.upload_time,
            });
            if let Some(r) = &f.requires_python {
                entry["requires-python"] = r.clone().into();
            }
            json_files.push(entry);
        }
        html.push_str("</body></html>\n");
        let mut versions: Vec<&str> = files.iter().map(|f| f.version.as_str()).collect();
        versions.dedup();
        let json = serde_json::json!({
            "meta": {"api-version": "1.1"},
            "name": project,
            "versions": versions,
            "files": json_files,
        });
        out.push((
            format!("{SIMPLE_DIR}/{project}/index.html"),
            html.into_bytes(),
        ));
        out.push((
            format!("{SIMPLE_DIR}/{project}/index.json"),
            (serde_json::to_string_pretty(&json).expect("json") + "\n").into_bytes(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, version: &str, filename: &str) -> Record {
        Record {
            name: name.into(),
            version: version.into(),
            filename: filename.into(),
            sha256: "ab".repeat(32),
            size: 10,
            upload_time: "2023-01-02T03:04:05Z".into(),
            requires_python: Some(">=3.7".into()),
        }
    }

    #[test]
    fn tree_has_html_and_json_per_project() {
        let tree = simple_tree(&[
            rec("foo", "1.0", "foo-1.0-py3-none-any.whl"),
            rec("foo", "1.0", "foo-1.0.tar.gz"),
            rec("bar-baz", "2.0", "bar_baz-2.0-py3-none-any.whl"),
        ]);
        let paths: Vec<&str> = tree.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "pypi/simple/index.html",
                "pypi/simple/index.json",
                "pypi/simple/bar-baz/index.html",
                "pypi/simple/bar-baz/index.json",
                "pypi/simple/foo/index.html",
                "pypi/simple/foo/index.json",
            ]
        );
        let foo_html = String::from_utf8(tree[4].1.clone()).unwrap();
        assert!(foo_html.contains(&format!(
            "<a href=\"../../files/foo-1.0-py3-none-any.whl#sha256={}\" data-requires-python=\"&gt;=3.7\">",
            "ab".repeat(32)
        )));
        let foo_json: serde_json::Value = serde_json::from_slice(&tree[5].1).unwrap();
        assert_eq!(foo_json["meta"]["api-version"], "1.1");
        assert_eq!(foo_json["files"][0]["upload-time"], "2023-01-02T03:04:05Z");
        assert_eq!(foo_json["files"][0]["size"], 10);
        assert_eq!(foo_json["versions"], serde_json::json!(["1.0"]));
        // Deterministic: the same lock gives the same bytes.
        assert_eq!(
            tree,
            simple_tree(&[
                rec("bar-baz", "2.0", "bar_baz-2.0-py3-none-any.whl"),
                rec("foo", "1.0", "foo-1.0.tar.gz"),
                rec("foo", "1.0", "foo-1.0-py3-none-any.whl"),
            ])
        );
    }
}
