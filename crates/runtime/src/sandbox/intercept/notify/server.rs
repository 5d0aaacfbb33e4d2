//! The server's state and its answer loop; which calls are routed where.

use super::*;

/// The cache sizes at which exited callers and processes are first swept out.
pub(super) const SWEEP_MIN: usize = 64;

pub(super) struct Server {
    pub(super) config: Config,
    pub(super) page: Option<Page>,
    pub(super) callers: HashMap<i32, Caller>,
    pub(super) sweep_at: usize,
    /// Each known process's lineage key and getrandom stream.
    pub(super) lineage: Lineage,
    pub(super) listings: Listings,
    pub(super) started: Instant,
    /// The kernel's cpumask size in bytes (what sched_getaffinity returns).
    pub(super) cpumask_bytes: usize,
}

impl Server {
    pub(super) fn new(config: Config, page: Option<Page>) -> Server {
        Server {
            config,
            page,
            callers: HashMap::new(),
            sweep_at: SWEEP_MIN,
            lineage: Lineage::default(),
            listings: Listings::default(),
            started: Instant::now(),
            cpumask_bytes: cpumask_bytes(),
        }
    }

    /// The calling thread of notification `id`: kept from its earlier calls while that very
    /// thread lives, else opened afresh. `None`: the caller is gone.
    pub(super) fn caller(&mut self, listener: &OwnedFd, tid: Pid, id: u64) -> Option<Caller> {
        if let Some(c) = self.callers.remove(&tid.as_raw()) {
            if !c.exited() {
                return Some(c);
            }
        }
        Caller::open(listener, tid, id)
    }

    /// Keeps a caller for its next call (when it can be told from a later thread).
    pub(super) fn keep(&mut self, caller: Caller) {
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
    pub(super) fn clock_patch(&self) -> ClockPatch {
        use crate::sandbox::intercept::fakeclock::FakeClock;
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

    pub(super) fn now_ns(&self, clock: ClockPlan) -> i64 {
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
    pub(super) fn answer(&mut self, listener: &OwnedFd) -> Result<(), Errno> {
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
            crate::trace::step("server", "exec notification");
            // An exec replaces a process's memory (and a vfork child's shared one): no kept
            // /proc/TID/mem may outlive it.
            self.callers.clear();
            // Without ptrace (refused by the host) an exec goes through untouched.
            let patch = match self.config.trace_execs {
                true => ExecPatch {
                    clock: self.clock_patch(),
                    seeded: self.config.seed.is_some(),
                },
                false => ExecPatch {
                    clock: ClockPatch::Keep,
                    seeded: false,
                },
            };
            // The exec'ing process's AT_RANDOM bytes, from its lineage key: looked up only
            // for a program that bypasses libc (a dynamic one's preload library asks itself,
            // or, as the command, needs no answer), so a dynamic exec waits for no /proc read.
            let seed = self.config.seed;
            crate::sandbox::intercept::vdso::on_exec(
                pid,
                nr,
                &args,
                patch,
                || {
                    seed.and_then(|seed| {
                        self.key_of_thread(pid).map(|k| entropy::at_random(seed, k))
                    })
                },
                || seccomp::id_valid(listener, id),
                || {
                    let _ = seccomp::respond_continue(listener, id);
                },
            );
            return Ok(());
        }
        if nr == libc::SYS_wait4 || nr == libc::SYS_waitid {
            // Routed only so that the waiter's children get their ordinals before one of
            // them is reaped (see `lineage`); the kernel then waits as asked.
            self.before_wait(pid);
            let _ = seccomp::respond_continue(listener, id);
            return Ok(());
        }
        // The vDSO itself falls back to the system call when the clocksource cannot be read
        // from user space; its caller (the preload library or the injected page) adds the
        // offset itself, so such a call must read the real clock. Let through before the
        // caller is opened: nothing of it is read, and nothing is kept.
        let cpu_clock = nr == libc::SYS_clock_gettime && is_cpu_clock(args[0]);
        if is_clock_call(nr) && !cpu_clock && from_vdso(pid, notif.data.instruction_pointer) {
            let _ = seccomp::respond_continue(listener, id);
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
        if nr == libc::SYS_connect || nr == libc::SYS_sendto {
            let (addr, len) = match nr {
                libc::SYS_connect => (args[1], args[2]),
                _ => (args[4], args[5]),
            };
            let dest = read_sockaddr(&caller, addr, len);
            self.keep(caller);
            return match dest.filter(|d| !d.ip().is_loopback() && !d.ip().is_unspecified()) {
                // Outside the sandbox: its namespace has no route there. Say so and note it.
                Some(d) => {
                    if let Some(j) = &self.config.journal {
                        j.direct(direct_what(nr), d.ip(), d.port());
                    }
                    reply(listener, id, Err(Errno::ENETUNREACH))
                }
                // The sandbox's own loopback (the proxy among it), unix sockets, AF_UNSPEC,
                // memory we cannot read: the kernel's own answer.
                None => seccomp::respond_continue(listener, id).or(Ok(())),
            };
        }
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
}

/// The IPv4 or IPv6 address a caller passes at `addr` (`len` bytes); `None` for any other
/// family or memory that cannot be read. An IPv4-mapped IPv6 address is its IPv4 address.
fn read_sockaddr(caller: &Caller, addr: u64, len: u64) -> Option<std::net::SocketAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    if addr == 0 || len < 2 {
        return None;
    }
    let mut buf = [0u8; 28];
    let n = (len as usize).min(buf.len());
    caller.mem.read_exact_at(&mut buf[..n], addr).ok()?;
    let family = u16::from_ne_bytes([buf[0], buf[1]]) as i32;
    let port = u16::from_be_bytes([buf[2], buf[3]]);
    match family {
        libc::AF_INET if n >= 8 => Some(SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7])),
            port,
        )),
        libc::AF_INET6 if n >= 24 => {
            let octets: [u8; 16] = buf[8..24].try_into().ok()?;
            let ip = Ipv6Addr::from(octets);
            let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
            Some(SocketAddr::new(ip, port))
        }
        _ => None,
    }
}

pub(super) fn reply(listener: &OwnedFd, id: u64, result: Result<i64, Errno>) -> Result<(), Errno> {
    let (val, err) = match result {
        Ok(v) => (v, 0),
        Err(e) => (0, e as i32),
    };
    let _ = seccomp::respond(listener, id, val, err);
    Ok(())
}

/// The journal's name for a direct attempt by call `nr`.
fn direct_what(nr: i64) -> &'static str {
    if nr == libc::SYS_connect {
        "direct-connect"
    } else {
        "direct-sendto"
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) fn is_legacy_getdents(nr: i64) -> bool {
    nr == libc::SYS_getdents
}
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn is_legacy_getdents(_nr: i64) -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
pub(super) fn is_gettimeofday(nr: i64) -> bool {
    nr == libc::SYS_gettimeofday
}
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn is_gettimeofday(_nr: i64) -> bool {
    false
}

/// Whether clock `id` is a CPU-time clock: this process's or thread's, or one named by number
/// (`clock_getcpuclockid`, `pthread_getcpuclockid`: negative, its low two bits not 3, which
/// marks a clock named by a descriptor).
pub(super) fn is_cpu_clock(id: u64) -> bool {
    let id = id as u32 as i32;
    id == libc::CLOCK_PROCESS_CPUTIME_ID
        || id == libc::CLOCK_THREAD_CPUTIME_ID
        || (id < 0 && id & 3 != 3)
}

pub(super) fn is_clock_call(nr: i64) -> bool {
    #[cfg(target_arch = "x86_64")]
    if nr == libc::SYS_time {
        return true;
    }
    nr == libc::SYS_clock_gettime || is_gettimeofday(nr)
}

/// Whether `ip` lies in the vDSO of process `pid` (read from /proc/PID/maps).
pub(super) fn from_vdso(pid: Pid, ip: u64) -> bool {
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
