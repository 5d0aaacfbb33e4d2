//! Which signals reach the workload, and the mask and disposition changes around `exec`.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};

/// Signals the supervisor and init pass on to the workload.
pub const FORWARDED: [Signal; 9] = [
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

/// `si_code` of a signal the kernel generated itself, e.g. for a terminal's ^C. Such a signal
/// already went to the whole foreground process group, the workload included: passing it on
/// would deliver it twice.
pub const SI_KERNEL: i32 = 0x80;

/// The forwarded signals plus SIGCHLD: blocked, and read through a signalfd.
pub fn supervised_set() -> SigSet {
    let mut set = SigSet::empty();
    for sig in FORWARDED {
        set.add(sig);
    }
    set.add(Signal::SIGCHLD);
    set
}

/// Blocks the supervised set; children created afterwards inherit the mask.
pub fn block_supervised() -> nix::Result<()> {
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&supervised_set()), None)
}

/// Undoes what the runtime changed before handing over to the workload: an empty mask, and
/// SIGPIPE back to its default (Rust ignores it at start-up; an exec'd program would inherit that).
pub fn reset_for_exec() -> nix::Result<()> {
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: installing SIG_DFL runs no code of ours in signal context.
    unsafe { sigaction(Signal::SIGPIPE, &dfl) }?;
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
}

/// Whether a received signal should be passed on (it was sent by a process, not the kernel).
pub fn should_forward(signo: u32, code: i32) -> bool {
    signo != Signal::SIGCHLD as u32 && code != SI_KERNEL
}
