//! (filled in by its owner; see mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum RunError {
    #[error("not yet built")]
    Todo,
}

/// `reprorun audit run` options.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

/// Runs `reprorun audit run`.
pub(crate) fn command(_args: RunArgs) -> Result<(), super::AuditError> {
    Err(RunError::Todo.into())
}
