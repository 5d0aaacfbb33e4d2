//! The scheduling system calls nix does not wrap: `sched_setattr(2)` and `ioprio_set(2)`.

use nix::errno::Errno;

use serde::{Deserialize, Serialize};

/// `struct sched_attr` as the kernel reads it (`SCHED_ATTR_SIZE_VER1`, 56 bytes, as runc
/// passes it: the utilization clamps, which the runtime-spec does not carry, are 0).
#[repr(C)]
struct RawSchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// Sets the calling thread's scheduling policy and attributes.
pub fn set_scheduler(attr: &SchedAttr) -> Result<(), Errno> {
    let raw = RawSchedAttr {
        size: std::mem::size_of::<RawSchedAttr>() as u32,
        policy: attr.policy,
        flags: attr.flags,
        nice: attr.nice,
        priority: attr.priority,
        runtime: attr.runtime,
        deadline: attr.deadline,
        period: attr.period,
        util_min: 0,
        util_max: 0,
    };
    // SAFETY: `raw` is a valid, initialized sched_attr of the size its `size` field gives; the
    // kernel only reads it. pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw as *const RawSchedAttr, 0) };
    Errno::result(r).map(drop)
}

/// Sets the calling process's I/O priority (`IOPRIO_WHO_PROCESS`, itself).
pub fn set_io_priority(prio: IoPriority) -> Result<(), Errno> {
    const IOPRIO_WHO_PROCESS: libc::c_int = 1;
    // SAFETY: ioprio_set takes three integers and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, prio.value()) };
    Errno::result(r).map(drop)
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
    fn the_attr_is_the_size_runc_passes() {
        assert_eq!(std::mem::size_of::<RawSchedAttr>(), 56);
    }

    /// A policy the kernel does not know is its EINVAL, not a panic or a silent success.
    #[test]
    fn an_unknown_policy_is_the_kernel_s_error() {
        let attr = SchedAttr {
            policy: 77,
            ..SchedAttr::default()
        };
        assert_eq!(set_scheduler(&attr), Err(Errno::EINVAL));
    }
}

#[cfg(test)]
mod priority_tests {
    use super::*;

    #[test]
    fn an_io_priority_is_class_and_level_in_one_word() {
        let be4 = IoPriority { class: 2, level: 4 };
        assert_eq!(be4.value(), (2 << 13) | 4);
    }
}
