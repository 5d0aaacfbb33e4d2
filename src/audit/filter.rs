//! (filled in by its owner; see mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum FilterError {
    #[error("not yet built")]
    Todo,
}

/// `reprorun audit filter` options.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {}

/// Runs `reprorun audit filter`.
pub(crate) fn command(_args: FilterArgs) -> Result<(), super::AuditError> {
    Err(FilterError::Todo.into())
}
