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
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, send, socketpair, AddressFamily, MsgFlags, SockFlag, SockType};

use super::input::{self, Defaults, Instance};
use super::runner::{self, Conditions};
use super::store::Store;
use super::{unix_now_ms, Arm, Pin, ReproduceError};

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
    let lock = lock(&opts.db)?;
    let lock_fd = lock.as_raw_fd();
    let start = {
        let store = Store::open(&opts.db, true)?;
        runner::check_work_dir(&store.work_dir())?;
        store.register(&insts)?;
        store.check_options(&opts.conditions.fingerprint())?;
        store.set_meta("k", &opts.k.to_string())?;
        let now = unix_now_ms() / 1000;
        let start: i64 = store
            .meta_or_set("started_at", &now.to_string())?
            .parse()
            .unwrap_or(now);
        // Scratch of runs a killed study left; nothing else runs on this study (the lock).
        let _ = std::fs::remove_dir_all(store.work_dir().join("runs"));
        start
        // The coordinator's connection closes here: SQLite connections must not cross fork.
    };

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
    let done = execute(&insts, opts, phase1, start, lock_fd, &mut progress);
    if done.is_ok() && opts.compare_shim && opts.pin_runs > 0 {
        let phase2 = pin_jobs(&insts, opts)?;
        execute(&insts, opts, phase2, start, lock_fd, &mut progress)?;
    }
    progress.finish();
    drop(lock);
    done.map(|()| input.without_prediction)
}

/// Phase 2: the leave-one-out runs of each patch that reproduces with the shim and not
/// without it.
fn pin_jobs(insts: &[Instance], opts: &Options) -> Result<Vec<Job>, ReproduceError> {
    let rows = Store::open(&opts.db, false)?.rows()?;
    let reproduces = |id: &str, arm: Arm, recorded: bool| {
        let rs: Vec<bool> = rows
            .iter()
            .filter(|r| r.instance_id == id && r.arm == arm && r.idx < opts.k)
            .map(|r| r.infra.is_none() && r.resolved == recorded)
            .collect();
        !rs.is_empty() && rs.iter().all(|x| *x)
    };
    let cpus = crate::plan::HostFacts::current().map_or(1, |h| h.cpus_available);
    let cpus_per_worker = cpus / opts.jobs.max(1);
    let mut jobs = Vec::new();
    for idx in 0..opts.pin_runs.min(opts.k) {
        for (i, inst) in insts.iter().enumerate() {
            let id = inst.instance_id.as_str();
            if !reproduces(id, Arm::Shim, inst.recorded_resolved)
                || reproduces(id, Arm::NoShim, inst.recorded_resolved)
            {
                continue;
            }
            for pin in Pin::ALL {
                // A pin is left out only where leaving it out changes something: the
                // mirror needs one and a live index to replace it; the CPUs, a worker
                // share of more than one; the network, `--no-shim-net host`.
                let same = match pin {
                    Pin::Mirror => {
                        inst.mirror.is_none() || opts.conditions.no_shim_mirror.is_none()
                    }
                    Pin::Cpus => cpus_per_worker <= 1,
                    Pin::Network => opts.conditions.no_shim_net == crate::plan::NetMode::None,
                    _ => false,
                };
                if same {
                    continue;
                }
                jobs.push(Job {
                    inst: i,
                    arm: Arm::ShimWithout(pin),
                    idx,
                });
            }
        }
    }
    Ok(jobs)
}

/// One study at a time per database: an exclusive lock on `FILE.lock`, held by the
/// coordinator (workers close their copy, so no sandbox holds it) until the study ends or
/// is killed. A study that was just killed may take a moment to let go: wait a little.
fn lock(db: &std::path::Path) -> Result<std::fs::File, ReproduceError> {
    let path = super::store::sibling(db, "lock");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| ReproduceError::Usage(format!("--db: lock {}: {e}", path.display())))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    // SAFETY: flock on a descriptor we own.
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        if Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        return Err(ReproduceError::Usage(format!(
            "--db {}: another reprorun is running this study; wait for it or stop it",
            db.display()
        )));
    }
    Ok(file)
}

/// A worker process making one run, and our end of its socket.
struct Running {
    pid: nix::unistd::Pid,
    sock: OwnedFd,
}

/// Makes the jobs not yet recorded, `opts.jobs` at a time, each in a worker process of its
/// own (forked per run: no state, thread or descriptor carries from one run to the next).
/// On an error no new run starts; the runs in flight finish and are recorded.
fn execute(
    insts: &[Instance],
    opts: &Options,
    jobs: Vec<Job>,
    start: i64,
    lock_fd: i32,
    progress: &mut Progress,
) -> Result<(), ReproduceError> {
    let mut pending = Vec::new();
    {
        let store = Store::open(&opts.db, false)?;
        for j in jobs {
            if !store.has_run(&insts[j.inst].instance_id, j.arm, j.idx)? {
                pending.push(j);
            }
        }
    }
    if pending.is_empty() {
        return Ok(());
    }
    progress.add(pending.len());
    let slots = (opts.jobs as usize).min(pending.len());
    let mut running: Vec<Option<Running>> = (0..slots).map(|_| None).collect();
    let mut error: Option<ReproduceError> = None;
    let eligible_at = |j: &Job| -> i64 {
        let stagger = opts.stagger.map_or(0, |s| s.as_millis() as i64);
        start * 1000 + stagger * j.idx as i64
    };
    let sys = |step: &'static str| {
        move |e: nix::errno::Errno| ReproduceError::Worker(format!("{step}: {e}"))
    };
    loop {
        let now = unix_now_ms();
        if error.is_none() {
            for slot in 0..slots {
                if running[slot].is_some() {
                    continue;
                }
                let Some(pos) = pending.iter().position(|j| eligible_at(j) <= now) else {
                    break;
                };
                let job = pending.remove(pos);
                match spawn(insts, opts, job, (slot, slots), lock_fd, &running) {
                    Ok(r) => running[slot] = Some(r),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
        }
        let idle = running.iter().all(Option::is_none);
        if idle && (pending.is_empty() || error.is_some()) {
            return error.map_or(Ok(()), Err);
        }
        let wait = if idle {
            pending
                .iter()
                .map(eligible_at)
                .min()
                .map_or(1000, |t| (t - now).clamp(1, 1000))
        } else {
            1000
        };
        let mut fds: Vec<PollFd> = running
            .iter()
            .flatten()
            .map(|r| PollFd::new(r.sock.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(
            &mut fds,
            PollTimeout::try_from(wait as i32).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(sys("poll")(e)),
        }
        let ready: Vec<bool> = fds.iter().map(|f| f.any().unwrap_or(false)).collect();
        drop(fds);
        let mut ready = ready.into_iter();
        for slot in running.iter_mut() {
            let Some(r) = slot.as_ref() else { continue };
            if !ready.next().unwrap_or(false) {
                continue;
            }
            let mut buf = vec![0u8; 4096];
            let got = recv(r.sock.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap_or(0);
            match buf.first() {
                Some(b'+') if got > 0 => progress.done(),
                Some(b'-') if got > 0 => {
                    let msg = String::from_utf8_lossy(&buf[1..got]).into_owned();
                    error.get_or_insert(ReproduceError::Worker(msg));
                }
                _ => {
                    error.get_or_insert(ReproduceError::Worker(
                        "a worker process died before recording its run; start the study again to resume".into(),
                    ));
                }
            }
            let _ = nix::sys::wait::waitpid(r.pid, None);
            *slot = None;
        }
        progress.draw();
    }
}

/// Forks the worker for one run. The coordinator has no other threads and no database
/// connection open, so the fork is safe; the worker closes the other workers' sockets,
/// opens its own connection, makes the run, reports `+` (or `-` and one line) and exits.
/// It dies with the coordinator.
fn spawn(
    insts: &[Instance],
    opts: &Options,
    job: Job,
    (slot, slots): (usize, usize),
    lock_fd: i32,
    others: &[Option<Running>],
) -> Result<Running, ReproduceError> {
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
    // SAFETY: the coordinator is single-threaded (no sandbox, server thread or database
    // connection lives in it), so the child may run ordinary code; it leaves with _exit.
    match unsafe { nix::unistd::fork() }.map_err(sys("fork"))? {
        nix::unistd::ForkResult::Parent { child } => Ok(Running {
            pid: child,
            sock: ours,
        }),
        nix::unistd::ForkResult::Child => {
            // SAFETY: prctl with constant arguments.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            if nix::unistd::getppid() != parent {
                // SAFETY: leaving the child without running destructors.
                unsafe { libc::_exit(1) };
            }
            drop(ours);
            // SAFETY: closing our inherited copy of the study lock (the coordinator keeps
            // its own); never used again here.
            unsafe { libc::close(lock_fd) };
            for r in others.iter().flatten() {
                // SAFETY: closing our inherited copy of another worker's socket; the
                // OwnedFd in this copy of memory is never used or dropped (we _exit).
                unsafe { libc::close(r.sock.as_raw_fd()) };
            }
            cpu_slice(slot, slots);
            let reply = |msg: &[u8]| {
                let _ = send(theirs.as_raw_fd(), msg, MsgFlags::MSG_NOSIGNAL);
            };
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                worker(&insts[job.inst], job, opts)
            }));
            match ran {
                Ok(Ok(())) => reply(b"+"),
                Ok(Err(e)) => reply(format!("-{e}").as_bytes()),
                Err(_) => reply(b"-a worker panicked; start the study again to resume"),
            }
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
    }
}

/// Gives worker slot `w` of `n` its own share of the caller's CPUs, so that concurrent runs
/// do not contend for one CPU (the shim pins each run to one CPU of its worker's share; a
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

/// One run, recorded.
fn worker(inst: &Instance, job: Job, opts: &Options) -> Result<(), ReproduceError> {
    let store = Store::open(&opts.db, false)?;
    let row = runner::run(&store, inst, job.arm, job.idx, &opts.conditions)?;
    store.insert(&row)?;
    Ok(())
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
