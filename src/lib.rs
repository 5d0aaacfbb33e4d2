//! reprorun: a deterministic execution sandbox runtime for Linux.
//!
//! Layers, each using only the ones below it: `cli` → `plan` (request → [`plan::Plan`]) →
//! `sandbox` (the one executor) → `sys` (raw system calls). `determinism` holds the pins as
//! data; `record` the run record. `pipeline` is the study machinery the pipelines share
//! (`reproduce` is one).

pub(crate) mod audit;
pub mod cli;
pub mod determinism;
pub(crate) mod exit;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod help;
pub(crate) mod hint;
pub(crate) mod image;
pub(crate) mod mirror;
pub(crate) mod net;
pub(crate) mod oci;
pub mod parse;
pub(crate) mod pipeline;
pub(crate) mod plan;
pub(crate) mod record;
pub mod reproduce;
pub(crate) mod rootfs_id;
pub(crate) mod sandbox;
pub mod security;
pub(crate) mod sys;
pub(crate) mod trace;
pub(crate) mod util;
