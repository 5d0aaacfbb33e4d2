//! Pid 1 inside the sandbox. Sets the sandbox up from the plan (identity maps, hostname,
//! loopback, mounts, pivot_root, time namespace), forks the workload, then reaps zombies and
//! forwards signals until the workload exits, and exits with the workload's status.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use thiserror::Error;

use super::protocol::{post, InitMsg};
use crate::exit::{ExitStatus, Status};
use crate::sandbox::isolation::mounts::MountError;
mod steps;
pub(crate) use steps::{PROXY_TAG, REGISTRY_TAG};

use super::intercept::{notify, vdso};
use super::tty::{self, Terminals};
use super::{signals, spawn, workload};
use crate::determinism::entropy::{self, Stream};
use crate::determinism::RandomMode;
use crate::plan::{Plan, ENTROPY_FIFO};

#[derive(Debug, Error)]
pub(crate) enum InitError {
    #[error("the supervisor exited before the sandbox started")]
    ParentGone,
    #[error("write {file}: {errno}")]
    IdMap { file: &'static str, errno: Errno },
    #[error("set hostname: {0}")]
    Hostname(Errno),
    #[error("bring up loopback: {0}")]
    Loopback(Errno),
    #[error("listen on 127.0.0.1:3128 for the egress proxy: {0}")]
    ProxyListener(Errno),
    #[error("listen on 127.0.0.1:4873 for the mirror's npm registry: {0}")]
    RegistryListener(Errno),
    #[error(transparent)]
    Mount(#[from] MountError),
    #[error("chdir {0}: {1}")]
    Chdir(String, Errno),
    #[error("time namespace: {0}")]
    TimeNs(Errno),
    #[error("signalfd: {0}")]
    Signals(Errno),
    #[error("fork workload: {0}")]
    Fork(Errno),
    #[error("exec {program}: {errno}")]
    Exec { program: String, errno: Errno },
    /// A step of the workload's own preparation before its exec.
    #[error("{step}: {errno}")]
    Prepare { step: &'static str, errno: Errno },
    #[error("open the seeded /dev/urandom: {0}")]
    Entropy(Errno),
    #[error("join namespace {path}: {errno}")]
    Join { path: String, errno: Errno },
    #[error("terminal: {step}: {errno}")]
    Terminal { step: &'static str, errno: Errno },
    #[error("wait for start: {0}")]
    Start(Errno),
    #[error("standard input, output and error: {0}")]
    Stdio(Errno),
}

impl InitError {
    fn to_msg(&self) -> InitMsg {
        match self {
            InitError::Exec { program, errno } => InitMsg::ExecFailed {
                program: program.clone(),
                errno: *errno as i32,
            },
            other => {
                let errno = match other {
                    InitError::IdMap { errno, .. } => *errno,
                    InitError::Mount(m) => m.errno(),
                    InitError::Hostname(e)
                    | InitError::Loopback(e)
                    | InitError::ProxyListener(e)
                    | InitError::RegistryListener(e)
                    | InitError::Chdir(_, e)
                    | InitError::TimeNs(e)
                    | InitError::Signals(e)
                    | InitError::Entropy(e)
                    | InitError::Fork(e)
                    | InitError::Start(e)
                    | InitError::Stdio(e) => *e,
                    InitError::Join { errno, .. }
                    | InitError::Terminal { errno, .. }
                    | InitError::Prepare { errno, .. } => *errno,
                    _ => Errno::UnknownErrno,
                };
                // Any isolation step the host refuses: a container engine's seccomp profile
                // answers EPERM or ENOSYS, a missing capability EPERM or EACCES, a kernel
                // that cannot stack the mounts (overlay on the engine's overlay) EINVAL.
                // Not a refusal: a path of the caller's that is missing or a link.
                let refusal = match other {
                    InitError::Mount(MountError::Target { .. } | MountError::Link { .. }) => false,
                    InitError::Mount(m) => {
                        m.is_refusal()
                            || !matches!(errno, Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP)
                    }
                    InitError::ParentGone
                    | InitError::Chdir(..)
                    | InitError::Start(_)
                    | InitError::Stdio(_) => false,
                    _ => matches!(
                        errno,
                        Errno::EPERM
                            | Errno::EACCES
                            | Errno::ENOSYS
                            | Errno::EINVAL
                            | Errno::EOPNOTSUPP
                    ),
                };
                InitMsg::SetupFailed {
                    step: other.to_string(),
                    errno: errno as i32,
                    refusal,
                }
            }
        }
    }
}

impl ExitStatus for InitError {
    fn status(&self) -> Status {
        match self {
            InitError::Exec { errno, .. } => Status::exec_failed(*errno as i32),
            _ => Status::RuntimeError,
        }
    }
}

/// The supervisor's word that init may go on (it has joined the sandbox's cgroup).
pub(crate) const GO: u8 = b'G';

/// The creator's word (OCI create) that the container's state is saved: init no longer dies
/// with its creator and goes on to wait for `start`.
pub(crate) const COMMIT: u8 = b'C';

/// Set once the creator let go of us: failures from then on are init's to report.
static COMMITTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What init of an OCI container (created now, started later) gets besides the plan.
pub(crate) struct Lifecycle {
    /// `exec.fifo` of the container's state directory, opened `O_PATH`: init opens it for
    /// writing, which blocks until `reprorun start` opens it for reading.
    pub(crate) exec_fifo: OwnedFd,
    /// The connected `--console-socket`: with `process.terminal`, the pty's master goes
    /// out on it.
    pub(crate) console: Option<OwnedFd>,
    /// The detached idmapped trees the creator made, in the order of the plan's idmapped
    /// binds; taken when the root is built (the copy in the creator is dropped with it).
    pub(crate) trees: std::cell::Cell<Vec<crate::sandbox::isolation::idmap::Tree>>,
}

/// Runs as pid 1 and never returns.
pub(crate) fn main(
    plan: &Plan,
    seccomp: &[seccompiler::BpfProgram],
    sock: OwnedFd,
    lifecycle: Option<&Lifecycle>,
    stdio: Option<super::Stdio>,
) -> ! {
    // The workload's own stdio, before anything else (a failure is reported on `sock`).
    let started = match stdio.map(super::Stdio::install) {
        Some(Err(errno)) => Err(InitError::Stdio(errno)),
        _ => Ok(()),
    };
    let code = match started.and_then(|()| run(plan, seccomp, &sock, lifecycle)) {
        Ok(code) => code,
        Err(e) => {
            post(&sock, &e.to_msg());
            if COMMITTED.load(std::sync::atomic::Ordering::Relaxed) {
                // After `create` nobody reads the socket: the container's stderr (the
                // engine's log) is where this goes.
                eprintln!("reprorun: {}", crate::util::printable(&e.to_string()));
            }
            e.status()
        }
    }
    .code();
    crate::trace::step("init", "workload reaped, exit");
    if lifecycle.is_none() {
        // An `exec` sandbox: the supervisor may return now, before the teardown.
        steps::finish(&sock, code);
    }
    // SAFETY: _exit ends the process at once without running the parent's atexit handlers or
    // flushing stdio buffers copied from it at clone time, which belong to the supervisor.
    unsafe { libc::_exit(code) }
}

fn run(
    plan: &Plan,
    seccomp: &[seccompiler::BpfProgram],
    sock: &OwnedFd,
    lifecycle: Option<&Lifecycle>,
) -> Result<Status, InitError> {
    // Die with the supervisor; if it is already gone, its end of the socket has hung up.
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(|_| InitError::ParentGone)?;
    // The sandbox reads /proc/1/cmdline: not the caller's command line (host paths, --env
    // values).
    hide_command_line();
    crate::trace::step("init", "pdeathsig, hide the command line");
    // Out of the caller's process group and away from its terminal: the supervisor, which
    // stays there, passes the caller's signals on; nothing in the sandbox can signal the
    // caller's group. A container's init leads a session of its own, as runc's does.
    let leave = match lifecycle {
        Some(_) => tty::Leave::Session,
        None => tty::Leave::Group,
    };
    tty::leave_caller(leave).map_err(|errno| InitError::Terminal {
        step: "leave the caller's session",
        errno,
    })?;
    let mut fds = [nix::poll::PollFd::new(
        sock.as_fd(),
        nix::poll::PollFlags::empty(),
    )];
    if nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).is_ok()
        && fds[0]
            .revents()
            .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLHUP))
    {
        return Err(InitError::ParentGone);
    }
    crate::trace::step("init", "leave the caller's session, check the supervisor");

    // A container's trees were made before init; an `exec` sandbox's arrive with the word
    // to go (`Step::AwaitGo`).
    let mut trees = lifecycle.map(|l| l.trees.take()).unwrap_or_default();
    for step in steps::steps(plan, lifecycle.is_some()) {
        steps::perform(step, plan, (sock, lifecycle.is_some()), &mut trees)?;
        crate::trace::step_with("init", || format!("{step:?}"));
    }

    // Seeded /dev/urandom (where the plan made it a FIFO): filled before the workload starts.
    let seeded = plan.random == RandomMode::Seeded
        && plan.intercept
        && plan
            .mounts
            .iter()
            .any(|m| matches!(m, crate::plan::MountOp::Fifo { dest, .. } if dest.as_path() == std::path::Path::new(ENTROPY_FIFO)));
    let entropy = match seeded {
        true => Some(EntropyFeed::open(plan.seed).map_err(InitError::Entropy)?),
        false => None,
    };
    crate::trace::step("init", "fill the entropy FIFO");
    let mut pty_slave = None;
    // An OCI container's exec.fifo, opened once `start` is there: its byte is written
    // once the program runs, so that `start` returns after it (a `kill` then reaches it).
    let mut started = None;
    let ttys = Terminals::of_caller();
    if lifecycle.is_none() && !plan.share_tty && ttys.any() {
        // The caller's terminal stays outside: the workload gets a pty of the sandbox's own
        // devpts, whose master the supervisor relays.
        let t = |(step, errno)| InitError::Terminal { step, errno };
        let (master, slave) = tty::open_pty("/dev/ptmx").map_err(t)?;
        crate::sys::send_fd(sock, &master, tty::MASTER_TAG)
            .map_err(|e| t(("send the pty master", e)))?;
        pty_slave = Some((slave, ttys));
    }
    if let Some(lc) = lifecycle {
        let (slave, fifo) = await_start(plan, sock, lc)?;
        if let Some(slave) = slave {
            pty_slave = Some((slave, Terminals([true; 3])));
        }
        started = Some(fifo);
    }
    // The workload routes its clock, entropy, identity and directory calls (and its execs)
    // to the supervisor.
    crate::trace::step("init", "terminal");
    let config = notify::Config::from_plan(plan);
    let filter = config.filter();
    crate::trace::step("init", "build the notification filter");
    let sfd = SignalFd::with_flags(&signals::supervised_set(), SfdFlags::SFD_CLOEXEC)
        .map_err(InitError::Signals)?;
    let notify = (vdso::SUPPORTED && plan.intercept).then_some(workload::Notify {
        sock,
        filter: &filter,
        patches_execs: config.patches_execs(),
    });
    // SAFETY: init is single-threaded, and the workload's exec is answered by the
    // supervisor, not by init (which only waits for it).
    let spawned = unsafe {
        spawn::spawn(
            spawn::Start::Borrow,
            || match &pty_slave {
                Some((slave, on)) => tty::take_terminal(slave, *on),
                None => Ok(()),
            },
            &plan.argv,
            &plan.env,
            workload::ProcessPins {
                scoped: lifecycle.is_none(),
                // init has no controlling terminal now, whichever way it left.
                leave: match leave {
                    tty::Leave::Session => tty::Leave::Session,
                    _ => tty::Leave::GroupOnly,
                },
                ..workload::ProcessPins::from_plan(plan, seccomp)
            },
            true,
            notify,
        )
    }
    .map_err(InitError::Fork)?;
    crate::trace::step("init", "start the workload (until its exec)");
    let confirmed = spawned.confirm();
    crate::trace::step("init", "workload exec confirmed");
    if let Some(fifo) = started {
        release_start(fifo)?;
    }
    let workload = confirmed.map_err(|f| match f.step {
        workload::Prep::Exec => InitError::Exec {
            program: plan.argv[0].clone(),
            errno: f.errno,
        },
        step => InitError::Prepare {
            step: step.name(),
            errno: f.errno,
        },
    })?;
    // From now on nothing in the sandbox may look into init (/proc/1/exe is reprorun's own
    // binary on the host: CVE-2019-5736), and it cannot be traced. The supervisor has mapped
    // what it needed from init's root before the workload's exec went through.
    nix::sys::prctl::set_dumpable(false).map_err(InitError::Signals)?;
    Ok(supervise(&sfd, workload, entropy))
}

/// Overwrites this process's argument area so that `/proc/self/cmdline` reads
/// `reprorun-init`: the name, a NUL, then spaces to the end of the area (its last byte not
/// NUL, so the kernel shows only the first string, as for `setproctitle`). Best effort.
fn hide_command_line() {
    const NAME: &[u8] = b"reprorun-init\0";
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // Fields from the state (field 3) on, after the command name in parentheses; arg_start
    // and arg_end are fields 48 and 49.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return;
    };
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let (Some(&start), Some(&end)) = (fields.get(48 - 4), fields.get(49 - 4)) else {
        return;
    };
    let len = end.saturating_sub(start) as usize;
    if start == 0 || len < NAME.len() + 1 {
        return;
    }
    // SAFETY: [arg_start, arg_end) is this process's own argument area on its stack, mapped
    // and writable; nothing in init reads the arguments after this point.
    let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, len) };
    area[..NAME.len()].copy_from_slice(NAME);
    area[NAME.len()..].fill(b' ');
}

/// An OCI container's init between `create` and `start`: its terminal (with
/// `process.terminal`), the program checked, `Ready` posted, the creator's commit awaited and
/// acknowledged, then `start` awaited. Returns the terminal's slave, if any.
fn await_start(
    plan: &Plan,
    sock: &OwnedFd,
    lc: &Lifecycle,
) -> Result<(Option<OwnedFd>, std::fs::File), InitError> {
    let mut slave = None;
    if plan.terminal {
        slave = Some(open_terminal(lc.console.as_ref())?);
        // The caller's stdio is not the container's: an engine waiting for end-of-file
        // on it (containerd's create) must not wait for the container's exit.
        crate::sys::stdio_to_null();
    }
    check_program(plan)?;
    post(sock, &InitMsg::Ready);
    // The creator saves the container's state, then lets go of us.
    let mut byte = [0u8; 1];
    match nix::sys::socket::recv(
        sock.as_raw_fd(),
        &mut byte,
        nix::sys::socket::MsgFlags::empty(),
    ) {
        Ok(1) if byte[0] == COMMIT => {}
        _ => return Err(InitError::ParentGone),
    }
    // SAFETY: prctl(PR_SET_PDEATHSIG, 0) only clears this process's parent-death signal.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0) };
    COMMITTED.store(true, std::sync::atomic::Ordering::Relaxed);
    // The creator waits for this before it may exit.
    let _ = nix::sys::socket::send(
        sock.as_raw_fd(),
        &[COMMIT],
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    );
    let fifo = wait_for_start(&lc.exec_fifo)?;
    Ok((slave, fifo))
}

/// Refuses a program that is not in the new root before the container is reported created
/// (as runc does: `podman run IMG nonexistent` fails at create).
fn check_program(plan: &Plan) -> Result<(), InitError> {
    use std::os::unix::fs::PermissionsExt;
    let program = &plan.argv[0];
    let exists = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.contains('/') {
        let p = std::path::Path::new(program);
        exists(&if p.is_absolute() {
            p.to_path_buf()
        } else {
            plan.cwd.join(p)
        })
    } else {
        let path = plan
            .env
            .iter()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or(crate::determinism::FROZEN_PATH);
        path.split(':')
            .filter(|d| !d.is_empty())
            .any(|d| exists(&std::path::Path::new(d).join(program)))
    };
    if found {
        Ok(())
    } else {
        Err(InitError::Exec {
            program: program.clone(),
            errno: Errno::ENOENT,
        })
    }
}

/// Blocks until `reprorun start` opens the exec FIFO for reading; the byte it waits for is
/// written by [`release_start`].
fn wait_for_start(fifo: &OwnedFd) -> Result<std::fs::File, InitError> {
    let path = format!("/proc/self/fd/{}", fifo.as_raw_fd());
    std::fs::OpenOptions::new()
        .write(true) // std opens close-on-exec
        .open(path)
        .map_err(|e| InitError::Start(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))
}

/// Lets `start` return: the program's exec went through (or failed: its status tells).
fn release_start(mut fifo: std::fs::File) -> Result<(), InitError> {
    use std::io::Write;
    fifo.write_all(b"0")
        .map_err(|e| InitError::Start(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))
}

/// Opens a new pseudo-terminal in the container's devpts and sends its master over the
/// console socket (SCM_RIGHTS, as runc does); returns the slave for the workload.
pub(super) fn open_terminal(console: Option<&OwnedFd>) -> Result<OwnedFd, InitError> {
    let t = |(step, errno)| InitError::Terminal { step, errno };
    let console = console.ok_or(InitError::Terminal {
        step: "process.terminal is set but no --console-socket was given",
        errno: Errno::EINVAL,
    })?;
    let (master, slave) = tty::open_pty("/dev/ptmx").map_err(t)?;
    // The master itself goes (and is closed here once sent).
    crate::sys::send_fd(console, &master, b'p').map_err(|e| t(("send the pty master", e)))?;
    Ok(slave)
}

/// Bytes the seeded /dev/urandom FIFO holds.
const FIFO_BYTES: libc::c_int = 16 * 1024;

/// Keeps the seeded /dev/urandom FIFO full: one stream for the whole sandbox, written in
/// order, so readers that take turns read the same bytes on every run.
struct EntropyFeed {
    fifo: std::fs::File,
    stream: Stream,
    /// Bytes taken from the stream but not yet accepted by the pipe.
    pending: Vec<u8>,
}

impl EntropyFeed {
    fn open(seed: u64) -> Result<EntropyFeed, Errno> {
        use std::os::unix::fs::OpenOptionsExt;
        // Read-write: the open never waits for a reader, and readers never see end-of-file.
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(ENTROPY_FIFO)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let mut feed = EntropyFeed {
            fifo,
            stream: Stream::new(seed, entropy::DOMAIN_DEVICE, 0),
            pending: Vec::new(),
        };
        // A pipe of 16 KiB rather than the default 64: the stream is SHA-256 blocks, and
        // filling 64 KiB before every start cost ~0.4 ms whether or not anything reads
        // /dev/urandom (most programs call getrandom instead; issue 20). A reader of more
        // takes it in 16 KiB turns, as fast as it is made. Refused (a lower
        // fs.pipe-max-size): the default size stays.
        // SAFETY: F_SETPIPE_SZ on a descriptor this function owns; no memory is passed.
        let _ = unsafe { libc::fcntl(feed.fifo.as_raw_fd(), libc::F_SETPIPE_SZ, FIFO_BYTES) };
        // The whole pipe before the workload starts; afterwards only what readers take is
        // made again (generating bytes nobody reads would cost every run).
        feed.fill(FIFO_BYTES as usize / 4096);
        Ok(feed)
    }

    /// Writes up to `chunks` 4 KiB chunks (in writes of up to 64 KiB), or until the pipe is
    /// full.
    fn fill(&mut self, chunks: usize) {
        use std::io::Write;
        let mut left = chunks;
        while left > 0 {
            if self.pending.is_empty() {
                let n = left.min(16);
                left -= n;
                self.pending = vec![0u8; n * 4096];
                self.stream.fill(&mut self.pending);
            }
            match (&self.fifo).write(&self.pending) {
                Ok(n) if n > 0 => {
                    self.pending.drain(..n);
                    if !self.pending.is_empty() {
                        return; // the pipe took part of it: full for now
                    }
                }
                _ => return, // full (EAGAIN), or broken: nothing more now
            }
        }
    }
}

/// Reaps every child and forwards signals until the workload exits (keeping the entropy
/// FIFO full meanwhile); returns its status as an exit code (128+N when killed by signal N).
fn supervise(sfd: &SignalFd, workload: Pid, mut entropy: Option<EntropyFeed>) -> Status {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        if let Some(feed) = entropy.as_mut() {
            let mut fds = [
                PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
                PollFd::new(feed.fifo.as_fd(), PollFlags::POLLOUT),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => return Status::RuntimeError,
            }
            let (signalled, writable) =
                (fds[0].any().unwrap_or(false), fds[1].any().unwrap_or(false));
            if writable {
                feed.fill(usize::MAX);
            }
            if !signalled {
                continue;
            }
        }
        let info = match sfd.read_signal() {
            Ok(Some(info)) => info,
            Ok(None) | Err(Errno::EINTR) => continue,
            Err(_) => return Status::RuntimeError,
        };
        if info.ssi_signo == Signal::SIGCHLD as u32 {
            loop {
                match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(pid, code)) if pid == workload => {
                        return Status::Exited(code)
                    }
                    Ok(WaitStatus::Signaled(pid, sig, _)) if pid == workload => {
                        return Status::Signaled(sig as i32)
                    }
                    Ok(WaitStatus::StillAlive) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        } else if signals::should_forward(info.ssi_signo) {
            signals::pass_to_workload(workload, info.ssi_signo, info.ssi_code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(e: InitError) -> bool {
        match e.to_msg() {
            InitMsg::SetupFailed { refusal, .. } => refusal,
            other => panic!("not a setup failure: {other:?}"),
        }
    }

    #[test]
    fn any_isolation_step_the_host_refuses_is_a_refusal() {
        assert!(refusal(InitError::Hostname(Errno::EPERM)));
        assert!(refusal(InitError::Prepare {
            step: "personality",
            errno: Errno::ENOSYS,
        }));
        assert!(refusal(InitError::Mount(MountError::Op {
            kind: "overlay",
            dest: "/etc".into(),
            errno: Errno::EINVAL,
        })));
        assert!(refusal(InitError::TimeNs(Errno::EINVAL)));
        // The caller's own paths, and a supervisor that went away, are not.
        assert!(!refusal(InitError::Mount(MountError::Op {
            kind: "bind",
            dest: "/data".into(),
            errno: Errno::ENOENT,
        })));
        assert!(!refusal(InitError::Mount(MountError::Target {
            dest: "/x/y".into(),
            errno: Errno::EROFS,
        })));
        assert!(!refusal(InitError::Chdir("/work".into(), Errno::EACCES)));
        assert!(!refusal(InitError::ParentGone));
        assert!(!refusal(InitError::Fork(Errno::EAGAIN)));
    }
}
