//! The clock page: one type for its layout, shared by the runtime (which writes it), the
//! supervisor (which reads it) and the preload library `reprotime` (which maps it), through
//! `#[path]` in that `no_std` crate. Only `core` is used here.

use core::sync::atomic::AtomicU64;

/// `REPROTIM`, the page's first eight bytes.
pub const MAGIC: u64 = u64::from_le_bytes(*b"REPROTIM");
/// The layout version; bumped when a field moves.
pub const VERSION: u32 = 1;
/// The page is one page of memory.
pub const SIZE: usize = 4096;
/// `mode`: nothing faked (real time).
pub const MODE_REAL: u32 = 0;
/// `mode`: starts at the date and advances in real time.
pub const MODE_START_AT: u32 = 1;
/// `mode`: always the date.
pub const MODE_FROZEN: u32 = 2;
/// `mode`: every read advances by `step_ns`.
pub const MODE_TICK: u32 = 3;
/// `flags` bit: AT_RANDOM is seeded with `seed`.
pub const FLAG_SEEDED: u32 = 1;

/// The layout of the clock page (little-endian, at the start of a 4096-byte page).
#[repr(C)]
pub struct ClockPage {
    pub magic: u64,
    pub version: u32,
    pub mode: u32,
    /// fake = real + offset (start-at); also the shift applied to file timestamps.
    pub offset_ns: i64,
    /// The pinned date (frozen, tick).
    pub epoch_ns: i64,
    pub step_ns: i64,
    /// [`FLAG_SEEDED`].
    pub flags: u32,
    pub _pad: u32,
    pub seed: u64,
    pub _reserved: u64,
    /// Reads so far (tick), shared by every reader of the page.
    pub ticks: AtomicU64,
}

/// Byte offsets of the fields, for writers and readers of the raw page.
pub const AT_VERSION: usize = core::mem::offset_of!(ClockPage, version);
pub const AT_MODE: usize = core::mem::offset_of!(ClockPage, mode);
pub const AT_OFFSET: usize = core::mem::offset_of!(ClockPage, offset_ns);
pub const AT_EPOCH: usize = core::mem::offset_of!(ClockPage, epoch_ns);
pub const AT_STEP: usize = core::mem::offset_of!(ClockPage, step_ns);
pub const AT_FLAGS: usize = core::mem::offset_of!(ClockPage, flags);
pub const AT_SEED: usize = core::mem::offset_of!(ClockPage, seed);
pub const AT_TICKS: usize = core::mem::offset_of!(ClockPage, ticks);

// The layout every reader relies on: 8-aligned 64-bit fields, the counter at 64.
const _: () = assert!(AT_OFFSET == 16 && AT_SEED == 48 && AT_TICKS == 64);
const _: () = assert!(core::mem::size_of::<ClockPage>() <= SIZE);
