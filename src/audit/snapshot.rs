//! (filled in by its owner; see mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum SnapshotError {
    #[error("not yet built")]
    Todo,
}

/// `reprorun audit snapshot` options.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {}

/// Runs `reprorun audit snapshot`.
pub(crate) fn command(_args: SnapshotArgs) -> Result<(), super::AuditError> {
    Err(SnapshotError::Todo.into())
}
