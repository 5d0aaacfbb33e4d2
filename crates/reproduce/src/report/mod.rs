//! `reprorun reproduce report`: the [`Summary`] as a report document (the pipeline's
//! `pipeline::doc::Doc`: its sections in [`sections`], its charts in [`charts`]) rendered to Markdown
//! (`report.md`) and to one self-contained HTML page with inline SVG charts (`report.html`:
//! inline CSS, no scripts, no external URLs), and as JSON (`summary.json`).
//!
//! Output is deterministic: the same summary gives the same bytes. Every piece of text that
//! comes from the study (instance ids come from user files) is escaped for the format it
//! goes into, by the document's renderers.

mod charts;
mod ledger;
mod sections;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::summary::{ClassCounts, Summary};

/// The report's file names, in the order [`write_report`] returns them.
pub(crate) const MARKDOWN_FILE: &str = "report.md";
pub(crate) const HTML_FILE: &str = "report.html";
pub(crate) const JSON_FILE: &str = "summary.json";

/// Why a report could not be written; each names the step and the path.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("creating the report directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serializing the summary for {path}: {source}")]
    Serialize {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Each instance's logs, a path relative to the report (`reproduce report` writes SWE-bench's
/// layout beside it); instances without one are not linked.
pub(crate) type Links = BTreeMap<String, String>;

/// Writes `report.md`, `report.html` and `summary.json` into `out` (created with its
/// parents when missing), each instance linked to its logs in `links`, and returns their
/// paths in that order. Every file is rendered
/// first, then written through a temporary file renamed over the target, so a failure
/// leaves each file either as it was or complete, never half written.
pub(crate) fn write_report(
    summary: &Summary,
    out: &Path,
    links: &Links,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(out).map_err(|source| ReportError::CreateDir {
        path: out.to_path_buf(),
        source,
    })?;
    let json_path = out.join(JSON_FILE);
    let json = render_json(summary).map_err(|source| ReportError::Serialize {
        path: json_path.clone(),
        source,
    })?;
    let files = [
        (out.join(MARKDOWN_FILE), render_markdown(summary, links)),
        (out.join(HTML_FILE), render_html(summary, links)),
        (json_path, json),
    ];
    let mut written = Vec::with_capacity(files.len());
    for (path, text) in files {
        reprorun_runtime::sys::write_atomic(&path, text.as_bytes(), 0o644).map_err(|source| {
            ReportError::Write {
                path: path.clone(),
                source,
            }
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The summary as pretty-printed JSON with a final newline (the content of `summary.json`).
pub(crate) fn render_json(summary: &Summary) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(summary)?;
    text.push('\n');
    Ok(text)
}

/// The report as Markdown.
pub(crate) fn render_markdown(s: &Summary, links: &Links) -> String {
    sections::document(s, links).markdown()
}

/// The report as one self-contained HTML page.
pub(crate) fn render_html(s: &Summary, links: &Links) -> String {
    sections::document(s, links).html()
}

/// The arms with classified instances, in report order, with their labels.
pub(super) fn arms(s: &Summary) -> Vec<(&'static str, ClassCounts)> {
    let mut arms = Vec::new();
    let mut push = |label, counts: Option<ClassCounts>| {
        if let Some(c) = counts.filter(|c| c.total() > 0) {
            arms.push((label, c));
        }
    };
    push("shim", Some(s.shim));
    push("no shim", s.no_shim);
    push("baseline shim", s.baseline);
    push("baseline no shim", s.baseline_no_shim);
    arms
}

#[cfg(test)]
mod tests;
