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

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompCmpOp, SeccompFilter, SeccompRule};

use super::seccomp::{arch, cond, rule, SeccompError};

const S_ISUID: u64 = 0o4000;
const S_ISGID: u64 = 0o2000;
const O_CREAT: u64 = 0o100;
/// `__O_TMPFILE` (without `O_DIRECTORY`).
const O_TMPFILE: u64 = 0o20000000;
/// The x32 ABI's system call bit.
const X32: i64 = 0x4000_0000;
/// `fchmodat2(2)` (Linux 6.6); not in every libc crate yet.
const SYS_FCHMODAT2: i64 = 452;

/// The two filters: set-id modes refused (EPERM), `openat2` absent (ENOSYS).
pub fn programs() -> Result<Vec<BpfProgram>, SeccompError> {
    let mode_rules = |mode_arg: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        [S_ISUID, S_ISGID]
            .into_iter()
            .map(|bit| rule(vec![cond(mode_arg, SeccompCmpOp::MaskedEq(bit), bit)?]))
            .collect()
    };
    // A mode counts only where the call creates a file (O_CREAT, O_TMPFILE): without them
    // the argument is not read and may hold anything.
    let create_rules = |flags_arg: u8, mode_arg: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        let mut rules = Vec::new();
        for made in [O_CREAT, O_TMPFILE] {
            for bit in [S_ISUID, S_ISGID] {
                rules.push(rule(vec![
                    cond(flags_arg, SeccompCmpOp::MaskedEq(made), made)?,
                    cond(mode_arg, SeccompCmpOp::MaskedEq(bit), bit)?,
                ])?);
            }
        }
        Ok(rules)
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_chmod, mode_rules(1)?);
    rules.insert(libc::SYS_fchmod, mode_rules(1)?);
    rules.insert(libc::SYS_fchmodat, mode_rules(2)?);
    rules.insert(SYS_FCHMODAT2, mode_rules(2)?);
    rules.insert(libc::SYS_creat, mode_rules(1)?);
    rules.insert(libc::SYS_mknod, mode_rules(1)?);
    rules.insert(libc::SYS_mknodat, mode_rules(2)?);
    rules.insert(libc::SYS_open, create_rules(1, 2)?);
    rules.insert(libc::SYS_openat, create_rules(2, 3)?);
    // The same calls by their x32 numbers (bit 30 set; the arguments are the same), for a
    // kernel that runs x32 programs: `--seccomp unconfined` leaves nothing else to stop them.
    let x32: Vec<(i64, Vec<SeccompRule>)> =
        rules.iter().map(|(nr, r)| (nr | X32, r.clone())).collect();
    rules.extend(x32);
    let setid = filter(rules, libc::EPERM)?;
    let openat2 = BTreeMap::from([
        (libc::SYS_openat2, Vec::new()),
        (libc::SYS_openat2 | X32, Vec::new()),
    ]);
    let openat2 = filter(openat2, libc::ENOSYS)?;
    Ok(vec![setid, openat2])
}

fn filter(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, SeccompError> {
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch()?,
    )
    .and_then(|f| f.try_into())
    .map_err(|e: seccompiler::BackendError| SeccompError::Compile(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86_64: u32 = 0xc000_003e;
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
        assert_eq!(run(setid, SYS_FCHMODAT2, [0, 0, 0o4700, 0, 0, 0]), EPERM);
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
        assert_eq!(run(&p[1], libc::SYS_openat2, [0; 6]), ENOSYS);
        assert_eq!(run(&p[1], libc::SYS_openat, [0; 6]), ALLOW);
    }
}
