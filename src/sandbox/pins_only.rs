//! Runs the workload without namespaces: the environment and determinism pins only. Used
//! for `--isolation none`, and for `--isolation auto` where the host refuses namespaces.
//! The supervisor becomes a child subreaper so that it can still kill every descendant,
//! double-forked daemons included, at the timeout and when the workload exits.

use std::io::Read;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::{fork, ForkResult, Pid};

use super::supervisor::{exit_code, watch};
use super::{exec, signals, Outcome, SandboxError};
use crate::plan::{Isolation, Plan};

pub fn run(plan: &Plan) -> Result<Outcome, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    signals::block_supervised().map_err(step("block signals"))?;
    nix::sys::prctl::set_child_subreaper(true).map_err(step("become subreaper"))?;
    let (status_r, status_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(step("pipe"))?;
    let start = Instant::now();
    // SAFETY: the supervisor is single-threaded, so the child may allocate before exec.
    let child = match unsafe { fork() }.map_err(step("fork"))? {
        ForkResult::Child => {
            drop(status_r);
            let errno = match nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                .and_then(|_| nix::unistd::chdir(&plan.host_workdir))
            {
                Ok(()) => exec::exec(&plan.argv, &plan.env, plan.umask, false),
                Err(e) => e,
            };
            let _ = nix::unistd::write(&status_w, &(errno as i32).to_ne_bytes());
            // SAFETY: ends the failed child without running the parent's cleanup.
            unsafe { libc::_exit(exec::exit_code_for(errno as i32)) }
        }
        ForkResult::Parent { child } => child,
    };
    drop(status_w);
    let mut buf = [0u8; 4];
    if let Ok(4) = std::fs::File::from(status_r).read(&mut buf) {
        let _ = waitpid(child, None);
        let errno = Errno::from_raw(i32::from_ne_bytes(buf));
        return Err(SandboxError::Exec {
            program: plan.argv[0].clone(),
            errno,
        });
    }
    let deadline = plan.timeout_ms.map(|ms| start + Duration::from_millis(ms));
    let watched = watch(child, child, deadline, kill_descendants)?;
    kill_descendants();
    Ok(Outcome {
        exit_code: if watched.timed_out {
            crate::exit::TIMEOUT
        } else {
            exit_code(watched.status)
        },
        timed_out: watched.timed_out,
        usage: watched.usage,
        isolation: Isolation::None,
    })
}

/// The pids of our children, read from /proc/self/task/*/children.
fn children() -> Vec<Pid> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .map(Pid::from_raw),
            );
        }
    }
    out
}

/// Kills every descendant. Orphans re-parent to us (we are a subreaper), so repeating
/// "kill our children, reap" until none are left reaches grandchildren too.
fn kill_descendants() {
    for _ in 0..1000 {
        let kids = children();
        if kids.is_empty() {
            return;
        }
        for pid in kids {
            let _ = kill(pid, Signal::SIGKILL);
        }
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == nix::sys::wait::WaitStatus::StillAlive {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
