//! One run: the arm's conditions turned into a sandbox request over the prepared tree, the
//! test command run with its output captured, and the outcome graded. Called by a worker
//! process; the sandbox is reprorun's own library, never its command line.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::input::Instance;
use super::outcome::{self, Tests};
use super::store::{RunRow, Store, StoreError};
use super::tree::{self, Variant};
use super::ReproduceError;
use super::{evidence, Arm, Infra, Pin};
use crate::determinism::clock::DateChoice;
use crate::determinism::{EnvProfile, RandomMode};
use crate::parse::BindSpec;
use crate::plan::{ExecRequest, ExtraMount, HostFacts, Isolation, NetMode};

/// Where the run's JUnit XML is asked for, inside the sandbox.
pub const OUT_DIR: &str = "/.reprorun/out";
pub const JUNIT: &str = "/.reprorun/out/junit.xml";

/// How runs are made (the study's options that shape a sandbox).
#[derive(Debug, Clone)]
pub struct Conditions {
    /// The test command's limit.
    pub timeout: Duration,
    /// `--memory`: a cgroup limit for each run.
    pub memory: Option<u64>,
    /// `--seed` for the shim's seeded sources.
    pub seed: u64,
    /// The index the no-shim arm installs from (`--no-shim-mirror`); `None`: the host's
    /// own configuration (the live index, through the network it allows).
    pub no_shim_mirror: Option<PathBuf>,
    /// `--no-shim-net`.
    pub no_shim_net: NetMode,
    /// The caller's environment, passed to host-like runs.
    pub host_env: Vec<(String, String)>,
    /// `--store`: the image store for instances with an `image`.
    pub store: Option<PathBuf>,
}

/// Variables of the caller that host-like runs do not take: reprorun's own, the shell's
/// bookkeeping, `HOME` (runs get a private writable one), paths that do not exist or are
/// read-only in the sandbox (`TMPDIR`, `XDG_*_HOME`, ...), and anything that looks like a
/// credential — the patch is untrusted code (`spec/reproduce.md`).
pub fn host_like(key: &str) -> bool {
    let upper = key.to_ascii_uppercase();
    let secret = [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "AUTH",
        "COOKIE",
        "SESSION",
    ]
    .iter()
    .any(|w| upper.contains(w))
        || [
            "AWS_", "AZURE_", "GOOGLE_", "GCP_", "GH_", "SSH_", "GPG_", "KRB5",
        ]
        .iter()
        .any(|p| upper.starts_with(p));
    let path = matches!(
        key,
        "TMPDIR"
            | "TMP"
            | "TEMP"
            | "XDG_RUNTIME_DIR"
            | "XDG_CACHE_HOME"
            | "XDG_CONFIG_HOME"
            | "XDG_DATA_HOME"
            | "XDG_STATE_HOME"
            | "DBUS_SESSION_BUS_ADDRESS"
    );
    !(secret
        || path
        || key.starts_with("REPRORUN_")
        || matches!(
            key,
            "HOME" | "PWD" | "OLDPWD" | "SHLVL" | "_" | "PYTEST_ADDOPTS" | "NOTIFY_SOCKET"
        ))
}

/// The shim's pins that are not "the environment" (they stay when the env pin is left
/// out): hash seeds and the build date.
const SEED_PINS: &[&str] = &[
    "PYTHONHASHSEED",
    "PERL_HASH_SEED",
    "PERL_PERTURB_KEYS",
    "SWIFT_DETERMINISTIC_HASHING",
    "SOURCE_DATE_EPOCH",
];

impl Conditions {
    /// What of these conditions a study's runs depend on, as text: a resumed study must
    /// be made under the same (`Store::check_options`).
    pub fn fingerprint(&self) -> String {
        serde_json::json!({
            "timeout_ms": self.timeout.as_millis() as u64,
            "memory": self.memory,
            "seed": self.seed,
            "no_shim_mirror": self.no_shim_mirror,
            "no_shim_net": self.no_shim_net,
        })
        .to_string()
    }

    pub fn new(timeout: Duration, seed: u64) -> Self {
        Conditions {
            timeout,
            memory: None,
            seed,
            no_shim_mirror: None,
            no_shim_net: NetMode::None,
            store: None,
            host_env: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| host_like(k))
                .collect(),
        }
    }
}

/// The sandbox request for `arm` over `tree`, writing into `out` (bound at [`OUT_DIR`]).
/// A host-like run intercepts nothing; a run without the directory-order pin lists
/// directories in the filesystem's order.
pub fn request(
    inst: &Instance,
    arm: Arm,
    cond: &Conditions,
    host: &HostFacts,
    tree: &Path,
    out: &Path,
) -> Result<ExecRequest, String> {
    let mut req = ExecRequest::new(vec!["/bin/sh".into(), "-c".into(), inst.test_cmd.clone()]);
    req.workdir = Some(tree.to_path_buf());
    req.workdir_overlay = true;
    req.isolation = Isolation::Full;
    req.timeout = Some(cond.timeout);
    req.resources.memory = cond.memory;
    req.seed = cond.seed;
    req.rootfs = inst.rootfs.clone();
    if let Some(reference) = &inst.image {
        let image = crate::plan::image::lookup(cond.store.clone(), reference);
        req.image = Some(image.map_err(|e| e.to_string())?);
    }
    let host_like = matches!(arm, Arm::NoShim | Arm::BaselineNoShim);
    let without = match arm {
        Arm::ShimWithout(p) => Some(p),
        _ => None,
    };
    req.intercept = !host_like;
    req.sorted_dirs = without != Some(Pin::DirOrder);
    let mut env = Vec::new();
    let mut mirror = inst.mirror.clone();
    if host_like {
        req.date = Some(DateChoice::Now);
        req.random = RandomMode::Real;
        req.pinned_env = false;
        req.net = cond.no_shim_net;
        req.cpus = Some(host.cpus_available);
        env.extend(cond.host_env.iter().cloned());
        mirror = cond.no_shim_mirror.clone();
    } else {
        req.date = Some(match without {
            Some(Pin::Clock) => DateChoice::Now,
            _ => DateChoice::Pinned(inst.bench_date),
        });
        if without == Some(Pin::Random) {
            req.random = RandomMode::Real;
        }
        if without == Some(Pin::Env) {
            // The caller's environment instead of the pinned one, the seed pins kept.
            req.pinned_env = false;
            env.extend(
                cond.host_env
                    .iter()
                    .filter(|(k, _)| !SEED_PINS.contains(&k.as_str()))
                    .cloned(),
            );
            let pins = EnvProfile::pinned(inst.bench_date, cond.seed);
            for k in SEED_PINS {
                if let Some(v) = pins.get(k) {
                    env.push((k.to_string(), v.to_string()));
                }
            }
        }
        if without == Some(Pin::HashSeed) {
            env.push(("PYTHONHASHSEED".into(), "random".into()));
            env.push(("PERL_PERTURB_KEYS".into(), "RANDOM".into()));
        }
        if without == Some(Pin::Cpus) {
            req.cpus = Some(host.cpus_available);
        }
        if without == Some(Pin::Network) {
            req.net = cond.no_shim_net;
        }
        if without == Some(Pin::Mirror) {
            mirror = cond.no_shim_mirror.clone();
        }
    }
    req.env = env;
    if let Some(dir) = &mirror {
        req.attach_mirror(dir).map_err(|e| e.to_string())?;
    }
    req.extra_mounts.push(ExtraMount::Bind(BindSpec {
        src: out.to_path_buf(),
        dest: OUT_DIR.into(),
        readonly: false,
    }));
    // The instruments come last: pytest writes JUnit XML and the -rA summary; other
    // runners may write their JUnit XML to $REPRORUN_JUNIT.
    req.env
        .push(("PYTEST_ADDOPTS".into(), format!("--junitxml={JUNIT} -rA")));
    req.env.push(("REPRORUN_JUNIT".into(), JUNIT.into()));
    Ok(req)
}

/// Resolves `req` and runs it with its stdout and stderr on the
/// given files. The outer error: the sandbox could not even be planned; the inner one is
/// the sandbox's own (`SandboxError::Exec` being the command's fault, the rest the host's).
pub fn sandboxed(
    req: &ExecRequest,
    host: &HostFacts,
    stdout: &File,
    stderr: &File,
) -> Result<Result<crate::sandbox::Outcome, crate::sandbox::SandboxError>, String> {
    let plan = crate::plan::resolve(req, host).map_err(|e| e.to_string())?;
    with_stdio(stdout, stderr, || crate::sandbox::run(&plan, &mut |_| {}))
        .map_err(|e| format!("redirect output: {e}"))
}

/// Runs `f` with the process's stdout and stderr on `out` and `err` (stdin on /dev/null),
/// then puts them back. Workers are single-purpose processes, so nothing else writes
/// meanwhile.
pub fn with_stdio<T>(out: &File, err: &File, f: impl FnOnce() -> T) -> std::io::Result<T> {
    use nix::fcntl::{fcntl, FcntlArg};
    use std::os::fd::FromRawFd;
    let save = |fd: i32| -> std::io::Result<OwnedFd> {
        let copy = fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(3))?;
        // SAFETY: fcntl just returned this new descriptor; we own it.
        Ok(unsafe { OwnedFd::from_raw_fd(copy) })
    };
    let null = File::open("/dev/null")?;
    let saved = [save(0)?, save(1)?, save(2)?];
    let set = |from: i32, to: i32| nix::unistd::dup2(from, to).map(|_| ());
    let result = set(null.as_raw_fd(), 0)
        .and_then(|()| set(out.as_raw_fd(), 1))
        .and_then(|()| set(err.as_raw_fd(), 2));
    let value = result.is_ok().then(f);
    for (fd, copy) in saved.iter().enumerate() {
        let _ = set(copy.as_raw_fd(), fd as i32);
    }
    result?;
    Ok(value.expect("ran when redirected"))
}

/// Makes one run and returns its row (logs already stored). Infra failures are rows too;
/// only a failure to record anything is an error.
pub fn run(
    store: &Store,
    inst: &Instance,
    arm: Arm,
    idx: u32,
    cond: &Conditions,
) -> Result<RunRow, ReproduceError> {
    let setup = |reason: String| ReproduceError::Setup {
        id: inst.instance_id.clone(),
        reason,
    };
    let started_at = super::unix_now_ms() / 1000;
    let variant = if arm.is_baseline() {
        Variant::Baseline
    } else {
        Variant::Patched
    };
    let listed: Vec<&str> = inst.listed_tests().into_iter().collect();
    let mut row = RunRow {
        instance_id: inst.instance_id.clone(),
        arm,
        idx,
        resolved: false,
        infra: None,
        exit_code: crate::exit::RUNTIME_ERROR,
        wall_ms: 0,
        started_at,
        signature: String::new(),
        evidence: Vec::new(),
        apply: String::new(),
        tests: "{}".into(),
        stdout_sha256: String::new(),
        stderr_sha256: String::new(),
        junit_sha256: None,
        error: None,
    };
    let infra =
        |mut row: RunRow, kind: Infra, out: &[u8], err: String| -> Result<RunRow, StoreError> {
            row.infra = Some(kind);
            row.resolved = false;
            row.signature = outcome::infra_signature(kind);
            row.evidence = if matches!(kind, Infra::Timeout | Infra::Oom) {
                vec![super::Mode::TimeoutResource]
            } else {
                Vec::new()
            };
            row.stdout_sha256 = store.put_log(out)?;
            row.stderr_sha256 = store.put_log(err.as_bytes())?;
            row.error = err.lines().next_back().map(str::to_string);
            Ok(row)
        };

    let work = store.work_dir();
    let tree =
        tree::ensure(&work.join("trees"), inst, variant).map_err(|e| setup(e.to_string()))?;
    row.apply = format!("model={} test={}", tree.applied.model, tree.applied.test);
    if !tree.applied.ok {
        let log = tree.applied.log.clone();
        let why = format!("patch did not apply ({})\n", row.apply);
        return Ok(infra(row, Infra::PatchApply, log.as_bytes(), why)?);
    }

    let scratch = work.join("runs").join(format!(
        "{}-{}-{}-{}",
        sanitize(&inst.instance_id),
        arm.name(),
        idx,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    let out = scratch.join("out");
    let io = |e: std::io::Error| setup(format!("{}: {e}", scratch.display()));
    std::fs::create_dir_all(&out).map_err(io)?;
    let (stdout_path, stderr_path) = (scratch.join("stdout"), scratch.join("stderr"));
    let stdout = File::create(&stdout_path).map_err(io)?;
    let stderr = File::create(&stderr_path).map_err(io)?;

    let host = HostFacts::current().map_err(|e| setup(e.to_string()))?;
    let req = request(inst, arm, cond, &host, &tree.dir, &out).map_err(&setup)?;
    let clock = Instant::now();
    let result = sandboxed(&req, &host, &stdout, &stderr).map_err(setup)?;
    let took = clock.elapsed();
    drop((stdout, stderr));
    let out_bytes = read_capped(&scratch, "stdout");
    let err_bytes = read_capped(&scratch, "stderr");
    let outcome = match result {
        Ok(o) => o,
        // The test command itself could not be executed: this instance's failure.
        Err(e @ crate::sandbox::SandboxError::Exec { .. }) => {
            let mut text = String::from_utf8_lossy(&err_bytes).into_owned();
            text.push_str(&format!("reprorun: {e}\n"));
            let row = infra(row, Infra::Runtime, &out_bytes, text);
            let _ = std::fs::remove_dir_all(&scratch);
            return Ok(row?);
        }
        // The sandbox could not be made: stop the study (resumable) rather than record
        // a failure that is the host's.
        Err(e) => {
            let _ = std::fs::remove_dir_all(&scratch);
            return Err(setup(format!("sandbox: {e}")));
        }
    };
    row.wall_ms = took.as_millis() as u64;
    row.exit_code = outcome.exit_code;
    if outcome.timed_out || outcome.oom_killed {
        let kind = if outcome.timed_out {
            Infra::Timeout
        } else {
            Infra::Oom
        };
        let row = infra(
            row,
            kind,
            &out_bytes,
            String::from_utf8_lossy(&err_bytes).into_owned(),
        );
        let _ = std::fs::remove_dir_all(&scratch);
        return Ok(row.map(|mut r| {
            r.wall_ms = took.as_millis() as u64;
            r.exit_code = outcome.exit_code;
            r
        })?);
    }

    // The sandbox wrote out/: read it as untrusted (no links, no FIFOs, capped).
    let junit = read_untrusted(&out, "junit.xml");
    // Both sources, JUnit first: a command that runs pytest twice overwrites the XML, and
    // a runner that writes none still prints its results.
    let mut tests: Tests = junit
        .as_deref()
        .and_then(|x| outcome::parse_junit(&String::from_utf8_lossy(x)))
        .unwrap_or_default();
    for (k, v) in outcome::parse_pytest(&String::from_utf8_lossy(&out_bytes)) {
        if outcome::lookup(&tests, &k).is_none() {
            tests.insert(k, v);
        }
    }
    let (resolved, signature) = outcome::grade(&tests, &listed, outcome.exit_code);
    row.resolved = resolved;
    row.signature = signature;
    if resolved != inst.recorded_resolved {
        let mut text = String::from_utf8_lossy(&out_bytes).into_owned();
        text.push_str(&String::from_utf8_lossy(&err_bytes));
        row.evidence = evidence::detect(&text);
    }
    let statuses: std::collections::BTreeMap<&str, &str> =
        tests.iter().map(|(k, v)| (k.as_str(), v.name())).collect();
    row.tests = serde_json::to_string(&statuses).unwrap_or_else(|_| "{}".into());
    row.stdout_sha256 = store.put_log(&out_bytes)?;
    row.stderr_sha256 = store.put_log(&err_bytes)?;
    row.junit_sha256 = junit.map(|x| store.put_log(&x)).transpose()?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(row)
}

/// The most of a log or result file kept: beyond it, the file is cut with a note.
pub const LOG_CAP: u64 = 64 << 20;

/// Reads `name` in `dir`, a directory the sandbox could write: only a regular file, never
/// through a link, never opening a FIFO or device (looked up with O_PATH first), at most
/// [`LOG_CAP`] bytes.
pub fn read_untrusted(dir: &Path, name: &str) -> Option<Vec<u8>> {
    read_untrusted_sized(dir, name).map(|(bytes, _)| bytes)
}

/// [`read_untrusted`], with the file's full size.
fn read_untrusted_sized(dir: &Path, name: &str) -> Option<(Vec<u8>, u64)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let probe = File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(dir.join(name))
        .ok()?;
    let file = crate::sys::reopen_regular(&probe, false).ok()?;
    let size = file.metadata().ok()?.len();
    let mut bytes = Vec::new();
    file.take(LOG_CAP).read_to_end(&mut bytes).ok()?;
    Some((bytes, size))
}

/// A log file of ours, at most [`LOG_CAP`] bytes (a note marks the cut).
fn read_capped(dir: &Path, name: &str) -> Vec<u8> {
    let (mut bytes, full) = read_untrusted_sized(dir, name).unwrap_or_default();
    if full > LOG_CAP {
        bytes.extend_from_slice(
            format!("\n[reprorun: log cut at {LOG_CAP} of {full} bytes]\n").as_bytes(),
        );
    }
    bytes
}

/// Checks that the study's scratch directory can hold overlay lower directories (the
/// overlay options string cannot name a path with ',', ':' or '\\').
pub fn check_work_dir(dir: &Path) -> Result<(), ReproduceError> {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    if abs.to_string_lossy().contains([',', ':', '\\']) {
        return Err(ReproduceError::Usage(format!(
            "--db: the study's scratch directory {} holds ',', ':' or '\\', which overlayfs cannot name; put the database elsewhere",
            abs.display()
        )));
    }
    Ok(())
}

/// An instance id as a file-name part.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst() -> Instance {
        Instance {
            instance_id: "i".into(),
            repo: String::new(),
            repo_path: "/repo".into(),
            base_commit: "abc".into(),
            test_patch: String::new(),
            model_patch: "p".into(),
            model_name: String::new(),
            fail_to_pass: vec![],
            pass_to_pass: vec![],
            test_cmd: "pytest".into(),
            image: None,
            rootfs: None,
            mirror: None,
            bench_date: 1_683_720_000,
            recorded_resolved: true,
        }
    }

    fn cond() -> Conditions {
        let mut c = Conditions::new(Duration::from_secs(60), 7);
        c.host_env = vec![
            ("TZ".into(), "Asia/Tokyo".into()),
            ("LANG".into(), "de_DE.UTF-8".into()),
            ("PATH".into(), "/opt/bin:/usr/bin".into()),
            ("PYTHONHASHSEED".into(), "123".into()),
        ];
        c
    }

    /// The plan's environment and clock for `arm`.
    fn plan(
        arm: Arm,
    ) -> (
        std::collections::BTreeMap<String, String>,
        crate::plan::Plan,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let host = HostFacts::current().unwrap();
        let req = request(&inst(), arm, &cond(), &host, dir.path(), dir.path()).unwrap();
        let plan = crate::plan::resolve(&req, &host).unwrap();
        let env = plan
            .env
            .iter()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (env, plan)
    }

    #[test]
    fn each_arm_gets_its_conditions() {
        let (env, p) = plan(Arm::Shim);
        assert_eq!(env["TZ"], "UTC");
        assert_eq!(env["LC_ALL"], "C.UTF-8");
        assert_eq!(env["PYTHONHASHSEED"], "7");
        assert_eq!(env["SOURCE_DATE_EPOCH"], "1683720000");
        assert_eq!(p.clock.map(|c| c.epoch), Some(1_683_720_000));
        assert_eq!(p.random, RandomMode::Seeded);
        assert!(p.intercept && p.identity.cpus == 1);
        assert!(env["PYTEST_ADDOPTS"].contains("--junitxml=/.reprorun/out/junit.xml"));

        let (env, p) = plan(Arm::NoShim);
        assert_eq!(env["TZ"], "Asia/Tokyo");
        assert_eq!(env["LANG"], "de_DE.UTF-8");
        assert_eq!(env["PATH"], "/opt/bin:/usr/bin");
        assert_eq!(env["PYTHONHASHSEED"], "123", "the caller's own");
        assert!(!env.contains_key("LC_ALL") && !env.contains_key("SOURCE_DATE_EPOCH"));
        assert!(p.clock.is_none() && p.random == RandomMode::Real && !p.intercept);

        // Without the env pin: the caller's TZ/locale/PATH, and nothing of the pinned
        // environment the caller does not set (no LC_ALL), but the seeds stay pinned.
        let (env, p) = plan(Arm::ShimWithout(Pin::Env));
        assert_eq!(env["TZ"], "Asia/Tokyo");
        assert_eq!(env["PATH"], "/opt/bin:/usr/bin");
        assert!(!env.contains_key("LC_ALL"));
        assert_eq!(env["PYTHONHASHSEED"], "7");
        assert_eq!(env["SOURCE_DATE_EPOCH"], "1683720000");
        assert!(p.clock.is_some() && p.random == RandomMode::Seeded);

        let (env, p) = plan(Arm::ShimWithout(Pin::Clock));
        assert!(p.clock.is_none());
        assert_eq!(env["TZ"], "UTC");
        let (env, _) = plan(Arm::ShimWithout(Pin::HashSeed));
        assert_eq!(env["PYTHONHASHSEED"], "random");
        let (_, p) = plan(Arm::ShimWithout(Pin::Random));
        assert_eq!(p.random, RandomMode::Real);
        assert!(p.clock.is_some());
        let (_, p) = plan(Arm::ShimWithout(Pin::DirOrder));
        assert!(!p.sorted_dirs && p.intercept && p.clock.is_some());
        assert!(plan(Arm::Shim).1.sorted_dirs);
        let (_, p) = plan(Arm::ShimWithout(Pin::Cpus));
        assert_eq!(
            p.identity.cpus,
            HostFacts::current().unwrap().cpus_available
        );
        let (_, p) = plan(Arm::ShimWithout(Pin::Network));
        assert!(
            p.has(crate::plan::Namespace::Net),
            "--no-shim-net none: still no network"
        );
    }

    #[test]
    fn host_like_runs_do_not_get_secrets_or_host_paths() {
        for k in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "AWS_PROFILE",
            "MY_SECRET",
            "SSH_AUTH_SOCK",
            "TMPDIR",
            "XDG_RUNTIME_DIR",
            "HOME",
            "REPRORUN_ISOLATION",
        ] {
            assert!(!host_like(k), "{k}");
        }
        for k in ["TZ", "LANG", "LC_ALL", "PATH", "USER", "PYTHONPATH", "CI"] {
            assert!(host_like(k), "{k}");
        }
    }

    #[test]
    fn untrusted_files_are_read_safely() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ok.xml"), "<x/>").unwrap();
        assert_eq!(read_untrusted(dir.path(), "ok.xml").unwrap(), b"<x/>");
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.xml")).unwrap();
        assert!(
            read_untrusted(dir.path(), "link.xml").is_none(),
            "no link followed"
        );
        nix::unistd::mkfifo(&dir.path().join("fifo.xml"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(
            read_untrusted(dir.path(), "fifo.xml").is_none(),
            "no FIFO blocks"
        );
        assert!(read_untrusted(dir.path(), "absent").is_none());
        // A device is never opened (opening some has effects: a watchdog starts).
        std::os::unix::fs::symlink("/dev/null", dir.path().join("dev.xml")).unwrap();
        assert!(read_untrusted(dir.path(), "dev.xml").is_none());
        let dev = nix::sys::stat::SFlag::S_IFCHR;
        let made = nix::sys::stat::mknod(
            &dir.path().join("null.xml"),
            dev,
            nix::sys::stat::Mode::S_IRUSR,
            nix::sys::stat::makedev(1, 3),
        );
        if made.is_ok() {
            assert!(read_untrusted(dir.path(), "null.xml").is_none());
        }
    }

    #[test]
    fn the_scratch_path_must_suit_overlayfs() {
        assert!(check_work_dir(Path::new("/tmp/study.db.work")).is_ok());
        let e = check_work_dir(Path::new("/tmp/2024-05-10T12:00/study.db.work")).unwrap_err();
        assert!(e.to_string().contains("overlayfs cannot name"), "{e}");
    }
}
