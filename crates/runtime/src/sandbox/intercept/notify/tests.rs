use super::*;

/// The action of a classic-BPF seccomp program for (arch, nr, args[0]).
fn verdict(prog: &[libc::sock_filter], arch: u32, nr: i64, arg0: u64) -> u32 {
    verdict4(prog, arch, nr, arg0, 0)
}

fn verdict4(prog: &[libc::sock_filter], arch: u32, nr: i64, arg0: u64, arg4: u64) -> u32 {
    verdict_args(prog, arch, nr, [arg0, 0, 0, 0, arg4, 0])
}

fn verdict_args(prog: &[libc::sock_filter], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
    let prog = prog.iter().map(|i| (i.code, i.jt, i.jf, i.k));
    crate::sys::bpf::run(prog, arch, nr, args).0
}

#[cfg(target_arch = "x86_64")]
const X86_64: u32 = 0xc000_003e;
const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;

#[cfg(target_arch = "x86_64")]
#[test]
fn filter_routes_exactly_the_documented_calls() {
    let always = [
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_uname,
        libc::SYS_sysinfo,
        libc::SYS_sched_getaffinity,
    ];
    let cases = [
        (None, false, true),
        (Some(ClockMode::StartAt), true, true),
        (Some(ClockMode::Frozen), true, false),
        (Some(ClockMode::Tick { step_ns: 1 }), false, true),
    ];
    for ((clock, seeded, sorted), egress) in cases.into_iter().flat_map(|c| [(c, false), (c, true)])
    {
        let prog = filter(clock, seeded, sorted, egress);
        let v = |nr: i64, arg0: u64| verdict(&prog, X86_64, nr, arg0);
        // --net allow: connect, and sendto with an address (low or high half set).
        let sendto = |addr: u64| verdict4(&prog, X86_64, libc::SYS_sendto, 3, addr);
        assert_eq!(v(libc::SYS_connect, 3) == NOTIFY, egress);
        assert_eq!(sendto(0x7ffd_0000_1000) == NOTIFY, egress);
        assert_eq!(sendto(0x1000) == NOTIFY, egress);
        assert_eq!(sendto(0x7ffd_0000_0000) == NOTIFY, egress);
        assert_eq!(sendto(0), ALLOW, "send() on a connected socket");
        for nr in always {
            assert_eq!(v(nr, 0), NOTIFY, "{nr} with {clock:?}");
        }
        for nr in [libc::SYS_getdents64, libc::SYS_getdents] {
            assert_eq!(v(nr, 0) == NOTIFY, sorted, "{nr}");
        }
        assert_eq!(v(libc::SYS_getrandom, 0) == NOTIFY, seeded);
        // Waits, so that children are counted before they are reaped (lineage keys).
        assert_eq!(v(libc::SYS_wait4, u64::MAX) == NOTIFY, seeded);
        assert_eq!(v(libc::SYS_waitid, 0) == NOTIFY, seeded);
        // Process creation is never routed (a routed fork could fail with EINTR).
        for nr in [
            libc::SYS_clone,
            libc::SYS_clone3,
            libc::SYS_fork,
            libc::SYS_vfork,
        ] {
            assert_eq!(v(nr, libc::SIGCHLD as u64), ALLOW, "{nr}");
        }
        for nr in [libc::SYS_read, libc::SYS_openat, libc::SYS_clock_nanosleep] {
            assert_eq!(v(nr, 0), ALLOW);
        }
        let faked = clock.is_some();
        let cpu = matches!(clock, Some(ClockMode::Frozen | ClockMode::Tick { .. }));
        let cg = libc::SYS_clock_gettime;
        assert_eq!(v(cg, libc::CLOCK_REALTIME as u64) == NOTIFY, faked);
        assert_eq!(v(cg, libc::CLOCK_TAI as u64) == NOTIFY, faked);
        assert_eq!(v(cg, libc::CLOCK_MONOTONIC as u64), ALLOW);
        assert_eq!(v(cg, libc::CLOCK_PROCESS_CPUTIME_ID as u64) == NOTIFY, cpu);
        assert_eq!(v(cg, libc::CLOCK_THREAD_CPUTIME_ID as u64) == NOTIFY, cpu);
        // CPU clocks by number: process 1's, thread 7's (bit 2); not a descriptor's (3).
        let process = |pid: i32| (!pid << 3 | 2) as u32 as u64;
        assert_eq!(v(cg, process(1)) == NOTIFY, cpu);
        assert_eq!(v(cg, process(7) | 4) == NOTIFY, cpu);
        assert_eq!(v(cg, (!5i32 << 3 | 3) as u32 as u64), ALLOW);
        assert_eq!(v(cg, libc::CLOCK_BOOTTIME as u64), ALLOW);
        assert_eq!(v(libc::SYS_gettimeofday, 0) == NOTIFY, faked);
        assert_eq!(v(libc::SYS_time, 0) == NOTIFY, faked);
        // Another architecture's calls are not ours to interpret.
        assert_eq!(verdict(&prog, 0x4000_0003, libc::SYS_execve, 0), ALLOW);
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn only_the_workload_s_own_exec_passes_unrouted() {
    let call = [0x7f12_3456_7000, 0x7f12_3456_7010, 0x7f12_3456_7040];
    let inner = filter(Some(ClockMode::StartAt), true, true, true);
    let prog = passing_exec(&inner, call);
    let v = |nr: i64, args: [u64; 6]| verdict_args(&prog, X86_64, nr, args);
    let with = |c: [u64; 3]| [c[0], c[1], c[2], 0, 0, 0];
    assert_eq!(v(libc::SYS_execve, with(call)), ALLOW);
    // Any other pointer, in either half of any of the three, is routed as before.
    for i in 0..3 {
        for flip in [1u64, 1 << 12, 1 << 32, 1 << 45] {
            let mut other = call;
            other[i] ^= flip;
            assert_eq!(v(libc::SYS_execve, with(other)), NOTIFY, "{i} {flip:#x}");
        }
    }
    // The same pointers to execveat (whose first argument is a directory), or from
    // another ABI, are not the call.
    assert_eq!(v(libc::SYS_execveat, with(call)), NOTIFY);
    let x32 = (libc::SYS_execve as u32 | crate::sys::bpf::X32_BIT) as i64;
    assert_eq!(
        verdict_args(&prog, X86_64, x32, with(call)),
        verdict_args(&inner, X86_64, x32, with(call))
    );
    assert_eq!(verdict_args(&prog, 0x4000_0003, 11, with(call)), ALLOW);
    // Everything else gets exactly the inner filter's verdict.
    for nr in 0..460 {
        for args in [
            [0u64; 6],
            with(call),
            [libc::CLOCK_REALTIME as u64, 0, 0, 0, 1, 0],
        ] {
            if nr == libc::SYS_execve && args == with(call) {
                continue;
            }
            assert_eq!(
                v(nr, args),
                verdict_args(&inner, X86_64, nr, args),
                "{nr} {args:?}"
            );
        }
    }
}

#[test]
fn sysinfo_is_answered_with_as_many_bytes_as_the_kernel_writes() {
    // The kernel fills its whole struct (padding zeroed): the last byte it wrote is the
    // last one that is not the fill.
    let mut buf = [0xaau8; 1024];
    // SAFETY: sysinfo writes one kernel struct sysinfo, far smaller than `buf`.
    let ret = unsafe { libc::syscall(libc::SYS_sysinfo, buf.as_mut_ptr()) };
    assert_eq!(ret, 0);
    let written = buf.iter().rposition(|b| *b != 0xaa).unwrap() + 1;
    assert_eq!(calls::KERNEL_SYSINFO_LEN, written);
}
