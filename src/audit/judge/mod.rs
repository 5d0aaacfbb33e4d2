//! (filled in by its owner; see audit/mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum JudgeError {
    #[error("not yet built")]
    Todo,
}

/// `reprorun audit judge` options.
#[derive(Debug, clap::Args)]
pub struct JudgeArgs {}

/// Runs `reprorun audit judge`.
pub(crate) fn command(_args: JudgeArgs) -> Result<(), super::AuditError> {
    Err(JudgeError::Todo.into())
}

/// `reprorun audit sample` options.
#[derive(Debug, clap::Args)]
pub struct SampleArgs {}

/// Runs `reprorun audit sample`.
pub(crate) fn sample(_args: SampleArgs) -> Result<(), super::AuditError> {
    Err(JudgeError::Todo.into())
}

/// `reprorun audit agreement` options.
#[derive(Debug, clap::Args)]
pub struct AgreementArgs {}

/// Runs `reprorun audit agreement`.
pub(crate) fn agreement(_args: AgreementArgs) -> Result<(), super::AuditError> {
    Err(JudgeError::Todo.into())
}
