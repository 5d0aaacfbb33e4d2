//! How the workload process is started: forked, or borrowing its parent's memory until its
//! exec (`CLONE_VM | CLONE_VFORK`); either way a failure before the exec reaches the parent
//! through a close-on-exec pipe.

use std::io::Read;
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::unistd::Pid;

use crate::exit::Status;
use crate::sandbox::workload::{prepare_and_exec, Failed, Notify, Prep, ProcessPins};

/// A started workload whose exec is not confirmed yet.
pub(crate) struct Spawned {
    pub(crate) pid: Pid,
    status: OwnedFd,
}

impl Spawned {
    /// Waits until the workload's exec happened (`Ok`), or failed (`Err` with the step and
    /// its errno; the child is reaped).
    pub(crate) fn confirm(self) -> Result<Pid, Failed> {
        let mut buf = [0u8; 5];
        match std::fs::File::from(self.status).read(&mut buf) {
            Ok(5) => {
                let _ = nix::sys::wait::waitpid(self.pid, None);
                let errno = [buf[0], buf[1], buf[2], buf[3]];
                Err(Failed {
                    step: Prep::of_code(buf[4]),
                    errno: Errno::from_raw(i32::from_ne_bytes(errno)),
                })
            }
            _ => Ok(self.pid),
        }
    }
}

/// How the workload process is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// `fork`: the caller goes on while the child prepares (a pins-only supervisor, whose
    /// server thread, started after the fork, answers the exec's notification).
    Fork,
    /// `CLONE_VM | CLONE_VFORK` (as `posix_spawn` does): the child prepares in the caller's
    /// memory on a stack of its own, the caller suspended until it has exec'd or exited.
    /// Nothing is copied to start it, nothing copied-on-write while it prepares, nothing torn
    /// down at its exec. For a caller that only waits for the exec anyway (init), and whose
    /// exec is answered by another process.
    Borrow,
}

/// Starts the workload: the child runs `setup`, then [`exec`]s; a failure of either reaches
/// the parent through a close-on-exec pipe (see [`Spawned::confirm`]).
///
/// # Safety
/// The caller must be single-threaded: the child allocates before it execs. With
/// [`Start::Borrow`], nothing the child's exec waits for may need the calling process.
pub(crate) unsafe fn spawn(
    start: Start,
    setup: impl FnOnce() -> Result<(), Errno>,
    argv: &[String],
    env: &[String],
    pins: ProcessPins,
    sandboxed: bool,
    notify: Option<Notify>,
) -> Result<Spawned, Errno> {
    let (status_r, status_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let pid = match start {
        // SAFETY: the caller guarantees a single-threaded process.
        Start::Fork => match unsafe { nix::unistd::fork() }? {
            nix::unistd::ForkResult::Child => {
                child(Some(setup), argv, env, pins, sandboxed, notify, &status_w)
            }
            nix::unistd::ForkResult::Parent { child } => child,
        },
        Start::Borrow => {
            let mut stack = crate::sys::stack::Stack::new(BORROW_STACK)?;
            let mut setup = Some(setup);
            let mut notify = notify;
            let run = || -> isize {
                child(
                    setup.take(),
                    argv,
                    env,
                    pins,
                    sandboxed,
                    notify.take(),
                    &status_w,
                )
            };
            // SAFETY: CLONE_VFORK suspends the (single-threaded) caller until the child has
            // exec'd or exited, so the child runs in this memory as this thread would, with
            // nothing else running in it; it runs on `stack`, which outlives it (dropped
            // once clone has returned). Signals with handlers of ours are synchronous
            // faults only; the child resets the mask and SIGPIPE before it execs.
            let pid = unsafe {
                nix::sched::clone(
                    Box::new(run),
                    stack.as_mut_slice(),
                    nix::sched::CloneFlags::CLONE_VM | nix::sched::CloneFlags::CLONE_VFORK,
                    Some(libc::SIGCHLD),
                )
            };
            // The child has exec'd or exited: what its exec's arguments were laid out in is
            // ours again (see `program`).
            crate::sandbox::intercept::program::unmap_left();
            pid?
        }
    };
    Ok(Spawned {
        pid,
        status: status_r,
    })
}

/// The workload process until its exec: `setup`, the preparation, the exec; a failure is
/// written on `status` (errno and step) and ends the process.
fn child(
    setup: Option<impl FnOnce() -> Result<(), Errno>>,
    argv: &[String],
    env: &[String],
    pins: ProcessPins,
    sandboxed: bool,
    notify: Option<Notify>,
    status: &OwnedFd,
) -> ! {
    crate::trace::step("workload", "started");
    let failed = match setup.map_or(Ok(()), |s| s()) {
        Ok(()) => match prepare_and_exec(argv, env, pins, sandboxed, notify) {
            Ok(never) => match never {},
            Err(f) => f,
        },
        Err(errno) => Failed {
            step: Prep::Setup,
            errno,
        },
    };
    let mut msg = [0u8; 5];
    msg[..4].copy_from_slice(&(failed.errno as i32).to_ne_bytes());
    msg[4] = failed.step.code();
    let _ = nix::unistd::write(status, &msg);
    // SAFETY: _exit ends the failed child at once, without the parent's cleanup (atexit
    // handlers, stdio buffers).
    unsafe { libc::_exit(Status::exec_failed(failed.errno as i32).code()) }
}

/// The stack of a [`Start::Borrow`] child (the size of a Rust thread's; only touched pages
/// are backed).
const BORROW_STACK: usize = 2 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> crate::security::Security {
        crate::security::Security {
            seccomp: crate::security::SeccompProfile::Unconfined,
            cap_add: vec![],
            preserve_fds: 0,
            rlimits: vec![],
            caps: None,
            refuse_setid: false,
        }
    }

    fn pins(security: &crate::security::Security) -> ProcessPins<'_> {
        ProcessPins {
            umask: 0o022,
            cpus: 1,
            security,
            seccomp: &[],
            user: None,
            oom_score_adj: None,
            scheduling: None,
            scoped: false,
            aslr_off: false,
            domain: None,
            leave: crate::sandbox::tty::Leave::Session,
        }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn both_starts_run_the_program_and_report_failed_steps() {
        let security = plain();
        let env = args(&["PATH=/usr/bin:/bin"]);
        for start in [Start::Borrow, Start::Fork] {
            // SAFETY: the children only prepare and exec (or _exit); a borrowing child runs
            // while this thread is suspended.
            let run = |argv: &[String], setup: &dyn Fn() -> Result<(), Errno>| unsafe {
                spawn(start, setup, argv, &env, pins(&security), false, None).unwrap()
            };
            let ok = run(&args(&["/bin/sh", "-c", "exit 7"]), &|| Ok(()));
            let pid = ok.confirm().unwrap();
            assert_eq!(
                nix::sys::wait::waitpid(pid, None).unwrap(),
                nix::sys::wait::WaitStatus::Exited(pid, 7),
                "{start:?}"
            );
            // Searched in the given PATH.
            let pid = run(&args(&["true"]), &|| Ok(())).confirm().unwrap();
            assert_eq!(
                nix::sys::wait::waitpid(pid, None).unwrap(),
                nix::sys::wait::WaitStatus::Exited(pid, 0),
                "{start:?}"
            );
            let missing = run(&args(&["/nonexistent/program"]), &|| Ok(()));
            assert_eq!(
                missing.confirm(),
                Err(Failed {
                    step: Prep::Exec,
                    errno: Errno::ENOENT
                }),
                "{start:?}"
            );
            let refused = run(&args(&["/bin/true"]), &|| Err(Errno::EXDEV));
            assert_eq!(
                refused.confirm(),
                Err(Failed {
                    step: Prep::Setup,
                    errno: Errno::EXDEV
                }),
                "{start:?}"
            );
        }
    }

    #[test]
    fn a_borrowing_child_prepares_in_the_callers_memory_and_a_forked_one_in_a_copy() {
        let security = plain();
        let env = args(&["PATH=/usr/bin:/bin"]);
        for (start, shared) in [(Start::Borrow, true), (Start::Fork, false)] {
            let seen = std::sync::atomic::AtomicBool::new(false);
            let setup = || {
                seen.store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            };
            // SAFETY: as above.
            let spawned = unsafe {
                spawn(
                    start,
                    setup,
                    &args(&["/bin/true"]),
                    &env,
                    pins(&security),
                    false,
                    None,
                )
            }
            .unwrap();
            // A borrowing start returns only once the child has exec'd: its write is here.
            let pid = spawned.confirm().unwrap();
            nix::sys::wait::waitpid(pid, None).unwrap();
            assert_eq!(
                seen.load(std::sync::atomic::Ordering::Relaxed),
                shared,
                "{start:?}"
            );
        }
    }
}
