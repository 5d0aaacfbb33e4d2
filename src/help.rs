//! How `reprorun exec --help` reads: its options grouped under headings (filesystem, network,
//! environment, limits, isolation, determinism, output), and without the OCI lifecycle's
//! global options (`--root`, `--log`, `--systemd-cgroup`, ...), which do nothing for `exec`
//! (they are still accepted, as runc accepts them anywhere).

/// The exec options under each heading, in the order shown.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Isolation and hardening",
        &[
            "isolation",
            "seccomp",
            "cap_add",
            "preserve_fds",
            "share_tty",
        ],
    ),
    (
        "Filesystem",
        &[
            "workdir",
            "workdir_mode",
            "keep_changes",
            "bind",
            "tmpfs",
            "import_tool",
            "mirror",
            "image",
            "store",
            "rootfs",
            "tmpfs_size",
            "follow_symlinks",
        ],
    ),
    ("Determinism", &["date", "clock", "seed", "random", "cpus"]),
    (
        "Environment and identity",
        &["env", "env_file", "hostname", "user"],
    ),
    (
        "Limits",
        &["timeout", "memory", "pids", "cpus_quota", "rlimit"],
    ),
    (
        "Network",
        &[
            "net",
            "allow_host",
            "allow_file",
            "add_host",
            "net_log",
            "net_record",
            "net_replay",
        ],
    ),
    ("Output", &["record", "dry_run"]),
];

/// The global options of the OCI lifecycle commands.
const OCI_GLOBALS: &[&str] = &["root", "log", "log_format", "debug", "systemd_cgroup"];

#[cfg(test)]
/// `cmd` (reprorun's whole command line, not yet built) with `exec`'s help grouped and the
/// OCI globals hidden from it.
pub(crate) fn exec_grouped(mut cmd: clap::Command) -> clap::Command {
    let globals = hidden_globals(&cmd);
    let Some(exec) = cmd.find_subcommand_mut("exec") else {
        return cmd;
    };
    let mut sub = std::mem::take(exec);
    // A subcommand's own argument of a global's name is kept when globals are handed down
    // at build time: a hidden copy keeps it accepted and out of the help.
    for a in globals {
        sub = sub.arg(a);
    }
    *exec = grouped(sub);
    cmd
}

/// Hidden copies of `cmd`'s OCI global options, for `exec` to accept and not show.
pub(crate) fn hidden_globals(cmd: &clap::Command) -> Vec<clap::Arg> {
    cmd.get_arguments()
        .filter(|a| a.is_global_set() && OCI_GLOBALS.contains(&a.get_id().as_str()))
        .map(|a| a.clone().hide(true))
        .collect()
}

/// `exec`'s own command with each option under its heading.
pub(crate) fn grouped(mut sub: clap::Command) -> clap::Command {
    // Each option moves to the end as it is given its heading, so the order is GROUPS'.
    let has = |sub: &clap::Command, id: &str| sub.get_arguments().any(|a| a.get_id() == id);
    for (heading, ids) in GROUPS {
        for id in *ids {
            if has(&sub, id) {
                sub = sub.mut_arg(*id, |a| a.help_heading(*heading));
            }
        }
    }
    sub
}
