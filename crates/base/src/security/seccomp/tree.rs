//! The default profile laid out by hand as one classic-BPF program whose system-call lookup
//! is a binary search. seccompiler lays a rule set out as a linear chain (one comparison per
//! listed call, 378 instructions for the default profile), and the kernel pays for that at
//! every start: when a filter is installed it runs it once per system call number of each
//! ABI to find the calls it always allows (the seccomp action cache), so a chain of N
//! comparisons costs about 900 × N steps there (measured: ~0.5 ms of each start, issue 20).
//! A search tree takes a handful of comparisons per number. At run time both are the same to
//! the workload: every call the cache marks as allowed skips the filter altogether.

use libc::sock_filter;
use seccompiler::BpfProgram;

use super::SeccompError;
use crate::sys::bpf::{self, errno, load, ret};

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
    /// `socket`/`socketpair`: allow a family (argument 0, low 32 bits) of `families`, and
    /// `AF_NETLINK` with a protocol (argument 2) of `netlink`; fail any other family with
    /// EAFNOSUPPORT and any other netlink protocol with EPROTONOSUPPORT (what a kernel
    /// without them answers).
    Families {
        families: &'static [u32],
        netlink: &'static [u32],
    },
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

/// [`bpf::jump`] with offsets counted in `usize`: over 255 (the format's limit) is a compile
/// error.
fn jump(op: u32, k: u32, jt: usize, jf: usize) -> Result<sock_filter, SeccompError> {
    let short = |n: usize| {
        u8::try_from(n).map_err(|_| SeccompError::Compile(format!("jump of {n} instructions")))
    };
    Ok(bpf::jump(op, k, short(jt)?, short(jf)?))
}

/// ENOSYS for every x32 call (numbers with bit 30 set), which would otherwise pass a filter
/// keyed by x86-64 numbers; the accumulator holds the call's number.
fn x32_to_enosys() -> [sock_filter; 2] {
    [
        bpf::jump(libc::BPF_JSET, bpf::X32_BIT, 0, 1),
        ret(errno(libc::ENOSYS as u32)),
    ]
}

/// The x32 check alone, as a program (OCI profiles, which do not know those numbers).
pub(super) fn x32_blocker() -> BpfProgram {
    let mut prog = vec![load(bpf::NR)];
    prog.extend(x32_to_enosys());
    prog.push(ret(ALLOW));
    bpf::to_program(&prog)
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
            load(bpf::arg_low(*index)),
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
        Leaf::Families { families, netlink } => families_block(families, netlink)?,
    })
}

/// [`Leaf::Families`]: the families' comparisons jump to the netlink part's final ALLOW.
fn families_block(families: &[u32], netlink: &[u32]) -> Result<Vec<sock_filter>, SeccompError> {
    let protocols = in_set(2, netlink, ALLOW, errno(libc::EPROTONOSUPPORT as u32))?;
    let mut out = vec![load(bpf::arg_low(0))];
    for (i, family) in families.iter().enumerate() {
        // Taken: past the remaining comparisons, the netlink one, the EAFNOSUPPORT return
        // and the protocol check up to its ALLOW (its last instruction).
        let skip = families.len() - 1 - i + 2 + protocols.len() - 1;
        out.push(jump(libc::BPF_JEQ, *family, skip, 0)?);
    }
    out.push(jump(libc::BPF_JEQ, libc::AF_NETLINK as u32, 1, 0)?);
    out.push(ret(errno(libc::EAFNOSUPPORT as u32)));
    out.extend(protocols);
    Ok(out)
}

/// `inside` if argument `index` is one of `values`, else `outside`.
fn in_set(
    index: u8,
    values: &[u32],
    inside: u32,
    outside: u32,
) -> Result<Vec<sock_filter>, SeccompError> {
    let mut out = vec![load(bpf::arg_low(index))];
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

/// One program: another architecture's calls kill the process (as seccompiler's programs
/// do), x32 calls fail with ENOSYS, each call of `calls` gets its leaf, the rest are allowed.
pub(super) fn program(calls: Vec<(i64, Leaf)>) -> Result<BpfProgram, SeccompError> {
    if bpf::AUDIT_ARCH == 0 {
        let arch = std::env::consts::ARCH;
        return Err(SeccompError::Compile(format!(
            "no seccomp support for {arch}"
        )));
    }
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
        load(bpf::ARCH),
        bpf::jump(libc::BPF_JEQ, bpf::AUDIT_ARCH, 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        load(bpf::NR),
    ];
    if cfg!(target_arch = "x86_64") {
        prog.extend(x32_to_enosys());
    }
    prog.extend(search(&listed)?);
    Ok(bpf::to_program(&prog))
}
