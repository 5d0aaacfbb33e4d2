//! Integration suite: runs the real `reprorun` binary and asserts on what a user sees.
//! Needs namespaces (root in CI); the rootless cases run as an unprivileged user they create.

#[macro_use]
mod common;

mod audit_cluster;
mod audit_collect;
mod audit_demo;
mod audit_judge;
mod audit_keys;
mod audit_real;
mod audit_report;
mod audit_run;
mod audit_snapshot;
mod bad_input;
mod cluster;
mod cluster_ledger;
mod entrypoint;
mod escape;
mod escape_host;
mod escape_net;
mod escape_paths;
mod exec;
mod first_hour;
mod fuzz_pass;
mod image;
mod image_ignore;
mod image_pull;
mod isolation;
mod lifecycle;
mod lineage;
mod mirror;
mod mirror_npm;
mod net;
mod net_inject;
mod net_replay;
mod oci;
mod oci_conformance;
mod oci_containerd;
mod oci_engines;
mod oci_idmap;
mod oci_sched;
mod python_pkg;
mod reproduce;
mod reproduce_go;
mod reproduce_image;
mod reproduce_js;
mod reproduce_ledger;
mod reproduce_runners;
mod reproduce_swebench;
mod time;
mod time_roots;
mod variation;
