//! (filled in by its owner; see mod.rs)
