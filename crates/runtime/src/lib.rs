//! reprorun's runtime: a request resolved into a [`plan::Plan`] that `--dry-run` prints, and
//! the one executor that performs it.
//!
//! Inside, each module uses only the ones below it: `plan` (request → plan) → `sandbox` (the
//! executor: isolation, the determinism layer's interception, OCI containers) → `sys` (raw
//! system calls). `determinism` and `security` hold the pins and the walls as data; `net` is
//! the egress allowlist and its proxy, `image` and `mirror` what a run starts from and what it
//! may install; `record` the run record. The pipelines (`reprorun-pipeline` and the crates on
//! it) and the command line (the `reprorun` binary) sit above this crate.

#[doc(hidden)]
pub mod fuzzing;
pub mod hint;
pub mod image;
pub mod mirror;
pub mod oci;
pub mod plan;
pub mod record;
pub mod sandbox;

// The layers below, re-exported under their names here: the code above them, and the
// crates above this one, say `sys`, `net` and the rest as before.
pub use reprorun_base::{determinism, exit, parse, rootfs_id, security, sys, trace, util};
pub use reprorun_net as net;
