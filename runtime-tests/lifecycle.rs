//! Exit statuses, timeouts, and that nothing outlives the sandbox.

use std::process::Stdio;
use std::time::Duration;

use crate::common::*;

#[test]
fn exit_statuses() {
    let w = Work::new();
    expect_code(&w.run(&["exec", "--", "true"]), 0);
    expect_code(&w.run(&["exec", "--", "sh", "-c", "exit 3"]), 3);
    expect_code(&w.run(&["exec", "--", "sh", "-c", "kill -9 $$"]), 137);
    expect_code(&w.run(&["exec", "--", "sh", "-c", "kill -TERM $$"]), 143);

    let o = w.run(&["exec", "--", "no-such-command-xyz"]);
    expect_code(&o, 127);
    assert_eq!(
        stderr(&o),
        "reprorun: no-such-command-xyz: command not found\n"
    );
    let o = w.run(&["exec", "--", "/no/such/path"]);
    expect_code(&o, 127);

    std::fs::write(w.path().join("script"), "#!/bin/sh\necho hi\n").unwrap();
    let o = w.run(&["exec", "--", "/work/script"]);
    expect_code(&o, 126);
    assert_eq!(
        stderr(&o),
        "reprorun: /work/script: permission denied (not executable)\n"
    );

    let o = w.run(&["exec", "--timeout", "300ms", "--", "sleep", "10"]);
    expect_code(&o, 124);
}

#[test]
fn timeout_kills_double_forked_daemons() {
    let w = Work::new();
    let mark = marker(1);
    let started = std::time::Instant::now();
    let o = w.run(&[
        "exec",
        "--timeout",
        "1s",
        "--",
        "sh",
        "-c",
        &format!("setsid sh -c 'sleep {mark} & exit' ; sleep {mark}"),
    ]);
    expect_code(&o, 124);
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(
        wait_until(Duration::from_secs(3), || !host_cmdlines()
            .iter()
            .any(|c| c.contains(&mark))),
        "a daemon survived the timeout"
    );
}

#[test]
fn background_processes_end_with_the_workload() {
    let w = Work::new();
    let mark = marker(2);
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        &format!("setsid sleep {mark} & echo started"),
    ]);
    assert_eq!(expect_code(&o, 0), "started\n");
    assert!(
        !host_cmdlines().iter().any(|c| c.contains(&mark)),
        "a background process outlived `exec`"
    );
    // Gone by the time `exec` has returned, not some time later, also where reprorun returns
    // before init's exit (init kills and reaps everything left, then reports the end): with
    // output to a file, nothing holds a pipe of the caller's open until init has exited.
    let mark = marker(5);
    let out = w.dir.path().join("out");
    let status = w
        .cmd(&[
            "exec",
            "--",
            "sh",
            "-c",
            &format!("setsid sleep {mark} >/dev/null 2>&1 & echo started"),
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        !host_cmdlines().iter().any(|c| c.contains(&mark)),
        "a background process outlived `exec`"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "started\n");
}

#[test]
fn nothing_survives_when_reprorun_is_killed() {
    let w = Work::new();
    let mark = marker(3);
    let mut child = w
        .cmd(&[
            "exec",
            "--",
            "sh",
            "-c",
            &format!("sleep {mark} & sleep {mark}"),
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            host_cmdlines().iter().filter(|c| c.contains(&mark)).count() >= 2
        }),
        "workload did not start"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || !host_cmdlines()
            .iter()
            .any(|c| c.contains(&mark))),
        "sandbox processes outlived a killed reprorun"
    );
}

#[test]
fn failures_leave_nothing_mounted_or_running() {
    let before = host_mounts();
    let w = Work::new();
    // Setup failure inside the sandbox (bind target under the read-only root).
    let o = w.run(&[
        "exec",
        "--bind",
        "/etc/hostname:/usr/lib/reprorun-missing/x",
        "--",
        "true",
    ]);
    expect_error(&o, "/usr/lib/reprorun-missing");
    // Exec failure, timeout, and a workload killed by a signal.
    expect_code(&w.run(&["exec", "--", "no-such-command-xyz"]), 127);
    expect_code(
        &w.run(&["exec", "--timeout", "100ms", "--", "sleep", "5"]),
        124,
    );
    assert_eq!(host_mounts(), before, "host mount table changed");
    assert!(!std::path::Path::new("/usr/lib/reprorun-missing").exists());
    // No child of ours is left: every reprorun was waited for and its sandbox is gone.
    let children = std::fs::read_to_string(format!(
        "/proc/self/task/{}/children",
        nix::unistd::gettid()
    ))
    .unwrap_or_default();
    assert_eq!(children.trim(), "");
}

#[test]
fn a_symlinked_mount_target_is_refused_and_nothing_lands_on_the_host() {
    let w = Work::new();
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escaped");
    // During setup the host's root sits at /oldroot: a link there from the workdir would lead
    // a bind (and the mount point it needs) onto the host.
    std::os::unix::fs::symlink(
        format!("/oldroot{}", outside.path().display()),
        w.path().join("out"),
    )
    .unwrap();
    let o = w.run(&[
        "exec",
        "--bind",
        "/etc/hostname:/work/out/escaped",
        "--",
        "true",
    ]);
    expect_error(&o, "/work/out is a symbolic link");
    assert!(!escape.exists(), "a mount point was created on the host");
    // A plain directory target is still fine.
    std::fs::create_dir(w.path().join("dir")).unwrap();
    let o = w.run(&[
        "exec",
        "--bind",
        "/etc/hostname:/work/dir/h:ro",
        "--",
        "cat",
        "/work/dir/h",
    ]);
    assert_eq!(
        expect_code(&o, 0),
        std::fs::read_to_string("/etc/hostname").unwrap()
    );
}
