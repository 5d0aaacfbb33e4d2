//! `features`: what this runtime supports, as the runtime spec's features document.

/// `features`: what this runtime supports, as the runtime spec's features document.
pub fn features() -> serde_json::Value {
    let mut mount_options: Vec<&str> = vec![
        "ro",
        "rw",
        "nosuid",
        "suid",
        "nodev",
        "dev",
        "noexec",
        "exec",
        "sync",
        "async",
        "dirsync",
        "mand",
        "nomand",
        "noatime",
        "atime",
        "nodiratime",
        "diratime",
        "relatime",
        "norelatime",
        "strictatime",
        "nostrictatime",
        "nosymfollow",
        "bind",
        "rbind",
        "private",
        "rprivate",
        "shared",
        "rshared",
        "slave",
        "rslave",
        "unbindable",
        "runbindable",
        "idmap",
        "ridmap",
    ];
    mount_options.sort_unstable();
    let caps: Vec<String> = caps::all().iter().map(|c| c.to_string()).collect();
    let mut caps = caps;
    caps.sort();
    serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": super::OCI_VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "poststart", "poststop"],
        "mountOptions": mount_options,
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "time", "user", "uts"],
            "capabilities": caps,
            "cgroup": {"v1": true, "v2": true, "systemd": false, "systemdUser": false, "rdma": false},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86_64"],
            },
            "apparmor": {"enabled": false},
            "selinux": {"enabled": false},
            "intelRdt": {"enabled": false},
            "mountExtensions": {"idmap": {"enabled": true}},
        },
        "annotations": {
            "org.reprorun.determinism": "on|off (default on)",
            "org.reprorun.date": "RFC 3339, YYYY-MM-DD, @EPOCH or now (default 2024-01-01T00:00:00Z)",
            "org.reprorun.clock": "start-at|frozen|tick[=STEP]",
            "org.reprorun.seed": "N (default 0)",
            "org.reprorun.random": "seeded|real",
            "org.reprorun.dev-urandom": "device|seeded (default device)",
            "org.reprorun.no-new-privileges": "true|false (default: process.noNewPrivileges)",
            "org.reprorun.strict": "true|false (default false: unknown fields ignored)",
            "org.reprorun.cpus": "N (default 1)",
        },
    })
}
