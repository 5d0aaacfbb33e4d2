//! The study machinery two pipelines share (`reproduce` now, `audit` later): one unit of
//! work in a sandbox ([`unit`]). Nothing here knows about patches; it only looks down, at
//! `plan`, `sandbox` and `sys`.

pub mod unit;
