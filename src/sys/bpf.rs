//! Classic-BPF instructions for seccomp programs, one set of constructors for every filter
//! reprorun lays out by hand (the notification filter, the default security profile, the x32
//! blocker), and the audit architecture of this build.

/// `AUDIT_ARCH_*` of this build (what `seccomp_data.arch` holds for its native calls); 0 where
/// reprorun has no seccomp support.
#[cfg(target_arch = "x86_64")]
pub(crate) const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(target_arch = "riscv64")]
pub(crate) const AUDIT_ARCH: u32 = 0xc000_00f3;
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
pub(crate) const AUDIT_ARCH: u32 = 0;

/// The bit x86-64's x32 ABI sets in its system call numbers.
pub(crate) const X32_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`: the call's number, its architecture, and the low 32 bits
/// of argument `index` (little-endian: the argument's first word).
pub(crate) const NR: u32 = 0;
pub(crate) const ARCH: u32 = 4;
pub(crate) const fn arg_low(index: u8) -> u32 {
    16 + 8 * index as u32
}

/// `A = seccomp_data[offset]` (a 32-bit word).
pub(crate) const fn load(offset: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: offset,
    }
}

/// Return `action` (`SECCOMP_RET_*`, with its data).
pub(crate) const fn ret(action: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: action,
    }
}

/// A conditional jump on `A op k` (`BPF_JEQ`, `BPF_JGE`, `BPF_JSET`, ...): `jt` instructions
/// ahead when true, `jf` when false.
pub(crate) const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// `A &= k`.
pub(crate) const fn and(k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `SECCOMP_RET_ERRNO` with `errno`.
pub(crate) const fn errno(errno: u32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno & libc::SECCOMP_RET_DATA)
}

/// `prog` as the program type the security profile's installer takes.
pub(crate) fn to_program(prog: &[libc::sock_filter]) -> seccompiler::BpfProgram {
    prog.iter()
        .map(|i| seccompiler::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}
