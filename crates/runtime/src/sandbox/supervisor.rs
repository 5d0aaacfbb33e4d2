//! The supervisor: stays in the caller's namespaces, creates init in new namespaces, forwards
//! signals, enforces the timeout and collects the exit status and resource usage.

use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::unistd::Pid;

use super::intercept::{notify, tracees, vdso};
use super::isolation::netns;
use super::protocol::{self, drain, InitMsg};
use super::tty::{self, Relay};
use super::{init, signals, Outcome, SandboxError};
use crate::exit::Status;
use crate::plan::{IdMap, Isolation, Plan};
use crate::sandbox::intercept::vdso::LISTENER_TAG;
use crate::sys::{clone_process, recv_packet, wait4, Usage};
use std::sync::mpsc::Sender;

/// How a watched child ended.
pub(super) struct Watched {
    pub(crate) status: libc::c_int,
    pub(crate) usage: Usage,
    pub(crate) timed_out: bool,
}

impl Watched {
    /// The outcome reprorun reports: 124 on timeout, else the exit status or 128+N.
    pub(crate) fn outcome(&self, isolation: Isolation) -> Outcome {
        Outcome {
            exit_code: if self.timed_out {
                Status::Timeout
            } else {
                Status::of_wait(self.status)
            }
            .code(),
            timed_out: self.timed_out,
            usage: self.usage,
            isolation,
            oom_killed: false,
            network: Default::default(),
        }
    }
}

/// How [`watch`] waits and what it serves.
pub(super) struct Watch<'a> {
    /// Reap every child (pins-only: orphans re-parent to us), not only the watched one.
    pub(crate) reap_all: bool,
    /// init's socket: a notification listener arriving on it goes to the server through
    /// this channel, a pty master starts the terminal relay; other messages are collected.
    pub(crate) sock: Option<(&'a OwnedFd, Option<Sender<OwnedFd>>)>,
    /// The relay between the caller's terminal and the workload's pty, if it has one already.
    pub(crate) relay: Option<Relay>,
    /// The egress proxy, started on the listening socket init sends (`--net allow`).
    pub(crate) proxy: Option<&'a mut Egress>,
    /// The mirror's npm registry, started on the listening socket init sends (`--mirror`).
    pub(crate) registry: Option<&'a mut Registry>,
    /// Return on init's `Done` rather than wait for its exit (the namespaces' teardown): an
    /// `exec` sandbox without a cgroup to remove afterwards.
    pub(crate) return_on_done: bool,
}

/// The mirror's npm registry of a `--mirror` run: served read-only from the host's side on
/// the listening socket init made on the sandbox's loopback; stopped when the run ends.
pub(super) struct Registry {
    root: std::path::PathBuf,
    running: Option<crate::mirror::serve::Server>,
}

impl Registry {
    pub(super) fn of(plan: &Plan) -> Option<Registry> {
        plan.registry.clone().map(|root| Registry {
            root,
            running: None,
        })
    }

    fn start(&mut self, listener: OwnedFd) -> Result<(), std::io::Error> {
        let listener = std::net::TcpListener::from(listener);
        let handler = crate::mirror::serve::mirror_tree(self.root.clone())?;
        self.running = Some(crate::mirror::serve::Server::start(listener, handler)?);
        Ok(())
    }
}

/// Opens `path` for appending (created if need be): a regular file, reached without
/// following a link (the plan resolved the path), never a FIFO or device.
pub(super) fn open_append(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use crate::sys::hostpath::{open_write, Write};
    open_write(path, false, Write::Append).map_err(std::io::Error::other)
}

/// The `--net-log` file of `plan`, for appending (`None` without one, or when it cannot be
/// opened: the caller checked it before the run).
pub(super) fn open_net_log(plan: &Plan) -> Option<std::fs::File> {
    plan.net_log.as_deref().and_then(|p| open_append(p).ok())
}

/// The egress proxy of a `--net allow` run: started when init's listener arrives, stopped
/// when the run ends (its record of connection attempts goes into the outcome).
pub(super) struct Egress {
    egress: crate::net::Egress,
    log: Option<std::path::PathBuf>,
    /// The proxy's helper process (`net::proxy::privsep`), forked when the run starts.
    helper: Option<crate::net::proxy::privsep::Helper>,
    /// `--net-record`, `--net-replay`: the run's cassette.
    cassette: Option<crate::net::cassette::Mode>,
}

impl Egress {
    /// Forks the proxy's helper into the run's cgroup with the sandbox's host ids, with the
    /// run's intercept and cassette; the caller is single-threaded (before the notification
    /// thread starts).
    pub(super) fn of(plan: &Plan, res: &super::Resources) -> Option<Egress> {
        let egress = plan.egress.clone()?;
        let (cgroup, cassette) = (res.cgroup, res.cassette.clone());
        let join = || cgroup.map_or(true, |cg| cg.add(nix::unistd::Pid::from_raw(0)).is_ok());
        let config = crate::net::proxy::Config::with_intercept(res.intercept.clone());
        let helper = crate::net::proxy::privsep::Helper::fork(
            &join,
            plan.uid_map.outside,
            plan.gid_map.outside,
            config.with_cassette(cassette.clone()),
        );
        Some(Egress {
            egress,
            log: plan.net_log.clone(),
            helper: helper.ok(),
            cassette,
        })
    }

    /// Starts serving `listener`. A proxy that cannot start leaves the sandbox with no way
    /// out, which is what the allowlist asks for anyway; the failure is reported.
    pub(super) fn start(&mut self, listener: OwnedFd) -> Result<(), std::io::Error> {
        let log = match &self.log {
            Some(path) => Some(open_append(path)?),
            None => None,
        };
        let config = crate::net::proxy::Config::default().with_cassette(self.cassette.clone());
        match &mut self.helper {
            Some(h) => h.serve(listener, self.egress.clone(), config, log),
            None => Err(std::io::Error::other(
                "its helper process could not be forked",
            )),
        }
    }

    /// Stops the proxy (every live connection ends) and returns its records.
    pub(super) fn stop(self) -> crate::net::log::Network {
        let network = self.helper.map(|h| h.stop()).unwrap_or_default();
        // The run's outcome stands; a cassette that could not be written is said.
        if let Some(Err(e)) = self.cassette.as_ref().map(|c| c.finish()) {
            eprintln!("reprorun: {e}");
        }
        network
    }
}

/// Waits for `child` while forwarding signals to it. At the deadline calls
/// `on_timeout` (which must make the child exit). Messages that arrive on the socket
/// meanwhile are collected into `msgs`.
pub(super) fn watch(
    child: Pid,
    deadline: Option<Instant>,
    mut on_timeout: impl FnMut(),
    how: Watch,
    msgs: &mut Vec<InitMsg>,
) -> Result<Watched, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    let sfd = SignalFd::with_flags(
        &signals::supervised_set(),
        SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
    )
    .map_err(step("signalfd"))?;
    let mut timed_out = false;
    let (sock, clock) = match how.sock {
        Some((s, c)) => (Some(s), c),
        None => (None, None),
    };
    let mut sock_open = sock.is_some();
    let waited = if how.reap_all {
        Pid::from_raw(-1)
    } else {
        child
    };
    let mut reap = true; // a SIGCHLD may predate the signalfd
    let mut relay = how.relay;
    let mut proxy = how.proxy;
    let mut registry = how.registry;
    let return_on_done = how.return_on_done;
    loop {
        // Not while the notification thread has a tracee (see `tracees`): soon after.
        let guard = if reap { tracees::may_reap() } else { None };
        if let Some(_guard) = guard {
            reap = false;
            let mut handed_over = tracees::take_exit(Some(child));
            while let Some((pid, status, usage)) = match handed_over.take() {
                Some(exit) => Ok(Some(exit)),
                None => wait4(waited, libc::WNOHANG | libc::__WNOTHREAD),
            }
            .or_else(|e| match e {
                Errno::ECHILD => Ok(None),
                e => Err(SandboxError::Supervise {
                    step: "wait",
                    errno: e,
                }),
            })? {
                if pid == child && (libc::WIFEXITED(status) || libc::WIFSIGNALED(status)) {
                    crate::trace::step("supervisor", "reap");
                    return Ok(ended(relay.as_mut(), status, usage, timed_out));
                }
            }
        }
        let timeout = match time_left(deadline) {
            Some(_) if reap => PollTimeout::from(1u8),
            Some(left) => left,
            None => {
                if !timed_out {
                    timed_out = true;
                    on_timeout();
                }
                PollTimeout::NONE
            }
        };
        let sock_ready = {
            let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
            let sock_at = match sock {
                Some(s) if sock_open => {
                    fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
                    Some(fds.len() - 1)
                }
                _ => None,
            };
            let (input, output) = relay.as_ref().map_or((None, None), Relay::sources);
            let mut at = |fd| {
                fds.push(PollFd::new(fd, PollFlags::POLLIN));
                fds.len() - 1
            };
            let input_at = input.map(&mut at);
            let output_at = output.map(&mut at);
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => {
                    return Err(SandboxError::Supervise {
                        step: "poll",
                        errno: e,
                    })
                }
            }
            let ready = |i: Option<usize>| i.is_some_and(|i| fds[i].any().unwrap_or(false));
            let (input_ready, output_ready) = (ready(input_at), ready(output_at));
            let sock_ready = ready(sock_at);
            let signalled = ready(Some(0));
            drop(fds);
            if let Some(r) = relay.as_mut() {
                if input_ready {
                    r.pump_input();
                }
                if output_ready {
                    r.pump_output();
                }
            }
            if signalled {
                reap |= on_signals(&sfd, relay.as_ref(), child, how.reap_all);
            }
            sock_ready
        };
        if sock_ready {
            match sock.map(recv_packet) {
                Some(Ok(Some((bytes, fd)))) => match (fd, clock.as_ref()) {
                    (Some(fd), Some(clock)) if bytes == [LISTENER_TAG] => {
                        crate::trace::step("supervisor", "receive the listener");
                        let _ = clock.send(fd);
                    }
                    (Some(fd), _) if bytes == [tty::MASTER_TAG] => {
                        relay = Some(Relay::new(fd, tty::Terminals::of_caller()));
                    }
                    (Some(fd), _) if bytes == [init::REGISTRY_TAG] => {
                        if let Some(r) = registry.as_deref_mut() {
                            if let Err(e) = r.start(fd) {
                                eprintln!("reprorun: mirror registry: {e}; npm cannot reach it");
                            }
                        }
                    }
                    (Some(fd), _) if bytes == [init::PROXY_TAG] => {
                        if let Some(p) = proxy.as_deref_mut() {
                            if let Err(e) = p.start(fd) {
                                eprintln!(
                                    "reprorun: egress proxy: {e}; the sandbox has no way out"
                                );
                            }
                        }
                    }
                    _ => match protocol::parse(&bytes) {
                        // init's exit status, as `wait4` would have given it.
                        Some(InitMsg::Done { code, usage }) if return_on_done => {
                            crate::trace::step("supervisor", "done");
                            let status = (code & 0xff) << 8;
                            return Ok(ended(relay.as_mut(), status, usage, timed_out));
                        }
                        other => msgs.extend(other),
                    },
                },
                _ => sock_open = false, // hung up, or nothing more will come
            }
        }
    }
}

/// The watched child's end: what the terminal relay still holds is passed on first.
fn ended(relay: Option<&mut Relay>, status: libc::c_int, usage: Usage, timed_out: bool) -> Watched {
    if let Some(r) = relay {
        r.drain();
    }
    Watched {
        status,
        usage,
        timed_out,
    }
}

/// How long `poll` may wait before the deadline: `None` once it has passed.
fn time_left(deadline: Option<Instant>) -> Option<PollTimeout> {
    let Some(d) = deadline else {
        return Some(PollTimeout::NONE);
    };
    let left = d.saturating_duration_since(Instant::now());
    (!left.is_zero()).then(|| {
        PollTimeout::try_from(left.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX)
    })
}

/// Reads the pending signals: passes each on to `child` (a window-size change goes to the
/// pty instead, which signals the workload). Returns whether a SIGCHLD asks for a reap.
fn on_signals(sfd: &SignalFd, relay: Option<&Relay>, child: Pid, child_is_workload: bool) -> bool {
    let mut reap = false;
    while let Ok(Some(info)) = sfd.read_signal() {
        if info.ssi_signo == Signal::SIGCHLD as u32 {
            reap = true;
        } else if let (Some(r), true) = (relay, info.ssi_signo == Signal::SIGWINCH as u32) {
            r.resize();
        } else if signals::should_forward(info.ssi_signo) {
            signals::pass_on(child, info.ssi_signo, info.ssi_code, child_is_workload);
        }
    }
    reap
}

/// Clones init into the plan's new namespaces (signals blocked first, so it inherits the
/// mask) and returns its pid and our end of its socket. The child never returns from here.
/// `extra` adds clone flags (`CLONE_PARENT` from [`crate::sandbox::isolation::userjoin`]).
pub(super) fn clone_init(
    plan: &Plan,
    seccomp: &[seccompiler::BpfProgram],
    lifecycle: Option<&init::Lifecycle>,
    stdio: Option<super::Stdio>,
    extra: libc::c_int,
    into: Option<&crate::sandbox::isolation::devices::Shared>,
) -> Result<(Pid, OwnedFd), SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    signals::block_supervised().map_err(step("block signals"))?;
    let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(step("socketpair"))?;
    // The sandbox starts without supplementary groups, whoever calls: a caller that may
    // change its groups drops them for the clone and takes them back after. (An unprivileged
    // caller's stay, shown as nogroup inside: a user namespace cannot drop them.)
    let groups = nix::unistd::getgroups()
        .ok()
        .filter(|g| !g.is_empty() && nix::unistd::setgroups(&[]).is_ok());
    crate::trace::step("supervisor", "socketpair, groups");
    let mut flags = plan.clone_flags() | extra;
    if netns::by_helper(plan, lifecycle.is_some()) {
        flags &= !libc::CLONE_NEWNET; // made beside init (`netns`)
    }
    // Straight into the shared device cgroup where it is on v2; where `clone3` is refused
    // (ENOSYS: a container's seccomp profile), cloned as usual and moved in after.
    let cloned = match into.and_then(|d| d.clone_into()) {
        Some(cgroup) => match crate::sys::clone_process_into(flags, cgroup) {
            Err(Errno::ENOSYS) => clone_process(flags),
            Ok(Some(pid)) => {
                into.inspect(|d| d.cloned_into());
                Ok(Some(pid))
            }
            other => other,
        },
        // v1: the supervisor steps into the cgroup for the clone; init starts there.
        None => {
            let entered = into.is_some_and(|d| d.enter());
            let cloned = clone_process(flags);
            if entered && matches!(cloned, Ok(Some(_))) {
                into.inspect(|d| d.cloned_into());
            }
            cloned
        }
    };
    if let Some(groups) = groups.filter(|_| !matches!(cloned, Ok(None))) {
        let _ = nix::unistd::setgroups(&groups);
    }
    match cloned {
        Err(errno) => Err(SandboxError::Unavailable {
            reason: format!("create namespaces: {errno}"),
        }),
        Ok(None) => {
            crate::trace::step("init", "cloned");
            drop(ours);
            init::main(plan, seccomp, theirs, lifecycle, stdio)
        }
        Ok(Some(pid)) => {
            crate::trace::step("supervisor", "clone init");
            Ok((pid, ours))
        }
    }
}

/// Writes multi-range id maps for `child` (the creator is in the parent user namespace).
/// `setgroups` is denied for an unprivileged creator (the kernel's condition) or when
/// `deny_setgroups` asks (`exec`'s sandboxes deny it whoever calls).
pub(super) fn write_maps(
    child: Pid,
    uid: &[IdMap],
    gid: &[IdMap],
    deny_setgroups: bool,
) -> Result<(), SandboxError> {
    if deny_setgroups || !nix::unistd::geteuid().is_root() {
        std::fs::write(format!("/proc/{child}/setgroups"), "deny").map_err(|source| {
            SandboxError::IdMap {
                file: "setgroups",
                source,
            }
        })?;
    }
    for (file, maps) in [("uid_map", uid), ("gid_map", gid)] {
        std::fs::write(
            format!("/proc/{child}/{file}"),
            crate::sandbox::isolation::idmap::map_text(maps),
        )
        .map_err(|source| SandboxError::IdMap { file, source })?;
    }
    Ok(())
}

/// The error a message from init stands for (`None` for `Ready`).
pub(super) fn init_error(msg: InitMsg) -> Option<SandboxError> {
    match msg {
        InitMsg::SetupFailed { step, refusal, .. } => Some(if refusal {
            SandboxError::Unavailable { reason: step }
        } else {
            SandboxError::Init { step }
        }),
        InitMsg::ExecFailed { program, errno } => Some(SandboxError::Exec {
            program,
            errno: Errno::from_raw(errno),
        }),
        InitMsg::Ready | InitMsg::Done { .. } => None,
    }
}

/// Runs the plan in full isolation.
pub(crate) fn run(plan: &Plan, res: &super::Resources) -> Result<Outcome, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    let start = Instant::now();
    let (child, ours) = clone_init(plan, res.seccomp, None, res.stdio, 0, res.devices)?;
    // A root caller's id maps, then into the cgroups before init forks anything, then its
    // work tree, binds and image cloned with their id mappings (opened without following a
    // link) here on the host; init waits for the word.
    if plan.parent_maps.is_some() || res.cgroup.is_some() {
        let added = match &plan.parent_maps {
            Some(m) => write_maps(child, &m.uid, &m.gid, true),
            None => Ok(()),
        }
        .and_then(|()| match res.cgroup {
            Some(cg) => cg.add(child).map_err(SandboxError::from),
            None => Ok(()),
        })
        .and_then(|()| match res.devices {
            Some(shared) => shared.add(child).map_err(SandboxError::from),
            None => Ok(()),
        })
        .and_then(|()| crate::sandbox::isolation::idmap::send_trees(plan, child, &ours));
        if let Err(e) = added {
            let _ = kill(child, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(child, None);
            return Err(e);
        }
        let _ = nix::sys::socket::send(
            std::os::fd::AsRawFd::as_raw_fd(&ours),
            &[init::GO],
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        );
    }
    // Back to our own device cgroup (v1) while init sets up, before any helper or thread.
    if let Some(d) = res.devices {
        d.leave();
    }
    // The network namespace, made beside init while it builds the root.
    let net_helper = netns::by_helper(plan, false)
        .then(|| netns::spawn_helper(child, &ours))
        .flatten();
    // Direct attempts at addresses outside the sandbox, noted by the notification server.
    let journal = plan
        .egress
        .as_ref()
        .map(|_| std::sync::Arc::new(crate::net::log::Journal::new(open_net_log(plan))));
    // The proxy's helper, forked while this process is single-threaded.
    let mut egress = Egress::of(plan, res);
    let server = if vdso::SUPPORTED && plan.intercept {
        let mut config = notify::Config::from_plan(plan);
        config.journal = journal.clone();
        let server = notify::start(config, notify::PageAt::sandbox(child))
            .map_err(step("notification thread"))?;
        crate::trace::step("supervisor", "start the notification thread");
        Some(server)
    } else {
        None
    };
    let deadline = plan.timeout_ms.map(|ms| start + Duration::from_millis(ms));
    let mut msgs = Vec::new();
    let mut registry = Registry::of(plan);
    let watched = watch(
        child,
        deadline,
        || {
            // Killing pid 1 tears down the whole pid namespace, daemons included.
            let _ = kill(child, Signal::SIGKILL);
        },
        Watch {
            reap_all: false,
            sock: Some((&ours, server.as_ref().map(|s| s.listener.clone()))),
            relay: None,
            proxy: egress.as_mut(),
            registry: registry.as_mut(),
            return_on_done: res.cgroup.is_none(),
        },
        &mut msgs,
    );
    let network = crate::net::log::merge(
        egress.map(Egress::stop).unwrap_or_default(),
        journal.map(|j| j.take()).unwrap_or_default(),
    );
    if let Some(helper) = net_helper {
        let _ = nix::sys::wait::waitpid(helper, None); // long done: it exits once it has sent
    }
    let watched = watched?;
    msgs.extend(drain(&ours));
    // A `Done` that came with the exit, or after it, is no failure.
    msgs.retain(|m| !matches!(m, InitMsg::Done { .. }));
    crate::trace::step("supervisor", "drain init's socket");
    if let Some(msg) = msgs.into_iter().next() {
        // The workload never ran: end the server thread before anything else (e.g. a
        // pins-only fallback that forks) happens in this process.
        if let Some(server) = server {
            server.stop_unused();
        }
        if let Some(e) = init_error(msg) {
            return Err(e);
        }
    }
    let mut outcome = watched.outcome(Isolation::Full);
    outcome.network = network;
    Ok(outcome)
}

/// Waits for a child of this process (init after `reprorun run`, the exec helper),
/// forwarding signals to it; returns its exit code (128+N for signal N).
pub(crate) fn wait_init(init: Pid) -> Result<i32, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    signals::block_supervised().map_err(step("block signals"))?;
    let mut msgs = Vec::new();
    let watched = watch(
        init,
        None,
        || {},
        Watch {
            reap_all: false,
            sock: None,
            relay: None,
            proxy: None,
            registry: None,
            return_on_done: false,
        },
        &mut msgs,
    )?;
    Ok(watched.outcome(crate::plan::Isolation::Full).exit_code)
}
