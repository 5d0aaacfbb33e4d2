//! A function's address in a Go program without its symbol table: from `.gopclntab`, the
//! table of function names and entry points every Go program keeps for its own stack traces
//! (`-ldflags=-s` strips `.symtab`, not this). `go test` links the test binary it runs with
//! `-s -w`, so that binary has no symbol table, and `runtime.cputicks` (see `vdso`) is found
//! here.
//!
//! Read by hand: no maintained crate reads this table (it is Go's internal format; Go's own
//! `debug/gosym` is the reference). Only the layouts of Go 1.16–1.17 (magic `0xfffffffa`) and
//! 1.18 onwards (`0xfffffff0`, `0xfffffff1`), 64-bit, are read: the `cputicks` patch matters
//! before Go 1.22 only, and older tables read as "not found". The file is the workload's, so
//! as in `elf` every read goes through the exec's [`Budget`], the function-name table is
//! streamed (one pass, no name scanned for its NUL) and the function table is read once, capped.

use super::elf::{find_name, le, name_at, Budget, GoTicks};

/// Caps on the function-name table and on the function table with its records (Go
/// programs of hundreds of MiB have tables of a few tens of MiB; past the cap: not found).
const NAMES_MAX: usize = 16 << 20;
const FUNCS_MAX: usize = 16 << 20;

/// The table's layout, by its magic number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Go 1.16 and 1.17: function table entries of two pointers, records starting with the
    /// entry address.
    Go116,
    /// Go 1.18 on: entries of two 32-bit offsets from the text start, records starting with
    /// the entry offset.
    Go118,
}

impl Layout {
    fn of(magic: usize) -> Option<Layout> {
        match magic {
            0xffff_fffa => Some(Layout::Go116),
            0xffff_fff0 | 0xffff_fff1 => Some(Layout::Go118),
            _ => None,
        }
    }

    /// Bytes of one function-table entry.
    fn entry(self) -> usize {
        match self {
            Layout::Go116 => 16,
            Layout::Go118 => 8,
        }
    }
}

/// Go's `runtime.cputicks` in a program without a symbol table (see `elf::go_cputicks`),
/// found in its function table, if its body holds at least `min_size` bytes.
pub(in crate::sandbox) fn go_cputicks(
    exe: &std::fs::File,
    min_size: usize,
    budget: &mut Budget,
) -> Option<GoTicks> {
    const ET_DYN: usize = 3;
    let ehdr = budget.read(exe, 0, 64)?;
    if ehdr.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return None;
    }
    let (e_type, entry) = (le(&ehdr, 16, 2)?, le(&ehdr, 24, 8)? as u64);
    let (shoff, shentsize, shnum) = (le(&ehdr, 40, 8)?, le(&ehdr, 58, 2)?, le(&ehdr, 60, 2)?);
    if shentsize != 64 || shnum == 0 {
        return None;
    }
    let shdrs = budget.read(exe, shoff, 64 * shnum)?;
    let (vaddr, size) = function(exe, &shdrs, le(&ehdr, 62, 2)?, CPUTICKS, budget)?;
    (size >= min_size).then_some(GoTicks {
        vaddr,
        pie_entry: (e_type == ET_DYN).then_some(entry),
    })
}

/// `runtime.cputicks`'s name in the function table.
const CPUTICKS: &[u8] = b"runtime.cputicks";

/// The address and size (up to the next function) of the function named `wanted` in the
/// program's `.gopclntab` section. `shdrs` are its section headers (64 bytes each),
/// `shstrndx` the index of the section-name table.
pub(in crate::sandbox) fn function(
    exe: &std::fs::File,
    shdrs: &[u8],
    shstrndx: usize,
    wanted: &[u8],
    budget: &mut Budget,
) -> Option<(u64, usize)> {
    const SECTION: &[u8] = b".gopclntab";
    let shstr = shdrs.get(shstrndx.checked_mul(64)?..)?;
    let names = budget.read(exe, le(shstr, 24, 8)?, le(shstr, 32, 8)?.min(1 << 20))?;
    let section = shdrs.chunks_exact(64).find(|sh| {
        let at = le(sh, 0, 4).unwrap_or(usize::MAX);
        name_at(&names, at, SECTION.len()) == SECTION
    })?;
    let (at, len) = (le(section, 24, 8)?, le(section, 32, 8)?);
    let header = budget.read(exe, at, 72.min(len))?;
    let layout = Layout::of(le(&header, 0, 4)?)?;
    if header.get(7) != Some(&8) {
        return None; // 64-bit programs only
    }
    // The header's fields after the first 8 bytes, one pointer each.
    let field = |i: usize| le(&header, 8 + 8 * i, 8);
    let nfunc = field(0)?;
    let (text, names_at, names_end, funcs_at) = match layout {
        Layout::Go116 => (0, field(2)?, field(3)?, field(6)?),
        Layout::Go118 => (field(2)?, field(3)?, field(4)?, field(7)?),
    };
    let names_len = names_end.checked_sub(names_at)?;
    if names_len > NAMES_MAX || names_end > len || funcs_at > len {
        return None;
    }
    let hits = find_name(exe, (at.checked_add(names_at)?, names_len), wanted, budget)?;
    if hits.is_empty() {
        return None;
    }
    // The function table, then the records it points to (after it, in its order): read at
    // once, up to the section's end.
    let funcs = budget.read(
        exe,
        at.checked_add(funcs_at)?,
        (len - funcs_at).min(FUNCS_MAX),
    )?;
    find_function(&funcs, layout, nfunc, text as u64, &hits)
}

/// In the function table `funcs` (`nfunc` entries and the end entry, then the records),
/// the first function whose name offset is one of `hits` (ascending): its address and size.
fn find_function(
    funcs: &[u8],
    layout: Layout,
    nfunc: usize,
    text: u64,
    hits: &[usize],
) -> Option<(u64, usize)> {
    let step = layout.entry();
    let half = step / 2;
    // The entry address of function `i` (the end entry's for `i == nfunc`), its record.
    let entry = |i: usize| -> Option<(u64, usize)> {
        let at = i.checked_mul(step)?;
        let pc = le(funcs, at, half)? as u64;
        let pc = match layout {
            Layout::Go116 => pc,
            Layout::Go118 => text.checked_add(pc)?,
        };
        Some((pc, le(funcs, at + half, half)?))
    };
    let name_field = match layout {
        Layout::Go116 => 8,
        Layout::Go118 => 4,
    };
    if nfunc.checked_add(1)?.checked_mul(step)? > funcs.len() {
        return None;
    }
    for i in 0..nfunc {
        let (pc, record) = entry(i)?;
        let Some(name) = le(funcs, record.checked_add(name_field)?, 4) else {
            continue;
        };
        if hits.binary_search(&name).is_ok() {
            let (next, _) = entry(i + 1)?;
            let size = usize::try_from(next.checked_sub(pc)?).ok()?;
            return (pc != 0).then_some((pc, size));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Go 1.18 table: header, names, then the function table and records, as the linker
    /// lays them out. `funcs`: (name, entry offset from the text start); the end at `end`.
    fn table(funcs: &[(&[u8], u32)], end: u32, magic: u32) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut offsets = Vec::new();
        for (n, _) in funcs {
            offsets.push(names.len() as u32);
            names.extend_from_slice(n);
            names.push(0);
        }
        let names_at = 72usize;
        let funcs_at = names_at + names.len();
        let mut t = vec![0u8; 72];
        t[..4].copy_from_slice(&magic.to_le_bytes());
        t[6] = 1;
        t[7] = 8;
        let mut put = |i: usize, v: u64| t[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        put(0, funcs.len() as u64);
        put(2, 0x40_1000);
        put(3, names_at as u64);
        put(4, funcs_at as u64);
        put(7, funcs_at as u64);
        t.extend_from_slice(&names);
        let records_at = 8 * (funcs.len() + 1);
        let mut tab = Vec::new();
        let mut records = Vec::new();
        for (i, (_, pc)) in funcs.iter().enumerate() {
            tab.extend_from_slice(&pc.to_le_bytes());
            tab.extend_from_slice(&((records_at + records.len()) as u32).to_le_bytes());
            records.extend_from_slice(&pc.to_le_bytes());
            records.extend_from_slice(&offsets[i].to_le_bytes());
            records.extend_from_slice(&[0u8; 32]);
        }
        tab.extend_from_slice(&end.to_le_bytes());
        tab.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&tab);
        t.extend_from_slice(&records);
        t
    }

    /// A file holding `section` as `.gopclntab` (section headers: null, names, the table).
    fn program(section: &[u8]) -> (tempfile::NamedTempFile, Vec<u8>) {
        let shstr = b"\0.shstrtab\0.gopclntab\0";
        let (shstr_at, tab_at) = (64usize, 128usize);
        let mut f = vec![0u8; tab_at];
        f[shstr_at..shstr_at + shstr.len()].copy_from_slice(shstr);
        f.extend_from_slice(section);
        let mut shdrs = vec![0u8; 3 * 64];
        for (i, (name, off, size)) in [(1u32, shstr_at, shstr.len()), (11, tab_at, section.len())]
            .iter()
            .enumerate()
        {
            let at = 64 * (i + 1);
            shdrs[at..at + 4].copy_from_slice(&name.to_le_bytes());
            shdrs[at + 24..at + 32].copy_from_slice(&(*off as u64).to_le_bytes());
            shdrs[at + 32..at + 40].copy_from_slice(&(*size as u64).to_le_bytes());
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), f).unwrap();
        (file, shdrs)
    }

    fn lookup(section: &[u8], wanted: &[u8]) -> Option<(u64, usize)> {
        let (f, shdrs) = program(section);
        let exe = std::fs::File::open(f.path()).unwrap();
        function(&exe, &shdrs, 1, wanted, &mut Budget::new(usize::MAX))
    }

    #[test]
    fn a_function_is_found_by_its_exact_name_with_its_size() {
        let funcs: &[(&[u8], u32)] = &[
            (b"runtime.cputicksx", 0x10),
            (b"xruntime.cputicks", 0x20),
            (b"runtime.cputicks", 0x40),
            (b"runtime.other", 0x80),
        ];
        for magic in [0xffff_fff0, 0xffff_fff1] {
            let t = table(funcs, 0x100, magic);
            assert_eq!(lookup(&t, b"runtime.cputicks"), Some((0x40_1040, 0x40)));
            assert_eq!(lookup(&t, b"runtime.other"), Some((0x40_1080, 0x80)));
            assert_eq!(lookup(&t, b"runtime.absent"), None);
        }
    }

    #[test]
    fn other_layouts_and_truncated_tables_read_as_not_found() {
        let t = table(&[(b"runtime.cputicks", 0x40)], 0x100, 0xffff_fff0);
        // Go before 1.16, or a 32-bit program: not read.
        let mut old = t.clone();
        old[..4].copy_from_slice(&0xffff_fffbu32.to_le_bytes());
        assert_eq!(lookup(&old, b"runtime.cputicks"), None);
        let mut narrow = t.clone();
        narrow[7] = 4;
        assert_eq!(lookup(&narrow, b"runtime.cputicks"), None);
        // Cut anywhere: no panic, and not found where the entry or its record is gone.
        for cut in 0..t.len() {
            let found = lookup(&t[..cut], b"runtime.cputicks");
            assert!(found.is_none() || found == Some((0x40_1040, 0xc0)), "{cut}");
        }
        // A function count far past the table: not found.
        let mut many = t.clone();
        many[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(lookup(&many, b"runtime.cputicks"), None);
    }

    /// Any one byte of the table changed (to 0xff: huge offsets and counts): no panic and no
    /// overflow; a size found is a difference of two 32-bit entry offsets.
    #[test]
    fn a_crafted_table_finds_nothing_it_does_not_hold() {
        let funcs: &[(&[u8], u32)] = &[(b"runtime.a", 0x10), (b"runtime.cputicks", 0x40)];
        let t = table(funcs, 0x100, 0xffff_fff0);
        for at in 0..t.len() {
            let mut bad = t.clone();
            bad[at] = 0xff;
            if let Some((pc, size)) = lookup(&bad, b"runtime.cputicks") {
                assert!(pc >= 0x40_1000 && size < 1 << 32, "{at}: {pc:#x} {size}");
            }
        }
    }

    #[test]
    fn the_function_table_is_read_once_within_the_budget() {
        let funcs: Vec<(Vec<u8>, u32)> = (0..20_000u32)
            .map(|i| (format!("pkg.f{i}").into_bytes(), i * 16))
            .collect();
        let refs: Vec<(&[u8], u32)> = funcs.iter().map(|(n, p)| (&n[..], *p)).collect();
        let t = table(&refs, 20_000 * 16, 0xffff_fff0);
        let (f, shdrs) = program(&t);
        let exe = std::fs::File::open(f.path()).unwrap();
        let mut budget = Budget::new(usize::MAX);
        assert_eq!(
            function(&exe, &shdrs, 1, b"pkg.f19999", &mut budget),
            Some((0x40_1000 + 19_999 * 16, 16))
        );
        assert!(budget.examined() < t.len() + 4096, "{}", budget.examined());
        // A budget smaller than the table: not found, nothing more read.
        let mut small = Budget::new(64 << 10);
        assert_eq!(function(&exe, &shdrs, 1, b"pkg.f19999", &mut small), None);
        assert!(small.examined() <= 64 << 10);
    }

    /// A real Go program built as `go test` links its test binaries (`-s -w`: no symbol
    /// table): `runtime.cputicks` is found, where the unstripped build's symbol table has it.
    #[test]
    fn cputicks_of_a_stripped_go_program_is_where_its_symbol_says() {
        use super::super::elf;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("main.go"),
            "package main\n\nfunc main() {}\n",
        )
        .unwrap();
        let build = |out: &str, flags: &[&str]| {
            let o = std::process::Command::new("go")
                .args(["build", "-o", out])
                .args(flags)
                .arg("main.go")
                .current_dir(dir.path())
                .env("GOCACHE", dir.path().join("cache"))
                .env("GO111MODULE", "off")
                .output()
                .expect("go (golang-go, see .ci/setup)");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            std::fs::File::open(dir.path().join(out)).unwrap()
        };
        let full = build("full", &[]);
        let stripped = build("stripped", &["-ldflags=-s -w"]);
        let budget = || Budget::per_exec();
        let want = elf::go_cputicks(&full, 13, &mut budget());
        assert!(
            want.is_some(),
            "the symbol table names runtime.cputicks.abi0"
        );
        assert_eq!(elf::go_cputicks(&stripped, 13, &mut budget()), None);
        assert!(symtab_absent(&stripped));
        assert_eq!(go_cputicks(&stripped, 13, &mut budget()), want);
        assert_eq!(go_cputicks(&full, 13, &mut budget()), want);
    }

    /// Whether the program has no `SHT_SYMTAB` section.
    fn symtab_absent(f: &std::fs::File) -> bool {
        let ehdr = crate::sandbox::intercept::elf::read_bounded(f, 0, 64).unwrap();
        let (shoff, shnum) = (le(&ehdr, 40, 8).unwrap(), le(&ehdr, 60, 2).unwrap());
        let shdrs = crate::sandbox::intercept::elf::read_bounded(f, shoff, 64 * shnum).unwrap();
        !shdrs.chunks(64).any(|sh| le(sh, 4, 4) == Some(2))
    }
}
