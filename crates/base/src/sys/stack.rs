//! A stack of its own for a child that shares its parent's memory (`CLONE_VM`): an anonymous
//! mapping with an inaccessible guard page at its low end, unmapped on drop.

use nix::errno::Errno;

/// The guard page's size (the smallest page size Linux uses).
const GUARD: usize = 4096;

/// An anonymous, private stack mapping of a fixed size, its lowest page inaccessible.
pub struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    /// Maps `len` bytes (rounded up to whole pages) plus a guard page. Pages are only backed
    /// once touched (`MAP_NORESERVE`).
    pub fn new(len: usize) -> Result<Stack, Errno> {
        let len = len.div_ceil(GUARD) * GUARD + GUARD;
        // SAFETY: an anonymous mapping at an address the kernel chooses; nothing is aliased.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let stack = Stack { base, len };
        // SAFETY: the first page of the mapping just made, which nothing uses.
        Errno::result(unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) })?;
        Ok(stack)
    }

    /// The usable part, above the guard page (a stack grows down from its end).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: [base + GUARD, base + len) is mapped readable and writable and owned by
        // this value for its life.
        unsafe {
            std::slice::from_raw_parts_mut(self.base.cast::<u8>().add(GUARD), self.len - GUARD)
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The permissions /proc/self/maps shows for the mapping starting at `addr`.
    fn perms_at(addr: usize) -> Option<String> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().find_map(|l| {
            let (range, rest) = l.split_once(' ')?;
            let start = usize::from_str_radix(range.split_once('-')?.0, 16).ok()?;
            (start == addr).then(|| rest[..4].to_string())
        })
    }

    #[test]
    fn a_stack_has_an_inaccessible_guard_page_below_a_writable_whole() {
        let mut stack = Stack::new(10_000).unwrap();
        let base = stack.base as usize;
        let usable = stack.as_mut_slice();
        // Rounded up to whole pages.
        assert_eq!(usable.len(), 12_288);
        assert_eq!(usable.as_ptr() as usize, base + GUARD);
        usable.fill(0xa5);
        assert!(usable.iter().all(|b| *b == 0xa5));
        assert_eq!(perms_at(base).as_deref(), Some("---p"));
        assert_eq!(perms_at(base + GUARD).as_deref(), Some("rw-p"));
    }
}
