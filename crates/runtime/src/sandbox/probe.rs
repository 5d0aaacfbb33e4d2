//! What a pins-only run may use on this host. A container engine's seccomp profile or
//! missing capabilities refuse some of the calls the pins need (Podman's default profile
//! answers `personality(ADDR_NO_RANDOMIZE)` with ENOSYS, say); each piece is tried before the
//! workload starts, in this process or in a throwaway child, and a refused one is skipped
//! with one warning line instead of failing the run.

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{fork, ForkResult, Pid};

/// The pieces of a pins-only run the host refuses, with why.
#[derive(Debug, Default)]
pub(super) struct Refused {
    /// `personality(ADDR_NO_RANDOMIZE)`: address-space layout randomization stays on.
    pub(super) personality: Option<Errno>,
    /// A seccomp filter with a notification listener: nothing is routed to the supervisor.
    pub(super) notify: Option<Errno>,
    /// `ptrace`: static and Go programs are not handled at their exec.
    pub(super) ptrace: Option<Errno>,
}

impl Refused {
    /// Tries what the run needs: the notification filter and, when `trace` (a fake clock or
    /// seeded entropy), tracing a child.
    pub(super) fn probe(trace: bool) -> Refused {
        let notify = probe_listener().err();
        Refused {
            personality: probe_personality().err(),
            ptrace: match trace && notify.is_none() {
                true => probe_ptrace().err(),
                false => None,
            },
            notify,
        }
    }

    /// One line per skipped piece (`reprorun: ` is the caller's), in a fixed order.
    pub(super) fn warnings(&self, clock: bool, seeded: bool, sorted: bool) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = self.personality {
            out.push(format!(
                "warning: address-space layout stays randomized here: personality refused ({e})"
            ));
        }
        if let Some(e) = self.notify {
            let why = format!("seccomp notification refused ({e})");
            if clock {
                out.push(format!(
                    "warning: static and Go programs see the real clock here: {why}"
                ));
            }
            if seeded {
                out.push(format!(
                    "warning: getrandom returns real entropy here: {why}"
                ));
            }
            if sorted {
                out.push(format!(
                    "warning: directories list in the file system's order here: {why}"
                ));
            }
            out.push(format!(
                "warning: uname, sysinfo and sched_getaffinity answer with the host's values here: {why}"
            ));
        } else if let Some(e) = self.ptrace {
            let why = format!("ptrace refused ({e})");
            if clock {
                out.push(format!(
                    "warning: static and Go programs see the real clock here: {why}"
                ));
            }
            if seeded {
                out.push(format!(
                    "warning: static programs get real AT_RANDOM bytes here: {why}"
                ));
            }
        }
        out
    }
}

/// Sets `ADDR_NO_RANDOMIZE` on this process and restores its personality.
fn probe_personality() -> Result<(), Errno> {
    // SAFETY: personality(2) with 0xffffffff only reads the calling process's flags.
    let current = Errno::result(unsafe { libc::personality(0xffff_ffff) })?;
    let wanted = current as libc::c_ulong | libc::ADDR_NO_RANDOMIZE as libc::c_ulong;
    // SAFETY: sets this process's execution domain flags; restored right after.
    Errno::result(unsafe { libc::personality(wanted) })?;
    // SAFETY: restores the flags read above.
    let _ = unsafe { libc::personality(current as libc::c_ulong) };
    Ok(())
}

/// Runs `f` in a child that exits with its result (0, or the errno) and returns that.
fn in_child(f: impl FnOnce() -> Result<(), Errno>) -> Result<(), Errno> {
    // SAFETY: the child only makes system calls (no allocation: whatever `f` needs was built
    // before) and ends with _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            let code = match f() {
                Ok(()) => 0,
                Err(e) => (e as i32).clamp(1, 255),
            };
            // SAFETY: ends the child at once, without the parent's cleanup.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => match crate::sys::wait4(child, libc::__WALL)? {
            Some((_, status, _)) if libc::WIFEXITED(status) => match libc::WEXITSTATUS(status) {
                0 => Ok(()),
                e => Err(Errno::from_raw(e)),
            },
            _ => Err(Errno::ECHILD),
        },
    }
}

/// Installs a filter that allows everything, with a notification listener, in a child.
fn probe_listener() -> Result<(), Errno> {
    let allow = [crate::sys::bpf::ret(libc::SECCOMP_RET_ALLOW)];
    in_child(|| {
        nix::sys::prctl::set_no_new_privs()?;
        crate::sys::seccomp::install_with_listener(&allow).map(drop)
    })
}

/// Attaches to a child with `PTRACE_SEIZE` (as the notification thread does at an exec).
fn probe_ptrace() -> Result<(), Errno> {
    // SAFETY: the child only waits for its end (pause is async-signal-safe).
    let child = match unsafe { fork() }? {
        ForkResult::Child => loop {
            // SAFETY: pause(2) suspends the child until it is killed.
            unsafe { libc::pause() };
        },
        ForkResult::Parent { child } => child,
    };
    let seized = nix::sys::ptrace::seize(child, nix::sys::ptrace::Options::empty());
    let _ = kill(child, Signal::SIGKILL);
    let _ = crate::sys::wait4(Pid::from_raw(child.as_raw()), libc::__WALL);
    seized
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_line_per_skipped_piece() {
        assert!(Refused::default().warnings(true, true, true).is_empty());
        let podman = Refused {
            personality: Some(Errno::ENOSYS),
            ..Refused::default()
        };
        let lines = podman.warnings(true, true, true);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("randomized") && lines[0].contains("ENOSYS"));
        let no_notify = Refused {
            notify: Some(Errno::EPERM),
            // Not tried without a listener; not reported either.
            ptrace: Some(Errno::EPERM),
            ..Refused::default()
        };
        let lines = no_notify.warnings(true, false, true);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines
            .iter()
            .all(|l| l.ends_with("seccomp notification refused (EPERM: Operation not permitted)")));
        let no_ptrace = Refused {
            ptrace: Some(Errno::EPERM),
            ..Refused::default()
        };
        assert_eq!(no_ptrace.warnings(true, true, true).len(), 2);
        assert!(no_ptrace.warnings(false, false, true).is_empty());
    }
}
