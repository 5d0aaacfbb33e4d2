//! The supervisor's seccomp-notification server: a thread that answers the system calls the
//! workload's filter ([`filter`]) sends it, so that what a program learns from the kernel is
//! the same on every host, for static and Go programs as much as for dynamic ones:
//! - realtime clock calls (answered from the sandbox's clock page) and execs (handed to
//!   `vdso`: the in-process clock and seeded AT_RANDOM for static and Go programs);
//! - `getrandom(2)`: one seeded stream per process, keyed by its pid in the sandbox (per
//!   process, not per thread: runtimes such as Go move a goroutine between threads);
//! - `uname(2)`, `sysinfo(2)`, `sched_getaffinity(2)`: the pinned identity;
//! - `getdents64(2)`/`getdents(2)`: listings in name order (see `dirs`).
//!
//! The clock page is the file init wrote at /run/reprorun/clock; the server maps it before it
//! answers anything (so before the workload runs a single instruction of its own), opened
//! inside the sandbox's root without following any link, and checked to be a regular file of
//! a full page, so the preload library and this server share one offset and one tick counter.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::unistd::Pid;

use super::dirs::{self, Listings};
use super::vdso::{ClockPatch, ExecPatch};
use crate::determinism::clock::{ClockMode, ClockPlan, PAGE_PATH, PAGE_SIZE};
use crate::determinism::entropy::{self, Stream};
use crate::determinism::Identity;
use crate::sys::seccomp;

/// What the server answers with: the sandbox's clock, entropy seed and identity.
#[derive(Debug, Clone)]
pub struct Config {
    /// The fake wall clock; `None`: real time (clock calls are not routed here).
    pub clock: Option<ClockPlan>,
    /// The entropy seed; `None`: real entropy (getrandom is not routed here).
    pub seed: Option<u64>,
    pub identity: Identity,
    /// What the sandbox's uptime reads when the workload starts.
    pub uptime_start_secs: i64,
    /// Directory listings in name order (`getdents` routed here).
    pub sorted_dirs: bool,
    /// The sandbox's CPU quota in thousandths of a CPU (`--cpus-quota`), which the server's
    /// own CPU time is held to (see `throttle`); `None`: its CPU count (`--cpus`).
    pub cpu_milli: Option<u64>,
}

impl Config {
    pub fn from_plan(plan: &crate::plan::Plan) -> Config {
        Config {
            clock: plan.clock,
            seed: (plan.random == entropy::RandomMode::Seeded).then_some(plan.seed),
            identity: plan.identity.clone(),
            uptime_start_secs: plan.uptime_start_secs,
            sorted_dirs: plan.sorted_dirs,
            cpu_milli: plan.resources.cpu_milli,
        }
    }

    /// The CPU the server may use, in thousandths of a CPU: the sandbox's quota, else its
    /// CPU count.
    fn cpu_rate_milli(&self) -> u64 {
        self.cpu_milli
            .unwrap_or(u64::from(self.identity.cpus).saturating_mul(1000))
    }

    /// The workload's filter for this configuration.
    pub fn filter(&self) -> Vec<libc::sock_filter> {
        filter(
            self.clock.map(|c| c.mode),
            self.seed.is_some(),
            self.sorted_dirs,
        )
    }
}

/// The seccomp program installed in the workload before its exec. Sent to the server:
/// `execve`/`execveat`, `uname`, `sysinfo`, `sched_getaffinity`; with sorted listings
/// `getdents64`, `getdents`; with a fake clock the realtime clock calls (clock_gettime on REALTIME, REALTIME_COARSE,
/// TAI; gettimeofday; time), and with a frozen or tick clock the CPU-time clocks too; with
/// seeded entropy `getrandom`. Everything else, monotonic clocks included, is allowed at
/// once. Other architectures' calls are allowed untouched.
pub fn filter(clock: Option<ClockMode>, seeded: bool, sorted: bool) -> Vec<libc::sock_filter> {
    let cpu = matches!(clock, Some(ClockMode::Frozen | ClockMode::Tick { .. }));
    let clock = clock.is_some();
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xc000_003e;
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xc000_00b7;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    const ARCH: u32 = 0;
    let ld = |k: u32| libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let ret = |k: u32| libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let mut notified = vec![
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_uname,
        libc::SYS_sysinfo,
        libc::SYS_sched_getaffinity,
    ];
    if sorted {
        notified.push(libc::SYS_getdents64);
        #[cfg(target_arch = "x86_64")]
        notified.push(libc::SYS_getdents);
    }
    if seeded {
        notified.push(libc::SYS_getrandom);
    }
    #[cfg(target_arch = "x86_64")]
    if clock {
        notified.extend([libc::SYS_gettimeofday, libc::SYS_time]);
    }
    // Layout: arch check, syscall number, one jump per notified call, then the clock_gettime
    // clock-id check, then ALLOW and NOTIFY at the end.
    let mut prog = vec![ld(4)];
    let n = notified.len();
    let clock_checks = match (clock, cpu) {
        (false, _) => 0,
        (true, false) => 5,
        (true, true) => 7,
    };
    // Instructions after the arch jump: ld nr, n jumps, clock checks, ALLOW, NOTIFY.
    let total_after = 1 + n + clock_checks + 2;
    prog.push(jeq(ARCH, 0, (total_after - 2) as u8)); // wrong arch: to ALLOW
    prog.push(ld(0));
    for (i, nr) in notified.iter().enumerate() {
        let to_notify = (n - i - 1) + clock_checks + 1;
        prog.push(jeq(*nr as u32, to_notify as u8, 0));
    }
    if clock {
        let mut ids = vec![
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME_COARSE,
            libc::CLOCK_TAI,
        ];
        if cpu {
            ids.extend([
                libc::CLOCK_PROCESS_CPUTIME_ID,
                libc::CLOCK_THREAD_CPUTIME_ID,
            ]);
        }
        // Not clock_gettime: past the id checks, to ALLOW.
        prog.push(jeq(
            libc::SYS_clock_gettime as u32,
            0,
            (ids.len() + 1) as u8,
        ));
        prog.push(ld(16)); // args[0], low half: the clock id
        for (i, id) in ids.iter().enumerate() {
            prog.push(jeq(*id as u32, (ids.len() - i) as u8, 0));
        }
    }
    prog.push(ret(libc::SECCOMP_RET_ALLOW));
    prog.push(ret(libc::SECCOMP_RET_USER_NOTIF));
    prog
}

/// The clock page, mapped shared.
struct Page {
    ptr: *mut u8,
}

// SAFETY: the mapping is process-wide shared memory accessed only through volatile reads and
// an atomic counter; it stays mapped for the Page's whole life.
unsafe impl Send for Page {}

/// Address of the tick-mode mapping, for the SIGBUS guard.
static GUARDED: AtomicUsize = AtomicUsize::new(0);

/// In tick mode the page file is writable from inside, so the workload could truncate it and
/// make our next access fault. The guard replaces the mapping with a private zero page and
/// lets the access retry: only that sandbox's clock is affected, never the supervisor.
extern "C" fn sigbus_guard(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = GUARDED.load(Ordering::Relaxed);
    if page != 0 && (page..page + PAGE_SIZE).contains(&addr) {
        // SAFETY: remaps exactly our own page (async-signal-safe system call).
        unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        return;
    }
    // SAFETY: not our fault: restore the default action and re-raise (async-signal-safe).
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

impl Page {
    /// Maps the clock page at `path` inside the directory `root` (init's root for a sandbox).
    fn open(at: &PageAt, writable: bool) -> Result<Page, Errno> {
        let root = std::fs::File::open(&at.root)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let file = crate::sys::open_in_root_with(&root, &at.path, writable, true)?;
        let meta = file.metadata().map_err(|_| Errno::EIO)?;
        if !meta.is_file() || meta.len() < PAGE_SIZE as u64 {
            return Err(Errno::EINVAL);
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: maps one page of a regular file of at least that size; checked against
        // MAP_FAILED; unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        if writable {
            GUARDED.store(ptr as usize, Ordering::Relaxed);
            let guard = nix::sys::signal::SigAction::new(
                nix::sys::signal::SigHandler::SigAction(sigbus_guard),
                nix::sys::signal::SaFlags::SA_SIGINFO,
                nix::sys::signal::SigSet::empty(),
            );
            // SAFETY: the handler only makes async-signal-safe calls.
            unsafe { nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGBUS, &guard) }?;
        }
        Ok(Page {
            ptr: ptr as *mut u8,
        })
    }

    fn offset_ns(&self) -> i64 {
        // SAFETY: offset 16 is within the mapping and 8-aligned.
        unsafe { std::ptr::read_volatile(self.ptr.add(16) as *const i64) }
    }

    fn next_tick(&self) -> u64 {
        // SAFETY: offset 64 holds the page's 8-aligned AtomicU64 read counter, shared with
        // the preload library in the sandbox.
        let counter = unsafe { &*(self.ptr.add(64) as *const std::sync::atomic::AtomicU64) };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, PAGE_SIZE) };
    }
}

/// A thread that made a notified call, kept between its calls: a pidfd of that very thread
/// (while it has not exited, its id cannot name another thread), its memory, and its process.
struct Caller {
    /// `None` where the kernel gives no thread pidfds: then nothing is kept.
    pidfd: Option<OwnedFd>,
    mem: std::fs::File,
    tid: Pid,
    /// (host tgid, tgid in the sandbox), read when first needed.
    process: Option<(i32, u64)>,
}

/// A process's getrandom stream, with a pidfd that tells the process from a later one with
/// its reused id.
struct ProcessStream {
    pidfd: OwnedFd,
    stream: Stream,
}

impl Caller {
    /// Opens the caller `tid` of notification `id`: the descriptors first, then the check that
    /// the notification (and so the thread) is still the caller's.
    fn open(listener: &OwnedFd, tid: Pid, id: u64) -> Option<Caller> {
        let pidfd = crate::sys::pidfd_open(tid).ok();
        let mem = open_mem(tid)?;
        seccomp::id_valid(listener, id).then_some(Caller {
            pidfd,
            mem,
            tid,
            process: None,
        })
    }

    fn exited(&self) -> bool {
        exited(self.pidfd.as_ref())
    }

    /// Writes into the caller's memory (the descriptor names the memory it had when it was
    /// opened; every exec empties the cache, so that is the caller's current memory).
    fn put(&mut self, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        if addr == 0 {
            return Err(Errno::EFAULT);
        }
        self.mem
            .write_all_at(bytes, addr)
            .map_err(|_| Errno::EFAULT)
    }

    /// The caller's process: its host tgid and its tgid in the sandbox.
    fn process(&mut self) -> Result<(i32, u64), Errno> {
        if self.process.is_none() {
            let [host, inner] = status_ids(self.tid, ["Tgid", "NStgid"]);
            self.process = host.and_then(|t| i32::try_from(t).ok()).zip(inner);
        }
        self.process.ok_or(Errno::ESRCH)
    }
}

fn open_mem(tid: Pid) -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{tid}/mem"))
        .ok()
}

/// The cache sizes at which exited callers and processes are first swept out.
const SWEEP_MIN: usize = 64;

struct Server {
    config: Config,
    page: Option<Page>,
    callers: HashMap<i32, Caller>,
    sweep_at: usize,
    streams: HashMap<i32, ProcessStream>,
    streams_sweep_at: usize,
    listings: Listings,
    started: Instant,
    /// The kernel's cpumask size in bytes (what sched_getaffinity returns).
    cpumask_bytes: usize,
}

/// Fields of /proc/TID/status, such as `Tgid` or `NStgid`, read in one go: each one's
/// innermost value (for the `NS*` fields, the id in the sandbox's pid namespace).
fn status_ids<const N: usize>(tid: Pid, fields: [&str; N]) -> [Option<u64>; N] {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
    fields.map(|field| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    })
}

/// One field of /proc/TID/status (see [`status_ids`]).
fn ns_id(tid: Pid, field: &str) -> Option<u64> {
    let [id] = status_ids(tid, [field]);
    id
}

/// Whether the process or thread behind a pidfd has exited (no pidfd: as good as exited,
/// since nothing tells it from a later one with its id).
fn exited(pidfd: Option<&OwnedFd>) -> bool {
    let Some(pidfd) = pidfd else {
        return true;
    };
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

/// The kernel's cpumask size in bytes, as sched_getaffinity reports it.
fn cpumask_bytes() -> usize {
    let mut buf = vec![0u8; 8192];
    // SAFETY: the kernel writes at most buf.len() bytes into the exclusively borrowed buf.
    let n = unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0, buf.len(), buf.as_mut_ptr()) };
    if n > 0 {
        n as usize
    } else {
        8
    }
}

impl Server {
    fn new(config: Config, page: Option<Page>) -> Server {
        Server {
            config,
            page,
            callers: HashMap::new(),
            sweep_at: SWEEP_MIN,
            streams: HashMap::new(),
            streams_sweep_at: SWEEP_MIN,
            listings: Listings::default(),
            started: Instant::now(),
            cpumask_bytes: cpumask_bytes(),
        }
    }

    /// The calling thread of notification `id`: kept from its earlier calls while that very
    /// thread lives, else opened afresh. `None`: the caller is gone.
    fn caller(&mut self, listener: &OwnedFd, tid: Pid, id: u64) -> Option<Caller> {
        if let Some(c) = self.callers.remove(&tid.as_raw()) {
            if !c.exited() {
                return Some(c);
            }
        }
        Caller::open(listener, tid, id)
    }

    /// Keeps a caller for its next call (when it can be told from a later thread).
    fn keep(&mut self, caller: Caller) {
        if caller.pidfd.is_none() {
            return;
        }
        // Each kept caller holds two descriptors: drop the exited ones whenever the cache has
        // doubled since the last sweep, so short-lived processes never pile up.
        if self.callers.len() >= self.sweep_at {
            self.callers.retain(|_, c| !c.exited());
            self.sweep_at = (2 * self.callers.len()).max(SWEEP_MIN);
        }
        self.callers.insert(caller.tid.as_raw(), caller);
    }

    /// The in-process clock for static and Go programs at exec.
    fn clock_patch(&self) -> ClockPatch {
        use super::vdso::FakeClock;
        let Some(clock) = self.config.clock else {
            return ClockPatch::Keep;
        };
        match clock.mode {
            ClockMode::Frozen => ClockPatch::Inject(FakeClock::Frozen { epoch: clock.epoch }),
            ClockMode::StartAt => match &self.page {
                Some(p) => ClockPatch::Inject(FakeClock::StartAt {
                    offset_ns: p.offset_ns(),
                }),
                None => ClockPatch::Strip,
            },
            // Tick mode's shared counter is advanced only by the server and the preload.
            ClockMode::Tick { .. } => ClockPatch::Strip,
        }
    }

    fn now_ns(&self, clock: ClockPlan) -> i64 {
        let epoch_ns = clock.epoch.saturating_mul(1_000_000_000);
        match (clock.mode, &self.page) {
            (ClockMode::StartAt, Some(p)) => {
                let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
                    .map_or(0, |t| t.tv_sec() * 1_000_000_000 + t.tv_nsec());
                t + p.offset_ns()
            }
            (ClockMode::Tick { step_ns }, Some(p)) => {
                epoch_ns + p.next_tick() as i64 * step_ns as i64
            }
            // Frozen; or no page (it could not be opened safely): the pinned date.
            _ => epoch_ns,
        }
    }

    /// Answers one notification; Err when the listener is finished.
    fn answer(&mut self, listener: &OwnedFd) -> Result<(), Errno> {
        let notif = match seccomp::recv(listener) {
            Ok(n) => n,
            Err(Errno::EINTR) => return Ok(()),
            // The caller died before we read its call, or no process uses the filter any
            // more: in the latter case the listener has hung up and we are done.
            Err(Errno::ENOENT) => {
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::NONE);
                let hup = fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLHUP));
                return if hup { Err(Errno::ENOENT) } else { Ok(()) };
            }
            Err(e) => return Err(e),
        };
        let nr = notif.data.nr as i64;
        let pid = Pid::from_raw(notif.pid as i32);
        let id = notif.id;
        let args = notif.data.args;
        if nr == libc::SYS_execve || nr == libc::SYS_execveat {
            // An exec replaces a process's memory (and a vfork child's shared one): no kept
            // /proc/TID/mem may outlive it.
            self.callers.clear();
            let patch = ExecPatch {
                clock: self.clock_patch(),
                seeded: self.config.seed.is_some(),
            };
            let seed = self.config.seed.unwrap_or(0);
            super::vdso::on_exec(
                pid,
                nr,
                &args,
                patch,
                // The exec'ing thread's process id in the sandbox, as getpid() will say.
                || ns_id(pid, "NStgid").map(|p| entropy::at_random(seed, p as u32)),
                || seccomp::id_valid(listener, id),
                || {
                    let _ = seccomp::respond_continue(listener, id);
                },
            );
            return Ok(());
        }
        let Some(mut caller) = self.caller(listener, pid, id) else {
            // Gone, or its memory cannot be opened here (e.g. Yama ptrace_scope=3): never
            // leave a live caller waiting; the kernel answers instead.
            if seccomp::id_valid(listener, id) {
                let _ = seccomp::respond_continue(listener, id);
            }
            return Ok(());
        };
        if nr == libc::SYS_getdents64 || is_legacy_getdents(nr) {
            let legacy = nr != libc::SYS_getdents64;
            let result = self.getdents(&mut caller, &args, legacy, || {
                seccomp::id_valid(listener, id)
            });
            self.keep(caller);
            return match result {
                Some(Ok(n)) => reply(listener, id, Ok(n)),
                Some(Err(e)) => reply(listener, id, Err(e)),
                // The directory cannot be listed our way: the kernel's own answer.
                None => seccomp::respond_continue(listener, id).or(Ok(())),
            };
        }
        // The vDSO itself falls back to the system call when the clocksource cannot be read
        // from user space; its caller (the preload library or the injected page) adds the
        // offset itself, so such a call must read the real clock.
        let cpu_clock = nr == libc::SYS_clock_gettime && is_cpu_clock(args[0]);
        if is_clock_call(nr) && !cpu_clock && from_vdso(pid, notif.data.instruction_pointer) {
            self.keep(caller);
            let _ = seccomp::respond_continue(listener, id);
            return Ok(());
        }
        let c = &mut caller;
        let result = if nr == libc::SYS_getrandom {
            self.getrandom(c, &args)
        } else if nr == libc::SYS_uname {
            c.put(args[0], &self.config.identity.uname.to_utsname())
                .map(|_| 0)
        } else if nr == libc::SYS_sysinfo {
            c.put(args[0], &self.sysinfo()).map(|_| 0)
        } else if nr == libc::SYS_sched_getaffinity {
            self.getaffinity(c, &args)
        } else {
            self.clock_call(c, nr, &args)
        };
        self.keep(caller);
        reply(listener, id, result)
    }

    fn clock_call(&self, c: &mut Caller, nr: i64, args: &[u64; 6]) -> Result<i64, Errno> {
        let Some(clock) = self.config.clock else {
            return Err(Errno::ENOSYS); // not routed here without a fake clock
        };
        if nr == libc::SYS_clock_gettime && is_cpu_clock(args[0]) {
            // Routed here only under a frozen or tick clock (see `filter`).
            let ns = match (clock.mode, &self.page) {
                (ClockMode::Tick { step_ns }, Some(p)) => p.next_tick() as i64 * step_ns as i64,
                _ => 0,
            };
            let pair = [ns / 1_000_000_000, ns % 1_000_000_000];
            let bytes: Vec<u8> = pair.iter().flat_map(|v| v.to_ne_bytes()).collect();
            return c.put(args[1], &bytes).map(|_| 0);
        }
        let now = self.now_ns(clock);
        let (secs, nanos) = (now.div_euclid(1_000_000_000), now.rem_euclid(1_000_000_000));
        let pair = |a: i64, b: i64| {
            let mut buf = [0u8; 16];
            buf[..8].copy_from_slice(&a.to_ne_bytes());
            buf[8..].copy_from_slice(&b.to_ne_bytes());
            buf
        };
        let mut opt = |addr: u64, bytes: &[u8]| match addr {
            0 => Ok(()),
            _ => c.put(addr, bytes),
        };
        if nr == libc::SYS_clock_gettime {
            opt(args[1].max(1), &pair(secs, nanos)).map(|_| 0)
        } else if is_gettimeofday(nr) {
            opt(args[0], &pair(secs, nanos / 1000))
                .and_then(|_| opt(args[1], &[0u8; 8]))
                .map(|_| 0)
        } else {
            opt(args[0], &secs.to_ne_bytes()).map(|_| secs) // time(2)
        }
    }

    /// getrandom(buf, len, flags): the next bytes of the calling process's seeded stream.
    fn getrandom(&mut self, c: &mut Caller, args: &[u64; 6]) -> Result<i64, Errno> {
        const GRND_NONBLOCK: u64 = 1;
        const GRND_RANDOM: u64 = 2;
        const GRND_INSECURE: u64 = 4;
        let (buf, len, flags) = (args[0], args[1] as usize, args[2] as u32 as u64);
        if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
            || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
        {
            return Err(Errno::EINVAL);
        }
        let Some(seed) = self.config.seed else {
            return Err(Errno::ENOSYS); // not routed here with real entropy
        };
        // Large requests may be answered in part, as the kernel's may.
        let len = len.min(1 << 20);
        if len == 0 {
            return Ok(0);
        }
        let (tgid, ns_tgid) = c.process()?;
        if self
            .streams
            .get(&tgid)
            .map_or(true, |s| exited(Some(&s.pidfd)))
        {
            // The caller is blocked in this call, so its process is alive and `tgid` is it.
            let pidfd = crate::sys::pidfd_open_process(Pid::from_raw(tgid))?;
            if self.streams.len() >= self.streams_sweep_at {
                self.streams.retain(|_, s| !exited(Some(&s.pidfd)));
                self.streams_sweep_at = (2 * self.streams.len()).max(SWEEP_MIN);
            }
            let stream = Stream::new(seed, entropy::DOMAIN_GETRANDOM, ns_tgid);
            self.streams.insert(tgid, ProcessStream { pidfd, stream });
        }
        let mut bytes = vec![0u8; len];
        if let Some(s) = self.streams.get_mut(&tgid) {
            s.stream.fill(&mut bytes);
        }
        c.put(buf, &bytes).map(|_| len as i64)
    }

    /// sched_getaffinity(pid, len, mask): CPUs 0..cpus-1, whatever the real mask.
    fn getaffinity(&self, c: &mut Caller, args: &[u64; 6]) -> Result<i64, Errno> {
        // As the kernel: a whole number of longs, large enough for every CPU it reports;
        // the answer is the smaller of that and its own mask size.
        let len = args[1] as usize;
        let word = std::mem::size_of::<libc::c_ulong>();
        if len % word != 0 || len * 8 < self.config.identity.cpus as usize {
            return Err(Errno::EINVAL);
        }
        let n = len.min(self.cpumask_bytes);
        c.put(args[2], &self.config.identity.affinity_mask(n))
            .map(|_| n as i64)
    }

    /// struct sysinfo: the pinned memory, no swap, no load, uptime since the sandbox began.
    fn sysinfo(&self) -> Vec<u8> {
        let id = &self.config.identity;
        // SAFETY: sysinfo is plain old data; all-zero is a valid value.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        info.uptime = self.config.uptime_start_secs + self.started.elapsed().as_secs() as i64;
        info.totalram = id.memory_bytes as _;
        info.freeram = (id.memory_bytes / 2) as _;
        info.procs = 1;
        info.mem_unit = 1;
        let size = std::mem::size_of::<libc::sysinfo>();
        // SAFETY: reads the bytes of a fully initialised plain-old-data struct.
        unsafe { std::slice::from_raw_parts(&info as *const libc::sysinfo as *const u8, size) }
            .to_vec()
    }

    /// getdents64/getdents(fd, buf, count) in sorted order; `None` where the kernel should
    /// answer itself (a filesystem whose directory offsets we cannot set).
    fn getdents(
        &mut self,
        c: &mut Caller,
        args: &[u64; 6],
        legacy: bool,
        still_valid: impl Fn() -> bool,
    ) -> Option<Result<i64, Errno>> {
        let (fd, buf, count) = (args[0] as i32, args[1], args[2] as u32 as usize);
        // Kernels before 6.9 give no pidfd for a thread that is not its process's leader:
        // use the process's (the descriptor table is shared), checked to still be the
        // caller's, so that every thread's listing goes through here.
        let process_pidfd;
        let pidfd = match c.pidfd.as_ref() {
            Some(p) => p,
            None => {
                let (tgid, _) = c.process().ok()?;
                process_pidfd = crate::sys::pidfd_open_process(Pid::from_raw(tgid)).ok()?;
                if !still_valid() {
                    return None;
                }
                &process_pidfd
            }
        };
        let dup = match crate::sys::pidfd_getfd(pidfd, fd) {
            Ok(d) => d,
            Err(Errno::EBADF) => return Some(Err(Errno::EBADF)),
            Err(_) => return None,
        };
        let flags = nix::fcntl::fcntl(dup.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).ok()?;
        if flags & libc::O_PATH != 0 {
            return Some(Err(Errno::EBADF));
        }
        let st = nix::sys::stat::fstat(dup.as_raw_fd()).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Some(Err(Errno::ENOTDIR));
        }
        use nix::unistd::{lseek, Whence};
        let pos = lseek(dup.as_raw_fd(), 0, Whence::SeekCur).ok()?;
        // Reading the directory moves the shared offset: every way out that consumes nothing
        // puts it back where the caller left it.
        let restore = || {
            let _ = lseek(dup.as_raw_fd(), pos, Whence::SeekSet);
        };
        let entries = match self.listings.get(
            (c.tid.as_raw(), fd),
            (st.st_dev, st.st_ino),
            pos == 0,
            || dirs::read_sorted(&dup),
        ) {
            Ok(e) => e,
            Err(_) => {
                restore();
                return None;
            }
        };
        let start = usize::try_from(pos)
            .unwrap_or(usize::MAX)
            .min(entries.len());
        let (bytes, next) = match dirs::encode(&entries, start, count, legacy) {
            Ok(r) => r,
            Err(e) => {
                restore();
                return Some(Err(e));
            }
        };
        if bytes.is_empty() {
            restore();
            return Some(Ok(0));
        }
        if let Err(e) = c.put(buf, &bytes) {
            restore();
            return Some(Err(e));
        }
        if lseek(dup.as_raw_fd(), next as i64, Whence::SeekSet).is_err() {
            // This filesystem refuses our offsets: the kernel's own (unsorted) answer.
            restore();
            return None;
        }
        Some(Ok(bytes.len() as i64))
    }
}

fn reply(listener: &OwnedFd, id: u64, result: Result<i64, Errno>) -> Result<(), Errno> {
    let (val, err) = match result {
        Ok(v) => (v, 0),
        Err(e) => (0, e as i32),
    };
    let _ = seccomp::respond(listener, id, val, err);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
fn is_legacy_getdents(nr: i64) -> bool {
    nr == libc::SYS_getdents
}
#[cfg(not(target_arch = "x86_64"))]
fn is_legacy_getdents(_nr: i64) -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn is_gettimeofday(nr: i64) -> bool {
    nr == libc::SYS_gettimeofday
}
#[cfg(not(target_arch = "x86_64"))]
fn is_gettimeofday(_nr: i64) -> bool {
    false
}

fn is_cpu_clock(id: u64) -> bool {
    let id = id as u32 as i32;
    id == libc::CLOCK_PROCESS_CPUTIME_ID || id == libc::CLOCK_THREAD_CPUTIME_ID
}

fn is_clock_call(nr: i64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_time {
        return true;
    }
    nr == libc::SYS_clock_gettime || is_gettimeofday(nr)
}

/// Whether `ip` lies in the vDSO of process `pid` (read from /proc/PID/maps).
fn from_vdso(pid: Pid, ip: u64) -> bool {
    // The vDSO sits just below the stack, at the top of the address space; a program's own
    // text (static binaries, the usual callers here) is far below. Skip the read for those.
    if ip < 0x7f00_0000_0000 {
        return false;
    }
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    maps.lines().filter(|l| l.ends_with("[vdso]")).any(|l| {
        let range = l.split_whitespace().next().unwrap_or("");
        let mut ends = range
            .split('-')
            .map(|h| u64::from_str_radix(h, 16).unwrap_or(0));
        match (ends.next(), ends.next()) {
            (Some(lo), Some(hi)) => (lo..hi).contains(&ip),
            _ => false,
        }
    })
}

/// The server thread and the channel that hands it the workload's listener.
pub struct NotifyServer {
    pub listener: Sender<OwnedFd>,
    thread: JoinHandle<()>,
}

impl NotifyServer {
    /// Whether the server is done (no process uses its filter any more).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Ends a server that never got a listener (the sandbox failed before its workload ran):
    /// the thread sees the channel close and returns.
    pub fn stop_unused(self) {
        drop(self.listener);
        // A thread that got a listener (the workload's exec failed) may sit in RECV, which a
        // kernel before 6.11 does not wake when the last filtered process is gone: wait a
        // little, then leave it (no fork follows on that path; the process ends soon).
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        while !self.thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if self.thread.is_finished() {
            let _ = self.thread.join();
        }
    }
}

/// Where the clock page is: `path` resolved inside `root`, without following links.
pub struct PageAt {
    pub root: PathBuf,
    pub path: PathBuf,
}

impl PageAt {
    /// The page of the sandbox whose init is `init`.
    pub fn sandbox(init: Pid) -> PageAt {
        PageAt {
            root: PathBuf::from(format!("/proc/{init}/root")),
            path: PathBuf::from(PAGE_PATH),
        }
    }
}

/// Starts the server thread now (so its start-up overlaps the sandbox's); it serves the
/// listener sent through the channel until no process uses the filter any more.
pub fn start(config: Config, at: PageAt) -> Result<NotifyServer, Errno> {
    let (tx, rx) = std::sync::mpsc::channel::<OwnedFd>();
    let thread = std::thread::Builder::new()
        .name("reprorun-notify".into())
        .spawn(move || {
            let Ok(listener) = rx.recv() else { return };
            // The workload sent its listener just before its first exec, which now waits for
            // us: map the page before answering anything.
            let page = match config.clock.map(|c| c.mode) {
                None | Some(ClockMode::Frozen) => None,
                Some(mode) => Page::open(&at, matches!(mode, ClockMode::Tick { .. })).ok(),
            };
            // The server's CPU time is the sandbox's: held to its quota.
            let mut throttle = super::throttle::Throttle::new(config.cpu_rate_milli());
            let mut server = Server::new(config, page);
            // Ask the kernel to hand the CPU straight to us and back (a synchronous round
            // trip); an older kernel without the flag still works, with slower wake-ups.
            // Blocking in RECV (not in poll) is what the synchronous wake-up hands the CPU to.
            let _ = seccomp::set_sync_wakeup(&listener);
            while server.answer(&listener).is_ok() {
                throttle.pace();
            }
        })
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EAGAIN)))?;
    Ok(NotifyServer {
        listener: tx,
        thread,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a classic-BPF seccomp program (the three instructions `filter` uses) over
    /// `seccomp_data` for (arch, nr, args[0]).
    fn verdict(prog: &[libc::sock_filter], arch: u32, nr: i64, arg0: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as i32).to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        data[16..24].copy_from_slice(&arg0.to_ne_bytes());
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let ins = prog[pc];
            match ins.code as u32 {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    let k = ins.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += 1 + if acc == ins.k { ins.jt } else { ins.jf } as usize;
                }
                c if c == libc::BPF_RET | libc::BPF_K => return ins.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
            assert!(pc < prog.len(), "jump out of the program");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn filter_routes_exactly_the_documented_calls() {
        const X86_64: u32 = 0xc000_003e;
        const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
        const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
        let always = [
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_uname,
            libc::SYS_sysinfo,
            libc::SYS_sched_getaffinity,
        ];
        let cases = [
            (None, false, true),
            (Some(ClockMode::StartAt), true, true),
            (Some(ClockMode::Frozen), true, false),
            (Some(ClockMode::Tick { step_ns: 1 }), false, true),
        ];
        for (clock, seeded, sorted) in cases {
            let prog = filter(clock, seeded, sorted);
            let v = |nr: i64, arg0: u64| verdict(&prog, X86_64, nr, arg0);
            for nr in always {
                assert_eq!(v(nr, 0), NOTIFY, "{nr} with {clock:?}");
            }
            for nr in [libc::SYS_getdents64, libc::SYS_getdents] {
                assert_eq!(v(nr, 0) == NOTIFY, sorted, "{nr}");
            }
            assert_eq!(v(libc::SYS_getrandom, 0) == NOTIFY, seeded);
            for nr in [libc::SYS_read, libc::SYS_openat, libc::SYS_clock_nanosleep] {
                assert_eq!(v(nr, 0), ALLOW);
            }
            let faked = clock.is_some();
            let cpu = matches!(clock, Some(ClockMode::Frozen | ClockMode::Tick { .. }));
            let cg = libc::SYS_clock_gettime;
            assert_eq!(v(cg, libc::CLOCK_REALTIME as u64) == NOTIFY, faked);
            assert_eq!(v(cg, libc::CLOCK_TAI as u64) == NOTIFY, faked);
            assert_eq!(v(cg, libc::CLOCK_MONOTONIC as u64), ALLOW);
            assert_eq!(v(cg, libc::CLOCK_PROCESS_CPUTIME_ID as u64) == NOTIFY, cpu);
            assert_eq!(v(cg, libc::CLOCK_THREAD_CPUTIME_ID as u64) == NOTIFY, cpu);
            assert_eq!(v(libc::SYS_gettimeofday, 0) == NOTIFY, faked);
            assert_eq!(v(libc::SYS_time, 0) == NOTIFY, faked);
            // Another architecture's calls are not ours to interpret.
            assert_eq!(verdict(&prog, 0x4000_0003, libc::SYS_execve, 0), ALLOW);
        }
    }
}
