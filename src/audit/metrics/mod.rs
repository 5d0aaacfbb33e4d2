//! (filled in by its owner; see audit/mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum MetricsError {
    #[error("not yet built")]
    Todo,
}

/// `reprorun audit metrics` options.
#[derive(Debug, clap::Args)]
pub struct MetricsArgs {}

/// Runs `reprorun audit metrics`.
pub(crate) fn command(_args: MetricsArgs) -> Result<(), super::AuditError> {
    Err(MetricsError::Todo.into())
}
