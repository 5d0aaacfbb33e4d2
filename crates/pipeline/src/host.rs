//! The machine a run was made on, measured by `work` outside the sandbox: what a reviewer
//! needs to tell whether a patch's outcomes differ by host.

use serde::{Deserialize, Serialize};

use crate::store::sha256_hex;

/// Facts of the host a run was made on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// `/proc/cpuinfo`'s first `model name` (empty where the kernel does not give one).
    pub cpu_model: String,
    /// Online CPUs of the machine (not of the job's share).
    pub cpus: u32,
    /// `MemTotal`, bytes.
    pub mem_bytes: u64,
    /// `/etc/os-release`'s PRETTY_NAME.
    pub os: String,
    /// sha256 of `/etc/machine-id`, the first 16 hex digits (the id itself is not kept).
    pub machine_id: String,
    pub reprorun_version: String,
    /// `slurm:ARRAYJOB_TASK`, `slurm:JOB`, or `local:PID`.
    pub job: String,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The value of the first `key: value` line of `text` whose key is `key`.
pub(crate) fn field<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// `PRETTY_NAME` of an os-release file.
pub fn pretty_name(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_default()
}

/// `MemTotal` of a meminfo file, bytes.
pub fn mem_total(meminfo: &str) -> u64 {
    field(meminfo, "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The scheduler's name for this job, from its environment.
pub fn job_id(env: impl Fn(&str) -> Option<String>, pid: u32) -> String {
    match (
        env("SLURM_ARRAY_JOB_ID"),
        env("SLURM_ARRAY_TASK_ID"),
        env("SLURM_JOB_ID"),
    ) {
        (Some(a), Some(t), _) => format!("slurm:{a}_{t}"),
        (_, _, Some(j)) => format!("slurm:{j}"),
        _ => format!("local:{pid}"),
    }
}

impl Host {
    /// This machine, now.
    pub fn current() -> Host {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = ["model name", "Hardware", "cpu model", "cpu"]
            .iter()
            .find_map(|k| field(&cpuinfo, k))
            .unwrap_or_default()
            .to_string();
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
            .count() as u32;
        let machine_id = read("/etc/machine-id");
        Host {
            hostname: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            cpu_model,
            cpus,
            mem_bytes: mem_total(&read("/proc/meminfo")),
            os: pretty_name(&read("/etc/os-release")),
            machine_id: if machine_id.trim().is_empty() {
                String::new()
            } else {
                sha256_hex(machine_id.trim().as_bytes())[..16].to_string()
            },
            reprorun_version: env!("CARGO_PKG_VERSION").to_string(),
            job: job_id(|k| std::env::var(k).ok(), std::process::id()),
        }
    }
}
