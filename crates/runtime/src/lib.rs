//! reprorun's runtime: a request resolved into a [`plan::Plan`] that `--dry-run` prints, and
//! the one executor that performs it.
//!
//! Inside, each module uses only the ones below it: `plan` (request → plan) → `sandbox` (the
//! executor: isolation, the determinism layer's interception, OCI containers) → `sys` (raw
//! system calls). `determinism` and `security` hold the pins and the walls as data; `net` is
//! the egress allowlist and its proxy, `image` and `mirror` what a run starts from and what it
//! may install; `record` the run record. The pipelines (`reprorun-pipeline` and the crates on
//! it) and the command line (the `reprorun` binary) sit above this crate.

pub mod determinism;
pub mod exit;
pub mod hint;
pub mod image;
pub mod mirror;
pub mod net;
pub mod oci;
pub mod parse;
pub mod plan;
pub mod record;
pub mod rootfs_id;
pub mod sandbox;
pub mod security;
pub mod sys;
pub mod trace;
pub mod util;
