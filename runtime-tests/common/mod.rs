//! Helpers shared by the runtime tests.

#![allow(dead_code)]

#[macro_use]
pub mod skip;
pub mod audit;
pub mod cache;
pub mod tls;
pub use skip::Need;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_reprorun");

/// A fresh working directory, mounted at /work by default.
pub struct Work {
    pub dir: tempfile::TempDir,
}

impl Work {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        Work { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `reprorun ARGS...` with this directory as the caller's cwd and a clean-ish caller env.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(self.path())
            .env_remove("REPRORUN_ISOLATION");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("spawn reprorun")
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the exit status and returns stdout.
#[track_caller]
pub fn expect_code(o: &Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "exit status; stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Asserts a runtime error: exit 125 and exactly one `reprorun: ...` line on stderr.
#[track_caller]
pub fn expect_error(o: &Output, needle: &str) {
    expect_code(o, 125);
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(err.starts_with("reprorun: "), "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
}

/// Asserts a usage error found by the argument parser: exit 125, `reprorun: ` and the
/// parser's whole message (which contains `needle`), ending with the hint to `command --help`.
#[track_caller]
pub fn expect_usage_error(o: &Output, needle: &str, command: &str) {
    expect_code(o, 125);
    let err = stderr(o);
    assert!(err.starts_with("reprorun: "), "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    let hint = format!("For more information, try '{command} --help'.");
    assert_eq!(err.lines().last(), Some(hint.as_str()), "{err}");
}

/// Asserts bad input: a one-line runtime error, or a usage error (the parser's whole
/// message, ending with the hint to a subcommand's `--help`).
#[track_caller]
pub fn expect_bad_input(o: &Output, needle: &str) {
    let err = stderr(o);
    if err.lines().count() == 1 {
        return expect_error(o, needle);
    }
    expect_code(o, 125);
    assert!(err.starts_with("reprorun: "), "{err}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.starts_with("For more information, try 'reprorun ") && last.ends_with(" --help'."),
        "{err}"
    );
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Command lines of every process on the host.
pub fn host_cmdlines() -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
                out.push(String::from_utf8_lossy(&raw).replace('\0', " "));
            }
        }
    }
    out
}

/// Polls until `cond` holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// A marker unique to this test process, for finding our processes on the host.
pub fn marker(tag: u32) -> String {
    format!("{}.{}", 3000 + tag, std::process::id())
}

/// The host's mount table, without fields that change on their own.
pub fn host_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().take(5).collect::<Vec<_>>().join(" "))
        .collect()
}

/// An unprivileged user for rootless tests, created on first use (root only).
pub fn rootless_user() -> Option<(u32, u32)> {
    if let Some(why) = Need::Root.unmet() {
        // The caller's rootless cases do not run (under strict skips: the test fails).
        skip::skipped(
            &format!("its rootless cases: creating their user {why}"),
            false,
        );
        return None;
    }
    const NAME: &str = "reprorun-rootless";
    let exists = Command::new("id").arg("-u").arg(NAME).output().unwrap();
    if !exists.status.success() {
        let made = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                NAME,
            ])
            .output()
            .expect("useradd");
        // 9: created meanwhile by a parallel test.
        assert!(
            made.status.success() || made.status.code() == Some(9),
            "{made:?}"
        );
    }
    let id = |flag: &str| -> u32 {
        let o = Command::new("id").args([flag, NAME]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    Some((id("-u"), id("-g")))
}

/// `BIN ARGS` run as the unprivileged user `(uid, gid)` (no supplementary groups) from `cwd`.
pub fn as_user(user: (u32, u32), bin: &Path, args: &[&str], cwd: &Path) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={}", user.0),
            &format!("--regid={}", user.1),
            "--clear-groups",
            "--",
        ])
        .arg(bin)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("setpriv")
}

/// A copy of the reprorun binary in a directory every user can read and traverse.
pub fn world_readable_binary() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("reprorun");
    std::fs::copy(BIN, &path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, path)
}

/// Runs a command with `input` on stdin.
pub fn with_stdin(mut cmd: Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Parses a JSON file written by a run (e.g. a `--record`).
#[track_caller]
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Builds a probe program: `gcc -O2 FLAGS -o OUT SRC`, or (for a `.go` source) a static Go
/// build with its caches under `scratch`. Panics with the compiler's output on failure.
pub fn build_probe(src: &Path, out: &Path, gcc_flags: &[&str], scratch: &Path) {
    let mut cmd = if src.extension().is_some_and(|e| e == "go") {
        let mut c = Command::new("go");
        c.args(["build", "-o"])
            .arg(out)
            .arg(src)
            .env("CGO_ENABLED", "0")
            .env("GOCACHE", scratch.join("gocache"))
            .env("GOPATH", scratch.join("gopath"))
            .env("GO111MODULE", "off");
        c
    } else {
        let mut c = Command::new("gcc");
        c.arg("-O2").args(gcc_flags).arg("-o").arg(out).arg(src);
        c
    };
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("build {}: {e} (run .ci/setup)", src.display()));
    assert!(
        o.status.success(),
        "build {}: {}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Lowercase hex sha256 (the names of an audit corpus's trees and papers).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tar of `files` (path, contents, mode), as `reprorun audit snapshot` writes trees.
pub fn tree_tar(files: &[(&str, &str, u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, contents, mode) in files {
        let mut h = tar::Header::new_ustar();
        h.set_size(contents.len() as u64);
        h.set_mode(*mode);
        h.set_mtime(0);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, contents.as_bytes()).unwrap();
    }
    b.into_inner().unwrap()
}

/// Stores a snapshot tree in the audit corpus `dir` (`trees/<sha256>.tar`); returns its id.
pub fn store_tree(dir: &Path, files: &[(&str, &str, u32)]) -> String {
    let tar = tree_tar(files);
    let digest = sha256_hex(&tar);
    std::fs::create_dir_all(dir.join("trees")).unwrap();
    std::fs::write(dir.join("trees").join(format!("{digest}.tar")), &tar).unwrap();
    digest
}

/// Stores a Markdown paper in the audit corpus `dir`; returns its file name in `papers/`.
pub fn store_paper(dir: &Path, text: &str) -> String {
    let name = format!("{}.md", sha256_hex(text.as_bytes()));
    std::fs::create_dir_all(dir.join("papers")).unwrap();
    std::fs::write(dir.join("papers").join(&name), text).unwrap();
    name
}

/// Writes the audit corpus manifest `dir/corpus.json`.
pub fn write_manifest(dir: &Path, manifest: &serde_json::Value) {
    std::fs::write(
        dir.join("corpus.json"),
        serde_json::to_vec_pretty(manifest).unwrap(),
    )
    .unwrap();
}

/// Makes `fd` descriptor 3 of the command `cmd` starts, without close-on-exec (a descriptor
/// the caller hands to, or leaks into, `reprorun`).
pub fn pass_as_fd3(cmd: &mut Command, fd: std::os::fd::RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: dup2 and fcntl are async-signal-safe; fd 3 ends up a copy of `fd` without
    // close-on-exec (dup2 clears the flag; if `fd` is 3 already, fcntl).
    unsafe {
        cmd.pre_exec(move || {
            let r = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
