//! Runs the workload without namespaces: the environment and determinism pins only. Used
//! for `--isolation none`, and for `--isolation auto` where the host refuses namespaces.
//! The supervisor becomes a child subreaper so that it can still kill every descendant,
//! double-forked daemons included, at the timeout and when the workload exits.
//!
//! The fake clock still applies where the kernel allows it: the clock page and the preload
//! library go to a private temporary directory named by `REPRORUN_CLOCK_PAGE` and `LD_PRELOAD`
//! (so a child that scrubs its environment loses the preload), and static and Go programs get
//! the same exec-time treatment as in a sandbox.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use std::path::PathBuf;

use std::os::fd::AsFd;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

use crate::sys::recv_packet;

use super::intercept::{notify, vdso};
use super::supervisor::{watch, Watch};
use super::tty;
use super::{probe, signals, spawn, workload, Outcome, SandboxError};
use crate::determinism::clock::{PAGE_FILE, PRELOAD_FILE};
use crate::determinism::{ClockPlan, RandomMode};
use crate::plan::{Isolation, Plan};

/// The private directory holding the runtime page and preload library of a pins-only run.
struct RuntimeDir {
    dir: PathBuf,
}

impl RuntimeDir {
    fn create(clock: Option<ClockPlan>, seed: Option<u64>) -> Result<RuntimeDir, Errno> {
        let io = |e: std::io::Error| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
        let template = std::env::temp_dir().join("reprorun-XXXXXX");
        let dir = nix::unistd::mkdtemp(&template)?;
        let made = RuntimeDir { dir };
        super::write_runtime_files(&made.dir, clock, seed).map_err(io)?;
        Ok(made)
    }

    /// The environment with the preload and the page's location added.
    fn env(&self, env: &[String]) -> Vec<String> {
        let lib = self.dir.join(PRELOAD_FILE).display().to_string();
        let mut out: Vec<String> = env
            .iter()
            .filter(|e| !e.starts_with("LD_PRELOAD="))
            .cloned()
            .collect();
        let theirs = env.iter().find_map(|e| e.strip_prefix("LD_PRELOAD="));
        out.push(match theirs {
            Some(t) if !t.is_empty() => format!("LD_PRELOAD={lib}:{t}"),
            _ => format!("LD_PRELOAD={lib}"),
        });
        out.push(format!(
            "REPRORUN_CLOCK_PAGE={}",
            self.dir.join(PAGE_FILE).display()
        ));
        out.sort();
        out
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn run(
    plan: &Plan,
    res: &super::Resources,
    warn: &mut dyn FnMut(&str),
) -> Result<Outcome, SandboxError> {
    let step = |step: &'static str| move |errno| SandboxError::Supervise { step, errno };
    signals::block_supervised().map_err(step("block signals"))?;
    nix::sys::prctl::set_child_subreaper(true).map_err(step("become subreaper"))?;
    let seed = (plan.random == RandomMode::Seeded).then_some(plan.seed);
    // What the host refuses is skipped, one warning line each.
    let refused = match vdso::SUPPORTED {
        true => probe::Refused::probe(plan.clock.is_some() || seed.is_some()),
        false => probe::Refused::default(),
    };
    let runtime_dir = match plan.clock.is_some() || seed.is_some() {
        true => RuntimeDir::create(plan.clock, seed)
            .map_err(|e| {
                warn(&format!(
                    "warning: dynamic programs see the real clock here: runtime directory in {}: {e}",
                    std::env::temp_dir().display()
                ))
            })
            .ok(),
        false => None,
    };
    for line in refused.warnings(plan.clock.is_some(), seed.is_some(), plan.sorted_dirs) {
        warn(&line);
    }
    let env = runtime_dir
        .as_ref()
        .map_or_else(|| plan.env.clone(), |d| d.env(&plan.env));
    // The workload sends its notification listener over this socket (as in a sandbox).
    let config = notify::Config {
        trace_execs: refused.ptrace.is_none(),
        ..notify::Config::from_plan(plan)
    };
    let (filter, patches_execs) = (config.filter(), config.patches_execs());
    let (ours, theirs) = match vdso::SUPPORTED && refused.notify.is_none() {
        true => {
            let (a, b) = socketpair(
                AddressFamily::Unix,
                SockType::SeqPacket,
                None,
                SockFlag::SOCK_CLOEXEC,
            )
            .map_err(step("socketpair"))?;
            (Some(a), Some(b))
        }
        _ => (None, None),
    };
    let start = Instant::now();
    let cgroup = res.cgroup;
    // As in a sandbox: the caller's terminal stays outside; a pty of the host's devpts.
    let ttys = match res.stdio {
        Some(_) => tty::Terminals::default(), // the caller's terminal is not the workload's
        None => tty::Terminals::of_caller(),
    };
    let pty = match !plan.share_tty && ttys.any() {
        true => Some(tty::open_pty("/dev/ptmx").map_err(|(s, e)| step(s)(e))?),
        false => None,
    };
    let setup = || {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
        if let Some(cg) = cgroup {
            cg.add(Pid::from_raw(0)).map_err(|_| Errno::EPERM)?;
        }
        if let Some(stdio) = res.stdio {
            stdio.install()?;
        }
        if let Some((_, slave)) = &pty {
            tty::take_terminal(slave, ttys)?;
        }
        nix::unistd::chdir(&plan.host_workdir)
    };
    let notify_to = theirs.as_ref().map(|sock| workload::Notify {
        sock,
        filter: &filter,
        patches_execs,
    });
    let pins = workload::ProcessPins {
        scoped: true,
        aslr_off: refused.personality.is_none(),
        leave: tty::Leave::Group,
        ..workload::ProcessPins::from_plan(plan, res.seccomp)
    };
    // SAFETY: the supervisor is single-threaded here (the server thread starts below).
    let spawned = unsafe {
        spawn::spawn(
            spawn::Start::Fork,
            setup,
            &plan.argv,
            &env,
            pins,
            false,
            notify_to,
        )
    }
    .map_err(step("fork"))?;
    let child = spawned.pid;
    drop(theirs);
    let relay = pty.map(|(master, _slave)| tty::Relay::new(master, ttys));
    // Started after the fork, so that the fork happened in a single-threaded process.
    let server = match &ours {
        Some(_) => {
            let at = notify::PageAt {
                root: "/".into(),
                path: runtime_dir
                    .as_ref()
                    .map_or_else(PathBuf::new, |d| d.dir.join(PAGE_FILE)),
            };
            Some(notify::start(config, at).map_err(step("notification thread"))?)
        }
        None => None,
    };
    // The workload's first exec may wait for the server (a static or Go program, see
    // `program`), which needs the listener the workload sends just before: take it now,
    // before waiting for the exec's outcome.
    if let (Some(sock), Some(server)) = (&ours, &server) {
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::NONE);
        if let Ok(Some((bytes, Some(fd)))) = recv_packet(sock) {
            if bytes == [vdso::LISTENER_TAG] {
                let _ = server.listener.send(fd);
            }
        }
    }
    spawned.confirm().map_err(|f| match f.step {
        workload::Prep::Exec => SandboxError::Exec {
            program: plan.argv[0].clone(),
            errno: f.errno,
        },
        step => SandboxError::Prepare {
            step: step.name(),
            errno: f.errno,
        },
    })?;
    let deadline = plan.timeout_ms.map(|ms| start + Duration::from_millis(ms));
    let watched = watch(
        child,
        deadline,
        || kill_descendants(false),
        Watch {
            reap_all: true,
            sock: ours
                .as_ref()
                .map(|s| (s, server.as_ref().map(|s| s.listener.clone()))),
            relay,
            proxy: None,
            registry: None,
            return_on_done: false,
        },
        &mut Vec::new(),
    )?;
    kill_descendants(true);
    Ok(watched.outcome(Isolation::None))
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
        let _guard = crate::sandbox::intercept::tracees::reap_guard();
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == nix::sys::wait::WaitStatus::StillAlive {
                break;
            }
        }
    }
}
