//! The few facts the exec-time path (`vdso`) reads from a program file before it runs: is it
//! static, is it Go, is it linked against musl, where is Go's `runtime.cputicks`. The file is the workload's (it may be
//! crafted), and the reading happens in the supervisor, outside the sandbox's CPU and memory
//! limits, while the exec (and every other notification) waits: so the work per exec is
//! bounded. Every read goes through a [`Budget`] of bytes; every scan is linear
//! in what was read (no name is ever scanned for its NUL: names are compared over the wanted
//! name's length plus one); string and symbol tables are streamed in 1 MiB chunks, so the
//! supervisor never holds more than a few MiB per exec. A file that exhausts the budget reads
//! as "not Go" / "nothing to patch". The budget is in bytes, never in time: a classification
//! must not depend on how loaded the host is (that would make a run's clock differ).

use std::os::unix::fs::FileExt;

/// What one exec may cost the supervisor: bytes read from the program.
#[derive(Debug)]
pub(in crate::sandbox) struct Budget {
    left: usize,
    examined: usize,
}

impl Budget {
    /// Bytes one exec may read: headers (at most 8 MiB with 65535 of each), the section
    /// names (1 MiB) and, for a static Go program, its string and symbol tables (16 MiB each
    /// at most).
    pub(in crate::sandbox) const BYTES: usize = 48 << 20;

    /// The budget of one exec.
    pub(in crate::sandbox) fn per_exec() -> Budget {
        Budget::new(Budget::BYTES)
    }

    pub(in crate::sandbox) fn new(bytes: usize) -> Budget {
        Budget {
            left: bytes,
            examined: 0,
        }
    }

    /// Bytes read so far.
    pub(in crate::sandbox) fn examined(&self) -> usize {
        self.examined
    }

    /// Reads `len` bytes at `at`, if the file holds them and the budget allows.
    pub(super) fn read(&mut self, exe: &std::fs::File, at: usize, len: usize) -> Option<Vec<u8>> {
        if len > self.left {
            return None;
        }
        self.left -= len;
        self.examined += len;
        read_bounded(exe, at, len)
    }
}

/// Chunk size of the streamed tables.
const CHUNK: usize = 1 << 20;
/// Caps on a Go program's string and symbol tables (16 MiB of symbols: 699,050 symbols;
/// Go programs of hundreds of MiB have a few hundred thousand).
const STRTAB_MAX: usize = 16 << 20;
const SYMTAB_MAX: usize = 16 << 20;
/// At most this many places where the wanted name starts are remembered.
const MAX_HITS: usize = 64;

/// A little-endian unsigned field of `n` bytes at `at`, if `b` holds it.
pub(in crate::sandbox) fn le(b: &[u8], at: usize, n: usize) -> Option<usize> {
    let bytes = b.get(at..at.checked_add(n)?)?;
    Some(
        bytes
            .iter()
            .rev()
            .fold(0usize, |acc, x| acc << 8 | *x as usize),
    )
}

/// The NUL-terminated name at `at` in a string table, looked at over `max + 1` bytes at most
/// (empty if out of range): a name longer than `max` comes back longer than `max` (and so
/// equals no wanted name of at most `max` bytes) without the rest of the table being scanned.
pub(in crate::sandbox) fn name_at(table: &[u8], at: usize, max: usize) -> &[u8] {
    let name = table.get(at..).unwrap_or(&[]);
    let name = &name[..name.len().min(max.saturating_add(1))];
    &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())]
}

/// Reads `len` bytes at `at` from a program file, if the file holds them: never more than
/// the file's size and never more than 64 MiB (a crafted header must not make the supervisor
/// allocate or read gigabytes). A read of at most 64 KiB (every header of an ordinary
/// program) is not checked against the size first: a short file fails the read itself.
pub(in crate::sandbox) fn read_bounded(
    exe: &std::fs::File,
    at: usize,
    len: usize,
) -> Option<Vec<u8>> {
    const LIMIT: usize = 64 << 20;
    const UNCHECKED: usize = 64 << 10;
    let end = at.checked_add(len)?;
    if len > LIMIT || (len > UNCHECKED && end > exe.metadata().ok()?.len() as usize) {
        return None;
    }
    let mut buf = vec![0u8; len];
    exe.read_exact_at(&mut buf, at as u64).ok().map(|_| buf)
}

/// What kind of program an ELF file is, as far as the exec-time path cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sandbox) struct ProgramKind {
    /// Linked statically (no PT_INTERP).
    pub(crate) is_static: bool,
    /// Built by Go (its runtime reads the clock and AT_RANDOM itself).
    pub(crate) is_go: bool,
    /// Linked dynamically against musl (its interpreter is an `ld-musl-*` loader), which
    /// reads no `/etc/ld.so.preload`: the preload library is never loaded into it.
    pub(crate) is_musl: bool,
}

impl ProgramKind {
    /// Reads the clock without the preload library: without libc's (interposable) functions,
    /// or through a libc whose loader does not load the library.
    pub(crate) fn bypasses_libc(self) -> bool {
        self.is_static || self.is_go || self.is_musl
    }
}

/// The longest interpreter path read (Linux's own limit for it is a page).
const INTERP_MAX: usize = 256;

/// Whether the program interpreter named by the `PT_INTERP` header `ph` is musl's loader
/// (`/lib/ld-musl-x86_64.so.1`, or any path whose file name starts `ld-musl-`).
fn musl_interpreter(exe: &std::fs::File, ph: &[u8], budget: &mut Budget) -> Option<bool> {
    let (at, len) = (le(ph, 8, 8)?, le(ph, 32, 8)?);
    let path = budget.read(exe, at, len.min(INTERP_MAX))?;
    let path = &path[..path.iter().position(|b| *b == 0).unwrap_or(path.len())];
    let name = path.rsplit(|b| *b == b'/').next().unwrap_or(path);
    Some(name.starts_with(b"ld-musl-"))
}

/// The ELF header, if `ehdr` is one of a little-endian ELF64 file.
fn elf64(ehdr: &[u8]) -> Option<&[u8]> {
    (ehdr.get(..4) == Some(b"\x7fELF".as_slice()) && ehdr.get(4..6) == Some([2, 1].as_slice()))
        .then_some(ehdr)
}

/// The kind of an ELF64 little-endian program; `None` for anything else, a malformed file or
/// one that exhausts `budget`.
pub(in crate::sandbox) fn program_kind(
    exe: &std::fs::File,
    budget: &mut Budget,
) -> Option<ProgramKind> {
    let ehdr = budget.read(exe, 0, 64)?;
    let ehdr = elf64(&ehdr)?;
    let (phoff, phentsize, phnum) = (le(ehdr, 32, 8)?, le(ehdr, 54, 2)?, le(ehdr, 56, 2)?);
    if phentsize != 56 {
        return None;
    }
    let phdrs = budget.read(exe, phoff, phentsize * phnum)?;
    const PT_INTERP: usize = 3;
    let interp = phdrs
        .chunks(phentsize)
        .find(|ph| le(ph, 0, 4) == Some(PT_INTERP));
    let is_static = interp.is_none();
    let is_musl = interp.is_some_and(|ph| musl_interpreter(exe, ph, budget).unwrap_or(false));
    let (shoff, shentsize, shnum, shstrndx) = (
        le(ehdr, 40, 8)?,
        le(ehdr, 58, 2)?,
        le(ehdr, 60, 2)?,
        le(ehdr, 62, 2)?,
    );
    let mut is_go = || {
        if shentsize != 64 || shnum == 0 || shstrndx >= shnum {
            return None;
        }
        let shdrs = budget.read(exe, shoff, shentsize * shnum)?;
        let strtab = &shdrs[shstrndx * shentsize..];
        let names = budget.read(exe, le(strtab, 24, 8)?, le(strtab, 32, 8)?.min(1 << 20))?;
        const GO: [&[u8]; 2] = [b".note.go.buildid", b".go.buildinfo"];
        Some(shdrs.chunks(shentsize).any(|sh| {
            let name = name_at(&names, le(sh, 0, 4).unwrap_or(usize::MAX), GO[0].len());
            GO.contains(&name)
        }))
    };
    let is_go = is_go().unwrap_or(false);
    Some(ProgramKind {
        is_static,
        is_go,
        is_musl,
    })
}

/// Where a Go program's `runtime.cputicks` (its ABI0 assembly body) lies, to be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sandbox) struct GoTicks {
    pub(crate) vaddr: u64,
    /// The program's own entry address when it is position-independent (then the load
    /// base is AT_ENTRY minus this).
    pub(crate) pie_entry: Option<u64>,
}

/// The symbol whose body is replaced, and the smallest body the replacement fits in.
const CPUTICKS: &[u8] = b"runtime.cputicks.abi0";

/// Finds `runtime.cputicks.abi0` in the program's symbol table (absent in stripped builds:
/// then `gopclntab` looks in Go's function table), if its body holds at least `min_size`
/// bytes. Linear: the places where the name starts in
/// the string table are found first (one pass), then the symbol naming one of them (another).
pub(in crate::sandbox) fn go_cputicks(
    exe: &std::fs::File,
    min_size: usize,
    budget: &mut Budget,
) -> Option<GoTicks> {
    let ehdr = budget.read(exe, 0, 64)?;
    let ehdr = elf64(&ehdr)?;
    const ET_DYN: usize = 3;
    let (e_type, entry) = (le(ehdr, 16, 2)?, le(ehdr, 24, 8)? as u64);
    let (shoff, shentsize, shnum) = (le(ehdr, 40, 8)?, le(ehdr, 58, 2)?, le(ehdr, 60, 2)?);
    if shentsize != 64 || shnum == 0 {
        return None;
    }
    let shdrs = budget.read(exe, shoff, shentsize.checked_mul(shnum)?)?;
    const SHT_SYMTAB: usize = 2;
    let symtab = shdrs
        .chunks(shentsize)
        .find(|sh| le(sh, 4, 4) == Some(SHT_SYMTAB))?;
    let strtab = shdrs.get(le(symtab, 40, 4)?.checked_mul(shentsize)?..)?;
    let names = (le(strtab, 24, 8)?, le(strtab, 32, 8)?);
    let hits = find_name(exe, names, CPUTICKS, budget)?;
    if hits.is_empty() {
        return None;
    }
    let syms = (
        le(symtab, 24, 8)?,
        le(symtab, 32, 8)?.min(SYMTAB_MAX) / 24 * 24,
    );
    let sym = find_symbol(exe, syms, &hits, budget)?;
    let (value, size) = (le(&sym, 8, 8)? as u64, le(&sym, 16, 8)?);
    (size >= min_size && value != 0).then_some(GoTicks {
        vaddr: value,
        pie_entry: (e_type == ET_DYN).then_some(entry),
    })
}

/// What the exec-time path reads from a program, for the fuzz harnesses
/// (`reprorun::fuzzing::elf`; not an API).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// [`program_kind`]: (is static, is Go), or `None`.
    pub kind: Option<(bool, bool)>,
    /// [`go_cputicks`]: (address, entry of a position-independent program), or `None`.
    pub ticks: Option<(u64, Option<u64>)>,
    /// Bytes each of the two read.
    pub examined: (usize, usize),
}

/// [`program_kind`] and [`go_cputicks`] (for a body of `min_size` bytes) of a program file
/// holding `bytes` (a memfd), each with a budget of `budget` bytes.
#[doc(hidden)]
pub fn facts(bytes: &[u8], min_size: usize, budget: usize) -> std::io::Result<Facts> {
    let fd = nix::sys::memfd::memfd_create(c"elf", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
    let file = std::fs::File::from(fd);
    file.write_all_at(bytes, 0)?;
    let (mut a, mut b) = (Budget::new(budget), Budget::new(budget));
    let kind = program_kind(&file, &mut a).map(|k| (k.is_static, k.is_go));
    let ticks = go_cputicks(&file, min_size, &mut b).map(|t| (t.vaddr, t.pie_entry));
    Ok(Facts {
        kind,
        ticks,
        examined: (a.examined(), b.examined()),
    })
}

/// The offsets in the string table `(at, len)` where the name `wanted` starts (followed by
/// its NUL, or by the table's end), at most [`MAX_HITS`]; streamed in chunks, one pass.
pub(super) fn find_name(
    exe: &std::fs::File,
    (at, len): (usize, usize),
    wanted: &[u8],
    budget: &mut Budget,
) -> Option<Vec<usize>> {
    let whole = len <= STRTAB_MAX;
    let len = len.min(STRTAB_MAX);
    let mut needle = wanted.to_vec();
    needle.push(0);
    let mut hits = Vec::new();
    let mut off = 0;
    while off < len && hits.len() < MAX_HITS {
        // Each chunk overlaps the next by the name's length, so a name (and its NUL) that
        // starts in this chunk is seen whole.
        let n = (CHUNK + wanted.len()).min(len - off);
        let buf = budget.read(exe, at.checked_add(off)?, n)?;
        let starts = CHUNK.min(n);
        let mut from = 0;
        while let Some(p) = find(&buf[from..], &needle).map(|p| p + from) {
            if p >= starts || hits.len() >= MAX_HITS {
                break;
            }
            hits.push(off + p);
            from = p + 1;
        }
        // The last name of a table without its final NUL ends at the table's end.
        let last = n.checked_sub(wanted.len());
        if let Some(p) = last.filter(|p| whole && off + n == len && *p < starts) {
            if buf[p..] == *wanted && hits.len() < MAX_HITS {
                hits.push(off + p);
            }
        }
        off += CHUNK;
    }
    Some(hits)
}

/// The first 24-byte symbol of the table `(at, len)` whose name offset is one of `names`
/// (ascending, as [`find_name`] returns them).
fn find_symbol(
    exe: &std::fs::File,
    (at, len): (usize, usize),
    names: &[usize],
    budget: &mut Budget,
) -> Option<Vec<u8>> {
    let per = CHUNK / 24 * 24;
    let mut off = 0;
    while off < len {
        let n = per.min(len - off);
        let buf = budget.read(exe, at.checked_add(off)?, n)?;
        let found = buf.chunks_exact(24).find(|sym| {
            let name = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]) as usize;
            names.binary_search(&name).is_ok()
        });
        if let Some(sym) = found {
            return Some(sym.to_vec());
        }
        off += n;
    }
    None
}

/// The first place `needle` occurs in `haystack` (glibc's memmem: linear, vectorised).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    // SAFETY: both pointers are valid for the lengths given (borrowed slices); memmem only
    // reads them, and the pointer it returns (if any) lies within `haystack`.
    let p = unsafe {
        libc::memmem(
            haystack.as_ptr().cast(),
            haystack.len(),
            needle.as_ptr().cast(),
            needle.len(),
        )
    };
    (!p.is_null()).then(|| p as usize - haystack.as_ptr() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A budget no test file exhausts (the tests assert on bytes, never on time).
    fn unbounded() -> Budget {
        Budget::new(usize::MAX)
    }

    fn bypasses_libc(exe: &std::fs::File) -> bool {
        program_kind(exe, &mut unbounded()).is_some_and(ProgramKind::bypasses_libc)
    }

    /// A static ELF64 file with a `.note.go.buildid` section, the string table `strtab` and
    /// the symbols `(name offset, value, size)`.
    fn crafted(strtab: &[u8], syms: &[(u32, u64, u64)]) -> tempfile::NamedTempFile {
        let shstr = b"\0.shstrtab\0.note.go.buildid\0.symtab\0.strtab\0";
        let name = |n: &[u8]| shstr.windows(n.len()).position(|w| w == n).unwrap() as u32;
        let (shstr_at, sym_at) = (64usize, 128usize);
        let str_at = sym_at + 24 * syms.len();
        let sh_at = (str_at + strtab.len() + 7) & !7;
        let mut f = vec![0u8; sh_at + 5 * 64];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        f[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        f[40..48].copy_from_slice(&(sh_at as u64).to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes()); // no program headers: static
        f[58..60].copy_from_slice(&64u16.to_le_bytes());
        f[60..62].copy_from_slice(&5u16.to_le_bytes());
        f[62..64].copy_from_slice(&1u16.to_le_bytes());
        f[shstr_at..shstr_at + shstr.len()].copy_from_slice(shstr);
        for (i, (n, value, size)) in syms.iter().enumerate() {
            let at = sym_at + 24 * i;
            f[at..at + 4].copy_from_slice(&n.to_le_bytes());
            f[at + 8..at + 16].copy_from_slice(&value.to_le_bytes());
            f[at + 16..at + 24].copy_from_slice(&size.to_le_bytes());
        }
        f[str_at..str_at + strtab.len()].copy_from_slice(strtab);
        let sections = [
            (name(b".shstrtab"), 3, shstr_at, shstr.len(), 0),
            (name(b".note.go.buildid"), 7, 0, 0, 0),
            (name(b".symtab"), 2, sym_at, 24 * syms.len(), 4),
            (name(b".strtab"), 3, str_at, strtab.len(), 0),
        ];
        for (i, (n, kind, off, size, link)) in sections.iter().enumerate() {
            let at = sh_at + 64 * (i + 1);
            f[at..at + 4].copy_from_slice(&n.to_le_bytes());
            f[at + 4..at + 8].copy_from_slice(&(*kind as u32).to_le_bytes());
            f[at + 24..at + 32].copy_from_slice(&(*off as u64).to_le_bytes());
            f[at + 32..at + 40].copy_from_slice(&(*size as u64).to_le_bytes());
            f[at + 40..at + 44].copy_from_slice(&(*link as u32).to_le_bytes());
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), f).unwrap();
        file
    }

    fn open(f: &tempfile::NamedTempFile) -> std::fs::File {
        std::fs::File::open(f.path()).unwrap()
    }

    #[test]
    fn classifies_static_dynamic_and_non_elf_programs() {
        let dynamic = std::fs::File::open("/bin/sh").unwrap();
        assert!(!bypasses_libc(&dynamic));
        // The test binary itself is linked statically (crt-static), as reprorun is.
        let me = std::fs::File::open("/proc/self/exe").unwrap();
        assert!(bypasses_libc(&me));
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), "#!/bin/sh\n").unwrap();
        assert!(!bypasses_libc(&std::fs::File::open(script.path()).unwrap()));
    }

    /// `/bin/sh` with its interpreter path rewritten to `interp` (no longer than glibc's).
    fn sh_with_interpreter(interp: &[u8]) -> tempfile::NamedTempFile {
        let mut sh = std::fs::read("/bin/sh").unwrap();
        let (phoff, phnum) = (le(&sh, 32, 8).unwrap(), le(&sh, 56, 2).unwrap());
        let ph = (0..phnum)
            .map(|i| phoff + 56 * i)
            .find(|at| le(&sh, *at, 4) == Some(3))
            .expect("/bin/sh is dynamic");
        let (at, len) = (le(&sh, ph + 8, 8).unwrap(), le(&sh, ph + 32, 8).unwrap());
        assert!(interp.len() <= len);
        sh[at..at + len].fill(0);
        sh[at..at + interp.len()].copy_from_slice(interp);
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), sh).unwrap();
        f
    }

    /// A program linked dynamically against musl never loads the preload library (musl's
    /// loader reads no /etc/ld.so.preload): the exec-time path patches it as a static one.
    #[test]
    fn musl_dynamic_programs_bypass_the_preload() {
        let kind = |interp: &[u8]| {
            program_kind(&open(&sh_with_interpreter(interp)), &mut unbounded()).unwrap()
        };
        let musl = kind(b"/lib/ld-musl-x86_64.so.1");
        assert!(musl.is_musl && !musl.is_static && musl.bypasses_libc());
        assert!(kind(b"/lib/ld-musl-aarch64.so.1").is_musl);
        let glibc = kind(b"/lib64/ld-linux-x86-64.so.2");
        assert!(!glibc.is_musl && !glibc.bypasses_libc());
        // Only the file name counts; a directory named so does not.
        assert!(!kind(b"/ld-musl-/ld.so").is_musl);
        // An interpreter header pointing past the file: not musl, no panic.
        let f = sh_with_interpreter(b"/lib/ld-musl-x86_64.so.1");
        let mut bytes = std::fs::read(f.path()).unwrap();
        let phoff = le(&bytes, 32, 8).unwrap();
        let ph = (0..le(&bytes, 56, 2).unwrap())
            .map(|i| phoff + 56 * i)
            .find(|at| le(&bytes, *at, 4) == Some(3))
            .unwrap();
        bytes[ph + 8..ph + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(f.path(), bytes).unwrap();
        let kind = program_kind(&open(&f), &mut unbounded()).unwrap();
        assert!(!kind.is_musl && !kind.is_static);
    }

    #[test]
    fn malformed_programs_read_as_nothing_to_patch() {
        let sh = std::fs::read("/bin/sh").unwrap();
        let write = |bytes: &[u8]| {
            let f = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(f.path(), bytes).unwrap();
            f
        };
        // Cut short after the program headers: no section table to read.
        let cut = write(&sh[..4096]);
        assert!(!bypasses_libc(&std::fs::File::open(cut.path()).unwrap()));
        // Section headers pointing anywhere (every field 0xff): no panic, no match.
        let mut bad = sh.clone();
        let shoff = u64::from_le_bytes(bad[40..48].try_into().unwrap()) as usize;
        bad[shoff..].fill(0xff);
        let bad = write(&bad);
        assert!(!bypasses_libc(&std::fs::File::open(bad.path()).unwrap()));
        assert_eq!(le(&[1, 2, 3], 1, 2), Some(0x0302));
        assert_eq!(le(&[1, 2, 3], 2, 2), None);
        assert_eq!(name_at(b"ab\0cd", 3, 8), b"cd");
        assert_eq!(name_at(b"ab", 9, 8), b"");
    }

    #[test]
    fn crafted_headers_cannot_make_the_supervisor_read_much() {
        // A 64-byte ELF header claiming 65535 program headers of 56 bytes and 65535 section
        // headers: nothing is read past the (tiny) file, and nothing panics.
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
        h[40..48].copy_from_slice(&64u64.to_le_bytes()); // shoff
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        h[58..60].copy_from_slice(&64u16.to_le_bytes());
        h[60..62].copy_from_slice(&u16::MAX.to_le_bytes());
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), &h).unwrap();
        let file = std::fs::File::open(f.path()).unwrap();
        assert_eq!(program_kind(&file, &mut unbounded()), None);
        assert_eq!(go_cputicks(&file, 13, &mut unbounded()), None);
        assert!(read_bounded(&file, 0, 65).is_none());
        assert!(read_bounded(&file, usize::MAX, 2).is_none());
        assert_eq!(read_bounded(&file, 0, 4).unwrap(), b"\x7fELF");
    }

    #[test]
    fn names_are_compared_over_the_wanted_length_only() {
        let table = [b'A'; 4096];
        assert_eq!(
            name_at(&table, 10, 20).len(),
            21,
            "scanned over 21 bytes, no more"
        );
        assert_eq!(name_at(b"\0time\0", 1, 4), b"time");
        assert_eq!(name_at(b"\0timex\0", 1, 4), &b"timex"[..5]);
        assert_ne!(name_at(b"\0timex\0", 1, 4), b"time");
        assert_eq!(
            name_at(b"\0time", 1, 4),
            b"time",
            "the table's end ends a name"
        );
    }

    /// The crafted program of the issue: an 8 MiB string table without a NUL and 200,000
    /// symbols, each naming a place in it. Every byte is read once: no name is scanned.
    #[test]
    fn a_string_table_without_nul_is_read_once() {
        let strtab = vec![b'A'; 8 << 20];
        let syms: Vec<_> = (0..200_000u32)
            .map(|i| (i * 41 % (8 << 20), 0x40_1000, 64))
            .collect();
        let f = crafted(&strtab, &syms);
        let mut budget = unbounded();
        let kind = program_kind(&open(&f), &mut budget).unwrap();
        assert!(kind.is_static && kind.is_go);
        assert_eq!(go_cputicks(&open(&f), 13, &mut budget), None);
        // Headers, the section names, the string table once (plus the chunks' overlaps).
        let strtab_reads = (8 << 20) + 8 * CPUTICKS.len();
        assert!(
            budget.examined() < strtab_reads + 4096,
            "{}",
            budget.examined()
        );
        // A budget smaller than the table: not Go's `cputicks` (nothing to patch).
        let mut small = Budget::new(1 << 20);
        assert_eq!(go_cputicks(&open(&f), 13, &mut small), None);
        assert!(small.examined() <= 1 << 20);
    }

    /// The symbol is found wherever its name lies: across a chunk boundary, at the table's
    /// end without a NUL, as the tail of a longer name; never as a prefix of one.
    #[test]
    fn cputicks_is_found_by_exact_name() {
        let at = CHUNK - 5;
        let mut strtab = vec![b'A'; 3 << 20];
        strtab[at - 1] = 0;
        strtab[at..at + CPUTICKS.len()].copy_from_slice(CPUTICKS);
        strtab[at + CPUTICKS.len()] = 0;
        let tail = strtab.len() - CPUTICKS.len();
        strtab[tail..].copy_from_slice(CPUTICKS);
        let prefix = 2 << 20;
        strtab[prefix..prefix + CPUTICKS.len()].copy_from_slice(CPUTICKS); // "...abi0AAAA"
        let find = |syms: &[(u32, u64, u64)]| {
            go_cputicks(&open(&crafted(&strtab, syms)), 13, &mut unbounded())
        };
        let ticks = |vaddr| {
            Some(GoTicks {
                vaddr,
                pie_entry: None,
            })
        };
        assert_eq!(
            find(&[(7, 1, 64), (at as u32, 0x40_2000, 64)]),
            ticks(0x40_2000)
        );
        assert_eq!(find(&[(tail as u32, 0x40_3000, 64)]), ticks(0x40_3000));
        assert_eq!(find(&[(prefix as u32, 0x40_4000, 64)]), None);
        // "...Aruntime.cputicks.abi0": the name starting 1 byte later is the one.
        assert_eq!(find(&[(tail as u32 - 1, 0x40_5000, 64)]), None);
        // Too small a body to hold the replacement, or no address: nothing to patch.
        assert_eq!(find(&[(at as u32, 0x40_2000, 8)]), None);
        assert_eq!(find(&[(at as u32, 0, 64)]), None);
    }

    /// 65535 section headers and a section-name table of 1 MiB without a NUL: linear too.
    #[test]
    fn many_sections_with_endless_names_are_read_once() {
        let shnum = 65535usize;
        let mut f = vec![0u8; 64 + shnum * 64 + (1 << 20)];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        f[40..48].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[58..60].copy_from_slice(&64u16.to_le_bytes());
        f[60..62].copy_from_slice(&(shnum as u16).to_le_bytes());
        let names_at = 64 + shnum * 64;
        for i in 0..shnum {
            let at = 64 + i * 64;
            f[at..at + 4].copy_from_slice(&((i * 16) as u32).to_le_bytes());
            f[at + 24..at + 32].copy_from_slice(&(names_at as u64).to_le_bytes());
            f[at + 32..at + 40].copy_from_slice(&(1u64 << 20).to_le_bytes());
        }
        f[names_at..].fill(b'.');
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), f).unwrap();
        let mut budget = unbounded();
        let kind = program_kind(&open(&file), &mut budget).unwrap();
        assert!(!kind.is_go);
        assert_eq!(budget.examined(), 64 + shnum * 64 + (1 << 20));
    }

    #[test]
    fn an_exhausted_budget_reads_nothing_more() {
        let me = std::fs::File::open("/proc/self/exe").unwrap();
        let mut spent = Budget::new(64);
        assert!(
            program_kind(&me, &mut spent).is_none(),
            "no program headers left"
        );
    }

    #[test]
    fn find_is_memmem() {
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"ab", b"abc"), None);
        assert_eq!(find(b"abc", b""), None);
    }
}
