//! Sorted directory listings: the notification server answers every `getdents64(2)` (and
//! legacy `getdents(2)`) of the workload with the directory's entries in byte order of their
//! names (`.` and `..` first), so a listing reads the same on every host and filesystem —
//! ext4's hash order, tmpfs's creation order and disorderfs's shuffles alike, for static
//! programs too.
//!
//! The caller's descriptor position is the index of the next entry: the server works on a
//! duplicate of the caller's descriptor (pidfd_getfd: the same open file description), reads
//! the whole directory from offset 0, and leaves the position at the index it has reached.
//! `rewinddir` (lseek to 0) starts again; `telldir`/`seekdir` see the same indexes as `d_off`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) ino: u64,
    pub(crate) kind: u8,
    pub(crate) name: Vec<u8>,
}

/// Parses a `getdents64` buffer (struct linux_dirent64 records); stops at a malformed record.
pub(crate) fn parse_dirent64(buf: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 19 <= buf.len() {
        let ino = u64::from_ne_bytes(buf[at..at + 8].try_into().unwrap_or([0; 8]));
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        if reclen < 20 || at + reclen > buf.len() {
            break;
        }
        let kind = buf[at + 18];
        let name = &buf[at + 19..at + reclen];
        let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
        out.push(Entry {
            ino,
            kind,
            name: name.to_vec(),
        });
        at += reclen;
    }
    out
}

/// The sandbox's order: `.`, `..`, then names by their bytes.
pub(crate) fn sort(entries: &mut [Entry]) {
    let rank = |n: &[u8]| match n {
        b"." => 0,
        b".." => 1,
        _ => 2,
    };
    entries.sort_by(|a, b| {
        rank(&a.name)
            .cmp(&rank(&b.name))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// Encodes entries from index `start` into at most `count` bytes, as `getdents64`
/// (`legacy`: as `getdents`). `d_off` is the index after each entry. Returns the bytes and
/// the index reached; `EINVAL` when not even the first entry fits (as the kernel does).
pub(crate) fn encode(
    entries: &[Entry],
    start: usize,
    count: usize,
    legacy: bool,
) -> Result<(Vec<u8>, usize), Errno> {
    let mut out = Vec::new();
    let mut index = start;
    for e in entries.iter().skip(start) {
        let fixed = if legacy { 18 } else { 19 };
        // Name, its NUL, and (legacy) the trailing d_type byte; rounded up to 8.
        let reclen = (fixed + e.name.len() + 1 + usize::from(legacy) + 7) & !7;
        if out.len() + reclen > count {
            break;
        }
        let off = (index + 1) as u64;
        let at = out.len();
        out.resize(at + reclen, 0);
        out[at..at + 8].copy_from_slice(&e.ino.to_ne_bytes());
        out[at + 8..at + 16].copy_from_slice(&off.to_ne_bytes());
        out[at + 16..at + 18].copy_from_slice(&(reclen as u16).to_ne_bytes());
        if legacy {
            out[at + 18..at + 18 + e.name.len()].copy_from_slice(&e.name);
            out[at + reclen - 1] = e.kind;
        } else {
            out[at + 18] = e.kind;
            out[at + 19..at + 19 + e.name.len()].copy_from_slice(&e.name);
        }
        index += 1;
    }
    if out.is_empty() && index < entries.len() {
        return Err(Errno::EINVAL);
    }
    Ok((out, index))
}

/// Reads every entry of the directory open at `fd` (from offset 0) and sorts them.
pub(crate) fn read_sorted(fd: &OwnedFd) -> Result<Vec<Entry>, Errno> {
    nix::unistd::lseek(fd.as_raw_fd(), 0, nix::unistd::Whence::SeekSet)?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut entries = Vec::new();
    loop {
        // SAFETY: getdents64 writes at most buf.len() bytes into the exclusively borrowed buf.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        let n = Errno::result(n)? as usize;
        if n == 0 {
            break;
        }
        entries.extend(parse_dirent64(&buf[..n.min(buf.len())]));
    }
    sort(&mut entries);
    Ok(entries)
}

/// Sorted listings kept between the calls of one listing, keyed by (thread, descriptor),
/// checked against the directory's identity. Bounded in bytes, as they live in the
/// supervisor (outside the sandbox's memory limit): at most [`Listings::BUDGET`] bytes in
/// all, the least recently used listing evicted first (it is read again if its reader comes
/// back), and at most [`Listings::MAX`] of them. A listing bigger than the whole budget is
/// not kept: it is read afresh at each call (still sorted, and its indexes still hold while
/// the directory is unchanged), so a program listing a huge directory stays correct and
/// pays in time, which the server's throttle charges to the sandbox.
#[derive(Default)]
pub(crate) struct Listings {
    map: HashMap<ListingKey, Cached>,
    /// Bytes held by `map`'s listings.
    bytes: usize,
    /// Use counter, for the least recently used.
    clock: u64,
}

struct Cached {
    dir: DirId,
    entries: Vec<Entry>,
    bytes: usize,
    used: u64,
}

/// (thread, descriptor) of a listing (another thread going on with it reads it afresh).
type ListingKey = (i32, i32);
/// (device, inode) of a directory.
type DirId = (u64, u64);

/// What a listing costs in memory: each entry, its name and the allocator's overhead.
pub(crate) fn footprint(entries: &[Entry]) -> usize {
    const PER_ENTRY: usize = std::mem::size_of::<Entry>() + 16;
    entries
        .iter()
        .map(|e| PER_ENTRY + e.name.len())
        .sum::<usize>()
}

impl Listings {
    /// At most this many listings (descriptors being listed) are kept.
    pub(crate) const MAX: usize = 256;
    /// Bytes of all kept listings together (about 200,000 entries of short names), which is
    /// also the largest listing kept.
    pub(crate) const BUDGET: usize = 16 << 20;

    /// The listing for `key`, read afresh at offset 0 (a new listing) or when not cached.
    pub(crate) fn get(
        &mut self,
        key: ListingKey,
        dir: DirId,
        fresh: bool,
        read: impl FnOnce() -> Result<Vec<Entry>, Errno>,
    ) -> Result<Cow<'_, [Entry]>, Errno> {
        self.clock += 1;
        let clock = self.clock;
        match self.map.get_mut(&key) {
            Some(c) if !fresh && c.dir == dir => c.used = clock,
            _ => {
                if let Some(old) = self.map.remove(&key) {
                    self.bytes = self.bytes.saturating_sub(old.bytes);
                }
                let entries = read()?;
                let bytes = footprint(&entries);
                if bytes > Self::BUDGET {
                    return Ok(Cow::Owned(entries));
                }
                self.make_room(bytes);
                self.bytes += bytes;
                let used = clock;
                self.map.insert(
                    key,
                    Cached {
                        dir,
                        entries,
                        bytes,
                        used,
                    },
                );
            }
        }
        self.map
            .get(&key)
            .map(|c| Cow::Borrowed(c.entries.as_slice()))
            .ok_or(Errno::ENOMEM)
    }

    /// Evicts the least recently used listings until one of `bytes` fits.
    fn make_room(&mut self, bytes: usize) {
        while !self.map.is_empty()
            && (self.bytes + bytes > Self::BUDGET || self.map.len() >= Self::MAX)
        {
            let oldest = self.map.iter().min_by_key(|(_, c)| c.used).map(|(k, _)| *k);
            if let Some(old) = oldest.and_then(|k| self.map.remove(&k)) {
                self.bytes = self.bytes.saturating_sub(old.bytes);
            }
        }
    }

    /// Bytes held by the kept listings.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            ino: name.len() as u64,
            kind: 8,
            name: name.as_bytes().to_vec(),
        }
    }

    #[test]
    fn dots_first_then_bytes() {
        let mut v: Vec<Entry> = ["b", "..", "B", "a", ".", ".hidden", "-x"]
            .iter()
            .map(|n| entry(n))
            .collect();
        sort(&mut v);
        let names: Vec<_> = v.iter().map(|e| String::from_utf8_lossy(&e.name)).collect();
        assert_eq!(names, [".", "..", "-x", ".hidden", "B", "a", "b"]);
    }

    #[test]
    fn encode_round_trips_and_pages() {
        let v: Vec<Entry> = ["a", "bb", "a-much-longer-name"]
            .iter()
            .map(|n| entry(n))
            .collect();
        let (all, end) = encode(&v, 0, 4096, false).unwrap();
        assert_eq!(end, 3);
        assert_eq!(parse_dirent64(&all), v);
        // d_off of each record is the index after it.
        assert_eq!(u64::from_ne_bytes(all[8..16].try_into().unwrap()), 1);
        // A buffer for exactly one record gets one, then the rest.
        let (one, next) = encode(&v, 0, 24, false).unwrap();
        assert_eq!((one.len(), next), (24, 1));
        let (rest, end) = encode(&v, next, 4096, false).unwrap();
        assert_eq!(end, 3);
        assert_eq!(parse_dirent64(&rest), v[1..]);
        // Too small for the first record: EINVAL; past the end: nothing (end of directory).
        assert_eq!(encode(&v, 0, 10, false), Err(Errno::EINVAL));
        assert_eq!(encode(&v, 3, 4096, false).unwrap(), (vec![], 3));
    }

    #[test]
    fn legacy_records_put_the_type_last() {
        let v = vec![entry("abc")];
        let (buf, _) = encode(&v, 0, 4096, true).unwrap();
        let reclen = u16::from_ne_bytes([buf[16], buf[17]]) as usize;
        assert_eq!(reclen, 24);
        assert_eq!(&buf[18..21], b"abc");
        assert_eq!(buf[21], 0);
        assert_eq!(buf[reclen - 1], 8);
    }

    #[test]
    fn malformed_buffers_stop_parsing() {
        let v = vec![entry("abc")];
        let (mut buf, _) = encode(&v, 0, 4096, false).unwrap();
        buf[16] = 200; // reclen past the end
        assert!(parse_dirent64(&buf).is_empty());
        assert!(parse_dirent64(&[0u8; 5]).is_empty());
    }

    #[test]
    fn listings_are_reread_when_fresh_or_changed() {
        let mut l = Listings::default();
        let reads = std::cell::Cell::new(0);
        let read = |n: &'static str| {
            let reads = &reads;
            move || {
                reads.set(reads.get() + 1);
                Ok(vec![entry(n)])
            }
        };
        assert_eq!(
            l.get((1, 3), (1, 1), true, read("a")).unwrap()[0].name,
            b"a"
        );
        assert_eq!(
            l.get((1, 3), (1, 1), false, read("b")).unwrap()[0].name,
            b"a"
        );
        assert_eq!(
            l.get((1, 3), (1, 2), false, read("c")).unwrap()[0].name,
            b"c"
        );
        assert_eq!(
            l.get((1, 3), (1, 2), true, read("d")).unwrap()[0].name,
            b"d"
        );
        assert_eq!(reads.get(), 3, "the cached listing served the second call");
    }

    /// A listing of `n` entries whose names are `len` bytes each.
    fn big(n: usize, len: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| Entry {
                ino: i as u64,
                kind: 8,
                name: vec![b'a' + (i % 26) as u8; len],
            })
            .collect()
    }

    #[test]
    fn listings_are_bounded_in_bytes_least_recently_used_first() {
        let mut l = Listings::default();
        let reads = std::cell::Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            Ok(big(1000, 2000)) // about 2 MiB
        };
        let one = footprint(&big(1000, 2000));
        for fd in 0..20 {
            l.get((1, fd), (1, 1), true, read).unwrap();
            assert!(l.held() <= Listings::BUDGET, "{} after {fd}", l.held());
        }
        assert_eq!(l.held(), Listings::BUDGET / one * one);
        assert_eq!(reads.get(), 20);
        // The most recent listing is kept, the first ones were evicted (read again).
        l.get((1, 19), (1, 1), false, read).unwrap();
        assert_eq!(reads.get(), 20);
        l.get((1, 0), (1, 1), false, read).unwrap();
        assert_eq!(reads.get(), 21);
        // Never more listings than MAX, however small.
        let mut l = Listings::default();
        for fd in 0..1000 {
            l.get((2, fd), (1, 1), true, || Ok(vec![entry("x")]))
                .unwrap();
        }
        assert_eq!(l.map.len(), Listings::MAX);
    }

    #[test]
    fn a_listing_over_the_budget_is_served_but_not_kept() {
        let mut l = Listings::default();
        l.get((1, 3), (1, 1), true, || Ok(vec![entry("small")]))
            .unwrap();
        let huge = big(5, 4 << 20);
        assert!(footprint(&huge) > Listings::BUDGET);
        let reads = std::cell::Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            Ok(huge.clone())
        };
        for _ in 0..2 {
            let got = l.get((1, 4), (1, 2), false, read).unwrap();
            assert_eq!(got.len(), 5);
            assert!(matches!(got, Cow::Owned(_)));
        }
        assert_eq!(reads.get(), 2, "read afresh at each call");
        assert_eq!(
            l.held(),
            footprint(&[entry("small")]),
            "the small one stays"
        );
    }
}
