//! The study: which runs to make, made by worker processes, resumable. Nothing is decided
//! by the clock except `--stagger`: the runs still missing from the store are the runs to
//! make, so a study killed at any moment and started again finishes with every run
//! recorded once.
//!
//! Phase 1 makes k runs of every instance in every arm asked for (shim; with
//! `--compare-shim` no-shim; with `--baseline` the unpatched repository under each). Phase 2
//! (with `--compare-shim`) takes each patch that reproduces with the shim but not without
//! it and re-runs it with one pin of the shim left out at a time: the pins whose absence
//! breaks it are the failure modes.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};

use super::input::{self, Defaults, Instance};
use super::runner::{self, Conditions};
use super::store::Store;
use super::{Arm, Pin, ReproduceError};

/// `reprorun reproduce run`'s options.
#[derive(Debug, Clone)]
pub struct Options {
    pub instances: PathBuf,
    pub predictions: PathBuf,
    pub db: PathBuf,
    pub k: u32,
    pub compare_shim: bool,
    pub baseline: bool,
    pub jobs: u32,
    pub stagger: Option<Duration>,
    /// Runs per left-out pin in phase 2 (0: no phase 2); at most `k`.
    pub pin_runs: u32,
    pub defaults: Defaults,
    pub conditions: Conditions,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

/// One run to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Job {
    inst: usize,
    arm: Arm,
    idx: u32,
}

/// Runs the study to completion (or to the first error that stops it) and returns the
/// instances that had no prediction.
pub fn run(opts: &Options) -> Result<Vec<String>, ReproduceError> {
    if opts.k == 0 {
        return Err(ReproduceError::Usage("--k must be at least 1".into()));
    }
    if opts.jobs == 0 {
        return Err(ReproduceError::Usage("--jobs must be at least 1".into()));
    }
    if let Some(m) = &opts.conditions.no_shim_mirror {
        crate::mirror::read_lock(m)
            .map_err(|e| ReproduceError::Usage(format!("--no-shim-mirror: {e}")))?;
    }
    // Everything is read and checked before the store is created.
    let input = input::load(&opts.instances, &opts.predictions, &opts.defaults)?;
    let insts = input.instances;
    let store = Store::open(&opts.db, true)?;
    store.register(&insts)?;
    let now = unix_now();
    let start: i64 = store
        .meta_or_set("started_at", &now.to_string())?
        .parse()
        .unwrap_or(now);

    let mut arms = vec![Arm::Shim];
    if opts.compare_shim {
        arms.push(Arm::NoShim);
    }
    if opts.baseline {
        arms.push(Arm::BaselineShim);
        if opts.compare_shim {
            arms.push(Arm::BaselineNoShim);
        }
    }
    let mut phase1 = Vec::new();
    for idx in 0..opts.k {
        for &arm in &arms {
            for i in 0..insts.len() {
                phase1.push(Job { inst: i, arm, idx });
            }
        }
    }
    let mut progress = Progress::new(opts.progress);
    execute(&store, &insts, opts, phase1, start, &mut progress)?;

    if opts.compare_shim && opts.pin_runs > 0 {
        let rows = store.rows()?;
        let reproduces = |id: &str, arm: Arm, recorded: bool| {
            let rs: Vec<bool> = rows
                .iter()
                .filter(|r| r.instance_id == id && r.arm == arm && r.idx < opts.k)
                .map(|r| r.resolved == recorded)
                .collect();
            !rs.is_empty() && rs.iter().all(|x| *x)
        };
        let mut phase2 = Vec::new();
        for idx in 0..opts.pin_runs.min(opts.k) {
            for (i, inst) in insts.iter().enumerate() {
                let id = inst.instance_id.as_str();
                if !reproduces(id, Arm::Shim, inst.recorded_resolved)
                    || reproduces(id, Arm::NoShim, inst.recorded_resolved)
                {
                    continue;
                }
                for pin in Pin::ALL {
                    // Leaving the mirror out changes nothing without one, or without a
                    // live index to replace it.
                    if pin == Pin::Mirror
                        && (inst.mirror.is_none() || opts.conditions.no_shim_mirror.is_none())
                    {
                        continue;
                    }
                    phase2.push(Job {
                        inst: i,
                        arm: Arm::ShimWithout(pin),
                        idx,
                    });
                }
            }
        }
        execute(&store, &insts, opts, phase2, start, &mut progress)?;
    }
    progress.finish();
    Ok(input.without_prediction)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A worker process and our end of its socket.
struct Worker {
    pid: nix::unistd::Pid,
    sock: OwnedFd,
    busy: Option<Job>,
}

/// Makes the jobs not yet recorded, `opts.jobs` at a time, each in a worker process.
fn execute(
    store: &Store,
    insts: &[Instance],
    opts: &Options,
    jobs: Vec<Job>,
    start: i64,
    progress: &mut Progress,
) -> Result<(), ReproduceError> {
    let mut pending = Vec::new();
    for j in jobs {
        if !store.has_run(&insts[j.inst].instance_id, j.arm, j.idx)? {
            pending.push(j);
        }
    }
    if pending.is_empty() {
        return Ok(());
    }
    progress.add(pending.len());
    let n = (opts.jobs as usize).min(pending.len());
    let mut workers = Vec::new();
    for w in 0..n {
        workers.push(spawn(insts, opts, w, n)?);
    }
    let result = dispatch(&mut workers, pending, opts, start, progress);
    for w in &workers {
        // Closing our end tells an idle worker to exit; a busy one is killed.
        if w.busy.is_some() {
            let _ = nix::sys::signal::kill(w.pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
    let pids: Vec<_> = workers.iter().map(|w| w.pid).collect();
    drop(workers);
    for pid in pids {
        let _ = nix::sys::wait::waitpid(pid, None);
    }
    result
}

fn dispatch(
    workers: &mut [Worker],
    mut pending: Vec<Job>,
    opts: &Options,
    start: i64,
    progress: &mut Progress,
) -> Result<(), ReproduceError> {
    let eligible_at = |j: &Job| -> i64 {
        start
            + opts
                .stagger
                .map_or(0, |s| s.as_secs() as i64 * j.idx as i64)
    };
    let sys = |step: &'static str| {
        move |e: nix::errno::Errno| ReproduceError::Worker(format!("{step}: {e}"))
    };
    loop {
        let now = unix_now();
        for w in workers.iter_mut().filter(|w| w.busy.is_none()) {
            let Some(pos) = pending.iter().position(|j| eligible_at(j) <= now) else {
                break;
            };
            let job = pending.remove(pos);
            let msg = encode(&job);
            send(w.sock.as_raw_fd(), &msg, MsgFlags::MSG_NOSIGNAL).map_err(sys("send a job"))?;
            w.busy = Some(job);
        }
        if pending.is_empty() && workers.iter().all(|w| w.busy.is_none()) {
            return Ok(());
        }
        let wait = pending
            .iter()
            .map(eligible_at)
            .min()
            .filter(|_| workers.iter().any(|w| w.busy.is_none()))
            .map(|t| Duration::from_secs((t - now).max(1) as u64));
        let timeout = wait
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        let mut fds: Vec<PollFd> = workers
            .iter()
            .map(|w| PollFd::new(w.sock.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(
            &mut fds,
            PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(sys("poll")(e)),
        }
        let ready: Vec<bool> = fds.iter().map(|f| f.any().unwrap_or(false)).collect();
        for (w, ready) in workers.iter_mut().zip(ready) {
            if !ready {
                continue;
            }
            let mut buf = vec![0u8; 4096];
            let got = recv(w.sock.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap_or(0);
            if got == 0 {
                w.busy = None;
                return Err(ReproduceError::Worker(
                    "a worker process died; start the study again to resume".into(),
                ));
            }
            if buf[0] != b'+' {
                w.busy = None;
                return Err(ReproduceError::Worker(
                    String::from_utf8_lossy(&buf[1..got]).into_owned(),
                ));
            }
            w.busy = None;
            progress.done();
        }
        progress.draw();
    }
}

fn encode(j: &Job) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend((j.inst as u32).to_le_bytes());
    m.extend(j.idx.to_le_bytes());
    m.extend(j.arm.name().as_bytes());
    m
}

fn decode(m: &[u8]) -> Option<Job> {
    let inst = u32::from_le_bytes(m.get(0..4)?.try_into().ok()?) as usize;
    let idx = u32::from_le_bytes(m.get(4..8)?.try_into().ok()?);
    let arm = Arm::parse(std::str::from_utf8(m.get(8..)?).ok()?)?;
    Some(Job { inst, arm, idx })
}

/// Forks a worker. The coordinator has no other threads, so the fork is safe; the worker
/// opens its own database connection and dies with the coordinator.
fn spawn(insts: &[Instance], opts: &Options, w: usize, n: usize) -> Result<Worker, ReproduceError> {
    let sys = |step: &'static str| {
        move |e: nix::errno::Errno| ReproduceError::Worker(format!("{step}: {e}"))
    };
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(sys("socketpair"))?;
    let parent = nix::unistd::getpid();
    // SAFETY: the coordinator is single-threaded here (no sandbox or server thread runs in
    // it), so the child may run ordinary code; it leaves with _exit, never returning.
    match unsafe { nix::unistd::fork() }.map_err(sys("fork"))? {
        nix::unistd::ForkResult::Parent { child } => Ok(Worker {
            pid: child,
            sock: ours,
            busy: None,
        }),
        nix::unistd::ForkResult::Child => {
            drop(ours);
            // SAFETY: prctl with constant arguments.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            if nix::unistd::getppid() != parent {
                // SAFETY: leaving the child without running destructors.
                unsafe { libc::_exit(1) };
            }
            cpu_slice(w, n);
            worker(insts, opts, theirs);
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
    }
}

/// Gives worker `w` of `n` its own share of the caller's CPUs, so that concurrent runs do
/// not contend for one CPU (the shim pins each run to one CPU of its worker's share; a
/// host-like run gets the whole share). Best effort: on failure the worker keeps the mask.
fn cpu_slice(w: usize, n: usize) {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    let me = nix::unistd::Pid::from_raw(0);
    let Ok(current) = sched_getaffinity(me) else {
        return;
    };
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|c| current.is_set(*c).unwrap_or(false))
        .collect();
    if cpus.is_empty() {
        return;
    }
    let share: Vec<usize> = if cpus.len() >= n {
        cpus[w * cpus.len() / n..(w + 1) * cpus.len() / n].to_vec()
    } else {
        vec![cpus[w % cpus.len()]]
    };
    let mut set = CpuSet::new();
    for c in share {
        let _ = set.set(c);
    }
    let _ = sched_setaffinity(me, &set);
}

fn worker(insts: &[Instance], opts: &Options, sock: OwnedFd) {
    let reply = |msg: &[u8]| {
        let _ = send(sock.as_raw_fd(), msg, MsgFlags::MSG_NOSIGNAL);
    };
    let store = match Store::open(&opts.db, false) {
        Ok(s) => s,
        Err(e) => return reply(format!("-{e}").as_bytes()),
    };
    let mut buf = vec![0u8; 4096];
    loop {
        let got = match recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty()) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(job) = decode(&buf[..got]).filter(|j| j.inst < insts.len()) else {
            return reply(b"-a bad job message");
        };
        let inst = &insts[job.inst];
        let done = runner::run(&store, inst, job.arm, job.idx, &opts.conditions)
            .and_then(|row| store.insert(&row));
        match done {
            Ok(()) => reply(b"+"),
            Err(e) => return reply(format!("-{e}").as_bytes()),
        }
    }
}

/// A one-line progress bar with an ETA on stderr (a terminal only).
struct Progress {
    on: bool,
    total: usize,
    done: usize,
    started: Instant,
    drawn: bool,
}

impl Progress {
    fn new(on: bool) -> Self {
        Progress {
            on,
            total: 0,
            done: 0,
            started: Instant::now(),
            drawn: false,
        }
    }

    fn add(&mut self, n: usize) {
        self.total += n;
        self.draw();
    }

    fn done(&mut self) {
        self.done += 1;
    }

    fn draw(&mut self) {
        if !self.on || self.total == 0 {
            return;
        }
        let width = 30;
        let filled = width * self.done / self.total;
        let eta = if self.done == 0 {
            "--".to_string()
        } else {
            let per = self.started.elapsed().as_secs_f64() / self.done as f64;
            let left = (per * (self.total - self.done) as f64) as u64;
            format!("{}m{:02}s", left / 60, left % 60)
        };
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r[{}{}] {}/{} runs  ETA {eta}   ",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.done,
            self.total
        );
        let _ = err.flush();
        self.drawn = true;
    }

    fn finish(&mut self) {
        if self.drawn {
            self.draw();
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_messages_round_trip() {
        for arm in [
            Arm::Shim,
            Arm::BaselineNoShim,
            Arm::ShimWithout(Pin::HashSeed),
        ] {
            let j = Job {
                inst: 7,
                arm,
                idx: 3,
            };
            assert_eq!(decode(&encode(&j)), Some(j));
        }
        assert_eq!(decode(b"\x01\0\0\0\0\0\0\0bogus"), None);
        assert_eq!(decode(b"\x01"), None);
    }
}
