//! Exit statuses reprorun reports (documented in spec/sandbox.md, *Exit status*): every
//! error a command can end with names its [`Status`] through [`ExitStatus`], and the binary
//! turns that one value into the process's status.

/// How a run of reprorun ends, as its exit status says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A status passed on as it is: the workload's own (its exit status, or the 128+N the
    /// runtime already made of a death by signal N), or 0 for a command that did its job.
    Exited(i32),
    /// The workload was killed by signal N: 128+N.
    Signaled(i32),
    /// The workload ran past `--timeout` and was killed: 124.
    Timeout,
    /// reprorun could not set up or supervise the run, bad input included: 125.
    RuntimeError,
    /// The command was found but could not be executed: 126.
    NotExecutable,
    /// The command was not found: 127.
    NotFound,
}

impl Status {
    /// Success.
    pub const OK: Status = Status::Exited(0);

    /// The process exit status.
    pub const fn code(self) -> i32 {
        match self {
            Status::Exited(code) => code,
            Status::Signaled(signal) => 128 + signal,
            Status::Timeout => 124,
            Status::RuntimeError => 125,
            Status::NotExecutable => 126,
            Status::NotFound => 127,
        }
    }

    /// What a failed exec (`errno`) means, as a shell reports it: 127 when nothing is
    /// there, 126 otherwise.
    pub const fn exec_failed(errno: i32) -> Status {
        if errno == libc::ENOENT || errno == libc::ENOTDIR {
            Status::NotFound
        } else {
            Status::NotExecutable
        }
    }

    /// The status of a raw wait status (`waitpid`'s): the exit status, or 128+N.
    pub fn of_wait(status: libc::c_int) -> Status {
        if libc::WIFSIGNALED(status) {
            Status::Signaled(libc::WTERMSIG(status))
        } else {
            Status::Exited(libc::WEXITSTATUS(status))
        }
    }
}

/// An error that knows the exit status it ends reprorun with (125 unless it says otherwise).
pub trait ExitStatus {
    /// The status this error ends the command with.
    fn status(&self) -> Status {
        Status::RuntimeError
    }
}

/// The workload ran past `--timeout` and was killed.
pub const TIMEOUT: i32 = Status::Timeout.code();
/// reprorun could not set up or supervise the run (bad input included).
pub const RUNTIME_ERROR: i32 = Status::RuntimeError.code();
/// The command was found but could not be executed.
pub const NOT_EXECUTABLE: i32 = Status::NotExecutable.code();
/// The command was not found.
pub const NOT_FOUND: i32 = Status::NotFound.code();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_the_documented_numbers() {
        assert_eq!(Status::OK.code(), 0);
        assert_eq!(Status::Exited(3).code(), 3);
        assert_eq!(Status::Signaled(9).code(), 137);
        assert_eq!(Status::Timeout.code(), 124);
        assert_eq!(Status::RuntimeError.code(), 125);
        assert_eq!(Status::NotExecutable.code(), 126);
        assert_eq!(Status::NotFound.code(), 127);
    }

    #[test]
    fn a_failed_exec_follows_the_shell() {
        assert_eq!(Status::exec_failed(libc::ENOENT), Status::NotFound);
        assert_eq!(Status::exec_failed(libc::ENOTDIR), Status::NotFound);
        assert_eq!(Status::exec_failed(libc::EACCES), Status::NotExecutable);
        assert_eq!(Status::exec_failed(libc::ENOEXEC), Status::NotExecutable);
    }

    #[test]
    fn a_wait_status_gives_the_exit_status_or_128_plus_the_signal() {
        // Exit status 3: (3 << 8); killed by SIGKILL: 9.
        assert_eq!(Status::of_wait(3 << 8), Status::Exited(3));
        assert_eq!(Status::of_wait(9).code(), 137);
    }
}
