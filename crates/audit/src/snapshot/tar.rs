//! A snapshot tree as a deterministic tar: entries sorted by path, every directory its own
//! entry (0755), files 0644 or 0755, symlinks as symlinks, submodules (gitlinks) as empty
//! directories, uid/gid 0, no user or group names, every mtime [`MTIME`]; no `.git`. The
//! sha256 of these bytes is the tree's id. (Not `git archive`: Debian's git 2.39 cannot fix
//! the mtimes.)

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

use sha2::{Digest, Sha256};

/// Every entry's mtime: reprorun's pinned date, 2024-01-01T00:00:00Z (after 1980, so zip
/// tools that build wheels from the tree accept it).
pub(crate) const MTIME: u64 = reprorun_runtime::determinism::date::DEFAULT_EPOCH as u64;

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File {
        exec: bool,
    },
    Symlink,
    /// A submodule: an empty directory.
    Gitlink,
}

/// One entry of `git ls-tree -r -z --full-tree`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) path: Vec<u8>,
    pub(crate) kind: Kind,
    pub(crate) oid: String,
}

/// Parses `<mode> SP <type> SP <oid> TAB <path> NUL` records; paths with a `.git`
/// component are left out.
pub(crate) fn parse_ls_tree(raw: &[u8]) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for rec in raw.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let bad = || {
            format!(
                "git ls-tree: unexpected record {:?}",
                String::from_utf8_lossy(rec)
            )
        };
        let tab = rec.iter().position(|b| *b == b'\t').ok_or_else(bad)?;
        let (meta, path) = (&rec[..tab], &rec[tab + 1..]);
        let meta = std::str::from_utf8(meta).map_err(|_| bad())?;
        let mut f = meta.split(' ');
        let (mode, _, oid) = (f.next(), f.next(), f.next().ok_or_else(bad)?);
        let kind = match mode {
            Some("100644") | Some("100664") => Kind::File { exec: false },
            Some("100755") => Kind::File { exec: true },
            Some("120000") => Kind::Symlink,
            Some("160000") => Kind::Gitlink,
            _ => return Err(bad()),
        };
        let hidden = path
            .split(|b| *b == b'/')
            .any(|c| c.eq_ignore_ascii_case(b".git"));
        if !hidden {
            out.push(Entry {
                path: path.to_vec(),
                kind,
                oid: oid.to_string(),
            });
        }
    }
    Ok(out)
}

/// A writer that hashes what passes through it.
pub(crate) struct Hashing<W> {
    pub(crate) inner: W,
    hasher: Sha256,
}

impl<W: Write> Hashing<W> {
    pub(crate) fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// The sha256 (hex) of everything written, and the inner writer.
    pub(crate) fn finish(self) -> (String, W) {
        (
            reprorun_runtime::image::digest::hex(&self.hasher.finalize()),
            self.inner,
        )
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

enum Item<'a> {
    Dir,
    Entry(&'a Entry),
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(MTIME);
    h.set_size(size);
    h
}

/// Writes the tar of `entries` to `out`; `content` gives a file's bytes or a symlink's
/// target. `seen` is told each file's path and bytes (the leak scan).
pub(crate) fn write_tar<W: Write>(
    entries: &[Entry],
    content: &mut dyn FnMut(&Entry) -> io::Result<Vec<u8>>,
    seen: &mut dyn FnMut(&[u8], &[u8]),
    out: W,
) -> io::Result<W> {
    let mut items: BTreeMap<Vec<u8>, Item> = BTreeMap::new();
    for e in entries {
        for (i, b) in e.path.iter().enumerate() {
            if *b == b'/' {
                items.insert(e.path[..i].to_vec(), Item::Dir);
            }
        }
        let item = match e.kind {
            Kind::Gitlink => Item::Dir,
            _ => Item::Entry(e),
        };
        items.insert(e.path.clone(), item);
    }
    let mut tar = tar::Builder::new(out);
    for (path, item) in &items {
        let os = OsStr::from_bytes(path);
        match item {
            Item::Dir => {
                let mut dir = path.clone();
                dir.push(b'/');
                let mut h = header(tar::EntryType::Directory, 0o755, 0);
                tar.append_data(&mut h, OsStr::from_bytes(&dir), io::empty())?;
            }
            Item::Entry(e) => {
                let bytes = content(e)?;
                match e.kind {
                    Kind::Symlink => {
                        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
                        tar.append_link(&mut h, os, OsStr::from_bytes(&bytes))?;
                    }
                    Kind::File { exec } => {
                        seen(path, &bytes);
                        let mode = if exec { 0o755 } else { 0o644 };
                        let mut h = header(tar::EntryType::Regular, mode, bytes.len() as u64);
                        tar.append_data(&mut h, os, bytes.as_slice())?;
                    }
                    Kind::Gitlink => {}
                }
            }
        }
    }
    tar.into_inner()
}
