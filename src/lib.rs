//! reprorun: a deterministic execution sandbox runtime for Linux.
//!
//! Layers, each using only the ones below it: `cli` → `plan` (request → [`plan::Plan`]) →
//! `sandbox` (the one executor) → `sys` (raw system calls). `determinism` holds the pins as
//! data; `record` the run record. `pipeline` is the study machinery the pipelines share
//! (`reproduce` is one).

pub mod cli;
pub mod determinism;
pub mod exit;
pub mod image;
pub mod mirror;
pub mod oci;
pub mod parse;
pub mod pipeline;
pub mod plan;
pub mod record;
pub mod reproduce;
pub mod sandbox;
pub mod security;
pub mod sys;
