//! The one place a [`Plan`]'s defaults live. Every front end (`reprorun exec`, an OCI
//! bundle, the pipelines) starts from [`Plan::base`] and sets what it resolved, with struct
//! update syntax: a new field with a default is added here and nowhere else.

use std::path::PathBuf;

use super::{IdMap, Isolation, Namespace, Plan, PLAN_VERSION, UPTIME_START_SECS, WORKDIR};
use crate::determinism::identity::{DEFAULT_CPUS, MEMORY_BYTES};
use crate::determinism::{Identity, RandomMode, Uname};
use crate::security::{default_rlimits, Resources, SeccompProfile, Security};

/// The hostname a sandbox gets unless asked for another.
pub(crate) const DEFAULT_HOSTNAME: &str = "reprorun";
/// The NIS domain name a sandbox gets unless asked for another.
pub(crate) const DEFAULT_DOMAINNAME: &str = "(none)";

/// Every namespace a sandbox may have, in the order plans list them.
pub(crate) const ALL_NAMESPACES: [Namespace; 8] = [
    Namespace::User,
    Namespace::Pid,
    Namespace::Mount,
    Namespace::Net,
    Namespace::Uts,
    Namespace::Ipc,
    Namespace::Cgroup,
    Namespace::Time,
];

/// The identity the workload sees: `cpus` CPUs, the pinned memory size, and a uname that
/// names `hostname` and `domainname`.
pub(crate) fn pinned_identity(cpus: u32, hostname: &str, domainname: &str) -> Identity {
    Identity {
        cpus,
        memory_bytes: MEMORY_BYTES,
        uname: Uname::pinned(hostname, domainname),
    }
}

impl Plan {
    /// A plan that runs `argv` on `rootfs` with every other field at its default: every
    /// namespace, no id maps, no mounts, the pinned identity and rlimits, the default seccomp
    /// profile, intercepted calls and sorted directories. Resolvers override what they
    /// resolved (`Plan { mounts, ..Plan::base(rootfs, argv) }`).
    pub(crate) fn base(rootfs: PathBuf, argv: Vec<String>) -> Plan {
        let no_map = IdMap {
            inside: 0,
            outside: 0,
            count: 0,
        };
        Plan {
            version: PLAN_VERSION,
            isolation: Isolation::Full,
            namespaces: ALL_NAMESPACES.to_vec(),
            uid_map: no_map,
            gid_map: no_map,
            rootfs,
            mounts: Vec::new(),
            hostname: DEFAULT_HOSTNAME.into(),
            domainname: DEFAULT_DOMAINNAME.into(),
            cwd: WORKDIR.into(),
            host_workdir: PathBuf::new(),
            env: Vec::new(),
            umask: 0o022,
            argv,
            timeout_ms: None,
            uptime_start_secs: UPTIME_START_SECS,
            clock: None,
            seed: 0,
            random: RandomMode::Seeded,
            identity: pinned_identity(DEFAULT_CPUS, DEFAULT_HOSTNAME, DEFAULT_DOMAINNAME),
            security: Security {
                seccomp: SeccompProfile::Default,
                cap_add: Vec::new(),
                preserve_fds: 0,
                rlimits: default_rlimits(),
                caps: None,
                refuse_setid: false,
            },
            resources: Resources::default(),
            process_user: None,
            join: Vec::new(),
            egress: None,
            net_log: None,
            registry: None,
            oom_score_adj: None,
            scheduling: None,
            personality: None,
            terminal: false,
            parent_maps: None,
            intercept: true,
            sorted_dirs: true,
            share_tty: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{resolve, ExecRequest, HostFacts};

    /// An exec plan (host root) and an OCI plan (runc's default spec): each resolver sets
    /// only what it resolved; every other field is the base's.
    fn both() -> (Plan, Plan) {
        let dir = tempfile::tempdir().unwrap();
        let host = HostFacts {
            uid: 1000,
            gid: 100,
            cwd: dir.path().to_path_buf(),
            source_date_epoch: None,
            now: 1_800_000_000,
            cpus_available: 4,
            unix_sockets: Vec::new(),
        };
        let exec = resolve(&ExecRequest::new(vec!["true".into()]), &host).unwrap();
        std::fs::create_dir(dir.path().join("rootfs")).unwrap();
        let spec = crate::oci::spec::default_spec(true);
        let oci = crate::oci::convert::resolve(&spec, dir.path(), 4)
            .unwrap()
            .plan;
        (exec, oci)
    }

    #[test]
    fn a_default_set_in_the_base_reaches_exec_and_oci_plans() {
        let (exec, oci) = both();
        let base = Plan::base(PathBuf::from("/"), Vec::new());
        for p in [&exec, &oci] {
            assert_eq!(p.version, base.version);
            assert_eq!(p.uptime_start_secs, base.uptime_start_secs);
            assert_eq!(p.sorted_dirs, base.sorted_dirs);
            assert_eq!(p.isolation, base.isolation);
            assert_eq!(p.timeout_ms, base.timeout_ms);
            assert_eq!(p.share_tty, base.share_tty);
            assert_eq!(p.identity.memory_bytes, base.identity.memory_bytes);
        }
        // What the exec resolver leaves to the base (the OCI one resolves these).
        assert_eq!(exec.cwd, base.cwd);
        assert_eq!(exec.umask, base.umask);
        assert_eq!(exec.domainname, base.domainname);
        assert_eq!(exec.intercept, base.intercept);
        assert_eq!(exec.terminal, base.terminal);
        assert_eq!(exec.join, base.join);
        assert_eq!(exec.process_user, base.process_user);
        assert_eq!(exec.oom_score_adj, base.oom_score_adj);
        assert_eq!(exec.parent_maps, base.parent_maps);
        assert_eq!(exec.identity.uname.domainname, DEFAULT_DOMAINNAME);
        // The OCI plan's unmapped ids come from the base too (the creating process maps).
        assert_eq!(oci.uid_map, base.uid_map);
        assert_eq!(oci.gid_map, base.gid_map);
    }

    #[test]
    fn the_base_plan_runs_argv_on_rootfs_with_every_namespace() {
        let base = Plan::base(PathBuf::from("/r"), vec!["sh".into()]);
        assert_eq!(base.rootfs, PathBuf::from("/r"));
        assert_eq!(base.argv, ["sh"]);
        assert_eq!(base.namespaces, ALL_NAMESPACES);
        assert!(base.mounts.is_empty() && base.intercept && base.sorted_dirs);
        assert_eq!(base.identity.uname.nodename, DEFAULT_HOSTNAME);
        // The time namespace is entered by unshare, never by clone.
        assert_eq!(base.clone_flags() & libc::CLONE_NEWTIME, 0);
    }
}
