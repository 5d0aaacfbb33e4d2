//! The last steps of the workload process before `execve`: identity hygiene, descriptors,
//! signals, and a `PATH` search over the sandbox's own `PATH` (not the caller's).

use std::os::fd::OwnedFd;

use caps::CapSet;
use nix::errno::Errno;
use nix::sys::stat::{umask, Mode};
use nix::unistd::Pid;

/// A step of the workload's preparation that can fail, named in the error that reports it
/// (`Exec` is the `execve` itself: a missing or non-executable program).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Prep {
    Exec,
    Setup,
    Session,
    Personality,
    Cpus,
    Rlimits,
    Signals,
    OomScore,
    Scheduler,
    IoPriority,
    Capabilities,
    User,
    NoNewPrivs,
    Landlock,
    Notify,
    Descriptors,
    Seccomp,
}

impl Prep {
    const ALL: [Prep; 17] = [
        Prep::Exec,
        Prep::Setup,
        Prep::Session,
        Prep::Personality,
        Prep::Cpus,
        Prep::Rlimits,
        Prep::Signals,
        Prep::OomScore,
        Prep::Scheduler,
        Prep::IoPriority,
        Prep::Capabilities,
        Prep::User,
        Prep::NoNewPrivs,
        Prep::Landlock,
        Prep::Notify,
        Prep::Descriptors,
        Prep::Seccomp,
    ];

    /// The step's name in a one-line error.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Prep::Exec => "exec",
            Prep::Setup => "set up the workload process",
            Prep::Session => "leave the caller's session",
            Prep::Personality => "set the execution domain (personality)",
            Prep::Cpus => "pin CPUs (sched_setaffinity)",
            Prep::Rlimits => "set resource limits",
            Prep::Signals => "reset signals",
            Prep::OomScore => "set oom_score_adj",
            Prep::Scheduler => "set the scheduler (sched_setattr)",
            Prep::IoPriority => "set the I/O priority (ioprio_set)",
            Prep::Capabilities => "drop capabilities",
            Prep::User => "switch user",
            Prep::NoNewPrivs => "set no_new_privs",
            Prep::Landlock => "landlock scope",
            Prep::Notify => "install the seccomp notification filter",
            Prep::Descriptors => "close inherited descriptors",
            Prep::Seccomp => "install the seccomp profile",
        }
    }

    pub(super) fn code(self) -> u8 {
        Prep::ALL.iter().position(|p| *p == self).unwrap_or(0) as u8
    }

    pub(super) fn of_code(code: u8) -> Prep {
        Prep::ALL.get(code as usize).copied().unwrap_or(Prep::Exec)
    }
}

/// A failed step of the workload's start, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failed {
    pub(crate) step: Prep,
    pub(crate) errno: Errno,
}

/// What the workload process pins on itself before exec (inherited by everything it starts).
#[derive(Clone, Copy)]
pub(crate) struct ProcessPins<'a> {
    pub(crate) umask: u32,
    /// Run on `cpus` CPUs the caller may use (the one it starts on first; see [`pin_cpus`]).
    pub(crate) cpus: u32,
    pub(crate) security: &'a crate::security::Security,
    /// The compiled security seccomp programs (empty: unconfined).
    pub(crate) seccomp: &'a [seccompiler::BpfProgram],
    /// OCI `process.user`: ids to switch to.
    pub(crate) user: Option<&'a crate::plan::ProcessUser>,
    /// OCI `process.oomScoreAdj`.
    pub(crate) oom_score_adj: Option<i32>,
    /// OCI `process.scheduler`, `ioPriority`, `execCPUAffinity` (its CPUs replace the pin of
    /// `cpus`: the config's wins).
    pub(crate) scheduling: Option<&'a crate::plan::sched::Scheduling>,
    /// Landlock-scope the workload (signals and abstract sockets stay inside its domain):
    /// `reprorun exec` runs, not OCI containers (a process `exec`'d into a container later
    /// would be in a sibling domain and could not signal the container's processes).
    pub(crate) scoped: bool,
    /// Turn address-space randomization off (a pins-only run skips it where the host refuses
    /// `personality`).
    pub(crate) aslr_off: bool,
    /// OCI `linux.personality`: the execution domain to run in (`PER_LINUX32`, …).
    pub(crate) domain: Option<u32>,
    /// How the process leaves the caller's session (`tty::leave_caller`).
    pub(crate) leave: super::tty::Leave,
}

impl<'a> ProcessPins<'a> {
    pub(crate) fn from_plan(
        plan: &'a crate::plan::Plan,
        seccomp: &'a [seccompiler::BpfProgram],
    ) -> ProcessPins<'a> {
        ProcessPins {
            umask: plan.umask,
            cpus: plan.identity.cpus,
            security: &plan.security,
            seccomp,
            user: plan.process_user.as_ref(),
            oom_score_adj: plan.oom_score_adj,
            scheduling: plan.scheduling.as_ref(),
            scoped: false,
            aslr_off: true,
            domain: plan.personality,
            leave: super::tty::Leave::Session,
        }
    }
}

/// The workload's seccomp-notification filter and the socket its listener goes out on.
pub(crate) struct Notify<'a> {
    pub(crate) sock: &'a OwnedFd,
    pub(crate) filter: &'a [libc::sock_filter],
    /// Whether the server changes anything at an exec (`notify::Config::patches_execs`):
    /// if not, the workload's own exec is let through without its program being examined.
    pub(crate) patches_execs: bool,
}

/// Drops every capability but `keep` (bounding, inheritable, effective, permitted; `keep` is
/// also raised in the ambient set, so it survives an exec as any user) and sets
/// no_new_privs, so neither the workload nor anything it executes can gain privilege.
pub(crate) fn drop_privileges(security: &crate::security::Security) -> Result<(), Errno> {
    if let Some(sets) = &security.caps {
        return set_capabilities(sets);
    }
    let io = |_| Errno::EPERM;
    let keep: caps::CapsHashSet = security
        .cap_add
        .iter()
        .filter_map(|c| c.parse().ok())
        .collect();
    // Only what the running kernel has (an older one lacks the newest capabilities).
    for cap in caps::read(None, CapSet::Bounding).map_err(io)? {
        if !keep.contains(&cap) {
            caps::drop(None, CapSet::Bounding, cap).map_err(io)?;
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(io)?;
    caps::set(None, CapSet::Inheritable, &keep).map_err(io)?;
    nix::sys::prctl::set_no_new_privs()?;
    caps::set(None, CapSet::Effective, &keep).map_err(io)?;
    caps::set(None, CapSet::Permitted, &keep).map_err(io)?;
    for cap in &keep {
        caps::raise(None, CapSet::Ambient, *cap).map_err(io)?;
    }
    Ok(())
}

/// Drops every capability not in `keep` from the bounding set.
fn drop_bounding(keep: &[String]) -> Result<(), Errno> {
    let io = |_| Errno::EPERM;
    let keep: caps::CapsHashSet = keep.iter().filter_map(|c| c.parse().ok()).collect();
    for cap in caps::read(None, CapSet::Bounding).map_err(io)? {
        if !keep.contains(&cap) {
            caps::drop(None, CapSet::Bounding, cap).map_err(io)?;
        }
    }
    Ok(())
}

/// OCI capabilities: each of the five sets as given, and no_new_privs unless the config
/// allows new privileges. (The bounding set was reduced already, before any switch of user.)
fn set_capabilities(sets: &crate::security::CapSets) -> Result<(), Errno> {
    let io = |_| Errno::EPERM;
    let set = |names: &[String]| -> caps::CapsHashSet {
        names.iter().filter_map(|c| c.parse().ok()).collect()
    };
    caps::clear(None, CapSet::Ambient).map_err(io)?;
    caps::set(None, CapSet::Inheritable, &set(&sets.inheritable)).map_err(io)?;
    if !sets.allow_new_privs {
        nix::sys::prctl::set_no_new_privs()?;
    }
    caps::set(None, CapSet::Effective, &set(&sets.effective)).map_err(io)?;
    caps::set(None, CapSet::Permitted, &set(&sets.permitted)).map_err(io)?;
    // The kernel takes an ambient capability only if it is permitted and inheritable; others
    // are skipped, as runc does (runc's own default config lists ambient capabilities that
    // are not inheritable).
    let (permitted, inheritable) = (set(&sets.permitted), set(&sets.inheritable));
    for cap in set(&sets.ambient) {
        if permitted.contains(&cap) && inheritable.contains(&cap) {
            caps::raise(None, CapSet::Ambient, cap).map_err(io)?;
        }
    }
    Ok(())
}

/// Switches to the OCI `process.user` ids, keeping the permitted capabilities (the
/// capability step after this decides what stays).
fn switch_user(user: &crate::plan::ProcessUser) -> Result<(), Errno> {
    use nix::unistd::{setgid, setgroups, setuid, Gid, Uid};
    nix::sys::prctl::set_keepcaps(true)?;
    let groups: Vec<Gid> = user
        .additional_gids
        .iter()
        .map(|g| Gid::from_raw(*g))
        .collect();
    match setgroups(&groups) {
        // A user namespace with setgroups denied: only an empty list could be set anyway.
        Err(Errno::EPERM) if groups.is_empty() => {}
        other => other?,
    }
    setgid(Gid::from_raw(user.gid))?;
    setuid(Uid::from_raw(user.uid))?;
    Ok(())
}

/// Applies the rlimits. A default whose hard limit is above the caller's is lowered to it
/// (raising it needs privilege outside the sandbox); an explicit one that cannot be set fails.
fn set_rlimits(limits: &[crate::security::Rlimit]) -> Result<(), Errno> {
    let defaults = crate::security::default_rlimits();
    for l in limits {
        let resource = l.resource();
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into the valid struct.
        Errno::result(unsafe { libc::getrlimit(resource as _, &mut cur) })?;
        let value = |v: Option<u64>| v.unwrap_or(libc::RLIM_INFINITY);
        let mut want = libc::rlimit {
            rlim_cur: value(l.soft),
            rlim_max: value(l.hard),
        };
        let privileged_raise = want.rlim_max > cur.rlim_max;
        if privileged_raise && defaults.contains(l) {
            want.rlim_max = cur.rlim_max;
            want.rlim_cur = want.rlim_cur.min(cur.rlim_max);
        }
        // SAFETY: setrlimit reads one rlimit from the valid struct.
        Errno::result(unsafe { libc::setrlimit(resource as _, &want) })?;
    }
    Ok(())
}

/// Prepares the process and executes `argv` with exactly `env`. Returns only on failure, with
/// the errno that decides between 126 and 127.
/// With `notify`, the filter's system calls are routed to the supervisor: the seccomp filter
/// is installed with a notification listener and the listener sent over the socket.
pub(crate) fn exec(
    argv: &[String],
    env: &[String],
    pins: ProcessPins,
    sandboxed: bool,
    notify: Option<Notify>,
) -> Errno {
    match prepare_and_exec(argv, env, pins, sandboxed, notify) {
        Ok(never) => match never {},
        Err(f) => f.errno,
    }
}

/// The execution domain `domain` (`PER_LINUX` 0 unless an OCI config asks for another), with
/// address-space layout randomisation off when `aslr_off`, and nothing else of the caller's
/// personality (`setarch --uname-2.6` and the like) kept.
fn set_personality(domain: u32, aslr_off: bool) -> Result<(), Errno> {
    let flags = if aslr_off { libc::ADDR_NO_RANDOMIZE } else { 0 };
    // SAFETY: personality(2) only sets the calling process's execution domain flags.
    let r = unsafe { libc::personality((domain | flags as u32) as libc::c_ulong) };
    Errno::result(r).map(drop)
}

/// Restricts the workload to `cpus` CPUs of its current mask: the one it is running on now
/// first, then the last ones of the mask. Keeping the CPU it starts on lets the kernel's
/// placement stand (moving a freshly started process to a fixed CPU cost the dateutil suite
/// several per cent, issue 20); the last rather than the first for the rest because CPU 0 is
/// where the kernel tends to do its own work. Which CPUs they are is invisible inside (every
/// view reports 0..cpus-1).
fn pin_cpus(cpus: u32) -> Result<(), Errno> {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    let me = Pid::from_raw(0);
    let current = sched_getaffinity(me)?;
    // SAFETY: sched_getcpu(3) only reads the calling thread's CPU number.
    let now = unsafe { libc::sched_getcpu() };
    // A CPU outside the mask (or the set's range: `is_set` fails) is skipped by the choice.
    let order = usize::try_from(now)
        .into_iter()
        .chain((0..CpuSet::count()).rev());
    let pinned = choose_cpus(order, cpus, |c| current.is_set(c).unwrap_or(false))?;
    sched_setaffinity(me, &pinned)
}

/// Runs on exactly `cpus` (OCI `execCPUAffinity`).
fn set_cpus(cpus: &[u32]) -> Result<(), Errno> {
    let mut set = nix::sched::CpuSet::new();
    for c in cpus {
        set.set(*c as usize)?;
    }
    nix::sched::sched_setaffinity(Pid::from_raw(0), &set)
}

/// The first `cpus` distinct CPUs of `order` that `allowed` accepts.
fn choose_cpus(
    order: impl Iterator<Item = usize>,
    cpus: u32,
    allowed: impl Fn(usize) -> bool,
) -> Result<nix::sched::CpuSet, Errno> {
    let mut pinned = nix::sched::CpuSet::new();
    let mut left = cpus;
    for cpu in order {
        if left == 0 {
            break;
        }
        if allowed(cpu) && !pinned.is_set(cpu)? {
            pinned.set(cpu)?;
            left -= 1;
        }
    }
    Ok(pinned)
}

/// The notification filter (its listener sent to the supervisor), then the security profile
/// last: nothing before must be refused by it.
/// With `quiet` (the filter lets the next exec through unnotified), nothing is traced once
/// the notification filter is in: the step trace reads the realtime clock, which the filter
/// routes to the server on a host without a vDSO (a vDSO's own fallback is let through
/// unexamined), and the server must see no call of this process before an exec it is not
/// told of (it would keep this process's memory, which is init's, for the program the exec
/// starts).
fn install_filters(
    notify: Option<Notify>,
    seccomp: &[seccompiler::BpfProgram],
    preserve_fds: u32,
    quiet: bool,
) -> Result<(), Failed> {
    let at = |step: Prep| move |errno: Errno| Failed { step, errno };
    let trace = |what: &str| {
        if !quiet {
            crate::trace::step("workload", what);
        }
    };
    if let Some(notify) = notify {
        let listener =
            crate::sys::seccomp::install_with_listener(notify.filter).map_err(at(Prep::Notify))?;
        crate::sys::send_fd(
            notify.sock,
            &listener,
            crate::sandbox::intercept::vdso::LISTENER_TAG,
        )
        .map_err(at(Prep::Notify))?;
        trace("notification filter, send the listener");
    }
    crate::sys::cloexec_from(3 + preserve_fds).map_err(at(Prep::Descriptors))?;
    // The security profile last: nothing above must be refused by it (a profile may lack
    // close_range, say).
    for prog in seccomp {
        crate::sys::seccomp::install(prog).map_err(at(Prep::Seccomp))?;
    }
    trace("close descriptors, seccomp profile (then execve)");
    Ok(())
}

/// The program found and classified (with the final ids when `final_ids`: then directories
/// without it are skipped), then the filters: a first exec that needs nothing of the server
/// is let through by the notification filter.
fn resolve_and_filter(
    argv: &[String],
    env: &[String],
    notify: Option<Notify>,
    pins: &ProcessPins,
    final_ids: bool,
) -> Result<crate::sandbox::intercept::program::Exec, Failed> {
    let at = |step: Prep| move |errno: Errno| Failed { step, errno };
    use crate::sandbox::intercept::program::FirstExec;
    // Before the ids change (OCI noNewPrivileges false), the capabilities are dropped with
    // the filter in: a call routed then (a trace's clock read without a vDSO, hash keys drawn
    // with seeded entropy) would leave the server holding this memory, which only a notified
    // exec makes it let go of (see `notify::caller`): that exec is routed too.
    let first = match (&notify, final_ids) {
        (Some(n), true) if n.patches_execs => FirstExec::Classified,
        (Some(_), true) => FirstExec::Passing,
        _ => FirstExec::Routed,
    };
    let exec = crate::sandbox::intercept::program::Exec::resolve(argv, env, first, final_ids)
        .map_err(at(Prep::Exec))?;
    crate::trace::step("workload", "find and classify the program");
    let passing;
    let (notify, quiet) = match (notify, exec.passing_call()) {
        (Some(n), Some(call)) => {
            passing = crate::sandbox::intercept::notify::passing_exec(n.filter, call);
            let filter = &passing;
            (Some(Notify { filter, ..n }), true)
        }
        (n, _) => (n, false),
    };
    install_filters(notify, pins.seccomp, pins.security.preserve_fds, quiet)?;
    Ok(exec)
}

pub(super) fn prepare_and_exec(
    argv: &[String],
    env: &[String],
    pins: ProcessPins,
    sandboxed: bool,
    notify: Option<Notify>,
) -> Result<std::convert::Infallible, Failed> {
    let at = |step: Prep| move |errno: Errno| Failed { step, errno };
    // A process group of its own (a session of its own in a container) without the caller's
    // terminal: `kill(0, …)` and the terminal's job control reach only the workload's
    // processes, never the caller's (a workload on a pty of its own leads its session).
    super::tty::leave_caller(pins.leave).map_err(at(Prep::Session))?;
    umask(Mode::from_bits_truncate(pins.umask as libc::mode_t));
    if pins.aslr_off || pins.domain.is_some() {
        set_personality(pins.domain.unwrap_or(0), pins.aslr_off).map_err(at(Prep::Personality))?;
    }
    crate::trace::step("workload", "session, umask, personality");
    match pins.scheduling.and_then(|s| s.cpus.as_deref()) {
        Some(cpus) => set_cpus(cpus),
        None => pin_cpus(pins.cpus),
    }
    .map_err(at(Prep::Cpus))?;
    crate::trace::step("workload", "pin CPUs");
    set_rlimits(&pins.security.rlimits).map_err(at(Prep::Rlimits))?;
    crate::trace::step("workload", "rlimits");
    super::signals::reset_for_exec().map_err(at(Prep::Signals))?;
    crate::trace::step("workload", "reset signals");
    if let Some(adj) = pins.oom_score_adj {
        std::fs::write("/proc/self/oom_score_adj", adj.to_string())
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
            .map_err(at(Prep::OomScore))?;
    }
    // Before the capabilities go: a real-time policy or a raised priority needs
    // CAP_SYS_NICE (runc's order).
    if let Some(s) = pins.scheduling {
        if let Some(attr) = &s.scheduler {
            crate::sys::sched::set_scheduler(attr).map_err(at(Prep::Scheduler))?;
        }
        if let Some(prio) = s.io_priority {
            crate::sys::sched::set_io_priority(prio).map_err(at(Prep::IoPriority))?;
        }
    }
    // OCI noNewPrivileges false: the filters go in while CAP_SYS_ADMIN still allows that
    // without no_new_privs (runc's order); a process without it gets no_new_privs.
    let allow_new_privs = sandboxed
        && pins
            .security
            .caps
            .as_ref()
            .is_some_and(|c| c.allow_new_privs)
        && caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SYS_ADMIN).unwrap_or(false);
    let mut notify = notify;
    let early = match allow_new_privs {
        // Before the ids change: a directory the final user may not search is not skipped.
        true => Some(resolve_and_filter(argv, env, notify.take(), &pins, false)?),
        false => None,
    };
    if let (true, Some(sets)) = (sandboxed, &pins.security.caps) {
        // Dropping from the bounding set needs CAP_SETPCAP, which a switch away from uid 0
        // takes from the effective set: first the bounding set, then the ids, then the rest.
        drop_bounding(&sets.bounding).map_err(at(Prep::Capabilities))?;
    }
    if let Some(user) = pins.user {
        switch_user(user).map_err(at(Prep::User))?;
    }
    if sandboxed {
        drop_privileges(pins.security).map_err(at(Prep::Capabilities))?;
        crate::trace::step("workload", "drop capabilities");
    }
    let exec = match early {
        Some(exec) => exec,
        None => {
            // Installing a filter without privilege needs no_new_privs (set already in a
            // sandbox).
            nix::sys::prctl::set_no_new_privs().map_err(at(Prep::NoNewPrivs))?;
            if pins.scoped {
                crate::sys::landlock::scope_self().map_err(at(Prep::Landlock))?;
            }
            crate::trace::step("workload", "no_new_privs, landlock");
            resolve_and_filter(argv, env, notify, &pins, true)?
        }
    };
    Err(at(Prep::Exec)(exec.run()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_survives_the_status_pipe() {
        for step in Prep::ALL {
            assert_eq!(Prep::of_code(step.code()), step);
        }
        assert_eq!(Prep::of_code(200), Prep::Exec);
    }

    #[test]
    fn the_cpu_it_starts_on_comes_first_then_the_last_ones() {
        let allowed = |c: usize| [0, 1, 2, 5].contains(&c);
        let pick = |first: usize, n: u32| {
            let set = choose_cpus([first].into_iter().chain((0..8).rev()), n, allowed).unwrap();
            (0..8)
                .filter(|&c| set.is_set(c).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(1, 1), vec![1]);
        assert_eq!(pick(1, 2), vec![1, 5]);
        assert_eq!(pick(5, 2), vec![2, 5]);
        // A CPU outside the mask is never chosen, whatever the order says.
        assert_eq!(pick(7, 1), vec![5]);
        assert_eq!(pick(0, 4), vec![0, 1, 2, 5]);
        assert_eq!(pick(0, 9), vec![0, 1, 2, 5]);
    }
}
