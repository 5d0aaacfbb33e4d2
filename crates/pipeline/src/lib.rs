//! The study machinery the pipelines (`reproduce`, `audit`) share: one unit of
//! work in a sandbox ([`unit`]), the worker pool that runs units ([`pool`]), the progress
//! shown meanwhile ([`progress`]), the study database ([`store`]), the statistics
//! reports use ([`stats`]), the report document ([`doc`]) with its charts ([`svg`]), and the
//! cluster verbs' driver ([`driver`]: plan, work and merge for every pipeline) and files
//! ([`cluster`]) with the facts of the host a unit ran on ([`host`]).
//! Nothing here knows about patches; it only looks down, at `plan`, `sandbox` and `sys`.

pub mod cluster;
pub mod cluster_args;
pub mod doc;
pub mod driver;
pub mod host;
pub mod pool;
pub mod progress;
pub mod records;
pub mod stats;
pub mod store;
pub mod svg;
pub mod tasks;
pub mod unit;

/// The host's wall clock, milliseconds since the epoch (unit start times, staggering).
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
