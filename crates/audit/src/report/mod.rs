//! `reprorun audit report`: the metrics of one or more study databases (`audit metrics`)
//! and every paper's hidden issues, runs, findings and judge labels, as `report.md`,
//! `report.html` (one self-contained page: inline CSS and SVG, no scripts, every text
//! escaped: issue and finding text is untrusted) and `metrics.json` (the `audit metrics
//! --json` object). The same studies give the same bytes.

mod chart;
mod sections;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use thiserror::Error;

use crate::metrics::{self, Options};

/// The report's file names.
pub(crate) const MARKDOWN_FILE: &str = "report.md";
pub(crate) const HTML_FILE: &str = "report.html";
pub(crate) const JSON_FILE: &str = "metrics.json";

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("create the report directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serialize {path}: {source}")]
    Serialize {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `reprorun audit report` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes DIR/report.md, DIR/report.html (self-contained: inline CSS and SVG, no scripts) and DIR/metrics.json (what `audit metrics --json` prints). Exit status 125 on bad input."
)]
pub struct ReportArgs {
    /// A study database (`audit run --db`); repeat for several configurations.
    #[arg(long, value_name = "FILE", required = true)]
    pub db: Vec<PathBuf>,
    /// The judge whose labels count (default: the only judge in a study, else `builtin`).
    #[arg(long, value_name = "NAME")]
    pub judge: Option<String>,
    /// Curves and headline rates for k = 1..K.
    #[arg(long, default_value_t = 10, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub k: u32,
    /// Paper-level bootstrap draws for the 95% intervals (0: none).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub bootstrap: u32,
    /// The bootstrap's seed.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,
    /// The report directory (created).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The three files' contents: Markdown, HTML, JSON.
pub(crate) fn render(
    configs: &[metrics::Config],
    m: &metrics::Metrics,
) -> Result<[String; 3], serde_json::Error> {
    let doc = sections::document(configs, m);
    let mut json = serde_json::to_string_pretty(m)?;
    json.push('\n');
    Ok([doc.markdown(), doc.html(), json])
}

/// Runs `reprorun audit report`.
pub(crate) fn command(args: ReportArgs) -> Result<(), super::AuditError> {
    let o = Options {
        k: args.k,
        bootstrap: args.bootstrap,
        seed: args.seed,
    };
    let (configs, m) = metrics::gather(&args.db, args.judge.as_deref(), o)?;
    let out = &args.out;
    std::fs::create_dir_all(out).map_err(|source| ReportError::CreateDir {
        path: out.clone(),
        source,
    })?;
    let files = render(&configs, &m).map_err(|source| ReportError::Serialize {
        path: out.join(JSON_FILE),
        source,
    })?;
    for (name, text) in [MARKDOWN_FILE, HTML_FILE, JSON_FILE].iter().zip(files) {
        let path = out.join(name);
        reprorun_runtime::sys::write_atomic(&path, text.as_bytes(), 0o644)
            .map_err(|source| ReportError::Write { path, source })?;
    }
    Ok(())
}
