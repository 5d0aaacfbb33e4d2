//! Which signals reach the workload, and the mask and disposition changes around `exec`.

use nix::sys::signal::{
    kill, killpg, sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal,
};
use nix::unistd::Pid;

/// Signals the supervisor and init pass on to the workload.
pub(crate) const FORWARDED: [Signal; 9] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
    Signal::SIGPWR,
    Signal::SIGALRM,
];

/// The forwarded signals, the real-time ones (34 to 64, forwarded too, as runc
/// does) plus SIGCHLD: blocked, and read through a signalfd.
pub(crate) fn supervised_set() -> SigSet {
    let mut set = SigSet::empty();
    for sig in FORWARDED {
        set.add(sig);
    }
    set.add(Signal::SIGCHLD);
    let mut raw: libc::sigset_t = *set.as_ref();
    // Signals 34 to 64 whichever libc reprorun is built with (`sys::SIGRT_FIRST`): a
    // caller's `kill -RTMIN` sends 34, which musl's sigaddset refuses. Bits 33 to 63 of the
    // mask's first word, as the kernel reads it. (musl unblocks 34 again in a process that
    // starts a thread, for its own use: the exec supervisor does not keep it; init does.)
    let rt = (crate::sys::SIGRT_FIRST..=crate::sys::SIGRT_LAST)
        .fold(0u64, |m, signo| m | 1 << (signo - 1));
    // SAFETY: sigset_t begins with the kernel's 64-bit mask (glibc and musl alike: an array
    // of unsigned longs, at least 1024 bits), which this only sets bits of.
    unsafe { *(&mut raw as *mut libc::sigset_t).cast::<u64>() |= rt };
    // SAFETY: `raw` was initialised from a valid SigSet and only had signal bits set since.
    unsafe { SigSet::from_sigset_t_unchecked(raw) }
}

/// `kill(2)` by number (real-time signals have no [`Signal`] value).
fn kill_raw(pid: Pid, signo: u32) {
    // SAFETY: kill(2) takes plain integers; a failure only drops the signal.
    unsafe { libc::kill(pid.as_raw(), signo as libc::c_int) };
}

/// Blocks the supervised set; children created afterwards inherit the mask.
pub(crate) fn block_supervised() -> nix::Result<()> {
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&supervised_set()), None)
}

/// Undoes what the runtime changed before handing over to the workload: an empty mask, and
/// SIGPIPE back to its default (Rust ignores it at start-up; an exec'd program would inherit that).
pub(crate) fn reset_for_exec() -> nix::Result<()> {
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: installing SIG_DFL runs no code of ours in signal context.
    unsafe { sigaction(Signal::SIGPIPE, &dfl) }?;
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
}

/// Whether a received signal should be passed on: every supervised one but SIGCHLD. The
/// workload runs in a session of its own, so a terminal's ^C (sent by the kernel to the
/// caller's foreground process group) reaches it only this way.
pub(crate) fn should_forward(signo: u32) -> bool {
    signo != Signal::SIGCHLD as u32
}

/// `si_code` of a signal the kernel generated itself, e.g. for a terminal's ^C.
const SI_KERNEL: i32 = 0x80;
/// `si_code` of a signal sent with `rt_sigqueueinfo`: how the supervisor tells init that a
/// signal came from the caller's terminal.
const SI_QUEUE: i32 = -1;

/// Where a signal goes: a terminal's signal to the workload's whole process group (as the
/// terminal would have sent it, e.g. `sh -c 'sleep 9'` and its `sleep` both get ^C), any
/// other to the workload process alone.
fn for_group(code: i32) -> bool {
    code == SI_KERNEL || code == SI_QUEUE
}

/// In the supervisor: passes signal `signo` (received with `code`) on to `child`. When
/// `child` is the workload itself (a pins-only run) a terminal's signal goes to its group;
/// when it is init, it is queued with [`SI_QUEUE`] so init can do the same.
pub(crate) fn pass_on(child: Pid, signo: u32, code: i32, child_is_workload: bool) {
    let Ok(sig) = Signal::try_from(signo as i32) else {
        // A real-time signal: to the child, as sent.
        kill_raw(child, signo);
        return;
    };
    if code != SI_KERNEL {
        let _ = kill(child, sig);
    } else if child_is_workload {
        let _ = killpg(child, sig);
    } else {
        // SAFETY: an all-zero siginfo_t is valid; the kernel reads signo, code and the
        // sender fields it does not check for a negative (user) si_code.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        info.si_signo = signo as i32;
        info.si_code = SI_QUEUE;
        // SAFETY: rt_sigqueueinfo reads the siginfo_t we own; a failure only drops the signal.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_sigqueueinfo,
                child.as_raw(),
                signo as libc::c_int,
                &info as *const libc::siginfo_t,
            )
        };
        if r != 0 {
            let _ = kill(child, sig);
        }
    }
}

/// In init: passes a signal on to the workload (a session leader: its pid is its group's).
pub(crate) fn pass_to_workload(workload: Pid, signo: u32, code: i32) {
    let Ok(sig) = Signal::try_from(signo as i32) else {
        kill_raw(workload, signo);
        return;
    };
    if for_group(code) {
        let _ = killpg(workload, sig);
    } else {
        let _ = kill(workload, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_real_time_signal_the_kernel_has_is_supervised_whatever_the_libc() {
        let set = supervised_set();
        let raw: &libc::sigset_t = set.as_ref();
        // SAFETY: sigismember reads the sigset_t we hold.
        let member = |signo| unsafe { libc::sigismember(raw, signo) } == 1;
        for signo in 34..=64 {
            assert!(member(signo), "signal {signo}");
        }
        assert!(member(libc::SIGCHLD) && member(libc::SIGTERM) && member(libc::SIGWINCH));
        // Not the ones only the kernel or the runtime itself may act on.
        assert!(!member(libc::SIGKILL) && !member(libc::SIGSTOP) && !member(libc::SIGSEGV));
    }
}
