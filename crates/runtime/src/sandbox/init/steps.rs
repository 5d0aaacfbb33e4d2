//! init's setup, as data: the steps a plan needs, in order ([`steps`]), and the one
//! function that performs a step ([`perform`]). Unit tests check the order without root.

use std::os::fd::{AsFd, OwnedFd};

use nix::errno::Errno;

use super::{InitError, GO};
use crate::plan::{Namespace, Plan};
use crate::sandbox::isolation::mounts::build_root;

/// Tags the egress proxy's listening socket on init's socket.
pub(crate) const PROXY_TAG: u8 = b'P';
/// Tags the mirror registry's listening socket on init's socket.
pub(crate) const REGISTRY_TAG: u8 = b'N';

/// The end of an `exec` sandbox, before init exits: every process left in the pid namespace
/// (daemons the workload started) killed and reaped, as the kernel would at init's exit, then
/// [`InitMsg::Done`](crate::sandbox::protocol::InitMsg::Done) with the exit code and init's
/// usage so far (its own and everything it reaped). The supervisor may return on it rather
/// than wait for init's exit, which tears the sandbox's mounts and namespaces down.
pub(super) fn finish(sock: &OwnedFd, code: i32) {
    // SAFETY: kill(-1) from pid 1 signals every other process of its pid namespace.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    // Until ECHILD: none left.
    while let Ok(_) | Err(Errno::EINTR) =
        nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(-1), None)
    {}
    let usage = crate::sys::usage_so_far();
    crate::sandbox::protocol::post(
        sock,
        &crate::sandbox::protocol::InitMsg::Done { code, usage },
    );
}

/// One step of init's setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Wait for the supervisor's word: it has put init into the sandbox's cgroup (and, for
    /// an OCI container or a root caller, written its id maps). Nothing may be forked before.
    AwaitGo,
    /// Join the mount namespace the plan names by path.
    JoinNamespaces,
    /// Write init's one-line uid and gid maps.
    IdMaps,
    /// Become the pinned uid and gid (an OCI container's 0) of the new user namespace whose
    /// maps the creator wrote (files and mounts made next are then owned by that id, mapped
    /// whatever its host id; as the host's root they could be unmapped: EOVERFLOW).
    UserRoot,
    /// Set the hostname and domain name (a new uts namespace).
    Hostname,
    /// Bring the loopback interface up (a new network namespace).
    Loopback,
    /// Listen on 127.0.0.1:3128 and hand the socket to the supervisor, which serves the
    /// egress proxy on it from the host's side (`--net allow`).
    ProxyListener,
    /// Listen on 127.0.0.1:4873 and hand the socket to the supervisor, which serves the
    /// mirror's npm tree on it from the host's side (`--mirror` with an npm part).
    RegistryListener,
    /// Build the new root from the plan's mounts and pivot into it.
    Root,
    /// Change to the working directory and check it resolves inside the new root.
    Chdir,
    /// Enter a new time namespace with the pinned uptime (the workload is forked into it).
    TimeNamespace,
}

/// The steps `plan` needs, in the order they must happen: the cgroup before anything is
/// forked; namespaces joined before id maps are written; hostname and loopback while the host's
/// root is still there; the root before the working directory; the time namespace last (only
/// children forked afterwards live in it).
pub(super) fn steps(plan: &Plan, oci: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    if plan.resources.any() || oci || plan.parent_maps.is_some() {
        steps.push(Step::AwaitGo);
    }
    steps.push(Step::JoinNamespaces);
    if plan.parent_maps.is_none() && plan.has(Namespace::User) {
        steps.push(Step::IdMaps);
    }
    if plan.parent_maps.is_some() && plan.has(Namespace::User) {
        steps.push(Step::UserRoot);
    }
    let uts_joined = plan.join.iter().any(|j| j.ns == Namespace::Uts);
    if plan.has(Namespace::Uts) || (uts_joined && !plan.hostname.is_empty()) {
        steps.push(Step::Hostname);
    }
    // A network namespace made beside init is joined while the root is built (`netns`).
    if plan.has(Namespace::Net) && !crate::sandbox::isolation::netns::by_helper(plan, oci) {
        steps.push(Step::Loopback);
        if plan.egress.is_some() {
            steps.push(Step::ProxyListener);
        }
        if plan.registry.is_some() {
            steps.push(Step::RegistryListener);
        }
    }
    steps.extend([Step::Root, Step::Chdir]);
    if plan.has(Namespace::Time) {
        steps.push(Step::TimeNamespace);
    }
    steps
}

/// Performs one step (`oci`: in an OCI container's init). `trees`: the creator's idmapped
/// trees, attached by [`Step::Root`].
pub(super) fn perform(
    step: Step,
    plan: &Plan,
    (sock, oci): (&OwnedFd, bool),
    trees: &mut Vec<crate::sandbox::isolation::idmap::Tree>,
) -> Result<(), InitError> {
    match step {
        Step::AwaitGo => await_go(sock, plan, trees),
        // A user namespace joined by path was joined before init was cloned
        // ([`crate::sandbox::isolation::userjoin`]).
        Step::JoinNamespaces => join_namespaces(plan, &[Namespace::Mount]),
        Step::IdMaps => write_id_maps(plan),
        Step::UserRoot => {
            become_pinned(plan)?;
            // The parent-death signal was set again: a supervisor that died before it did
            // has hung up its end of the socket.
            let mut fds = [nix::poll::PollFd::new(
                sock.as_fd(),
                nix::poll::PollFlags::empty(),
            )];
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO);
            match fds[0]
                .revents()
                .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLHUP))
            {
                true => Err(InitError::ParentGone),
                false => Ok(()),
            }
        }
        Step::Hostname => {
            nix::unistd::sethostname(&plan.hostname).map_err(InitError::Hostname)?;
            match plan.domainname.is_empty() && !plan.has(Namespace::Uts) {
                // A joined namespace's domain name is kept unless the config gives one.
                true => Ok(()),
                false => crate::sys::setdomainname(&plan.domainname).map_err(InitError::Hostname),
            }
        }
        Step::Loopback => crate::sys::loopback_up().map_err(InitError::Loopback),
        Step::ProxyListener => {
            let listener = crate::sys::listen_loopback(crate::net::PROXY_PORT)
                .map_err(InitError::ProxyListener)?;
            crate::sys::send_fd(sock, &listener, PROXY_TAG).map_err(InitError::ProxyListener)
        }
        Step::RegistryListener => {
            let listener = crate::sys::listen_loopback(crate::mirror::npm::PORT)
                .map_err(InitError::RegistryListener)?;
            crate::sys::send_fd(sock, &listener, REGISTRY_TAG).map_err(InitError::RegistryListener)
        }
        Step::Root => {
            let own =
                plan.has(Namespace::Mount) || plan.join.iter().any(|j| j.ns == Namespace::Mount);
            let join = || crate::sandbox::isolation::netns::join(sock);
            let join_net = match crate::sandbox::isolation::netns::by_helper(plan, oci) {
                true => Some(&join as &dyn Fn() -> Result<(), Errno>),
                false => None,
            };
            Ok(build_root(
                &plan.mounts,
                own,
                std::mem::take(trees),
                join_net,
            )?)
        }
        Step::Chdir => {
            let cwd = plan.cwd.to_string_lossy().to_string();
            nix::unistd::chdir(&plan.cwd).map_err(|e| InitError::Chdir(cwd.clone(), e))?;
            // The working directory must resolve inside the new root (CVE-2024-21626).
            match nix::unistd::getcwd() {
                Ok(p) if p == plan.cwd => Ok(()),
                _ => Err(InitError::Chdir(cwd, Errno::EXDEV)),
            }
        }
        Step::TimeNamespace => {
            enter_time_namespace(plan.uptime_start_secs).map_err(InitError::TimeNs)
        }
    }
}

/// Joins the namespaces of `kinds` the plan names by path (the mount namespace: the creator
/// could not join it for us without losing its own view of the host).
fn join_namespaces(plan: &Plan, kinds: &[Namespace]) -> Result<(), InitError> {
    for kind in kinds {
        for j in plan.join.iter().filter(|j| j.ns == *kind) {
            let fail = |errno| InitError::Join {
                path: j.path.display().to_string(),
                errno,
            };
            let file = std::fs::File::open(&j.path)
                .map_err(|e| fail(Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))))?;
            nix::sched::setns(file, nix::sched::CloneFlags::from_bits_retain(j.ns.flag()))
                .map_err(fail)?;
        }
    }
    Ok(())
}

/// Becomes the pinned ids of the new user namespace whose maps the creator wrote: `exec`'s
/// `--user` (0 by default), an OCI container's 0. Capabilities in the namespace stay: the
/// change from the host's root to another id would otherwise clear them.
/// Waits for the supervisor's word to go, taking the trees it sends first (an `exec`
/// sandbox's, [`crate::sandbox::isolation::idmap::send_trees`]), each paired with where it goes.
fn await_go(
    sock: &OwnedFd,
    plan: &Plan,
    trees: &mut Vec<crate::sandbox::isolation::idmap::Tree>,
) -> Result<(), InitError> {
    use crate::sandbox::isolation::idmap::{tree_dests, Tree, TREE_TAG};
    let mut dests = tree_dests(&plan.mounts).into_iter();
    loop {
        let mut fds = [nix::poll::PollFd::new(
            sock.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return Err(InitError::ParentGone),
        }
        match crate::sys::recv_packet(sock) {
            Ok(Some((data, Some(fd)))) if data == [TREE_TAG] => {
                let dest = dests.next().ok_or(InitError::ParentGone)?;
                trees.push(Tree { dest, fd });
            }
            Ok(Some((data, None))) if data == [GO] => return Ok(()),
            Ok(None)
                if !fds[0]
                    .revents()
                    .is_some_and(|r| r.intersects(nix::poll::PollFlags::POLLHUP)) => {}
            _ => return Err(InitError::ParentGone),
        }
    }
}

fn become_pinned(plan: &Plan) -> Result<(), InitError> {
    use caps::CapSet;
    use nix::unistd::{setresgid, setresuid, Gid, Uid};
    let fail = |file: &'static str| move |errno| InitError::IdMap { file, errno };
    let root = |r: nix::Result<()>| match r {
        // The id is not mapped: init stays as it is.
        Err(Errno::EINVAL) => Ok(()),
        other => other.map_err(fail("setresuid/setresgid")),
    };
    let (uid, gid) = match plan.uid_map.count {
        0 => (0, 0),
        _ => (plan.uid_map.inside, plan.gid_map.inside),
    };
    nix::sys::prctl::set_keepcaps(true).map_err(fail("prctl(PR_SET_KEEPCAPS)"))?;
    let (u, g) = (Uid::from_raw(uid), Gid::from_raw(gid));
    root(setresgid(g, g, g))?;
    root(setresuid(u, u, u))?;
    let permitted =
        caps::read(None, CapSet::Permitted).map_err(|_| fail("capget")(Errno::EPERM))?;
    caps::set(None, CapSet::Effective, &permitted).map_err(|_| fail("capset")(Errno::EPERM))?;
    nix::sys::prctl::set_keepcaps(false).map_err(fail("prctl(PR_SET_KEEPCAPS)"))?;
    // A change of ids makes the process non-dumpable, its /proc/self files then the
    // host root's (unmapped here): writing its time namespace offsets would fail.
    nix::sys::prctl::set_dumpable(true).map_err(fail("prctl(PR_SET_DUMPABLE)"))?;
    // It also clears the parent-death signal (a root caller's init changes its host ids
    // here, to the sandbox's): set it again, so init still dies with the supervisor. A
    // supervisor gone meanwhile is seen by the next look at the socket.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(fail("prctl(PR_SET_PDEATHSIG)"))
}

fn write_id_maps(plan: &Plan) -> Result<(), InitError> {
    if !plan.has(Namespace::User) {
        return Ok(());
    }
    let write = |file: &'static str, text: String| {
        std::fs::write(file, text).map_err(|e| InitError::IdMap {
            file,
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })
    };
    let line = |m: &crate::plan::IdMap| format!("{} {} {}\n", m.inside, m.outside, m.count);
    write("/proc/self/setgroups", "deny\n".into())?;
    write("/proc/self/uid_map", line(&plan.uid_map))?;
    write("/proc/self/gid_map", line(&plan.gid_map))?;
    Ok(())
}

/// Enters a new time namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME read `start` seconds
/// now. Only children forked afterwards live in it (the workload), which is the point.
fn enter_time_namespace(start: i64) -> Result<(), Errno> {
    use nix::time::{clock_gettime, ClockId};
    nix::sched::unshare(nix::sched::CloneFlags::from_bits_retain(
        libc::CLONE_NEWTIME,
    ))?;
    let mut text = String::new();
    for (name, clock) in [
        ("monotonic", ClockId::CLOCK_MONOTONIC),
        ("boottime", ClockId::CLOCK_BOOTTIME),
    ] {
        let now = clock_gettime(clock)?;
        let now_ns = now.tv_sec() as i128 * 1_000_000_000 + now.tv_nsec() as i128;
        let off = start as i128 * 1_000_000_000 - now_ns;
        let (secs, nanos) = (off.div_euclid(1_000_000_000), off.rem_euclid(1_000_000_000));
        text.push_str(&format!("{name} {secs} {nanos}\n"));
    }
    std::fs::write("/proc/self/timens_offsets", text)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let req = crate::plan::ExecRequest::new(vec!["true".into()]);
        let host = crate::plan::HostFacts {
            uid: 1000,
            gid: 1000,
            cwd: std::env::temp_dir(),
            source_date_epoch: None,
            now: 0,
            cpus_available: 1,
            unix_sockets: Vec::new(),
        };
        crate::plan::resolve(&req, &host).unwrap()
    }

    #[test]
    fn an_exec_sandbox_sets_up_in_the_documented_order() {
        use Step::*;
        // The network namespace is made beside init and joined during `Root` (`netns`).
        assert_eq!(
            steps(&plan(), false),
            [JoinNamespaces, IdMaps, Hostname, Root, Chdir, TimeNamespace]
        );
        // An OCI container's init makes its own and brings loopback up before its root.
        let oci = steps(&plan(), true);
        let lo = oci.iter().position(|s| *s == Loopback).unwrap();
        assert_eq!(oci[lo + 1], Root);
    }

    #[test]
    fn an_egress_sandbox_listens_for_the_proxy_after_loopback() {
        let mut p = plan();
        p.egress = Some(crate::net::Egress::default());
        let s = steps(&p, false);
        let lo = s.iter().position(|s| *s == Step::Loopback).unwrap();
        assert_eq!(s[lo + 1], Step::ProxyListener);
        assert!(!steps(&plan(), false).contains(&Step::ProxyListener));
    }

    #[test]
    fn limits_and_containers_wait_for_the_supervisor_first() {
        let mut p = plan();
        p.resources.pids = Some(10);
        assert_eq!(steps(&p, false)[0], Step::AwaitGo);
        assert_eq!(steps(&plan(), true)[0], Step::AwaitGo);
        // A root caller's maps come from the supervisor: wait for them, then become the
        // pinned ids instead of writing a map.
        let mut p = plan();
        p.parent_maps = Some(crate::plan::ParentMaps {
            uid: Vec::new(),
            gid: Vec::new(),
        });
        let s = steps(&p, false);
        assert_eq!(s[0], Step::AwaitGo);
        assert!(s.contains(&Step::UserRoot) && !s.contains(&Step::IdMaps));
    }

    #[test]
    fn steps_follow_the_namespaces() {
        let mut p = plan();
        p.namespaces
            .retain(|n| !matches!(n, Namespace::Net | Namespace::Uts | Namespace::Time));
        p.parent_maps = Some(crate::plan::ParentMaps {
            uid: Vec::new(),
            gid: Vec::new(),
        });
        assert_eq!(
            steps(&p, false),
            [
                Step::AwaitGo,
                Step::JoinNamespaces,
                Step::UserRoot,
                Step::Root,
                Step::Chdir
            ],
            "no id maps of init's own when the creator writes them (init waits for them); init becomes the pinned ids"
        );
    }
}
