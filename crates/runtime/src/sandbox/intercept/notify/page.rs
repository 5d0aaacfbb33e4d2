//! The clock page as the server maps it (shared with the preload library in tick mode).

use super::*;
use crate::determinism::page;

/// The clock page, mapped shared.
pub(super) struct Page {
    pub(super) ptr: *mut u8,
}

// SAFETY: the mapping is process-wide shared memory accessed only through volatile reads and
// an atomic counter; it stays mapped for the Page's whole life.
unsafe impl Send for Page {}

/// Address of the tick-mode mapping, for the SIGBUS guard.
pub(super) static GUARDED: AtomicUsize = AtomicUsize::new(0);

/// In tick mode the page file is writable from inside, so the workload could truncate it and
/// make our next access fault. The guard replaces the mapping with a private zero page and
/// lets the access retry: only that sandbox's clock is affected, never the supervisor.
pub(super) extern "C" fn sigbus_guard(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
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
    pub(super) fn open(at: &PageAt, writable: bool) -> Result<Page, Errno> {
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

    pub(super) fn offset_ns(&self) -> i64 {
        // SAFETY: the offset field lies within the mapping and is 8-aligned (ClockPage).
        unsafe { std::ptr::read_volatile(self.ptr.add(page::AT_OFFSET) as *const i64) }
    }

    pub(super) fn next_tick(&self) -> u64 {
        // SAFETY: the ticks field is the page's 8-aligned AtomicU64 read counter (ClockPage),
        // shared with the preload library in the sandbox.
        let counter =
            unsafe { &*(self.ptr.add(page::AT_TICKS) as *const std::sync::atomic::AtomicU64) };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, PAGE_SIZE) };
    }
}
