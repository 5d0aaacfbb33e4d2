//! `reprorun audit`: the ReproRepo method (`spec/audit.md`). Repositories are rebuilt as
//! the reporters of their issues saw them (`snapshot`), audit agents read paper + snapshot
//! in sandboxes, blind and offline (`run`), and their ranked findings are judged against the
//! hidden human issues (the next pipeline stage).
//!
//! Data flows one way: `collect` (the issues, clones and papers from GitHub, on the host)
//! → `input` (pairs and issues as users export them) → `filter`
//! (relevance and category labels) → `snapshot` (the commit each issue's reporter saw,
//! history-free trees in a content-addressed `corpus`) → `run` (one sandbox per snapshot
//! group and repeat, on the shared `pipeline` layer; agents: `builtin`, Codex, Claude Code,
//! any command) → `findings` (the validated `findings.json` of each run) → `judge` (each
//! run's findings against the hidden issues, every pair labelled, into `judgment`) →
//! `metrics` (EM@k/SM@k, FPR, recall by category, cost; the paper's definitions) → `report`.

pub(crate) mod builtin;
pub mod cli;
pub mod collect;
pub mod corpus;
pub mod filter;
pub(crate) mod findings;
pub mod input;
pub mod judge;
pub(crate) mod judgment;
pub mod keys;
pub mod metrics;
pub(crate) mod pdf;
pub(crate) mod prompt;
pub mod report;
pub mod run;
pub mod snapshot;
pub(crate) mod taxonomy;

use thiserror::Error;

/// What stops an audit command; each is one line for the user (exit 125).
#[derive(Debug, Error)]
pub enum AuditError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error(transparent)]
    Collect(#[from] collect::CollectError),
    #[error(transparent)]
    Filter(#[from] filter::FilterError),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error(transparent)]
    Corpus(#[from] corpus::CorpusError),
    #[error(transparent)]
    Run(#[from] run::RunError),
    #[error(transparent)]
    Judge(#[from] judge::JudgeError),
    #[error(transparent)]
    Metrics(#[from] metrics::MetricsError),
    #[error(transparent)]
    Report(#[from] report::ReportError),
    #[error("print: {0}")]
    Print(std::io::Error),
}
