//! The command's standard error on its way to the caller's, with the last bytes kept for
//! the offline hint's evidence (`evidence`). Used only where that hint could be given (the
//! network off, no mirror, a package client on the command line) and only when the caller's
//! standard error is not a terminal: a terminal reaches the workload through the sandbox's
//! own pseudo-terminal, which is left as it is, so at a terminal no hint is given.

use std::io::{IsTerminal, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// How much of the end of the output is kept (a client's error is at its end).
const KEPT: usize = 64 << 10;
/// How long, after the run, the copy may take to drain what is left in the pipe (a process
/// that outlived the sandbox and holds the pipe open would make it wait for ever).
const DRAIN: Duration = Duration::from_secs(2);

/// A pipe whose write end is the workload's standard error and whose read end a thread
/// copies to the caller's, keeping the last [`KEPT`] bytes.
pub struct StderrTap {
    write: OwnedFd,
    kept: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl StderrTap {
    /// A tap, unless the caller's standard error is a terminal (then `None`).
    pub fn start() -> std::io::Result<Option<StderrTap>> {
        if std::io::stderr().is_terminal() {
            return Ok(None);
        }
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let kept = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let shared = Arc::clone(&kept);
        std::thread::Builder::new()
            .name("stderr-tap".into())
            .spawn(move || {
                copy(std::fs::File::from(read), &shared);
                let _ = tx.send(());
            })?;
        Ok(Some(StderrTap { write, kept, done }))
    }

    /// The descriptor the workload writes its standard error to.
    pub fn stderr(&self) -> BorrowedFd<'_> {
        self.write.as_fd()
    }

    /// After the run: closes the write end, lets the copy drain (for [`DRAIN`] at most) and
    /// returns the kept end of the output.
    pub fn finish(self) -> Vec<u8> {
        drop(self.write);
        let _ = self.done.recv_timeout(DRAIN);
        let kept = self.kept.lock().map(|k| k.clone());
        kept.unwrap_or_default()
    }
}

/// Copies `read` to the caller's standard error until end of file, keeping the last
/// [`KEPT`] bytes in `kept`. A write that fails (the caller's end closed) stops the copying
/// to it, not the reading (the workload must not block on a full pipe).
fn copy(mut read: std::fs::File, kept: &Mutex<Vec<u8>>) {
    let mut buf = vec![0u8; 16 << 10];
    let mut out = Some(std::io::stderr());
    loop {
        let n = match read.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if let Some(o) = out.as_mut() {
            if o.write_all(&buf[..n]).is_err() {
                out = None;
            }
        }
        if let Ok(mut k) = kept.lock() {
            k.extend_from_slice(&buf[..n]);
            if k.len() > KEPT {
                let cut = k.len() - KEPT;
                k.drain(..cut);
            }
        }
    }
}
