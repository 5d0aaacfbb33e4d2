//! No set-id file a run makes survives on the host. Whatever the caller's id, what the
//! workload writes through `/work` or a writable `--bind` is stored as the caller's (or the
//! tree owner's) file, `nosuid` inside but not on the host: a setuid-root shell left in a root
//! caller's work tree would be a root shell for any host user who can reach it.
//!
//! So every `exec` sandbox gets this filter, whatever `--seccomp` says (it is not a profile a
//! user chooses, like the notification filter): `chmod`, `fchmod`, `fchmodat`, `fchmodat2`
//! with `S_ISUID` or `S_ISGID` in the mode, and a file created (`open`, `openat`, `creat`,
//! `mknod`, `mknodat`) with either bit, fail with `EPERM`. `openat2`, whose mode lies in memory
//! a filter cannot read, fails with `ENOSYS`, as on a kernel before 5.6, so callers fall back
//! to `openat`. Setting a file capability needs `CAP_SETFCAP`, which the workload does not
//! have (`--cap-add SETFCAP` is refused with a sandbox that writes to the host).
//! A directory's set-group-id bit is refused as well: a filter cannot tell a directory from
//! a file (`spec/security.md`).

use seccompiler::BpfProgram;

use super::seccomp::SeccompError;
use crate::sys::bpf::{and, arg_low, errno, jump, load, ret, ARCH, AUDIT_ARCH, NR, X32_BIT};

const SETID: u32 = 0o6000;
/// `O_CREAT` and `__O_TMPFILE`: a call that creates a file (its mode is read only then).
const CREATES: u32 = 0o100 | 0o20000000;
/// `fchmodat2(2)` (Linux 6.6); not in every libc crate yet.
const SYS_FCHMODAT2: u32 = 452;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

/// The filter, laid out by hand (one program, a few instructions per call: the kernel's
/// per-call action cache still allows every other call without running it). x32 numbers are
/// folded onto x86-64's (bit 30 cleared: the arguments are the same); another architecture's
/// calls pass (the security profile decides about them).
pub fn programs() -> Result<Vec<BpfProgram>, SeccompError> {
    use libc::{BPF_JEQ, BPF_JSET};
    let nr = |n: i64| n as u32;
    // Calls whose mode is argument 1, then those whose mode is argument 2.
    let mode1 = [
        nr(libc::SYS_chmod),
        nr(libc::SYS_fchmod),
        nr(libc::SYS_creat),
        nr(libc::SYS_mknod),
    ];
    let mode2 = [nr(libc::SYS_fchmodat), SYS_FCHMODAT2, nr(libc::SYS_mknodat)];
    let mut p = vec![
        load(ARCH),
        jump(BPF_JEQ, AUDIT_ARCH, 1, 0),
        ret(ALLOW),
        load(NR),
        and(!X32_BIT),
        jump(BPF_JEQ, nr(libc::SYS_openat2), 0, 1),
        ret(errno(libc::ENOSYS as u32)),
    ];
    // Dispatch: each `jeq` jumps to its block below (offsets counted from the next
    // instruction); the blocks follow the dispatch in the order mode1, mode2, open, openat.
    let calls: Vec<(u32, usize)> = mode1
        .iter()
        .map(|&n| (n, 0))
        .chain(mode2.iter().map(|&n| (n, 1)))
        .chain([(nr(libc::SYS_open), 2), (nr(libc::SYS_openat), 3)])
        .collect();
    // The blocks after the dispatch's final `ret ALLOW`, at these offsets: mode in argument
    // 1 (0), in argument 2 (3), `open` (6: flags 1, mode 2), `openat` (12: flags 2, mode 3),
    // then EPERM (18).
    const EPERM_AT: usize = 18;
    let block_at = [0usize, 3, 6, 12];
    let n = calls.len();
    for (i, (call, block)) in calls.iter().enumerate() {
        // From after this jeq: the rest of the dispatch, its `ret ALLOW`, the block's offset.
        let to = (n - i - 1) + 1 + block_at[*block];
        p.push(jump(BPF_JEQ, *call, to as u8, 0));
    }
    p.push(ret(ALLOW));
    let to_eperm = |at: usize| (EPERM_AT - at - 1) as u8;
    let mode_block = |arg: u8, at: usize| {
        [
            load(arg_low(arg)),
            jump(BPF_JSET, SETID, to_eperm(at + 1), 0),
            ret(ALLOW),
        ]
    };
    let create_block = |flags: u8, mode: u8, at: usize| {
        [
            load(arg_low(flags)),
            jump(BPF_JSET, CREATES, 1, 0),
            ret(ALLOW),
            load(arg_low(mode)),
            jump(BPF_JSET, SETID, to_eperm(at + 4), 0),
            ret(ALLOW),
        ]
    };
    p.extend(mode_block(1, 0));
    p.extend(mode_block(2, 3));
    p.extend(create_block(1, 2, 6));
    p.extend(create_block(2, 3, 12));
    p.push(ret(errno(libc::EPERM as u32)));
    Ok(vec![crate::sys::bpf::to_program(&p)])
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86_64: u32 = 0xc000_003e;
    const X32: i64 = 0x4000_0000;
    const ALLOW: u32 = 0x7fff_0000;
    const EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
    const ENOSYS: u32 = 0x0005_0000 | libc::ENOSYS as u32;

    fn run(prog: &BpfProgram, nr: i64, args: [u64; 6]) -> u32 {
        let prog = prog.iter().map(|i| (i.code, i.jt, i.jf, i.k));
        crate::sys::bpf::run(prog, X86_64, nr, args).0
    }

    #[test]
    fn set_id_modes_are_refused_and_plain_ones_pass() {
        let p = programs().unwrap();
        let setid = &p[0];
        assert_eq!(run(setid, libc::SYS_chmod, [0, 0o4755, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(setid, libc::SYS_fchmod, [3, 0o2755, 0, 0, 0, 0]), EPERM);
        assert_eq!(
            run(setid, libc::SYS_fchmodat, [0, 0, 0o6755, 0, 0, 0]),
            EPERM
        );
        assert_eq!(
            run(setid, SYS_FCHMODAT2 as i64, [0, 0, 0o4700, 0, 0, 0]),
            EPERM
        );
        assert_eq!(run(setid, libc::SYS_chmod, [0, 0o755, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(setid, libc::SYS_fchmodat, [0, 0, 0o1777, 0, 0, 0]),
            ALLOW
        );
        // A created file's mode counts; without O_CREAT/O_TMPFILE the mode is not read.
        let creat_rw = (libc::O_CREAT | libc::O_WRONLY) as u64;
        assert_eq!(
            run(setid, libc::SYS_openat, [0, 0, creat_rw, 0o4755, 0, 0]),
            EPERM
        );
        assert_eq!(
            run(setid, libc::SYS_open, [0, creat_rw, 0o2755, 0, 0, 0]),
            EPERM
        );
        let tmpfile = (libc::O_TMPFILE | libc::O_RDWR) as u64;
        assert_eq!(
            run(setid, libc::SYS_openat, [0, 0, tmpfile, 0o4700, 0, 0]),
            EPERM
        );
        assert_eq!(
            run(setid, libc::SYS_openat, [0, 0, creat_rw, 0o644, 0, 0]),
            ALLOW
        );
        assert_eq!(run(setid, libc::SYS_openat, [0, 0, 0, 0o4755, 0, 0]), ALLOW);
        assert_eq!(
            run(setid, libc::SYS_mknodat, [0, 0, 0o104755, 0, 0, 0]),
            EPERM
        );
        assert_eq!(run(setid, libc::SYS_creat, [0, 0o4755, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(setid, libc::SYS_read, [0; 6]), ALLOW);
        assert_eq!(
            run(setid, libc::SYS_chmod | X32, [0, 0o4755, 0, 0, 0, 0]),
            EPERM
        );
        assert_eq!(run(setid, libc::SYS_openat2, [0; 6]), ENOSYS);
        assert_eq!(run(setid, libc::SYS_openat2 | X32, [0; 6]), ENOSYS);
        assert_eq!(run(setid, libc::SYS_openat, [0; 6]), ALLOW);
        assert_eq!(
            run(setid, libc::SYS_mknod, [0, 0o100644, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(run(setid, libc::SYS_creat, [0, 0o644, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(setid, SYS_FCHMODAT2 as i64, [0, 0, 0o755, 0, 0, 0]),
            ALLOW
        );
        // Another architecture's calls pass: the security profile decides about them.
        let prog = setid.iter().map(|i| (i.code, i.jt, i.jf, i.k));
        assert_eq!(
            crate::sys::bpf::run(prog, 0x4000_0003, libc::SYS_chmod, [0, 0o4755, 0, 0, 0, 0]).0,
            ALLOW
        );
        assert_eq!(p.len(), 1, "one filter");
    }
}
