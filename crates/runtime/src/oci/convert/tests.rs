use super::*;
use crate::determinism::clock::{ClockMode, PRELOAD_PATH};
use crate::determinism::DEFAULT_EPOCH;
use crate::plan::NsJoin;
use crate::security::SeccompProfile;

/// A bundle directory with an empty rootfs, and podman's config for it (trimmed).
fn bundle() -> (CanonDir, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rootfs")).unwrap();
    std::fs::write(dir.path().join("hosts"), "127.0.0.1 localhost\n").unwrap();
    // Paths in the plan are resolved (the executor reaches them from a staging root).
    let dir = CanonDir(dir);
    let config = serde_json::json!({
        "ociVersion": "1.0.2-dev",
        "process": {
            "user": {"uid": 0, "gid": 0, "umask": 18},
            "args": ["echo", "hi"],
            "env": ["PATH=/usr/bin:/bin", "TERM=xterm", "HOME=/root", "TZ=Europe/Paris"],
            "cwd": "/",
            "capabilities": {
                "bounding": ["CAP_CHOWN", "CAP_KILL"],
                "effective": ["CAP_CHOWN", "CAP_KILL"],
                "permitted": ["CAP_CHOWN", "CAP_KILL"]
            },
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]
        },
        "root": {"path": "rootfs"},
        "hostname": "abc123",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
            {"destination": "/etc/hosts", "type": "bind", "source": "hosts", "options": ["bind", "rprivate", "ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["rprivate", "nosuid", "noexec", "nodev", "relatime", "ro"]}
        ],
        "annotations": {"io.container.manager": "libpod"},
        "linux": {
            "sysctl": {"net.ipv4.ping_group_range": "0 0"},
            "resources": {"devices": [{"allow": false, "access": "rwm"}], "pids": {"limit": 2048}},
            "cgroupsPath": "/libpod_parent/libpod-abc",
            "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
            "seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["kexec_load"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]},
            "maskedPaths": ["/proc/kcore"],
            "readonlyPaths": ["/proc/sys"]
        }
    });
    (dir, config)
}

/// A temporary directory whose path is canonical (the test compares resolved paths).
struct CanonDir(tempfile::TempDir);

impl CanonDir {
    fn path(&self) -> PathBuf {
        self.0.path().canonicalize().unwrap()
    }
}

fn resolve_json(dir: &Path, v: &serde_json::Value) -> Result<Container, String> {
    let spec: Spec = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    resolve(&spec, dir, 2).map_err(|e| e.to_string())
}

#[test]
fn podman_config_resolves_to_a_plan() {
    let (dir, config) = bundle();
    let c = resolve_json(&dir.path(), &config).unwrap();
    let p = &c.plan;
    assert_eq!(p.argv, ["echo", "hi"]);
    assert_eq!(p.hostname, "abc123");
    assert_eq!(p.umask, 0o022);
    // Config env wins; the pins fill the rest.
    assert!(p.env.contains(&"TZ=Europe/Paris".to_string()));
    assert!(p.env.contains(&"PATH=/usr/bin:/bin".to_string()));
    assert!(p.env.iter().any(|e| e.starts_with("PYTHONHASHSEED=")));
    // The new namespaces, plus time for the determinism layer; no user namespace.
    assert!(p.has(Namespace::Net) && p.has(Namespace::Time) && !p.has(Namespace::User));
    assert_eq!(p.resources.pids, Some(2048));
    assert_eq!(c.cgroups_path.as_deref(), Some("/libpod_parent/libpod-abc"));
    let caps = p.security.caps.as_ref().unwrap();
    assert_eq!(caps.bounding, ["CAP_CHOWN", "CAP_KILL"]);
    // The sets as given: CAP_MKNOD too (the device cgroup guards the nodes, as with runc).
    let (dir2, mut with_mknod) = bundle();
    with_mknod["process"]["capabilities"]["bounding"][0] = "CAP_MKNOD".into();
    let c2 = resolve_json(&dir2.path(), &with_mknod).unwrap();
    let caps2 = c2.plan.security.caps.unwrap();
    assert_eq!(caps2.bounding, ["CAP_MKNOD", "CAP_KILL"]);
    // noNewPrivileges absent: new privileges allowed; the annotation forces no_new_privs.
    assert!(caps2.allow_new_privs);
    with_mknod["annotations"]["org.reprorun.no-new-privileges"] = "true".into();
    let c3 = resolve_json(&dir2.path(), &with_mknod).unwrap();
    assert!(!c3.plan.security.caps.unwrap().allow_new_privs);
    // Runc's default device rules follow the config's.
    let rules: Vec<_> = p
        .resources
        .devices
        .iter()
        .map(|r| (r.allow, r.rule.as_str()))
        .collect();
    assert_eq!(rules.first(), Some(&(false, "a *:* rwm")), "{rules:?}");
    assert!(rules.contains(&(true, "c 1:9 rwm")), "{rules:?}");
    assert!(caps.ambient.is_empty());
    assert_eq!(p.security.rlimits[0].name, "nofile");
    assert!(matches!(p.security.seccomp, SeccompProfile::Oci { .. }));
    // The root is the bundle's rootfs, writable; mounts in order with their flag words.
    assert_eq!(
        p.mounts[0],
        MountOp::RootBind {
            src: dir.path().join("rootfs")
        }
    );
    assert!(!p.mounts.contains(&MountOp::ReadonlyRoot));
    assert!(p.mounts.contains(&MountOp::Fs {
        fstype: "devpts".into(),
        source: "devpts".into(),
        dest: "/dev/pts".into(),
        flags: vec!["nosuid".into(), "noexec".into()],
        data: "newinstance,ptmxmode=0666,mode=0620,gid=5".into(),
    }));
    assert!(p.mounts.contains(&MountOp::FlagBind {
        src: dir.path().join("hosts"),
        dest: "/etc/hosts".into(),
        recursive: false,
        flags: vec!["rprivate".into(), "ro".into()],
        idmap: None,
    }));
    // Default devices on the fresh /dev (urandom the host's), the preload file, the sysctl,
    // the config's masked and read-only paths (not reprorun's defaults).
    assert!(p
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::DevNode { dest, .. } if dest == Path::new("/dev/null"))));
    assert!(p
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::DevNode { dest, .. } if dest == Path::new("/dev/urandom"))));
    assert!(p.mounts.iter().any(|m| matches!(m, MountOp::File { dest, contents } if dest == Path::new("/etc/ld.so.preload") && contents.starts_with(PRELOAD_PATH))));
    assert!(p.mounts.contains(&MountOp::Sysctl {
        key: "net.ipv4.ping_group_range".into(),
        value: "0 0".into()
    }));
    let masks: Vec<_> = p
        .mounts
        .iter()
        .filter(|m| matches!(m, MountOp::Mask { .. }))
        .collect();
    assert_eq!(
        masks,
        [&MountOp::Mask {
            dest: "/proc/kcore".into()
        }]
    );
    assert_eq!(p.clock.unwrap().epoch, DEFAULT_EPOCH);
}

#[test]
fn annotations_drive_the_determinism_layer() {
    let (dir, mut config) = bundle();
    config["annotations"]["org.reprorun.date"] = "2020-01-01".into();
    config["annotations"]["org.reprorun.seed"] = "7".into();
    config["annotations"]["org.reprorun.clock"] = "frozen".into();
    let c = resolve_json(&dir.path(), &config).unwrap();
    let clock = c.plan.clock.unwrap();
    assert_eq!(clock.epoch, 1_577_836_800);
    assert_eq!(clock.mode, ClockMode::Frozen);
    assert_eq!(c.plan.seed, 7);
    assert!(c
        .plan
        .env
        .contains(&"SOURCE_DATE_EPOCH=1577836800".to_string()));

    config["annotations"]["org.reprorun.determinism"] = "off".into();
    let c = resolve_json(&dir.path(), &config).unwrap();
    assert!(c.plan.clock.is_none() && !c.plan.intercept);
    assert!(!c.plan.has(Namespace::Time));
    assert!(!c.plan.env.iter().any(|e| e.starts_with("PYTHONHASHSEED=")));
    assert!(!c
        .plan
        .mounts
        .iter()
        .any(|m| matches!(m, MountOp::Fifo { .. })));

    for (key, value) in [
        ("org.reprorun.date", "yesterday"),
        ("org.reprorun.seed", "-1"),
        ("org.reprorun.cpus", "99"),
        ("org.reprorun.clokc", "frozen"),
    ] {
        let (dir, mut config) = bundle();
        config["annotations"][key] = value.into();
        let e = resolve_json(&dir.path(), &config).unwrap_err();
        assert!(e.contains(key), "{key}: {e}");
    }
}

/// `org.reprorun.net.record` / `net.replay`: the cassette's host directory, absolute, one of
/// the two; either gives the container the egress proxy (nothing allowed unless net.allow).
#[test]
fn cassette_annotations_name_a_host_directory() {
    let (dir, mut config) = bundle();
    config["annotations"]["org.reprorun.net.record"] = "/srv/cassette".into();
    let c = resolve_json(&dir.path(), &config).unwrap();
    let egress = c.plan.egress.unwrap();
    assert_eq!(egress.record.as_deref(), Some(Path::new("/srv/cassette")));
    assert!(egress.replay.is_none() && egress.rules.is_empty());
    assert!(c.plan.env.iter().any(|e| e.starts_with("http_proxy=")));
    // TLS is terminated: the CA bundle is bound, and the CA variables name it last (over the
    // config's own).
    let ca = crate::net::intercept::CA_BUNDLE;
    assert!(c
        .plan
        .mounts
        .iter()
        .any(|m| matches!(m, crate::plan::MountOp::File { dest, .. } if dest == Path::new(ca))));
    let (dir, mut config) = bundle();
    config["annotations"]["org.reprorun.net.record"] = "/srv/cassette".into();
    config["annotations"]["org.reprorun.net.upstream-ca"] = "/srv/ca.pem".into();
    let list = config["process"]["env"].as_array_mut().unwrap();
    list.push("SSL_CERT_FILE=/etc/own.pem".into());
    let c = resolve_json(&dir.path(), &config).unwrap();
    assert!(c.plan.env.contains(&format!("SSL_CERT_FILE={ca}")));
    assert!(c.plan.env.contains(&format!("CURL_CA_BUNDLE={ca}")));
    let egress = c.plan.egress.unwrap();
    assert_eq!(
        egress.upstream_ca.as_deref(),
        Some(Path::new("/srv/ca.pem"))
    );

    let (dir, mut config) = bundle();
    config["annotations"]["org.reprorun.net.replay"] = "/srv/cassette".into();
    config["annotations"]["org.reprorun.net.allow"] = "api.test".into();
    let egress = resolve_json(&dir.path(), &config)
        .unwrap()
        .plan
        .egress
        .unwrap();
    assert_eq!(egress.replay.as_deref(), Some(Path::new("/srv/cassette")));
    assert_eq!(egress.rules.len(), 1);

    for (pairs, said) in [
        (
            &[("org.reprorun.net.record", "cassette")][..],
            "annotations.org.reprorun.net.record: expected an absolute host path",
        ),
        (
            &[
                ("org.reprorun.net.record", "/a"),
                ("org.reprorun.net.replay", "/b"),
            ][..],
            "annotations.org.reprorun.net.replay: a container records a cassette",
        ),
        (
            &[
                ("org.reprorun.net.replay", "/a"),
                ("org.reprorun.net.upstream-ca", "/ca.pem"),
            ][..],
            "annotations.org.reprorun.net.upstream-ca: verifies the upstreams of a recording",
        ),
    ] {
        let (dir, mut config) = bundle();
        for (k, v) in pairs {
            config["annotations"][*k] = (*v).into();
        }
        let e = resolve_json(&dir.path(), &config).unwrap_err();
        assert!(e.contains(said), "{pairs:?}: {e}");
    }
    // Not a pin the environment chooses: an image's ENV must not pick a host directory.
    let (dir, mut config) = bundle();
    let list = config["process"]["env"].as_array_mut().unwrap();
    list.push("REPRORUN_NET_RECORD=/etc".into());
    assert!(resolve_json(&dir.path(), &config)
        .unwrap()
        .plan
        .egress
        .is_none());
}

/// Docker before 24 passes no annotations: the pins come from the container's environment
/// (`docker run -e REPRORUN_DATE=...`); an annotation of the same pin wins, a bad value is
/// named by its variable, and the network's settings are never read from the environment.
#[test]
fn environment_variables_pin_a_container_without_annotations() {
    let (dir, mut config) = bundle();
    let env = |c: &mut serde_json::Value, vars: &[&str]| {
        let list = c["process"]["env"].as_array_mut().unwrap();
        list.extend(vars.iter().map(|v| serde_json::Value::from(*v)));
    };
    env(
        &mut config,
        &[
            "REPRORUN_DATE=2020-01-01",
            "REPRORUN_SEED=7",
            "REPRORUN_CLOCK=frozen",
            "REPRORUN_NET_LOG=/etc/passwd",
            "REPRORUN_DATE_X=nonsense",
        ],
    );
    let c = resolve_json(&dir.path(), &config).unwrap();
    let clock = c.plan.clock.unwrap();
    assert_eq!(clock.epoch, 1_577_836_800);
    assert_eq!(clock.mode, ClockMode::Frozen);
    assert_eq!(c.plan.seed, 7);
    assert!(c.plan.egress.is_none());

    config["annotations"]["org.reprorun.date"] = "2021-01-01".into();
    let c = resolve_json(&dir.path(), &config).unwrap();
    assert_eq!(c.plan.clock.unwrap().epoch, 1_609_459_200);

    let (dir, mut config) = bundle();
    env(&mut config, &["REPRORUN_DETERMINISM=off"]);
    let c = resolve_json(&dir.path(), &config).unwrap();
    assert!(c.plan.clock.is_none() && !c.plan.intercept);

    let (dir, mut config) = bundle();
    env(&mut config, &["REPRORUN_SEED=-1"]);
    let e = resolve_json(&dir.path(), &config).unwrap_err();
    assert_eq!(
        e,
        "process.env.REPRORUN_SEED: expected a non-negative integer"
    );
}

/// `process.scheduler` and `ioPriority` reach the plan (the process sets them on itself);
/// `linux.personality`'s domain reaches the plan as `personality(2)`'s number (crun's
/// behaviour); its flags, which the runtime-spec does not define yet, are accepted.
#[test]
fn personality_reaches_the_plan() {
    let (dir, mut config) = bundle();
    assert_eq!(
        resolve_json(&dir.path(), &config).unwrap().plan.personality,
        None
    );
    for (domain, number) in [("LINUX", 0), ("LINUX32", 8)] {
        config["linux"]["personality"] =
            serde_json::json!({"domain": domain, "flags": ["ADDR_NO_RANDOMIZE"]});
        let plan = resolve_json(&dir.path(), &config).unwrap().plan;
        assert_eq!(plan.personality, Some(number), "{domain}");
        // The pinned uname follows the domain, as the kernel's does.
        let machine = match (domain, std::env::consts::ARCH) {
            ("LINUX32", "x86_64") => "i686",
            (_, arch) => arch,
        };
        assert_eq!(plan.identity.uname.machine, machine, "{domain}");
    }
    // `domain` is required.
    config["linux"]["personality"] = serde_json::json!({"flags": []});
    let e = resolve_json(&dir.path(), &config).unwrap_err();
    assert!(e.contains("domain"), "{e}");
}

/// `execCPUAffinity` is accepted and left to `exec` (not applicable to init).
#[test]
fn scheduling_reaches_the_plan() {
    let (dir, mut config) = bundle();
    config["process"]["scheduler"] = serde_json::json!({"policy": "SCHED_IDLE"});
    config["process"]["ioPriority"] = serde_json::json!({"class": "IOPRIO_CLASS_IDLE"});
    config["process"]["execCPUAffinity"] = serde_json::json!({"final": "0"});
    // Windows' command line: ignored on Linux (args run), as runc and crun ignore it.
    config["process"]["commandLine"] = "other.exe".into();
    let plan = resolve_json(&dir.path(), &config).unwrap().plan;
    assert_eq!(
        plan.argv,
        config["process"]["args"]
            .as_array()
            .map(|a| a
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect::<Vec<_>>())
            .unwrap()
    );
    let s = plan.scheduling.expect("scheduling in the plan");
    assert_eq!(s.scheduler.map(|a| a.policy), Some(5));
    assert_eq!(s.io_priority.map(|p| (p.class, p.level)), Some((3, 0)));
    assert_eq!(s.cpus, None);
    config["process"]["ioPriority"]["priority"] = 9.into();
    let e = resolve_json(&dir.path(), &config).unwrap_err();
    assert!(e.contains("process.ioPriority.priority"), "{e}");
}

#[test]
fn unknown_and_unsupported_fields_are_named() {
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "linux.resources.hugepageLimits",
            Box::new(|c| {
                c["linux"]["resources"]["hugepageLimits"] =
                    serde_json::json!([{"pageSize": "2MB", "limit": "big"}])
            }),
        ),
        (
            "linux.resources.blockIO",
            Box::new(|c| c["linux"]["resources"]["blockIO"] = serde_json::json!({"weight": -1})),
        ),
        (
            "linux.resources.unified.../x: not a cgroup v2 file name",
            Box::new(|c| c["linux"]["resources"]["unified"] = serde_json::json!({"../x": "1"})),
        ),
        (
            "process.apparmorProfile",
            Box::new(|c| c["process"]["apparmorProfile"] = "x".into()),
        ),
        (
            "mounts[0]",
            Box::new(|c| c["mounts"][0]["type"] = "nfs".into()),
        ),
        (
            "mounts[0]",
            Box::new(|c| c["mounts"][0]["destination"] = "proc".into()),
        ),
        (
            "mounts[3]",
            Box::new(|c| c["mounts"][3]["source"] = "/nonexistent/x".into()),
        ),
        (
            "mounts[3]: option \"tmpcopyup\" is not supported",
            Box::new(|c| c["mounts"][3]["options"] = serde_json::json!(["bind", "tmpcopyup"])),
        ),
        (
            "linux.maskedPaths: needs a mount namespace",
            Box::new(|c| c["linux"]["namespaces"] = serde_json::json!([{"type": "pid"}])),
        ),
        (
            "linux.namespaces[0]",
            Box::new(|c| c["linux"]["namespaces"][0]["type"] = "pidd".into()),
        ),
        (
            "linux.uidMappings",
            Box::new(|c| {
                c["linux"]["namespaces"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"type": "user"}))
            }),
        ),
        (
            "process.capabilities.bounding",
            Box::new(|c| c["process"]["capabilities"]["bounding"][0] = "CAP_FLY".into()),
        ),
        (
            "process.rlimits[0].type",
            Box::new(|c| c["process"]["rlimits"][0]["type"] = "RLIMIT_FLY".into()),
        ),
        (
            "linux.sysctl",
            Box::new(|c| c["linux"]["sysctl"] = serde_json::json!({"../../etc/x": "1"})),
        ),
        (
            "linux.seccomp",
            Box::new(|c| c["linux"]["seccomp"]["defaultAction"] = "SCMP_ACT_FLY".into()),
        ),
        (
            "root.path",
            Box::new(|c| c["root"]["path"] = "missing".into()),
        ),
        (
            "process.args",
            Box::new(|c| c["process"]["args"] = serde_json::json!([])),
        ),
        ("ociVersion", Box::new(|c| c["ociVersion"] = "2.0.0".into())),
        (
            "linux.sysctl.kernel.core_pattern",
            Box::new(|c| c["linux"]["sysctl"] = serde_json::json!({"kernel.core_pattern": "|/x"})),
        ),
        (
            "linux.cgroupsPath",
            Box::new(|c| c["linux"]["cgroupsPath"] = "/a/../../etc".into()),
        ),
        (
            "linux.cgroupsPath",
            Box::new(|c| c["linux"]["cgroupsPath"] = "system.slice:libpod:abc".into()),
        ),
        (
            "linux.namespaces[6]: namespace \"user\" listed twice",
            Box::new(|c| {
                let list = c["linux"]["namespaces"].as_array_mut().unwrap();
                list.push(serde_json::json!({"type": "user", "path": "/proc/1/ns/user"}));
                list.push(serde_json::json!({"type": "user"}));
            }),
        ),
        (
            "mounts[0]",
            Box::new(|c| c["mounts"][0]["type"] = "overlay".into()),
        ),
    ];
    for (needle, mutate) in cases {
        let (dir, mut config) = bundle();
        mutate(&mut config);
        let e = resolve_json(&dir.path(), &config).expect_err(needle);
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

#[test]
fn user_namespaces_and_joined_namespaces() {
    let (dir, mut config) = bundle();
    config["linux"]["namespaces"] = serde_json::json!([
        {"type": "user"}, {"type": "mount"}, {"type": "pid"},
        {"type": "network", "path": "/proc/1/ns/net"}
    ]);
    config["linux"]["uidMappings"] =
        serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
    config["linux"]["gidMappings"] =
        serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
    config["hostname"] = "".into();
    // A net sysctl needs a network namespace of the container's own.
    assert!(resolve_json(&dir.path(), &config)
        .unwrap_err()
        .contains("linux.sysctl"));
    config["linux"]["sysctl"] = serde_json::json!({});
    let c = resolve_json(&dir.path(), &config).unwrap();
    let p = &c.plan;
    assert!(p.has(Namespace::User) && !p.has(Namespace::Net));
    assert_eq!(
        p.join,
        [NsJoin {
            ns: Namespace::Net,
            path: "/proc/1/ns/net".into()
        }]
    );
    assert_eq!(p.parent_maps.as_ref().unwrap().uid[0].count, 65536);
    assert_eq!(p.clone_flags() & libc::CLONE_NEWNET, 0);
    // A hostname without a uts namespace is refused.
    config["hostname"] = "x".into();
    assert!(resolve_json(&dir.path(), &config)
        .unwrap_err()
        .contains("hostname"));
}

#[test]
fn user_and_time_namespaces_joined_by_path() {
    let (dir, mut config) = bundle();
    let list = config["linux"]["namespaces"].as_array_mut().unwrap();
    list.push(serde_json::json!({"type": "user", "path": "/proc/1/ns/user"}));
    list.push(serde_json::json!({"type": "time", "path": "/proc/1/ns/time"}));
    let c = resolve_json(&dir.path(), &config).unwrap();
    let p = &c.plan;
    let joined: Vec<Namespace> = p.join.iter().map(|j| j.ns).collect();
    assert_eq!(joined, [Namespace::User, Namespace::Time]);
    // No new user namespace (no id maps to write), and no time namespace of the determinism
    // layer's own: the joined one's clocks are kept.
    assert!(!p.has(Namespace::User) && !p.has(Namespace::Time));
    assert!(p.parent_maps.is_none());
    assert_eq!(
        p.clone_flags() & (libc::CLONE_NEWUSER | libc::CLONE_NEWTIME),
        0
    );
}

#[test]
fn the_default_spec_resolves() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rootfs")).unwrap();
    for rootless in [false, true] {
        let spec = spec::default_spec(rootless);
        let text = serde_json::to_string(&spec).unwrap();
        let back: Spec = serde_json::from_str(&text).unwrap();
        assert_eq!(back, spec);
        let c = resolve(&spec, dir.path(), 1).unwrap();
        assert!(c.plan.mounts.contains(&MountOp::ReadonlyRoot));
        assert_eq!(c.plan.has(Namespace::User), rootless);
    }
}

/// Every refusal of the validation step, each with its whole one-line message.
#[test]
fn validation_refuses_with_one_line_each() {
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let unsupported = "not supported by reprorun; remove it from the config (see spec/oci.md)";
    let ns = |c: &mut serde_json::Value, kind: &str| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != kind)
    };
    let cases: Vec<(String, Edit)> = vec![
        (
            r#"ociVersion: "2.0.0": reprorun reads runtime-spec 1.x"#.into(),
            Box::new(|c| c["ociVersion"] = "2.0.0".into()),
        ),
        (
            "process: missing; a container needs a process to run".into(),
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("process");
            }),
        ),
        (
            "process.args: empty; name the program to run".into(),
            Box::new(|c| c["process"]["args"] = serde_json::json!([""])),
        ),
        (
            "process.cwd: must be an absolute path".into(),
            Box::new(|c| c["process"]["cwd"] = "work".into()),
        ),
        (
            format!("process.user.username: {unsupported}"),
            Box::new(|c| c["process"]["user"]["username"] = "alice".into()),
        ),
        (
            "root: missing; name the root filesystem directory".into(),
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("root");
            }),
        ),
        (
            "annotations.org.reprorun.cpus: at most 2 (the CPUs this process may use)".into(),
            Box::new(|c| c["annotations"]["org.reprorun.cpus"] = "3".into()),
        ),
        (
            "linux.maskedPaths: needs a mount namespace of the container's own (runc refuses it too: unable to restrict sys entries without a private MNT namespace)".into(),
            Box::new(move |c| ns(c, "mount")),
        ),
        (
            "hostname: set, but no new uts namespace is asked for".into(),
            Box::new(move |c| ns(c, "uts")),
        ),
        (
            "linux.uidMappings: a new user namespace needs uidMappings and gidMappings".into(),
            Box::new(|c| {
                c["linux"]["namespaces"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"type": "user"}))
            }),
        ),
        (
            "linux.uidMappings: given without a new user namespace".into(),
            Box::new(|c| {
                c["linux"]["gidMappings"] =
                    serde_json::json!([{"containerID": 0, "hostID": 1000, "size": 1}])
            }),
        ),
        (
            "linux.personality.domain: \"FOO\": must be LINUX or LINUX32".into(),
            Box::new(|c| c["linux"]["personality"] = serde_json::json!({"domain": "FOO"})),
        ),
        (
            "mounts: a seeded /dev/urandom (org.reprorun.dev-urandom=seeded) needs a tmpfs mounted at /dev (reprorun puts it there); add one, or leave the annotation out".into(),
            Box::new(|c| {
                c["mounts"].as_array_mut().unwrap().remove(1);
                c["annotations"]["org.reprorun.dev-urandom"] = "seeded".into();
            }),
        ),
        (
            "linux.sysctl.net..x: not a sysctl name".into(),
            Box::new(|c| c["linux"]["sysctl"] = serde_json::json!({"net..x": "1"})),
        ),
        (
            "linux.sysctl.kernel.core_pattern: not a sysctl of a namespace the container has of its own; it would change the host".into(),
            Box::new(|c| c["linux"]["sysctl"] = serde_json::json!({"kernel.core_pattern": "|/x"})),
        ),
        (
            // The caller's own network namespace, joined by path, is the host's here.
            "linux.sysctl.net.ipv4.ping_group_range: not a sysctl of a namespace the container has of its own; it would change the host".into(),
            Box::new(|c| {
                c["linux"]["namespaces"][1] =
                    serde_json::json!({"type": "network", "path": "/proc/self/ns/net"});
            }),
        ),
        (
            format!("hooks.startContainer: {unsupported}"),
            Box::new(|c| c["hooks"] = serde_json::json!({"startContainer": [{"path": "/bin/true"}]})),
        ),
        (
            r#"linux.cgroupsPath: "system.slice:libpod:abc": expected a cgroupfs path without '..' (systemd's slice:prefix:name form needs --systemd-cgroup)"#.into(),
            Box::new(|c| c["linux"]["cgroupsPath"] = "system.slice:libpod:abc".into()),
        ),
    ];
    for (message, mutate) in cases {
        let (dir, mut config) = bundle();
        mutate(&mut config);
        let spec: Spec = serde_json::from_value(config).unwrap();
        let e = validate(&spec, &dir.path(), 2).unwrap_err();
        assert_eq!(e.to_string(), message);
        assert!(!message.contains('\n'));
    }
    // The root must be a directory (its path is the bundle's).
    let (dir, mut config) = bundle();
    config["root"]["path"] = "hosts".into();
    let spec: Spec = serde_json::from_value(config).unwrap();
    assert_eq!(
        validate(&spec, &dir.path(), 2).unwrap_err().to_string(),
        format!("root.path: {}/hosts: not a directory", dir.path().display())
    );
}

/// What containerd's CRI plugin writes for a pod container with requests and limits (cpu:
/// 250m request, 500m limit; 64Mi memory limit): shares, quota/period, memory limit with an
/// equal swap, empty cpuset strings, the device deny-all rule.
#[test]
fn cri_resources_resolve_to_cgroup_limits() {
    let (dir, mut config) = bundle();
    config["linux"]["resources"] = serde_json::json!({
        "devices": [{"allow": false, "access": "rwm"}],
        "memory": {"limit": 67108864, "swap": 67108864},
        "cpu": {"shares": 256, "quota": 50000, "period": 100000, "cpus": "", "mems": ""},
        "pids": {"limit": 0},
        "unified": {}
    });
    let p = resolve_json(&dir.path(), &config).unwrap().plan;
    assert_eq!(p.resources.cpu_shares, Some(256));
    assert_eq!(p.resources.cpu_milli, Some(500));
    assert_eq!(p.resources.memory, Some(64 << 20));
    assert_eq!(p.resources.pids, None);
    // The plan saved by `create` carries the shares for the cgroup code.
    let saved = serde_json::to_value(p.resources).unwrap();
    assert_eq!(saved["cpu_shares"], 256);
}

/// blockIO, hugepageLimits, network, rdma and unified as the cgroup files runc writes.
#[test]
fn block_io_hugepages_network_rdma_and_unified_become_cgroup_files() {
    let (dir, mut config) = bundle();
    config["linux"]["resources"] = serde_json::json!({
        "blockIO": {"weight": 500, "leafWeight": 300,
            "weightDevice": [{"major": 8, "minor": 0, "weight": 200}],
            "throttleReadBpsDevice": [{"major": 254, "minor": 0, "rate": 1048576}],
            "throttleWriteIopsDevice": [{"major": 254, "minor": 0, "rate": 100}]},
        "hugepageLimits": [{"pageSize": "2MB", "limit": 4194304}],
        "network": {"classID": 1048577, "priorities": [{"name": "lo", "priority": 2}]},
        "rdma": {"mlx5_1": {"hcaHandles": 3, "hcaObjects": 10000}},
        "unified": {"memory.high": "1073741824"}
    });
    let r = resolve_json(&dir.path(), &config).unwrap().plan.resources;
    let pairs: Vec<(Option<String>, Option<String>)> = r
        .files
        .iter()
        .map(|f| {
            let show = |p: &Option<(String, String)>| p.as_ref().map(|(n, v)| format!("{n}={v}"));
            (show(&f.v1), show(&f.v2))
        })
        .collect();
    let s = |t: &str| Some(t.to_string());
    assert_eq!(
        pairs,
        [
            (s("blkio.weight=500"), s("io.weight=default 500")),
            (s("blkio.weight_device=8:0 200"), s("io.weight=8:0 200")),
            (
                s("blkio.throttle.read_bps_device=254:0 1048576"),
                s("io.max=254:0 rbps=1048576")
            ),
            (
                s("blkio.throttle.write_iops_device=254:0 100"),
                s("io.max=254:0 wiops=100")
            ),
            (
                s("hugetlb.2MB.limit_in_bytes=4194304"),
                s("hugetlb.2MB.max=4194304")
            ),
            (s("net_cls.classid=1048577"), None),
            (s("net_prio.ifpriomap=lo 2"), None),
            (
                s("rdma.max=mlx5_1 hca_handle=3 hca_object=10000"),
                s("rdma.max=mlx5_1 hca_handle=3 hca_object=10000")
            ),
        ]
    );
    assert_eq!(
        r.unified.get("memory.high").map(String::as_str),
        Some("1073741824")
    );
}

#[test]
fn cpu_shares_are_clamped_to_the_kernels_range_and_zero_is_unset() {
    let (dir, mut config) = bundle();
    for (shares, want) in [
        (0u64, None),
        (1, Some(2)),
        (2, Some(2)),
        (1024, Some(1024)),
        (262_144, Some(262_144)),
        (1_000_000, Some(262_144)),
    ] {
        config["linux"]["resources"]["cpu"] = serde_json::json!({"shares": shares});
        let p = resolve_json(&dir.path(), &config).unwrap().plan;
        assert_eq!(p.resources.cpu_shares, want, "shares {shares}");
    }
    // Not a number the spec allows (a u64): refused by the parser, naming the field.
    config["linux"]["resources"]["cpu"] = serde_json::json!({"shares": -1});
    let err = resolve_json(&dir.path(), &config).unwrap_err();
    assert!(
        err.contains("shares") || err.contains("invalid value"),
        "{err}"
    );
}

#[test]
fn pid_namespaces_joined_or_absent_and_a_joined_uts_namespace_named() {
    let (dir, mut config) = bundle();
    config["linux"]["namespaces"] = serde_json::json!([
        {"type": "mount"}, {"type": "network"}, {"type": "ipc"},
        {"type": "uts", "path": "/proc/1/ns/uts"}
    ]);
    let c = resolve_json(&dir.path(), &config).unwrap();
    assert!(!c.plan.has(Namespace::Pid) && !c.plan.has(Namespace::Uts));
    assert_eq!(c.plan.hostname, "abc123", "set in the joined namespace");
    config["linux"]["namespaces"][0] = serde_json::json!({"type": "pid", "path": "/proc/1/ns/pid"});
    config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "mount"}));
    config.as_object_mut().unwrap().remove("hostname");
    let c = resolve_json(&dir.path(), &config).unwrap();
    assert_eq!(c.plan.join.len(), 2);
    assert_eq!(
        c.plan.hostname, "",
        "a joined namespace's name is left as it is"
    );
}

#[test]
fn resources_become_controller_files_for_each_hierarchy() {
    let (dir, mut config) = bundle();
    config["linux"]["resources"] = serde_json::json!({
        "cpu": {"cpus": "0-1", "mems": "0", "quota": 20000, "period": 50000,
                "realtimePeriod": 1000000, "realtimeRuntime": 950000},
        "memory": {"limit": 1 << 26, "reservation": 1 << 25, "swap": 1 << 27,
                   "swappiness": 10, "disableOOMKiller": true, "kernel": 1 << 26}
    });
    let c = resolve_json(&dir.path(), &config).unwrap();
    let v1: Vec<(String, String)> = c
        .plan
        .resources
        .files
        .iter()
        .filter_map(|f| f.v1.clone())
        .collect();
    let v2: Vec<(String, String)> = c
        .plan
        .resources
        .files
        .iter()
        .filter_map(|f| f.v2.clone())
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    for want in [
        pair("cpuset.cpus", "0-1"),
        pair("cpuset.mems", "0"),
        pair("cpu.cfs_period_us", "50000"),
        pair("cpu.cfs_quota_us", "20000"),
        pair("memory.soft_limit_in_bytes", "33554432"),
        pair("memory.memsw.limit_in_bytes", "134217728"),
        pair("memory.swappiness", "10"),
        pair("memory.oom_control", "1"),
    ] {
        assert!(v1.contains(&want), "{want:?} not in {v1:?}");
    }
    let at = |name: &str| v1.iter().position(|(n, _)| n == name).unwrap();
    assert!(
        at("cpu.rt_period_us") < at("cpu.rt_runtime_us"),
        "the period first"
    );
    for want in [
        pair("cpu.max", "20000 50000"),
        pair("memory.low", "33554432"),
        pair("memory.swap.max", "67108864"),
    ] {
        assert!(v2.contains(&want), "{want:?} not in {v2:?}");
    }
    assert_eq!(c.plan.resources.cpu_milli, Some(400));
}

#[test]
fn selinux_labels_are_ignored_only_where_selinux_is_off() {
    let (dir, mut config) = bundle();
    config["linux"]["mountLabel"] = "system_u:object_r:container_file_t:s0".into();
    config["process"]["selinuxLabel"] = "system_u:system_r:container_t:s0".into();
    let r = resolve_json(&dir.path(), &config);
    if Path::new("/sys/fs/selinux/enforce").exists() {
        assert!(r.unwrap_err().contains("not supported by reprorun"));
    } else {
        assert!(r.is_ok(), "{:?}", r.err());
    }
}

#[test]
fn a_capability_the_caller_lacks_is_named_at_create() {
    let sets = crate::security::CapSets {
        bounding: vec!["CAP_SYS_ADMIN".into()],
        effective: vec!["CAP_KILL".into()],
        permitted: vec!["CAP_KILL".into()],
        inheritable: vec!["CAP_KILL".into(), "CAP_NET_ADMIN".into()],
        ambient: Vec::new(),
        allow_new_privs: false,
    };
    let held = ["CAP_KILL".to_string()];
    assert_eq!(
        super::unraisable(&sets, &held).unwrap_err().to_string(),
        "process.capabilities.inheritable: CAP_NET_ADMIN cannot be raised: the caller of reprorun does not have it"
    );
    // The bounding set only limits: a capability missing there is no error.
    let held = ["CAP_KILL".to_string(), "CAP_NET_ADMIN".to_string()];
    assert!(super::unraisable(&sets, &held).is_ok());
}

/// The idmapped bind of `config`'s last mount.
fn last_idmap(
    dir: &Path,
    config: &serde_json::Value,
) -> Result<crate::plan::mounts::MountIdmap, String> {
    let c = resolve_json(dir, config)?;
    c.plan
        .mounts
        .iter()
        .rev()
        .find_map(|m| match m {
            MountOp::FlagBind { idmap: Some(i), .. } => Some(i.clone()),
            _ => None,
        })
        .ok_or_else(|| "no idmapped bind".to_string())
}

#[test]
fn idmapped_binds_carry_their_mapping_in_the_plan() {
    use crate::plan::IdMap;
    let (dir, mut config) = bundle();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // The mount's own mappings (no option: runc's non-recursive idmap).
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/data", "type": "bind", "source": "data", "options": ["rbind"],
            "uidMappings": [{"containerID": 1000, "hostID": 100000, "size": 1},
                            {"containerID": 0, "hostID": 200000, "size": 1000}],
            "gidMappings": [{"containerID": 1000, "hostID": 100000, "size": 1}]
        }));
    let c = resolve_json(&dir.path(), &config).unwrap();
    let bind = c
        .plan
        .mounts
        .iter()
        .find(|m| m.dest() == Some(Path::new("/data")))
        .unwrap();
    let want = MountOp::FlagBind {
        src: data.clone(),
        dest: "/data".into(),
        recursive: true,
        flags: Vec::new(),
        idmap: Some(crate::plan::mounts::MountIdmap {
            uid: vec![IdMap::new(1000, 100000, 1), IdMap::new(0, 200000, 1000)],
            gid: vec![IdMap::new(1000, 100000, 1)],
            userns: None,
            recursive: false,
        }),
    };
    assert_eq!(bind, &want);
    // The plan prints it and reads it back.
    let text = serde_json::to_string(bind).unwrap();
    assert!(
        text.contains(r#""idmap":{"uid":[{"inside":1000,"outside":100000,"count":1}"#),
        "{text}"
    );
    assert_eq!(&serde_json::from_str::<MountOp>(&text).unwrap(), bind);
    // A plain bind prints no idmap field.
    let mut plain = want.clone();
    if let MountOp::FlagBind { idmap, .. } = &mut plain {
        *idmap = None;
    }
    assert!(!serde_json::to_string(&plain).unwrap().contains("idmap"));
    // `ridmap`: recursive; with `idmap` too, the recursive one wins.
    let last = config["mounts"].as_array_mut().unwrap().last_mut().unwrap();
    last["options"] = serde_json::json!(["rbind", "idmap", "ridmap", "idmap"]);
    assert!(last_idmap(&dir.path(), &config).unwrap().recursive);
}

#[test]
fn a_bare_idmap_option_takes_the_containers_mapping() {
    use crate::plan::IdMap;
    let (dir, mut config) = bundle();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/data", "type": "bind", "source": "data", "options": ["bind", "idmap"]
        }));
    // No user namespace: nothing to take the mapping from.
    let e = resolve_json(&dir.path(), &config).unwrap_err();
    assert_eq!(
        e,
        "mounts[5]: option \"idmap\" without uidMappings and gidMappings takes the container's user namespace mapping, and the container has no user namespace; give the mount uidMappings and gidMappings"
    );
    // A new user namespace: its maps.
    config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "user"}));
    config["linux"]["uidMappings"] =
        serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
    config["linux"]["gidMappings"] =
        serde_json::json!([{"containerID": 0, "hostID": 300000, "size": 65536}]);
    let m = last_idmap(&dir.path(), &config).unwrap();
    assert_eq!(m.uid, [IdMap::new(0, 100000, 65536)]);
    assert_eq!(m.gid, [IdMap::new(0, 300000, 65536)]);
    assert!(!m.recursive && m.userns.is_none());
    // A user namespace joined by path: that namespace.
    let (dir, mut config) = bundle();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/data", "type": "bind", "source": "data", "options": ["rbind", "ridmap"]
        }));
    config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "user", "path": "/proc/1/ns/user"}));
    let m = last_idmap(&dir.path(), &config).unwrap();
    assert_eq!(m.userns.as_deref(), Some(Path::new("/proc/1/ns/user")));
    assert!(m.uid.is_empty() && m.recursive);
}

/// Mappings the kernel would refuse, refused at create with one line naming the mount.
#[test]
fn bad_mount_mappings_are_refused_naming_the_mount() {
    let map =
        |c: u32, h: u32, n: u32| serde_json::json!({"containerID": c, "hostID": h, "size": n});
    let one = serde_json::json!([map(0, 100000, 1)]);
    let cases: Vec<(serde_json::Value, serde_json::Value, Vec<&str>, &str)> = vec![
        (one.clone(), serde_json::json!([]), vec!["bind"], "uidMappings and gidMappings must be given together"),
        (serde_json::json!([map(0, 100000, 0)]), one.clone(), vec!["bind"], "uidMappings[0]: size must be at least 1"),
        (
            serde_json::json!([map(4294967000, 0, 1000)]),
            one.clone(),
            vec!["bind"],
            "uidMappings[0]: containerID 4294967000 + size 1000 goes past the largest id, 4294967294",
        ),
        (
            one.clone(),
            serde_json::json!([map(0, 4294967295, 1)]),
            vec!["bind"],
            "gidMappings[0]: hostID 4294967295 + size 1 goes past the largest id, 4294967294",
        ),
        (
            serde_json::json!([map(0, 100000, 10), map(5, 200000, 10)]),
            one.clone(),
            vec!["bind"],
            "uidMappings[0] and uidMappings[1]: their containerID ranges overlap",
        ),
        (
            one.clone(),
            serde_json::json!([map(0, 100000, 10), map(20, 100009, 1)]),
            vec!["bind"],
            "gidMappings[0] and gidMappings[1]: their hostID ranges overlap",
        ),
        (
            serde_json::Value::Array((0..341).map(|i| map(i, 100000 + i, 1)).collect()),
            one.clone(),
            vec!["bind"],
            "uidMappings: 341 ranges; the kernel takes at most 340",
        ),
        (
            one.clone(),
            one.clone(),
            vec!["bind", "idmap=uids=0-1-10;gids=0-1-10"],
            "option \"idmap=uids=0-1-10;gids=0-1-10\" (crun's inline mapping) is not supported; give uidMappings and gidMappings",
        ),
    ];
    for (uid, gid, options, message) in cases {
        let (dir, mut config) = bundle();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        config["mounts"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "destination": "/data", "type": "bind", "source": "data", "options": options,
                "uidMappings": uid, "gidMappings": gid
            }));
        let e = resolve_json(&dir.path(), &config).unwrap_err();
        assert_eq!(e, format!("mounts[5]: {message}"));
    }
    // Not a bind: refused.
    let (dir, mut config) = bundle();
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/data", "type": "tmpfs", "source": "tmpfs",
            "uidMappings": one, "gidMappings": one
        }));
    assert_eq!(
        resolve_json(&dir.path(), &config).unwrap_err(),
        "mounts[5]: uidMappings, gidMappings, idmap and ridmap apply to bind mounts only (options bind or rbind)"
    );
    // The largest range that fits is taken.
    let (dir, mut config) = bundle();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let all = serde_json::json!([map(0, 0, 4294967295)]);
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/data", "type": "bind", "source": "data", "options": ["bind"],
            "uidMappings": all, "gidMappings": all
        }));
    assert_eq!(
        last_idmap(&dir.path(), &config).unwrap().uid[0].count,
        u32::MAX
    );
}

#[test]
fn idmapped_mounts_are_counted_in_config_order() {
    let m = |options: &[&str], mapped: bool| spec::Mount {
        destination: "/x".into(),
        kind: Some("bind".into()),
        source: Some("/x".into()),
        options: options.iter().map(|o| o.to_string()).collect(),
        uid_mappings: match mapped {
            true => vec![spec::IdMapping {
                container_id: 0,
                host_id: 1,
                size: 1,
            }],
            false => Vec::new(),
        },
        gid_mappings: Vec::new(),
    };
    assert!(!is_idmapped(&m(&["rbind"], false)));
    assert!(is_idmapped(&m(&["rbind", "idmap"], false)));
    assert!(is_idmapped(&m(&["ridmap"], false)));
    assert!(is_idmapped(&m(&["bind"], true)));
}

#[test]
fn idmapped_mounts_need_a_mount_namespace_not_joined_by_path() {
    let (dir, mut config) = bundle();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let one = serde_json::json!([{"containerID": 0, "hostID": 1000, "size": 1}]);
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/data", "type": "bind", "source": "data", "options": ["bind"],
            "uidMappings": one, "gidMappings": one
        }));
    for n in config["linux"]["namespaces"].as_array_mut().unwrap() {
        if n["type"] == "mount" {
            n["path"] = "/proc/1/ns/mnt".into();
        }
    }
    assert_eq!(
        resolve_json(&dir.path(), &config).unwrap_err(),
        "mounts[5]: idmapped mounts in a container that joins a mount namespace by path are not supported"
    );
}

/// `org.reprorun.net.upstream-ca` follows the host-path rule: a link in any component (one a
/// run could have planted) is refused at `create`, not read by the monitor.
#[test]
fn an_upstream_ca_annotation_through_a_link_is_refused() {
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("ca.pem"), "x").unwrap();
    std::os::unix::fs::symlink(host.path(), host.path().join("linked")).unwrap();
    std::os::unix::fs::symlink("ca.pem", host.path().join("ca-link.pem")).unwrap();
    for planted in ["linked/ca.pem", "ca-link.pem"] {
        let (dir, mut config) = bundle();
        config["annotations"]["org.reprorun.net.record"] = "/srv/cassette".into();
        let path = host.path().join(planted);
        config["annotations"]["org.reprorun.net.upstream-ca"] = path.to_str().unwrap().into();
        let e = resolve_json(&dir.path(), &config).unwrap_err().to_string();
        assert!(
            e.starts_with("annotations.org.reprorun.net.upstream-ca:") && e.contains("link"),
            "{planted}: {e}"
        );
    }
    let (dir, mut config) = bundle();
    config["annotations"]["org.reprorun.net.record"] = "/srv/cassette".into();
    let real = host.path().join("ca.pem");
    config["annotations"]["org.reprorun.net.upstream-ca"] = real.to_str().unwrap().into();
    assert!(resolve_json(&dir.path(), &config).is_ok());
}
