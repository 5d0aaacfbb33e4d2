//! The OCI runtime: runc's lifecycle over config.json bundles, and podman driving reprorun.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::*;

/// Busybox applets the bundles use.
const APPLETS: &[&str] = &[
    "sh", "echo", "sleep", "date", "cat", "ls", "id", "tty", "true", "env", "touch", "test",
    "wget", "mknod", "head", "od", "grep", "hostname", "mount", "stat", "readlink",
];

/// A bundle: a busybox rootfs and `reprorun spec`'s config with `args` and `edit` applied.
pub(crate) struct Bundle {
    pub(crate) work: Work,
    pub(crate) state: PathBuf,
}

impl Bundle {
    pub(crate) fn new(args: &[&str], edit: impl FnOnce(&mut serde_json::Value)) -> Bundle {
        let work = Work::new();
        let rootfs = work.path().join("rootfs");
        for d in ["bin", "etc", "tmp", "proc", "sys", "dev", "shared"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
        for a in APPLETS {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(a)).unwrap();
        }
        std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
        let o = work.run(&["spec"]);
        expect_code(&o, 0);
        let path = work.path().join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config["process"]["args"] = serde_json::json!(args);
        config["root"]["readonly"] = false.into();
        // A host directory the tests look into.
        let shared = work.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        config["mounts"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "destination": "/shared", "type": "bind",
                "source": shared, "options": ["rbind", "rw"]
            }));
        edit(&mut config);
        std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        let state = work.path().join("state");
        Bundle { work, state }
    }

    pub(crate) fn shared(&self) -> PathBuf {
        self.work.path().join("shared")
    }

    /// `reprorun --root STATE ARGS` in the bundle directory.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.work.cmd(&["--root", self.state.to_str().unwrap()]);
        c.args(args);
        c
    }

    /// Runs to completion with stdout and stderr in files, not pipes: after `create`, the
    /// container's init keeps the caller's stdio (runc's contract), so a pipe would not
    /// close until the container exits.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        run_to_files(self.cmd(args))
    }

    /// [`Bundle::run`] under a wrapper command (`unshare --mount ...`).
    pub(crate) fn run_under(&self, wrapper: &[&str], args: &[&str]) -> Output {
        let inner = self.cmd(args);
        let mut c = Command::new(wrapper[0]);
        c.args(&wrapper[1..])
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(self.work.path());
        run_to_files(c)
    }

    pub(crate) fn state_of(&self, id: &str) -> serde_json::Value {
        let o = self.run(&["state", id]);
        serde_json::from_str(&expect_code(&o, 0)).unwrap()
    }
}

impl Drop for Bundle {
    /// A failed test leaves no container behind.
    fn drop(&mut self) {
        let ids = stdout(&self.run(&["list", "-q"]));
        for id in ids.lines() {
            let _ = self.run(&["delete", "--force", id]);
        }
    }
}

pub(crate) fn run_to_files(mut cmd: Command) -> Output {
    let out = tempfile::tempfile().unwrap();
    let err = tempfile::tempfile().unwrap();
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .status()
        .expect("run reprorun");
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut v = Vec::new();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut v).unwrap();
        v
    };
    Output {
        status,
        stdout: read(out),
        stderr: read(err),
    }
}

fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn lifecycle_create_start_exec_kill_delete() {
    require!(Need::Root);
    let b = Bundle::new(
        &["sh", "-c", "touch /shared/started; exec sleep 1000"],
        |c| {
            c["annotations"] = serde_json::json!({"org.reprorun.date": "2020-01-01"});
        },
    );
    let pid_file = b.work.path().join("pid");
    let o = b.run(&["create", "--pid-file", pid_file.to_str().unwrap(), "c1"]);
    expect_code(&o, 0);
    let pid: i64 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let st = b.state_of("c1");
    assert_eq!(st["status"], "created");
    assert_eq!(st["pid"], pid);
    assert_eq!(st["id"], "c1");
    assert_eq!(
        st["bundle"],
        b.work.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(st["annotations"]["org.reprorun.date"], "2020-01-01");
    // Created: the process waits, nothing of it ran yet.
    std::thread::sleep(Duration::from_millis(100));
    assert!(!b.shared().join("started").exists());
    assert!(alive(pid));
    // A second create of the same id is refused; a created container cannot exec.
    expect_error(&b.run(&["create", "c1"]), "already exists");
    expect_error(&b.run(&["exec", "c1", "true"]), "is created");

    expect_code(&b.run(&["start", "c1"]), 0);
    assert!(wait_until(Duration::from_secs(10), || b
        .shared()
        .join("started")
        .exists()));
    assert_eq!(b.state_of("c1")["status"], "running");
    expect_error(&b.run(&["start", "c1"]), "only a created container");
    let list = expect_code(&b.run(&["list", "--format", "json"]), 0);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["id"], "c1");
    assert_eq!(list[0]["status"], "running");
    let ps = expect_code(&b.run(&["ps", "--format", "json", "c1"]), 0);
    let ps: Vec<i64> = serde_json::from_str(&ps).unwrap();
    assert!(ps.contains(&pid) && ps.len() >= 2, "{ps:?}");

    // exec in runc's form (the first word names a container): output, status, env, and
    // the container's pinned clock reaches the static busybox `date` of an exec'd process.
    let o = b.run(&["exec", "c1", "sh", "-c", "date +%Y; echo $FOO; exit 4"]);
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert_eq!(stdout(&o), "2020\n\n");
    let o = b.run(&[
        "exec",
        "--env",
        "FOO=bar",
        "--cwd",
        "/tmp",
        "c1",
        "sh",
        "-c",
        "echo $FOO; pwd",
    ]);
    assert_eq!(expect_code(&o, 0), "bar\n/tmp\n");
    // --process FILE and --detach with --pid-file, as conmon calls it.
    let proc_file = b.work.path().join("process.json");
    std::fs::write(
        &proc_file,
        serde_json::json!({
            "user": {"uid": 0, "gid": 0}, "cwd": "/",
            "args": ["sh", "-c", "date +%Y > /shared/exec-date"],
            "env": ["PATH=/bin"]
        })
        .to_string(),
    )
    .unwrap();
    let exec_pid = b.work.path().join("exec.pid");
    let o = b.run(&[
        "exec",
        "--process",
        proc_file.to_str().unwrap(),
        "--detach",
        "--pid-file",
        exec_pid.to_str().unwrap(),
        "c1",
    ]);
    expect_code(&o, 0);
    assert!(
        std::fs::read_to_string(&exec_pid)
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 0
    );
    assert!(wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(b.shared().join("exec-date")).is_ok_and(|s| s == "2020\n")
    }));
    let o = b.run(&["exec", "c1", "/no/such/program"]);
    assert_eq!(o.status.code(), Some(127), "{o:?}");
    assert!(stderr(&o).contains("command not found"), "{o:?}");

    // A process file is checked as config.json's process is.
    let bad_proc = b.work.path().join("bad-process.json");
    std::fs::write(
        &bad_proc,
        serde_json::json!({
            "user": {"uid": 0, "gid": 0}, "cwd": "/", "args": ["true"],
            "capabilities": {"bounding": ["CAP_FLY"]}
        })
        .to_string(),
    )
    .unwrap();
    let o = b.run(&["exec", "--process", bad_proc.to_str().unwrap(), "c1"]);
    expect_error(&o, "process.capabilities.bounding");
    // A running container is not deleted without --force; kill stops it.
    expect_error(&b.run(&["delete", "c1"]), "--force");
    expect_code(&b.run(&["kill", "c1", "KILL"]), 0);
    assert!(wait_until(Duration::from_secs(10), || !alive(pid)));
    let st = b.state_of("c1");
    assert_eq!(st["status"], "stopped");
    expect_error(&b.run(&["kill", "c1", "TERM"]), "stopped");
    expect_code(&b.run(&["delete", "c1"]), 0);
    expect_error(&b.run(&["state", "c1"]), "does not exist");
    assert_eq!(expect_code(&b.run(&["list", "-q"]), 0), "");
    assert!(!b.state.join("c1").exists());
}

#[test]
fn run_waits_and_propagates_status_and_signals() {
    require!(Need::Root);
    let b = Bundle::new(
        &[
            "sh",
            "-c",
            "date +%Y; cat /proc/cpuinfo | grep -c ^processor; exit 3",
        ],
        |c| {
            c["annotations"] =
                serde_json::json!({"org.reprorun.date": "2020-06-01", "org.reprorun.cpus": "1"});
        },
    );
    let o = b.run(&["run", "r1"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    assert_eq!(stdout(&o), "2020\n1\n");
    assert!(!b.state.join("r1").exists(), "run deletes the container");
    // Without the determinism layer the clock is the host's.
    let b = Bundle::new(&["date", "+%Y"], |c| {
        c["annotations"] = serde_json::json!({"org.reprorun.determinism": "off"});
    });
    let o = b.run(&["run", "r2"]);
    assert_ne!(expect_code(&o, 0), "2020\n");
    assert_ne!(stdout(&o), "2024\n");
    // A container killed by a signal reports 128+N.
    let b = Bundle::new(&["sh", "-c", "kill -9 $$"], |_| {});
    assert_eq!(b.run(&["run", "r3"]).status.code(), Some(137));
}

#[test]
fn bad_bundles_and_commands_fail_with_one_line_and_leave_nothing() {
    require!(Need::Root);
    let b = Bundle::new(&["true"], |_| {});
    let one_line = |o: &Output, needle: &str| {
        expect_error(o, needle);
        assert_eq!(stderr(o).trim().lines().count(), 1, "{o:?}");
    };
    one_line(
        &b.run(&["create", "--bundle", "/nonexistent", "x1"]),
        "config.json",
    );
    one_line(&b.run(&["start", "nope"]), "does not exist");
    one_line(&b.run(&["state", "nope"]), "does not exist");
    one_line(&b.run(&["delete", "nope"]), "does not exist");
    // An engine's final `delete --force` of a container already gone: quiet success, as
    // runc's; an id that is no valid name is still an error.
    let o = b.run(&["delete", "--force", "nope"]);
    expect_code(&o, 0);
    assert_eq!(stderr(&o), "", "{o:?}");
    one_line(
        &b.run(&["delete", "--force", "../escape"]),
        "does not exist",
    );
    one_line(&b.run(&["create", "../escape"]), "invalid");
    one_line(&b.run(&["kill", "nope", "FLY"]), "signal");
    // Unknown fields (strict), unsupported fields, missing programs: nothing left behind.
    for (edit, needle, code) in [
        (
            serde_json::json!({"process": {"bogus": 1},
                               "annotations": {"org.reprorun.strict": "true"}}),
            "process.bogus",
            125,
        ),
        (
            serde_json::json!({"linux": {"intelRdt": {"closID": "x"}}}),
            "linux.intelRdt",
            125,
        ),
        (
            serde_json::json!({"annotations": {"org.reprorun.sede": "1"}}),
            "org.reprorun.sede",
            125,
        ),
        (
            serde_json::json!({"process": {"args": ["/no/such/program"]}}),
            "command not found",
            127,
        ),
    ] {
        let b = Bundle::new(&["true"], |c| merge(c, &edit));
        let o = b.run(&["create", "bad"]);
        assert_eq!(o.status.code(), Some(code), "{needle}: {o:?}");
        assert!(stderr(&o).contains(needle), "{needle}: {o:?}");
        assert_eq!(stderr(&o).trim().lines().count(), 1, "{o:?}");
        let left: Vec<_> = std::fs::read_dir(&b.state).unwrap().collect();
        assert!(left.is_empty(), "{needle}: {left:?}");
    }
    // The remains of a create that crashed (its creator gone) are cleared, and the id is
    // free again.
    let crashed = b.state.join("ghost");
    std::fs::create_dir_all(&crashed).unwrap();
    std::fs::write(crashed.join("creating"), "999999999 1").unwrap();
    assert_eq!(expect_code(&b.run(&["list", "-q"]), 0), "");
    assert!(!crashed.exists());
    std::fs::create_dir_all(&crashed).unwrap();
    std::fs::write(crashed.join("creating"), "999999999").unwrap();
    expect_code(&b.run(&["create", "ghost"]), 0);
    expect_code(&b.run(&["delete", "ghost"]), 0);
}

#[test]
fn a_create_killed_midway_leaves_nothing_behind() {
    require!(Need::Root);
    let b = Bundle::new(&["true"], |c| {
        c["hooks"] =
            serde_json::json!({"createRuntime": [{"path": "/bin/sleep", "args": ["sleep", "5"]}]});
    });
    let mut create = b.cmd(&["create", "k1"]);
    let mut child = create
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed while its hook runs: the state is saved by then, init waits, the cgroup exists.
    let saved = b.state.join("k1/state.json");
    assert!(wait_until(Duration::from_secs(10), || saved.exists()));
    let state = read_json(&saved);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(expect_code(&b.run(&["list", "-q"]), 0), "");
    assert!(!b.state.join("k1").exists());
    let pid = state["pid"].as_i64().unwrap();
    assert!(wait_until(Duration::from_secs(5), || !alive(pid)));
    for dir in state["cgroup_dirs"].as_array().unwrap() {
        assert!(
            !std::path::Path::new(dir.as_str().unwrap()).exists(),
            "{dir}"
        );
    }
    // The id is free again.
    let b2 = b.run(&["state", "k1"]);
    expect_error(&b2, "does not exist");
}

/// Merges `patch` into `target` (objects recursively; anything else replaces).
/// Kubernetes' CPU request arrives as `cpu.shares`: written to the container's cgroup
/// (`cpu.shares` on v1, `cpu.weight` by runc's map on v2), gone with the container.
#[test]
fn cpu_shares_reach_the_containers_cgroup() {
    require!(Need::Root);
    let path = format!("/reprorun-test-shares-{}", std::process::id());
    let b = Bundle::new(&["sleep", "1000"], |c| {
        c["linux"]["cgroupsPath"] = path.clone().into();
        c["linux"]["resources"]["cpu"] = serde_json::json!({"shares": 512});
    });
    expect_code(&b.run(&["create", "s1"]), 0);
    let rel = path.trim_start_matches('/');
    let dirs: Vec<PathBuf> = ["cpu", "cpu,cpuacct", "", "unified"]
        .iter()
        .map(|h| PathBuf::from("/sys/fs/cgroup").join(h).join(rel))
        .filter(|d| d.is_dir())
        .collect();
    let read = |f: &str| {
        dirs.iter()
            .find_map(|d| std::fs::read_to_string(d.join(f)).ok())
            .map(|t| t.trim().to_string())
    };
    match (read("cpu.shares"), read("cpu.weight")) {
        (Some(shares), _) => assert_eq!(shares, "512"),
        (None, Some(weight)) => assert_eq!(weight, "20"),
        (None, None) => panic!("no cpu.shares or cpu.weight in {dirs:?}"),
    }
    expect_code(&b.run(&["delete", "--force", "s1"]), 0);
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
}

fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

#[test]
fn concurrent_containers_do_not_interfere() {
    require!(Need::Root);
    let b = Bundle::new(&["sh", "-c", "echo $HOSTNAME > /dev/null"], |_| {});
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let create = b.cmd(&["create", &format!("p{i}")]);
            let start = b.cmd(&["start", &format!("p{i}")]);
            let delete = b.cmd(&["delete", "--force", &format!("p{i}")]);
            std::thread::spawn(move || {
                let a = run_to_files(create);
                let s = run_to_files(start);
                let d = run_to_files(delete);
                (a, s, d)
            })
        })
        .collect();
    for t in threads {
        let (a, s, d) = t.join().unwrap();
        expect_code(&a, 0);
        expect_code(&s, 0);
        expect_code(&d, 0);
    }
    assert!(std::fs::read_dir(&b.state).unwrap().next().is_none());
}

#[test]
fn hooks_run_at_their_stages_with_the_state() {
    require!(Need::Root);
    let log = tempfile::tempdir().unwrap();
    let hook = |stage: &str| {
        let out = log.path().join(stage);
        serde_json::json!({
            "path": "/bin/sh",
            "args": ["sh", "-c", format!("cat > {}", out.display())],
        })
    };
    let b = Bundle::new(&["true"], |c| {
        c["hooks"] = serde_json::json!({
            "createRuntime": [hook("createRuntime")],
            "poststart": [hook("poststart")],
            "poststop": [hook("poststop")],
        });
    });
    expect_code(&b.run(&["create", "h1"]), 0);
    let created = read_json(&log.path().join("createRuntime"));
    assert_eq!(created["id"], "h1");
    assert_eq!(created["status"], "created");
    assert!(!log.path().join("poststart").exists());
    expect_code(&b.run(&["start", "h1"]), 0);
    assert_eq!(
        read_json(&log.path().join("poststart"))["status"],
        "running"
    );
    assert!(!log.path().join("poststop").exists());
    assert!(wait_until(Duration::from_secs(10), || b.state_of("h1")
        ["status"]
        == "stopped"));
    expect_code(&b.run(&["delete", "h1"]), 0);
    assert_eq!(read_json(&log.path().join("poststop"))["status"], "stopped");
    // A failing createRuntime hook fails the create and leaves nothing.
    let b = Bundle::new(&["true"], |c| {
        c["hooks"] = serde_json::json!({"createRuntime": [{"path": "/bin/false"}]});
    });
    expect_error(&b.run(&["create", "h2"]), "createRuntime hook /bin/false");
    assert!(std::fs::read_dir(&b.state).unwrap().next().is_none());
}

/// Receives one descriptor sent with SCM_RIGHTS on a connected stream.
fn recv_fd(sock: &std::os::unix::net::UnixStream) -> OwnedFd {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut buf = [0u8; 64];
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::empty(),
    )
    .expect("recvmsg");
    for c in msg.cmsgs().unwrap() {
        if let ControlMessageOwned::ScmRights(fds) = c {
            // SAFETY: the kernel installed this descriptor for us.
            return unsafe { OwnedFd::from_raw_fd(fds[0]) };
        }
    }
    panic!("no descriptor received");
}

#[test]
fn terminal_master_goes_out_on_the_console_socket() {
    require!(Need::Root);
    let b = Bundle::new(&["sh", "-c", "tty; echo done"], |c| {
        c["process"]["terminal"] = true.into();
    });
    let sock_path = b.work.path().join("console.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
    let o = b.run(&[
        "create",
        "--console-socket",
        sock_path.to_str().unwrap(),
        "t1",
    ]);
    expect_code(&o, 0);
    let (conn, _) = listener.accept().unwrap();
    let master = recv_fd(&conn);
    expect_code(&b.run(&["start", "t1"]), 0);
    let mut out = Vec::new();
    let mut f = std::fs::File::from(master);
    let mut buf = [0u8; 256];
    loop {
        use std::io::Read;
        match f.read(&mut buf) {
            Ok(0) | Err(_) => break, // EIO once the last slave closes
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
        if String::from_utf8_lossy(&out).contains("done") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("/dev/pts/0"), "{text:?}");
    // Without a console socket, a terminal config is refused.
    let o = b.run(&["create", "t2"]);
    expect_error(&o, "--console-socket");
    let _ = b.run(&["delete", "--force", "t1"]);
}

#[test]
fn runc_generated_config_runs() {
    require!(Need::Root, Need::Tool("runc"));
    let b = Bundle::new(&["true"], |_| {});
    std::fs::remove_file(b.work.path().join("config.json")).unwrap();
    let o = Command::new("runc")
        .args(["spec", "--bundle"])
        .arg(b.work.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let path = b.work.path().join("config.json");
    let mut c = read_json(&path);
    c["process"]["terminal"] = false.into();
    c["process"]["args"] = serde_json::json!(["sh", "-c", "echo ok; id -u"]);
    std::fs::write(&path, c.to_string()).unwrap();
    let o = b.run(&["run", "rc1"]);
    assert_eq!(expect_code(&o, 0), "ok\n0\n");
}

#[test]
fn features_and_spec_documents() {
    let w = Work::new();
    let o = w.run(&["features"]);
    let f: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert_eq!(f["ociVersionMax"], "1.2.0");
    assert!(f["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .contains(&"time".into()));
    assert!(f["annotations"]["org.reprorun.date"].is_string());
    expect_code(&w.run(&["spec", "--rootless"]), 0);
    let c = read_json(&w.path().join("config.json"));
    assert!(c["linux"]["uidMappings"].is_array());
    expect_error(&w.run(&["spec"]), "exists already");
}

#[test]
fn rootless_user_runs_a_rootless_bundle() {
    let Some(user) = rootless_user() else { return };
    let (_bin_dir, bin) = world_readable_binary();
    let b = Bundle::new(&["sh", "-c", "id -u; date +%Y"], |_| {});
    let mut config = read_json(&b.work.path().join("config.json"));
    config["linux"]["namespaces"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "user"}));
    let map = |id: u32| serde_json::json!([{"containerID": 0, "hostID": id, "size": 1}]);
    config["linux"]["uidMappings"] = map(user.0);
    config["linux"]["gidMappings"] = map(user.1);
    // Without the host bind (another user's directory).
    config["mounts"]
        .as_array_mut()
        .unwrap()
        .retain(|m| m["destination"] != "/shared");
    std::fs::write(b.work.path().join("config.json"), config.to_string()).unwrap();
    // A rootless user's root filesystem is their own.
    let chown = Command::new("chown")
        .args(["-R", &format!("{}:{}", user.0, user.1)])
        .arg(b.work.path().join("rootfs"))
        .status()
        .unwrap();
    assert!(chown.success());
    let state = b.work.path().join("rstate");
    let o = as_user(
        user,
        &bin,
        &["--root", state.to_str().unwrap(), "run", "rl1"],
        b.work.path(),
    );
    assert_eq!(expect_code(&o, 0), "0\n2024\n");
    // Root's state is not the user's: the user cannot see or touch another root's state.
    let o = as_user(
        user,
        &bin,
        &["--root", "/run/reprorun", "list"],
        b.work.path(),
    );
    assert_ne!(o.status.code(), Some(0), "{o:?}");
}

/// podman, with conmon, driving reprorun as its OCI runtime.
pub(crate) mod podman {
    use super::*;

    pub(crate) const IMAGE: &str = "localhost/reprorun-test-busybox:latest";

    fn podman() -> Option<Command> {
        require!(Need::Root, Need::Tool("podman"));
        let mut c = Command::new("podman");
        c.args([
            "--runtime",
            BIN,
            "--cgroup-manager=cgroupfs",
            "--events-backend=file",
        ]);
        c.stdin(Stdio::null());
        Some(c)
    }

    /// The busybox image, imported once.
    pub(crate) fn image() -> Option<()> {
        static ONCE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
        let mut done = ONCE.lock().unwrap();
        if *done {
            return Some(());
        }
        let mut p = podman()?;
        let have = p.args(["image", "exists", IMAGE]).status().unwrap();
        if !have.success() {
            let b = Bundle::new(&["true"], |_| {});
            let tar = b.work.path().join("rootfs.tar");
            let t = Command::new("tar")
                .args(["-C", b.work.path().join("rootfs").to_str().unwrap(), "-cf"])
                .arg(&tar)
                .arg(".")
                .status()
                .unwrap();
            assert!(t.success());
            let o = podman()?
                .args(["import"])
                .arg(&tar)
                .arg(IMAGE)
                .output()
                .unwrap();
            assert!(o.status.success(), "{o:?}");
        }
        *done = true;
        Some(())
    }

    fn run(args: &[&str]) -> Option<Output> {
        image()?;
        let mut p = podman()?;
        p.args(args);
        Some(run_to_files(p))
    }

    const LIMITS: &[&str] = &[
        "--network",
        "none",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
    ];

    fn podman_run(extra: &[&str], cmd: &[&str]) -> Option<Output> {
        let mut args = vec!["run", "--rm"];
        args.extend_from_slice(LIMITS);
        args.extend_from_slice(extra);
        args.push(IMAGE);
        args.extend_from_slice(cmd);
        run(&args)
    }

    #[test]
    fn podman_run_prints_and_propagates_exit_codes() {
        let Some(o) = podman_run(&[], &["echo", "hi"]) else {
            return;
        };
        assert_eq!(expect_code(&o, 0), "hi\n");
        let o = podman_run(&[], &["sh", "-c", "exit 7"]).unwrap();
        assert_eq!(o.status.code(), Some(7), "{o:?}");
        let o = podman_run(&[], &["no-such-program"]).unwrap();
        assert_eq!(o.status.code(), Some(127), "{o:?}");
    }

    #[test]
    fn podman_annotation_pins_the_date_of_a_static_binary() {
        let Some(o) = podman_run(
            &["--annotation", "org.reprorun.date=2020-01-01"],
            &["date", "+%Y-%m-%d"],
        ) else {
            return;
        };
        assert_eq!(expect_code(&o, 0), "2020-01-01\n");
        // The default: reprorun's pinned date.
        let o = podman_run(&[], &["date", "+%Y"]).unwrap();
        assert_eq!(expect_code(&o, 0), "2024\n");
    }

    #[test]
    fn podman_detach_exec_stop_rm() {
        let mut args = vec!["run", "-d"];
        args.extend_from_slice(LIMITS);
        args.extend_from_slice(&[
            "--annotation",
            "org.reprorun.date=2021-03-04",
            IMAGE,
            "sleep",
            "1000",
        ]);
        let Some(o) = run(&args) else { return };
        let id = expect_code(&o, 0).trim().to_string();
        let o = run(&["exec", &id, "sh", "-c", "date +%Y; exit 5"]).unwrap();
        assert_eq!(o.status.code(), Some(5), "{o:?}");
        assert_eq!(stdout(&o), "2021\n");
        let o = run(&["inspect", "--format", "{{.State.Status}}", &id]).unwrap();
        assert_eq!(expect_code(&o, 0), "running\n");
        expect_code(&run(&["stop", "-t", "2", &id]).unwrap(), 0);
        let o = run(&["inspect", "--format", "{{.State.Status}}", &id]).unwrap();
        assert_eq!(expect_code(&o, 0), "exited\n");
        expect_code(&run(&["rm", &id]).unwrap(), 0);
        let o = run(&["inspect", &id]).unwrap();
        assert_ne!(o.status.code(), Some(0));
    }
}

/// The holes of the escape suite that an OCI container shares with `reprorun exec` stay
/// closed in a container started by `reprorun run`: its process cannot signal the caller's
/// process group, cannot change the host's device nodes, and reads init's command line as
/// `reprorun-init` (not the caller's).
#[test]
fn a_container_cannot_reach_the_callers_group_or_the_hosts_devices() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    require!(Need::Root);
    let before = std::fs::metadata("/dev/full").unwrap().mode();
    let b = Bundle::new(
        &[
            "sh",
            "-c",
            "chmod 000 /dev/full 2>/dev/null; touch /dev/full 2>/dev/null; \
             cat /proc/1/cmdline; echo; kill -9 0",
        ],
        |_| {},
    );
    let mut cmd = b.cmd(&["run", "holes"]);
    cmd.process_group(0);
    let o = run_to_files(cmd);
    let after = std::fs::metadata("/dev/full").unwrap().mode();
    let _ = std::fs::set_permissions("/dev/full", std::fs::Permissions::from_mode(before));
    assert_eq!(after, before, "the host's /dev/full changed");
    assert_eq!(
        o.status.signal(),
        None,
        "kill(0) inside the container killed reprorun (the caller's group): {o:?}"
    );
    assert_eq!(o.status.code(), Some(137), "{o:?}");
    assert!(
        stdout(&o).starts_with("reprorun-init"),
        "init's command line: {:?}",
        stdout(&o)
    );
}

/// `org.reprorun.net.record`, then `org.reprorun.net.replay` with the server gone: the
/// container's request is answered from the cassette; a request the cassette lacks is refused
/// (403 naming it, in the net log); a directory that already holds a cassette fails `create`.
#[test]
fn a_container_records_then_replays_offline() {
    require!(Need::Root);
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = listener.local_addr().unwrap().port();
    // One answer, then the server is gone (the listener closed with the thread).
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\nrecorded!");
    });
    let tmp = tempfile::tempdir().unwrap();
    let tape = tmp.path().join("tape");
    let get = format!("wget -q -O - http://api.test:{p}/data");
    let rec_log = tmp.path().join("rec.jsonl");
    let b = Bundle::new(&["sh", "-c", &get], |c| {
        c["annotations"]["org.reprorun.net.allow"] = format!("api.test:{p}, 127.0.0.1:{p}").into();
        c["annotations"]["org.reprorun.net.add-host"] = "api.test:127.0.0.1".into();
        c["annotations"]["org.reprorun.net.record"] = tape.to_str().unwrap().into();
        c["annotations"]["org.reprorun.net.log"] = rec_log.to_str().unwrap().into();
    });
    let o = b.run(&["run", "rec"]);
    assert_eq!(expect_code(&o, 0), "recorded!", "{o:?}");
    server.join().unwrap();
    // The index is written once the monitor's proxy has stopped.
    let index = tape.join("index.json");
    assert!(
        wait_until(Duration::from_secs(10), || index.exists()),
        "no {index:?}"
    );
    let text = std::fs::read_to_string(&index).unwrap();
    let said = std::fs::read_to_string(&rec_log).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let e = &v["entries"][0];
    assert!(
        e["host"] == "api.test" && e["port"] == p && e["target"] == "/data",
        "{text}\n{said}"
    );
    // Nothing listens there now: only the cassette can answer.
    assert!(std::net::TcpStream::connect(("127.0.0.1", p)).is_err());
    let log = tmp.path().join("net.jsonl");
    let script = format!("{get}; echo; wget -q -O - http://api.test:{p}/missing || echo refused");
    let b = Bundle::new(&["sh", "-c", &script], |c| {
        c["annotations"]["org.reprorun.net.replay"] = tape.to_str().unwrap().into();
        c["annotations"]["org.reprorun.net.log"] = log.to_str().unwrap().into();
    });
    let o = b.run(&["run", "replay"]);
    let out = expect_code(&o, 0);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["recorded!", "refused"],
        "{o:?}"
    );
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.lines().count() == 2)
    }));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("/missing") && text.contains("is not in the cassette"),
        "{text}"
    );
    // Recording again into the same directory would mix two runs: refused at create.
    let b = Bundle::new(&["true"], |c| {
        c["annotations"]["org.reprorun.net.record"] = tape.to_str().unwrap().into();
    });
    let o = b.run(&["run", "again"]);
    expect_error(&o, "already holds a cassette");
}

/// `org.reprorun.net.allow`: the container reaches the allowlisted host through the proxy the
/// monitor serves, and nothing else; `org.reprorun.net.log` records both attempts.
#[test]
fn a_container_reaches_allowlisted_hosts_only() {
    require!(Need::Root);
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\nfrom-host");
        }
    });
    let script = format!(
        "wget -q -O - http://api.test:{p}/; echo; wget -q -O - http://other.test:{p}/ || echo refused"
    );
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("net.jsonl");
    let b = Bundle::new(&["sh", "-c", &script], |c| {
        c["annotations"]["org.reprorun.net.allow"] = format!("api.test:{p}, 127.0.0.1:{p}").into();
        c["annotations"]["org.reprorun.net.add-host"] = "api.test:127.0.0.1".into();
        c["annotations"]["org.reprorun.net.log"] = log.to_str().unwrap().into();
    });
    let o = b.run(&["run", "egress"]);
    let out = expect_code(&o, 0);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["from-host", "refused"],
        "{o:?}"
    );
    // The monitor writes each line as its connection ends; it may still be finishing.
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.lines().count() == 2)
    }));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["decision"], "allowed", "{lines:?}");
    assert_eq!(lines[1]["decision"], "refused", "{lines:?}");
    assert_eq!(lines[1]["host"], "other.test", "{lines:?}");
    // A joined network namespace is not one of the container's own: refused at create.
    let b = Bundle::new(&["true"], |c| {
        c["annotations"]["org.reprorun.net.allow"] = "pypi.org".into();
        for ns in c["linux"]["namespaces"].as_array_mut().unwrap() {
            if ns["type"] == "network" {
                ns["path"] = "/proc/self/ns/net".into();
            }
        }
    });
    let o = b.run(&["run", "joined"]);
    expect_error(&o, "network namespace of the container's own");
}
