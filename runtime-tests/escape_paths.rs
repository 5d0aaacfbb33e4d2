//! Escape attempts against the uid model and the host-path rule (issue 42, items 1 and 2):
//! a root caller's workload must never be the host's root (no root-only host file read, no
//! set-id file left in its work tree), and nothing reprorun opens on the host for a later
//! run follows what an earlier run planted in its `/work` (a link, absolute or relative, a
//! FIFO, a device). Each `attempt_*` is listed in `escape.rs`'s `host_side_tests!`, so the
//! escape summary counts it; each returns `Ok(detail)` when the attempt was blocked.

use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Runs `cmd`, killing it after `limit`: a hang is an escape too (a FIFO that blocks the
/// next run before it starts).
fn output_within(cmd: &mut Command, limit: Duration) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let start = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {limit:?}: it hung"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().map_err(|e| e.to_string())
}

/// A root caller's workload writes a setuid-root shell, a setgid file and a file created
/// with the set-id bits into its work tree (the host's root owns it): none may be set-id on
/// the host afterwards (`setpriv --reuid=65534 ./rootsh -p` would be a root shell).
pub(crate) fn attempt_setid_left_on_host() -> Result<String, String> {
    if !is_root() {
        return Err("needs root (the uid model of a root caller)".into());
    }
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "cp /bin/sh /work/rootsh; chmod 4755 /work/rootsh; chmod u+s /work/rootsh; \
         cp /bin/sh /work/groupsh; chmod 2755 /work/groupsh; \
         python3 -c 'import os; os.close(os.open(\"/work/made\", os.O_CREAT | os.O_WRONLY, 0o6755))'; \
         mkdir /work/d; chmod 2775 /work/d; true",
    ]);
    let mut setid = Vec::new();
    for entry in std::fs::read_dir(w.path()).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        if meta.mode() & 0o6000 != 0 {
            setid.push(format!(
                "{} {:o} uid {}",
                entry.file_name().to_string_lossy(),
                meta.mode(),
                meta.uid()
            ));
        }
    }
    if !setid.is_empty() {
        return Err(format!(
            "set-id files on the host: {setid:?} ({})",
            stderr(&o)
        ));
    }
    if !w.path().join("rootsh").exists() {
        return Err(format!(
            "the workload could not write its tree: {}",
            stderr(&o)
        ));
    }
    Ok("no set-id file on the host; chmod/open with S_ISUID/S_ISGID refused".into())
}

/// A root-only host file (mode 0600, the host's root's) read by a root caller's workload
/// through the read-only host root: it must be foreign to the workload, whatever its name
/// (`/etc/shadow` here, and a made-up key the audit's denylist never heard of).
pub(crate) fn attempt_root_only_host_file() -> Result<String, String> {
    if !is_root() {
        return Err("needs root (the uid model of a root caller)".into());
    }
    let dir = tempfile::Builder::new()
        .prefix("reprorun-escape-")
        .tempdir_in("/var/tmp")
        .map_err(|e| e.to_string())?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let key = dir.path().join("service.key");
    std::fs::write(&key, "SECRET-KEY-MATERIAL\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let w = Work::new();
    let script = format!(
        "cat {} 2>/dev/null; head -c 64 /etc/shadow 2>/dev/null; \
         cat /proc/self/uid_map | tr -s ' '; id -u",
        key.display()
    );
    let o = w.run(&["exec", "--", "sh", "-c", &script]);
    let out = stdout(&o);
    if out.contains("SECRET-KEY-MATERIAL") || out.contains("root:") {
        return Err(format!("read a root-only host file: {out:?}"));
    }
    let map = out.lines().find(|l| l.starts_with(" 0 ")).unwrap_or("");
    let outside: u64 = map
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if outside < 65536 {
        return Err(format!("the sandbox's uid 0 is host id {outside}: {out:?}"));
    }
    Ok(format!(
        "root-only files unreadable; uid 0 is host id {outside}"
    ))
}

/// What an earlier run can leave at a path the next run names.
#[derive(Debug, Clone, Copy)]
enum Plant {
    /// An absolute link to a host file or directory.
    AbsLink,
    /// A relative link (`../../..` up to the host's root and down).
    RelLink,
    Fifo,
    /// A character device (the null device's numbers; `/dev/zero`'s for reads).
    Device,
}

const PLANTS: [Plant; 4] = [Plant::AbsLink, Plant::RelLink, Plant::Fifo, Plant::Device];

/// Plants `what` at `at`, pointing links at `target`; `dev`: the device's minor (1:N).
fn plant(what: Plant, at: &Path, target: &Path, dev: u64) {
    match what {
        Plant::AbsLink => symlink(target, at).unwrap(),
        Plant::RelLink => {
            let ups = at.parent().unwrap().components().count() - 1;
            let rel = PathBuf::from("../".repeat(ups)).join(target.strip_prefix("/").unwrap());
            symlink(rel, at).unwrap()
        }
        Plant::Fifo => {
            nix::unistd::mkfifo(at, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap()
        }
        Plant::Device => nix::sys::stat::mknod(
            at,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, dev),
        )
        .unwrap(),
    }
}

/// One flag that names a host path, the way a later run names a file an earlier one left.
struct Case {
    flag: &'static str,
    /// The arguments, with `P` standing for the planted path (relative to the work dir).
    args: &'static [&'static str],
    /// Whether the path is a directory (links point at a directory then).
    dir: bool,
    /// The device minor: 3 (null) for writes, 5 (zero) for reads.
    dev: u64,
}

const CASES: &[Case] = &[
    Case {
        flag: "--net-log",
        args: &[
            "exec",
            "--allow-host",
            "example.test",
            "--net-log",
            "P",
            "--",
            "true",
        ],
        dir: false,
        dev: 3,
    },
    Case {
        flag: "--record",
        args: &["exec", "--record", "P", "--", "true"],
        dir: false,
        dev: 3,
    },
    Case {
        flag: "--env-file",
        args: &["exec", "--env-file", "P", "--", "env"],
        dir: false,
        dev: 5,
    },
    Case {
        flag: "--keep-changes",
        args: &[
            "exec",
            "--workdir-mode",
            "overlay",
            "--keep-changes",
            "P/kept",
            "--",
            "touch",
            "/work/x",
        ],
        dir: true,
        dev: 3,
    },
    Case {
        flag: "--mirror",
        args: &["exec", "--mirror", "P", "--", "true"],
        dir: true,
        dev: 3,
    },
    Case {
        flag: "--rootfs",
        args: &["exec", "--rootfs", "P", "--", "/bin/true"],
        dir: true,
        dev: 3,
    },
    Case {
        flag: "--upstream-ca",
        args: &[
            "exec",
            "--allow-host",
            "example.test",
            "--net-record",
            "rec",
            "--upstream-ca",
            "P",
            "--",
            "true",
        ],
        dir: false,
        dev: 5,
    },
    Case {
        flag: "--db",
        args: &["reproduce", "report", "--db", "P", "--out", "report"],
        dir: false,
        dev: 3,
    },
];

/// Every flag that names a host path a run could have planted, each planted with an
/// absolute link, a relative link, a FIFO and a device: the run is refused (or, for a
/// path it creates, the plant is not followed), promptly, and the link's target is
/// untouched.
pub(crate) fn attempt_planted_host_paths() -> Result<String, String> {
    let mut escaped = Vec::new();
    let mut checked = 0;
    for case in CASES {
        for what in PLANTS {
            if let Err(e) = one_plant(case, what) {
                escaped.push(format!("{} {what:?}: {e}", case.flag));
            }
            checked += 1;
        }
    }
    if !escaped.is_empty() {
        return Err(escaped.join("\n"));
    }
    Ok(format!("{checked} planted paths refused or not followed"))
}

fn one_plant(case: &Case, what: Plant) -> Result<(), String> {
    let w = Work::new();
    // The host file or directory a link points at: must stay as it was.
    let victim_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let victim = match case.dir {
        true => victim_dir.path().to_path_buf(),
        false => {
            let f = victim_dir.path().join("victim");
            std::fs::write(&f, "SECRET=host-value\n").unwrap();
            f
        }
    };
    let planted = w.path().join("planted");
    plant(what, &planted, &victim, case.dev);
    let args: Vec<&str> = case
        .args
        .iter()
        .map(|a| match *a {
            "P" => "planted",
            "P/kept" => "planted/kept",
            other => other,
        })
        .collect();
    let o = output_within(&mut w.cmd(&args), Duration::from_secs(30))?;
    let untouched = match case.dir {
        true => std::fs::read_dir(&victim)
            .map(|d| d.count() == 0)
            .unwrap_or(false),
        false => std::fs::read_to_string(&victim).is_ok_and(|t| t == "SECRET=host-value\n"),
    };
    if !untouched {
        return Err(format!("the link's target changed ({})", stderr(&o)));
    }
    if stdout(&o).contains("host-value") {
        return Err("the target's contents reached the sandbox".into());
    }
    if o.status.success() {
        return Err(format!("accepted: {}", stderr(&o)));
    }
    Ok(())
}
