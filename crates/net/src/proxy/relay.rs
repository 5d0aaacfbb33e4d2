//! Relays a connection both ways with `splice(2)` through a pipe per direction (the bytes
//! never enter user space), in one thread: `poll` on both sockets, half-close on EOF, and
//! an idle timeout that only fires when neither direction has moved for that long.

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{splice, OFlag, SpliceFFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, MsgFlags};

use super::body::Framer;

/// The pipe size a bulk stream grows to: what a relay's pipes hold at most (the supervisor's
/// kernel memory, outside the sandbox's `--memory`), the same bound as each socket's buffers.
pub(super) const PIPE_SIZE: usize = 256 * 1024;

/// How much of a chunked request body is looked at per step.
const PEEK: usize = 64 * 1024;

/// What a relay moved, and how it ended.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Moved {
    /// Client to upstream.
    pub(super) up: u64,
    /// Upstream to client.
    pub(super) down: u64,
    /// Ended by the idle timeout.
    pub(super) idle: bool,
    /// Where the request's framing ended (absolute-form requests).
    pub(super) framer: Option<Framer>,
}

/// One direction: `src` → pipe → `dst`.
struct Half<'a> {
    src: &'a TcpStream,
    dst: &'a TcpStream,
    pipe_r: OwnedFd,
    pipe_w: OwnedFd,
    /// Bytes in the pipe not yet written to `dst`.
    pending: usize,
    /// The pipe's capacity.
    capacity: usize,
    eof: bool,
    done: bool,
    bytes: u64,
    /// Where the request ends, for the client's half of an absolute-form request: nothing
    /// after it is read from the client.
    framer: Option<Framer>,
    /// Ended by the framer: the end is not passed on (the upstream answers, then closes).
    held: bool,
    /// Bytes of a chunked body looked at before they are taken.
    peek: Vec<u8>,
}

impl<'a> Half<'a> {
    fn new(src: &'a TcpStream, dst: &'a TcpStream, framer: Option<Framer>) -> io::Result<Half<'a>> {
        let (pipe_r, pipe_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        // The default pipe: a short exchange costs no more (it grows on a bulk stream).
        let capacity = nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&pipe_w),
            nix::fcntl::FcntlArg::F_GETPIPE_SZ,
        )
        .map_or(64 * 1024, |n| n as usize);
        let ended = framer.as_ref().is_some_and(Framer::ended);
        let peek = match framer {
            Some(Framer::Chunked(_)) => vec![0; PEEK],
            _ => Vec::new(),
        };
        Ok(Half {
            src,
            dst,
            pipe_r,
            pipe_w,
            pending: 0,
            capacity,
            eof: ended,
            done: ended,
            bytes: 0,
            framer,
            held: ended,
            peek,
        })
    }

    /// What to wait for: room in `dst` while the pipe holds bytes, else bytes from `src`.
    fn interest(&self) -> Option<PollFd<'_>> {
        if self.done {
            None
        } else if self.pending > 0 {
            Some(PollFd::new(self.dst.as_fd(), PollFlags::POLLOUT))
        } else {
            Some(PollFd::new(self.src.as_fd(), PollFlags::POLLIN))
        }
    }

    /// A stream that filled the pipe is a bulk one: a larger pipe moves more per call
    /// (fewer wake-ups). Kept as it is when the kernel refuses.
    fn grow(&mut self) {
        if self.capacity >= PIPE_SIZE {
            return;
        }
        if let Ok(n) = nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&self.pipe_w),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE as libc::c_int),
        ) {
            self.capacity = n as usize;
        }
    }

    /// Moves what it can without blocking — reading while the pipe has room, writing
    /// while it holds bytes, until neither moves; whether anything moved.
    fn pump(&mut self) -> io::Result<bool> {
        let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
        let mut moved = false;
        loop {
            let mut progress = false;
            if self.pending < self.capacity && !self.eof {
                let room = self.capacity - self.pending;
                let (want, peeked) = self.allowance(room)?;
                match want {
                    0 => {}
                    _ => match splice(self.src, None, &self.pipe_w, None, want, flags) {
                        Ok(0) => self.eof = true,
                        Ok(n) => {
                            self.pending += n;
                            progress = true;
                            self.took(n, peeked);
                            if self.pending == self.capacity {
                                self.grow();
                            }
                        }
                        Err(Errno::EAGAIN | Errno::EINTR) => {}
                        Err(e) => return Err(e.into()),
                    },
                }
            }
            if self.pending > 0 {
                match splice(&self.pipe_r, None, self.dst, None, self.pending, flags) {
                    Ok(n) => {
                        self.pending -= n;
                        self.bytes += n as u64;
                        progress |= n > 0;
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            moved |= progress;
            if !progress {
                break;
            }
        }
        if self.eof && self.pending == 0 {
            // Pass the end of the stream on (not the end of a request: the client's stream
            // goes on), keep the other direction going.
            if !self.held {
                let _ = self.dst.shutdown(Shutdown::Write);
            }
            self.done = true;
        }
        Ok(moved)
    }

    /// How many bytes the next read may take (the request's framer decides), and whether
    /// they were looked at (`self.peek` holds them).
    fn allowance(&mut self, room: usize) -> io::Result<(usize, bool)> {
        let Some(framer) = &self.framer else {
            return Ok((room, false));
        };
        if let Some(n) = framer.blind(room) {
            return Ok((n, false));
        }
        let look = room.min(self.peek.len());
        let fd = std::os::fd::AsRawFd::as_raw_fd(self.src);
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        match recv(fd, &mut self.peek[..look], flags) {
            // The end of the stream: the splice that follows reads it.
            Ok(0) => Ok((room, false)),
            Ok(n) => Ok((framer.clone().take(&self.peek[..n]), true)),
            Err(Errno::EAGAIN | Errno::EINTR) => Ok((0, false)),
            Err(e) => Err(e.into()),
        }
    }

    /// Moves the framer past the `n` bytes just taken; once the request is complete, this
    /// half reads no more.
    fn took(&mut self, n: usize, peeked: bool) {
        let Some(framer) = &mut self.framer else {
            return;
        };
        if peeked {
            framer.take(&self.peek[..n]);
        } else {
            framer.advance(n);
        }
        if framer.ended() {
            self.eof = true;
            self.held = true;
        }
    }
}

/// Relays until both directions have ended, either side fails, or nothing has moved
/// either way for `idle`. With `framer` (an absolute-form request), the client's side ends
/// where the request does; the framer's final state is in the result.
pub(super) fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    idle: Duration,
    framer: Option<Framer>,
) -> io::Result<Moved> {
    client.set_nonblocking(true)?;
    upstream.set_nonblocking(true)?;
    let mut halves = [
        Half::new(client, upstream, framer)?,
        Half::new(upstream, client, None)?,
    ];
    let mut last = Instant::now();
    let mut moved = Moved::default();
    loop {
        if halves.iter().all(|h| h.done) {
            break;
        }
        let left = idle.saturating_sub(last.elapsed());
        if left.is_zero() {
            moved.idle = true;
            break;
        }
        let ready: Vec<bool> = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(2);
            let mut owners = Vec::with_capacity(2);
            for (i, h) in halves.iter().enumerate() {
                if let Some(fd) = h.interest() {
                    fds.push(fd);
                    owners.push(i);
                }
            }
            let timeout = PollTimeout::try_from(left.max(Duration::from_millis(1)))
                .unwrap_or(PollTimeout::MAX);
            match poll(&mut fds, timeout) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            let mut ready = vec![false; 2];
            for (fd, i) in fds.iter().zip(owners) {
                ready[i] = fd.revents().is_some_and(|r| !r.is_empty());
            }
            ready
        };
        let mut failed = false;
        for (h, r) in halves.iter_mut().zip(ready) {
            if !r {
                continue;
            }
            match h.pump() {
                Ok(true) => last = Instant::now(),
                Ok(false) => {}
                Err(_) => failed = true,
            }
        }
        if failed {
            break;
        }
    }
    moved.up = halves[0].bytes;
    moved.down = halves[1].bytes;
    moved.framer = halves[0].framer.take();
    Ok(moved)
}
