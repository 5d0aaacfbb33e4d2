//! The workload's notification filter: which system calls go to the server.

use super::*;

/// The seccomp program installed in the workload before its exec. Sent to the server:
/// `execve`/`execveat`, `uname`, `sysinfo`, `sched_getaffinity`; with sorted listings
/// `getdents64`, `getdents`; with a fake clock the realtime clock calls (clock_gettime on REALTIME, REALTIME_COARSE,
/// TAI; gettimeofday; time), and with a frozen or tick clock the CPU-time clocks too; with
/// seeded entropy `getrandom`, `wait4` and `waitid`. Everything else, monotonic clocks
/// included, is allowed at once. With `egress` (`--net allow`), `connect` and a `sendto` that names an address (not
/// a `send` on a connected socket: its address argument is null). Other architectures' calls
/// are allowed untouched.
pub(crate) fn filter(
    clock: Option<ClockMode>,
    seeded: bool,
    sorted: bool,
    egress: bool,
) -> Vec<libc::sock_filter> {
    let cpu = matches!(clock, Some(ClockMode::Frozen | ClockMode::Tick { .. }));
    let clock = clock.is_some();
    use crate::sys::bpf::{self, load as ld, ret};
    let jeq = |k: u32, jt: u8, jf: u8| bpf::jump(libc::BPF_JEQ, k, jt, jf);
    let mut notified = vec![
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_uname,
        libc::SYS_sysinfo,
        libc::SYS_sched_getaffinity,
    ];
    if sorted {
        notified.push(libc::SYS_getdents64);
        #[cfg(target_arch = "x86_64")]
        notified.push(libc::SYS_getdents);
    }
    if seeded {
        // wait4/waitid: so that a process's children are counted before they are reaped
        // (their streams are keyed by their place among their siblings, see `lineage`).
        notified.extend([libc::SYS_getrandom, libc::SYS_wait4, libc::SYS_waitid]);
    }
    #[cfg(target_arch = "x86_64")]
    if clock {
        notified.extend([libc::SYS_gettimeofday, libc::SYS_time]);
    }
    if egress {
        notified.push(libc::SYS_connect);
    }
    // sendto: notified only when args[4] (the address) is not null — 5 instructions.
    let sendto_checks = if egress { 5 } else { 0 };
    // Layout: arch check, syscall number, one jump per notified call, then the clock_gettime
    // clock-id check, then ALLOW and NOTIFY at the end.
    let mut prog = vec![ld(bpf::ARCH)];
    let n = notified.len();
    let clock_checks = match (clock, cpu) {
        (false, _) => 0,
        (true, false) => 5,
        (true, true) => 7 + 3,
    };
    // Instructions after the arch jump: ld nr, n jumps, sendto checks, clock checks,
    // ALLOW, NOTIFY.
    let total_after = 1 + n + sendto_checks + clock_checks + 2;
    prog.push(jeq(bpf::AUDIT_ARCH, 0, (total_after - 2) as u8)); // wrong arch: to ALLOW
    prog.push(ld(bpf::NR));
    for (i, nr) in notified.iter().enumerate() {
        let to_notify = (n - i - 1) + sendto_checks + clock_checks + 1;
        prog.push(jeq(*nr as u32, to_notify as u8, 0));
    }
    if egress {
        let c = clock_checks as u8;
        // Not sendto: on to the clock checks (the accumulator still holds the number).
        prog.push(jeq(libc::SYS_sendto as u32, 0, 4));
        prog.push(ld(bpf::arg_low(4))); // args[4], low half
        prog.push(jeq(0, 0, c + 3)); // non-zero: NOTIFY
        prog.push(ld(bpf::arg_low(4) + 4)); // high half
        prog.push(jeq(0, c, c + 1)); // null: ALLOW, else NOTIFY
    }
    if clock {
        let mut ids = vec![
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME_COARSE,
            libc::CLOCK_TAI,
        ];
        if cpu {
            ids.extend([
                libc::CLOCK_PROCESS_CPUTIME_ID,
                libc::CLOCK_THREAD_CPUTIME_ID,
            ]);
        }
        // A process's or thread's CPU clock by number (`clock_getcpuclockid`): negative,
        // its low two bits not 3 (3 is a clock named by a descriptor): 3 instructions.
        let by_number = if cpu { 3 } else { 0 };
        // Not clock_gettime: past the id checks, to ALLOW.
        prog.push(jeq(
            libc::SYS_clock_gettime as u32,
            0,
            (ids.len() + 1 + by_number) as u8,
        ));
        prog.push(ld(bpf::arg_low(0))); // args[0], low half: the clock id
        for (i, id) in ids.iter().enumerate() {
            prog.push(jeq(*id as u32, (ids.len() - i + by_number) as u8, 0));
        }
        if cpu {
            prog.push(bpf::jump(libc::BPF_JSET, 0x8000_0000, 0, 2)); // not negative: ALLOW
            prog.push(bpf::and(3));
            prog.push(jeq(3, 0, 1)); // a descriptor's clock: ALLOW, else NOTIFY
        }
    }
    prog.push(ret(libc::SECCOMP_RET_ALLOW));
    prog.push(ret(libc::SECCOMP_RET_USER_NOTIF));
    prog
}

/// `prog` behind a check that lets one `execve` through unrouted: the call whose path, `argv`
/// and `envp` pointers are `call` (the workload's own first exec, when its program needs
/// nothing at the exec: see `sandbox::program`). Every other call goes on to `prog`.
pub(crate) fn passing_exec(prog: &[libc::sock_filter], call: [u64; 3]) -> Vec<libc::sock_filter> {
    use crate::sys::bpf::{self, load as ld, ret};
    // nr, its check, arch, its check, two loads and two checks per pointer, ALLOW. The
    // number first: every other call costs two instructions more than `prog` alone (the
    // number means execve only with the arch checked, which comes before the pointers).
    const LEN: usize = 4 + 3 * 4 + 1;
    let mut out = Vec::with_capacity(LEN + prog.len());
    // A jump from the instruction about to be pushed to the first of `prog`.
    let to_prog = |out: &Vec<libc::sock_filter>| (LEN - out.len() - 1) as u8;
    let jeq = |k: u32, jf: u8| bpf::jump(libc::BPF_JEQ, k, 0, jf);
    out.push(ld(bpf::NR));
    out.push(jeq(libc::SYS_execve as u32, to_prog(&out)));
    out.push(ld(bpf::ARCH));
    out.push(jeq(bpf::AUDIT_ARCH, to_prog(&out)));
    for (i, value) in call.into_iter().enumerate() {
        let low = bpf::arg_low(i as u8);
        out.push(ld(low));
        out.push(jeq(value as u32, to_prog(&out)));
        out.push(ld(low + 4));
        out.push(jeq((value >> 32) as u32, to_prog(&out)));
    }
    out.push(ret(libc::SECCOMP_RET_ALLOW));
    debug_assert_eq!(out.len(), LEN);
    out.extend_from_slice(prog);
    out
}
