//! The OCI runtime-spec `config.json`, as reprorun reads it. Fields it does not know are
//! ignored, as the runtime spec requires ([`super::read_spec`] lists them, and refuses them
//! under the `org.reprorun.strict=true` annotation). Fields that are known but unsupported
//! are listed in `spec/oci.md` and refused in [`super::convert`] when set.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub oci_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<Root>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domainname: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Hooks>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux: Option<Linux>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    #[serde(default)]
    pub terminal: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_size: Option<ConsoleSize>,
    pub user: User,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_line: Option<String>,
    #[serde(default)]
    pub env: Vec<String>,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rlimits: Vec<Rlimit>,
    #[serde(default)]
    pub no_new_privileges: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apparmor_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selinux_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Scheduler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_priority: Option<IoPriority>,
    #[serde(
        rename = "execCPUAffinity",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub exec_cpu_affinity: Option<ExecCpuAffinity>,
}

/// `process.scheduler` (runtime-spec 1.2): `sched_setattr(2)`'s attributes by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scheduler {
    #[serde(default)]
    pub policy: String,
    #[serde(default)]
    pub nice: i32,
    #[serde(default)]
    pub priority: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    #[serde(default)]
    pub runtime: u64,
    #[serde(default)]
    pub deadline: u64,
    #[serde(default)]
    pub period: u64,
}

/// `process.ioPriority` (runtime-spec 1.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoPriority {
    pub class: String,
    #[serde(default)]
    pub priority: i32,
}

/// `process.execCPUAffinity` (runtime-spec 1.2): CPU lists for a process `exec`'d into a
/// container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecCpuAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<String>,
    #[serde(rename = "final", default, skip_serializing_if = "Option::is_none")]
    pub final_: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsoleSize {
    pub height: u32,
    pub width: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umask: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_gids: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    #[serde(default)]
    pub bounding: Vec<String>,
    #[serde(default)]
    pub effective: Vec<String>,
    #[serde(default)]
    pub inheritable: Vec<String>,
    #[serde(default)]
    pub permitted: Vec<String>,
    #[serde(default)]
    pub ambient: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rlimit {
    #[serde(rename = "type")]
    pub kind: String,
    pub soft: u64,
    pub hard: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Root {
    pub path: String,
    #[serde(default)]
    pub readonly: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub destination: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uid_mappings: Vec<IdMapping>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gid_mappings: Vec<IdMapping>,
}

/// `linux.personality`: the execution domain the container's process runs in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Personality {
    pub domain: String,
    /// The runtime-spec defines no flag values yet: accepted and not applied (as crun does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hooks {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prestart: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub create_runtime: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub create_container: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start_container: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub poststart: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub poststop: Vec<Hook>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    pub path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Linux {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<NamespaceSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uid_mappings: Vec<IdMapping>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gid_mappings: Vec<IdMapping>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked_paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readonly_paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs_propagation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub personality: Option<Personality>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intel_rdt: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_offsets: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceSpec {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdMapping {
    #[serde(rename = "containerID")]
    pub container_id: u32,
    #[serde(rename = "hostID")]
    pub host_id: u32,
    pub size: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    #[serde(rename = "type")]
    pub kind: String,
    pub path: String,
    #[serde(default)]
    pub major: i64,
    #[serde(default)]
    pub minor: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

/// `linux.resources`. Known fields only; [`super::convert`] refuses those reprorun cannot
/// enforce when they are set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<Pids>,
    #[serde(rename = "blockIO", default, skip_serializing_if = "Option::is_none")]
    pub block_io: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepage_limits: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unified: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRule {
    pub allow: bool,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<i64>,
    #[serde(rename = "kernelTCP", default, skip_serializing_if = "Option::is_none")]
    pub kernel_tcp: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swappiness: Option<u64>,
    #[serde(
        rename = "disableOOMKiller",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_oom_killer: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_hierarchy: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_before_update: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime_runtime: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime_period: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mems: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pids {
    pub limit: i64,
}

/// The config `reprorun spec` writes: busybox-style `sh`, a read-only root at `rootfs`,
/// the namespaces and mounts runc's default has, and reprorun's masked paths.
pub fn default_spec(rootless: bool) -> Spec {
    Spec {
        oci_version: super::OCI_VERSION.into(),
        process: Some(default_process()),
        root: Some(Root {
            path: "rootfs".into(),
            readonly: true,
        }),
        hostname: Some("reprorun".into()),
        mounts: default_mounts(),
        linux: Some(default_linux(rootless)),
        ..Spec::default()
    }
}

/// `sh` as root with runc's default capabilities and open-file limit.
fn default_process() -> Process {
    let caps: Vec<String> = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    Process {
        terminal: false,
        user: User::default(),
        args: vec!["sh".into()],
        env: vec![
            format!("PATH={}", crate::determinism::FROZEN_PATH),
            "TERM=xterm".into(),
        ],
        cwd: "/".into(),
        capabilities: Some(Capabilities {
            bounding: caps.clone(),
            effective: caps.clone(),
            inheritable: Vec::new(),
            permitted: caps,
            ambient: Vec::new(),
        }),
        rlimits: vec![Rlimit {
            kind: "RLIMIT_NOFILE".into(),
            soft: 1024,
            hard: 1024,
        }],
        no_new_privileges: true,
        ..Process::default()
    }
}

/// runc's default mounts: /proc, a tmpfs /dev with pts, shm and mqueue, /sys, /tmp.
fn default_mounts() -> Vec<Mount> {
    let mount = |dest: &str, kind: &str, source: &str, opts: &[&str]| Mount {
        destination: dest.into(),
        kind: Some(kind.into()),
        source: Some(source.into()),
        options: opts.iter().map(|s| s.to_string()).collect(),
        ..Mount::default()
    };
    vec![
        mount("/proc", "proc", "proc", &[]),
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ],
        ),
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        ),
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        ),
        mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", "ro"],
        ),
        mount("/tmp", "tmpfs", "tmpfs", &["nosuid", "nodev", "mode=1777"]),
    ]
}

/// New pid, network, ipc, uts and mount namespaces (and, `rootless`, a user namespace that
/// maps root to the caller), and reprorun's masked and read-only paths.
fn default_linux(rootless: bool) -> Linux {
    let mut namespaces: Vec<NamespaceSpec> = ["pid", "network", "ipc", "uts", "mount"]
        .iter()
        .map(|k| NamespaceSpec {
            kind: k.to_string(),
            path: None,
        })
        .collect();
    let mut linux = Linux {
        masked_paths: crate::plan::MASKED.iter().map(|s| s.to_string()).collect(),
        readonly_paths: crate::plan::READONLY
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ..Linux::default()
    };
    if rootless {
        namespaces.push(NamespaceSpec {
            kind: "user".into(),
            path: None,
        });
        let (uid, gid) = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        linux.uid_mappings = vec![IdMapping {
            container_id: 0,
            host_id: uid,
            size: 1,
        }];
        linux.gid_mappings = vec![IdMapping {
            container_id: 0,
            host_id: gid,
            size: 1,
        }];
    }
    linux.namespaces = namespaces;
    linux
}
