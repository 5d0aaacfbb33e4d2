//! A read-only HTTP/1.1 server for registry clients: `GET` and `HEAD` only, one request
//! per connection (`Connection: close`), a thread per connection. It serves the mirror's
//! npm tree inside the sandbox (`exec --mirror`) and the date-cut view of a registry that
//! `mirror pull --npm` points npm at.
//!
//! Hand-written rather than a crate: a static GET server is a page of code, and the one the
//! egress proxy runs is hand-written for the same reason (bounded heads, no runtime).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// What a handler answers.
pub(crate) enum Response {
    /// 200 with these bytes.
    Bytes(Vec<u8>, &'static str),
    /// 200 with this open regular file's contents, streamed (never read into memory).
    File(std::fs::File, &'static str),
    /// Any other status, with a one-line text body.
    Status(u16, String),
}

/// Answers a request path (percent-decoded, without its query) given its `Accept` header.
pub(crate) type Handler = dyn Fn(&str, &str) -> Response + Send + Sync;

/// Connections served at once; more wait in the listen queue.
const MAX_CONNS: usize = 64;
const HEAD_CAP: usize = 16 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A running server; `stop` (or drop) ends its accept thread.
pub(crate) struct Server {
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `listener` with `handler` until stopped.
    pub(crate) fn start(listener: TcpListener, handler: Arc<Handler>) -> std::io::Result<Server> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let accept = std::thread::Builder::new()
            .name("mirror-serve".into())
            .spawn(move || accept_loop(&listener, &handler, &flag))?;
        Ok(Server {
            stop,
            accept: Some(accept),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, handler: &Arc<Handler>, stop: &AtomicBool) {
    let live = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
        if poll(&mut fds, PollTimeout::from(100u16)).unwrap_or(0) == 0 {
            continue;
        }
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        if live.load(Ordering::SeqCst) >= MAX_CONNS {
            let _ = answer(&stream, "GET", Response::Status(503, "busy".into()));
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let (h, l) = (handler.clone(), live.clone());
        let spawned = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = serve_one(&stream, &*h);
                l.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// `%XX` decoded (invalid escapes kept as they are).
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve_one(stream: &TcpStream, handler: &Handler) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !head_complete(&buf) {
        if buf.len() > HEAD_CAP {
            return answer(
                stream,
                "GET",
                Response::Status(431, "head too large".into()),
            );
        }
        let n = (&*stream).read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    match parse_head(&buf) {
        Some(r) => answer(stream, r.method, handler(&r.path, &r.accept)),
        None => answer(stream, "GET", Response::Status(405, "read-only".into())),
    }
}

/// Whether `buf` holds a whole request head (up to its blank line).
pub(crate) fn head_complete(buf: &[u8]) -> bool {
    buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n")
}

/// What a request asks: its method, its path (percent-decoded, without query or fragment)
/// and its `Accept` value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) method: &'static str,
    pub(crate) path: String,
    pub(crate) accept: String,
}

/// Reads a request head (what follows its blank line is not looked at); `None` for a
/// method other than `GET` and `HEAD`.
pub(crate) fn parse_head(buf: &[u8]) -> Option<Request> {
    let head = String::from_utf8_lossy(buf);
    let mut lines = head.lines();
    let mut parts = lines.next().unwrap_or("").split_whitespace();
    let method = match parts.next() {
        Some("GET") => "GET",
        Some("HEAD") => "HEAD",
        _ => return None,
    };
    let target = parts.next().unwrap_or("");
    let path = percent_decode(target.split(['?', '#']).next().unwrap_or(""));
    let accept = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map_or("", |(_, v)| v.trim())
        .to_string();
    Some(Request {
        method,
        path,
        accept,
    })
}

/// The file a request names, relative to the mirror root, and its content type: the PyPI
/// tree's ([`pypi_request`]) or the npm tree's; `None` for anything else.
pub(crate) fn route(path: &str, accept: &str) -> Option<(String, &'static str)> {
    pypi_request(path, accept).or_else(|| super::npm::resolve_request(path))
}

fn answer(mut stream: &TcpStream, method: &str, r: Response) -> std::io::Result<()> {
    let (status, ctype, body) = match r {
        Response::Bytes(b, t) => (200, t, b),
        Response::File(file, t) => return send_file(stream, method, file, t),
        Response::Status(s, m) => (s, "text/plain", format!("{m}\n").into_bytes()),
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if method != "HEAD" {
        stream.write_all(&body)?;
    }
    stream.flush()
}

/// 200 with a regular file's bytes, as long as it was when opened: streamed in chunks, so a
/// request costs the server a buffer, not the file's size.
fn send_file(
    mut stream: &TcpStream,
    method: &str,
    file: std::fs::File,
    ctype: &str,
) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes())?;
    if method != "HEAD" {
        std::io::copy(&mut file.take(len), &mut stream)?;
    }
    stream.flush()
}

/// The handler that serves a mirror from `root` (the mirror directory): its npm tree, and its
/// PyPI simple index and files under `/pypi/`. The server runs on the host, often as root,
/// and the tree may have been written by a sandbox: the directory is opened once, without
/// following a link, and every file is looked up beneath it with no link followed
/// (`RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS`) and served only if it is a regular file (a
/// FIFO, a device or a link to a host file is answered 404).
pub(crate) fn mirror_tree(root: PathBuf) -> std::io::Result<Arc<Handler>> {
    let dir = crate::sys::hostpath::find(&root, false).map_err(std::io::Error::other)?;
    let dir = std::fs::File::from(dir);
    Ok(Arc::new(move |path: &str, accept: &str| {
        let Some((rel, ctype)) = route(path, accept) else {
            return Response::Status(404, "not in the mirror".into());
        };
        match crate::sys::open_in_root_with(&dir, std::path::Path::new(&rel), false, true) {
            Ok(file) => match file_blocking(file) {
                Ok(file) => Response::File(file, ctype),
                Err(_) => Response::Status(404, "not found".into()),
            },
            Err(_) => Response::Status(404, "not found".into()),
        }
    }))
}

/// A regular file opened non-blocking, made blocking again for reads.
fn file_blocking(file: std::fs::File) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    nix::fcntl::fcntl(
        file.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )?;
    Ok(file)
}

const PEP691_JSON: &str = "application/vnd.pypi.simple.v1+json";

/// The file a `/pypi/...` request names, relative to the mirror root: `/pypi/simple/` and
/// `/pypi/simple/PROJECT/` give the page (PEP 691 JSON when `accept` names it before HTML,
/// else HTML), `/pypi/files/FILE` the file. Nothing else, nothing outside.
pub(crate) fn pypi_request(path: &str, accept: &str) -> Option<(String, &'static str)> {
    let rest = path.strip_prefix("/pypi/")?;
    let safe = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._+!~".contains(c))
    };
    if let Some(file) = rest.strip_prefix("files/") {
        return safe(file).then(|| {
            (
                format!("{}/{file}", super::layout::FILES_DIR),
                "application/octet-stream",
            )
        });
    }
    let page = rest.strip_prefix("simple")?.trim_matches('/');
    if !page.is_empty() && !safe(page) {
        return None;
    }
    let dir = match page {
        "" => super::layout::SIMPLE_DIR.to_string(),
        p => format!("{}/{p}", super::layout::SIMPLE_DIR),
    };
    let json = accept.find(PEP691_JSON).is_some_and(|j| {
        ["text/html", "application/vnd.pypi.simple.v1+html"]
            .iter()
            .filter_map(|h| accept.find(h))
            .all(|h| j < h)
    });
    Some(match json {
        true => (format!("{dir}/index.json"), PEP691_JSON),
        false => (format!("{dir}/index.html"), "text/html"),
    })
}
