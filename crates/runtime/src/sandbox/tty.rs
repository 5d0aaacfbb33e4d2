//! The workload's terminal. A sandbox never shares the caller's terminal by default: the
//! workload runs without the caller's controlling terminal, in a process group of its own
//! (a session of its own in an OCI container), and where the caller's standard input, output or
//! error is a terminal, those descriptors are replaced by a pseudo-terminal of the sandbox's
//! own, relayed by the supervisor (as `docker run -t` does). Nothing inside can then change the
//! caller's terminal settings (`stty`), push input into it, or signal the caller's process
//! group. `--share-tty` hands the caller's terminal descriptors over as they are (still not
//! the workload's controlling terminal, with `TIOCSTI` refused by the seccomp profile).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::termios::{self, SetArg, Termios};

/// The tag of the packet init sends the pty's master on.
pub(super) const MASTER_TAG: u8 = b'T';

/// Which of the caller's descriptors 0, 1 and 2 are terminals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Terminals(pub [bool; 3]);

impl Terminals {
    /// The caller's standard descriptors that are terminals now.
    pub(crate) fn of_caller() -> Terminals {
        // SAFETY: isatty only inspects the descriptor numbers 0..3; an unused one answers 0.
        Terminals([0, 1, 2].map(|fd| unsafe { libc::isatty(fd) } == 1))
    }

    pub(crate) fn any(self) -> bool {
        self.0.iter().any(|t| *t)
    }
}

/// Opens a new pseudo-terminal through the `ptmx` at `ptmx` (the sandbox's own devpts once the
/// root is built, or the host's for a pins-only run): `(master, slave)`, both close-on-exec.
pub(super) fn open_pty(ptmx: &str) -> Result<(OwnedFd, OwnedFd), (&'static str, Errno)> {
    let raw = nix::fcntl::open(
        ptmx,
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| ("open /dev/ptmx", e))?;
    // SAFETY: open returned a fresh descriptor nothing else owns.
    let master = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: TIOCSPTLCK takes a pointer to an int; 0 unlocks the slave.
    let unlock = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &0 as *const i32) };
    Errno::result(unlock).map_err(|e| ("unlock the pty", e))?;
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: TIOCGPTPEER opens the slave of this master (no path lookup) and returns a new
    // descriptor, which we take ownership of below.
    let raw = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    let raw = Errno::result(raw).map_err(|e| ("open the pty", e))?;
    // SAFETY: the ioctl returned a fresh descriptor nothing else owns.
    let slave = unsafe { OwnedFd::from_raw_fd(raw) };
    Ok((master, slave))
}

/// In the workload before exec: a new session whose controlling terminal is `slave`, on the
/// standard descriptors `on` names.
pub(super) fn take_terminal(slave: &OwnedFd, on: Terminals) -> Result<(), Errno> {
    nix::unistd::setsid()?;
    // SAFETY: TIOCSCTTY takes an int argument; the descriptor is a valid terminal.
    Errno::result(unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSCTTY, 0) })?;
    for fd in 0..3 {
        if on.0[fd as usize] {
            nix::unistd::dup2(slave.as_raw_fd(), fd)?;
        }
    }
    Ok(())
}

/// How a process of the sandbox leaves the caller's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leave {
    /// A session of its own (`setsid`), as runc makes for a container's process.
    Session,
    /// A process group of its own in the caller's session, without the caller's controlling
    /// terminal: what `setsid` gives against the terminal and `kill(0, …)`, but no new
    /// session, which on a kernel with scheduler autogroups (most distributions) is a new
    /// scheduling group of its own, slow to get the CPU back under load (bubblewrap without
    /// `--new-session` stays in the caller's group as well).
    Group,
    /// A process group of its own, for a child of a process that has no controlling terminal
    /// any more (init's workload, after init's [`Leave::Group`]): nothing to drop.
    GroupOnly,
}

/// Out of the caller's process group and away from its terminal, as `how` says. A process
/// that already leads a session of its own (it took a pty as its terminal) stays as it is.
/// With [`Leave::Group`], a controlling terminal is dropped with `TIOCNOTTY`, which for a
/// process that does not lead its session clears that process's terminal only (the caller
/// keeps it); whatever the process forks then has none, `/dev/tty` fails with ENXIO, and
/// only a session leader can take a terminal again. Where the terminal cannot be dropped so,
/// a new session after all.
pub(crate) fn leave_caller(how: Leave) -> Result<(), Errno> {
    use nix::unistd::{getpid, getsid, setpgid, setsid, Pid};
    if getsid(None)? == getpid() {
        return Ok(());
    }
    match how {
        Leave::GroupOnly => setpgid(Pid::from_raw(0), Pid::from_raw(0)),
        Leave::Group if drop_controlling_terminal().is_ok() => {
            setpgid(Pid::from_raw(0), Pid::from_raw(0))
        }
        _ => setsid().map(drop),
    }
}

/// Drops this process's controlling terminal, if it has one (ENXIO from `/dev/tty`: none).
fn drop_controlling_terminal() -> Result<(), Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let raw = match nix::fcntl::open("/dev/tty", flags, nix::sys::stat::Mode::empty()) {
        Err(Errno::ENXIO) => return Ok(()),
        other => other?,
    };
    // SAFETY: open returned a fresh descriptor nothing else owns.
    let tty = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: TIOCNOTTY takes no argument; the descriptor is this process's terminal.
    Errno::result(unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCNOTTY) }).map(drop)
}

/// Copies the window size of the caller's terminal `from` to the pty `to`.
fn copy_winsize(from: RawFd, to: RawFd) {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills a winsize we own; TIOCSWINSZ reads it. Errors leave both alone.
    unsafe {
        if libc::ioctl(from, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(to, libc::TIOCSWINSZ, &ws);
        }
    }
}

/// The supervisor's side: relays the caller's terminal input to the pty and the pty's output
/// to the caller's terminal. While it lives, the caller's terminal (standard input) is in raw
/// mode, so ^C, ^Z and the like reach the sandbox's terminal as bytes and its own line
/// discipline signals the workload; dropping the relay restores the caller's settings.
pub(super) struct Relay {
    master: OwnedFd,
    /// The caller's terminal the workload's input comes from (fd 0), while it has more.
    input: Option<RawFd>,
    /// Where the pty's output goes: the caller's first terminal among 1, 2 and 0.
    output: RawFd,
    /// The caller's terminal settings, restored on drop.
    saved: Option<Termios>,
    master_open: bool,
}

impl Relay {
    pub(crate) fn new(master: OwnedFd, ttys: Terminals) -> Relay {
        let output = [1, 2, 0].into_iter().find(|fd| ttys.0[*fd as usize]);
        let output = output.unwrap_or(1);
        copy_winsize(output, master.as_raw_fd());
        let mut saved = None;
        let input = ttys.0[0].then_some(0);
        if input.is_some() {
            // SAFETY: fd 0 is the caller's terminal and stays open for the relay's lifetime.
            let stdin = unsafe { BorrowedFd::borrow_raw(0) };
            if let Ok(t) = termios::tcgetattr(stdin) {
                let mut raw = t.clone();
                termios::cfmakeraw(&mut raw);
                if termios::tcsetattr(stdin, SetArg::TCSADRAIN, &raw).is_ok() {
                    saved = Some(t);
                }
            }
        }
        Relay {
            master,
            input,
            output,
            saved,
            master_open: true,
        }
    }

    /// The descriptors to poll for input: `(caller's terminal, pty master)`, each while open.
    pub(crate) fn sources(&self) -> (Option<BorrowedFd<'_>>, Option<BorrowedFd<'_>>) {
        // SAFETY: the input descriptor is the caller's fd 0, open for the whole run.
        let input = self.input.map(|fd| unsafe { BorrowedFd::borrow_raw(fd) });
        (input, self.master_open.then(|| self.master.as_fd()))
    }

    /// The caller's terminal has input (or hung up): pass it on.
    pub(crate) fn pump_input(&mut self) {
        let Some(fd) = self.input else { return };
        let mut buf = [0u8; 4096];
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) | Err(Errno::EIO | Errno::EBADF) => self.input = None,
            Ok(n) => write_all(self.master.as_raw_fd(), &buf[..n]),
            Err(_) => {}
        }
    }

    /// The pty has output (or every slave closed): copy what is there to the caller.
    pub(crate) fn pump_output(&mut self) {
        let mut buf = [0u8; 16384];
        match nix::unistd::read(self.master.as_raw_fd(), &mut buf) {
            Ok(0) | Err(Errno::EIO | Errno::EBADF) => self.master_open = false,
            Ok(n) => write_all(self.output, &buf[..n]),
            Err(_) => {}
        }
    }

    /// After the workload ended: copies whatever output is left, without waiting.
    pub(crate) fn drain(&mut self) {
        let fd = self.master.as_raw_fd();
        // SAFETY: F_SETFL on our own descriptor only changes its status flags.
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
        let mut buf = [0u8; 16384];
        while let Ok(n @ 1..) = nix::unistd::read(fd, &mut buf) {
            write_all(self.output, &buf[..n]);
        }
        self.master_open = false;
    }

    /// The caller's terminal changed size (SIGWINCH): the pty follows, and its line discipline
    /// signals the workload.
    pub(crate) fn resize(&self) {
        copy_winsize(self.output, self.master.as_raw_fd());
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            // SAFETY: fd 0 is the caller's terminal, as when the settings were saved.
            let stdin = unsafe { BorrowedFd::borrow_raw(0) };
            let _ = termios::tcsetattr(stdin, SetArg::TCSADRAIN, t);
        }
    }
}

/// Writes all of `bytes` to `fd` (a terminal: short writes and EINTR are retried; a broken
/// one drops the rest).
fn write_all(fd: RawFd, mut bytes: &[u8]) {
    // SAFETY: the descriptor is open for the relay's lifetime.
    let out = unsafe { BorrowedFd::borrow_raw(fd) };
    while !bytes.is_empty() {
        match nix::unistd::write(out, bytes) {
            Ok(n) if n > 0 => bytes = &bytes[n..],
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pty_relays_and_gives_the_slave_its_own_settings() {
        let (master, slave) = open_pty("/dev/ptmx").expect("pty");
        // The slave is a terminal of its own: changing it leaves the master's peer alone.
        let mut t = termios::tcgetattr(slave.as_fd()).unwrap();
        t.local_flags.remove(termios::LocalFlags::ECHO);
        termios::tcsetattr(slave.as_fd(), SetArg::TCSANOW, &t).unwrap();
        write_all(slave.as_raw_fd(), b"hi\n");
        let mut buf = [0u8; 16];
        let n = nix::unistd::read(master.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hi\r\n");
    }
}
