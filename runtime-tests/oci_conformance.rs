//! OCI conformance (issue 19): configs that runc and crun run are run the same way.

use crate::common::*;
use crate::oci::Bundle;

// The host's cgroup layout, which no set-up changes (and tests must not remount): a CI
// machine booted with cgroup v2 alone has none of these, so the tests needing them may skip
// there even under REPRORUN_STRICT_SKIPS=1 (`require!(optional: ..)`), saying so.
const HYBRID_UNIFIED: Need = Need::Path(
    "/sys/fs/cgroup/unified/cgroup.controllers",
    "a hybrid cgroup layout (v2 at /sys/fs/cgroup/unified beside v1)",
);
const V1_DEVICES: Need = Need::Path(
    "/sys/fs/cgroup/devices/devices.list",
    "the cgroup v1 devices controller",
);
const V1_MEMORY: Need = Need::Path(
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    "the cgroup v1 memory controller",
);
const V1_CPUSET: Need = Need::Path(
    "/sys/fs/cgroup/cpuset/cpuset.cpus",
    "the cgroup v1 cpuset controller",
);

/// The capability sets of `/proc/self/status` lines, as printed by `grep ^Cap`.
fn cap_bit(status: &str, set: &str, bit: u32) -> bool {
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{set}:")))
        .unwrap_or_else(|| panic!("no {set} in {status}"));
    let hex = line.split_whitespace().nth(1).unwrap();
    u64::from_str_radix(hex, 16).unwrap() & (1 << bit) != 0
}

const CAP_MKNOD: u32 = 27;

#[test]
fn oci_unknown_config_fields_are_ignored_unless_strict() {
    require!(Need::Root);
    let newer = |c: &mut serde_json::Value| {
        c["vendorExtension"] = serde_json::json!({"x": 1});
        c["process"]["futureField"] = true.into();
        c["linux"]["resources"] = serde_json::json!({"pids": {"limit": 100, "futurePids": 1}});
    };
    let b = Bundle::new(&["echo", "ran"], newer);
    assert_eq!(expect_code(&b.run(&["run", "u1"]), 0), "ran\n");
    let b = Bundle::new(&["echo", "ran"], |c| {
        newer(c);
        c["annotations"] = serde_json::json!({"org.reprorun.strict": "true"});
    });
    expect_error(
        &b.run(&["run", "u2"]),
        "unknown fields linux.resources.pids.futurePids, process.futureField, vendorExtension",
    );
    assert!(!b.state.join("u2").exists());
    // A bad value of the annotation is refused, not taken as false.
    let b = Bundle::new(&["true"], |c| {
        c["annotations"] = serde_json::json!({"org.reprorun.strict": "yes"});
    });
    expect_error(&b.run(&["run", "u3"]), "org.reprorun.strict");
}

#[test]
fn oci_capabilities_apply_as_given_and_the_device_cgroup_guards_nodes() {
    require!(Need::Root);
    let all = [
        "CAP_MKNOD",
        "CAP_CHOWN",
        "CAP_SETUID",
        "CAP_SETGID",
        "CAP_SETPCAP",
    ];
    let b = Bundle::new(
        &[
            "sh",
            "-c",
            "grep ^Cap /proc/self/status; mknod /dev/disk0 b 8 0 && echo made; \
             head -c1 /dev/disk0 >/dev/null 2>/tmp/err || cat /tmp/err; \
             head -c1 /dev/zero | od -An -tx1",
        ],
        |c| {
            let sets: serde_json::Value = all.into();
            c["process"]["capabilities"] = serde_json::json!({
                "bounding": sets, "effective": sets, "permitted": sets, "inheritable": sets,
                "ambient": sets,
            });
            c["annotations"] = serde_json::json!({"org.reprorun.determinism": "off"});
        },
    );
    let out = expect_code(&b.run(&["run", "k1"]), 0);
    for set in ["CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"] {
        assert!(
            cap_bit(&out, set, CAP_MKNOD),
            "{set} lacks CAP_MKNOD: {out}"
        );
    }
    // mknod is allowed (runc's `b *:* m`), using a host disk's node is not.
    assert!(out.contains("made\n"), "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(out.contains(" 00\n"), "/dev/zero works: {out}");

    // linux.resources.devices rules reach the container's v1 device cgroup, in order after
    // a deny of everything.
    let b = Bundle::new(&["sh", "-c", "cat /proc/self/cgroup"], |c| {
        c["linux"]["resources"] = serde_json::json!({"devices": [
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "b", "major": 8, "minor": 20, "access": "rw"},
        ]});
        c["linux"]["cgroupsPath"] = "/reprorun-test-devices".into();
    });
    // The rules' case needs the v1 device controller.
    require!(optional: V1_DEVICES);
    let o = b.run(&["create", "d1"]);
    expect_code(&o, 0);
    let list = std::fs::read_to_string("/sys/fs/cgroup/devices/reprorun-test-devices/devices.list")
        .unwrap();
    expect_code(&b.run(&["delete", "--force", "d1"]), 0);
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines.contains(&"b 8:20 rw"), "{list}");
    assert!(lines.contains(&"c 1:3 rwm"), "{list}");
    assert!(!lines.contains(&"a *:* rwm"), "{list}");
}

#[test]
fn oci_no_new_privileges_follows_the_config() {
    require!(Need::Root);
    for (nnp, annotation, determinism, want) in [
        (false, None, "on", "0"),
        (false, None, "off", "0"),
        (true, None, "on", "1"),
        (false, Some("true"), "on", "1"),
    ] {
        let b = Bundle::new(
            &["sh", "-c", "grep ^NoNewPrivs /proc/self/status; date +%Y"],
            |c| {
                c["process"]["noNewPrivileges"] = nnp.into();
                c["annotations"] = serde_json::json!({"org.reprorun.determinism": determinism});
                if let Some(v) = annotation {
                    c["annotations"]["org.reprorun.no-new-privileges"] = v.into();
                }
            },
        );
        let out = expect_code(&b.run(&["run", "n1"]), 0);
        let line = out.lines().next().unwrap_or_default();
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(want),
            "nnp {nnp} annotation {annotation:?} determinism {determinism}: {out}"
        );
        if determinism == "on" {
            // The determinism layer's filters are in place either way.
            assert!(out.ends_with("2024\n"), "{out}");
        }
    }
}

#[test]
fn oci_dev_random_and_urandom_are_char_devices_unless_seeded_is_asked() {
    require!(Need::Root);
    let script = "stat -c '%F %t:%T' /dev/random /dev/urandom; head -c8 /dev/urandom | od -An -tx1";
    let b = Bundle::new(&["sh", "-c", script], |_| {});
    let out = expect_code(&b.run(&["run", "r1"]), 0);
    assert!(
        out.starts_with("character special file 1:8\ncharacter special file 1:9\n"),
        "{out}"
    );
    let seeded = |id: &str| {
        let b = Bundle::new(&["sh", "-c", script], |c| {
            c["annotations"] = serde_json::json!({"org.reprorun.dev-urandom": "seeded"});
        });
        expect_code(&b.run(&["run", id]), 0)
    };
    let (a, b2) = (seeded("s1"), seeded("s2"));
    assert!(a.contains("fifo"), "{a}");
    assert_eq!(a, b2, "the seeded stream repeats");
    let b = Bundle::new(&["true"], |c| {
        c["annotations"] = serde_json::json!({"org.reprorun.dev-urandom": "yes"});
    });
    expect_error(&b.run(&["run", "s3"]), "org.reprorun.dev-urandom");
}

/// Waits (up to 20 s) for `path` to exist.
fn wait_for(path: &std::path::Path) -> bool {
    for _ in 0..2000 {
        if path.exists() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

#[test]
fn oci_start_returns_once_the_program_runs_and_real_time_signals_reach_it() {
    require!(Need::Root);
    let b = Bundle::new(
        &[
            "sh",
            "-c",
            "trap 'touch /shared/rt' 36; touch /shared/ready; while :; do sleep 1; done",
        ],
        |_| {},
    );
    let pid_file = b.work.path().join("pid");
    expect_code(
        &b.run(&["create", "--pid-file", pid_file.to_str().unwrap(), "s1"]),
        0,
    );
    expect_code(&b.run(&["start", "s1"]), 0);
    // When start returns, init's child is the program (busybox), no longer reprorun.
    let init: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let children = std::fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap();
    let child = children
        .split_whitespace()
        .next()
        .expect("init has a child");
    let exe = std::fs::read_link(format!("/proc/{child}/exe")).unwrap();
    assert!(exe.ends_with("busybox"), "{exe:?}");
    assert!(wait_for(&b.shared().join("ready")));
    // A real-time signal, by number and by name, is passed on to the program.
    expect_code(&b.run(&["kill", "s1", "36"]), 0);
    assert!(wait_for(&b.shared().join("rt")), "signal 36 not forwarded");
    std::fs::remove_file(b.shared().join("rt")).unwrap();
    // RTMIN is 34, as runc numbers it.
    let name = "RTMIN+2".to_string();
    expect_code(&b.run(&["kill", "s1", &name]), 0);
    assert!(wait_for(&b.shared().join("rt")), "{name} not forwarded");
    expect_error(&b.run(&["kill", "s1", "RTMAX+1"]), "signal");
    expect_code(&b.run(&["delete", "--force", "s1"]), 0);
}

#[test]
fn oci_root_propagation_shared_and_a_user_namespace_without_host_root() {
    require!(Need::Root);
    for p in ["shared", "slave", "private", "unbindable"] {
        let b = Bundle::new(
            &[
                "sh",
                "-c",
                "grep -E '^[0-9]+ [0-9]+ [0-9:]+ [^ ]+ / ' /proc/self/mountinfo",
            ],
            |c| {
                c["linux"]["rootfsPropagation"] = p.into();
            },
        );
        let out = expect_code(&b.run(&["run", "p1"]), 0);
        let tag = match p {
            "shared" => Some("shared:"),
            // A slave of a private mount (the whole tree was made private first) is private.
            "unbindable" => Some("unbindable"),
            _ => None,
        };
        match tag {
            Some(t) => assert!(out.contains(t), "{p}: {out}"),
            None => assert!(
                !out.contains("shared:") && !out.contains("master:"),
                "{out}"
            ),
        }
    }
    // Container root is host uid 1000 (gids mapped apart): the root filesystem belongs to
    // the host's root, which is unmapped there.
    let b = Bundle::new(
        &[
            "sh",
            "-c",
            "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; date +%Y",
        ],
        |c| {
            c["linux"]["namespaces"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"type": "user"}));
            c["linux"]["uidMappings"] = serde_json::json!([
                {"containerID": 0, "hostID": 1000, "size": 100},
                {"containerID": 100, "hostID": 5000, "size": 10}
            ]);
            c["linux"]["gidMappings"] =
                serde_json::json!([{"containerID": 0, "hostID": 2000, "size": 200}]);
        },
    );
    let out = expect_code(&b.run(&["run", "m1"]), 0);
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(&words[..2], ["0", "0"], "{out}");
    assert_eq!(&words[2..5], ["0", "1000", "100"], "{out}");
    assert_eq!(&words[5..8], ["100", "5000", "10"], "{out}");
    assert_eq!(&words[8..11], ["0", "2000", "200"], "{out}");
    assert_eq!(
        words.last(),
        Some(&"2024"),
        "the determinism layer is in place: {out}"
    );
}

#[test]
fn oci_tmpcopyup_and_bind_data_options_as_runc_takes_them() {
    require!(Need::Root);
    let b = Bundle::new(
        &[
            "sh",
            "-c",
            "cat /etc/passwd; touch /etc/new && echo writable; stat -c %a /data",
        ],
        |c| {
            c["root"]["readonly"] = true.into();
            let mounts = c["mounts"].as_array_mut().unwrap();
            mounts.push(serde_json::json!({
                "destination": "/etc", "type": "tmpfs", "source": "tmpfs",
                "options": ["rw", "nosuid", "nodev", "tmpcopyup", "mode=755", "size=1m",
                            "nr_inodes=1k", "strictatime", "nosymfollow"]
            }));
            mounts.push(serde_json::json!({
                "destination": "/data", "type": "bind", "source": "shared",
                "options": ["rbind", "rprivate", "mode=755", "uid=0"]
            }));
            c["annotations"] = serde_json::json!({"org.reprorun.determinism": "off"});
        },
    );
    let out = expect_code(&b.run(&["run", "t1"]), 0);
    assert!(
        out.starts_with("root:x:0:0:root:/:/bin/sh\nwritable\n"),
        "{out}"
    );
    // The image's /etc is untouched.
    assert!(!b.work.path().join("rootfs/etc/new").exists());
    // tmpcopyup on anything but a tmpfs is refused, naming the mount.
    let b = Bundle::new(&["true"], |c| {
        c["mounts"].as_array_mut().unwrap().push(serde_json::json!({
            "destination": "/data", "type": "bind", "source": "shared",
            "options": ["rbind", "tmpcopyup"]
        }));
    });
    expect_error(&b.run(&["run", "t2"]), "tmpcopyup");
}

#[test]
fn oci_namespaces_joined_by_path_and_a_hostname_set_in_a_joined_uts() {
    require!(Need::Root);
    let a = Bundle::new(&["sleep", "1000"], |_| {});
    let a_pid_file = a.work.path().join("pid");
    expect_code(
        &a.run(&["create", "--pid-file", a_pid_file.to_str().unwrap(), "a1"]),
        0,
    );
    let a_pid = std::fs::read_to_string(&a_pid_file).unwrap();
    let b = Bundle::new(
        &["sh", "-c", "hostname > /shared/name; exec sleep 1001"],
        |c| {
            for ns in c["linux"]["namespaces"].as_array_mut().unwrap() {
                if ns["type"] == "pid" || ns["type"] == "uts" {
                    let kind = if ns["type"] == "pid" { "pid" } else { "uts" };
                    ns["path"] = format!("/proc/{a_pid}/ns/{kind}").into();
                }
            }
            c["hostname"] = "joined".into();
        },
    );
    let b_pid_file = b.work.path().join("pid");
    expect_code(
        &b.run(&["create", "--pid-file", b_pid_file.to_str().unwrap(), "b1"]),
        0,
    );
    let b_pid = std::fs::read_to_string(&b_pid_file).unwrap();
    let ns = |pid: &str, kind: &str| std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap();
    assert_eq!(ns(&a_pid, "pid_for_children"), ns(&b_pid, "pid"));
    assert_eq!(ns(&a_pid, "uts"), ns(&b_pid, "uts"));
    assert_ne!(ns(&a_pid, "mnt"), ns(&b_pid, "mnt"));
    expect_code(&b.run(&["start", "b1"]), 0);
    assert!(wait_for(&b.shared().join("name")));
    assert!(wait_for_text(&b.shared().join("name"), "joined\n"));
    // delete --force ends B's processes (its init is not pid 1 of a namespace of its own).
    expect_code(&b.run(&["delete", "--force", "b1"]), 0);
    let sleeping = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x001001\x00")
        })
    };
    let mut gone = false;
    for _ in 0..2000 {
        if !sleeping() {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(gone, "the container's program outlived delete --force");
    expect_code(&a.run(&["delete", "--force", "a1"]), 0);
    // A mount namespace joined by path (a copy of the host's, held by a helper): the root
    // is built there (runc's behaviour).
    let mut helper = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sleep", "1000"])
        .spawn()
        .unwrap();
    let helper_pid = helper.id().to_string();
    let host_mnt = ns("self", "mnt");
    let mut separate = false;
    for _ in 0..2000 {
        if ns(&helper_pid, "mnt") != host_mnt {
            separate = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(separate, "the helper's mount namespace");
    let c = Bundle::new(&["sleep", "1002"], |c| {
        for ns in c["linux"]["namespaces"].as_array_mut().unwrap() {
            if ns["type"] == "mount" {
                ns["path"] = format!("/proc/{helper_pid}/ns/mnt").into();
            }
        }
    });
    let c_pid_file = c.work.path().join("pid");
    expect_code(
        &c.run(&["create", "--pid-file", c_pid_file.to_str().unwrap(), "c1"]),
        0,
    );
    let c_pid = std::fs::read_to_string(&c_pid_file).unwrap();
    let joined = ns(&helper_pid, "mnt") == ns(&c_pid, "mnt");
    expect_code(&c.run(&["delete", "--force", "c1"]), 0);
    let _ = helper.kill();
    let _ = helper.wait();
    assert!(
        joined,
        "the container's init is in the joined mount namespace"
    );
}

/// Waits (up to 20 s) for the file at `path` to read `text`.
fn wait_for_text(path: &std::path::Path, text: &str) -> bool {
    for _ in 0..2000 {
        if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

#[test]
fn oci_resources_cpuset_and_memory_fields_reach_the_cgroup() {
    require!(Need::Root);
    require!(optional: V1_CPUSET);
    let b = Bundle::new(&["sleep", "1000"], |c| {
        c["linux"]["cgroupsPath"] = "/reprorun-test-res/c1".into();
        c["linux"]["resources"] = serde_json::json!({
            "cpu": {"cpus": "0", "mems": "0", "quota": 20000, "period": 50000},
            "memory": {"limit": 1 << 26, "reservation": 1 << 25, "swappiness": 10}
        });
    });
    expect_code(&b.run(&["create", "r1"]), 0);
    let read = |f: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}")).map(|s| s.trim().to_string())
    };
    let got = [
        read("cpuset/reprorun-test-res/c1/cpuset.cpus"),
        read("cpuset/reprorun-test-res/c1/cpuset.mems"),
        read("cpu/reprorun-test-res/c1/cpu.cfs_period_us"),
        read("cpu/reprorun-test-res/c1/cpu.cfs_quota_us"),
        read("memory/reprorun-test-res/c1/memory.soft_limit_in_bytes"),
        read("memory/reprorun-test-res/c1/memory.swappiness"),
    ];
    expect_code(&b.run(&["delete", "--force", "r1"]), 0);
    let _ = std::fs::remove_dir("/sys/fs/cgroup/cpuset/reprorun-test-res");
    let _ = std::fs::remove_dir("/sys/fs/cgroup/cpu/reprorun-test-res");
    let _ = std::fs::remove_dir("/sys/fs/cgroup/memory/reprorun-test-res");
    let got: Vec<String> = got.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, ["0", "0", "50000", "20000", "33554432", "10"]);
}

#[test]
fn oci_without_a_mount_namespace_the_root_is_built_in_place_and_chrooted_as_runc_does() {
    require!(Need::Root, Need::Tool("nsenter"));
    let no_mount_ns = |c: &mut serde_json::Value| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "mount");
    };
    // As runc: masked or read-only paths need a mount namespace of the container's own.
    let b = Bundle::new(&["true"], |c| {
        no_mount_ns(c);
        c["linux"]["maskedPaths"] = serde_json::json!(["/proc/kcore"]);
    });
    expect_error(
        &b.run(&["create", "m0"]),
        "linux.maskedPaths: needs a mount namespace of the container's own",
    );
    let b = Bundle::new(&["sh", "-c", "ls / > /shared/ls; exec sleep 1000"], |c| {
        no_mount_ns(c);
        let linux = c["linux"].as_object_mut().unwrap();
        linux.remove("maskedPaths");
        linux.remove("readonlyPaths");
    });
    // The caller's mount namespace is a private copy of the host's, so that nothing the
    // container mounts stays on the host.
    let pid_file = b.work.path().join("pid");
    let o = b.run_under(
        &["unshare", "--mount", "--propagation", "private"],
        &["create", "--pid-file", pid_file.to_str().unwrap(), "m1"],
    );
    expect_code(&o, 0);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let rootfs = std::fs::canonicalize(b.work.path().join("rootfs")).unwrap();
    // The config's mounts are in the caller's mount namespace, at the bundle's paths.
    let o = std::process::Command::new("nsenter")
        .arg(format!("--mount=/proc/{pid}/ns/mnt"))
        .args(["cat", "/proc/self/mountinfo"])
        .output()
        .unwrap();
    let mountinfo = expect_code(&o, 0);
    let proc_at = rootfs.join("proc");
    let landed = mountinfo.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.len() > 4 && std::path::Path::new(f[4]) == proc_at && l.contains(" - proc ")
    });
    expect_code(&b.run(&["start", "m1"]), 0);
    assert!(wait_for(&b.shared().join("ls")));
    // A process executed into it is chrooted to the container's root as well.
    let o = b.run(&["exec", "m1", "ls", "/"]);
    let exec_ls = expect_code(&o, 0);
    expect_code(&b.run(&["delete", "--force", "m1"]), 0);
    assert!(
        landed,
        "no proc mount at {}: {mountinfo}",
        proc_at.display()
    );
    for ls in [
        std::fs::read_to_string(b.shared().join("ls")).unwrap(),
        exec_ls,
    ] {
        let names: Vec<&str> = ls.lines().collect();
        assert!(names.contains(&"shared") && !names.contains(&"usr"), "{ls}");
    }
}

#[test]
fn oci_user_network_ipc_and_time_namespaces_joined_by_path() {
    require!(
        Need::Root,
        Need::Path("/proc/self/ns/time", "time namespaces (Linux 5.6)")
    );
    // A: a container whose user namespace maps its root to host uid 1000.
    let a = Bundle::new(&["sleep", "1000"], |c| {
        c["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        c["linux"]["uidMappings"] =
            serde_json::json!([{"containerID": 0, "hostID": 1000, "size": 100}]);
        c["linux"]["gidMappings"] =
            serde_json::json!([{"containerID": 0, "hostID": 2000, "size": 100}]);
    });
    let a_pid_file = a.work.path().join("pid");
    expect_code(
        &a.run(&["create", "--pid-file", a_pid_file.to_str().unwrap(), "ua"]),
        0,
    );
    let a_pid = std::fs::read_to_string(&a_pid_file).unwrap();
    // A time namespace held by a helper (its forked `sleep` killed with it: no process is
    // left behind to hold the test's output open).
    let mut clock = std::process::Command::new("unshare")
        .args(["--time", "--fork", "--kill-child", "sleep", "1000"])
        .spawn()
        .unwrap();
    let ns = |pid: &str, kind: &str| std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok();
    let mut time_pid = None;
    for _ in 0..2000 {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", clock.id()))
            .unwrap_or_default();
        if let Some(p) = children.split_whitespace().next() {
            if ns(p, "time") != ns("self", "time") {
                time_pid = Some(p.to_string());
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let time_pid = time_pid.expect("the helper's time namespace");
    // B joins A's user, network and ipc namespaces and the helper's time namespace; its
    // mount, pid and uts namespaces are new (and belong to the joined user namespace).
    let b = Bundle::new(&["sh", "-c", "id -u > /shared/id; exec sleep 1001"], |c| {
        for n in c["linux"]["namespaces"].as_array_mut().unwrap() {
            match n["type"].as_str().unwrap() {
                "network" => n["path"] = format!("/proc/{a_pid}/ns/net").into(),
                "ipc" => n["path"] = format!("/proc/{a_pid}/ns/ipc").into(),
                _ => {}
            }
        }
        let list = c["linux"]["namespaces"].as_array_mut().unwrap();
        list.push(serde_json::json!({"type": "user", "path": format!("/proc/{a_pid}/ns/user")}));
        list.push(serde_json::json!({"type": "time", "path": format!("/proc/{time_pid}/ns/time")}));
    });
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(b.shared(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let b_pid_file = b.work.path().join("pid");
    let o = b.run(&["create", "--pid-file", b_pid_file.to_str().unwrap(), "ub"]);
    let created = o.status.success();
    let b_pid = std::fs::read_to_string(&b_pid_file).unwrap_or_default();
    let same: Vec<bool> = [
        (&a_pid, "user"),
        (&a_pid, "net"),
        (&a_pid, "ipc"),
        (&time_pid, "time"),
    ]
    .iter()
    .map(|(p, kind)| created && ns(p, kind) == ns(&b_pid, kind))
    .collect();
    let new_mount = created && ns(&a_pid, "mnt") != ns(&b_pid, "mnt");
    let mut id = None;
    if created {
        expect_code(&b.run(&["start", "ub"]), 0);
        if wait_for_text(&b.shared().join("id"), "0\n") {
            use std::os::unix::fs::MetadataExt;
            id = std::fs::metadata(b.shared().join("id"))
                .ok()
                .map(|m| m.uid());
        }
    }
    let _ = b.run(&["delete", "--force", "ub"]);
    let _ = a.run(&["delete", "--force", "ua"]);
    let _ = clock.kill();
    let _ = clock.wait();
    expect_code(&o, 0);
    assert_eq!(same, [true; 4], "user, net, ipc, time joined");
    assert!(new_mount);
    assert_eq!(
        id,
        Some(1000),
        "root of the joined user namespace, host uid 1000"
    );
}

#[test]
fn oci_device_rules_on_cgroup_v2_are_a_bpf_program() {
    require!(Need::Root);
    require!(optional: HYBRID_UNIFIED, V1_DEVICES);
    // This host is hybrid: with the v1 device controller unmounted (in a private mount
    // namespace) the container's cgroup is made on the v2 hierarchy, where the rules are a
    // BPF program. /dev/fuse (10:229, which the host lets root open): mknod is allowed
    // (runc's `c *:* m`), opening it is not, unless linux.resources.devices allows it; /dev/zero
    // (runc's defaults) opens.
    let script = "cat /proc/self/cgroup; mknod /dev/f0 c 10 229 && echo made; \
                  (: < /dev/f0) 2>/tmp/err && echo opened || cat /tmp/err; \
                  head -c1 /dev/zero | od -An -tx1";
    let config = |fuse: bool| {
        move |c: &mut serde_json::Value| {
            let sets: serde_json::Value = ["CAP_MKNOD", "CAP_DAC_OVERRIDE"].into();
            c["process"]["capabilities"] = serde_json::json!({
                "bounding": sets, "effective": sets, "permitted": sets,
            });
            c["linux"]["cgroupsPath"] = "/reprorun-test-bpf-devices".into();
            if fuse {
                c["linux"]["resources"] = serde_json::json!({"devices": [
                    {"allow": true, "type": "c", "major": 10, "minor": 229, "access": "r"}
                ]});
            }
        }
    };
    let mut outs = Vec::new();
    for fuse in [false, true] {
        let b = Bundle::new(&["sh", "-c", script], config(fuse));
        let o = b.run_under(
            &[
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "umount /sys/fs/cgroup/devices && exec \"$0\" \"$@\"",
            ],
            &["run", "v2d"],
        );
        outs.push(expect_code(&o, 0));
    }
    for out in &outs {
        assert!(
            out.contains("0::/reprorun-test-bpf-devices"),
            "a v2 cgroup: {out}"
        );
        assert!(out.contains("made\n"), "{out}");
        assert!(out.contains(" 00\n"), "/dev/zero opens: {out}");
    }
    assert!(
        outs[0].contains("Operation not permitted") && !outs[0].contains("opened"),
        "{}",
        outs[0]
    );
    assert!(
        outs[1].contains("opened\n"),
        "allowed by the config: {}",
        outs[1]
    );
}

#[test]
fn oci_device_rules_beside_v1_limits_are_a_bpf_program_on_the_unified_hierarchy() {
    require!(Need::Root);
    require!(optional: HYBRID_UNIFIED, V1_DEVICES, V1_MEMORY);
    // A hybrid host without the v1 device controller (unmounted in a private mount
    // namespace) and a memory limit, which only v1 offers here: the limit goes to a v1
    // cgroup and the device rules to a BPF program on a cgroup of the unified hierarchy
    // beside it. (The build before refused such a container: `set devices.deny: entity not
    // found`.) /dev/fuse's node can be made but not opened; /dev/zero (runc's defaults) opens.
    let script = "cat /proc/self/cgroup; mknod /dev/f0 c 10 229 && echo made; \
                  (: < /dev/f0) 2>/tmp/err && echo opened || cat /tmp/err; \
                  head -c1 /dev/zero | od -An -tx1";
    let b = Bundle::new(&["sh", "-c", script], |c| {
        let sets: serde_json::Value = ["CAP_MKNOD", "CAP_DAC_OVERRIDE"].into();
        c["process"]["capabilities"] = serde_json::json!({
            "bounding": sets, "effective": sets, "permitted": sets,
        });
        c["linux"]["cgroupsPath"] = "/reprorun-test-bpf-beside-v1".into();
        c["linux"]["resources"] = serde_json::json!({"memory": {"limit": 268435456}});
    });
    let o = b.run_under(
        &[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "umount /sys/fs/cgroup/devices && exec \"$0\" \"$@\"",
        ],
        &["run", "v2b"],
    );
    let out = expect_code(&o, 0);
    assert!(
        out.contains("memory:/reprorun-test-bpf-beside-v1"),
        "the limit on v1: {out}"
    );
    assert!(
        out.contains("0::/reprorun-test-bpf-beside-v1"),
        "the device program's cgroup on the unified hierarchy: {out}"
    );
    assert!(out.contains("made\n"), "{out}");
    assert!(
        out.contains("Operation not permitted") && !out.contains("opened"),
        "{out}"
    );
    assert!(out.contains(" 00\n"), "/dev/zero opens: {out}");
}

#[test]
fn oci_block_io_applies_and_fields_without_a_controller_fail_naming_it_as_runc_fails() {
    require!(Need::Root);
    require!(
        optional: Need::Path(
            "/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device",
            "the cgroup v1 blkio controller"
        ),
        Need::Path("/sys/dev/block/254:0", "the block device 254:0 the test throttles")
    );
    let b = Bundle::new(&["true"], |c| {
        c["linux"]["cgroupsPath"] = "/reprorun-test-blkio".into();
        c["linux"]["resources"] = serde_json::json!({"blockIO": {
            "throttleReadBpsDevice": [{"major": 254, "minor": 0, "rate": 1048576}],
            "throttleWriteIopsDevice": [{"major": 254, "minor": 0, "rate": 100}]
        }});
    });
    expect_code(&b.run(&["create", "io1"]), 0);
    let read =
        |f: &str| std::fs::read_to_string(format!("/sys/fs/cgroup/blkio/reprorun-test-blkio/{f}"));
    let got = (
        read("blkio.throttle.read_bps_device"),
        read("blkio.throttle.write_iops_device"),
    );
    expect_code(&b.run(&["delete", "--force", "io1"]), 0);
    assert_eq!(got.0.unwrap(), "254:0 1048576\n");
    assert_eq!(got.1.unwrap(), "254:0 100\n");
    // What this host has no controller for (as seen by the container's v1 cgroup) fails at
    // create, one line naming the field (runc 1.1 fails each of these here too).
    let cases = [
        (
            "hugetlb",
            serde_json::json!({"hugepageLimits": [{"pageSize": "2MB", "limit": 4194304}]}),
            "linux.resources.hugepageLimits",
        ),
        (
            "net_cls",
            serde_json::json!({"network": {"classID": 1048577}}),
            "linux.resources.network",
        ),
        (
            "rdma",
            serde_json::json!({"rdma": {"mlx5_1": {"hcaHandles": 3}}}),
            "linux.resources.rdma",
        ),
        (
            "memory",
            serde_json::json!({"unified": {"memory.high": "1073741824"}}),
            "linux.resources.unified: cannot be used on cgroup v1",
        ),
    ];
    for (controller, resources, field) in cases {
        if std::path::Path::new("/sys/fs/cgroup")
            .join(controller)
            .exists()
            && controller != "memory"
        {
            continue;
        }
        let b = Bundle::new(&["true"], |c| c["linux"]["resources"] = resources);
        expect_error(&b.run(&["create", "f1"]), field);
        assert!(!b.state.join("f1").exists());
    }
}
