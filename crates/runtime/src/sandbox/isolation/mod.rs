//! Isolation: what keeps the workload in its box. The new root and its mounts ([`mounts`]),
//! idmapped trees ([`idmap`]), the network namespace made beside init ([`netns`]), a user
//! namespace joined by path ([`userjoin`]), cgroup limits ([`cgroup`]) and device rules
//! ([`devices`] for `exec`, [`devfilter`] for OCI containers and v2 hosts).
pub mod cgroup;
pub(in crate::sandbox) mod devfilter;
pub mod devices;
pub(crate) mod idmap;
pub(in crate::sandbox) mod mounts;
pub(in crate::sandbox) mod netns;
pub(in crate::sandbox) mod userjoin;
