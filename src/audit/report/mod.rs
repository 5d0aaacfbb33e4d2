//! (filled in by its owner; see audit/mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum ReportError {
    #[error("not yet built")]
    Todo,
}

/// `reprorun audit report` options.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {}

/// Runs `reprorun audit report`.
pub(crate) fn command(_args: ReportArgs) -> Result<(), super::AuditError> {
    Err(ReportError::Todo.into())
}
