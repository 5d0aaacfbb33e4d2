//! reprorun's lowest layer, which names nothing above it: the system calls nix does not wrap
//! and the host-path rule ([`sys`]), the determinism pins as data ([`determinism`]), the
//! security walls as data and their seccomp programs ([`security`]), the parsers of the
//! caller's own input ([`parse`]), the exit statuses ([`exit`]), the start-up trace
//! ([`trace`]), a rootfs's identity ([`rootfs_id`]) and small helpers ([`util`]).

pub mod determinism;
pub mod exit;
pub mod parse;
pub mod rootfs_id;
pub mod security;
pub mod sys;
pub mod trace;
pub mod util;
