use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::determinism::{ClockMode, DateChoice, DEFAULT_EPOCH};
use crate::parse::BindSpec;

fn host(cwd: &Path) -> HostFacts {
    HostFacts {
        uid: 1000,
        gid: 100,
        cwd: cwd.to_path_buf(),
        source_date_epoch: None,
        now: 1_800_000_000,
        cpus_available: 4,
        unix_sockets: Vec::new(),
    }
}

/// A small root filesystem: dirs, a symlink, a file, a fifo and entries the sandbox provides.
fn fake_rootfs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for d in ["usr/bin", "etc", "proc", "dev", "tmp", "root", "home/alice"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    symlink("usr/bin", dir.path().join("bin")).unwrap();
    std::fs::write(dir.path().join("marker"), "x").unwrap();
    nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    dir
}

fn req(argv: &[&str]) -> ExecRequest {
    ExecRequest::new(argv.iter().map(|s| s.to_string()).collect())
}

fn dests(plan: &Plan) -> Vec<PathBuf> {
    plan.mounts
        .iter()
        .filter_map(|m| m.dest().map(Path::to_path_buf))
        .collect()
}

#[test]
fn rootfs_entries_are_bound_read_only_in_name_order() {
    let root = fake_rootfs();
    let work = tempfile::tempdir().unwrap();
    let mut r = req(&["true"]);
    r.rootfs = Some(root.path().to_path_buf());
    let plan = resolve(&r, &host(work.path())).unwrap();

    assert_eq!(
        plan.mounts[0],
        MountOp::Tmpfs {
            dest: "/".into(),
            mode: 0o755,
            size: None
        }
    );
    assert_eq!(plan.mounts.last(), Some(&MountOp::ReadonlyRoot));
    let rootfs_ops: Vec<_> = plan.mounts[1..5].to_vec();
    assert_eq!(
        rootfs_ops,
        vec![
            MountOp::Symlink {
                target: "usr/bin".into(),
                dest: "/bin".into()
            },
            MountOp::Bind {
                src: root.path().join("etc"),
                dest: "/etc".into(),
                readonly: true,
                idmap: None,
            },
            MountOp::Bind {
                src: root.path().join("marker"),
                dest: "/marker".into(),
                readonly: true,
                idmap: None,
            },
            // In --rootfs mode /root belongs to the image and is bound like the rest.
            MountOp::Bind {
                src: root.path().join("root"),
                dest: "/root".into(),
                readonly: true,
                idmap: None,
            },
        ]
    );
    // The fifo is skipped; proc, dev, tmp and home come from the sandbox, not the rootfs.
    for provided in ["/proc", "/dev", "/tmp", "/home"] {
        assert!(!plan
            .mounts
            .iter()
            .any(|m| matches!(m, MountOp::Bind { dest, .. } if dest == Path::new(provided))));
    }
    assert!(!dests(&plan).contains(&PathBuf::from("/fifo")));
    assert_eq!(plan.rootfs, root.path());
}

#[test]
fn host_root_hides_root_home_and_run() {
    let work = tempfile::tempdir().unwrap();
    let plan = resolve(&req(&["true"]), &host(work.path())).unwrap();
    assert_eq!(plan.rootfs, PathBuf::from("/"));
    assert!(plan.mounts.contains(&MountOp::Dir {
        dest: "/root".into(),
        mode: 0o700
    }));
    assert!(plan.mounts.contains(&MountOp::Tmpfs {
        dest: "/run".into(),
        mode: 0o755,
        size: None
    }));
    assert!(plan.mounts.contains(&MountOp::Tmpfs {
        dest: "/home".into(),
        mode: 0o755,
        size: None
    }));
    assert!(plan.mounts.contains(&MountOp::Tmpfs {
        dest: "/tmp".into(),
        mode: 0o1777,
        size: None
    }));
    assert!(plan.mounts.contains(&MountOp::Bind {
        src: "/usr".into(),
        dest: "/usr".into(),
        readonly: true,
        idmap: None,
    }));
    assert!(plan.mounts.contains(&MountOp::Proc {
        dest: "/proc".into()
    }));
    // random and urandom are the host's only with --random real (see seed_random_and_cpus).
    for node in ["null", "zero", "full", "tty"] {
        let p = Path::new("/dev").join(node);
        assert!(plan.mounts.contains(&MountOp::DevNode {
            src: p.clone(),
            dest: p
        }));
    }
}

#[test]
fn workdir_and_extra_mounts_keep_command_line_order() {
    let work = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("rel.txt"), "x").unwrap();
    let mut r = req(&["true"]);
    r.extra_mounts = vec![
        ExtraMount::Tmpfs("/scratch".into()),
        ExtraMount::Bind(BindSpec {
            src: data.path().into(),
            dest: "/data".into(),
            readonly: true,
        }),
        ExtraMount::Bind(BindSpec {
            src: "rel.txt".into(),
            dest: "/etc/x".into(),
            readonly: false,
        }),
    ];
    let plan = resolve(&r, &host(work.path())).unwrap();
    let n = plan.mounts.len();
    assert_eq!(
        plan.mounts[n - 5..n - 1],
        [
            MountOp::Bind {
                src: work.path().into(),
                dest: "/work".into(),
                readonly: false,
                idmap: None,
            },
            MountOp::Tmpfs {
                dest: "/scratch".into(),
                mode: 0o755,
                size: None
            },
            MountOp::Bind {
                src: data.path().into(),
                dest: "/data".into(),
                readonly: true,
                idmap: None,
            },
            // A relative source is taken from the caller's directory.
            MountOp::Bind {
                src: work.path().join("rel.txt"),
                dest: "/etc/x".into(),
                readonly: false,
                idmap: None,
            },
        ]
    );
    assert_eq!(plan.cwd, PathBuf::from("/work"));
    assert_eq!(plan.host_workdir, work.path());
}

#[test]
fn environment_is_exactly_the_pins_plus_user_values() {
    let work = tempfile::tempdir().unwrap();
    let mut facts = host(work.path());
    facts.source_date_epoch = Some(1_600_000_000);
    let mut r = req(&["true"]);
    r.env = vec![
        ("FOO".into(), "bar".into()),
        ("TZ".into(), "Asia/Tokyo".into()),
    ];
    let plan = resolve(&r, &facts).unwrap();
    assert_eq!(
        plan.env,
        vec![
            "FOO=bar",
            "HOME=/home/reprorun",
            "LANG=C.UTF-8",
            "LC_ALL=C.UTF-8",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PERL_HASH_SEED=0",
            "PERL_PERTURB_KEYS=NO",
            "PYTHONHASHSEED=0",
            "SOURCE_DATE_EPOCH=1600000000",
            "SWIFT_DETERMINISTIC_HASHING=1",
            "TZ=Asia/Tokyo",
        ]
    );
    let plan = resolve(&req(&["true"]), &host(work.path())).unwrap();
    assert!(plan
        .env
        .contains(&format!("SOURCE_DATE_EPOCH={DEFAULT_EPOCH}")));
}

#[test]
fn identity_namespaces_and_limits() {
    let work = tempfile::tempdir().unwrap();
    let plan = resolve(&req(&["true"]), &host(work.path())).unwrap();
    assert_eq!(plan.uid_map, IdMap::new(0, 1000, 1));
    assert_eq!(plan.gid_map, IdMap::new(0, 100, 1));
    assert_eq!(plan.namespaces.len(), 8);
    assert_eq!(
        plan.clone_flags() & libc::CLONE_NEWTIME,
        0,
        "time ns is entered by init"
    );
    assert_ne!(plan.clone_flags() & libc::CLONE_NEWNET, 0);
    assert_eq!(plan.hostname, "reprorun");
    assert_eq!(plan.umask, 0o022);
    assert_eq!(plan.timeout_ms, None);

    let mut r = req(&["true"]);
    r.user = Some((1000, 1000));
    r.net = NetMode::Host;
    r.timeout = Some(Duration::from_millis(1500));
    r.hostname = "box".into();
    let plan = resolve(&r, &host(work.path())).unwrap();
    assert_eq!(plan.uid_map, IdMap::new(1000, 1000, 1));
    assert!(!plan.has(Namespace::Net));
    assert_eq!(plan.clone_flags() & libc::CLONE_NEWNET, 0);
    assert_eq!(plan.timeout_ms, Some(1500));
    assert_eq!(plan.hostname, "box");
}

#[test]
fn bad_requests_are_refused_with_the_reason() {
    let work = tempfile::tempdir().unwrap();
    let h = host(work.path());
    assert!(matches!(
        resolve(&req(&[]), &h),
        Err(PlanError::EmptyCommand)
    ));
    assert!(matches!(
        resolve(&req(&[""]), &h),
        Err(PlanError::EmptyCommand)
    ));

    let mut r = req(&["true"]);
    r.rootfs = Some("/nonexistent/rootfs".into());
    assert!(matches!(resolve(&r, &h), Err(PlanError::Rootfs(_))));
    r.rootfs = Some("/etc/hostname".into());
    assert!(matches!(resolve(&r, &h), Err(PlanError::Rootfs(_))));

    let mut r = req(&["true"]);
    r.workdir = Some("/nonexistent/work".into());
    assert!(matches!(resolve(&r, &h), Err(PlanError::Workdir(_))));

    let mut r = req(&["true"]);
    r.extra_mounts = vec![ExtraMount::Bind(BindSpec {
        src: "/nonexistent/src".into(),
        dest: "/x".into(),
        readonly: false,
    })];
    let err = resolve(&r, &h).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--bind source /nonexistent/src: no such file or directory"
    );

    let mut r = req(&["true"]);
    r.env = vec![("A=B".into(), "x".into())];
    assert!(matches!(resolve(&r, &h), Err(PlanError::Env(_))));
}

#[test]
fn plan_json_round_trips_and_prints_modes_in_octal() {
    let work = tempfile::tempdir().unwrap();
    let plan = resolve(&req(&["echo", "hi"]), &host(work.path())).unwrap();
    let text = serde_json::to_string(&plan).unwrap();
    assert!(
        text.contains(r#""op":"tmpfs","dest":"/tmp","mode":"1777""#),
        "{text}"
    );
    assert!(text.contains(r#""umask":"0022""#));
    let back: Plan = serde_json::from_str(&text).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn clock_defaults_dates_and_time_mounts() {
    use crate::determinism::clock::{PRELOAD_PATH, RUN_DIR};
    let work = tempfile::tempdir().unwrap();
    let plan = resolve(&req(&["true"]), &host(work.path())).unwrap();
    let clock = ClockPlan {
        epoch: DEFAULT_EPOCH,
        mode: ClockMode::StartAt,
    };
    assert_eq!(plan.clock, Some(clock));
    let run_dir = PathBuf::from(RUN_DIR);
    let i = plan
        .mounts
        .iter()
        .position(|m| matches!(m, MountOp::RuntimeFiles { .. }))
        .unwrap();
    assert_eq!(
        plan.mounts[i - 1..i + 3],
        [
            MountOp::Dir {
                dest: run_dir.clone(),
                mode: 0o755,
            },
            MountOp::RuntimeFiles {
                dir: run_dir.clone(),
                clock: Some(clock),
                seed: Some(0),
            },
            MountOp::Preload {
                etc: "/etc".into(),
                lib: PRELOAD_PATH.into()
            },
            MountOp::ReadonlyPath {
                dest: run_dir.clone()
            },
        ]
    );
    // The clock's directory comes after the /run tmpfs that holds it.
    let run = plan
        .mounts
        .iter()
        .position(|m| m.dest() == Some(Path::new("/run")))
        .unwrap();
    assert!(run < i);

    // The caller's SOURCE_DATE_EPOCH is the default date; --date wins over it.
    let mut facts = host(work.path());
    facts.source_date_epoch = Some(1_500_000_000);
    let plan = resolve(&req(&["true"]), &facts).unwrap();
    assert_eq!(plan.clock.unwrap().epoch, 1_500_000_000);
    let mut r = req(&["true"]);
    r.date = Some(DateChoice::Pinned(1_234));
    r.clock = ClockMode::Tick { step_ns: 5 };
    let plan = resolve(&r, &facts).unwrap();
    assert_eq!(
        plan.clock,
        Some(ClockPlan {
            epoch: 1_234,
            mode: ClockMode::Tick { step_ns: 5 }
        })
    );
    assert!(plan.env.contains(&"SOURCE_DATE_EPOCH=1234".to_string()));
    // Tick mode keeps the page writable (its read counter is shared).
    assert!(!plan.mounts.contains(&MountOp::ReadonlyPath {
        dest: run_dir.clone()
    }));
    assert!(plan.mounts.contains(&MountOp::RuntimeFiles {
        dir: run_dir.clone(),
        clock: plan.clock,
        seed: Some(0)
    }));

    // --date now: no fake clock, SOURCE_DATE_EPOCH is the real time; the page and the
    // preload stay for the seeded AT_RANDOM, and go with --random real as well.
    let mut r = req(&["true"]);
    r.date = Some(DateChoice::Now);
    let plan = resolve(&r, &facts).unwrap();
    assert_eq!(plan.clock, None);
    assert!(plan.mounts.contains(&MountOp::RuntimeFiles {
        dir: run_dir.clone(),
        clock: None,
        seed: Some(0)
    }));
    assert!(plan
        .env
        .contains(&"SOURCE_DATE_EPOCH=1800000000".to_string()));
    r.random = RandomMode::Real;
    let plan = resolve(&r, &facts).unwrap();
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::Preload { .. } | MountOp::RuntimeFiles { .. })));
}

#[test]
fn seed_random_and_cpus_resolve() {
    let work = tempfile::tempdir().unwrap();
    let facts = host(work.path());
    let plan = resolve(&req(&["true"]), &facts).unwrap();
    assert_eq!((plan.seed, plan.random), (0, RandomMode::Seeded));
    assert_eq!(plan.identity.cpus, 1, "one CPU unless asked");
    assert_eq!(
        plan.identity.uname.release,
        crate::determinism::identity::KERNEL_RELEASE
    );
    assert_eq!(plan.identity.uname.nodename, "reprorun");
    // Seeded: /dev/urandom is the FIFO (with /dev/random linked to it), not the host device.
    assert!(plan.mounts.contains(&MountOp::Fifo {
        dest: ENTROPY_FIFO.into(),
        mode: 0o444,
        links: vec!["/dev/random".into()],
    }));
    assert!(!plan.mounts.iter().any(|m| matches!(m,
        MountOp::DevNode { dest, .. } if dest.ends_with("urandom") || dest.ends_with("random"))));
    // Every identity file is bound after /proc and /sys are mounted.
    let proc_at = plan
        .mounts
        .iter()
        .position(|m| matches!(m, MountOp::Proc { .. }))
        .unwrap();
    let sys_at = plan
        .mounts
        .iter()
        .position(|m| matches!(m, MountOp::Sysfs { .. }))
        .unwrap();
    let files: Vec<_> = plan
        .mounts
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match m {
            MountOp::File { dest, contents } => Some((i, dest.clone(), contents.clone())),
            _ => None,
        })
        .collect();
    assert!(files
        .iter()
        .all(|(i, d, _)| *i > proc_at && (*i > sys_at || !d.starts_with("/sys"))));
    // /sys and what is placed under it come after every other system mount (init joins the
    // network namespace, made beside it, right before sysfs), and before the caller's.
    let under_sys = |m: &MountOp| m.dest().is_some_and(|d| d.starts_with("/sys"));
    let last_other = plan.mounts[..sys_at]
        .iter()
        .rposition(|m| !under_sys(m))
        .unwrap();
    assert!(matches!(
        plan.mounts[last_other],
        MountOp::ReadonlyPath { ref dest } if dest == Path::new(crate::determinism::clock::RUN_DIR)
    ));
    let sys_ops: Vec<_> = plan.mounts.iter().filter(|m| under_sys(m)).collect();
    let n = 1 + 3 + MASKED.iter().filter(|p| p.starts_with("/sys")).count();
    assert_eq!(sys_ops.len(), n, "{sys_ops:?}");
    assert!(plan.mounts[sys_at..sys_at + n].iter().all(under_sys));
    assert!(
        matches!(plan.mounts[sys_at + n], MountOp::Bind { ref dest, .. } if dest == Path::new(WORKDIR))
    );
    let online = files
        .iter()
        .find(|(_, d, _)| d == Path::new("/sys/devices/system/cpu/online"))
        .unwrap();
    assert_eq!(online.2, "0\n");
    let generated = |plan: &Plan, dest: &str| {
        plan.mounts
            .iter()
            .any(|m| matches!(m, MountOp::File { dest: d, .. } if d == Path::new(dest)))
    };
    assert!(generated(&plan, "/proc/sys/kernel/random/boot_id"));
    assert!(
        generated(&plan, "/proc/sys/kernel/random/uuid"),
        "seeded: one uuid"
    );

    let mut r = req(&["true"]);
    r.seed = 7;
    r.random = RandomMode::Real;
    r.cpus = Some(4);
    r.hostname = "box".into();
    let plan = resolve(&r, &facts).unwrap();
    assert!(generated(&plan, "/proc/sys/kernel/random/boot_id"));
    assert!(
        !generated(&plan, "/proc/sys/kernel/random/uuid"),
        "real: the kernel's"
    );
    assert!(plan.env.contains(&"PYTHONHASHSEED=7".to_string()));
    assert!(plan.env.contains(&"PERL_HASH_SEED=7".to_string()));
    assert_eq!(plan.identity.cpus, 4);
    assert_eq!(plan.identity.uname.nodename, "box");
    assert!(plan.mounts.contains(&MountOp::DevNode {
        src: "/dev/urandom".into(),
        dest: "/dev/urandom".into(),
    }));
    assert!(!plan
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::Fifo { .. })));

    // --cpus 0 and more than the caller may use are refused.
    for bad in [0, 5] {
        let mut r = req(&["true"]);
        r.cpus = Some(bad);
        let err = resolve(&r, &facts).unwrap_err();
        assert!(matches!(err, PlanError::Cpus { asked, available: 4 } if asked == bad));
        assert!(err
            .to_string()
            .starts_with(&format!("--cpus {bad}: must be between 1 and 4")));
    }
}

#[test]
fn the_request_switches_interception_and_directory_order() {
    let work = tempfile::tempdir().unwrap();
    let plan = resolve(&req(&["true"]), &host(work.path())).unwrap();
    assert!(plan.intercept && plan.sorted_dirs);
    let mut r = req(&["true"]);
    r.intercept = false;
    r.sorted_dirs = false;
    let plan = resolve(&r, &host(work.path())).unwrap();
    assert!(!plan.intercept && !plan.sorted_dirs);
}

#[test]
fn a_root_caller_runs_as_unprivileged_host_ids_and_maps_what_it_hands_over() {
    use super::idmaps::{SANDBOX_BASE, SANDBOX_IDS};
    use std::os::unix::fs::MetadataExt;
    let root = fake_rootfs();
    let work = tempfile::tempdir().unwrap();
    let owner = std::fs::metadata(work.path()).unwrap();
    let mut r = req(&["true"]);
    r.rootfs = Some(root.path().to_path_buf());
    r.user = Some((1000, 1000));
    // An unprivileged caller: its own ids, one line, written by init; nothing idmapped.
    let plan = resolve(&r, &host(work.path())).unwrap();
    assert_eq!((plan.uid_map.outside, plan.gid_map.outside), (1000, 100));
    assert_eq!(plan.parent_maps, None);
    assert!(plan
        .mounts
        .iter()
        .all(|m| !matches!(m, MountOp::Bind { idmap: Some(_), .. })));
    // Root: the sandbox's ids are the unprivileged range, never a host user's.
    let root_host = HostFacts {
        uid: 0,
        gid: 0,
        ..host(work.path())
    };
    let plan = resolve(&r, &root_host).unwrap();
    assert_eq!(plan.uid_map.inside, 1000);
    assert_eq!(
        (plan.uid_map.outside, plan.gid_map.outside),
        (SANDBOX_BASE + 1000, SANDBOX_BASE + 1000)
    );
    let maps = plan
        .parent_maps
        .as_ref()
        .expect("maps written by the supervisor");
    assert_eq!(maps.uid, [IdMap::new(0, SANDBOX_BASE, SANDBOX_IDS)]);
    assert_eq!(maps.gid, maps.uid);
    // The work tree: its owner is the pinned id, through an idmapped mount.
    let work_bind = plan
        .mounts
        .iter()
        .find_map(|m| match m {
            MountOp::Bind {
                dest,
                idmap: Some(idmap),
                ..
            } if dest == Path::new(WORKDIR) => Some(idmap),
            _ => None,
        })
        .expect("an idmapped /work");
    assert!(work_bind
        .uid
        .iter()
        .any(|m| m.inside == owner.uid() && m.outside == SANDBOX_BASE + 1000 && m.count == 1));
    // The rootfs's files keep their ids (shifted into the range).
    assert!(plan.mounts.iter().any(|m| matches!(m,
        MountOp::Bind { dest, idmap: Some(i), .. }
            if dest == Path::new("/usr") && i.uid == [IdMap::new(0, SANDBOX_BASE, SANDBOX_IDS)])));
    // Ids beyond the range are refused, not silently left as root.
    r.user = Some((SANDBOX_IDS, 0));
    assert!(matches!(
        resolve(&r, &root_host),
        Err(PlanError::UserRange(..))
    ));
    // So is a file capability the workload could leave on the host.
    r.user = None;
    r.cap_add = vec!["CAP_SETFCAP".into()];
    assert!(matches!(resolve(&r, &root_host), Err(PlanError::SetFcap)));
}

#[test]
fn injected_secrets_are_placeholders_in_the_plan_with_the_ca_bundle_bound() {
    let work = tempfile::tempdir().unwrap();
    let mut r = req(&["true"]);
    r.net = NetMode::Allow;
    let (name, host_rule) = crate::net::intercept::parse_spec("API_KEY:api.test").unwrap();
    r.egress.rules.push(host_rule.clone());
    r.egress.inject.push(crate::net::intercept::Inject {
        name,
        host: host_rule,
        placeholder: "xq-0123456789abcdef".into(),
    });
    // A --env of the same name does not bring a value back in.
    r.env = vec![("API_KEY".into(), "sk-the-real-one".into())];
    let plan = resolve(&r, &host(work.path())).unwrap();
    assert!(plan
        .env
        .contains(&"API_KEY=xq-0123456789abcdef".to_string()));
    assert!(!plan.env.iter().any(|e| e.contains("sk-the-real-one")));
    for var in [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    ] {
        assert!(
            plan.env.contains(&format!("{var}=/run/reprorun-ca.pem")),
            "{var}"
        );
    }
    // The bundle's file is in the plan, its text the executor's to write.
    assert!(plan.mounts.iter().any(|m| matches!(m, MountOp::File { dest, contents } if dest == Path::new("/run/reprorun-ca.pem") && contents.is_empty())));
    let shown = serde_json::to_string(&plan).unwrap();
    assert!(shown.contains("\"inject\""), "{shown}");
    // Without --inject-env, none of it.
    let mut r = req(&["true"]);
    r.net = NetMode::Allow;
    let plan = resolve(&r, &host(work.path())).unwrap();
    assert!(!plan.env.iter().any(|e| e.starts_with("SSL_CERT_FILE=")));
    assert!(!dests(&plan).contains(&PathBuf::from("/run/reprorun-ca.pem")));
}

/// A read-only path is a recursive bind of itself: made after the pinned files under it
/// (/proc/sys/kernel/osrelease, .../random/boot_id, ...), it would copy each of them, one
/// more mount per file for nothing. Every pinned file and mask comes after the read-only
/// path that holds it, and every one of them is still in the plan.
#[test]
fn pinned_files_and_masks_are_bound_after_the_read_only_paths_that_hold_them() {
    let work = tempfile::tempdir().unwrap();
    let plan = resolve(&req(&["true"]), &host(work.path())).unwrap();
    let at = |want: &Path| plan.mounts.iter().position(|m| m.dest() == Some(want));
    let mut under = 0;
    for ro in READONLY {
        let ro_at = plan
            .mounts
            .iter()
            .position(|m| matches!(m, MountOp::ReadonlyPath { dest } if dest == Path::new(ro)))
            .unwrap_or_else(|| panic!("{ro} is not made read-only"));
        for (i, m) in plan.mounts.iter().enumerate() {
            if let MountOp::File { dest, .. } | MountOp::Mask { dest } = m {
                if dest.starts_with(ro) {
                    under += 1;
                    assert!(i > ro_at, "{} is bound before {ro}", dest.display());
                }
            }
        }
    }
    assert!(under >= 8, "the pinned files under /proc/sys: {under}");
    for dest in ["/proc/sys/kernel/random/boot_id", "/proc/sys/fs/file-nr"] {
        assert!(at(Path::new(dest)).is_some(), "{dest} is pinned");
    }
    for dest in MASKED {
        assert!(at(Path::new(dest)).is_some(), "{dest} is masked");
    }
}
