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

use super::supervisor::{exit_code, watch, Watch};
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
                Ok(()) => exec::exec(&plan.argv, &plan.env, plan.umask, false, None),
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
    let watched = watch(
        child,
        child,
        deadline,
        || kill_descendants(false),
        Watch {
            reap_all: true,
            sock: None,
        },
        &mut Vec::new(),
    )?;
    kill_descendants(true);
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

/// Every live (non-zombie) descendant, found by walking /proc/PID/task/*/children.
fn live_descendants() -> Vec<Pid> {
    let mut out = Vec::new();
    let mut queue = vec![nix::unistd::getpid()];
    while let Some(pid) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .map(Pid::from_raw)
            {
                queue.push(child);
                if !is_zombie(child) {
                    out.push(child);
                }
            }
        }
    }
    out
}

fn is_zombie(pid: Pid) -> bool {
    // The state is the first field after the parenthesised command name.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Kills every descendant, double-forked daemons included: orphans re-parent to us (we are a
/// subreaper), so repeating the walk reaches processes forked while we were killing. With
/// `reap`, also collects every zombie child (call it only once the workload was waited for).
fn kill_descendants(reap: bool) {
    for _ in 0..1000 {
        let live = live_descendants();
        if live.is_empty() {
            break;
        }
        for pid in live {
            let _ = kill(pid, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if reap {
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == nix::sys::wait::WaitStatus::StillAlive {
                break;
            }
        }
    }
}
