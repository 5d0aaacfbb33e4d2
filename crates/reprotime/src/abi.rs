//! What the library takes from the C library, kept to what every glibc a user's image may
//! hold has (and musl): the library is built against the build host's glibc, but loaded into
//! the programs of any root. A symbol bound to a newer version than the root's glibc defines
//! stops *every* dynamic program from starting ("version `GLIBC_2.34' not found"), so:
//!
//! - `dlsym`, `dlopen` and `dlclose` are weak references bound to their first version
//!   (`GLIBC_2.2.5` on x86-64, `GLIBC_2.17` on arm64): in `libc.so.6` since glibc 2.34 (as
//!   compatibility symbols), in `libdl.so.2` before, which a program need not have loaded
//!   (`date` does not), and which a minimal root need not even hold (so it is not named as
//!   needed: a missing needed library stops every program). Without `dlsym`, the
//!   symbols are looked up in the loaded objects' own hash tables (`lookup`); without
//!   `dlopen` the vDSO's clock is read through libc's `clock_gettime`;
//! - the signal mask is set by the system call itself (`pthread_sigmask` moved to
//!   `GLIBC_2.32`);
//! - `getauxval` (`GLIBC_2.16`) is looked up when it is needed, so an older glibc just lacks it.
//!
//! Every other symbol the library uses is of the first version. `sandbox/preload_abi.rs` of the runtime
//! crate checks the built library against that floor.

use core::ffi::{c_char, c_int, c_ulong, c_void};

// The names of the first versions: references to `reprotime_*` become weak references to
// `dl*@VERSION`, which the linker binds to the compatibility symbol of that version; a weak reference the loader cannot resolve reads as null instead of
// stopping the program. Their addresses are read from a table (never called unchecked).
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".weak reprotime_dlsym",
    ".weak reprotime_dlopen",
    ".weak reprotime_dlclose",
    ".symver reprotime_dlsym, dlsym@GLIBC_2.2.5",
    ".symver reprotime_dlopen, dlopen@GLIBC_2.2.5",
    ".symver reprotime_dlclose, dlclose@GLIBC_2.2.5",
    ".pushsection .data.rel.ro.reprotime_abi,\"aw\",@progbits",
    ".balign 8",
    ".globl reprotime_abi_table",
    ".hidden reprotime_abi_table",
    "reprotime_abi_table:",
    ".quad reprotime_dlsym",
    ".quad reprotime_dlopen",
    ".quad reprotime_dlclose",
    ".popsection",
);
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".weak reprotime_dlsym",
    ".weak reprotime_dlopen",
    ".weak reprotime_dlclose",
    ".symver reprotime_dlsym, dlsym@GLIBC_2.17",
    ".symver reprotime_dlopen, dlopen@GLIBC_2.17",
    ".symver reprotime_dlclose, dlclose@GLIBC_2.17",
    ".pushsection .data.rel.ro.reprotime_abi,\"aw\",%progbits",
    ".balign 8",
    ".globl reprotime_abi_table",
    ".hidden reprotime_abi_table",
    "reprotime_abi_table:",
    ".quad reprotime_dlsym",
    ".quad reprotime_dlopen",
    ".quad reprotime_dlclose",
    ".popsection",
);

extern "C" {
    /// `dlsym`, `dlopen`, `dlclose`: each null where the loader found none.
    static reprotime_abi_table: [*mut c_void; 3];
}

type Dlsym = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
type Dlopen = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
type Dlclose = unsafe extern "C" fn(*mut c_void) -> c_int;
/// Entry `i` of the table.
fn entry(i: usize) -> *mut c_void {
    // SAFETY: the table is three pointers, written by the loader's relocations before any
    // code of the library runs and never after; read volatile so that no address of a weak
    // symbol is assumed non-null.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(reprotime_abi_table[i])) }
}

/// dlsym(3): libc's (glibc 2.34 on, or an older one's libdl when the program loaded it);
/// else, for `RTLD_NEXT` and `RTLD_DEFAULT`, the symbol looked up in the loaded objects'
/// own tables ([`super::lookup`]); null when not found.
///
/// # Safety
/// As dlsym(3): `name` is NUL-terminated, `handle` a handle or `RTLD_NEXT`/`RTLD_DEFAULT`.
pub unsafe fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    let f = entry(0);
    if !f.is_null() {
        // SAFETY: dlsym of that version, with the caller's arguments.
        return unsafe { core::mem::transmute::<*mut c_void, Dlsym>(f)(handle, name) };
    }
    let next = if handle == libc::RTLD_NEXT {
        true
    } else if handle == libc::RTLD_DEFAULT {
        false
    } else {
        return core::ptr::null_mut();
    };
    // SAFETY: name is NUL-terminated (the caller's contract).
    unsafe { super::lookup::find(core::ffi::CStr::from_ptr(name).to_bytes(), next) }
}

/// dlopen(3), or null where the program has none (glibc before 2.34 without libdl).
///
/// # Safety
/// As dlopen(3).
pub unsafe fn dlopen(name: *const c_char, flags: c_int) -> *mut c_void {
    let f = entry(1);
    if f.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: dlopen of that version, with the caller's arguments.
    unsafe { core::mem::transmute::<*mut c_void, Dlopen>(f)(name, flags) }
}

/// dlclose(3) of a handle [`dlopen`] returned.
///
/// # Safety
/// As dlclose(3).
pub unsafe fn dlclose(handle: *mut c_void) -> c_int {
    let f = entry(2);
    if f.is_null() {
        return -1;
    }
    // SAFETY: dlclose of that version, with the caller's handle.
    unsafe { core::mem::transmute::<*mut c_void, Dlclose>(f)(handle) }
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
