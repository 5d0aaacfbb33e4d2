//! What the library takes from the C library, kept to what every glibc a user's image may
//! hold has (and musl): the library is built against the build host's glibc, but loaded into
//! the programs of any root. A symbol bound to a newer version than the root's glibc defines
//! stops *every* dynamic program from starting ("version `GLIBC_2.34' not found"), so:
//!
//! - `dlsym`, `dlopen` and `dlclose` are bound to their first version (`GLIBC_2.2.5` on
//!   x86-64, `GLIBC_2.17` on arm64: in `libdl.so.2` before glibc 2.34, kept in `libc.so.6` as
//!   compatibility symbols since), and the library names `libdl.so.2` as needed (still shipped
//!   as a stub by newer glibc; musl's loader takes the name as itself);
//! - the signal mask is set by the system call itself (`pthread_sigmask` moved to
//!   `GLIBC_2.32`);
//! - `getauxval` (`GLIBC_2.16`) is looked up when it is needed, so an older glibc just lacks it.
//!
//! Every other symbol the library uses is of the first version. `sandbox/preload_abi.rs` of the runtime
//! crate checks the built library against that floor.

use core::ffi::{c_char, c_int, c_ulong, c_void};

// The names of the first versions: references to `reprotime_dl*` become references to
// `dl*@VERSION`, which the linker binds to the compatibility symbol of that version.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".symver reprotime_dlsym, dlsym@GLIBC_2.2.5",
    ".symver reprotime_dlopen, dlopen@GLIBC_2.2.5",
    ".symver reprotime_dlclose, dlclose@GLIBC_2.2.5",
);
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".symver reprotime_dlsym, dlsym@GLIBC_2.17",
    ".symver reprotime_dlopen, dlopen@GLIBC_2.17",
    ".symver reprotime_dlclose, dlclose@GLIBC_2.17",
);

extern "C" {
    #[link_name = "reprotime_dlsym"]
    pub fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    #[link_name = "reprotime_dlopen"]
    pub fn dlopen(name: *const c_char, flags: c_int) -> *mut c_void;
    #[link_name = "reprotime_dlclose"]
    pub fn dlclose(handle: *mut c_void) -> c_int;
}

/// getauxval(3), looked up in the C library when called: 0 where it has none (glibc before
/// 2.16) or the entry is absent.
pub fn getauxval(kind: c_ulong) -> c_ulong {
    type Getauxval = unsafe extern "C" fn(c_ulong) -> c_ulong;
    // SAFETY: a NUL-terminated name looked up in the global scope (RTLD_DEFAULT); the
    // function found by that name has getauxval's type, and getauxval has no preconditions.
    unsafe {
        let f = dlsym(libc::RTLD_DEFAULT, c"getauxval".as_ptr());
        if f.is_null() {
            return 0;
        }
        core::mem::transmute::<*mut c_void, Getauxval>(f)(kind)
    }
}

/// Blocks every signal on this thread, returning the mask it had (the kernel's 64 bits).
pub fn block_signals() -> u64 {
    let (all, mut old) = (!0u64, 0u64);
    // SAFETY: rt_sigprocmask with two valid 8-byte sets, the size the kernel's set has.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &all as *const u64,
            &mut old as *mut u64,
            8usize,
        )
    };
    old
}

/// Puts back the mask [`block_signals`] returned.
pub fn restore_signals(old: u64) {
    // SAFETY: as in block_signals; no old mask is asked for.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &old as *const u64,
            core::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}
