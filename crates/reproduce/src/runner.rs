//! One run: the arm's conditions turned into a sandbox request over the prepared tree, the
//! test command run with its output captured, and the outcome graded. Called by a worker
//! process; the sandbox is reprorun's own library, never its command line.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::gocache;
use super::input::Instance;
use super::outcome;
use super::provenance;
use super::store::{RunRow, Store, StoreError};
use super::tree::{self, Variant};
use super::ReproduceError;
use super::{Arm, Infra, Pin, Variation};
use reprorun_pipeline::unit::{Scratch, UnitOutcome, OUT_DIR};
use reprorun_runtime::determinism::clock::DateChoice;
use reprorun_runtime::determinism::{EnvProfile, RandomMode};
use reprorun_runtime::parse::BindSpec;
use reprorun_runtime::plan::{ExecRequest, ExtraMount, HostFacts, Isolation, NetChoice};

/// Where the run's JUnit XML is asked for, inside the sandbox (in [`OUT_DIR`]).
pub(crate) const JUNIT: &str = "/.reprorun/out/junit.xml";

/// What keeps a run from being made (the host's failure, not the patch's): the study
/// stops, resumable.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Tree(#[from] tree::TreeError),
    #[error(transparent)]
    Unit(#[from] reprorun_pipeline::unit::UnitError),
    #[error(transparent)]
    Plan(#[from] reprorun_runtime::plan::PlanError),
    #[error(transparent)]
    Image(#[from] reprorun_runtime::image::ImageError),
    #[error(transparent)]
    Mirror(#[from] reprorun_runtime::mirror::MirrorError),
    #[error("sandbox: {0}")]
    Sandbox(#[source] reprorun_pipeline::unit::HostFailure),
    #[error(transparent)]
    Provenance(#[from] super::provenance::ProvenanceError),
    #[error(transparent)]
    GoCache(#[from] super::gocache::GoCacheError),
}

/// How runs are made (the study's options that shape a sandbox).
#[derive(Debug, Clone)]
pub(crate) struct Conditions {
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
    pub no_shim_net: NetChoice,
    /// The caller's environment, passed to host-like runs.
    pub host_env: Vec<(String, String)>,
    /// `--store`: the image store for instances with an `image`.
    pub store: Option<PathBuf>,
    /// The tests each instance's variation runs are about, run alone where the runner
    /// allows (`select`); an instance without an entry runs its whole command.
    pub select: std::collections::BTreeMap<String, Vec<String>>,
    /// A Go build cache per tree, warmed once, read-only in the runs (`--go-cache`: the shim arm only).
    pub go_cache: bool,
}

/// Variables of the caller that host-like runs do not take: reprorun's own, the shell's
/// bookkeeping, `HOME` (runs get a private writable one), paths that do not exist or are
/// read-only in the sandbox (`TMPDIR`, `XDG_*_HOME`, ...), and anything that looks like a
/// credential — the patch is untrusted code (`spec/reproduce.md`).
pub(crate) fn host_like(key: &str) -> bool {
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
    pub(crate) fn fingerprint(&self) -> String {
        let mut f = serde_json::json!({
            "timeout_ms": self.timeout.as_millis() as u64,
            "memory": self.memory,
            "seed": self.seed,
            "no_shim_mirror": self.no_shim_mirror,
            "no_shim_net": self.no_shim_net.to_string(),
        });
        // Named only when on, so studies made before the cache resume as they were.
        if self.go_cache {
            f["go_cache"] = true.into();
        }
        f.to_string()
    }

    pub(crate) fn new(timeout: Duration, seed: u64) -> Self {
        Conditions {
            timeout,
            memory: None,
            seed,
            no_shim_mirror: None,
            no_shim_net: NetChoice::NONE,
            store: None,
            select: Default::default(),
            go_cache: false,
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
pub(crate) fn request(
    inst: &Instance,
    arm: Arm,
    cond: &Conditions,
    host: &HostFacts,
    tree: &Path,
    out: &Path,
) -> Result<ExecRequest, SetupError> {
    let cmd = match variation_selection(inst, arm, cond) {
        Some(s) => s.command,
        None => inst.test_cmd.clone(),
    };
    let mut req = ExecRequest::new(vec!["/bin/sh".into(), "-c".into(), cmd]);
    req.workdir = Some(tree.to_path_buf());
    req.workdir_mode = reprorun_runtime::plan::WorkdirMode::Overlay;
    req.isolation = Isolation::Full;
    req.timeout = Some(cond.timeout);
    req.resources.memory = cond.memory;
    req.seed = cond.seed;
    req.rootfs = inst.rootfs.clone();
    if let Some(reference) = &inst.image {
        req.image = Some(reprorun_runtime::image::lookup(
            cond.store.clone(),
            reference,
        )?);
    }
    let host_like = matches!(arm, Arm::NoShim | Arm::BaselineNoShim);
    let without = match arm {
        Arm::ShimWithout(p) => Some(p),
        _ => None,
    };
    req.intercept = !host_like;
    req.sorted_dirs = without != Some(Pin::DirOrder);
    let mut env = Vec::new();
    let mirror = provenance::mirror_for(inst, arm, cond.no_shim_mirror.as_deref());
    if host_like {
        req.date = Some(DateChoice::Now);
        req.random = RandomMode::Real;
        req.pinned_env = false;
        req.net = cond.no_shim_net.mode;
        req.egress = cond.no_shim_net.egress.clone();
        req.cpus = Some(host.cpus_available);
        // Behind the egress proxy the caller's own proxy settings would lead nowhere.
        let ours = |k: &str| {
            req.net == reprorun_runtime::plan::NetMode::Allow
                && reprorun_runtime::plan::proxy_env()
                    .iter()
                    .any(|(p, _)| *p == k)
        };
        env.extend(
            caller_env(&cond.host_env, req.image.as_ref())
                .filter(|(k, _)| !ours(k))
                .cloned(),
        );
        if req.net == reprorun_runtime::plan::NetMode::None && mirror.is_none() {
            no_retries(&mut env);
        }
    } else {
        req.date = Some(match (arm, without) {
            (_, Some(Pin::Clock)) => DateChoice::Now,
            (Arm::ShimAt(day), _) => DateChoice::Pinned(super::sweep::on_day(inst.bench_date, day)),
            _ => DateChoice::Pinned(inst.bench_date),
        });
        if without == Some(Pin::Random) {
            req.random = RandomMode::Real;
        }
        if without == Some(Pin::Env) {
            // The caller's environment instead of the pinned one, the seed pins kept.
            req.pinned_env = false;
            env.extend(
                caller_env(&cond.host_env, req.image.as_ref())
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
            req.net = cond.no_shim_net.mode;
            req.egress = cond.no_shim_net.egress.clone();
        } else if let Some(dir) = &inst.cassette {
            // The instance's network, answered from its cassette: nothing leaves the machine.
            req.net = reprorun_runtime::plan::NetMode::Allow;
            req.egress.replay = Some(dir.clone());
        }
        if let Arm::ShimVary(v) = arm {
            vary(&mut req, &mut env, v);
        }
    }
    req.env = env;
    if let Some(dir) = mirror {
        req.attach_mirror(dir)?;
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

/// What a variation run runs: its instance's differing tests alone where the runner allows,
/// else the whole command (`select`); `None` for other arms.
pub(crate) fn variation_selection(
    inst: &Instance,
    arm: Arm,
    cond: &Conditions,
) -> Option<super::select::Selection> {
    let Arm::ShimVary(_) = arm else { return None };
    let tests = cond
        .select
        .get(&inst.instance_id)
        .map_or(&[][..], Vec::as_slice);
    Some(super::select::select(tests, &inst.test_cmd))
}

/// What a reprotest variation changes in the shim's request (the user's word in `env`
/// wins over the pinned one).
fn vary(req: &mut ExecRequest, env: &mut Vec<(String, String)>, v: Variation) {
    match v {
        Variation::Timezone => {
            let root = match (&req.image, &req.rootfs) {
                (Some(img), _) => img.rootfs.clone(),
                (None, Some(r)) => r.clone(),
                (None, None) => PathBuf::from("/"),
            };
            env.push(("TZ".into(), utc_plus_14(&root).into()));
        }
        Variation::Locale => {
            for k in ["LANG", "LC_ALL"] {
                env.push((k.into(), "fr_CH.UTF-8".into()));
            }
        }
        Variation::Umask => {
            let cmd = req.argv.pop().unwrap_or_default();
            req.argv.push(format!("umask 0002\n{cmd}"));
        }
        Variation::Home => env.push(("HOME".into(), "/nonexistent/first-build".into())),
        Variation::Hostname => req.hostname = "reprotest-capture-hostname".into(),
        Variation::ExecPath => env.push((
            "PATH".into(),
            format!(
                "/usr/local/sbin/reprotest-extra:{}",
                reprorun_runtime::determinism::env::FROZEN_PATH
            ),
        )),
    }
}

/// UTC+14 as `TZ` for a root: the zone file's name where the root has it (Go reads only zone
/// files: with a POSIX string it falls back to UTC and the variation changed nothing), the
/// POSIX string otherwise (glibc and musl read it without any file).
pub(crate) fn utc_plus_14(root: &Path) -> &'static str {
    if root.join("usr/share/zoneinfo/Etc/GMT-14").is_file() {
        "Etc/GMT-14"
    } else {
        "GMT-14"
    }
}

/// Installers' retries, capped for a run that can reach no index: with their defaults
/// (npm's backoff, pip's five retries) a run spent up to the whole `--timeout` retrying
/// into no network. The caller's own settings win.
const NO_RETRIES: [(&str, &str); 4] = [
    ("npm_config_fetch_retries", "0"),
    ("npm_config_fetch_timeout", "30000"),
    ("PIP_RETRIES", "0"),
    ("PIP_TIMEOUT", "15"),
];

fn no_retries(env: &mut Vec<(String, String)>) {
    for (k, v) in NO_RETRIES {
        if !env.iter().any(|(e, _)| e.eq_ignore_ascii_case(k)) {
            env.push((k.into(), v.into()));
        }
    }
}

/// The caller's variables a host-like run gets: on an image, those the image's `Env` does
/// not set (its `PATH`, `PYTHON_VERSION`, `GOPATH`, ... name the image's files, not the
/// caller's: with the caller's `PATH` every command was "not found", exit 127).
fn caller_env<'a>(
    host_env: &'a [(String, String)],
    image: Option<&'a reprorun_runtime::plan::image::ImageRoot>,
) -> impl Iterator<Item = &'a (String, String)> + 'a {
    host_env
        .iter()
        .filter(move |(k, _)| !image.is_some_and(|img| img.env.iter().any(|(ik, _)| ik == k)))
}

/// A run's row before anything is known of it.
fn blank_row(inst: &Instance, arm: Arm, idx: u32, started_at: i64) -> RunRow {
    RunRow {
        instance_id: inst.instance_id.clone(),
        arm,
        idx,
        resolved: false,
        infra: None,
        exit_code: reprorun_runtime::exit::RUNTIME_ERROR,
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
        env: None,
    }
}

/// Where a run's logs go and where its scratch lives: the study database (`run`), or a
/// worker's result directory and node-local scratch (`work`, which never opens SQLite).
pub(crate) trait RunSink {
    /// Writes a log, content-addressed, and returns its digest.
    fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError>;
    /// The directory of trees and run scratch.
    fn work_dir(&self) -> PathBuf;
}

impl RunSink for Store {
    fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError> {
        Store::put_log(self, bytes)
    }
    fn work_dir(&self) -> PathBuf {
        reprorun_pipeline::store::Db::work_dir(self)
    }
}

/// `row` as an infrastructure failure of `kind`, with its output and error text stored.
fn infra_row(
    store: &impl RunSink,
    mut row: RunRow,
    kind: Infra,
    out: &[u8],
    err: String,
) -> Result<RunRow, StoreError> {
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
}

/// Makes one run and returns its row (logs already stored). Infra failures are rows too;
/// only a failure to record anything is an error.
pub(crate) fn run(
    store: &impl RunSink,
    inst: &Instance,
    arm: Arm,
    idx: u32,
    cond: &Conditions,
) -> Result<RunRow, ReproduceError> {
    let setup = |cause: SetupError| ReproduceError::Setup {
        id: inst.instance_id.clone(),
        cause: Box::new(cause),
    };
    let started_at = reprorun_pipeline::unix_now_ms() / 1000;
    let variant = if arm.is_baseline() {
        Variant::Baseline
    } else {
        Variant::Patched
    };
    let selection = variation_selection(inst, arm, cond);
    // A run of some tests alone is graded on them.
    let listed: Vec<&str> = match &selection {
        Some(s) if s.alone() => s.tests.iter().map(String::as_str).collect(),
        _ => inst.listed_tests().into_iter().collect(),
    };
    let mut row = blank_row(inst, arm, idx, started_at);
    let infra = |row, kind, out: &[u8], err: String| infra_row(store, row, kind, out, err);

    let work = store.work_dir();
    let tree = tree::ensure(&work.join("trees"), inst, variant).map_err(|e| setup(e.into()))?;
    row.apply = format!("model={} test={}", tree.applied.model, tree.applied.test);
    let no_shim_mirror = cond.no_shim_mirror.as_deref();
    let mut env = provenance::of_run(inst, arm, no_shim_mirror, &tree.applied.commit)
        .map_err(|e| setup(e.into()))?;
    env.selection = selection.clone();
    row.env = serde_json::to_string(&env).ok();
    if !tree.applied.ok {
        let log = tree.applied.log.clone();
        let why = format!("patch did not apply ({})\n", row.apply);
        return Ok(infra(row, Infra::PatchApply, log.as_bytes(), why)?);
    }

    let mut scratch = Scratch::create(work.join("runs").join(format!(
        "{}-{}-{}-{}",
        reprorun_pipeline::unit::file_name_part(&inst.instance_id),
        arm.name(),
        idx,
        std::process::id()
    )))
    .map_err(|e| setup(e.into()))?;
    let out = scratch.out_dir();

    let host = HostFacts::current().map_err(|e| setup(e.into()))?;
    let mut req = request(inst, arm, cond, &host, &tree.dir, &out).map_err(&setup)?;
    // Only the runs on the warm-up's own conditions: a cache warmed on the shim's clock broke
    // Go 1.19 on the real clock ("package ... is not in GOROOT"), and a warm cache changes
    // the go tool's own work, so the seeded entropy the test binary draws differs from a
    // cold build's.
    if cond.go_cache
        && matches!(arm, Arm::Shim | Arm::BaselineShim)
        && gocache::runs_go(&inst.test_cmd)
    {
        let key = tree::key(inst, variant);
        let cache = warm_go_cache(inst, cond, &host, &tree.dir, &work, &key).map_err(&setup)?;
        gocache::attach(&mut req, &cache, false);
    }
    let clock = Instant::now();
    let result = scratch.run(&req, &host).map_err(|e| setup(e.into()))?;
    let took = clock.elapsed();
    let out_bytes = scratch.stdout();
    let err_bytes = scratch.stderr();
    let outcome = match result {
        UnitOutcome::Ran(o) => o,
        // The test command itself could not be executed: this instance's failure.
        UnitOutcome::CommandMissing(e) => {
            let mut text = String::from_utf8_lossy(&err_bytes).into_owned();
            text.push_str(&format!("reprorun: {e}\n"));
            return Ok(infra(row, Infra::Runtime, &out_bytes, text)?);
        }
        // The sandbox could not be made: stop the study (resumable) rather than record
        // a failure that is the host's.
        UnitOutcome::HostFailure(e) => return Err(setup(SetupError::Sandbox(e))),
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
        return Ok(row.map(|mut r| {
            r.wall_ms = took.as_millis() as u64;
            r.exit_code = outcome.exit_code;
            r
        })?);
    }

    // The sandbox wrote out/: read it as untrusted (no links, no FIFOs, capped).
    let junit = scratch.read_out("junit.xml");
    let graded = outcome::grade_logs(
        &listed,
        inst.recorded_resolved,
        outcome.exit_code,
        &out_bytes,
        &err_bytes,
        junit.as_deref(),
    );
    if graded.infra == Some(Infra::NoTests) {
        // Loudly: a run that ran none of the listed tests is no outcome.
        let run = format!("{} #{idx}", arm.name());
        let line = outcome::no_tests_warning(&inst.instance_id, &run, listed.len(), graded.hint);
        eprintln!("{line}");
    }
    row.resolved = graded.resolved;
    row.infra = graded.infra;
    row.signature = graded.signature;
    row.evidence = graded.evidence;
    row.tests = graded.tests;
    row.stdout_sha256 = store.put_log(&out_bytes)?;
    row.stderr_sha256 = store.put_log(&err_bytes)?;
    row.junit_sha256 = junit.map(|x| store.put_log(&x)).transpose()?;
    Ok(row)
}

/// The warmed Go build cache of tree `key` (`gocache`): the first time, the test command
/// run once as the shim arm runs it, writing the cache; its outcome is no run's.
fn warm_go_cache(
    inst: &Instance,
    cond: &Conditions,
    host: &HostFacts,
    tree: &Path,
    work: &Path,
    key: &str,
) -> Result<PathBuf, SetupError> {
    let warmed = gocache::ensure(&work.join("go-cache"), key, |cache| {
        let dir = work
            .join("runs")
            .join(format!("{key}-go-warm-{}", std::process::id()));
        let mut scratch = Scratch::create(dir)?;
        let mut req = request(inst, Arm::Shim, cond, host, tree, &scratch.out_dir())?;
        gocache::attach(&mut req, cache, true);
        match scratch.run(&req, host)? {
            UnitOutcome::HostFailure(e) => Err(SetupError::Sandbox(e)),
            // Whatever the tests did, the cache holds what the build made.
            UnitOutcome::Ran(_) | UnitOutcome::CommandMissing(_) => Ok(()),
        }
    })?;
    warmed
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
            cassette: None,
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
        reprorun_runtime::plan::Plan,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let host = HostFacts::current().unwrap();
        let req = request(&inst(), arm, &cond(), &host, dir.path(), dir.path()).unwrap();
        let plan = reprorun_pipeline::unit::resolve(&req, &host).unwrap();
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
        // No network and no mirror: installers give up at once instead of retrying.
        assert_eq!(env["PIP_RETRIES"], "0");
        assert_eq!(env["npm_config_fetch_retries"], "0");
        let (env, _) = plan(Arm::Shim);
        assert!(!env.contains_key("PIP_RETRIES"));

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
            p.has(reprorun_runtime::plan::Namespace::Net),
            "--no-shim-net none: still no network"
        );
    }

    #[test]
    fn on_an_image_the_images_environment_stays_under_the_callers() {
        let img = reprorun_runtime::plan::image::ImageRoot {
            reference: "python:3.11".into(),
            digest: "sha256:0".into(),
            rootfs: "/nonexistent".into(),
            env: vec![
                ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
                ("PYTHON_VERSION".into(), "3.11.9".into()),
            ],
            argv: vec![],
            user: None,
        };
        let host = cond().host_env;
        let got: Vec<&str> = caller_env(&host, Some(&img))
            .map(|(k, _)| k.as_str())
            .collect();
        // The caller's TZ and locale (what the no-shim arm is about), not its PATH.
        assert_eq!(got, ["TZ", "LANG", "PYTHONHASHSEED"]);
        assert_eq!(caller_env(&host, None).count(), 4);
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
    fn the_time_zone_variation_is_a_zone_every_runtime_reads() {
        let root = tempfile::tempdir().unwrap();
        // Without the zone file: the POSIX string, which libc reads without one.
        assert_eq!(utc_plus_14(root.path()), "GMT-14");
        let dir = root.path().join("usr/share/zoneinfo/Etc");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("GMT-14"), b"TZif").unwrap();
        // With it: its name, which Go reads too.
        assert_eq!(utc_plus_14(root.path()), "Etc/GMT-14");
    }
}
