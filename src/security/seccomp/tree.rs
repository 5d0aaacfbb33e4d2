//! The default profile laid out by hand as one classic-BPF program whose system-call lookup
//! is a binary search. seccompiler lays a rule set out as a linear chain (one comparison per
//! listed call, 378 instructions for the default profile), and the kernel pays for that at
//! every start: when a filter is installed it runs it once per system call number of each
//! ABI to find the calls it always allows (the seccomp action cache), so a chain of N
//! comparisons costs about 900 × N steps there (measured: ~0.5 ms of each start, issue 20).
//! A search tree takes a handful of comparisons per number. At run time both are the same to
//! the workload: every call the cache marks as allowed skips the filter altogether.

use seccompiler::{sock_filter, BpfProgram};

use super::SeccompError;

/// What the program does with one listed system call.
pub(super) enum Leaf {
    /// Fail it with this errno.
    Errno(u32),
    /// Fail it with `errno` if argument `index` (its low 32 bits) has any bit of `mask` set.
    AnyBitSet { index: u8, mask: u32, errno: u32 },
    /// Fail it with `errno` if argument `index` (its low 32 bits) is one of `values`.
    OneOf {
        index: u8,
        values: &'static [u32],
        errno: u32,
    },
    /// Fail it with `errno` unless argument `index` (its low 32 bits) is one of `values`.
    NoneOf {
        index: u8,
        values: &'static [u32],
        errno: u32,
    },
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

fn ret(k: u32) -> sock_filter {
    stmt((libc::BPF_RET | libc::BPF_K) as u16, k)
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `A = seccomp_data[offset]` (a 32-bit word).
fn load(offset: u32) -> sock_filter {
    stmt((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, offset)
}

/// A conditional jump; offsets over 255 (the format's limit) are a compile error.
fn jump(op: u32, k: u32, jt: usize, jf: usize) -> Result<sock_filter, SeccompError> {
    let short = |n: usize| {
        u8::try_from(n).map_err(|_| SeccompError::Compile(format!("jump of {n} instructions")))
    };
    Ok(sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt: short(jt)?,
        jf: short(jf)?,
        k,
    })
}

fn errno(e: u32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e & libc::SECCOMP_RET_DATA)
}

/// The low 32 bits of argument `index` (little-endian: the first word of the argument).
fn arg_low(index: u8) -> u32 {
    16 + 8 * u32::from(index)
}

/// The instructions for one listed call; each path ends in a return.
fn block(leaf: &Leaf) -> Result<Vec<sock_filter>, SeccompError> {
    Ok(match leaf {
        Leaf::Errno(e) => vec![ret(errno(*e))],
        Leaf::AnyBitSet {
            index,
            mask,
            errno: e,
        } => vec![
            load(arg_low(*index)),
            jump(libc::BPF_JSET, *mask, 0, 1)?,
            ret(errno(*e)),
            ret(ALLOW),
        ],
        Leaf::OneOf {
            index,
            values,
            errno: e,
        } => in_set(*index, values, errno(*e), ALLOW)?,
        Leaf::NoneOf {
            index,
            values,
            errno: e,
        } => in_set(*index, values, ALLOW, errno(*e))?,
    })
}

/// `inside` if argument `index` is one of `values`, else `outside`.
fn in_set(
    index: u8,
    values: &[u32],
    inside: u32,
    outside: u32,
) -> Result<Vec<sock_filter>, SeccompError> {
    let mut out = vec![load(arg_low(index))];
    for (i, v) in values.iter().enumerate() {
        // Taken: past the remaining comparisons and the `outside` return.
        out.push(jump(libc::BPF_JEQ, *v, values.len() - i, 0)?);
    }
    out.push(ret(outside));
    out.push(ret(inside));
    Ok(out)
}

/// A binary search over `calls` (sorted by number) with the accumulator holding the call's
/// number; a call not listed is allowed.
fn search(calls: &[(u32, Vec<sock_filter>)]) -> Result<Vec<sock_filter>, SeccompError> {
    if calls.len() <= 3 {
        let mut out = Vec::new();
        for (nr, block) in calls {
            out.push(jump(libc::BPF_JEQ, *nr, 0, block.len())?);
            out.extend_from_slice(block);
        }
        out.push(ret(ALLOW));
        return Ok(out);
    }
    let mid = calls.len() / 2;
    let left = search(&calls[..mid])?;
    let right = search(&calls[mid..])?;
    let mut out = vec![jump(libc::BPF_JGE, calls[mid].0, left.len(), 0)?];
    out.extend(left);
    out.extend(right);
    Ok(out)
}

/// The audit architecture of this build, and whether it has x32's numbers (bit 30) to shut.
fn audit_arch() -> Result<(u32, bool), SeccompError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok((0xc000_003e, true)),
        "aarch64" => Ok((0xc000_00b7, false)),
        "riscv64" => Ok((0xc000_00f3, false)),
        other => Err(SeccompError::Compile(format!(
            "no seccomp support for {other}"
        ))),
    }
}

/// One program: another architecture's calls kill the process (as seccompiler's programs
/// do), x32 calls fail with ENOSYS, each call of `calls` gets its leaf, the rest are allowed.
pub(super) fn program(calls: Vec<(i64, Leaf)>) -> Result<BpfProgram, SeccompError> {
    let (arch, x32) = audit_arch()?;
    let mut listed = calls
        .iter()
        .map(|(nr, leaf)| {
            let nr = u32::try_from(*nr)
                .map_err(|_| SeccompError::Compile(format!("system call number {nr}")))?;
            Ok((nr, block(leaf)?))
        })
        .collect::<Result<Vec<_>, SeccompError>>()?;
    listed.sort_by_key(|(nr, _)| *nr);
    if listed.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(SeccompError::Compile("a system call listed twice".into()));
    }
    let mut prog = vec![
        load(4),
        jump(libc::BPF_JEQ, arch, 1, 0)?,
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        load(0),
    ];
    if x32 {
        prog.push(jump(libc::BPF_JSET, 0x4000_0000, 0, 1)?);
        prog.push(ret(errno(libc::ENOSYS as u32)));
    }
    prog.extend(search(&listed)?);
    Ok(prog)
}
