//! The lifecycle commands (runc's contract): create, start, state, kill, delete, run, list,
//! ps, exec, features, spec. Each returns the exit status or an error for the CLI to print.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::state::{self, Dir, Root, Saved, Status};
use super::{convert, hooks, spec, OciError};
use crate::sandbox::container::{self, ExecProcess};

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> OciError {
    let path = path.to_path_buf();
    move |source| OciError::Io { what, path, source }
}

fn absolute(p: &Path) -> Result<PathBuf, OciError> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(io("current directory", Path::new(".")))?;
    Ok(cwd.join(p))
}

/// Options of `create` (and `run`).
pub struct CreateOpts {
    pub id: String,
    pub bundle: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: u32,
}

fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    crate::determinism::date::format_rfc3339(d.as_secs() as i64, d.subsec_nanos())
}

fn owner() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// A created container, for `run` to go on with.
struct Made {
    dir: Dir,
    saved: Saved,
}

fn make(root: &Root, o: &CreateOpts) -> Result<Made, OciError> {
    let given = o.bundle.as_deref().unwrap_or(Path::new("."));
    let bundle = std::fs::canonicalize(given).map_err(|source| OciError::ReadConfig {
        path: given.join("config.json"),
        source,
    })?;
    let spec = super::read_spec(&bundle)?;
    let host = crate::plan::HostFacts::current().map_err(|e| OciError::Usage(e.to_string()))?;
    let mut c = convert::resolve(&spec, &bundle, host.cpus_available)?;
    let pid_file = o.pid_file.as_deref().map(absolute).transpose()?;
    c.plan.security.preserve_fds = o.preserve_fds;
    let mut dir = root.create(&o.id)?;
    // The directory exists (with our pid in `creating`): nobody else can create this id,
    // and nobody can `get` it before state.json is written. Unlocked now, so that no
    // process of the container inherits the lock.
    dir.unlock();
    let cleanup = |dir: Dir, e: OciError| {
        let _ = dir.remove();
        e
    };
    let fifo = dir.fifo();
    if let Err(e) = nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o622)) {
        return Err(cleanup(dir, io("mkfifo", &fifo)(e.into())));
    }
    let console = match &o.console_socket {
        None => None,
        Some(p) => match std::os::unix::net::UnixStream::connect(p) {
            Ok(s) => Some(OwnedFd::from(s)),
            Err(e) => return Err(cleanup(dir, io("connect to --console-socket", p)(e))),
        },
    };
    if c.plan.terminal && console.is_none() {
        return Err(cleanup(
            dir,
            OciError::Usage(
                "process.terminal is true: pass --console-socket PATH to receive the terminal"
                    .into(),
            ),
        ));
    }
    let cg_path = c.cgroups_path.clone().unwrap_or_else(|| {
        // Unique even across state roots and against a cgroup a killed run left.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("reprorun/{}-{}-{nanos}", o.id, std::process::id())
    });
    let created = match container::create(&c.plan, &cg_path, &fifo, console) {
        Ok(x) => x,
        Err(e) => return Err(cleanup(dir, e.into())),
    };
    let pid = created.pid;
    let saved = Saved {
        id: o.id.clone(),
        pid: pid.as_raw(),
        pid_start: state::start_time(pid.as_raw()).unwrap_or(0),
        bundle: bundle.clone(),
        rootfs: c.plan.rootfs.clone(),
        created: now_rfc3339(),
        annotations: c.annotations.clone(),
        owner: owner(),
        cgroup_dirs: created.cgroup_dirs.clone(),
        hooks: c.hooks.clone(),
    };
    let fail = |dir: Dir, saved: &Saved, e: OciError| {
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        crate::sandbox::remove_cgroup(&saved.cgroup_dirs);
        cleanup(dir, e)
    };
    if let Err(e) = dir.save_plan(&c.plan).and_then(|_| dir.save(&saved)) {
        return Err(fail(dir, &saved, e.into()));
    }
    let state_json = state_bytes(&saved, Status::Created);
    for (stage, list) in [
        ("createRuntime", &c.hooks.create_runtime),
        ("createContainer", &c.hooks.create_container),
    ] {
        if let Err(e) = hooks::run_all(stage, list, &state_json) {
            return Err(fail(dir, &saved, e.into()));
        }
    }
    if let Err(e) = created.commit(&c.plan, &dir.exec_socket()) {
        return Err(fail(dir, &saved, e.into()));
    }
    if let Some(p) = &pid_file {
        if let Err(e) = state::write_atomic(p, pid.as_raw().to_string().as_bytes()) {
            return Err(fail(dir, &saved, e.into()));
        }
    }
    if let Err(e) = dir.complete() {
        return Err(fail(dir, &saved, e.into()));
    }
    Ok(Made { dir, saved })
}

fn state_bytes(saved: &Saved, status: Status) -> Vec<u8> {
    serde_json::to_vec(&saved.oci_state(status)).expect("state serializes")
}

pub fn create(root: &Root, o: &CreateOpts) -> Result<i32, OciError> {
    make(root, o).map(|_| 0)
}

/// Lets a created container's process run.
fn start_dir(dir: &Dir, saved: &Saved) -> Result<(), OciError> {
    let status = dir.status(saved);
    if status != Status::Created {
        return Err(OciError::Status {
            id: saved.id.clone(),
            status,
            hint: "only a created container can be started",
        });
    }
    let fifo = dir.fifo();
    // Non-blocking: the open returns at once, and init's blocked open for writing with it.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .map_err(io("open", &fifo))?;
    // Init opens the other end once we are here and writes one byte.
    let mut got = false;
    for _ in 0..20_000 {
        let mut b = [0u8; 1];
        match nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&f), &mut b) {
            Ok(1) => {
                got = true;
                break;
            }
            _ => {
                if state::start_time(saved.pid) != Some(saved.pid_start) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        }
    }
    if !got {
        let status = dir.status(saved);
        return Err(OciError::Status {
            id: saved.id.clone(),
            status,
            hint: if status == Status::Stopped {
                "its init exited before it could start"
            } else {
                "its init did not answer in 10 s; retry `reprorun start`"
            },
        });
    }
    let _ = std::fs::remove_file(&fifo);
    if let Err(e) = hooks::run_all(
        "poststart",
        &saved.hooks.poststart,
        &state_bytes(saved, Status::Running),
    ) {
        // A failed poststart hook is reported, not fatal (runtime spec).
        eprintln!("reprorun: warning: {e}");
    }
    Ok(())
}

pub fn start(root: &Root, id: &str) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    start_dir(&dir, &saved)?;
    Ok(0)
}

pub fn state(root: &Root, id: &str) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let st = saved.oci_state(dir.status(&saved));
    println!(
        "{}",
        serde_json::to_string_pretty(&st).expect("state serializes")
    );
    Ok(0)
}

/// Every pid of the container: its cgroup's processes, else those in init's pid namespace.
fn pids(saved: &Saved) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::new();
    for d in &saved.cgroup_dirs {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
    }
    if out.is_empty() && state::start_time(saved.pid) == Some(saved.pid_start) {
        use std::os::unix::fs::MetadataExt;
        let ns = |pid: &str| {
            std::fs::metadata(format!("/proc/{pid}/ns/pid"))
                .ok()
                .map(|m| m.ino())
        };
        let want = ns(&saved.pid.to_string());
        let mine = ns("self");
        if want.is_some() && want != mine {
            if let Ok(entries) = std::fs::read_dir("/proc") {
                for e in entries.flatten() {
                    let name = e.file_name();
                    let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                        continue;
                    };
                    if ns(&pid.to_string()) == want {
                        out.push(pid);
                    }
                }
            }
        } else {
            out.push(saved.pid);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

pub fn kill(root: &Root, id: &str, signal: &str, all: bool) -> Result<i32, OciError> {
    let sig = super::parse_signal(signal)?;
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let status = dir.status(&saved);
    if !matches!(status, Status::Created | Status::Running) {
        return Err(OciError::Status {
            id: id.into(),
            status,
            hint: "container not running",
        });
    }
    if all {
        for pid in pids(&saved) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), sig);
        }
    }
    signal_init(&saved, sig)
        .map_err(|e| io("signal", Path::new(&format!("pid {}", saved.pid)))(e.into()))?;
    Ok(0)
}

/// Signals init through a pidfd checked against the saved start time (a recycled pid is
/// never signalled).
fn signal_init(saved: &Saved, sig: Signal) -> Result<(), nix::errno::Errno> {
    let pidfd = crate::sys::pidfd_open_process(Pid::from_raw(saved.pid))?;
    if state::start_time(saved.pid) != Some(saved.pid_start) {
        return Err(nix::errno::Errno::ESRCH);
    }
    crate::sys::pidfd_send_signal(&pidfd, sig as i32)
}

pub fn delete(root: &Root, id: &str, force: bool) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let status = dir.status(&saved);
    if status == Status::Running && !force {
        return Err(OciError::Status {
            id: id.into(),
            status,
            hint: "stop it first (reprorun kill) or pass --force",
        });
    }
    if matches!(status, Status::Created | Status::Running) {
        for pid in pids(&saved) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = signal_init(&saved, Signal::SIGKILL);
        for _ in 0..5000 {
            if state::start_time(saved.pid) != Some(saved.pid_start) {
                break;
            }
            // Our own child (after `run`): reap it.
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(saved.pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    finish(dir, &saved);
    Ok(0)
}

/// After the container stopped: poststop hooks, the cgroup, the state directory.
fn finish(dir: Dir, saved: &Saved) {
    if let Err(e) = hooks::run_all(
        "poststop",
        &saved.hooks.poststop,
        &state_bytes(saved, Status::Stopped),
    ) {
        eprintln!("reprorun: warning: {e}");
    }
    crate::sandbox::remove_cgroup(&saved.cgroup_dirs);
    // The monitor leaves by itself once init is gone.
    let _ = dir.remove();
}

/// `run`: create, start, and (unless detached) wait and delete; exits with the container's
/// status.
pub fn run(root: &Root, o: &CreateOpts, detach: bool) -> Result<i32, OciError> {
    let made = make(root, o)?;
    let Made { dir, saved } = made;
    if let Err(e) = start_dir(&dir, &saved) {
        let id = saved.id.clone();
        drop(dir);
        let _ = delete(root, &id, true);
        return Err(e);
    }
    if detach {
        return Ok(0);
    }
    let code = container::wait_init(Pid::from_raw(saved.pid))?;
    finish(dir, &saved);
    Ok(code)
}

pub fn list(root: &Root, json: bool, quiet: bool) -> Result<i32, OciError> {
    let mut rows = Vec::new();
    for id in root.ids()? {
        let Ok(dir) = root.get(&id) else { continue };
        let Ok(saved) = dir.load() else { continue };
        rows.push(saved.oci_state(dir.status(&saved)));
    }
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| io("write", Path::new("stdout"))(e);
    if quiet {
        for r in &rows {
            writeln!(out, "{}", r.id).map_err(w)?;
        }
    } else if json {
        writeln!(out, "{}", serde_json::to_string(&rows).expect("serializes")).map_err(w)?;
    } else {
        writeln!(out, "ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER").map_err(w)?;
        for r in &rows {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}",
                r.id,
                r.pid,
                r.status,
                r.bundle.display(),
                r.created,
                r.owner
            )
            .map_err(w)?;
        }
    }
    Ok(0)
}

pub fn ps(root: &Root, id: &str, json: bool) -> Result<i32, OciError> {
    let dir = root.get(id)?;
    let saved = dir.load()?;
    let list = if dir.status(&saved) == Status::Stopped {
        Vec::new()
    } else {
        pids(&saved)
    };
    if json {
        println!("{}", serde_json::to_string(&list).expect("serializes"));
    } else {
        println!("PID\tCMD");
        for pid in list {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .trim_end_matches('\0')
                        .replace('\0', " ")
                })
                .unwrap_or_default();
            println!("{pid}\t{cmd}");
        }
    }
    Ok(0)
}

/// Options of `exec` into a running container.
pub struct ExecOpts {
    pub id: String,
    pub process: Option<PathBuf>,
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub user: Option<(u32, Option<u32>)>,
    pub additional_gids: Vec<u32>,
    pub caps: Vec<String>,
    pub tty: bool,
    pub console_socket: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub detach: bool,
}

pub fn exec(root: &Root, o: &ExecOpts) -> Result<i32, OciError> {
    let dir = root.get(&o.id)?;
    let saved = dir.load()?;
    let status = dir.status(&saved);
    if status != Status::Running {
        return Err(OciError::Status {
            id: o.id.clone(),
            status,
            hint: "exec needs a running container",
        });
    }
    let plan = dir.load_plan()?;
    let exec_socket = dir.exec_socket();
    drop(dir);
    let mut env: std::collections::BTreeMap<String, String> = plan
        .env
        .iter()
        .filter_map(|e| e.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut security = plan.security.clone();
    security.preserve_fds = 0;
    let mut user = plan.process_user.clone();
    let mut cwd = plan.cwd.clone();
    let mut tty = o.tty;
    let argv = match &o.process {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(io("read --process", path))?;
            let bad = |reason: String| OciError::ParseConfig {
                path: path.clone(),
                reason,
            };
            let p: spec::Process = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
            // Checked as `create` checks config.json's process.
            convert::check_process(&p).map_err(|e| bad(e.to_string()))?;
            let (caps, rlimits) = convert::process_privilege(&p, plan.parent_maps.is_some())
                .map_err(|e| bad(e.to_string()))?;
            if p.capabilities.is_some() {
                security.caps = Some(caps);
            }
            if !rlimits.is_empty() {
                security.rlimits = rlimits;
            }
            for e in &p.env {
                if let Some((k, v)) = e.split_once('=') {
                    env.insert(k.into(), v.into());
                }
            }
            cwd = PathBuf::from(&p.cwd);
            user = Some(crate::plan::ProcessUser {
                uid: p.user.uid,
                gid: p.user.gid,
                additional_gids: p.user.additional_gids.clone(),
            });
            tty |= p.terminal;
            p.args
        }
        None => o.command.clone(),
    };
    if argv.is_empty() || argv[0].is_empty() {
        return Err(OciError::Usage(
            "exec: no command; give one after the container id, or --process FILE".into(),
        ));
    }
    for (k, v) in &o.env {
        env.insert(k.clone(), v.clone());
    }
    if let Some(c) = &o.cwd {
        cwd = c.clone();
    }
    if let Some((uid, gid)) = o.user {
        user = Some(crate::plan::ProcessUser {
            uid,
            gid: gid.unwrap_or(0),
            additional_gids: o.additional_gids.clone(),
        });
    }
    if !o.caps.is_empty() {
        let mut sets = security.caps.clone().unwrap_or_default();
        for c in &o.caps {
            let c = crate::security::capability(c).map_err(|e| OciError::Usage(e.to_string()))?;
            for set in [&mut sets.bounding, &mut sets.effective, &mut sets.permitted] {
                if !set.contains(&c) {
                    set.push(c.clone());
                }
            }
        }
        security.caps = Some(sets);
    }
    let console = match (&o.console_socket, tty) {
        (Some(p), true) => Some(OwnedFd::from(
            std::os::unix::net::UnixStream::connect(p)
                .map_err(io("connect to --console-socket", p))?,
        )),
        (None, true) => {
            return Err(OciError::Usage(
                "exec with a terminal needs --console-socket PATH".into(),
            ))
        }
        _ => None,
    };
    let process = ExecProcess {
        argv,
        env: env.into_iter().map(|(k, v)| format!("{k}={v}")).collect(),
        cwd,
        user,
        security,
        console,
        plan: &plan,
        cgroup_dirs: &saved.cgroup_dirs,
        exec_socket: &exec_socket,
    };
    let (pid, code) = container::exec_into(Pid::from_raw(saved.pid), process, o.detach)?;
    if let Some(p) = &o.pid_file {
        state::write_atomic(&absolute(p)?, pid.as_raw().to_string().as_bytes())?;
    }
    Ok(code.unwrap_or(0))
}

/// `features`: what this runtime supports, as the runtime spec's features document.
pub fn features() -> serde_json::Value {
    let mut mount_options: Vec<&str> = vec![
        "ro",
        "rw",
        "nosuid",
        "suid",
        "nodev",
        "dev",
        "noexec",
        "exec",
        "sync",
        "async",
        "dirsync",
        "mand",
        "nomand",
        "noatime",
        "atime",
        "nodiratime",
        "diratime",
        "relatime",
        "norelatime",
        "strictatime",
        "nostrictatime",
        "nosymfollow",
        "bind",
        "rbind",
        "private",
        "rprivate",
        "shared",
        "rshared",
        "slave",
        "rslave",
        "unbindable",
        "runbindable",
    ];
    mount_options.sort_unstable();
    let caps: Vec<String> = caps::all().iter().map(|c| c.to_string()).collect();
    let mut caps = caps;
    caps.sort();
    serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": super::OCI_VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "poststart", "poststop"],
        "mountOptions": mount_options,
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "time", "user", "uts"],
            "capabilities": caps,
            "cgroup": {"v1": true, "v2": true, "systemd": false, "systemdUser": false, "rdma": false},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86_64"],
            },
            "apparmor": {"enabled": false},
            "selinux": {"enabled": false},
            "intelRdt": {"enabled": false},
        },
        "annotations": {
            "org.reprorun.determinism": "on|off (default on)",
            "org.reprorun.date": "RFC 3339, YYYY-MM-DD, @EPOCH or now (default 2024-01-01T00:00:00Z)",
            "org.reprorun.clock": "start-at|frozen|tick[=STEP]",
            "org.reprorun.seed": "N (default 0)",
            "org.reprorun.random": "seeded|real",
            "org.reprorun.cpus": "N (default 1)",
        },
    })
}

/// `spec`: writes a default config.json into `bundle`.
pub fn write_spec(bundle: &Path, rootless: bool) -> Result<i32, OciError> {
    let path = bundle.join("config.json");
    if path.exists() {
        return Err(OciError::Usage(format!(
            "{} exists already; remove it first",
            path.display()
        )));
    }
    let text = serde_json::to_string_pretty(&spec::default_spec(rootless)).expect("serializes");
    std::fs::write(&path, text + "\n").map_err(io("write", &path))?;
    Ok(0)
}
