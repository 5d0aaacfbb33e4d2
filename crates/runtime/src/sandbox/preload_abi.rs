//! The check that keeps the preload library loadable on every glibc a user's image may hold:
//! the symbol versions it needs (its ELF `.gnu.version_r`) are all at most [`FLOOR`], and the
//! libraries it names are libc's own. A library built against a newer glibc that picked up a
//! newer version (`dlsym@GLIBC_2.34`, `pthread_sigmask@GLIBC_2.32`) would stop every dynamic
//! program in a Debian 11, Ubuntu 20.04 or RHEL 8 root from starting (`crates/reprotime/src/abi.rs`).

/// The newest glibc symbol version the library may need: the architecture's first.
#[cfg(target_arch = "x86_64")]
pub(crate) const FLOOR: (u32, u32, u32) = (2, 2, 5);
#[cfg(not(target_arch = "x86_64"))]
pub(crate) const FLOOR: (u32, u32, u32) = (2, 17, 0);

/// The libraries the preload library may need versions from.
pub(crate) const NEEDED: [&str; 1] = ["libc.so.6"];

/// What an ELF64 little-endian shared library needs: `(file, version)` of each entry of its
/// version-needs section. Bounded by the section's own sizes; `Err` names what is malformed.
pub(crate) fn versions_needed(elf: &[u8]) -> Result<Vec<(String, String)>, &'static str> {
    let le = |at: usize, n: usize| -> Result<usize, &'static str> {
        let b = elf
            .get(at..at.checked_add(n).ok_or("offset")?)
            .ok_or("past the end")?;
        Ok(b.iter().rev().fold(0usize, |a, x| a << 8 | *x as usize))
    };
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err("not an ELF64 little-endian file");
    }
    let (shoff, shentsize, shnum) = (le(40, 8)?, le(58, 2)?, le(60, 2)?);
    if shentsize != 64 {
        return Err("section header size");
    }
    let section = |i: usize| {
        shoff
            .checked_add(i.checked_mul(64).ok_or("index")?)
            .ok_or("index")
    };
    const SHT_GNU_VERNEED: usize = 0x6fff_fffe;
    let mut needs = (0..shnum)
        .filter_map(|i| section(i).ok())
        .filter(|sh| le(sh + 4, 4) == Ok(SHT_GNU_VERNEED));
    let sh = needs.next().ok_or("no version-needs section")?;
    let (at, count) = (le(sh + 24, 8)?, le(sh + 44, 4)?);
    let strtab = le(section(le(sh + 40, 4)?)? + 24, 8)?;
    let name = |off: usize| -> Result<String, &'static str> {
        let s = elf
            .get(strtab.checked_add(off).ok_or("name")?..)
            .ok_or("name")?;
        let s = &s[..s.iter().take(256).position(|b| *b == 0).ok_or("name")?];
        Ok(String::from_utf8_lossy(s).into_owned())
    };
    let mut out = Vec::new();
    let mut need = at;
    for _ in 0..count.min(64) {
        let (cnt, file, mut aux) = (
            le(need + 2, 2)?,
            name(le(need + 4, 4)?)?,
            need + le(need + 8, 4)?,
        );
        for _ in 0..cnt.min(64) {
            out.push((file.clone(), name(le(aux + 8, 4)?)?));
            aux += le(aux + 12, 4)?;
        }
        need += le(need + 12, 4)?;
    }
    Ok(out)
}

/// `GLIBC_X.Y[.Z]` as numbers (None for any other version name).
pub(crate) fn glibc_version(name: &str) -> Option<(u32, u32, u32)> {
    let mut n = name
        .strip_prefix("GLIBC_")?
        .split('.')
        .map(|p| p.parse::<u32>());
    let (a, b) = (n.next()?.ok()?, n.next()?.ok()?);
    let c = n.next().map_or(Some(0), |c| c.ok())?;
    n.next().is_none().then_some((a, b, c))
}

/// Every version `elf` needs that is newer than [`FLOOR`] or not glibc's, or a library it
/// needs a version from that is not libc's: empty for a library that loads everywhere.
pub(crate) fn too_new(elf: &[u8]) -> Result<Vec<String>, &'static str> {
    Ok(versions_needed(elf)?
        .into_iter()
        .filter(|(file, v)| {
            !NEEDED.contains(&file.as_str()) || !matches!(glibc_version(v), Some(v) if v <= FLOOR)
        })
        .map(|(file, v)| format!("{v} from {file}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built library loads on every glibc: no symbol version newer than the floor.
    #[test]
    fn the_preload_library_needs_no_glibc_newer_than_the_floor() {
        let needs = versions_needed(super::super::PRELOAD_LIB).unwrap();
        assert!(!needs.is_empty(), "no version needs read");
        assert_eq!(
            too_new(super::super::PRELOAD_LIB).unwrap(),
            Vec::<String>::new(),
            "{needs:?}"
        );
    }

    #[test]
    fn glibc_versions_are_compared_as_numbers() {
        assert_eq!(glibc_version("GLIBC_2.2.5"), Some((2, 2, 5)));
        assert_eq!(glibc_version("GLIBC_2.34"), Some((2, 34, 0)));
        assert!(glibc_version("GLIBC_2.34").unwrap() > glibc_version("GLIBC_2.4").unwrap());
        assert_eq!(glibc_version("GLIBC_PRIVATE"), None);
        assert_eq!(glibc_version("GLIBC_2.3.4.1"), None);
    }

    #[test]
    fn malformed_libraries_are_errors_not_panics() {
        assert!(versions_needed(b"").is_err());
        assert!(versions_needed(b"\x7fELF\x02\x01").is_err());
        let mut cut = super::super::PRELOAD_LIB.to_vec();
        cut.truncate(cut.len() / 2);
        let _ = versions_needed(&cut);
        let mut bad = super::super::PRELOAD_LIB.to_vec();
        let shoff = u64::from_le_bytes(bad[40..48].try_into().unwrap()) as usize;
        bad[shoff..].fill(0xff);
        assert!(versions_needed(&bad).is_err());
    }
}
