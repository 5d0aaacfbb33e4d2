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

use super::protocol::{drain, InitMsg};
use super::{init, signals, Outcome, SandboxError};
use crate::plan::{Isolation, Plan};
use crate::sys::{clone_process, pidfd_open, wait4, Usage};

/// How a watched child ended.
pub(super) struct Watched {
    pub status: libc::c_int,
    pub usage: Usage,
    pub timed_out: bool,
}

/// Waits for `child` while forwarding signals to `forward_to`; at the deadline calls
/// `on_timeout` (which must make the child exit). Returns the child's raw wait status.
pub(super) fn watch(
    child: Pid,
    forward_to: Pid,
    deadline: Option<Instant>,
    mut on_timeout: impl FnMut(),
) -> Result<Watched, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    let pidfd = pidfd_open(child).map_err(step("pidfd_open"))?;
    let sfd = SignalFd::with_flags(
        &signals::supervised_set(),
        SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK,
    )
    .map_err(step("signalfd"))?;
    let mut timed_out = false;
    loop {
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    if !timed_out {
                        timed_out = true;
                        on_timeout();
                    }
                    PollTimeout::NONE
                } else {
                    PollTimeout::try_from(left.max(Duration::from_millis(1)))
                        .unwrap_or(PollTimeout::MAX)
                }
            }
        };
        let mut fds = [
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                return Err(SandboxError::Supervise {
                    step: "poll",
                    errno: e,
                })
            }
        }
        if fds[1].any().unwrap_or(false) {
            while let Ok(Some(info)) = sfd.read_signal() {
                if signals::should_forward(info.ssi_signo, info.ssi_code) {
                    if let Ok(sig) = Signal::try_from(info.ssi_signo as i32) {
                        let _ = kill(forward_to, sig);
                    }
                }
            }
        }
        if fds[0].any().unwrap_or(false) {
            break;
        }
    }
    let (status, usage) = wait4(child).map_err(step("wait"))?;
    Ok(Watched {
        status,
        usage,
        timed_out,
    })
}

/// Exit code for a raw wait status: the exit status, or 128+N for a death by signal N.
pub(super) fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        libc::WEXITSTATUS(status)
    }
}

/// Runs the plan in full isolation.
pub fn run(plan: &Plan) -> Result<Outcome, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    signals::block_supervised().map_err(step("block signals"))?;
    let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(step("socketpair"))?;
    let start = Instant::now();
    let child = match clone_process(plan.clone_flags()) {
        Err(errno) => {
            return Err(SandboxError::Unavailable {
                reason: format!("create namespaces: {errno}"),
            })
        }
        Ok(None) => {
            drop(ours);
            init::main(plan, theirs)
        }
        Ok(Some(pid)) => pid,
    };
    drop(theirs);
    let deadline = plan.timeout_ms.map(|ms| start + Duration::from_millis(ms));
    let watched = watch(child, child, deadline, || {
        // Killing pid 1 tears down the whole pid namespace, daemons included.
        let _ = kill(child, Signal::SIGKILL);
    })?;
    if let Some(msg) = drain(&ours).into_iter().next() {
        match msg {
            InitMsg::SetupFailed { step, refusal, .. } => {
                return Err(if refusal {
                    SandboxError::Unavailable { reason: step }
                } else {
                    SandboxError::Setup { reason: step }
                });
            }
            InitMsg::ExecFailed { program, errno } => {
                return Err(SandboxError::Exec {
                    program,
                    errno: Errno::from_raw(errno),
                })
            }
        }
    }
    Ok(Outcome {
        exit_code: if watched.timed_out {
            crate::exit::TIMEOUT
        } else {
            exit_code(watched.status)
        },
        timed_out: watched.timed_out,
        usage: watched.usage,
        isolation: Isolation::Full,
    })
}
