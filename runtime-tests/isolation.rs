//! Rootless runs, and hosts that refuse namespaces (the benchmark-Dockerfile case).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::common::*;

#[test]
fn rootless_run_as_an_unprivileged_user() {
    let Some((uid, gid)) = rootless_user() else {
        return;
    };
    let (_bin_dir, bin) = world_readable_binary();
    let w = Work::new();
    // `reprorun ARGS` as the unprivileged user, from the work directory.
    let as_user = |args: &[&str]| as_user((uid, gid), &bin, args, w.path());
    let o = as_user(&[
        "exec",
        "--",
        "sh",
        "-c",
        "id -u; hostname; echo $$; touch /work/mine; touch /usr/x 2>/dev/null || echo ro",
    ]);
    assert_eq!(expect_code(&o, 0), "0\nreprorun\n2\nro\n");
    let meta = std::fs::metadata(w.path().join("mine")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (uid, gid),
        "files land owned by the caller"
    );
    // The fake clock reaches dynamic and static programs without privilege too.
    let o = as_user(&[
        "exec",
        "--date",
        "@1700000000",
        "--clock",
        "frozen",
        "--",
        "sh",
        "-c",
        "date +%s; busybox date +%s",
    ]);
    assert_eq!(expect_code(&o, 0), "1700000000\n1700000000\n");
}

/// A Docker-like seccomp profile: unshare/setns and namespace flags on clone refused with
/// EPERM, clone3 with ENOSYS (so libc falls back to clone).
fn refuse_namespaces() -> Vec<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
    let ns_flags = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWCGROUP,
    ];
    let clone_rules = ns_flags
        .iter()
        .map(|f| {
            let f = *f as u64;
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(f),
                f,
            )
            .unwrap()])
            .unwrap()
        })
        .collect();
    let eperm: BTreeMap<i64, Vec<SeccompRule>> = [
        (libc::SYS_unshare, vec![]),
        (libc::SYS_setns, vec![]),
        (libc::SYS_clone, clone_rules),
    ]
    .into_iter()
    .collect();
    let enosys: BTreeMap<i64, Vec<SeccompRule>> =
        [(libc::SYS_clone3, vec![])].into_iter().collect();
    [(eperm, libc::EPERM), (enosys, libc::ENOSYS)]
        .into_iter()
        .map(|(rules, errno)| {
            SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno as u32),
                arch,
            )
            .unwrap()
            .try_into()
            .unwrap()
        })
        .collect()
}

fn confined(w: &Work, args: &[&str]) -> Command {
    confined_by(w, args, refuse_namespaces())
}

/// `reprorun ARGS` under `filters` (inherited by everything it starts).
fn confined_by(w: &Work, args: &[&str], filters: Vec<BpfProgram>) -> Command {
    let mut cmd = w.cmd(args);
    // SAFETY: between fork and exec we only call prctl/seccomp through seccompiler, which
    // does not allocate; the filters were built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for f in &filters {
                seccompiler::apply_filter(f).map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            Ok(())
        });
    }
    cmd.stdin(Stdio::null());
    cmd
}

#[test]
fn full_isolation_fails_closed_where_namespaces_are_refused() {
    let w = Work::new();
    let o = confined(&w, &["exec", "--", "touch", "ran"])
        .output()
        .unwrap();
    expect_error(&o, "create namespaces: EPERM");
    assert!(
        stderr(&o).contains("--isolation=auto"),
        "the message says how to ask for pins only"
    );
    assert!(
        !w.path().join("ran").exists(),
        "nothing ran without the sandbox"
    );
}

#[test]
fn auto_isolation_falls_back_to_pins_with_one_warning() {
    let w = Work::new();
    let o = confined(
        &w,
        &[
            "exec",
            "--isolation=auto",
            "--",
            "sh",
            "-c",
            "env | sort; pwd; exit 5",
        ],
    )
    .env("LEAK_ME", "1")
    .output()
    .unwrap();
    let out = expect_code(&o, 5);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("reprorun: warning: full isolation unavailable"),
        "{err}"
    );
    assert!(err.contains("environment pins only"), "{err}");
    assert!(!out.contains("LEAK_ME"));
    assert!(out.contains("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"));
    assert!(out.contains("TZ=UTC\n") && out.contains("PYTHONHASHSEED=0\n"));
    // Without a mount namespace the working directory is the host directory itself.
    assert!(out.ends_with(&format!("{}\n", w.path().display())), "{out}");

    // The environment variable works as the Dockerfile ENTRYPOINT uses it.
    let o = confined(&w, &["exec", "--record", "r.json", "--", "true"])
        .env("REPRORUN_ISOLATION", "auto")
        .output()
        .unwrap();
    expect_code(&o, 0);
    let rec: serde_json::Value = read_json(&w.path().join("r.json"));
    assert_eq!(rec["isolation_used"], "none");
}

#[test]
fn pins_only_runs_keep_timeouts_and_exit_codes() {
    let w = Work::new();
    let mark = marker(4);
    let o = confined(
        &w,
        &[
            "exec",
            "--isolation=none",
            "--timeout",
            "500ms",
            "--",
            "sh",
            "-c",
            &format!("setsid sh -c 'sleep {mark} & exit'; sleep {mark}"),
        ],
    )
    .output()
    .unwrap();
    expect_code(&o, 124);
    assert_eq!(stderr(&o), "", "--isolation=none asks for no warning");
    assert!(
        wait_until(std::time::Duration::from_secs(3), || !host_cmdlines()
            .iter()
            .any(|c| c.contains(&mark))),
        "a daemon survived the timeout in pins-only mode"
    );
    expect_code(
        &confined(&w, &["exec", "--isolation=none", "--", "no-such-cmd-q"])
            .output()
            .unwrap(),
        127,
    );
}

#[test]
fn pins_only_runs_keep_the_fake_clock() {
    let w = Work::new();
    let o = confined(
        &w,
        &[
            "exec",
            "--isolation=auto",
            "--date",
            "@1700000000",
            "--clock",
            "frozen",
            "--",
            "sh",
            "-c",
            "date +%s; busybox date +%s; dirname $REPRORUN_CLOCK_PAGE",
        ],
    )
    .output()
    .unwrap();
    let out = expect_code(&o, 0);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(
        &lines[..2],
        ["1700000000", "1700000000"],
        "dynamic and static programs"
    );
    assert!(
        !std::path::Path::new(lines[2]).exists(),
        "the clock directory {} is removed after the run",
        lines[2]
    );
}

/// What a container engine refuses after the namespaces were made, or to a pins-only run:
/// each `(syscall, arg, mask, errno)` refuses the call whose argument `arg` has the bits of
/// `mask` set (`mask` 0: every call).
fn refuse(calls: &[(i64, u8, u64, i32)]) -> Vec<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
    calls
        .iter()
        .map(|&(nr, arg, mask, errno)| {
            let rule = match mask {
                0 => vec![],
                m => vec![SeccompRule::new(vec![SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(m),
                    m,
                )
                .unwrap()])
                .unwrap()],
            };
            let rules: BTreeMap<i64, Vec<SeccompRule>> = [(nr, rule)].into_iter().collect();
            SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno as u32),
                arch,
            )
            .unwrap()
            .try_into()
            .unwrap()
        })
        .collect()
}

/// Any refused isolation step, not only namespace creation: `full` fails closed naming it
/// with the `--isolation=auto` hint; `auto` falls back with one line naming it; and a
/// pins-only run skips each refused piece with one warning line of its own instead of
/// failing (Podman's default profile: `sethostname` EPERM, `personality(ADDR_NO_RANDOMIZE)`
/// ENOSYS; a refused notification filter; refused ptrace).
#[test]
fn every_refused_step_fails_full_closed_and_degrades_pins_only() {
    let w = Work::new();
    let podman_like = || {
        refuse(&[
            (libc::SYS_sethostname, 0, 0, libc::EPERM),
            (
                libc::SYS_personality,
                0,
                libc::ADDR_NO_RANDOMIZE as u64,
                libc::ENOSYS,
            ),
        ])
    };
    let no_listener = || {
        let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
        refuse(&[(libc::SYS_seccomp, 1, listener, libc::EPERM)])
    };
    let no_ptrace = || refuse(&[(libc::SYS_ptrace, 0, 0, libc::EPERM)]);
    let script = "date +%F; busybox date +%F; exit 4";
    let run = |mode: &str, filters: Vec<BpfProgram>| {
        let iso = format!("--isolation={mode}");
        confined_by(
            &w,
            &[
                "exec",
                &iso,
                "--date",
                "2021-03-04",
                "--",
                "sh",
                "-c",
                script,
            ],
            filters,
        )
        .output()
        .unwrap()
    };
    let aslr = "reprorun: warning: address-space layout stays randomized here: personality refused (ENOSYS";

    let o = run("full", podman_like());
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("reprorun: set hostname: EPERM"), "{err}");
    assert!(err.contains("--isolation=auto"), "{err}");

    let o = run("auto", podman_like());
    assert_eq!(expect_code(&o, 4), "2021-03-04\n2021-03-04\n");
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("reprorun: warning: full isolation unavailable (set hostname: EPERM"),
        "{err}"
    );
    assert!(lines[1].starts_with(aslr), "{err}");

    let o = run("none", podman_like());
    assert_eq!(expect_code(&o, 4), "2021-03-04\n2021-03-04\n");
    let err = stderr(&o);
    assert!(err.lines().count() == 1 && err.starts_with(aslr), "{err}");

    // The notification filter refused: `full` names that step; pins-only keeps the preload
    // clock of dynamic programs and warns that static ones (busybox) see the real clock.
    let o = run("full", no_listener());
    assert_eq!(o.status.code(), Some(125), "{o:?}");
    let err = stderr(&o);
    assert!(
        err.starts_with("reprorun: install the seccomp notification filter: EPERM")
            && err.contains("--isolation=auto"),
        "{err}"
    );
    for (filters, why) in [
        (no_listener(), "seccomp notification refused (EPERM"),
        (no_ptrace(), "ptrace refused (EPERM"),
    ] {
        let o = run("none", filters);
        let out = expect_code(&o, 4);
        let dates: Vec<&str> = out.lines().collect();
        assert_eq!(dates[0], "2021-03-04", "dynamic date: {out}");
        assert_ne!(dates[1], "2021-03-04", "static busybox date: {out}");
        let err = stderr(&o);
        let clock =
            format!("reprorun: warning: static and Go programs see the real clock here: {why}");
        assert!(
            err.lines().filter(|l| l.starts_with(&clock)).count() == 1,
            "{err}"
        );
        assert!(
            err.lines().all(|l| l.starts_with("reprorun: warning: ")),
            "{err}"
        );
    }
}
