//! OCI lifecycle: a container created now and started later, and processes executed into a
//! running one.
//!
//! Process model: the creating process (`reprorun create`) clones init, as `exec`'s
//! supervisor does, and waits until init reports the container set up. It then starts the
//! *monitor* — a small daemon in its own session that serves the notification listeners
//! (the vDSO path for static programs, entropy, identity, directory order) and lives as long
//! as init — and exits. Init is then an orphan that the engine (conmon, as child subreaper)
//! reaps: its exit status is the container's. Init blocks on the state directory's
//! `exec.fifo` until `reprorun start` opens it.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{AddressFamily, SockFlag, SockType};
use nix::unistd::Pid;

use super::init::{self, Lifecycle};
use super::intercept::{notify, vdso};
use super::isolation::cgroup;
use super::protocol;
pub(crate) use super::supervisor::wait_init;
use super::SandboxError;
use crate::exit::Status;
use crate::plan::{Namespace, Plan};
use crate::sandbox::intercept::vdso::LISTENER_TAG;

/// A container whose init waits for the creator's commit.
pub(crate) struct Created {
    pub(crate) pid: Pid,
    /// The cgroup directories (kept after the creator exits; `delete` removes them).
    pub(crate) cgroup_dirs: Vec<PathBuf>,
    sock: OwnedFd,
    pidfd: OwnedFd,
    /// The egress proxy's listening socket (`org.reprorun.net.allow`): the monitor serves it.
    proxy_listener: Option<OwnedFd>,
    /// `net.record`, `net.replay`: the run's CA the monitor's proxy terminates TLS with (its
    /// certificate is in the container's CA bundle; the key stays in the monitor).
    intercept: Option<std::sync::Arc<crate::net::intercept::Intercept>>,
}

/// A container has no pins-only fallback: a refusal is a plain setup error (whose message
/// does not suggest `--isolation`).
fn no_fallback(e: SandboxError) -> SandboxError {
    match e {
        SandboxError::Unavailable { reason } => SandboxError::Init { step: reason },
        other => other,
    }
}

/// Creates the container: namespaces, id maps, cgroup, root, and a pid 1 that waits. On
/// error nothing is left behind (init is killed, the cgroup removed). `trees`: the detached
/// idmapped trees of the plan's idmapped binds ([`crate::sandbox::isolation::idmap::detached_trees`]), which
/// init inherits and attaches.
pub(crate) fn create(
    plan: &Plan,
    cgroup_path: &str,
    exec_fifo: &Path,
    console: Option<OwnedFd>,
    trees: Vec<crate::sandbox::isolation::idmap::Tree>,
) -> Result<Created, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    super::raise_nofile();
    // The run's CA, made before init mounts the bundle that holds its certificate.
    let (intercept, with_bundle) = super::intercept(plan)?;
    let plan = with_bundle.as_ref().unwrap_or(plan);
    let seccomp = crate::security::seccomp::compile(&plan.security.seccomp)?;
    let mut resources = plan.resources.clone();
    if !nix::unistd::geteuid().is_root() {
        // A device cgroup is root's to make (runc's rootless containers go without too).
        resources.devices.clear();
    }
    let cg = match cgroup::Cgroup::create(&resources, cgroup_path) {
        Ok(cg) => cg,
        // Without limits a cgroup is only bookkeeping: an unprivileged caller goes without.
        Err(_) if !plan.resources.any() && !nix::unistd::geteuid().is_root() => {
            cgroup::Cgroup::none()
        }
        Err(e) => return Err(e.into()),
    };
    // Joined namespaces that only affect children (pid, time) or that do not change this
    // process's view of files: entered here, so that init is cloned into them.
    for j in &plan.join {
        if matches!(j.ns, Namespace::User | Namespace::Mount) {
            continue;
        }
        let join = |errno| SandboxError::Join {
            path: j.path.clone(),
            errno,
        };
        let file = std::fs::File::open(&j.path)
            .map_err(|e| join(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
        nix::sched::setns(file, nix::sched::CloneFlags::from_bits_retain(j.ns.flag()))
            .map_err(join)?;
    }
    let fifo = nix::fcntl::open(
        exec_fifo,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| SandboxError::Open {
        path: exec_fifo.to_path_buf(),
        source: e.into(),
        hint: "",
    })?;
    // SAFETY: open returned a fresh descriptor nothing else owns.
    let fifo = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fifo) };
    let lifecycle = Lifecycle {
        exec_fifo: fifo,
        console,
        trees: std::cell::Cell::new(trees),
    };
    let user = plan.join.iter().find(|j| j.ns == Namespace::User);
    let (child, ours) = match user {
        Some(j) => {
            crate::sandbox::isolation::userjoin::clone_init_in(&j.path, plan, &seccomp, &lifecycle)
        }
        None => super::supervisor::clone_init(plan, &seccomp, Some(&lifecycle), None, 0, None),
    }
    .map_err(no_fallback)?;
    drop(lifecycle);
    let pidfd = crate::sys::pidfd_open_process(child).map_err(step("pidfd_open"))?;
    let abort = |e: SandboxError| {
        let _ = kill(child, Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(child, None);
        e
    };
    if let Some(maps) = &plan.parent_maps {
        super::supervisor::write_maps(child, &maps.uid, &maps.gid, false).map_err(abort)?;
    }
    cg.add(child).map_err(|e| abort(e.into()))?;
    nix::sys::socket::send(
        ours.as_raw_fd(),
        &[init::GO],
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
    )
    .map_err(|e| abort(step("start init")(e)))?;
    // Init reports Ready, or a failure, or dies; before that it may hand over the egress
    // proxy's listening socket.
    let mut proxy_listener = None;
    loop {
        let mut fds = [
            nix::poll::PollFd::new(ours.as_fd(), nix::poll::PollFlags::POLLIN),
            nix::poll::PollFd::new(pidfd.as_fd(), nix::poll::PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(abort(step("poll")(e))),
        }
        let msg = match crate::sys::recv_packet(&ours).ok().flatten() {
            Some((b, Some(fd))) if b == [init::PROXY_TAG] => {
                proxy_listener = Some(fd);
                continue;
            }
            Some((b, _)) => protocol::parse(&b),
            None => None,
        };
        match msg {
            Some(msg) => match super::supervisor::init_error(msg) {
                None => break,
                Some(e) => return Err(abort(no_fallback(e))),
            },
            None => {
                if fds[1].any().unwrap_or(false) {
                    let status = nix::sys::wait::waitpid(child, None);
                    return Err(SandboxError::InitExited(format!("{status:?}")));
                }
            }
        }
    }
    Ok(Created {
        pid: child,
        cgroup_dirs: cg.keep(),
        sock: ours,
        pidfd,
        proxy_listener,
        intercept,
    })
}

impl Created {
    /// Lets init go on to wait for `start` (it no longer dies with us), then starts the
    /// monitor (forked, in its own session, stdio on /dev/null). `exec_socket`: where
    /// `reprorun exec` processes send their notification listeners.
    pub(crate) fn commit(self, plan: &Plan, exec_socket: &Path) -> Result<(), SandboxError> {
        let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
        let listener = if plan.intercept && vdso::SUPPORTED {
            let _ = std::fs::remove_file(exec_socket);
            let l = nix::sys::socket::socket(
                AddressFamily::Unix,
                SockType::SeqPacket,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
            .map_err(step("exec socket"))?;
            // The state directory may be deeper than `sun_path` holds (Docker's is).
            let at = crate::sys::unixpath::socket_path(exec_socket).map_err(step("exec socket"))?;
            nix::sys::socket::bind(l.as_raw_fd(), at.addr()).map_err(step("bind exec socket"))?;
            nix::sys::socket::listen(
                &l,
                nix::sys::socket::Backlog::new(16).unwrap_or(nix::sys::socket::Backlog::MAXCONN),
            )
            .map_err(step("listen exec socket"))?;
            Some(l)
        } else {
            None
        };
        // `org.reprorun.net.record`: the cassette's directory made (no link followed);
        // `net.replay`: the cassette read and checked whole. A bad one fails `create`.
        let cassette = super::cassette(plan)?;
        // Init clears its parent-death signal and answers; only then may we exit.
        nix::sys::socket::send(
            self.sock.as_raw_fd(),
            &[init::COMMIT],
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
        )
        .map_err(step("commit"))?;
        let mut ack = [0u8; 1];
        match nix::sys::socket::recv(
            self.sock.as_raw_fd(),
            &mut ack,
            nix::sys::socket::MsgFlags::empty(),
        ) {
            Ok(1) if ack[0] == init::COMMIT => {}
            _ => return Err(SandboxError::NotCommitted),
        }
        // SAFETY: the creator is single-threaded (no server thread was started in it).
        match unsafe { nix::unistd::fork() }.map_err(step("fork monitor"))? {
            nix::unistd::ForkResult::Child => {
                let _ = nix::unistd::setsid();
                crate::sys::stdio_to_null();
                let proxy = self
                    .proxy_listener
                    .and_then(|l| super::serve_egress(plan, l, self.intercept, cassette.clone()));
                let code = monitor(plan, self.pid, &self.pidfd, &self.sock, listener.as_ref());
                if let Some(proxy) = proxy {
                    proxy.stop();
                }
                // The recorded cassette's index, once every connection has ended.
                if let Some(c) = &cassette {
                    let _ = c.finish();
                }
                // SAFETY: _exit ends the monitor without the creator's atexit handlers.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { .. } => {}
        }
        Ok(())
    }
}

/// The monitor: one notification server per listener (init's workload, and every process
/// `reprorun exec` starts), until init exits.
fn monitor(
    plan: &Plan,
    init: Pid,
    pidfd: &OwnedFd,
    sock: &OwnedFd,
    exec_listener: Option<&OwnedFd>,
) -> i32 {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut config = notify::Config::from_plan(plan);
    // Direct attempts at addresses outside the container go to the net log as they happen.
    config.journal = plan.egress.as_ref().map(|_| {
        std::sync::Arc::new(crate::net::log::Journal::new(
            super::supervisor::open_net_log(plan),
        ))
    });
    let mut servers = Vec::new();
    let mut serve = |fd: OwnedFd| {
        // One server per `exec`: those whose processes are all gone are let go.
        servers.retain(|s: &notify::NotifyServer| !s.is_finished());
        if let Ok(server) = notify::start(config.clone(), notify::PageAt::sandbox(init)) {
            let _ = server.listener.send(fd);
            servers.push(server);
        }
    };
    let mut sock_open = true;
    // Connections of `reprorun exec` processes; each sends its listener before its exec.
    let mut conns: Vec<OwnedFd> = Vec::new();
    loop {
        let mut fds = vec![PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
        let sock_at = sock_open.then(|| {
            fds.push(PollFd::new(sock.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        let listen_at = exec_listener.map(|l| {
            fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        let conns_at = fds.len();
        for c in &conns {
            fds.push(PollFd::new(c.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return 1,
        }
        let ready: Vec<bool> = fds.iter().map(|f| f.any().unwrap_or(false)).collect();
        drop(fds);
        if ready[0] {
            return 0;
        }
        if sock_at.is_some_and(|i| ready[i]) {
            match crate::sys::recv_packet(sock) {
                Ok(Some((bytes, Some(fd)))) if bytes == [LISTENER_TAG] => serve(fd),
                Ok(Some(_)) => {}
                _ => sock_open = false,
            }
        }
        // Connections that spoke (or hung up) are done after one message.
        let mut keep = Vec::new();
        for (i, conn) in conns.drain(..).enumerate() {
            if !ready[conns_at + i] {
                keep.push(conn);
                continue;
            }
            if let Ok(Some((bytes, Some(fd)))) = crate::sys::recv_packet(&conn) {
                if bytes == [LISTENER_TAG] {
                    serve(fd);
                }
            }
        }
        conns = keep;
        if let (Some(l), Some(true)) = (exec_listener, listen_at.map(|i| ready[i])) {
            if let Ok(conn) = nix::sys::socket::accept4(l.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
                // SAFETY: accept4 returned a fresh descriptor nothing else owns.
                conns.push(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(conn) });
            }
        }
    }
}

/// What a process executed into a running container runs, and as whom.
pub(crate) struct ExecProcess<'a> {
    pub(crate) argv: Vec<String>,
    pub(crate) env: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) user: Option<crate::plan::ProcessUser>,
    pub(crate) security: crate::security::Security,
    /// `process.scheduler`, `ioPriority`, `execCPUAffinity` of `exec --process`.
    pub(crate) scheduling: Option<crate::plan::sched::Scheduling>,
    /// A connected console socket: the process runs on a new pty whose master goes there.
    pub(crate) console: Option<OwnedFd>,
    /// The container's plan (clock, seed, identity, umask, CPUs).
    pub(crate) plan: &'a Plan,
    pub(crate) cgroup_dirs: &'a [PathBuf],
    pub(crate) exec_socket: &'a Path,
}

/// Starts `process` in the namespaces and cgroup of the container whose init is `init`.
/// Returns the new process's pid and, unless `detach`, waits for it and returns its exit
/// code too. With `detach` the process is orphaned (a child subreaper such as conmon reaps it).
pub(crate) fn exec_into(
    init: Pid,
    process: ExecProcess,
    detach: bool,
) -> Result<(Pid, Option<i32>), SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    let seccomp = crate::security::seccomp::compile(&process.security.seccomp)?;
    // The namespaces to enter, opened now: user first (it grants the rest), mount last.
    let mut nss = Vec::new();
    for (name, flag) in [
        ("user", libc::CLONE_NEWUSER),
        ("ipc", libc::CLONE_NEWIPC),
        ("uts", libc::CLONE_NEWUTS),
        ("net", libc::CLONE_NEWNET),
        ("cgroup", libc::CLONE_NEWCGROUP),
        ("pid", libc::CLONE_NEWPID),
        ("time_for_children", libc::CLONE_NEWTIME),
        ("mnt", libc::CLONE_NEWNS),
    ] {
        let theirs = format!("/proc/{init}/ns/{name}");
        let ours = format!("/proc/self/ns/{}", name.trim_end_matches("_for_children"));
        let same = match (std::fs::metadata(&theirs), std::fs::metadata(&ours)) {
            (Ok(a), Ok(b)) => {
                use std::os::unix::fs::MetadataExt;
                a.ino() == b.ino() && a.dev() == b.dev()
            }
            (Err(source), _) => {
                return Err(SandboxError::Open {
                    path: theirs.into(),
                    source,
                    hint: "; is the container running?",
                })
            }
            _ => false,
        };
        if !same {
            let f = std::fs::File::open(&theirs).map_err(|source| SandboxError::Open {
                path: theirs.clone().into(),
                source,
                hint: "",
            })?;
            nss.push((f, flag));
        }
    }
    // No mount namespace of the container's own (its root built in place and entered by
    // chroot, as runc does): the process is chrooted to init's root too.
    let plan = process.plan;
    let own_mount =
        plan.has(Namespace::Mount) || plan.join.iter().any(|j| j.ns == Namespace::Mount);
    let chroot_to = match own_mount {
        true => None,
        false => {
            let root = format!("/proc/{init}/root");
            Some(
                std::fs::File::open(&root).map_err(|source| SandboxError::Open {
                    path: root.into(),
                    source,
                    hint: "; is the container running?",
                })?,
            )
        }
    };
    let (status_r, status_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(step("pipe"))?;
    let notify_sock = if process.plan.intercept && vdso::SUPPORTED {
        let s = nix::sys::socket::socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(step("socket"))?;
        let at =
            crate::sys::unixpath::socket_path(process.exec_socket).map_err(step("exec socket"))?;
        nix::sys::socket::connect(s.as_raw_fd(), at.addr()).map_err(SandboxError::Monitor)?;
        Some(s)
    } else {
        None
    };
    // SAFETY: this process is single-threaded here (the CLI starts no threads before).
    let joiner = match unsafe { nix::unistd::fork() }.map_err(step("fork"))? {
        nix::unistd::ForkResult::Child => {
            drop(status_r);
            let code = join_and_run(
                &process,
                (&nss, chroot_to.as_ref()),
                &seccomp,
                notify_sock.as_ref(),
                &status_w,
                detach,
            );
            // SAFETY: _exit ends the helper without the parent's cleanup.
            unsafe { libc::_exit(code.code()) }
        }
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop(status_w);
    // The helper writes the process's pid (4 bytes) once its exec went through, or an errno
    // (negated) on failure.
    let mut buf = [0u8; 4];
    let got = nix::unistd::read(status_r.as_raw_fd(), &mut buf);
    let value = i32::from_ne_bytes(buf);
    if !matches!(got, Ok(4)) || value <= 0 {
        let _ = nix::sys::wait::waitpid(joiner, None);
        let errno = Errno::from_raw(if matches!(got, Ok(4)) {
            -value
        } else {
            libc::EIO
        });
        return Err(SandboxError::Exec {
            program: process.argv[0].clone(),
            errno,
        });
    }
    let pid = Pid::from_raw(value);
    if detach {
        let _ = nix::sys::wait::waitpid(joiner, None);
        return Ok((pid, None));
    }
    Ok((pid, Some(wait_init(joiner)?)))
}

/// In the helper: join the cgroup and namespaces, fork the process into the pid namespace,
/// report its pid, and (unless detached) wait for it.
fn join_and_run(
    p: &ExecProcess,
    (nss, chroot_to): (&[(std::fs::File, libc::c_int)], Option<&std::fs::File>),
    seccomp: &[seccompiler::BpfProgram],
    notify_sock: Option<&OwnedFd>,
    status: &OwnedFd,
    detach: bool,
) -> Status {
    let report = |v: i32| {
        let _ = nix::unistd::write(status, &v.to_ne_bytes());
    };
    // Nothing in the container may trace or look into this process while it still runs
    // reprorun's own binary (CVE-2019-5736); exec makes the workload dumpable again.
    if nix::sys::prctl::set_dumpable(false).is_err() {
        report(-libc::EPERM);
        return Status::RuntimeError;
    }
    for dir in p.cgroup_dirs {
        if let Err(e) = std::fs::write(dir.join("cgroup.procs"), "0") {
            report(-e.raw_os_error().unwrap_or(libc::EIO));
            return Status::RuntimeError;
        }
    }
    for (f, flag) in nss {
        if let Err(e) = nix::sched::setns(f, nix::sched::CloneFlags::from_bits_retain(*flag)) {
            report(-(e as i32));
            return Status::RuntimeError;
        }
    }
    if let Some(root) = chroot_to {
        if let Err(e) =
            nix::unistd::fchdir(root.as_raw_fd()).and_then(|()| nix::unistd::chroot("."))
        {
            report(-(e as i32));
            return Status::RuntimeError;
        }
    }
    let config = notify::Config::from_plan(p.plan);
    let (filter, patches_execs) = (config.filter(), config.patches_execs());
    let terminal = match &p.console {
        Some(c) => match init::open_terminal(Some(c)) {
            Ok(slave) => Some(slave),
            Err(_) => {
                report(-libc::EIO);
                return Status::RuntimeError;
            }
        },
        None => None,
    };
    let Ok((exec_r, exec_w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        report(-libc::EMFILE);
        return Status::RuntimeError;
    };
    // SAFETY: the helper is single-threaded.
    match unsafe { nix::unistd::fork() } {
        Err(e) => {
            report(-(e as i32));
            Status::RuntimeError
        }
        Ok(nix::unistd::ForkResult::Child) => {
            let errno = (|| {
                if let Some(t) = &terminal {
                    super::tty::take_terminal(t, super::tty::Terminals([true; 3]))?;
                }
                nix::unistd::chdir(&p.cwd)?;
                let pins = crate::sandbox::workload::ProcessPins {
                    umask: p.plan.umask,
                    cpus: p.plan.identity.cpus,
                    security: &p.security,
                    seccomp,
                    user: p.user.as_ref(),
                    oom_score_adj: None,
                    scheduling: p.scheduling.as_ref(),
                    scoped: false,
                    aslr_off: true,
                    domain: p.plan.personality,
                    leave: super::tty::Leave::Session,
                };
                let notify = notify_sock.map(|sock| crate::sandbox::workload::Notify {
                    sock,
                    filter: &filter,
                    patches_execs,
                });
                Err(crate::sandbox::workload::exec(
                    &p.argv, &p.env, pins, true, notify,
                ))
            })()
            .unwrap_or_else(|e: Errno| e);
            let _ = nix::unistd::write(&exec_w, &(errno as i32).to_ne_bytes());
            // SAFETY: _exit ends the failed child at once.
            unsafe { libc::_exit(Status::exec_failed(errno as i32).code()) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(exec_w);
            let mut buf = [0u8; 4];
            if let Ok(4) = nix::unistd::read(exec_r.as_raw_fd(), &mut buf) {
                let _ = nix::sys::wait::waitpid(child, None);
                report(-i32::from_ne_bytes(buf));
                return Status::RuntimeError;
            }
            report(child.as_raw());
            if detach {
                return Status::OK;
            }
            match nix::sys::wait::waitpid(child, None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => Status::Exited(code),
                Ok(nix::sys::wait::WaitStatus::Signaled(_, sig, _)) => Status::Signaled(sig as i32),
                _ => Status::RuntimeError,
            }
        }
    }
}
