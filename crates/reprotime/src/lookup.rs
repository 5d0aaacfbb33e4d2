//! A symbol looked up in the loaded objects' own dynamic symbol tables, for glibc before 2.34
//! when the program has not loaded libdl (so there is no `dlsym`): the objects are listed by
//! `dl_iterate_phdr` (in every glibc and musl), each searched through its GNU hash table for
//! the default (not hidden) version of the name, in load order; `next` starts after this
//! library, as `RTLD_NEXT` does. Only called at set-up, a few dozen times per process.

use core::ffi::c_void;

/// What the search looks for and what it found.
struct Search<'a> {
    name: &'a [u8],
    /// This library has been passed (from the start unless RTLD_NEXT).
    past_self: bool,
    found: *mut c_void,
}

/// The address of `name`'s default definition in the loaded objects (after this library
/// when `next`), or null.
///
/// # Safety
/// Reads the loaded objects' dynamic sections, as the loader left them.
pub unsafe fn find(name: &[u8], next: bool) -> *mut c_void {
    let mut s = Search {
        name,
        past_self: !next,
        found: core::ptr::null_mut(),
    };
    // SAFETY: the callback gets this search as its data and only reads the objects listed.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut s as *mut Search as *mut c_void) };
    s.found
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: i64 = 0;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_GNU_HASH: i64 = 0x6fff_fef5;
const DT_VERSYM: i64 = 0x6fff_fff0;
const STT_GNU_IFUNC: u8 = 10;

/// An ELF64 dynamic-section entry.
#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> i32 {
    // SAFETY: data is the Search `find` passed; info describes one loaded object.
    let (s, info) = unsafe { (&mut *(data as *mut Search), &*info) };
    let base = info.dlpi_addr as usize;
    // SAFETY: dlpi_phdr points to dlpi_phnum program headers.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    if !s.past_self {
        let me = visit as *const () as usize;
        let mine = phdrs.iter().any(|ph| {
            let start = base.wrapping_add(ph.p_vaddr as usize);
            ph.p_type == PT_LOAD && me >= start && me - start < ph.p_memsz as usize
        });
        s.past_self = mine;
        return 0;
    }
    let Some(dynamic) = phdrs.iter().find(|ph| ph.p_type == PT_DYNAMIC) else {
        return 0;
    };
    // SAFETY: the object's dynamic section, mapped by the loader.
    let found = unsafe { in_object(base, base.wrapping_add(dynamic.p_vaddr as usize), s.name) };
    if found.is_null() {
        return 0;
    }
    s.found = found;
    1
}

/// A dynamic-section address: absolute where the loader relocated it, else from `base`.
fn addr(base: usize, ptr: usize) -> usize {
    if ptr < base {
        base.wrapping_add(ptr)
    } else {
        ptr
    }
}

/// The GNU hash of a name.
fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, c| h.wrapping_mul(33).wrapping_add(*c as u32))
}

/// `name`'s default definition in the object at `base` with the dynamic section at `dynamic`.
unsafe fn in_object(base: usize, dynamic: usize, name: &[u8]) -> *mut c_void {
    let (mut strtab, mut symtab, mut hash, mut versym) = (0usize, 0usize, 0usize, 0usize);
    let mut d = dynamic as *const Dyn;
    // SAFETY: the dynamic section ends with DT_NULL; at most 512 entries are read.
    unsafe {
        for _ in 0..512 {
            let (tag, val) = ((*d).tag, (*d).val as usize);
            match tag {
                DT_NULL => break,
                DT_STRTAB => strtab = addr(base, val),
                DT_SYMTAB => symtab = addr(base, val),
                DT_GNU_HASH => hash = addr(base, val),
                DT_VERSYM => versym = addr(base, val),
                _ => {}
            }
            d = d.add(1);
        }
    }
    if strtab == 0 || symtab == 0 || hash == 0 {
        return core::ptr::null_mut();
    }
    let h = gnu_hash(name);
    // SAFETY: the GNU hash table's layout: nbuckets, symoffset, bloom size, bloom shift, the
    // bloom words (64-bit), the buckets, the chains; each symbol's name in the string table.
    unsafe {
        let t = hash as *const u32;
        let (nbuckets, symoffset, bloom) = (*t, *t.add(1), *t.add(2));
        if nbuckets == 0 {
            return core::ptr::null_mut();
        }
        let buckets = t.add(4 + 2 * bloom as usize);
        let chains = buckets.add(nbuckets as usize);
        let mut i = *buckets.add((h % nbuckets) as usize);
        if i < symoffset {
            return core::ptr::null_mut();
        }
        loop {
            let ch = *chains.add((i - symoffset) as usize);
            if ch | 1 == h | 1 {
                let sym = &*(symtab as *const libc::Elf64_Sym).add(i as usize);
                let sname = core::ffi::CStr::from_ptr((strtab + sym.st_name as usize) as *const _);
                let hidden = versym != 0 && *(versym as *const u16).add(i as usize) & 0x8000 != 0;
                if sname.to_bytes() == name && sym.st_shndx != 0 && sym.st_value != 0 && !hidden {
                    let at = base.wrapping_add(sym.st_value as usize) as *mut c_void;
                    if sym.st_info & 0xf == STT_GNU_IFUNC {
                        type Resolver = unsafe extern "C" fn() -> *mut c_void;
                        return core::mem::transmute::<*mut c_void, Resolver>(at)();
                    }
                    return at;
                }
            }
            if ch & 1 != 0 {
                return core::ptr::null_mut();
            }
            i += 1;
        }
    }
}
