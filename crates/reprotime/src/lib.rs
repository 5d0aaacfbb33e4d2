//! libreprotime.so — the fake wall clock for dynamically linked programs in a reprorun sandbox.
//!
//! Loaded into every dynamic program through the sandbox's `/etc/ld.so.preload`, so a child
//! that scrubs its environment is still covered. Its whole configuration is the clock page at
//! `/run/reprorun/clock`, written by the runtime, mapped and read once; the hot path makes no system
//! call of its own, takes no lock and allocates nothing. With seeded entropy it also rewrites
//! the program's AT_RANDOM bytes at load.
//!
//! Interposed: `clock_gettime` (REALTIME, REALTIME_COARSE, TAI; the CPU-time clocks under
//! a frozen or tick clock), `clock`, `gettimeofday`, `time`, `timespec_get`, `ftime`; the stat family (timestamps shifted by the clock's offset) and the
//! utime family (explicit timestamps shifted back), so files touched inside agree with the clock.

#![no_std]
// time_t and friends differ in width between targets: the casts are for the other ones.
#![allow(clippy::unnecessary_cast)]

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int, c_uint, c_void};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

use libc::{clockid_t, stat as Stat, statx as Statx, time_t, timespec, timeval};

mod abi;
mod lookup;
use abi::{dlclose, dlopen, dlsym};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: abort never returns and is async-signal-safe.
    unsafe { libc::abort() }
}

/// The clock page's layout, one type shared with the runtime (`crates/base/src/determinism/page.rs`).
#[path = "../../base/src/determinism/page.rs"]
#[allow(dead_code)]
mod shared_page;
use shared_page::{
    ClockPage as Page, FLAG_SEEDED, MAGIC, MODE_FROZEN, MODE_START_AT, MODE_TICK, VERSION,
};

const PAGE_PATH: &[u8] = b"/run/reprorun/clock\0";
const NS: i64 = 1_000_000_000;
const ZERO_TIMESPECS: [timespec; 2] = [timespec {
    tv_sec: 0,
    tv_nsec: 0,
}; 2];
const ZERO_TIMEVALS: [timeval; 2] = [timeval {
    tv_sec: 0,
    tv_usec: 0,
}; 2];

const UNINIT: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// The page, once [`init`] has mapped and checked it and filled [`CLOCK`] from it (null
/// before, or without a page).
static PAGE: AtomicPtr<Page> = AtomicPtr::new(core::ptr::null_mut());
static CLOCK: ClockCell = ClockCell(UnsafeCell::new(Clock::NONE));
/// Set (Release) by [`init`] once [`CLOCK`] holds a clock started at a date: the one flag the
/// hot path tests after its vDSO read before it shifts the result by `CLOCK.offset`.
static START_AT: AtomicBool = AtomicBool::new(false);

/// What the clock page said when this process mapped it. The runtime writes the page once,
/// before the workload starts, and only its tick counter changes after; the fields are read
/// once (volatile: the page is shared, and a program could write it), so the hot path reads
/// this process's own copy, with the offset already split for [`shift`].
#[derive(Clone, Copy)]
struct Clock {
    mode: u32,
    flags: u32,
    offset_ns: i64,
    /// `offset_ns` as (whole seconds, nanoseconds in `0..NS`).
    offset: (i64, i64),
    epoch_ns: i64,
    step_ns: i64,
    seed: u64,
    /// The page's tick counter, shared by every reader of the page.
    ticks: *const AtomicU64,
}

impl Clock {
    const NONE: Clock = Clock {
        mode: 0,
        flags: 0,
        offset_ns: 0,
        offset: (0, 0),
        epoch_ns: 0,
        step_ns: 0,
        seed: 0,
        ticks: core::ptr::null(),
    };

    /// The next tick (tick mode): the shared counter's value before this read.
    fn tick(&self) -> u64 {
        // SAFETY: `ticks` points into the checked page, which is never unmapped.
        unsafe { (*self.ticks).fetch_add(1, Ordering::Relaxed) }
    }
}

/// [`Clock`] for a static: written only by the [`init`] that won the race, before it
/// publishes [`PAGE`] (Release); read only after a non-null PAGE is seen (Acquire).
struct ClockCell(UnsafeCell<Clock>);
// SAFETY: see the type's doc; the one write happens before every read.
unsafe impl Sync for ClockCell {}

type ClockGettime = unsafe extern "C" fn(clockid_t, *mut timespec) -> c_int;
type StatFn = unsafe extern "C" fn(*const c_char, *mut Stat) -> c_int;
type FstatFn = unsafe extern "C" fn(c_int, *mut Stat) -> c_int;
type FstatatFn = unsafe extern "C" fn(c_int, *const c_char, *mut Stat, c_int) -> c_int;
type StatxFn = unsafe extern "C" fn(c_int, *const c_char, c_int, u32, *mut Statx) -> c_int;
type XstatFn = unsafe extern "C" fn(c_int, *const c_char, *mut Stat) -> c_int;
type FxstatFn = unsafe extern "C" fn(c_int, c_int, *mut Stat) -> c_int;
type FxstatatFn = unsafe extern "C" fn(c_int, c_int, *const c_char, *mut Stat, c_int) -> c_int;
type UtimensatFn = unsafe extern "C" fn(c_int, *const c_char, *const timespec, c_int) -> c_int;
type FutimensFn = unsafe extern "C" fn(c_int, *const timespec) -> c_int;
type UtimesFn = unsafe extern "C" fn(*const c_char, *const timeval) -> c_int;
type FutimesatFn = unsafe extern "C" fn(c_int, *const c_char, *const timeval) -> c_int;

/// The next definition of each symbol (libc's), resolved once at load time.
struct Real {
    clock_gettime: AtomicPtr<c_void>,
    /// The vDSO's own `__vdso_clock_gettime` (null without a vDSO): the faked clocks call it
    /// directly, without libc's wrapper in between.
    vdso_clock_gettime: AtomicPtr<c_void>,
    stat: AtomicPtr<c_void>,
    lstat: AtomicPtr<c_void>,
    fstat: AtomicPtr<c_void>,
    fstatat: AtomicPtr<c_void>,
    statx: AtomicPtr<c_void>,
    xstat: AtomicPtr<c_void>,
    lxstat: AtomicPtr<c_void>,
    fxstat: AtomicPtr<c_void>,
    fxstatat: AtomicPtr<c_void>,
    utimensat: AtomicPtr<c_void>,
    futimens: AtomicPtr<c_void>,
    utimes: AtomicPtr<c_void>,
    lutimes: AtomicPtr<c_void>,
    futimesat: AtomicPtr<c_void>,
}

#[allow(clippy::declare_interior_mutable_const)] // only an initializer for REAL's fields
const NULL: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static REAL: Real = Real {
    clock_gettime: NULL,
    vdso_clock_gettime: NULL,
    stat: NULL,
    lstat: NULL,
    fstat: NULL,
    fstatat: NULL,
    statx: NULL,
    xstat: NULL,
    lxstat: NULL,
    fxstat: NULL,
    fxstatat: NULL,
    utimensat: NULL,
    futimens: NULL,
    utimes: NULL,
    lutimes: NULL,
    futimesat: NULL,
};

#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = constructor;

extern "C" fn constructor() {
    init();
    seed_at_random();
}

#[path = "../../base/src/determinism/mix.rs"]
mod mix;

const AT_RANDOM: libc::c_ulong = 25;

/// With seeded entropy, the 16 bytes AT_RANDOM points to become the seeded ones (libc has
/// already taken its stack guard from them; what the program reads later is seeded).
fn seed_at_random() {
    let Some(p) = page() else { return };
    if p.flags & FLAG_SEEDED == 0 {
        return;
    }
    // SAFETY: getauxval and getpid have no preconditions; getrandom writes at most 8 bytes
    // into the exclusively borrowed `key`; AT_RANDOM, when present, points to 16 writable
    // bytes on the initial stack, which live as long as the process.
    unsafe {
        let at = abi::getauxval(AT_RANDOM) as *mut u8;
        if at.is_null() {
            return;
        }
        // The process's lineage key, which the supervisor answers (see its `lineage`); where
        // nothing answers (the kernel refuses the flags), the pid, as for a root process.
        // The command itself needs no answer: pid 2 whose parent is pid 1 (the sandbox's
        // init, or a supervisor that is pid 1 of its namespace) is the first process the
        // run started, a root of the lineage, whose key is its pid.
        let pid = libc::getpid();
        let mut key: u64 = 0;
        let n = match pid == 2 && libc::getppid() == 1 {
            true => 0,
            false => getrandom_restarted(&mut key as *mut u64 as *mut c_void, 8, mix::KEY_QUERY),
        };
        if n != 8 {
            key = pid as u64;
        }
        let bytes = mix::at_random(p.seed, key);
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), at, 16);
    }
}

/// getrandom(2), taken up again when a signal interrupted it. With seeded entropy the
/// supervisor answers it, and a signal that arrives before the supervisor has taken the call
/// up ends it with EINTR (where the handler lacks SA_RESTART), which the kernel's own
/// getrandom never does for a small request.
unsafe fn getrandom_restarted(buf: *mut c_void, len: usize, flags: c_uint) -> isize {
    loop {
        // SAFETY: the caller's buffer holds `len` bytes, as getrandom(2) requires.
        let n = unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) };
        // SAFETY: errno is this thread's own.
        if n != -1 || unsafe { *libc::__errno_location() } != libc::EINTR {
            return n as isize;
        }
    }
}

/// getrandom(3): the system call, taken up again after EINTR (see [`getrandom_restarted`]).
///
/// # Safety
/// As getrandom(3): `buf` holds `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: usize, flags: c_uint) -> isize {
    // SAFETY: the caller's contract is getrandom's.
    unsafe { getrandom_restarted(buf, len, flags) }
}

/// `name` in the vDSO the loader has already mapped and parsed (null without one).
unsafe fn vdso_symbol(name: &core::ffi::CStr) -> *mut c_void {
    // SAFETY: RTLD_NOLOAD only looks the vDSO up among the loaded objects, loading nothing;
    // the handle is released at once (the vDSO is never unloaded, so the address stays).
    unsafe {
        let h = dlopen(
            c"linux-vdso.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        );
        if h.is_null() {
            return core::ptr::null_mut();
        }
        let f = dlsym(h, name.as_ptr());
        dlclose(h);
        f
    }
}

unsafe fn next(name: &[u8]) -> *mut c_void {
    // SAFETY: name is NUL-terminated; RTLD_NEXT finds the definition after ours (libc's).
    unsafe { dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) }
}

/// Resolves the real functions and maps the clock page. Idempotent; runs in the constructor
/// (single-threaded), or on first use if another constructor calls in earlier.
#[cold]
fn init() {
    if STATE
        .compare_exchange(UNINIT, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        while STATE.load(Ordering::Acquire) == BUSY {
            core::hint::spin_loop();
        }
        return;
    }
    // A signal handler that read the clock on this thread while this runs would wait above
    // for ever, for itself: no signal is taken here until the state is READY.
    let old = abi::block_signals();
    // SAFETY: dlsym with static NUL-terminated names; results are stored as opaque pointers
    // and only called through the matching function type.
    unsafe {
        for (slot, name) in [
            (&REAL.clock_gettime, &b"clock_gettime\0"[..]),
            (&REAL.stat, b"stat\0"),
            (&REAL.lstat, b"lstat\0"),
            (&REAL.fstat, b"fstat\0"),
            (&REAL.fstatat, b"fstatat\0"),
            (&REAL.statx, b"statx\0"),
            (&REAL.xstat, b"__xstat\0"),
            (&REAL.lxstat, b"__lxstat\0"),
            (&REAL.fxstat, b"__fxstat\0"),
            (&REAL.fxstatat, b"__fxstatat\0"),
            (&REAL.utimensat, b"utimensat\0"),
            (&REAL.futimens, b"futimens\0"),
            (&REAL.utimes, b"utimes\0"),
            (&REAL.lutimes, b"lutimes\0"),
            (&REAL.futimesat, b"futimesat\0"),
        ] {
            slot.store(next(name), Ordering::Relaxed);
        }
        REAL.vdso_clock_gettime
            .store(vdso_symbol(c"__vdso_clock_gettime"), Ordering::Relaxed);
    }
    let page = map_page();
    if !page.is_null() {
        // SAFETY: page is mapped and checked; CLOCK is written only here, by the one init
        // that won the race above, before PAGE publishes it.
        unsafe { *CLOCK.0.get() = read_clock(page) };
    }
    // Release: a thread that finds the page set also finds CLOCK and the functions above.
    PAGE.store(page, Ordering::Release);
    if page_fast().is_some_and(|c| c.mode == MODE_START_AT) {
        START_AT.store(true, Ordering::Release);
    }
    STATE.store(READY, Ordering::Release);
    abi::restore_signals(old);
}

/// The settings of the mapped, checked page at `p` (see [`Clock`]).
unsafe fn read_clock(p: *mut Page) -> Clock {
    use core::ptr::{addr_of, read_volatile as get};
    // SAFETY: p points to a whole mapped page; every field is plain data.
    unsafe {
        let offset_ns = get(addr_of!((*p).offset_ns));
        Clock {
            mode: get(addr_of!((*p).mode)),
            flags: get(addr_of!((*p).flags)),
            offset_ns,
            offset: split(offset_ns),
            epoch_ns: get(addr_of!((*p).epoch_ns)),
            step_ns: get(addr_of!((*p).step_ns)),
            seed: get(addr_of!((*p).seed)),
            ticks: addr_of!((*p).ticks),
        }
    }
}

fn map_page() -> *mut Page {
    // SAFETY: getenv/open/mmap/close on NUL-terminated paths; the mapping is checked before
    // use and kept for the life of the process (never unmapped).
    unsafe {
        // Without namespaces (reprorun's pins-only mode) the page lives elsewhere and is named
        // by REPRORUN_CLOCK_PAGE; in a sandbox it is always at PAGE_PATH.
        let from_env = libc::getenv(c"REPRORUN_CLOCK_PAGE".as_ptr());
        let path: *const libc::c_char = if !from_env.is_null() && *from_env != 0 {
            from_env
        } else {
            PAGE_PATH.as_ptr().cast()
        };
        let fd = libc::open(path, libc::O_RDWR | libc::O_CLOEXEC);
        let (fd, prot) = if fd >= 0 {
            (fd, libc::PROT_READ | libc::PROT_WRITE)
        } else {
            let fd = libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC);
            (fd, libc::PROT_READ)
        };
        if fd < 0 {
            return core::ptr::null_mut();
        }
        // A page cut short (the workload truncated it) would fault on first use: no clock.
        let mut st: Stat = core::mem::zeroed();
        let stat_fn = REAL.fstat.load(Ordering::Relaxed);
        let sized = if stat_fn.is_null() {
            libc::syscall(libc::SYS_fstat, fd, &mut st) == 0
        } else {
            core::mem::transmute::<*mut c_void, FstatFn>(stat_fn)(fd, &mut st) == 0
        };
        if !sized || st.st_size < 4096 {
            libc::close(fd);
            return core::ptr::null_mut();
        }
        let p = libc::mmap(core::ptr::null_mut(), 4096, prot, libc::MAP_SHARED, fd, 0);
        libc::close(fd);
        if p == libc::MAP_FAILED {
            return core::ptr::null_mut();
        }
        let page = p as *mut Page;
        let magic = core::ptr::read_volatile(core::ptr::addr_of!((*page).magic));
        let version = core::ptr::read_volatile(core::ptr::addr_of!((*page).version));
        if magic != MAGIC || version != VERSION {
            return core::ptr::null_mut();
        }
        page
    }
}

/// This process's copy of the clock page's settings ([`init`] first if need be); None
/// without a page.
#[inline(always)]
fn page() -> Option<&'static Clock> {
    if STATE.load(Ordering::Acquire) != READY {
        init();
    }
    page_fast()
}

/// The page's settings once [`init`] has set them, with no other check (`None` before, or
/// without a page).
#[inline(always)]
fn page_fast() -> Option<&'static Clock> {
    // SAFETY: a non-null PAGE was published after CLOCK was written, which is not written
    // again (see ClockCell).
    (!PAGE.load(Ordering::Acquire).is_null()).then(|| unsafe { &*CLOCK.0.get() })
}

#[inline(always)]
unsafe fn real_clock(clk: clockid_t, ts: *mut timespec) -> c_int {
    let f = REAL.clock_gettime.load(Ordering::Relaxed);
    if f.is_null() {
        // SAFETY: the raw system call with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_clock_gettime, clk, ts) as c_int };
    }
    // SAFETY: f is libc's clock_gettime, resolved by dlsym.
    unsafe { core::mem::transmute::<*mut c_void, ClockGettime>(f)(clk, ts) }
}

#[inline(always)]
fn to_ts(ns: i64) -> timespec {
    timespec {
        tv_sec: ns.div_euclid(NS) as time_t,
        tv_nsec: ns.rem_euclid(NS) as _,
    }
}

/// `ts` moved by an offset already split into whole seconds and nanoseconds (`0..NS`): two
/// additions and one carry, no conversion to nanoseconds and back. `ts` is a kernel
/// timespec, its nanoseconds in `0..NS`.
#[inline(always)]
fn shift(ts: &mut timespec, (secs, nanos): (i64, i64)) {
    let mut ns = ts.tv_nsec as i64 + nanos;
    let mut s = ts.tv_sec as i64 + secs;
    if ns >= NS {
        ns -= NS;
        s += 1;
    }
    ts.tv_sec = s as time_t;
    ts.tv_nsec = ns as _;
}

/// An offset in nanoseconds as (whole seconds, nanoseconds in `0..NS`).
#[inline(always)]
fn split(by: i64) -> (i64, i64) {
    (by.div_euclid(NS), by.rem_euclid(NS))
}

/// The fake realtime clock in nanoseconds, or None when faking is off.
#[inline(always)]
fn fake_now(p: &Clock) -> Option<i64> {
    match p.mode {
        MODE_START_AT => {
            let mut ts = timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: ts is a valid out-pointer.
            unsafe { real_clock(libc::CLOCK_REALTIME, &mut ts) };
            Some(ts.tv_sec as i64 * NS + ts.tv_nsec as i64 + p.offset_ns)
        }
        MODE_FROZEN => Some(p.epoch_ns),
        MODE_TICK => Some(p.epoch_ns + p.tick() as i64 * p.step_ns),
        _ => None,
    }
}

/// A faked clock (`clk` REALTIME, REALTIME_COARSE or TAI) into the non-null `ts`: for a
/// clock started at a date, one vDSO read plus an addition, with nothing before the read but
/// loading the vDSO's address (its time-stamp-counter read waits for every earlier
/// instruction: a check of the page before it cost about 1 ns of 28). After it, one flag
/// ([`START_AT`]) and the offset from this process's own copy ([`Clock`]): two additions and
/// a carry. Everything else (a failed read, another mode, no page yet) is out of line.
#[inline(always)]
unsafe fn faked_clock(clk: clockid_t, ts: *mut timespec) -> c_int {
    let f = REAL.vdso_clock_gettime.load(Ordering::Relaxed);
    if f.is_null() {
        // SAFETY: ts is the caller's non-null out-pointer.
        return unsafe { faked_clock_cold(clk, ts) };
    }
    // SAFETY: f is the vDSO's clock_gettime, which takes the same arguments.
    let r = unsafe { core::mem::transmute::<*mut c_void, ClockGettime>(f)(clk, ts) };
    if r == 0 && START_AT.load(Ordering::Acquire) {
        // SAFETY: START_AT was set after CLOCK was written, which is not written again (see
        // ClockCell); ts is the caller's non-null out-pointer, just filled.
        unsafe { shift(&mut *ts, (*CLOCK.0.get()).offset) };
        return 0;
    }
    // SAFETY: as above.
    unsafe { faked_clock_failed_or_other(clk, r, ts) }
}

/// [`faked_clock`] after its vDSO read (`r`), when that failed (a negative errno, not -1:
/// libc's clock answers then and sets errno) or the clock is not started at a date.
#[cold]
#[inline(never)]
unsafe fn faked_clock_failed_or_other(clk: clockid_t, r: c_int, ts: *mut timespec) -> c_int {
    let r = match r {
        0 => 0,
        // SAFETY: the caller's arguments.
        _ => unsafe { real_clock(clk, ts) },
    };
    // SAFETY: as above.
    unsafe { faked_clock_rest(r, ts) }
}

/// [`faked_clock`] with no vDSO address: before `init` (a read from a constructor that runs
/// before ours), which is run first, so that the clock is never read through the raw system
/// call, which the sandbox's server already fakes (shifted again, the offset would count
/// twice); or on a host without a vDSO (libc's clock, as before; there libc's system call is
/// faked by the server too, and a start-at clock is shifted twice: see spec/time.md).
#[cold]
#[inline(never)]
unsafe fn faked_clock_cold(clk: clockid_t, ts: *mut timespec) -> c_int {
    let _ = page();
    // SAFETY: the caller's arguments; with the vDSO known now, this does not come back here.
    unsafe {
        match REAL.vdso_clock_gettime.load(Ordering::Relaxed).is_null() {
            false => faked_clock(clk, ts),
            true => faked_clock_rest(real_clock(clk, ts), ts),
        }
    }
}

/// [`faked_clock`] before `init`, without a page, with a frozen or ticking clock, or where
/// the real clock failed (`r`).
#[cold]
#[inline(never)]
unsafe fn faked_clock_rest(r: c_int, ts: *mut timespec) -> c_int {
    let Some(p) = page() else { return r };
    if p.mode == MODE_START_AT {
        if r == 0 {
            // SAFETY: ts is the caller's non-null out-pointer.
            shift(unsafe { &mut *ts }, p.offset);
        }
        return r;
    }
    match fake_now(p) {
        Some(ns) => {
            // SAFETY: as above.
            unsafe { *ts = to_ts(ns) };
            0
        }
        None => r,
    }
}

/// # Safety
/// Pointer arguments are as for the C library's `clock_gettime`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn clock_gettime(clk: clockid_t, ts: *mut timespec) -> c_int {
    let faked = matches!(
        clk,
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_TAI
    );
    if faked && !ts.is_null() {
        // SAFETY: ts is the caller's non-null out-pointer.
        return unsafe { faked_clock(clk, ts) };
    }
    // This process's or thread's CPU clock, or one by number (`clock_getcpuclockid`:
    // negative, its low two bits not 3, which marks a clock named by a descriptor).
    let cpu = matches!(
        clk,
        libc::CLOCK_PROCESS_CPUTIME_ID | libc::CLOCK_THREAD_CPUTIME_ID
    ) || (clk < 0 && clk & 3 != 3);
    if cpu && !ts.is_null() {
        if let Some(ns) = page().and_then(fake_cpu) {
            // SAFETY: ts is the caller's non-null out-pointer.
            unsafe { *ts = to_ts(ns) };
            return 0;
        }
    }
    if STATE.load(Ordering::Acquire) != READY {
        init();
    }
    // SAFETY: passes the caller's arguments through unchanged.
    unsafe { real_clock(clk, ts) }
}

/// The CPU-time clocks under a frozen or tick clock, which must not leak how fast the host
/// ran: frozen reads 0, tick advances with the shared tick counter. None: the real one.
#[inline(always)]
fn fake_cpu(p: &Clock) -> Option<i64> {
    match p.mode {
        MODE_FROZEN => Some(0),
        MODE_TICK => Some(p.tick() as i64 * p.step_ns),
        _ => None,
    }
}

mod derived;
mod files;
