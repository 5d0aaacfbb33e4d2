//! Things that take minutes to make (a Debian root, an ecosystem's base image, a package's
//! `node_modules`), made once per machine and kept in `$REPRORUN_TEST_CACHE`, else
//! `/var/cache/reprorun-tests`: tests that want one at once wait on its lock, and a build
//! that failed or was interrupted leaves nothing the next test would take for done.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cache directory.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("REPRORUN_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/reprorun-tests"))
}

/// `CACHE/name`, made by `make(tmp)` into a fresh `tmp` the first time (under the lock
/// `CACHE/.name.lock`) and renamed into place once complete. `Err` says why it could not be
/// made.
pub fn cached(
    name: &str,
    make: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    let cache = cache_dir();
    std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let done = cache.join(name);
    let lock = std::fs::File::create(cache.join(format!(".{name}.lock")))
        .map_err(|e| format!("lock {name}: {e}"))?;
    // SAFETY: flock on a descriptor this function owns; the lock goes with the descriptor.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        return Err(format!("lock: {}", std::io::Error::last_os_error()));
    }
    if done.join(".complete").exists() {
        return Ok(done);
    }
    let tmp = cache.join(format!("{name}.tmp"));
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&done);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    if let Err(e) = make(&tmp) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::write(tmp.join(".complete"), b"").map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, &done).map_err(|e| e.to_string())?;
    Ok(done)
}

/// Runs `cmd` bounded by `timeout SECS`; `Err` names `what` and the last line of stderr.
pub fn run_bounded(what: &str, secs: u32, cmd: &mut Command) -> Result<(), String> {
    let prog = cmd.get_program().to_os_string();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_os_string()).collect();
    let mut bounded = Command::new("timeout");
    bounded.arg(secs.to_string()).arg(prog).args(args);
    if let Some(dir) = cmd.get_current_dir() {
        bounded.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => bounded.env(k, v),
            None => bounded.env_remove(k),
        };
    }
    let out = bounded.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "{what} failed ({}): {}",
        out.status,
        err.lines().last().unwrap_or("")
    ))
}

/// A Debian 11 (bullseye, glibc 2.31, python3.9) minbase root with `python3-minimal`, made by
/// debootstrap from deb.debian.org the first time (about 2.5 minutes, 230 MB; a mirror that
/// stalls ends it after 15 minutes).
pub fn bullseye_root() -> Result<PathBuf, String> {
    cached("debian-bullseye-minbase", |tmp| {
        run_bounded(
            "debootstrap bullseye",
            900,
            Command::new("debootstrap")
                .args(["--variant=minbase", "--include=python3-minimal", "bullseye"])
                .arg(tmp)
                .arg("http://deb.debian.org/debian"),
        )
    })
}

/// What each ecosystem's base adds to the bullseye root, from Debian 11's own packages.
#[derive(Debug, Clone, Copy)]
pub enum Ecosystem {
    /// golang-go: Go 1.15.
    Go,
    /// nodejs: Node.js 12 (its test runner comes from [`node_modules`]).
    Node,
    /// python3-pytest: pytest 6.0 on Python 3.9.
    Python,
}

impl Ecosystem {
    /// The Debian package, and the Docker Hub name the base stands in for.
    pub fn package_and_name(self) -> (&'static str, &'static str) {
        match self {
            Ecosystem::Go => ("golang-go", "golang:1.15-bullseye"),
            Ecosystem::Node => ("nodejs", "node:12-bullseye"),
            Ecosystem::Python => ("python3-pytest", "python:3.9-bullseye"),
        }
    }
}

/// The ecosystem's base image as an OCI layout (`images/oci-layout.py`, one layer): a copy of
/// the bullseye root with its package installed by apt-get in a chroot (bounded: 15 minutes),
/// apt's downloads, lists and the documentation removed, no device nodes (the sandbox makes
/// `/dev`). Named after the Docker Hub image it stands in for.
pub fn ecosystem_base(eco: Ecosystem) -> Result<PathBuf, String> {
    let root = bullseye_root()?;
    let (package, name) = eco.package_and_name();
    let layout = cached(&format!("bullseye-{package}-oci"), |tmp| {
        let r = tmp.join("root");
        run_bounded(
            "copy the bullseye root",
            600,
            Command::new("cp").arg("-a").arg(&root).arg(&r),
        )?;
        std::fs::copy("/etc/resolv.conf", r.join("etc/resolv.conf"))
            .map_err(|e| format!("resolv.conf: {e}"))?;
        run_bounded(
            &format!("apt-get install {package}"),
            900,
            Command::new("chroot")
                .arg(&r)
                .args(["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
                .args(["DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y"])
                .args(["--no-install-recommends", package]),
        )?;
        for dir in [
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
            "dev",
        ] {
            let _ = std::fs::remove_dir_all(r.join(dir));
        }
        let _ = std::fs::remove_file(r.join(".complete"));
        std::fs::create_dir_all(r.join("dev")).map_err(|e| e.to_string())?;
        std::fs::write(r.join("etc/resolv.conf"), b"").map_err(|e| e.to_string())?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/oci-layout.py");
        run_bounded(
            "oci-layout.py",
            900,
            Command::new("python3")
                .arg(script)
                .arg(&r)
                .arg(tmp.join("layout"))
                .args(["--name", name])
                .args([
                    "--env",
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                ]),
        )?;
        std::fs::remove_dir_all(&r).map_err(|e| e.to_string())
    })?;
    Ok(layout.join("layout"))
}

/// `node_modules` holding `package@version` and its dependencies, installed by the host's npm
/// from the npm registry the first time (bounded: 5 minutes), for a Dockerfile to `COPY`.
pub fn node_modules(package: &str, version: &str) -> Result<PathBuf, String> {
    let dir = cached(&format!("npm-{package}-{version}"), |tmp| {
        run_bounded(
            &format!("npm install {package}@{version}"),
            300,
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-save",
                    "--prefix",
                ])
                .arg(tmp)
                .arg(format!("{package}@{version}")),
        )
    })?;
    Ok(dir.join("node_modules"))
}
