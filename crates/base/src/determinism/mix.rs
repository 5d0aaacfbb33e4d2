//! The AT_RANDOM bytes of a seeded sandbox. Shared word for word with the preload library
//! (src/reprotime includes this file), which writes them for dynamically linked programs,
//! while the supervisor writes them for static and Go programs at their exec: both sides must
//! compute the same bytes. Plain `core` code, no imports.

/// splitmix64's output function: a bijective mix of 64 bits.
pub const fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `getrandom(2)` flags with which the preload library asks the supervisor for its
/// process's lineage key (8 bytes; the kernel itself refuses these flags with EINVAL).
pub const KEY_QUERY: u32 = 0x5250_4b00;

/// The 16 bytes a program started by the process with lineage key `key` finds at its
/// auxiliary vector's AT_RANDOM under `seed` (a root process's key is its pid in the sandbox).
pub const fn at_random(seed: u64, key: u64) -> [u8; 16] {
    // "AT_RANDOM" as a domain tag, so these bytes are unrelated to the other streams.
    let base = splitmix64(seed ^ 0x4154_5f52_414e_444f) ^ key;
    let a = splitmix64(base).to_le_bytes();
    let b = splitmix64(base ^ 0xffff_ffff_0000_0000).to_le_bytes();
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < 8 {
        out[i] = a[i];
        out[i + 8] = b[i];
        i += 1;
    }
    out
}
