//! Leader/follower accept (issue 50): the proxy's connection threads take turns waiting on
//! the listener. One thread at a time leads: it waits for a connection, accepts it, hands
//! the lead to a waiting thread (a follower) and serves the connection itself; when done it
//! waits to lead again. A connection is served on the thread that accepted it, so no
//! hand-off between threads lies between `accept` and reading the request (the follower's
//! wake-up happens while the leader already serves). When no follower waits, the leader
//! starts a new thread to lead before serving; if none can be started, it refuses the
//! connection (its record says why) and leads again, so accepting never stops behind a
//! long connection. What bounds the work is unchanged: the connection caps (`admit`); the
//! threads are those serving (capped) plus at most [`KEEP`] followers and the leader.

use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{accept4, SockFlag};

use super::{lock, timing, Shared};

/// Followers kept at most, and how long one waits for the lead before it ends.
const KEEP: usize = 16;
const LINGER: Duration = Duration::from_secs(10);

/// The threads that accept and serve, and what they take turns on.
pub(super) struct Pool {
    shared: Arc<Shared>,
    listener: OwnedFd,
    /// Read end of the pipe that tells the leader to stop (never read: it stays readable,
    /// so every thread that leads after it sees it).
    wake: OwnedFd,
    name: &'static str,
    stack: usize,
    state: Mutex<State>,
    /// Signalled when the lead is free, the pool closes, or the last thread ends.
    turn: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    /// A thread waits on the listener.
    leading: bool,
    /// Threads waiting for the lead.
    followers: usize,
    /// Threads started and not yet ended.
    alive: usize,
    /// Stopping: no thread leads again.
    closed: bool,
    /// The accept index of the next connection.
    next_id: u64,
}

/// What the leader's wait ended with.
enum Led {
    Conn(TcpStream),
    Stop,
}

impl Pool {
    /// Starts the first leader on `listener` (non-blocking); `wake` readable stops the pool.
    pub(super) fn start(
        shared: Arc<Shared>,
        listener: OwnedFd,
        wake: OwnedFd,
        (name, stack): (&'static str, usize),
    ) -> std::io::Result<Arc<Pool>> {
        let pool = Arc::new(Pool {
            shared,
            listener,
            wake,
            name,
            stack,
            state: Mutex::default(),
            turn: Condvar::new(),
            threads: Mutex::default(),
        });
        pool.spawn()?;
        Ok(pool)
    }

    /// Starts a thread that leads and serves (counted alive before it runs).
    fn spawn(self: &Arc<Pool>) -> std::io::Result<()> {
        lock(&self.state).alive += 1;
        let pool = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(self.name.into())
            .stack_size(self.stack)
            .spawn(move || {
                pool.run();
                let mut st = lock(&pool.state);
                st.alive -= 1;
                pool.turn.notify_all();
            });
        match spawned {
            Ok(handle) => {
                let mut threads = lock(&self.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(handle);
                Ok(())
            }
            Err(e) => {
                lock(&self.state).alive -= 1;
                Err(e)
            }
        }
    }

    /// After the stop was signalled (`wake` written, live sockets shut down): waits for
    /// every thread to end and joins them. Not from a pool thread.
    pub(super) fn join(&self) {
        let mut st = lock(&self.state);
        while st.alive > 0 {
            st = self
                .turn
                .wait(st)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        drop(st);
        for t in std::mem::take(&mut *lock(&self.threads)) {
            let _ = t.join();
        }
    }

    /// A thread's life: wait for the lead, lead until a connection comes, serve it, again.
    fn run(self: &Arc<Pool>) {
        while self.take_lead() {
            let led = self.lead();
            let mut st = lock(&self.state);
            st.leading = false;
            let client = match led {
                Led::Stop => {
                    st.closed = true;
                    self.turn.notify_all();
                    return;
                }
                Led::Conn(client) => client,
            };
            let id = st.next_id;
            st.next_id += 1;
            let alone = st.followers == 0;
            self.turn.notify_one();
            drop(st);
            if alone {
                if let Err(e) = self.spawn() {
                    // Serving here would leave nobody accepting: refuse, and lead again.
                    super::refuse_unserved(&self.shared, id, client, &e);
                    continue;
                }
            }
            super::admit(&self.shared, id, client);
        }
    }

    /// Waits until this thread leads (true), or it is not needed: the pool closes, enough
    /// followers wait already, or none was needed for [`LINGER`] (false).
    fn take_lead(&self) -> bool {
        let mut st = lock(&self.state);
        loop {
            if st.closed {
                return false;
            }
            if !st.leading {
                st.leading = true;
                return true;
            }
            if st.followers >= KEEP {
                return false;
            }
            st.followers += 1;
            let (next, timeout) = self
                .turn
                .wait_timeout_while(st, LINGER, |s| s.leading && !s.closed)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            st = next;
            st.followers -= 1;
            if timeout.timed_out() && st.leading && !st.closed {
                return false;
            }
        }
    }

    /// The leader's wait: the next connection, or the stop.
    fn lead(&self) -> Led {
        loop {
            let mut fds = [
                PollFd::new(self.listener.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
            let woken = fds[1].revents().is_some_and(|r| !r.is_empty());
            if woken || lock(&self.shared.live).stopping {
                return Led::Stop;
            }
            match accept4(self.listener.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
                Ok(fd) => {
                    timing::mark("h.accepted");
                    // SAFETY: accept4 just returned this descriptor; nothing else owns it.
                    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                    return Led::Conn(TcpStream::from(owned));
                }
                // Taken by another holder of the socket, or gone before we took it.
                Err(Errno::EAGAIN | Errno::EINTR | Errno::ECONNABORTED | Errno::EPROTO) => {}
                // Out of descriptors or memory: let connections end before trying again;
                // anything else (not a listening socket any more): do not spin on it.
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}
