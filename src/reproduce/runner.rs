//! One run: the arm's conditions turned into a sandbox request over the prepared tree, the
//! test command run with its output captured, and the outcome graded. Called by a worker
//! process; the sandbox is reprorun's own library, never its command line.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::input::Instance;
use super::outcome::{self, Tests};
use super::store::{RunRow, Store, StoreError};
use super::tree::{self, Variant};
use super::{evidence, Arm, Infra, Pin};
use crate::determinism::clock::DateChoice;
use crate::determinism::RandomMode;
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
}

/// Variables of the caller that host-like runs do not take: reprorun's own, the shell's
/// bookkeeping, and `HOME` (runs get a private writable one).
fn host_like(key: &str) -> bool {
    !(key.starts_with("REPRORUN_")
        || matches!(
            key,
            "HOME" | "PWD" | "OLDPWD" | "SHLVL" | "_" | "PYTEST_ADDOPTS" | "NOTIFY_SOCKET"
        ))
}

impl Conditions {
    pub fn new(timeout: Duration, seed: u64) -> Self {
        Conditions {
            timeout,
            memory: None,
            seed,
            no_shim_mirror: None,
            no_shim_net: NetMode::None,
            host_env: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| host_like(k))
                .collect(),
        }
    }
}

/// The sandbox request for `arm` over `tree`, writing into `out` (bound at [`OUT_DIR`]).
/// Returns the request and whether the plan must not intercept anything (host-like).
pub fn request(
    inst: &Instance,
    arm: Arm,
    cond: &Conditions,
    tree: &Path,
    out: &Path,
) -> Result<(ExecRequest, bool), String> {
    let mut req = ExecRequest::new(vec!["/bin/sh".into(), "-c".into(), inst.test_cmd.clone()]);
    req.workdir = Some(tree.to_path_buf());
    req.workdir_overlay = true;
    req.isolation = Isolation::Full;
    req.timeout = Some(cond.timeout);
    req.resources.memory = cond.memory;
    req.seed = cond.seed;
    req.rootfs = inst.rootfs.clone();
    if let Some(reference) = &inst.image {
        let store = crate::image::store::Store::new(None).map_err(|e| e.to_string())?;
        req.image = Some(crate::image::run_root(&store, reference).map_err(|e| e.to_string())?);
    }
    let host_like = matches!(arm, Arm::NoShim | Arm::BaselineNoShim);
    let without = match arm {
        Arm::ShimWithout(p) => Some(p),
        _ => None,
    };
    let mut env = Vec::new();
    let mut mirror = inst.mirror.clone();
    if host_like {
        req.date = Some(DateChoice::Now);
        req.random = RandomMode::Real;
        req.pinned_env = false;
        req.net = cond.no_shim_net;
        req.cpus = HostFacts::current().ok().map(|h| h.cpus_available);
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
        if without == Some(Pin::HashSeed) {
            env.push(("PYTHONHASHSEED".into(), "random".into()));
            env.push(("PERL_PERTURB_KEYS".into(), "RANDOM".into()));
        }
        if without == Some(Pin::Env) {
            env.extend(
                cond.host_env
                    .iter()
                    .filter(|(k, _)| {
                        !matches!(
                            k.as_str(),
                            "PYTHONHASHSEED"
                                | "PERL_HASH_SEED"
                                | "PERL_PERTURB_KEYS"
                                | "SOURCE_DATE_EPOCH"
                        )
                    })
                    .cloned(),
            );
        }
        if without == Some(Pin::Mirror) {
            mirror = cond.no_shim_mirror.clone();
        }
    }
    if let Some(dir) = &mirror {
        let (clients, bind) = crate::mirror::attach(dir).map_err(|e| e.to_string())?;
        env.extend(clients);
        req.extra_mounts.push(ExtraMount::Bind(bind));
    }
    req.extra_mounts.push(ExtraMount::Bind(BindSpec {
        src: out.to_path_buf(),
        dest: OUT_DIR.into(),
        readonly: false,
    }));
    // The instruments come last: pytest writes JUnit XML and the -rA summary; other
    // runners may write their JUnit XML to $REPRORUN_JUNIT.
    env.push(("PYTEST_ADDOPTS".into(), format!("--junitxml={JUNIT} -rA")));
    env.push(("REPRORUN_JUNIT".into(), JUNIT.into()));
    req.env = env;
    Ok((req, host_like))
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

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Makes one run and returns its row (logs already stored). Infra failures are rows too;
/// only a failure to record anything is an error.
pub fn run(
    store: &Store,
    inst: &Instance,
    arm: Arm,
    idx: u32,
    cond: &Conditions,
) -> Result<RunRow, StoreError> {
    let started_at = now_secs();
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
    let tree = match tree::ensure(&work.join("trees"), inst, variant) {
        Ok(t) => t,
        Err(e) => return infra(row, Infra::Runtime, b"", format!("{e}\n")),
    };
    row.apply = format!("model={} test={}", tree.applied.model, tree.applied.test);
    if !tree.applied.ok {
        let log = tree.applied.log.clone();
        let why = format!("patch did not apply ({})\n", row.apply);
        return infra(row, Infra::PatchApply, log.as_bytes(), why);
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
    let io = |e: std::io::Error| StoreError::Log {
        path: scratch.clone(),
        source: e,
    };
    std::fs::create_dir_all(&out).map_err(io)?;
    let (stdout_path, stderr_path) = (scratch.join("stdout"), scratch.join("stderr"));
    let stdout = File::create(&stdout_path).map_err(io)?;
    let stderr = File::create(&stderr_path).map_err(io)?;

    let result = request(inst, arm, cond, &tree.dir, &out).and_then(|(req, host_like)| {
        let host = HostFacts::current().map_err(|e| e.to_string())?;
        let mut plan = crate::plan::resolve(&req, &host).map_err(|e| e.to_string())?;
        if host_like {
            plan.intercept = false;
        }
        let clock = Instant::now();
        let outcome = with_stdio(&stdout, &stderr, || crate::sandbox::run(&plan, &mut |_| {}))
            .map_err(|e| format!("redirect output: {e}"))?
            .map_err(|e| e.to_string())?;
        Ok((outcome, clock.elapsed()))
    });
    drop((stdout, stderr));
    let out_bytes = std::fs::read(&stdout_path).unwrap_or_default();
    let err_bytes = std::fs::read(&stderr_path).unwrap_or_default();
    let (outcome, took) = match result {
        Ok(o) => o,
        Err(e) => {
            let mut text = String::from_utf8_lossy(&err_bytes).into_owned();
            text.push_str(&format!("reprorun: {e}\n"));
            let row = infra(row, Infra::Runtime, &out_bytes, text);
            let _ = std::fs::remove_dir_all(&scratch);
            return row;
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
        return row.map(|mut r| {
            r.wall_ms = took.as_millis() as u64;
            r.exit_code = outcome.exit_code;
            r
        });
    }

    let junit = std::fs::read(out.join("junit.xml")).ok();
    let tests: Tests = junit
        .as_deref()
        .and_then(|x| outcome::parse_junit(&String::from_utf8_lossy(x)))
        .unwrap_or_else(|| outcome::parse_pytest(&String::from_utf8_lossy(&out_bytes)));
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
