//! File timestamps: the stat family shows them on the fake clock, and the utime family stores
//! explicit times so that they read back as set.

use super::*;

/// How file timestamps are shown. A timestamp from before the run (older than the real time
/// at which the clock started) is shown as it is, so caches validated by modification time
/// (Python's `.pyc` files, build tools') stay valid; one from the run on is shifted onto the
/// fake clock (by its offset), so a file written now reads the fake "now"; under a frozen
/// clock it is never later than the date, however long the run took.
#[derive(Clone, Copy)]
struct FileView {
    /// fake = real + offset, for timestamps at or after `start` (real, ns).
    offset: i64,
    start: i64,
    /// The date (ns) at which fake times begin; also the frozen clock's limit.
    date: i64,
    frozen: bool,
}

#[inline(always)]
fn file_view() -> Option<FileView> {
    let p = page()?;
    if !matches!(p.mode, MODE_START_AT | MODE_FROZEN | MODE_TICK) {
        return None;
    }
    Some(FileView {
        offset: p.offset_ns,
        start: p.epoch_ns - p.offset_ns,
        date: p.epoch_ns,
        frozen: p.mode == MODE_FROZEN,
    })
}

impl FileView {
    /// A stored (real) timestamp as the program sees it.
    fn show(self, ts: &mut timespec) {
        let t = ts.tv_sec as i64 * NS + ts.tv_nsec as i64;
        if t < self.start {
            return;
        }
        let shown = t.saturating_add(self.offset);
        *ts = to_ts(if self.frozen {
            shown.min(self.date)
        } else {
            shown
        });
    }

    /// The timestamp to store for a time the program sets explicitly, so that it reads back
    /// as set: times from the date on are shifted back onto real time, earlier ones kept.
    fn store(self, ts: &mut timespec) {
        let t = ts.tv_sec as i64 * NS + ts.tv_nsec as i64;
        if t >= self.date {
            *ts = to_ts(t.saturating_sub(self.offset));
        }
    }
}

fn shift_stat(r: c_int, st: *mut Stat) -> c_int {
    let view = file_view();
    if let (0, false, Some(view)) = (r, st.is_null(), view) {
        // SAFETY: the real stat just filled *st.
        let st = unsafe { &mut *st };
        for (sec, nsec) in [
            (&mut st.st_atime, &mut st.st_atime_nsec),
            (&mut st.st_mtime, &mut st.st_mtime_nsec),
            (&mut st.st_ctime, &mut st.st_ctime_nsec),
        ] {
            let mut ts = timespec {
                tv_sec: *sec,
                tv_nsec: *nsec as _,
            };
            view.show(&mut ts);
            *sec = ts.tv_sec;
            *nsec = ts.tv_nsec as _;
        }
    }
    r
}

macro_rules! real {
    ($slot:ident, $ty:ty) => {{
        if STATE.load(Ordering::Acquire) != READY {
            init();
        }
        let f = REAL.$slot.load(Ordering::Relaxed);
        if f.is_null() {
            // SAFETY: errno is thread-local and always writable.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            return -1;
        }
        // SAFETY: f is the next definition of this very symbol, of this type.
        unsafe { core::mem::transmute::<*mut c_void, $ty>(f) }
    }};
}

/// Calls the next definition of this symbol with the caller's (possibly adjusted) arguments.
macro_rules! call_real {
    ($slot:ident, $ty:ty, $($arg:expr),*) => {{
        let f = real!($slot, $ty);
        // SAFETY: forwards a libc call to libc's own definition, arguments unchanged except
        // for timestamps we rewrote into buffers of the same type.
        unsafe { f($($arg),*) }
    }};
}

/// # Safety
/// Pointer arguments are as for the C library's `stat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, st: *mut Stat) -> c_int {
    shift_stat(call_real!(stat, StatFn, path, st), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `stat64`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, st: *mut Stat) -> c_int {
    // SAFETY: on 64-bit Linux stat64 and stat are the same call.
    unsafe { stat(path, st) }
}

/// # Safety
/// Pointer arguments are as for the C library's `lstat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, st: *mut Stat) -> c_int {
    shift_stat(call_real!(lstat, StatFn, path, st), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `lstat64`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, st: *mut Stat) -> c_int {
    // SAFETY: as stat64.
    unsafe { lstat(path, st) }
}

/// # Safety
/// Pointer arguments are as for the C library's `fstat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, st: *mut Stat) -> c_int {
    shift_stat(call_real!(fstat, FstatFn, fd, st), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `fstat64`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, st: *mut Stat) -> c_int {
    // SAFETY: as stat64.
    unsafe { fstat(fd, st) }
}

/// # Safety
/// Pointer arguments are as for the C library's `fstatat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    st: *mut Stat,
    flags: c_int,
) -> c_int {
    shift_stat(call_real!(fstatat, FstatatFn, dirfd, path, st, flags), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `fstatat64`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn fstatat64(
    dirfd: c_int,
    path: *const c_char,
    st: *mut Stat,
    flags: c_int,
) -> c_int {
    // SAFETY: as stat64.
    unsafe { fstatat(dirfd, path, st, flags) }
}

/// # Safety
/// Pointer arguments are as for the C library's `__xstat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn __xstat(ver: c_int, path: *const c_char, st: *mut Stat) -> c_int {
    shift_stat(call_real!(xstat, XstatFn, ver, path, st), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `__lxstat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn __lxstat(ver: c_int, path: *const c_char, st: *mut Stat) -> c_int {
    shift_stat(call_real!(lxstat, XstatFn, ver, path, st), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `__fxstat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn __fxstat(ver: c_int, fd: c_int, st: *mut Stat) -> c_int {
    shift_stat(call_real!(fxstat, FxstatFn, ver, fd, st), st)
}

/// # Safety
/// Pointer arguments are as for the C library's `__fxstatat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn __fxstatat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    st: *mut Stat,
    flags: c_int,
) -> c_int {
    shift_stat(
        call_real!(fxstatat, FxstatatFn, ver, dirfd, path, st, flags),
        st,
    )
}

/// # Safety
/// Pointer arguments are as for the C library's `statx`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: u32,
    stx: *mut Statx,
) -> c_int {
    let r = call_real!(statx, StatxFn, dirfd, path, flags, mask, stx);
    let view = file_view();
    if let (0, false, Some(view)) = (r, stx.is_null(), view) {
        // SAFETY: the real statx just filled *stx.
        let s = unsafe { &mut *stx };
        for t in [
            &mut s.stx_atime,
            &mut s.stx_btime,
            &mut s.stx_ctime,
            &mut s.stx_mtime,
        ] {
            if t.tv_sec == 0 && t.tv_nsec == 0 {
                continue; // not filled in (e.g. no birth time)
            }
            let mut ts = timespec {
                tv_sec: t.tv_sec as time_t,
                tv_nsec: t.tv_nsec as _,
            };
            view.show(&mut ts);
            t.tv_sec = ts.tv_sec as _;
            t.tv_nsec = ts.tv_nsec as _;
        }
    }
    r
}

/// Explicit timestamps given inside are on the fake clock; the kernel wants real ones.
fn unshift_times(times: *const timespec, out: &mut [timespec; 2]) -> *const timespec {
    let Some(view) = file_view().filter(|_| !times.is_null()) else {
        return times;
    };
    for (i, o) in out.iter_mut().enumerate() {
        // SAFETY: utimensat's times argument points to two timespecs.
        *o = unsafe { *times.add(i) };
        if o.tv_nsec != libc::UTIME_NOW && o.tv_nsec != libc::UTIME_OMIT {
            view.store(o);
        }
    }
    out.as_ptr()
}

fn unshift_timevals(tv: *const timeval, out: &mut [timeval; 2]) -> *const timeval {
    let Some(view) = file_view().filter(|_| !tv.is_null()) else {
        return tv;
    };
    for (i, o) in out.iter_mut().enumerate() {
        // SAFETY: the utimes family's argument points to two timevals.
        let v = unsafe { *tv.add(i) };
        let mut ts = timespec {
            tv_sec: v.tv_sec,
            tv_nsec: (v.tv_usec * 1000) as _,
        };
        view.store(&mut ts);
        *o = timeval {
            tv_sec: ts.tv_sec,
            tv_usec: (ts.tv_nsec / 1000) as _,
        };
    }
    out.as_ptr()
}

/// # Safety
/// Pointer arguments are as for the C library's `utimensat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const timespec,
    flags: c_int,
) -> c_int {
    let mut buf = ZERO_TIMESPECS;
    let t = unshift_times(times, &mut buf);
    call_real!(utimensat, UtimensatFn, dirfd, path, t, flags)
}

/// # Safety
/// Pointer arguments are as for the C library's `futimens`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn futimens(fd: c_int, times: *const timespec) -> c_int {
    let mut buf = ZERO_TIMESPECS;
    let t = unshift_times(times, &mut buf);
    call_real!(futimens, FutimensFn, fd, t)
}

/// # Safety
/// Pointer arguments are as for the C library's `utimes`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn utimes(path: *const c_char, tv: *const timeval) -> c_int {
    let mut buf = ZERO_TIMEVALS;
    let t = unshift_timevals(tv, &mut buf);
    call_real!(utimes, UtimesFn, path, t)
}

/// # Safety
/// Pointer arguments are as for the C library's `lutimes`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn lutimes(path: *const c_char, tv: *const timeval) -> c_int {
    let mut buf = ZERO_TIMEVALS;
    let t = unshift_timevals(tv, &mut buf);
    call_real!(lutimes, UtimesFn, path, t)
}

/// # Safety
/// Pointer arguments are as for the C library's `futimesat`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn futimesat(dirfd: c_int, path: *const c_char, tv: *const timeval) -> c_int {
    let mut buf = ZERO_TIMEVALS;
    let t = unshift_timevals(tv, &mut buf);
    call_real!(futimesat, FutimesatFn, dirfd, path, t)
}

#[repr(C)]
pub struct Utimbuf {
    actime: time_t,
    modtime: time_t,
}

/// # Safety
/// Pointer arguments are as for the C library's `utime`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn utime(path: *const c_char, times: *const Utimbuf) -> c_int {
    if times.is_null() {
        // SAFETY: a null times means "now" in both calls.
        return unsafe { utimes(path, core::ptr::null()) };
    }
    // SAFETY: times is the caller's non-null pointer.
    let t = unsafe { &*times };
    let tv = [
        timeval {
            tv_sec: t.actime,
            tv_usec: 0,
        },
        timeval {
            tv_sec: t.modtime,
            tv_usec: 0,
        },
    ];
    // SAFETY: tv is two valid timevals.
    unsafe { utimes(path, tv.as_ptr()) }
}
