//! Arguments of the lifecycle commands (runc's names and flags) and their dispatch.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};

use super::create::CreateOpts;
use super::exec::ExecOpts;
use super::state::Root;
use super::OciError;
use super::{create, delete, exec, features, kill, list, ps, start, write_spec};

/// Options runc takes before the command; accepted anywhere here.
#[derive(Debug, Args, Clone)]
pub struct GlobalOpts {
    /// State directory of OCI containers (default /run/reprorun; rootless:
    /// $XDG_RUNTIME_DIR/reprorun).
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Also append errors (and with --debug, each command) to FILE.
    #[arg(long, global = true, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Format of --log lines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log each lifecycle command to --log.
    #[arg(long, global = true)]
    pub debug: bool,
    /// linux.cgroupsPath is systemd's slice:prefix:name: the cgroup is made where systemd
    /// puts that unit (SLICE/PREFIX-NAME.scope), through cgroupfs (no systemd unit is made).
    #[arg(long, global = true)]
    pub systemd_cgroup: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Bundle directory holding config.json (default: the current directory).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: Option<PathBuf>,
    /// Write the container's pid (its init) to FILE.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Unix socket that receives the terminal's master (with process.terminal).
    #[arg(long, value_name = "PATH")]
    pub console_socket: Option<PathBuf>,
    /// Accepted for runc compatibility (reprorun always uses pivot_root).
    #[arg(long)]
    pub no_pivot: bool,
    /// Accepted for runc compatibility (no session keyring is created).
    #[arg(long)]
    pub no_new_keyring: bool,
    /// Pass descriptors 3 .. 3+N-1 on to the container's process.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preserve_fds: u32,
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub create: CreateArgs,
    /// Return after starting (do not wait for the container to exit).
    #[arg(long, short = 'd')]
    pub detach: bool,
}

#[derive(Debug, Args)]
pub struct IdArg {
    pub id: String,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    /// Signal every process of the container, not only its init.
    #[arg(long, short = 'a')]
    pub all: bool,
    pub id: String,
    /// A number, or a name such as KILL or SIGTERM.
    #[arg(default_value = "SIGTERM")]
    pub signal: String,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// Kill a running container first.
    #[arg(long, short = 'f')]
    pub force: bool,
    pub id: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long, short = 'f', value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
    /// Print only the ids.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct PsArgs {
    #[arg(long, short = 'f', value_enum, default_value_t = ListFormat::Table)]
    pub format: ListFormat,
    pub id: String,
}

#[derive(Debug, Args)]
pub struct SpecArgs {
    /// Directory to write config.json into (default: the current directory).
    #[arg(long, short = 'b', value_name = "DIR")]
    pub bundle: Option<PathBuf>,
    /// A config for an unprivileged caller (a user namespace mapping its ids).
    #[arg(long)]
    pub rootless: bool,
}

/// `reprorun exec ID ...` in runc's form (chosen when runc's exec options are used, or when
/// the first argument names a container in the state root).
#[derive(Debug, Args)]
pub struct OciExecArgs {
    /// An OCI process JSON (args, env, cwd, user, capabilities, terminal).
    #[arg(long, short = 'p', value_name = "FILE")]
    pub process: Option<PathBuf>,
    /// Write the new process's pid to FILE.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Return once the process started.
    #[arg(long, short = 'd')]
    pub detach: bool,
    #[arg(long, value_name = "PATH")]
    pub console_socket: Option<PathBuf>,
    /// Run on a new terminal (needs --console-socket).
    #[arg(long, short = 't')]
    pub tty: bool,
    /// Working directory inside the container.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Set an environment variable; repeatable.
    #[arg(long, short = 'e', value_name = "KEY=VALUE", value_parser = crate::parse::env_entry)]
    pub env: Vec<(String, String)>,
    /// UID[:GID] to run as.
    #[arg(long, short = 'u', value_name = "UID[:GID]")]
    pub user: Option<String>,
    /// Additional group ids; repeatable.
    #[arg(long, short = 'g', value_name = "GID")]
    pub additional_gids: Vec<u32>,
    /// Add a capability; repeatable.
    #[arg(long, short = 'c', value_name = "CAP")]
    pub cap: Vec<String>,
    /// Set no_new_privs for the process (else the container's or the process file's setting).
    #[arg(long)]
    pub no_new_privs: bool,
    /// Accepted (containers are never paused).
    #[arg(long)]
    pub ignore_paused: bool,
    /// Pass descriptors on: not supported for exec (refused when N > 0).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preserve_fds: u32,
    pub id: String,
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// Flags only runc's `exec` has.
const RUNC_EXEC_FLAGS: &[&str] = &[
    "--process",
    "-p",
    "--pid-file",
    "--detach",
    "-d",
    "--console-socket",
    "--tty",
    "-t",
    "--cwd",
    "--additional-gids",
    "-g",
    "--cap",
    "-c",
    "--no-new-privs",
    "--ignore-paused",
    "-u",
    "-e",
];

/// Global options that take a value.
const GLOBAL_WITH_VALUE: &[&str] = &["--root", "--log", "--log-format"];

/// Whether `args` (the whole command line) is runc's `exec ID ...`, and where `exec` is.
pub fn runc_exec_at(args: &[String]) -> Option<usize> {
    let mut i = 1;
    let mut root = None;
    while i < args.len() {
        let a = args[i].as_str();
        if GLOBAL_WITH_VALUE.contains(&a) {
            if a == "--root" {
                root = args.get(i + 1).cloned();
            }
            i += 2;
        } else if a.starts_with("--") && a.contains('=') {
            if let Some(r) = a.strip_prefix("--root=") {
                root = Some(r.to_string());
            }
            i += 1;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    if args.get(i).map(String::as_str) != Some("exec") {
        return None;
    }
    let at = i;
    let rest = &args[at + 1..];
    for a in rest {
        if a == "--" {
            return None;
        }
        let name = a.split('=').next().unwrap_or(a);
        if RUNC_EXEC_FLAGS.contains(&name) {
            return Some(at);
        }
    }
    // No `--` and no runc flag: runc's form if the first word names a container.
    let root = root
        .map(PathBuf::from)
        .unwrap_or_else(super::state::default_root);
    let first = rest.iter().find(|a| !a.starts_with('-'))?;
    (super::state::check_id(first).is_ok()
        && root.join(first).join(super::state::STATE_FILE).exists())
    .then_some(at)
}

fn now() -> String {
    crate::determinism::date::timestamp(std::time::SystemTime::now())
}

/// Appends one line to --log.
fn log(g: &GlobalOpts, level: &str, msg: &str) {
    use std::io::Write;
    let Some(path) = &g.log else { return };
    let line = match g.log_format {
        LogFormat::Json => {
            serde_json::json!({"level": level, "msg": msg, "time": now()}).to_string()
        }
        LogFormat::Text => format!("time={:?} level={level} msg={msg:?}", now()),
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// The lifecycle commands, flattened into reprorun's own.
#[derive(Debug, Subcommand)]
pub enum OciCommand {
    /// OCI: create a container from a bundle; its process waits for `start`.
    Create(CreateArgs),
    /// OCI: start a created container's process.
    Start(IdArg),
    /// OCI: print a container's state as JSON.
    State(IdArg),
    /// OCI: send a signal (default SIGTERM) to a container.
    Kill(KillArgs),
    /// OCI: remove a stopped container (--force: any container).
    Delete(DeleteArgs),
    /// OCI: create and start a container, wait for it, delete it (--detach: return at once).
    Run(RunArgs),
    /// OCI: list containers in the state root.
    List(ListArgs),
    /// OCI: list the processes of a container.
    Ps(PsArgs),
    /// OCI: print the features this runtime supports (runtime-spec features JSON).
    Features,
    /// OCI: write a default config.json.
    Spec(SpecArgs),
    /// OCI: execute a process in a running container (runc's `exec ID`).
    #[command(name = "oci-exec", hide = true)]
    OciExec(OciExecArgs),
}

/// Runs one lifecycle command; returns the exit status, or the error (also written to
/// `--log`, as runc does; the binary's `cli` prints it and maps it to the exit status).
pub fn dispatch(g: &GlobalOpts, cmd: OciCommand) -> Result<i32, OciError> {
    if g.debug {
        log(g, "debug", &std::env::args().collect::<Vec<_>>().join(" "));
    }
    run(g, cmd).inspect_err(|e| log(g, "error", &e.to_string()))
}

fn create_opts(a: &CreateArgs, g: &GlobalOpts) -> CreateOpts {
    CreateOpts {
        id: a.id.clone(),
        bundle: a.bundle.clone(),
        pid_file: a.pid_file.clone(),
        console_socket: a.console_socket.clone(),
        preserve_fds: a.preserve_fds,
        systemd_cgroup: g.systemd_cgroup,
    }
}

fn root(g: &GlobalOpts) -> Result<Root, OciError> {
    let path = g.root.clone().unwrap_or_else(super::state::default_root);
    Ok(Root::open(&path)?)
}

fn parse_user(text: &str) -> Result<(u32, Option<u32>), OciError> {
    let bad = || {
        OciError::Usage(format!(
            "--user {text:?}: expected UID or UID:GID (numbers)"
        ))
    };
    match text.split_once(':') {
        Some((u, g)) => Ok((
            u.parse().map_err(|_| bad())?,
            Some(g.parse().map_err(|_| bad())?),
        )),
        None => Ok((text.parse().map_err(|_| bad())?, None)),
    }
}

fn run(g: &GlobalOpts, cmd: OciCommand) -> Result<i32, OciError> {
    match cmd {
        OciCommand::Create(a) => create::create(&root(g)?, &create_opts(&a, g)),
        OciCommand::Run(a) => super::run::run(&root(g)?, &create_opts(&a.create, g), a.detach),
        OciCommand::Start(a) => start::start(&root(g)?, &a.id),
        OciCommand::State(a) => list::state(&root(g)?, &a.id),
        OciCommand::Kill(a) => kill::kill(&root(g)?, &a.id, &a.signal, a.all),
        OciCommand::Delete(a) => delete::delete(&root(g)?, &a.id, a.force),
        OciCommand::List(a) => list::list(&root(g)?, a.format == ListFormat::Json, a.quiet),
        OciCommand::Ps(a) => ps::ps(&root(g)?, &a.id, a.format == ListFormat::Json),
        OciCommand::Features => {
            println!(
                "{}",
                serde_json::to_string_pretty(&features::features()).expect("serializes")
            );
            Ok(0)
        }
        OciCommand::Spec(a) => {
            write_spec::write_spec(a.bundle.as_deref().unwrap_or(Path::new(".")), a.rootless)
        }
        OciCommand::OciExec(a) => {
            if a.preserve_fds > 0 {
                return Err(OciError::Usage(
                    "exec --preserve-fds: not supported; pass descriptors at create".into(),
                ));
            }
            let opts = ExecOpts {
                id: a.id.clone(),
                process: a.process.clone(),
                command: a.command.clone(),
                env: a.env.clone(),
                cwd: a.cwd.clone(),
                user: a.user.as_deref().map(parse_user).transpose()?,
                additional_gids: a.additional_gids.clone(),
                caps: a.cap.clone(),
                tty: a.tty,
                console_socket: a.console_socket.clone(),
                pid_file: a.pid_file.clone(),
                detach: a.detach,
                no_new_privs: a.no_new_privs,
            };
            exec::exec(&root(g)?, &opts)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn runc_exec_is_told_apart_from_one_shot_exec() {
        let at = |a: &[&str]| runc_exec_at(&v(a));
        assert_eq!(at(&["reprorun", "exec", "--", "ls"]), None);
        assert_eq!(
            at(&["reprorun", "exec", "--rootfs", "/r", "--", "ls"]),
            None
        );
        assert_eq!(
            at(&["reprorun", "exec", "--process", "/p.json", "c1"]),
            Some(1)
        );
        assert_eq!(
            at(&[
                "reprorun",
                "--root",
                "/x",
                "exec",
                "-d",
                "--pid-file",
                "f",
                "c1"
            ]),
            Some(3)
        );
        assert_eq!(at(&["reprorun", "exec", "-t", "c1", "sh"]), Some(1));
        // A first word that names no container in the state root: one-shot.
        assert_eq!(
            at(&["reprorun", "--root", "/nonexistent", "exec", "echo", "hi"]),
            None
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("c1")).unwrap();
        std::fs::write(dir.path().join("c1/state.json"), "{}").unwrap();
        let root = dir.path().to_str().unwrap();
        assert_eq!(
            at(&["reprorun", "--root", root, "exec", "c1", "ls"]),
            Some(3)
        );
        assert_eq!(at(&["reprorun", "--root", root, "exec", "c2", "ls"]), None);
        assert_eq!(at(&["reprorun", "--root", root, "create", "c1"]), None);
    }

    #[test]
    fn users_parse() {
        assert_eq!(parse_user("1000").unwrap(), (1000, None));
        assert_eq!(parse_user("1000:100").unwrap(), (1000, Some(100)));
        assert!(parse_user("bob").is_err());
        assert!(parse_user("1:x").is_err());
    }
}
