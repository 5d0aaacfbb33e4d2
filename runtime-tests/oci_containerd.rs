//! containerd (the runtime under Kubernetes) driving reprorun through its runc shim
//! (`io.containerd.runc.v2` with `BinaryName` = reprorun), and the CRI plugin loading a
//! `reprorun` runtime entry. A private containerd per test: its own root, state and socket
//! under a temporary directory; skipped, with the reason, where containerd cannot run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common::*;

/// A containerd of our own, killed (and its shims' containers removed) on drop.
struct Containerd {
    dir: tempfile::TempDir,
    child: Child,
    /// The containerd namespace the test's containers live in (unique: the shim keeps
    /// runc state under `/run/containerd/runc/NAMESPACE`, shared with other containerds).
    ns: String,
}

/// Config for a containerd under `dir`, with `extra` TOML appended.
fn config(dir: &Path, cri: bool, extra: &str) -> String {
    let d = dir.display();
    let disabled = if cri {
        ""
    } else {
        "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
    };
    format!(
        "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n{disabled}\
         [grpc]\n  address = \"{d}/c.sock\"\n[ttrpc]\n  address = \"{d}/c.sock.ttrpc\"\n{extra}"
    )
}

/// Numbers the containerds of this test process (each gets a namespace of its own).
static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Containerd {
    /// Starts containerd with `config(cri, extra)`; `None` (reason printed) where it cannot.
    fn start(cri: bool, extra: &str) -> Option<Containerd> {
        require!(
            Need::Root,
            Need::Tool("containerd"),
            Need::Tool("ctr"),
            Need::Tool("containerd-shim-runc-v2")
        );
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("config.toml");
        std::fs::write(&conf, config(dir.path(), cri, extra)).unwrap();
        let log = std::fs::File::create(dir.path().join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn containerd");
        let mut c = Containerd {
            dir,
            child,
            ns: format!(
                "reprorun-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
        };
        // Bounded: a containerd that does not answer within the limit is reported, skipped.
        let up = wait_until(Duration::from_secs(30), || {
            matches!(c.child.try_wait(), Ok(None)) && c.ctr(&["version"]).status.success()
        });
        if !up {
            skip!(
                "containerd did not start here; its log: {}",
                c.log().trim().replace('\n', " | ")
            );
        }
        Some(c)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// `ctr --address SOCK -n NS ARGS`, bounded by `timeout` (a hung shim fails the test
    /// instead of hanging it).
    fn ctr(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .args(["-k", "5", "120", "ctr", "--address"])
            .arg(self.dir.path().join("c.sock"))
            .args(["-n", &self.ns])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run ctr")
    }

    /// Where the runc shim keeps the runtime's state for our namespace (its `--root`).
    fn runtime_root(&self) -> PathBuf {
        PathBuf::from("/run/containerd/runc").join(&self.ns)
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // A failed test leaves no container, shim or daemon behind.
        if matches!(self.child.try_wait(), Ok(None)) {
            for id in stdout(&self.ctr(&["containers", "ls", "-q"])).lines() {
                let _ = self.ctr(&["task", "delete", "--force", id]);
                let _ = self.ctr(&["containers", "delete", id]);
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir(self.runtime_root());
    }
}

/// A busybox root filesystem under `dir`.
fn busybox_rootfs(dir: &Path) -> PathBuf {
    let rootfs = dir.join("rootfs");
    for d in ["bin", "etc", "tmp", "proc", "sys", "dev"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    for a in ["sh", "echo", "sleep", "date"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(a)).unwrap();
    }
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
    rootfs
}

/// The status containerd reports for task `id` (`RUNNING`, `STOPPED`, ...).
fn task_status(c: &Containerd, id: &str) -> Option<String> {
    stdout(&c.ctr(&["task", "ls"])).lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&id)).then(|| f.get(2).unwrap_or(&"").to_string())
    })
}

#[test]
fn ctr_run_drives_reprorun_through_a_whole_lifecycle() {
    let Some(c) = Containerd::start(false, "") else {
        return;
    };
    let rootfs = busybox_rootfs(c.dir.path());
    let rootfs = rootfs.to_str().unwrap();
    // Attached, removed after: output through the shim's fifos, the exit status propagated;
    // the year is reprorun's pinned date (so it was reprorun, not runc, that ran it).
    let o = c.ctr(&[
        "run",
        "--runc-binary",
        BIN,
        "--rm",
        "--rootfs",
        rootfs,
        "one",
        "sh",
        "-c",
        "echo hello from the container; date +%Y; exit 3",
    ]);
    assert_eq!(
        expect_code(&o, 3),
        "hello from the container\n2024\n",
        "log: {}",
        c.log()
    );
    assert_eq!(stdout(&c.ctr(&["containers", "ls", "-q"])), "");
    // No failed create or delete on the way (the shim logs reprorun's errors there).
    assert!(!c.log().contains("OCI runtime"), "{}", c.log());

    // Detached: running in reprorun's state, exec, kill, then task and container deleted.
    let o = c.ctr(&[
        "run",
        "-d",
        "--runc-binary",
        BIN,
        "--rootfs",
        rootfs,
        "two",
        "sleep",
        "1000",
    ]);
    expect_code(&o, 0);
    assert_eq!(task_status(&c, "two").as_deref(), Some("RUNNING"));
    let root = c.runtime_root();
    let state = Command::new(BIN)
        .arg("--root")
        .arg(&root)
        .args(["state", "two"])
        .output()
        .unwrap();
    let state: serde_json::Value = serde_json::from_str(&expect_code(&state, 0)).unwrap();
    assert_eq!(state["status"], "running");
    let o = c.ctr(&[
        "task",
        "exec",
        "--exec-id",
        "e1",
        "two",
        "sh",
        "-c",
        "echo in exec; exit 4",
    ]);
    assert_eq!(expect_code(&o, 4), "in exec\n");
    // A running task is not deleted.
    let o = c.ctr(&["task", "delete", "two"]);
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    expect_code(&c.ctr(&["task", "kill", "two"]), 0);
    assert!(
        wait_until(Duration::from_secs(30), || task_status(&c, "two")
            .as_deref()
            == Some("STOPPED")),
        "task did not stop on SIGTERM: {:?}",
        task_status(&c, "two")
    );
    expect_code(&c.ctr(&["task", "delete", "two"]), 0);
    expect_code(&c.ctr(&["containers", "delete", "two"]), 0);
    assert_eq!(stdout(&c.ctr(&["containers", "ls", "-q"])), "");
    // reprorun's state is gone (the shim's final `delete --force` found nothing: no error).
    let list = Command::new(BIN)
        .arg("--root")
        .arg(&root)
        .args(["list", "-q"])
        .output()
        .unwrap();
    assert_eq!(expect_code(&list, 0), "");
    assert!(!c.log().contains("OCI runtime"), "{}", c.log());
}

/// The runtime entry Kubernetes' `RuntimeClass` (`handler: reprorun`) names.
fn cri_runtime(bin: &str) -> String {
    format!(
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.reprorun]\n  \
         runtime_type = \"io.containerd.runc.v2\"\n\
         [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.reprorun.options]\n  \
         BinaryName = \"{bin}\"\n"
    )
}

#[test]
fn the_cri_plugin_loads_a_reprorun_runtime_entry() {
    // With runc's entry kept (the default runtime), the CRI plugin loads, with ours.
    let runc = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  \
                runtime_type = \"io.containerd.runc.v2\"\n";
    let Some(c) = Containerd::start(true, &format!("{}{runc}", cri_runtime(BIN))) else {
        return;
    };
    let plugins = expect_code(&c.ctr(&["plugins", "ls"]), 0);
    let cri = plugins
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("cri"))
        .unwrap_or_else(|| panic!("no cri plugin: {plugins}"));
    assert!(cri.trim_end().ends_with("ok"), "{cri}\n{}", c.log());
    // The config the plugin started with has the runtime and its binary.
    let log = c.log();
    assert!(
        log.contains("reprorun:{Type:io.containerd.runc.v2")
            && log.contains(&format!("Options:map[BinaryName:{BIN}]")),
        "{log}"
    );
    drop(c);

    // Without a `runc` entry (a config that lists only ours), the plugin refuses to load:
    // `default_runtime_name` must then name reprorun.
    let Some(c) = Containerd::start(true, &cri_runtime(BIN)) else {
        return;
    };
    let plugins = expect_code(&c.ctr(&["plugins", "ls"]), 0);
    let cri = plugins
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("cri"))
        .unwrap_or_else(|| panic!("no cri plugin: {plugins}"));
    assert!(cri.trim_end().ends_with("error"), "{cri}");
    assert!(c.log().contains("default_runtime_name"), "{}", c.log());
    drop(c);
    let only_ours = format!(
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"reprorun\"\n{}",
        cri_runtime(BIN)
    );
    let Some(c) = Containerd::start(true, &only_ours) else {
        return;
    };
    let plugins = expect_code(&c.ctr(&["plugins", "ls"]), 0);
    assert!(
        plugins
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("cri") && l.trim_end().ends_with("ok")),
        "{plugins}\n{}",
        c.log()
    );
}
