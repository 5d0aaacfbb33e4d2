//! (filled in by its owner; see mod.rs)

use thiserror::Error;

#[derive(Debug, Error)]
pub(crate) enum InputError {
    #[error("not yet built")]
    Todo,
}
