//! The page injected into static and Go programs at exec: machine code for the vDSO's
//! realtime entry points (`asm/fakeclock.S`) and the slots holding the fake clock, so such a
//! program reads the sandbox's date in-process, with no system call.

/// Where the fake clock page is mapped in static and Go programs: a fixed address unused by
/// the usual layouts — below the mmap area (0x7f..), far above PIE programs and their heaps
/// (0x55..-0x56..). (The page makes no system call, so the filter needs no exception for it.)
pub(in crate::sandbox) const FAKE_PAGE: u64 = 0x6e5e_0000_0000;
pub(in crate::sandbox) const ENTRY_CLOCK_GETTIME: u64 = 0x000;
pub(in crate::sandbox) const ENTRY_GETTIMEOFDAY: u64 = 0x100;
pub(in crate::sandbox) const ENTRY_TIME: u64 = 0x200;
pub(in crate::sandbox) const SLOTS: usize = 0x800;
/// The slots: mode, offset (whole seconds), date, the vDSO's clock_gettime, offset
/// (nanoseconds beyond the seconds).
pub(in crate::sandbox) const SLOTS_LEN: usize = 40;

// Machine code of asm/fakeclock.S, assembled with GNU as (x86-64), one array per entry point.
pub(in crate::sandbox) const CODE_CLOCK_GETTIME: [u8; 122] = [
    0x83, 0xff, 0x00, 0x74, 0x10, 0x83, 0xff, 0x05, 0x74, 0x0b, 0x83, 0xff, 0x0b, 0x74, 0x06, 0xff,
    0x25, 0x03, 0x08, 0x00, 0x00, 0x48, 0x83, 0x3d, 0xe3, 0x07, 0x00, 0x00, 0x02, 0x74, 0x46, 0x56,
    0xff, 0x15, 0xf2, 0x07, 0x00, 0x00, 0x5e, 0x85, 0xc0, 0x75, 0x39, 0x48, 0x8b, 0x0e, 0x48, 0x8b,
    0x56, 0x08, 0x48, 0x03, 0x0d, 0xcf, 0x07, 0x00, 0x00, 0x48, 0x03, 0x15, 0xe0, 0x07, 0x00, 0x00,
    0x48, 0x81, 0xfa, 0x00, 0xca, 0x9a, 0x3b, 0x48, 0x8d, 0xba, 0x00, 0x36, 0x65, 0xc4, 0x48, 0x0f,
    0x4d, 0xd7, 0x0f, 0x9d, 0xc0, 0x0f, 0xb6, 0xc0, 0x48, 0x01, 0xc1, 0x48, 0x89, 0x0e, 0x48, 0x89,
    0x56, 0x08, 0x31, 0xc0, 0xc3, 0x48, 0x8b, 0x05, 0xa4, 0x07, 0x00, 0x00, 0x48, 0x89, 0x06, 0x48,
    0xc7, 0x46, 0x08, 0x00, 0x00, 0x00, 0x00, 0x31, 0xc0, 0xc3,
];
pub(in crate::sandbox) const CODE_GETTIMEOFDAY: [u8; 50] = [
    0x48, 0x85, 0xff, 0x74, 0x1e, 0x56, 0x48, 0x89, 0xfe, 0x31, 0xff, 0xe8, 0xf0, 0xfe, 0xff, 0xff,
    0x48, 0x8b, 0x46, 0x08, 0x31, 0xd2, 0xb9, 0xe8, 0x03, 0x00, 0x00, 0x48, 0xf7, 0xf1, 0x48, 0x89,
    0x46, 0x08, 0x5e, 0x48, 0x85, 0xf6, 0x74, 0x07, 0x48, 0xc7, 0x06, 0x00, 0x00, 0x00, 0x00, 0x31,
    0xc0, 0xc3,
];
pub(in crate::sandbox) const CODE_TIME: [u8; 33] = [
    0x57, 0x48, 0x83, 0xec, 0x10, 0x48, 0x89, 0xe6, 0x31, 0xff, 0xe8, 0xf1, 0xfd, 0xff, 0xff, 0x48,
    0x8b, 0x04, 0x24, 0x48, 0x83, 0xc4, 0x10, 0x5f, 0x48, 0x85, 0xff, 0x74, 0x03, 0x48, 0x89, 0x07,
    0xc3,
];

/// The fake clock a static or Go program gets in-process.
#[derive(Debug, Clone, Copy)]
pub(in crate::sandbox) enum FakeClock {
    /// Real time plus `offset_ns`.
    StartAt { offset_ns: i64 },
    /// Always `epoch` seconds.
    Frozen { epoch: i64 },
}

/// The page injected into the program: code at its entry points, the clock and the address
/// of the vDSO's own `clock_gettime` in the slots.
pub(in crate::sandbox) fn fake_page(clock: FakeClock, vdso_clock_gettime: u64) -> Vec<u8> {
    let mut page = vec![0u8; SLOTS + SLOTS_LEN];
    page[..CODE_CLOCK_GETTIME.len()].copy_from_slice(&CODE_CLOCK_GETTIME);
    let at = ENTRY_GETTIMEOFDAY as usize;
    page[at..at + CODE_GETTIMEOFDAY.len()].copy_from_slice(&CODE_GETTIMEOFDAY);
    let at = ENTRY_TIME as usize;
    page[at..at + CODE_TIME.len()].copy_from_slice(&CODE_TIME);
    let (mode, offset, epoch) = match clock {
        FakeClock::StartAt { offset_ns } => (1i64, offset_ns, 0i64),
        FakeClock::Frozen { epoch } => (2, 0, epoch),
    };
    // The offset as whole seconds (rounded down) and the nanoseconds beyond them (0..10^9):
    // the code adds each and carries once.
    const NS: i64 = 1_000_000_000;
    let slots = [
        mode,
        offset.div_euclid(NS),
        epoch,
        vdso_clock_gettime as i64,
        offset.rem_euclid(NS),
    ];
    for (i, v) in slots.iter().enumerate() {
        page[SLOTS + 8 * i..SLOTS + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_page_holds_code_and_clock_slots() {
        let page = fake_page(FakeClock::StartAt { offset_ns: -5 }, 0x1234);
        assert_eq!(
            &page[..3],
            &[0x83, 0xff, 0x00],
            "clock_gettime starts with cmp edi, 0"
        );
        assert_eq!(page[ENTRY_GETTIMEOFDAY as usize], 0x48);
        assert_eq!(page[ENTRY_TIME as usize], 0x57, "time starts with push rdi");
        assert_eq!(
            i64::from_le_bytes(page[SLOTS..SLOTS + 8].try_into().unwrap()),
            1
        );
        let slot = |page: &[u8], i: usize| {
            i64::from_le_bytes(page[SLOTS + 8 * i..SLOTS + 8 * i + 8].try_into().unwrap())
        };
        // -5 ns: one second back, and 999999995 ns forward.
        assert_eq!((slot(&page, 1), slot(&page, 4)), (-1, 999_999_995));
        assert_eq!(slot(&page, 3), 0x1234);
        let page = fake_page(
            FakeClock::StartAt {
                offset_ns: 3_000_000_007,
            },
            0,
        );
        assert_eq!((slot(&page, 1), slot(&page, 4)), (3, 7));
        let page = fake_page(FakeClock::Frozen { epoch: 77 }, 0);
        assert_eq!(
            i64::from_le_bytes(page[SLOTS..SLOTS + 8].try_into().unwrap()),
            2
        );
        assert_eq!(
            i64::from_le_bytes(page[SLOTS + 16..SLOTS + 24].try_into().unwrap()),
            77
        );
    }

    /// The embedded machine code is exactly what asm/fakeclock.S assembles to.
    #[test]
    fn embedded_code_matches_the_assembly_source() {
        let dir = tempfile::tempdir().unwrap();
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/sandbox/intercept/asm/fakeclock.S");
        let obj = dir.path().join("fc.o");
        let bin = dir.path().join("fc.bin");
        let ok = std::process::Command::new("as")
            .arg("-o")
            .arg(&obj)
            .arg(&src)
            .status();
        if !ok.is_ok_and(|s| s.success()) {
            crate::util::skip_test("fakeclock machine code", "GNU as not available (binutils)");
            return;
        }
        let copied = std::process::Command::new("objcopy")
            .args(["-O", "binary", "-j", ".text"])
            .arg(&obj)
            .arg(&bin)
            .status()
            .unwrap();
        assert!(copied.success());
        let bytes = std::fs::read(&bin).unwrap();
        let page = fake_page(FakeClock::StartAt { offset_ns: 0 }, 0);
        assert_eq!(&bytes[..SLOTS], &page[..SLOTS]);
    }
}
