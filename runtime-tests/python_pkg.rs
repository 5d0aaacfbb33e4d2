//! The Python package (`python/`, issue 49): `python/build.sh` builds the wheel around this
//! binary, pip installs it into a fresh virtual environment beside the pinned `inspect-ai`,
//! `swe-rex` and `pytest` (`python/requirements-test.txt`, downloaded by `.ci/setup` into a
//! local wheelhouse: the install is offline), and the package's own suite (`python/tests`:
//! the API, the long-lived sandbox, the Inspect provider through an Inspect task on the mock
//! model, the SWE-ReX deployment through SWE-ReX's runtime API) runs against what pip put there.

use crate::common::skip::Need;
use crate::common::{stderr, stdout, BIN};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where `.ci/setup` puts the pinned packages' wheels, and the file it writes when all are there.
const WHEELHOUSE: &str = "/var/cache/reprorun/python-wheels";
const WHEELHOUSE_COMPLETE: &str = "/var/cache/reprorun/python-wheels/.complete";
/// Debian's interpreter: the sandbox sees it (the host's root, read-only), unlike one under
/// the caller's home.
const PYTHON: &str = "/usr/bin/python3";

fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

fn check(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    out
}

/// A directory the sandbox sees as the host has it: not under /tmp (the sandbox's is
/// private), the caller's home or the work tree.
fn visible_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("reprorun-python-")
        .tempdir_in("/var/tmp")
        .expect("tempdir in /var/tmp")
}

fn build_wheel(out: &Path) -> PathBuf {
    let built = check(
        "python/build.sh",
        Command::new(python_dir().join("build.sh"))
            .arg(out)
            .env("REPRORUN_BIN", BIN)
            .output()
            .expect("python/build.sh"),
    );
    PathBuf::from(stdout(&built).trim())
}

#[test]
fn wheel_installs_and_its_suite_passes() {
    require!(
        Need::Root,
        Need::Path(
            PYTHON,
            "Debian's python3 with venv (.ci/setup installs python3-venv)"
        ),
        Need::Path(
            WHEELHOUSE_COMPLETE,
            "the pinned Python packages (.ci/setup downloads them)"
        ),
    );
    let scratch = visible_tempdir();
    let wheel = build_wheel(&scratch.path().join("dist"));
    let version = env!("CARGO_PKG_VERSION");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("reprorun-{version}-py3-none-"))
            && name.contains("manylinux_2_17_x86_64"),
        "{name}"
    );
    let venv = scratch.path().join("venv");
    check(
        "python3 -m venv",
        Command::new(PYTHON)
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .unwrap(),
    );
    let requirements = python_dir().join("requirements-test.txt");
    check(
        "pip install (offline)",
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "-q",
                "--no-index",
                "--find-links",
                WHEELHOUSE,
                "-r",
            ])
            .arg(&requirements)
            .arg(&wheel)
            .output()
            .unwrap(),
    );
    // pip put the binary on the environment's PATH, and it is this one.
    let version_out = check(
        "reprorun --version",
        Command::new(venv.join("bin/reprorun"))
            .arg("--version")
            .output()
            .unwrap(),
    );
    assert_eq!(stdout(&version_out).trim(), format!("reprorun {version}"));
    let run = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::DeprecationWarning",
        ])
        .arg(python_dir().join("tests"))
        .current_dir(scratch.path())
        .env_remove("REPRORUN_BIN")
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    let out = check("pytest python/tests", run);
    let summary = stdout(&out);
    assert!(
        summary.contains(" passed") && !summary.contains("skipped"),
        "{summary}"
    );
}

#[test]
fn build_refuses_a_binary_of_another_version() {
    require!(Need::Path(PYTHON, "python3"));
    let scratch = visible_tempdir();
    let fake = scratch.path().join("reprorun");
    std::fs::write(&fake, "#!/bin/sh\necho reprorun 9.9.9\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(python_dir().join("build.sh"))
        .arg(scratch.path().join("dist"))
        .env("REPRORUN_BIN", &fake)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is version 9.9.9"),
        "{}",
        stderr(&out)
    );
    assert!(!scratch.path().join("dist").exists());
}
