//! `process.scheduler`, `process.ioPriority` and `process.execCPUAffinity`, checked as
//! runc 1.2 checks them and resolved to the numbers the kernel takes (applied by the process
//! on itself before its `execve`; the kernel refuses what the caller may not set).

use super::{bad, ConvertError};
use crate::oci::spec;
use crate::plan::sched::{IoPriority, SchedAttr, Scheduling};

/// The scheduling `process` asks for. `exec` is `exec --process`: only there does
/// `execCPUAffinity` apply (the runtime-spec: not to the container's init process).
pub(crate) fn scheduling(
    process: &spec::Process,
    exec: bool,
) -> Result<Option<Scheduling>, ConvertError> {
    let scheduler = process.scheduler.as_ref().map(scheduler).transpose()?;
    let io_priority = process.io_priority.as_ref().map(io_priority).transpose()?;
    let cpus = match (&process.exec_cpu_affinity, exec) {
        (Some(a), true) => affinity(a)?,
        _ => None,
    };
    let s = Scheduling {
        scheduler,
        io_priority,
        cpus,
    };
    Ok((s != Scheduling::default()).then_some(s))
}

fn scheduler(s: &spec::Scheduler) -> Result<SchedAttr, ConvertError> {
    let field = "process.scheduler";
    let policy = match s.policy.as_str() {
        "SCHED_OTHER" => 0,
        "SCHED_FIFO" => 1,
        "SCHED_RR" => 2,
        "SCHED_BATCH" => 3,
        "SCHED_ISO" => 4,
        "SCHED_IDLE" => 5,
        "SCHED_DEADLINE" => 6,
        "" => return Err(bad(format!("{field}.policy"), "required")),
        other => return Err(bad(format!("{field}.policy"), format!("{other:?}: unknown policy; expected SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_BATCH, SCHED_ISO, SCHED_IDLE or SCHED_DEADLINE"))),
    };
    if !(-20..=19).contains(&s.nice) {
        return Err(bad(
            format!("{field}.nice"),
            format!("{}: must be -20 to 19", s.nice),
        ));
    }
    let realtime = matches!(policy, 1 | 2);
    if s.priority != 0 && !realtime {
        return Err(bad(
            format!("{field}.priority"),
            "can only be given with SCHED_FIFO or SCHED_RR",
        ));
    }
    let priority = u32::try_from(s.priority).map_err(|_| {
        bad(
            format!("{field}.priority"),
            format!("{}: negative", s.priority),
        )
    })?;
    if policy != 6 && (s.runtime != 0 || s.deadline != 0 || s.period != 0) {
        return Err(bad(
            field,
            "runtime, deadline and period can only be given with SCHED_DEADLINE",
        ));
    }
    let mut flags = 0u64;
    for f in &s.flags {
        flags |= match f.as_str() {
            "SCHED_FLAG_RESET_ON_FORK" => 0x01,
            "SCHED_FLAG_RECLAIM" => 0x02,
            "SCHED_FLAG_DL_OVERRUN" => 0x04,
            "SCHED_FLAG_KEEP_POLICY" => 0x08,
            "SCHED_FLAG_KEEP_PARAMS" => 0x10,
            "SCHED_FLAG_UTIL_CLAMP_MIN" => 0x20,
            "SCHED_FLAG_UTIL_CLAMP_MAX" => 0x40,
            other => {
                return Err(bad(
                    format!("{field}.flags"),
                    format!("{other:?}: unknown flag"),
                ))
            }
        };
    }
    Ok(SchedAttr {
        policy,
        flags,
        nice: s.nice,
        priority,
        runtime: s.runtime,
        deadline: s.deadline,
        period: s.period,
    })
}

fn io_priority(p: &spec::IoPriority) -> Result<IoPriority, ConvertError> {
    let class = match p.class.as_str() {
        "IOPRIO_CLASS_RT" => 1,
        "IOPRIO_CLASS_BE" => 2,
        "IOPRIO_CLASS_IDLE" => 3,
        other => {
            return Err(bad(
                "process.ioPriority.class",
                format!(
                    "{other:?}: expected IOPRIO_CLASS_RT, IOPRIO_CLASS_BE or IOPRIO_CLASS_IDLE"
                ),
            ))
        }
    };
    let level = u16::try_from(p.priority)
        .ok()
        .filter(|l| *l <= 7)
        .ok_or_else(|| {
            bad(
                "process.ioPriority.priority",
                format!("{}: must be 0 to 7", p.priority),
            )
        })?;
    Ok(IoPriority { class, level })
}

/// The CPUs the exec'd process runs on: `final` (set right before its `execve`), else
/// `initial` (reprorun's process joins the container's cgroup before either applies, so
/// the two moments are one).
fn affinity(a: &spec::ExecCpuAffinity) -> Result<Option<Vec<u32>>, ConvertError> {
    let (field, list) = match (&a.final_, &a.initial) {
        (Some(f), _) => ("process.execCPUAffinity.final", f),
        (None, Some(i)) => ("process.execCPUAffinity.initial", i),
        (None, None) => return Ok(None),
    };
    let max = nix::sched::CpuSet::count() as u32;
    cpu_list(list, max)
        .filter(|c| !c.is_empty())
        .map(Some)
        .ok_or_else(|| {
            bad(
                field,
                format!("{list:?}: expected a CPU list such as 0-3,7"),
            )
        })
}

/// The CPUs of a Linux CPU list (`0-3,7`, as in cpuset files); `None` when it does not
/// parse or names a CPU past `max`.
fn cpu_list(text: &str, max: u32) -> Option<Vec<u32>> {
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

    fn process(edit: impl FnOnce(&mut serde_json::Value)) -> spec::Process {
        let mut v = serde_json::json!({"user": {"uid": 0, "gid": 0}, "args": ["true"], "cwd": "/"});
        edit(&mut v);
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn scheduling_resolves_to_the_kernels_numbers() {
        let p = process(|v| {
            v["scheduler"] = serde_json::json!({"policy": "SCHED_BATCH", "nice": 5});
            v["ioPriority"] = serde_json::json!({"class": "IOPRIO_CLASS_BE", "priority": 4});
        });
        let s = scheduling(&p, false).unwrap().unwrap();
        let batch = SchedAttr {
            policy: 3,
            nice: 5,
            ..SchedAttr::default()
        };
        assert_eq!(s.scheduler, Some(batch));
        assert_eq!(s.io_priority, Some(IoPriority { class: 2, level: 4 }));
        assert_eq!(s.cpus, None);

        let p = process(|v| {
            v["scheduler"] = serde_json::json!({
                "policy": "SCHED_FIFO", "priority": 10,
                "flags": ["SCHED_FLAG_RESET_ON_FORK", "SCHED_FLAG_KEEP_PARAMS"]
            });
        });
        let fifo = scheduling(&p, false).unwrap().unwrap().scheduler.unwrap();
        assert_eq!((fifo.policy, fifo.priority, fifo.flags), (1, 10, 0x11));

        let p = process(|v| {
            v["scheduler"] = serde_json::json!({
                "policy": "SCHED_DEADLINE", "runtime": 10_000_000u64,
                "deadline": 20_000_000u64, "period": 30_000_000u64
            });
        });
        let dl = scheduling(&p, false).unwrap().unwrap().scheduler.unwrap();
        assert_eq!(
            (dl.policy, dl.runtime, dl.deadline, dl.period),
            (6, 10_000_000, 20_000_000, 30_000_000)
        );
        // Nothing asked: nothing in the plan.
        assert_eq!(scheduling(&process(|_| {}), true).unwrap(), None);
    }

    /// `execCPUAffinity` is for a process `exec`'d into the container, not its init (the
    /// runtime-spec); `final` wins over `initial`.
    #[test]
    fn exec_cpu_affinity_applies_to_exec_only() {
        let p = process(|v| {
            v["execCPUAffinity"] = serde_json::json!({"initial": "0-1", "final": "1"});
        });
        assert_eq!(scheduling(&p, false).unwrap(), None);
        assert_eq!(scheduling(&p, true).unwrap().unwrap().cpus, Some(vec![1]));
        let p = process(|v| v["execCPUAffinity"] = serde_json::json!({"initial": "0,2-3"}));
        assert_eq!(
            scheduling(&p, true).unwrap().unwrap().cpus,
            Some(vec![0, 2, 3])
        );
    }

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
    fn bad_values_are_refused_naming_the_field() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (serde_json::json!({"scheduler": {"nice": 1}}), "process.scheduler.policy: required"),
            (serde_json::json!({"scheduler": {"policy": "SCHED_X"}}), "process.scheduler.policy: \"SCHED_X\": unknown policy"),
            (serde_json::json!({"scheduler": {"policy": "SCHED_OTHER", "nice": 20}}), "process.scheduler.nice: 20: must be -20 to 19"),
            (serde_json::json!({"scheduler": {"policy": "SCHED_OTHER", "priority": 5}}), "process.scheduler.priority: can only be given with SCHED_FIFO or SCHED_RR"),
            (serde_json::json!({"scheduler": {"policy": "SCHED_RR", "priority": -1}}), "process.scheduler.priority: -1: negative"),
            (serde_json::json!({"scheduler": {"policy": "SCHED_BATCH", "period": 5}}), "process.scheduler: runtime, deadline and period can only be given with SCHED_DEADLINE"),
            (serde_json::json!({"scheduler": {"policy": "SCHED_OTHER", "flags": ["X"]}}), "process.scheduler.flags: \"X\": unknown flag"),
            (serde_json::json!({"ioPriority": {"class": "IOPRIO_CLASS_NONE"}}), "process.ioPriority.class: \"IOPRIO_CLASS_NONE\""),
            (serde_json::json!({"ioPriority": {"class": "IOPRIO_CLASS_BE", "priority": 8}}), "process.ioPriority.priority: 8: must be 0 to 7"),
            (serde_json::json!({"execCPUAffinity": {"final": "3-1"}}), "process.execCPUAffinity.final: \"3-1\""),
            (serde_json::json!({"execCPUAffinity": {"initial": "x"}}), "process.execCPUAffinity.initial: \"x\""),
        ];
        for (fields, want) in cases {
            let p = process(|v| {
                for (k, f) in fields.as_object().unwrap() {
                    v[k] = f.clone();
                }
            });
            let e = scheduling(&p, true).unwrap_err().to_string();
            assert!(e.starts_with(want), "{fields}: {e}");
        }
    }
}
