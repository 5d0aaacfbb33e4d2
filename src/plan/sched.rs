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
    #[serde(default)]
    pub flags: u64,
    #[serde(default)]
    pub nice: i32,
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub runtime: u64,
    #[serde(default)]
    pub deadline: u64,
    #[serde(default)]
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

/// The CPUs of a Linux CPU list (`0-3,7`, as in cpuset files); `None` when it does not
/// parse or names a CPU past `max`.
pub fn cpu_list(text: &str, max: u32) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let c = part.trim().parse::<u32>().ok()?;
                (c, c)
            }
        };
        if a > b || b >= max {
            return None;
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_cpuset_files_write_them() {
        assert_eq!(cpu_list("0-3,7", 1024), Some(vec![0, 1, 2, 3, 7]));
        assert_eq!(cpu_list(" 2 ", 1024), Some(vec![2]));
        assert_eq!(cpu_list("1,1-2", 1024), Some(vec![1, 2]));
        for bad in ["", "3-1", "a", "1,", "-1", "0-1024", "1024"] {
            assert_eq!(cpu_list(bad, 1024), None, "{bad:?}");
        }
    }

    #[test]
    fn an_io_priority_is_class_and_level_in_one_word() {
        let be4 = IoPriority { class: 2, level: 4 };
        assert_eq!(be4.value(), (2 << 13) | 4);
    }
}
