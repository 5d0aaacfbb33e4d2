//! `reprorun audit metrics`: the ReproRepo paper's numbers for each study database (one
//! agent configuration each): issue EM@k/SM@k, paper any/all-EM/SM@k, FPR on post-fix
//! snapshots, recall by category and venue, the findings' category mix, cost, mean ± std
//! over repeats and paper-level bootstrap intervals (`spec/audit-metrics.md`). The
//! arithmetic is [`compute`] over plain data; [`load`] reads a study into that data.

pub(crate) mod compute;
pub(crate) mod load;
#[cfg(test)]
mod tests;

use std::io::Write;
use std::path::PathBuf;

use thiserror::Error;

pub(crate) use compute::{compute, ConfigMetrics, Options};
pub(crate) use load::Config;
use reprorun_pipeline::doc::{Align, Block, Cell, Doc, Table};
use reprorun_pipeline::store::StoreError;

#[derive(Debug, Error)]
pub enum MetricsError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Corpus(#[from] crate::corpus::CorpusError),
    #[error("study {path}: {why}")]
    Study { path: PathBuf, why: String },
    #[error("corpus {path}: {why}")]
    Bad { path: PathBuf, why: String },
    #[error("serialize the metrics: {0}")]
    Json(#[from] serde_json::Error),
}

/// `reprorun audit metrics` options.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each --db is one agent configuration (its `audit run` study, judged by `audit judge`). Runs without valid findings or without a judgment leave their issues unmatched. Definitions and the --json shape: spec/audit.md. Exit status 125 on bad input."
)]
pub struct MetricsArgs {
    /// A study database (`audit run --db`); repeat for several configurations.
    #[arg(long, value_name = "FILE", required = true)]
    pub db: Vec<PathBuf>,
    /// The judge whose labels count (default: the only judge in a study, else `builtin`).
    #[arg(long, value_name = "NAME")]
    pub judge: Option<String>,
    /// EM@k and SM@k for k = 1..K (and all findings); the headline rates are at K.
    #[arg(long, default_value_t = 10, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub k: u32,
    /// Paper-level bootstrap draws for the 95% intervals (0: none).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub bootstrap: u32,
    /// The bootstrap's seed (the same seed gives the same intervals).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed: u64,
    /// Print every metric as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Everything `--json` prints.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Metrics {
    pub(crate) configs: Vec<ConfigMetrics>,
    /// Papers with hidden issues and hidden issues, in the (shared) corpus.
    pub(crate) papers: usize,
    pub(crate) issues: usize,
}

/// Opens every `--db` (one corpus for all) and computes their metrics.
pub(crate) fn gather(
    dbs: &[PathBuf],
    judge: Option<&str>,
    o: Options,
) -> Result<(Vec<Config>, Metrics), MetricsError> {
    let mut configs: Vec<Config> = Vec::new();
    for db in dbs {
        let c = load::open(db, judge)?;
        if let Some(first) = configs.first() {
            if first.corpus != c.corpus {
                return Err(MetricsError::Usage(format!(
                    "--db {} was run on another corpus than --db {}: compare configurations on one corpus",
                    c.db.display(),
                    first.db.display()
                )));
            }
        }
        configs.push(c);
    }
    // Two studies of the same agent label are told apart by their file.
    let labels: Vec<String> = configs
        .iter()
        .map(|c| {
            if configs.iter().filter(|o| o.agent == c.agent).count() > 1 {
                format!("{} ({})", c.agent, c.db.display())
            } else {
                c.agent.clone()
            }
        })
        .collect();
    let metrics: Vec<ConfigMetrics> = configs
        .iter()
        .zip(&labels)
        .map(|(c, label)| compute(&c.data, label, &c.judge, o))
        .collect();
    let (papers, issues) = metrics.first().map_or((0, 0), |m| (m.papers, m.issues));
    Ok((
        configs,
        Metrics {
            configs: metrics,
            papers,
            issues,
        },
    ))
}

/// A fraction as a percentage with one decimal.
pub(crate) fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:.1}%", v * 100.0),
        _ => "n/a".into(),
    }
}

/// A mean with its std over repeats: `58.1% ± 2.0`.
pub(crate) fn pct_std(x: Option<f64>, std: Option<f64>) -> String {
    match std {
        Some(s) if x.is_some() && s.is_finite() => format!("{} ± {:.1}", pct(x), s * 100.0),
        _ => pct(x),
    }
}

/// A header that names the headline k.
pub(crate) fn header(text: String) -> reprorun_pipeline::doc::Header {
    reprorun_pipeline::doc::Header::Owned(text)
}

/// Table 3: one row per configuration.
pub(crate) fn table3(m: &Metrics) -> Table {
    let k = m.configs.first().map_or(10, |c| c.k);
    let head = [
        "config".to_string(),
        format!("Issue EM@{k}"),
        format!("Issue SM@{k}"),
        format!("Paper-any EM@{k}"),
        format!("Paper-any SM@{k}"),
        format!("Paper-all SM@{k}"),
        "FPR".into(),
        "$/run".into(),
    ];
    let head = head
        .into_iter()
        .enumerate()
        .map(|(i, h)| (header(h), if i == 0 { Align::Left } else { Align::Right }))
        .collect();
    let rows = m
        .configs
        .iter()
        .map(|c| {
            let (s, k) = (&c.std, c.k);
            vec![
                Cell::new(c.agent.clone()),
                Cell::new(pct_std(c.issue.em.get(k), s.issue.em.get(k))),
                Cell::new(pct_std(c.issue.sm.get(k), s.issue.sm.get(k))),
                Cell::new(pct_std(c.paper_any.em.get(k), s.paper_any.em.get(k))),
                Cell::new(pct_std(c.paper_any.sm.get(k), s.paper_any.sm.get(k))),
                Cell::new(pct_std(c.paper_all.sm.get(k), s.paper_all.sm.get(k))),
                Cell::new(pct_std(c.fpr.exact, s.fpr.exact)),
                Cell::new(c.cost.mean_usd.map_or("n/a".into(), |u| format!("{u:.2}"))),
            ]
        })
        .collect();
    Table {
        head,
        rows,
        wide: true,
    }
}

/// Runs `reprorun audit metrics`.
pub(crate) fn command(args: MetricsArgs) -> Result<(), super::AuditError> {
    let o = Options {
        k: args.k,
        bootstrap: args.bootstrap,
        seed: args.seed,
    };
    let (_, m) = gather(&args.db, args.judge.as_deref(), o)?;
    let text = if args.json {
        let mut t = serde_json::to_string_pretty(&m).map_err(MetricsError::from)?;
        t.push('\n');
        t
    } else {
        let doc = Doc {
            title: format!("Audit metrics: {} papers, {} issues", m.papers, m.issues),
            css: "",
            blocks: vec![Block::Table(table3(&m))],
        };
        doc.markdown()
    };
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(super::AuditError::Print)
}
