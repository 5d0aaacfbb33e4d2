//! The other interfaces that read the wall or CPU clock, each through [`clock_gettime`]
//! above, so that each is faked the same way: `clock`, `gettimeofday`, `time`, `timespec_get`,
//! `ftime`.

use super::*;

/// clock(3): processor time, in CLOCKS_PER_SEC (10^6) units.
/// # Safety
/// Pointer arguments are as for the C library's `clock`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn clock() -> libc::clock_t {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; clock_gettime above applies the same faking.
    if unsafe { clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return -1;
    }
    (ts.tv_sec as i64 * 1_000_000 + ts.tv_nsec as i64 / 1_000) as libc::clock_t
}

/// # Safety
/// Pointer arguments are as for the C library's `gettimeofday`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn gettimeofday(tv: *mut timeval, tz: *mut c_void) -> c_int {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    let r = unsafe { clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if r == 0 && !tv.is_null() {
        // SAFETY: tv is the caller's non-null out-pointer.
        unsafe {
            *tv = timeval {
                tv_sec: ts.tv_sec,
                tv_usec: (ts.tv_nsec / 1000) as _,
            }
        };
    }
    if !tz.is_null() {
        // SAFETY: struct timezone is two ints; UTC has zero of both.
        unsafe { core::ptr::write_bytes(tz as *mut u8, 0, 8) };
    }
    r
}

/// # Safety
/// Pointer arguments are as for the C library's `time`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn time(t: *mut time_t) -> time_t {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    if unsafe { clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 {
        return -1;
    }
    if !t.is_null() {
        // SAFETY: t is the caller's non-null out-pointer.
        unsafe { *t = ts.tv_sec };
    }
    ts.tv_sec
}

/// # Safety
/// Pointer arguments are as for the C library's `timespec_get`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn timespec_get(ts: *mut timespec, base: c_int) -> c_int {
    const TIME_UTC: c_int = 1;
    // SAFETY: forwards the caller's out-pointer.
    if base == TIME_UTC && !ts.is_null() && unsafe { clock_gettime(libc::CLOCK_REALTIME, ts) } == 0
    {
        return base;
    }
    0
}

#[repr(C)]
pub struct Timeb {
    time: time_t,
    millitm: u16,
    timezone: i16,
    dstflag: i16,
}

/// # Safety
/// Pointer arguments are as for the C library's `ftime`: valid for the call, or null where
/// it allows null.
#[no_mangle]
pub unsafe extern "C" fn ftime(tb: *mut Timeb) -> c_int {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if !tb.is_null() {
        // SAFETY: tb is the caller's non-null out-pointer.
        unsafe {
            *tb = Timeb {
                time: ts.tv_sec,
                millitm: (ts.tv_nsec / 1_000_000) as u16,
                timezone: 0,
                dstflag: 0,
            }
        };
    }
    0
}
