//! How the workload process is scheduled (OCI `process.scheduler`, `ioPriority` and
//! `execCPUAffinity`), resolved to the numbers the kernel takes.

use serde::{Deserialize, Serialize};

pub use crate::sys::sched::{IoPriority, SchedAttr};

/// The scheduling of the workload process, set on itself before its `execve`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scheduling {
    /// `sched_setattr(2)`'s attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedAttr>,
    /// `ioprio_set(2)`'s class and level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_priority: Option<IoPriority>,
    /// CPUs the process runs on (`sched_setaffinity(2)`), instead of reprorun's own pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<u32>>,
}
