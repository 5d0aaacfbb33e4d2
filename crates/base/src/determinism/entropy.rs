//! Seeded entropy as data: the `--seed` / `--random` choice and the deterministic streams the
//! sandbox's random sources draw from (`getrandom(2)`, `/dev/urandom`, `/dev/random`,
//! AT_RANDOM). Each stream is SHA-256 in counter mode over (domain, seed, position), so a
//! stream depends only on the seed and on where in the sandbox it is read, never on the host.
//! Seeded bytes are for tests: anyone who knows the seed knows every byte.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use super::mix::{at_random, KEY_QUERY};

/// `--random`: where the sandbox's random bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum RandomMode {
    /// A deterministic stream derived from `--seed` (the default).
    Seeded,
    /// The kernel's real entropy (nothing intercepted).
    Real,
}

/// The per-process `getrandom(2)` stream's domain tag.
pub const DOMAIN_GETRANDOM: &str = "getrandom";
/// The `/dev/urandom` and `/dev/random` stream's domain tag (one stream for the sandbox).
pub const DOMAIN_DEVICE: &str = "urandom";

/// The lineage key of the `ordinal`-th process (from 0) created by the process with key
/// `parent`: what its streams are keyed by, so that they do not depend on pids, which
/// threads consume in numbers that vary with timing.
pub fn child_key(parent: u64, ordinal: u64) -> u64 {
    // "LINEAGE" as a domain tag.
    super::mix::splitmix64(super::mix::splitmix64(parent ^ 0x4c49_4e45_4147_4500) ^ ordinal)
}

/// One deterministic byte stream.
#[derive(Debug, Clone)]
pub struct Stream {
    prefix: Vec<u8>,
    block: u64,
    buf: [u8; 32],
    used: usize,
}

impl Stream {
    /// The stream `domain` of `seed` at position `id` (e.g. a process's id in the sandbox).
    pub fn new(seed: u64, domain: &str, id: u64) -> Stream {
        let mut prefix = Vec::with_capacity(domain.len() + 17);
        prefix.extend_from_slice(domain.as_bytes());
        prefix.push(0);
        prefix.extend_from_slice(&seed.to_le_bytes());
        prefix.extend_from_slice(&id.to_le_bytes());
        Stream {
            prefix,
            block: 0,
            buf: [0; 32],
            used: 32,
        }
    }

    /// The next `out.len()` bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut at = 0;
        while at < out.len() {
            if self.used == self.buf.len() {
                let mut h = Sha256::new();
                h.update(&self.prefix);
                h.update(self.block.to_le_bytes());
                self.buf = h.finalize().into();
                self.block += 1;
                self.used = 0;
            }
            let n = (out.len() - at).min(self.buf.len() - self.used);
            out[at..at + n].copy_from_slice(&self.buf[self.used..self.used + n]);
            self.used += n;
            at += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(mut s: Stream, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        s.fill(&mut v);
        v
    }

    #[test]
    fn streams_repeat_and_differ_by_seed_domain_and_position() {
        let a = take(Stream::new(0, DOMAIN_GETRANDOM, 2), 100);
        assert_eq!(a, take(Stream::new(0, DOMAIN_GETRANDOM, 2), 100));
        assert_ne!(a, take(Stream::new(1, DOMAIN_GETRANDOM, 2), 100));
        assert_ne!(a, take(Stream::new(0, DOMAIN_GETRANDOM, 3), 100));
        assert_ne!(a, take(Stream::new(0, DOMAIN_DEVICE, 2), 100));
        // The first block is SHA-256 of the prefix and counter 0.
        let mut h = Sha256::new();
        h.update(b"getrandom\0");
        h.update(0u64.to_le_bytes());
        h.update(2u64.to_le_bytes());
        h.update(0u64.to_le_bytes());
        assert_eq!(a[..32], h.finalize()[..]);
    }

    #[test]
    fn reads_in_pieces_equal_one_read() {
        let whole = take(Stream::new(7, DOMAIN_DEVICE, 0), 200);
        let mut s = Stream::new(7, DOMAIN_DEVICE, 0);
        let mut pieces = Vec::new();
        for n in [1, 31, 32, 33, 0, 103] {
            let mut b = vec![0; n];
            s.fill(&mut b);
            pieces.extend(b);
        }
        assert_eq!(pieces, whole);
    }

    #[test]
    fn child_keys_differ_by_parent_and_ordinal() {
        let k = child_key(2, 0);
        assert_eq!(k, child_key(2, 0));
        assert_ne!(k, child_key(2, 1));
        assert_ne!(k, child_key(3, 0));
        assert_ne!(child_key(k, 0), k);
    }

    #[test]
    fn at_random_depends_on_seed_and_pid() {
        assert_eq!(at_random(0, 2), at_random(0, 2));
        assert_ne!(at_random(0, 2), at_random(0, 3));
        assert_ne!(at_random(0, 2), at_random(1, 2));
        assert_ne!(at_random(0, 2)[..8], at_random(0, 2)[8..]);
    }
}
