//! Command-line definitions and the glue from arguments to a request. All exit-status mapping
//! happens here: every error maps through [`ExitStatus`] (the runtime's errors say 126/127
//! for a command that could not be executed, everything else is 125), and [`main`] turns the
//! one [`Status`] a command ends with into the process's status.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use thiserror::Error;

use reprorun_runtime::exit::{ExitStatus, Status};
use reprorun_runtime::oci;
use reprorun_runtime::parse::{self, ParseError};
use reprorun_runtime::plan::{self, ExecRequest, ExtraMount, HostFacts, NetMode, PlanError};
use reprorun_runtime::record::{self, RecordError, RecordSink, RunRecord};
use reprorun_runtime::rootfs_id::{Described, RootfsId};
use reprorun_runtime::sandbox::{self, SandboxError};
use reprorun_runtime::security::Resources;
use reprorun_runtime::{hint, image, mirror, net, sys, trace, util};

mod exec_args;
mod fast;
mod lazy;

pub(crate) use exec_args::ExecArgs;

#[derive(Debug, Parser)]
#[command(
    name = "reprorun",
    version,
    about = "Run a command so that time, environment, identity and network cannot leak in",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: oci::cli::GlobalOpts,
    #[command(subcommand)]
    pub(crate) command: Command,
}

// Parsed once per process: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one command in a fresh sandbox and exit with its status. (`exec ID CMD` with a
    /// container id, or with runc's exec options, runs CMD in that OCI container.)
    Exec(ExecArgs),
    /// The OCI lifecycle commands (runc's): create, start, state, kill, delete, run, list,
    /// ps, features, spec, and `exec ID`.
    #[command(flatten)]
    Oci(oci::cli::OciCommand),
    /// Import, pull, list, inspect and remove container images (`spec/image.md`).
    Image(image::cli::ImageArgs),
    /// Read-only dependency-index mirrors frozen at a date: pull, add, index, verify
    /// (`spec/mirror.md`).
    Mirror(mirror::cli::MirrorArgs),
    /// Re-run benchmark patches k times with and without the determinism shim; study
    /// reproducibility (`spec/reproduce.md`).
    Reproduce(reprorun_reproduce::cli::ReproduceArgs),
    /// The ReproRepo audit: snapshots of repositories as issue reporters saw them, audit
    /// agents on paper + snapshot in sandboxes, blind and offline (`spec/audit.md`).
    Audit(reprorun_audit::cli::AuditArgs),
}

#[derive(Debug, Error)]
pub(crate) enum Error {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("--env-file {path}: {source}")]
    EnvFile {
        path: PathBuf,
        source: sys::hostpath::HostPathError,
    },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Allow(#[from] net::AllowError),
    #[error(transparent)]
    Inject(#[from] net::intercept::InjectError),
    #[error("--net-log {path}: {source}; pass a writable regular file's path")]
    NetLog {
        path: PathBuf,
        source: sys::hostpath::HostPathError,
    },
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("print plan: {0}")]
    Print(std::io::Error),
    #[error(transparent)]
    Image(#[from] image::ImageError),
    #[error("--mirror: {0}")]
    Mirror(#[from] mirror::MirrorError),
    /// `reprorun mirror ...` itself failed.
    #[error(transparent)]
    MirrorCommand(mirror::MirrorError),
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    #[error("reproduce: {0}")]
    Reproduce(#[from] reprorun_reproduce::ReproduceError),
    #[error("audit: {0}")]
    Audit(#[from] reprorun_audit::AuditError),
}

impl ExitStatus for Error {
    fn status(&self) -> Status {
        match self {
            Error::Sandbox(e) => e.status(),
            Error::Oci(e) => e.status(),
            _ => Status::RuntimeError,
        }
    }
}

/// Parses the command line and runs it; returns the process exit status.
pub fn main() -> i32 {
    run().code()
}

fn run() -> Status {
    trace::init();
    trace::step("supervisor", "main");
    let mut args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // runc's `exec ID ...` and reprorun's one-shot `exec -- CMD` share a name.
    if let Some(at) = oci::cli::runc_exec_at(&args) {
        args[at] = "oci-exec".into();
    }
    if let Some((exec_args, mounts)) = fast::exec(&args) {
        return exec(exec_args, mounts);
    }
    let matches = match lazy::command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return usage_error(e, &args),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return usage_error(e, &args),
    };
    match cli.command {
        Command::Exec(args) => {
            let sub = matches.subcommand_matches("exec").expect("exec matched");
            let mounts = extra_mounts(&args, sub);
            exec(args, mounts)
        }
        Command::Oci(c) => report(oci::cli::dispatch(&cli.global, c).map_err(Error::from)),
        Command::Image(args) => report(image::cli::run(args).map(|()| 0).map_err(Error::from)),
        Command::Mirror(args) => report(mirror::cli::run(args).map_err(Error::MirrorCommand)),
        Command::Audit(args) => report(
            reprorun_audit::cli::run(args)
                .map(|()| 0)
                .map_err(Error::from),
        ),
        Command::Reproduce(args) => report(
            reprorun_reproduce::cli::run(args)
                .map(|()| 0)
                .map_err(Error::from),
        ),
    }
}

/// A command's end: its own status (the workload's, passed on), or its error in one line on
/// stderr and the error's [`ExitStatus`].
fn report(result: Result<i32, Error>) -> Status {
    match result {
        Ok(code) => Status::Exited(code),
        Err(e) => fail(&e),
    }
}

/// The one place an error becomes what users see: one line on stderr, and its status.
fn fail(e: &Error) -> Status {
    eprintln!("reprorun: {}", util::printable(&e.to_string()));
    e.status()
}

/// clap's refusal of the command line (125), or the help or version it was asked for (0;
/// help shown for a missing subcommand is a refusal).
fn usage_error(e: clap::Error, args: &[String]) -> Status {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            Status::RuntimeError
        } else {
            Status::OK
        };
    }
    let command = hint::command_path(&Cli::command(), args);
    eprint!("{}", hint::usage_message(&e.render().to_string(), &command));
    Status::RuntimeError
}

/// `--bind` and `--tmpfs` merged back into command-line order.
fn extra_mounts(args: &ExecArgs, m: &ArgMatches) -> Vec<ExtraMount> {
    let idx = |name| {
        m.indices_of(name)
            .map(|i| i.collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let mut all: Vec<(usize, ExtraMount)> = idx("bind")
        .into_iter()
        .zip(args.bind.iter().cloned().map(ExtraMount::Bind))
        .chain(
            idx("tmpfs")
                .into_iter()
                .zip(args.tmpfs.iter().cloned().map(ExtraMount::Tmpfs)),
        )
        .collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, m)| m).collect()
}

/// Whether any egress option was given (they imply `--net allow`).
fn wants_egress(args: &ExecArgs) -> bool {
    !args.allow_host.is_empty()
        || !args.allow_file.is_empty()
        || !args.add_host.is_empty()
        || !args.inject_env.is_empty()
        || args.net_log.is_some()
        || args.net_record.is_some()
        || args.net_replay.is_some()
}

/// The allowlist (`--allow-host`, then each `--allow-file`) and `--add-host` overrides.
fn egress(args: &ExecArgs) -> Result<net::Egress, Error> {
    let mut rules = args.allow_host.clone();
    for file in &args.allow_file {
        rules.extend(net::allow::read_file(file)?);
    }
    let mut inject = Vec::new();
    for (name, host) in &args.inject_env {
        // The caller's value gives the placeholder its shape; the executor reads it again
        // when the run starts, and only the supervisor and the proxy hold it.
        let value = std::env::var(name)
            .map_err(|_| net::intercept::InjectError::Unset { name: name.clone() })?;
        let placeholder = net::intercept::placeholder(name, &value)?;
        if !rules.contains(host) {
            rules.push(host.clone());
        }
        inject.push(net::intercept::Inject {
            name: name.clone(),
            host: host.clone(),
            placeholder,
        });
    }
    if let Some(ca) = &args.upstream_ca {
        reprorun_runtime::plan::refuse_link(ca, args.follow_symlinks, "--upstream-ca")?;
    }
    if args.upstream_ca.is_some() && inject.is_empty() && args.net_record.is_none() {
        return Err(Error::Usage(
            "--upstream-ca verifies the upstreams of --inject-env or --net-record: name one".into(),
        ));
    }
    let (record, replay) = cassette_dirs(args)?;
    Ok(net::Egress {
        record,
        replay,
        rules,
        hosts: args.add_host.clone(),
        inject,
        upstream_ca: args
            .upstream_ca
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
    })
}

/// `--net-record DIR`, `--net-replay DIR`: one at most, absolute, no link crossed (unless
/// `--follow-symlinks`).
fn cassette_dirs(args: &ExecArgs) -> Result<(Option<PathBuf>, Option<PathBuf>), Error> {
    if args.net_record.is_some() && args.net_replay.is_some() {
        return Err(Error::Usage(
            "--net-record and --net-replay: a run records a cassette or replays one; pass one"
                .into(),
        ));
    }
    let check = |dir: &Option<PathBuf>, flag: &'static str| -> Result<Option<PathBuf>, Error> {
        let Some(dir) = dir else { return Ok(None) };
        reprorun_runtime::plan::refuse_link(dir, args.follow_symlinks, flag)?;
        let resolved = match args.follow_symlinks {
            true => std::fs::canonicalize(dir).ok(),
            false => None,
        };
        Ok(Some(resolved.unwrap_or_else(|| {
            std::path::absolute(dir).unwrap_or_else(|_| dir.clone())
        })))
    };
    Ok((
        check(&args.net_record, "--net-record")?,
        check(&args.net_replay, "--net-replay")?,
    ))
}

/// The largest `--env-file` read.
const ENV_FILE_MAX: u64 = 1 << 20;

/// Builds the request from parsed arguments (reads --env-file files).
/// `mounts`: `--bind` and `--tmpfs` in command-line order.
pub(crate) fn request(args: &ExecArgs, mounts: Vec<ExtraMount>) -> Result<ExecRequest, Error> {
    let mut env = Vec::new();
    for path in &args.env_file {
        // The file may lie in an earlier run's /work: no link is followed (unless
        // --follow-symlinks), no FIFO or device opened, at most 1 MiB read.
        let text = sys::hostpath::read_to_string(path, args.follow_symlinks, ENV_FILE_MAX)
            .map_err(|source| Error::EnvFile {
                path: path.clone(),
                source,
            })?;
        env.extend(parse::env_file(&path.to_string_lossy(), &text)?);
    }
    let mut req = ExecRequest {
        rootfs: args.rootfs.clone(),
        workdir: args.workdir.clone(),
        workdir_mode: args.workdir_mode,
        keep_changes: args.keep_changes.clone(),
        extra_mounts: mounts,
        net: args.net.unwrap_or(if wants_egress(args) {
            NetMode::Allow
        } else {
            NetMode::None
        }),
        egress: egress(args)?,
        net_log: args.net_log.clone(),
        hostname: args.hostname.clone(),
        user: args.user,
        timeout: args.timeout,
        isolation: args.isolation,
        date: args.date,
        clock: args.clock,
        seed: args.seed,
        random: args.random,
        cpus: args.cpus,
        seccomp: args.seccomp.clone(),
        cap_add: args.cap_add.clone(),
        preserve_fds: args.preserve_fds,
        rlimits: args.rlimit.clone(),
        resources: Resources {
            memory: args.memory,
            pids: args.pids,
            cpu_milli: args.cpus_quota,
            cpu_shares: None,
            devices: Vec::new(),
            files: Vec::new(),
            unified: Default::default(),
        },
        tmpfs_size: args.tmpfs_size,
        share_tty: args.share_tty,
        follow_symlinks: args.follow_symlinks,
        ..ExecRequest::new(args.command.clone())
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in &args.import_tool {
        req.import_tool(name, &path)?;
    }
    if args.mirror.is_none() && req.net == NetMode::None {
        req.env.extend(mirror::offline_env());
    }
    if let Some(dir) = &args.mirror {
        // Bound into the sandbox and served by the supervisor (as for --bind).
        reprorun_runtime::plan::refuse_link(dir, args.follow_symlinks, "--mirror")?;
        // The clients' settings first: the user's --env-file and --env win.
        req.attach_mirror_as(dir, args.mirror_serve)?;
    }
    req.env.extend(env);
    req.env.extend(args.env.iter().cloned());
    if let Some(reference) = &args.image {
        req.image = Some(image::lookup(args.store.clone(), reference)?);
    }
    Ok(req)
}

fn exec(args: ExecArgs, mounts: Vec<ExtraMount>) -> Status {
    if let Some(first) = args.command.first().filter(|a| a.starts_with('-')) {
        return fail(&Error::Usage(format!(
            "unknown option {first:?}: options go before `--`, the command after it"
        )));
    }
    trace::step("supervisor", "parse the command line");
    let (plan, image) = match request(&args, mounts).and_then(|req| {
        trace::step("supervisor", "request");
        let host = HostFacts::current()?;
        trace::step("supervisor", "host facts");
        let image = req.image.as_ref().map(|i| RootfsId::Image {
            reference: i.reference.clone(),
            digest: i.digest.clone(),
        });
        let plan = plan::resolve(&req, &host)?;
        trace::step("supervisor", "resolve the plan");
        Ok((plan, image))
    }) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    if args.dry_run {
        let text = serde_json::to_string_pretty(&plan).expect("plans serialize");
        use std::io::Write;
        return match writeln!(std::io::stdout(), "{text}") {
            Ok(()) => Status::OK,
            Err(e) => fail(&Error::Print(e)),
        };
    }
    let sink = match args
        .record
        .as_deref()
        .map(|p| RecordSink::open(p, args.follow_symlinks))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return fail(&e.into()),
    };

    if let Some(path) = plan.net_log.as_deref().filter(|_| plan.egress.is_some()) {
        // The plan resolved it; the supervisor opens it the same way.
        let opened = sys::hostpath::open_write(path, false, sys::hostpath::Write::Append);
        if let Err(source) = opened {
            return fail(&Error::NetLog {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    // What the root was, read before the run (only for the record: it reads the package list).
    let rootfs = sink.as_ref().map(|_| match image {
        Some(id) => id,
        None if args.rootfs.is_none() => RootfsId::Host(Described::of(&plan.rootfs)),
        None => RootfsId::Dir(Described::of(&plan.rootfs)),
    });
    // Where the offline hint could follow, the command's stderr is read on its way for the
    // evidence the hint needs (not at a terminal: see `hint::StderrTap`).
    let tap = match hint::offline_hint_possible(&plan) {
        true => hint::StderrTap::start().ok().flatten(),
        false => None,
    };
    let started = SystemTime::now();
    let clock = Instant::now();
    let mut warn = |line: &str| eprintln!("reprorun: {}", util::printable(line));
    let result = match &tap {
        Some(t) => {
            use std::os::fd::AsFd;
            let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
            let stdio = sandbox::Stdio {
                stdin: stdin.as_fd(),
                stdout: stdout.as_fd(),
                stderr: t.stderr(),
            };
            sandbox::run_with(&plan, Some(stdio), &mut warn)
        }
        None => sandbox::run(&plan, &mut warn),
    };
    let ended = SystemTime::now();
    trace::step("supervisor", "run returned");
    let stderr_tail = tap.map(hint::StderrTap::finish);
    let (code, error, outcome) = match result {
        Ok(o) => {
            for h in hint::after_failed_run(&plan, &o, stderr_tail.as_deref()) {
                eprintln!("reprorun: {}", util::printable(&h));
            }
            (Status::Exited(o.exit_code), None, Some(o))
        }
        Err(e) => {
            let hints = hint::for_exec_error(&e, &args.command, &Cli::command());
            let e = Error::from(e);
            let status = fail(&e);
            for h in hints {
                eprintln!("reprorun: {}", util::printable(&h));
            }
            (status, Some(e.to_string()), None)
        }
    };
    if let Some(sink) = sink {
        let rec = RunRecord {
            record_version: record::RECORD_VERSION,
            reprorun_version: env!("CARGO_PKG_VERSION"),
            argv: std::env::args().collect(),
            plan: &plan,
            rootfs,
            isolation_used: outcome.as_ref().map(|o| o.isolation),
            started_at: record::timestamp(started),
            ended_at: record::timestamp(ended),
            duration_s: clock.elapsed().as_secs_f64(),
            exit_code: code.code(),
            timed_out: outcome.as_ref().is_some_and(|o| o.timed_out),
            oom_killed: outcome.as_ref().is_some_and(|o| o.oom_killed),
            error,
            network: plan.egress.as_ref().map(|_| {
                outcome
                    .as_ref()
                    .map(|o| o.network.records.clone())
                    .unwrap_or_default()
            }),
            network_dropped: plan
                .egress
                .as_ref()
                .map(|_| outcome.as_ref().map_or(0, |o| o.network.dropped)),
            rusage: outcome.map(|o| o.usage).unwrap_or_default().into(),
        };
        if let Err(e) = sink.write(&rec) {
            eprintln!("reprorun: {}", util::printable(&e.to_string()));
            if code == Status::OK {
                return Status::RuntimeError;
            }
        }
    }
    trace::step("supervisor", "exit");
    code
}
