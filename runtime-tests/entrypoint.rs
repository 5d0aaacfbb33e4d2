//! reprorun as the ENTRYPOINT of a container image, in a real engine: podman with runc (as
//! root, its default settings otherwise), the busybox and Python images of `images/`, the
//! static reprorun binary bound in at /ep/reprorun. Each security setting a benchmark's
//! container may run under is tried with every `--isolation` mode.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::common::*;

const BUSYBOX: &str = "localhost/reprorun-entry-busybox:latest";
const PYTHON: &str = "localhost/reprorun-entry-python:3.11";
const EXAMPLE: &str = "localhost/reprorun-entry-example:latest";

/// The container settings: podman's default (its seccomp profile, no CAP_SYS_ADMIN), and the
/// usual variations of a benchmark's `podman run`.
const SETTINGS: &[(&str, &[&str])] = &[
    ("default", &[]),
    ("unconfined", &["--security-opt", "seccomp=unconfined"]),
    ("sys-admin", &["--cap-add", "SYS_ADMIN"]),
    (
        "no-new-privileges",
        &["--security-opt", "no-new-privileges"],
    ),
];

/// The fallback line of `--isolation=auto` (`spec/sandbox.md`).
const FALLBACK: &str = "reprorun: warning: full isolation unavailable (";

/// The lines a pins-only run may print for a piece the host refuses (`spec/sandbox.md`).
const PIECES: &[&str] = &[
    "reprorun: warning: address-space layout stays randomized here: personality refused (",
    "reprorun: warning: static and Go programs see the real clock here: ",
    "reprorun: warning: getrandom returns real entropy here: ",
    "reprorun: warning: directories list in the file system's order here: ",
    "reprorun: warning: uname, sysinfo and sched_getaffinity answer with the host's values here: ",
    "reprorun: warning: static programs get real AT_RANDOM bytes here: ",
    "reprorun: warning: dynamic programs see the real clock here: ",
];

/// The container's network and limits (the caller's hard limits may be lower than podman's
/// defaults).
const LIMITS: &[&str] = &[
    "--network",
    "none",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
];

fn podman() -> Option<Command> {
    require!(
        Need::Root,
        Need::Tool("podman"),
        Need::Tool("runc"),
        Need::Tool("skopeo")
    );
    let mut c = Command::new("podman");
    c.args([
        "--runtime",
        "runc",
        "--cgroup-manager=cgroupfs",
        "--events-backend=file",
        "--log-level=error",
    ]);
    c.stdin(Stdio::null());
    Some(c)
}

fn podman_out(args: &[&str]) -> Output {
    let mut c = podman().unwrap();
    c.args(args);
    c.output().unwrap()
}

/// Imports the image `recipe` (under `images/`) builds as `name`, unless it is there.
fn image(recipe: &str, layout_name: &str, name: &str) -> Option<()> {
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let mut p = podman()?;
    if p.args(["image", "exists", name])
        .status()
        .unwrap()
        .success()
    {
        return Some(());
    }
    let w = Work::new();
    let layout = w.path().join("layout");
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("images")
        .join(recipe);
    let o = Command::new(&recipe).arg(&layout).output().unwrap();
    assert!(o.status.success(), "{}: {o:?}", recipe.display());
    let o = Command::new("skopeo")
        .arg("copy")
        .arg("-q")
        .arg(format!("oci:{}:{layout_name}", layout.display()))
        .arg(format!("containers-storage:{name}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "skopeo copy: {o:?}");
    Some(())
}

/// `podman run --rm` of `image` with reprorun bound in; the engine ends a run that hangs.
fn run(setting: &[&str], image: &str, cmd: &[&str]) -> Output {
    let bind = format!("{BIN}:/ep/reprorun:ro");
    let mut args = vec!["run", "--rm", "--timeout", "60", "-v", &bind];
    args.extend_from_slice(LIMITS);
    args.extend_from_slice(setting);
    args.push(image);
    args.extend_from_slice(cmd);
    // No retry of a bare 125: the silent 125s once put down to podman were reprorun's own
    // lost setup report (`recv_packet` and ECONNRESET), and a retry would hide them again.
    podman_out(&args)
}

/// Checks stderr of a run of `mode` that is expected to run the workload: for `auto`
/// exactly one fallback line, first; then only documented piece warnings, each at most once.
/// Returns the piece warnings.
fn check_warnings(o: &Output, mode: &str, what: &str) -> Vec<String> {
    let err = stderr(o);
    let mut lines: Vec<&str> = err.lines().collect();
    if mode == "auto" {
        assert!(
            !lines.is_empty() && lines.remove(0).starts_with(FALLBACK),
            "{what}: one fallback line first: {err}"
        );
    }
    for l in &lines {
        assert!(
            PIECES.iter().any(|p| l.starts_with(p)),
            "{what}: an undocumented line: {l}\n{err}"
        );
        assert_eq!(
            lines.iter().filter(|m| *m == l).count(),
            1,
            "{what}: a repeated line: {err}"
        );
    }
    lines.into_iter().map(String::from).collect()
}

/// Every mode under every setting, busybox (static programs only: `sh`, `date`): `full`
/// fails closed in one line naming the refused step with the `--isolation=auto` hint, exit
/// 125 and nothing run; `auto` warns once and runs pins-only; `none` runs pins-only; both
/// with TZ=UTC and the fake date seen by the static `date` (no clock warning), and a
/// `--timeout` that ends a static program's run (once the cause of a run stuck in tracing
/// stop).
#[test]
fn entrypoint_modes_under_podman_settings() {
    if image("busybox/build.sh", "busybox:latest", BUSYBOX).is_none() {
        return;
    }
    for (name, setting) in SETTINGS {
        for mode in ["full", "auto", "none"] {
            let what = format!("{name}/{mode}");
            let iso = format!("--isolation={mode}");
            let o = run(
                setting,
                BUSYBOX,
                &[
                    "/ep/reprorun",
                    "exec",
                    &iso,
                    "--date",
                    "2021-03-04",
                    "--",
                    "sh",
                    "-c",
                    "echo TZ=$TZ; date +%F; busybox date +%F; exit 3",
                ],
            );
            if mode == "full" {
                let err = stderr(&o);
                assert_eq!(o.status.code(), Some(125), "{what}: {o:?}");
                assert_eq!(stdout(&o), "", "{what}: the workload must not run");
                assert_eq!(err.lines().count(), 1, "{what}: {err}");
                assert!(
                    err.starts_with("reprorun: ") && err.contains(": E"),
                    "{what}: names the step and its errno: {err}"
                );
                assert!(err.contains("--isolation=auto"), "{what}: {err}");
                continue;
            }
            assert_eq!(o.status.code(), Some(3), "{what}: {o:?}");
            assert_eq!(
                stdout(&o),
                "TZ=UTC\n2021-03-04\n2021-03-04\n",
                "{what}: {o:?}"
            );
            let pieces = check_warnings(&o, mode, &what);
            // Podman's default profile refuses personality(ADDR_NO_RANDOMIZE) unless it is
            // off; nothing else a pins-only run uses is refused by any of these settings.
            let aslr = PIECES[0];
            let expected: Vec<&str> = match *name {
                "unconfined" | "privileged" => vec![],
                _ => vec![aslr],
            };
            let got: Vec<&str> = pieces
                .iter()
                .map(|l| PIECES.iter().find(|p| l.starts_with(*p)).copied().unwrap())
                .collect();
            assert_eq!(got, expected, "{what}: {}", stderr(&o));
        }
    }
    // A static program that runs past --timeout is ended in every pins-only setting.
    for (name, setting) in &SETTINGS[..2] {
        let o = run(
            setting,
            BUSYBOX,
            &[
                "/ep/reprorun",
                "exec",
                "--isolation=auto",
                "--timeout",
                "1s",
                "--",
                "busybox",
                "sleep",
                "100",
            ],
        );
        assert_eq!(o.status.code(), Some(124), "{name}: {o:?}");
    }
}

/// A dynamic program (the Python image) sees TZ=UTC and the fake date through the preload
/// library in a pins-only run, under every setting.
#[test]
fn entrypoint_python_sees_the_fake_clock_under_podman_settings() {
    if image("python/build.sh", "python:3.11", PYTHON).is_none() {
        return;
    }
    let script =
        "import os, time; print(os.environ['TZ'], time.strftime('%F %H:%M', time.localtime()))";
    for (name, setting) in SETTINGS {
        let o = run(
            setting,
            PYTHON,
            &[
                "/ep/reprorun",
                "exec",
                "--isolation=auto",
                "--date",
                "2021-03-04T05:06:00Z",
                "--clock",
                "frozen",
                "--",
                "python3",
                "-c",
                script,
            ],
        );
        assert_eq!(expect_code(&o, 0), "UTC 2021-03-04 05:06\n", "{name}");
        check_warnings(&o, "auto", name);
    }
}

/// `podman stop` (SIGTERM to reprorun, the container's pid 1) ends a long-running workload
/// within the grace period in every mode that runs: the workload dies of the SIGTERM reprorun
/// passes on (143), not of the engine's SIGKILL after the grace period (137).
#[test]
fn podman_stop_ends_the_workload_within_the_grace_period() {
    if image("busybox/build.sh", "busybox:latest", BUSYBOX).is_none() {
        return;
    }
    let bind = format!("{BIN}:/ep/reprorun:ro");
    for (name, setting) in &SETTINGS[..2] {
        for mode in ["auto", "none"] {
            let what = format!("{name}/{mode}");
            let iso = format!("--isolation={mode}");
            let mut args = vec!["run", "-d", "-v", &bind];
            args.extend_from_slice(LIMITS);
            args.extend_from_slice(setting);
            args.extend_from_slice(&[BUSYBOX, "/ep/reprorun", "exec", &iso, "--", "sleep", "1000"]);
            let o = podman_out(&args);
            let id = expect_code(&o, 0).trim().to_string();
            // Running (reprorun started the workload) before the stop.
            assert!(
                wait_until(std::time::Duration::from_secs(20), || {
                    let o = podman_out(&["top", &id, "args"]);
                    stdout(&o).contains("sleep 1000")
                }),
                "{what}: the workload never started"
            );
            expect_code(&podman_out(&["stop", "-t", "20", &id]), 0);
            let o = podman_out(&["inspect", "--format", "{{.State.ExitCode}}", &id]);
            let code = expect_code(&o, 0);
            let _ = podman_out(&["rm", "-f", &id]);
            assert_eq!(code.trim(), "143", "{what}");
        }
    }
}

/// `images/entrypoint/Dockerfile` builds with `podman build` (offline, on the Python image)
/// and runs its default command and a given one under reprorun.
#[test]
fn entrypoint_dockerfile_example_builds_and_runs() {
    if image("python/build.sh", "python:3.11", PYTHON).is_none() {
        return;
    }
    let ctx = Work::new();
    std::fs::copy(BIN, ctx.path().join("reprorun")).unwrap();
    let dockerfile = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/entrypoint/Dockerfile");
    let base = format!("BASE={PYTHON}");
    let o = podman_out(&[
        "build",
        "--pull=never",
        "--build-arg",
        &base,
        "-t",
        EXAMPLE,
        "-f",
        dockerfile.to_str().unwrap(),
        ctx.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "podman build: {o:?}");
    let default = run(&[], EXAMPLE, &[]);
    let custom = run(
        &[],
        EXAMPLE,
        &["python3", "-c", "import time; print(time.strftime('%Y'))"],
    );
    let _ = podman_out(&["rmi", "-f", EXAMPLE]);
    // The example's CMD prints the date it sees: the pinned one.
    assert_eq!(expect_code(&default, 0), "2024-01-01\n");
    check_warnings(&default, "auto", "default CMD");
    assert_eq!(expect_code(&custom, 0), "2024\n");
    check_warnings(&custom, "auto", "given command");
}
