//! Classic-BPF instructions for seccomp programs, one set of constructors for every filter
//! reprorun lays out by hand (the notification filter, the default security profile, the x32
//! blocker), and the audit architecture of this build.

/// `AUDIT_ARCH_*` of this build (what `seccomp_data.arch` holds for its native calls); 0 where
/// reprorun has no seccomp support.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xc000_003e;
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
pub const X32_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`: the call's number, its architecture, and the low 32 bits
/// of argument `index` (little-endian: the argument's first word).
pub const NR: u32 = 0;
pub const ARCH: u32 = 4;
pub const fn arg_low(index: u8) -> u32 {
    16 + 8 * index as u32
}

/// `A = seccomp_data[offset]` (a 32-bit word).
pub const fn load(offset: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: offset,
    }
}

/// Return `action` (`SECCOMP_RET_*`, with its data).
pub const fn ret(action: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: action,
    }
}

/// A conditional jump on `A op k` (`BPF_JEQ`, `BPF_JGE`, `BPF_JSET`, ...): `jt` instructions
/// ahead when true, `jf` when false.
pub const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// `A &= k`.
pub const fn and(k: u32) -> libc::sock_filter {
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

/// Runs a classic-BPF seccomp program as the kernel would over the `seccomp_data` of
/// (arch, nr, args) (the instructions this crate's and seccompiler's programs use); returns
/// its action and how many instructions it took. For tests of every filter the workspace
/// builds (here and in the runtime's notification filter), so not only under `cfg(test)`.
pub fn run(
    prog: impl IntoIterator<Item = (u16, u8, u8, u32)>,
    arch: u32,
    nr: i64,
    args: [u64; 6],
) -> (u32, usize) {
    let prog: Vec<(u16, u8, u8, u32)> = prog.into_iter().collect();
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&(nr as i32).to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let (code, jt, jf, k) = *prog.get(pc).expect("jump out of the program");
        steps += 1;
        pc += 1;
        match (code & 0x07, code) {
            (0x00, c) if c == (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16 => {
                let k = k as usize;
                acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
            }
            (0x04, c) if c == (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16 => acc &= k,
            (0x05, c) if c == (libc::BPF_JMP | libc::BPF_JA) as u16 => pc += k as usize,
            (0x05, c) => {
                let taken = match c & 0xf0 {
                    0x10 => acc == k,     // JEQ
                    0x20 => acc > k,      // JGT
                    0x30 => acc >= k,     // JGE
                    0x40 => acc & k != 0, // JSET
                    other => panic!("unexpected jump {other:#x}"),
                };
                pc += if taken { jt } else { jf } as usize;
            }
            (0x06, _) => return (k, steps),
            (_, c) => panic!("unexpected instruction {c:#x}"),
        }
    }
}
