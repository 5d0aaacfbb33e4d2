//! A terminated connection (`--inject-env`): TLS with the client under a certificate of the
//! run's CA, TLS with the upstream verified against the host's trust store (or
//! `--upstream-ca`), and between them the client's requests rewritten (`inject`) and the
//! upstream's bytes passed as they are (streamed and chunked responses, websocket frames).
//! ALPN offers HTTP/1.1 only, on both sides.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use rustls::{ClientConnection, Connection, ServerConnection};
use rustls_pki_types::ServerName;

use super::inject::Rewriter;
use super::tap::Tap;
use crate::allow::Target;
use crate::intercept::Intercept;

/// Plaintext read at once from either side.
const CHUNK: usize = 64 * 1024;

/// TLS bytes read from a socket at once (a bulk download's records, several per syscall).
const CIPHER: usize = 128 * 1024;

/// What a terminated connection moved, and which secrets and placeholders it saw.
#[derive(Default)]
pub(super) struct Terminated {
    pub(super) up: u64,
    pub(super) down: u64,
    pub(super) injected: Vec<String>,
    pub(super) seen: Vec<(String, &'static str)>,
    /// Why it ended early, if it did.
    pub(super) failed: Option<String>,
}

/// Limits of one terminated connection.
pub(super) struct Limits {
    pub(super) handshake: Duration,
    pub(super) idle: Duration,
    pub(super) head_cap: usize,
}

/// Serves `client` (whose first bytes, the ClientHello, are `hello`) as `name:port`.
pub(super) fn serve(
    intercept: &Intercept,
    (client, upstream): (&TcpStream, &TcpStream),
    (target, port): (&Target, u16),
    hello: &[u8],
    limits: &Limits,
    tap: Option<&mut Tap<'_>>,
) -> Terminated {
    let mut done = Terminated::default();
    let Target::Name(name) = target else {
        done.failed = Some("TLS termination needs a host name".into());
        return done;
    };
    // Both handshakes at once, in this thread: the upstream's ClientHello goes out first,
    // its answer travels while the client's handshake is done, and is read after it (a
    // thread per connection for the upstream's handshake cost a spawn and a join on every
    // request; `runtime-tests/bench/RESULTS.md`).
    let begun = begin_upstream(intercept, name, upstream, limits.handshake);
    let server =
        handshake_client(intercept, name, client, hello, limits.handshake).map(Connection::Server);
    let up = match (&server, begun) {
        (Ok(_), Ok(conn)) => finish_upstream(conn, name, upstream),
        (_, Err(why)) => Err(why),
        (Err(_), Ok(_)) => {
            // No client to serve: break off the upstream's handshake.
            let _ = upstream.shutdown(Shutdown::Both);
            Err("the client's handshake failed".into())
        }
    };
    let mut server = match server {
        Ok(s) => s,
        Err(why) => {
            done.failed = Some(why);
            return done;
        }
    };
    let mut up = match up {
        Ok(c) => c,
        Err(why) => {
            let body = format!("reprorun: {why}\n");
            let answer = format!(
                "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = server.writer().write_all(answer.as_bytes());
            server.send_close_notify();
            let mut c = client;
            let _ = server.complete_io(&mut c);
            done.failed = Some(why);
            return done;
        }
    };
    let mut rewriter = Rewriter::new(&intercept.secrets, target, port, limits.head_cap);
    let ended = pump(
        (client, &mut server),
        (upstream, &mut up),
        (&mut rewriter, tap),
        limits.idle,
        &mut done,
    );
    if let Err(why) = ended {
        done.failed = Some(why);
    }
    done.injected = rewriter.injected.into_iter().collect();
    done.seen = rewriter.seen.into_iter().collect();
    done
}

/// The client's handshake, under a certificate for `name` (`hello`: its first bytes, the
/// ClientHello already read); also what a replayed connection answers behind.
pub(super) fn handshake_client(
    intercept: &Intercept,
    name: &str,
    client: &TcpStream,
    mut hello: &[u8],
    timeout: Duration,
) -> Result<ServerConnection, String> {
    let config = intercept
        .server_for(name)
        .map_err(|e| format!("no certificate for {name}: {e}"))?;
    let mut server = ServerConnection::new(config).map_err(|e| format!("TLS: {e}"))?;
    while !hello.is_empty() {
        server
            .read_tls(&mut hello)
            .map_err(|e| format!("TLS: {e}"))?;
        server
            .process_new_packets()
            .map_err(|e| format!("TLS with the client: {e}"))?;
    }
    let _ = client.set_read_timeout(Some(timeout));
    let _ = client.set_write_timeout(Some(timeout));
    let mut c = client;
    while server.is_handshaking() {
        server.complete_io(&mut c).map_err(|e| {
            format!(
                "TLS handshake with the client failed: {e} (a client that pins certificates, or does not trust the run's CA, refuses the proxy's)"
            )
        })?;
    }
    Ok(server)
}

/// Starts the upstream's handshake: its ClientHello written (a few hundred bytes: the
/// socket takes them at once).
fn begin_upstream(
    intercept: &Intercept,
    name: &str,
    upstream: &TcpStream,
    timeout: Duration,
) -> Result<ClientConnection, String> {
    let server_name =
        ServerName::try_from(name.to_string()).map_err(|e| format!("server name {name}: {e}"))?;
    let mut conn = ClientConnection::new(Arc::clone(&intercept.upstream), server_name)
        .map_err(|e| format!("TLS: {e}"))?;
    let _ = upstream.set_read_timeout(Some(timeout));
    let _ = upstream.set_write_timeout(Some(timeout));
    let mut u = upstream;
    while conn.wants_write() {
        conn.write_tls(&mut u)
            .map_err(|e| format!("TLS with the upstream {name} failed: {e}"))?;
    }
    Ok(conn)
}

/// Ends the upstream's handshake, its certificate verified for `name`. Its last message
/// (TLS 1.3: the client's Finished) stays queued: `pump` writes it with the first request,
/// one segment and one wake-up of the server instead of two.
fn finish_upstream(
    mut conn: ClientConnection,
    name: &str,
    upstream: &TcpStream,
) -> Result<Connection, String> {
    let failed = |e: &dyn std::fmt::Display| format!("TLS with the upstream {name} failed: {e}");
    let mut u = upstream;
    while conn.is_handshaking() {
        while conn.wants_write() {
            conn.write_tls(&mut u).map_err(|e| failed(&e))?;
        }
        match conn.read_tls(&mut u) {
            Ok(0) => return Err(failed(&"closed during the handshake")),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed(&e)),
        }
        if let Err(e) = conn.process_new_packets() {
            // The alert that says why, if it can go.
            let _ = conn.write_tls(&mut u);
            return Err(failed(&e));
        }
    }
    Ok(Connection::Client(conn))
}

/// One direction's state: TLS records read from the socket and not yet given to rustls,
/// and plaintext read and not yet accepted by the other side's TLS.
#[derive(Default)]
struct Flow {
    /// Bytes from the socket, read [`CIPHER`] at a time (rustls' own `read_tls` reads at
    /// most 4 KiB a call: a syscall per 4 KiB); `cipher[at..end]` is not yet given to
    /// rustls. Allocated on the first read.
    cipher: Vec<u8>,
    at: usize,
    end: usize,
    /// Plaintext for the other side's TLS; `pending[sent..]` is not yet taken (emptied once
    /// all is).
    pending: Vec<u8>,
    sent: usize,
    /// The source's socket ended (no more TLS to read).
    tls_done: bool,
    /// The source's stream ended (close_notify or the socket's end) and its plaintext was read.
    eof: bool,
    /// The source's socket ended without close_notify: the stream may have been cut short,
    /// so the end is passed on the same way (the socket's end, no close_notify), and the
    /// other side's TLS sees a truncation as it would without the proxy.
    truncated: bool,
    /// The end was passed on to the other side.
    closed: bool,
}

/// Moves plaintext both ways until both have ended, either fails, or nothing moved for
/// `idle`.
fn pump(
    (client, server): (&TcpStream, &mut Connection),
    (upstream, up): (&TcpStream, &mut Connection),
    (rewriter, mut tap): (&mut Rewriter<'_>, Option<&mut Tap<'_>>),
    idle: Duration,
    done: &mut Terminated,
) -> Result<(), String> {
    client.set_nonblocking(true).map_err(|e| e.to_string())?;
    upstream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let (mut to_up, mut to_down) = (Flow::default(), Flow::default());
    let mut last = Instant::now();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut moved = false;
        // Client → upstream, rewritten.
        // The tap (`--net-record`) sees what the client sent, before any value is put back.
        moved |= step(client, server, &mut to_up, &mut buf, &mut |bytes, out| {
            if let Some(t) = tap.as_deref_mut() {
                t.client(bytes);
            }
            rewriter.feed(bytes, out)
        })?;
        moved |= deliver(upstream, up, &mut to_up, &mut done.up)?;
        // Upstream → client, as it is.
        moved |= step(upstream, up, &mut to_down, &mut buf, &mut |bytes, out| {
            if let Some(t) = tap.as_deref_mut() {
                t.upstream(bytes);
            }
            out.extend_from_slice(bytes);
            Ok(())
        })?;
        moved |= deliver(client, server, &mut to_down, &mut done.down)?;
        if to_up.closed && to_down.closed {
            return Ok(());
        }
        if moved {
            last = Instant::now();
            continue;
        }
        let left = idle.saturating_sub(last.elapsed());
        if left.is_zero() {
            return Err(format!("idle for {idle:?}"));
        }
        wait(
            [
                (client, &*server, &to_up, &to_down),
                (upstream, &*up, &to_down, &to_up),
            ],
            left,
        );
    }
}

/// What becomes of the plaintext read (appended to the flow's pending bytes).
type Transform<'a> = dyn FnMut(&[u8], &mut Vec<u8>) -> Result<(), String> + 'a;

/// Reads what `sock`'s TLS has for `flow` (only while its last bytes were delivered):
/// plaintext already decrypted first, then the records already read, then the socket.
fn step(
    sock: &TcpStream,
    tls: &mut Connection,
    flow: &mut Flow,
    buf: &mut [u8],
    transform: &mut Transform<'_>,
) -> Result<bool, String> {
    if !flow.pending.is_empty() || flow.eof {
        return Ok(false);
    }
    let mut moved = drain(tls, flow, buf, transform)?;
    // Up to CHUNK of plaintext per turn of the loop.
    while flow.pending.len() < CHUNK && !flow.eof {
        if flow.at < flow.end {
            // rustls takes at most 4 KiB a call: the rest stays for the next.
            let mut rest = &flow.cipher[flow.at..flow.end];
            let n = tls.read_tls(&mut rest).map_err(|e| format!("TLS: {e}"))?;
            if n == 0 {
                // After the peer's close_notify: what follows is not read.
                flow.at = flow.end;
            }
            flow.at += n;
        } else if flow.tls_done || !tls.wants_read() {
            break;
        } else {
            match fill(sock, flow) {
                Ok(0) => flow.tls_done = true,
                Ok(_) => {
                    moved = true;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(moved),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The peer is gone: the end of its stream.
                Err(e) if gone(&e) => flow.tls_done = true,
                Err(e) => return Err(format!("read: {e}")),
            }
            // The socket's end: rustls learns it from an empty read.
            let _ = tls.read_tls(&mut io::empty());
        }
        tls.process_new_packets().map_err(|e| format!("TLS: {e}"))?;
        moved |= drain(tls, flow, buf, transform)?;
    }
    Ok(moved)
}

/// Reads up to [`CIPHER`] bytes from `sock` into `flow` (whose earlier bytes were all given
/// to rustls); the number read.
fn fill(sock: &TcpStream, flow: &mut Flow) -> io::Result<usize> {
    if flow.cipher.is_empty() {
        flow.cipher = vec![0; CIPHER];
    }
    let n = (&*sock).read(&mut flow.cipher)?;
    (flow.at, flow.end) = (0, n);
    Ok(n)
}

/// Moves decrypted plaintext into `flow` (at most about [`CHUNK`] at once); the end of the
/// stream (close_notify, or the socket's end without it) ends the flow.
fn drain(
    tls: &mut Connection,
    flow: &mut Flow,
    buf: &mut [u8],
    transform: &mut Transform<'_>,
) -> Result<bool, String> {
    let mut moved = false;
    loop {
        match tls.reader().read(buf) {
            Ok(0) => {
                flow.eof = true;
                return Ok(moved);
            }
            Ok(n) => {
                transform(&buf[..n], &mut flow.pending)?;
                moved = true;
                if flow.pending.len() >= CHUNK {
                    return Ok(moved);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(moved),
            // Closed without close_notify: the end of the stream, maybe cut short.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                flow.eof = true;
                flow.truncated = true;
                return Ok(moved);
            }
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

/// Hands `flow`'s pending bytes to `tls` and writes what it has to `sock`; passes the end
/// on once everything went.
fn deliver(
    sock: &TcpStream,
    tls: &mut Connection,
    flow: &mut Flow,
    count: &mut u64,
) -> Result<bool, String> {
    let mut moved = false;
    if !flow.pending.is_empty() {
        let n = tls
            .writer()
            .write(&flow.pending[flow.sent..])
            .map_err(|e| format!("write: {e}"))?;
        // What rustls took is skipped, not moved down: a client slower than its upstream
        // takes a record at a time, and moving the rest each time copied it again.
        flow.sent += n;
        if flow.sent == flow.pending.len() {
            flow.pending.clear();
            flow.sent = 0;
        }
        *count += n as u64;
        moved |= n > 0;
    }
    if flow.eof && flow.pending.is_empty() && !flow.closed {
        if !flow.truncated {
            tls.send_close_notify();
        }
        flow.closed = true;
        moved = true;
    }
    let mut s = sock;
    while tls.wants_write() {
        match tls.write_tls(&mut s) {
            Ok(_) => moved = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Passing the end on to a peer that already left (an HTTP server closing after
            // its answer): nothing was lost.
            Err(e) if gone(&e) && flow.eof && flow.pending.is_empty() => {
                flow.closed = true;
                return Ok(true);
            }
            Err(e) => return Err(format!("write: {e}")),
        }
    }
    if flow.closed && !tls.wants_write() {
        let _ = sock.shutdown(Shutdown::Write);
    }
    Ok(moved)
}

/// A reset or broken pipe: the peer closed.
fn gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

/// Waits until a socket can be read (its flow has room) or written (its TLS has bytes).
fn wait(sides: [(&TcpStream, &Connection, &Flow, &Flow); 2], left: Duration) {
    let mut fds = Vec::with_capacity(2);
    for (sock, tls, from, into) in sides {
        let mut flags = PollFlags::empty();
        if from.pending.is_empty() && !from.eof && !from.tls_done {
            flags |= PollFlags::POLLIN;
        }
        if tls.wants_write() || !into.pending.is_empty() {
            flags |= PollFlags::POLLOUT;
        }
        // A socket with nothing to wait for stays out: a hung-up one would wake every time.
        if !flags.is_empty() {
            fds.push(PollFd::new(sock.as_fd(), flags));
        }
    }
    let timeout =
        PollTimeout::try_from(left.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(_) | Err(Errno::EINTR) => {}
        Err(_) => std::thread::sleep(Duration::from_millis(10)),
    }
}
