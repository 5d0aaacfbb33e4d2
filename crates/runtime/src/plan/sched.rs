//! How the workload process is scheduled (OCI `process.scheduler`, `ioPriority` and
//! `execCPUAffinity`), resolved to the numbers the kernel takes.

use serde::{Deserialize, Serialize};

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

/// `struct sched_attr` without its size (`SCHED_*` policy number, `SCHED_FLAG_*` bits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedAttr {
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    pub priority: u32,
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
}

/// An I/O scheduling class (`IOPRIO_CLASS_*`: 1 real-time, 2 best-effort, 3 idle) and
/// level (0, highest, to 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoPriority {
    pub class: u16,
    pub level: u16,
}

impl IoPriority {
    /// The value `ioprio_set(2)` takes: `IOPRIO_PRIO_VALUE(class, level)`.
    pub fn value(self) -> i32 {
        (i32::from(self.class) << 13) | i32::from(self.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_priority_is_class_and_level_in_one_word() {
        let be4 = IoPriority { class: 2, level: 4 };
        assert_eq!(be4.value(), (2 << 13) | 4);
    }
}
