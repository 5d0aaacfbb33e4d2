//! Writing a cassette (`--net-record DIR`), in the supervisor: the directory made without
//! following a link, each body written once under its SHA-256 (computed here, never taken
//! from the proxy's helper), the index written when the run ends. Every size is bounded
//! (`BODY_MAX`, `TOTAL_MAX`, `ENTRIES_MAX`).

use std::collections::HashSet;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use reprorun_base::sys::hostpath::{self, Write};

use super::{
    Body, CassetteError, Entry, Exchange, Index, BODIES, BODY_MAX, ENTRIES_MAX, FORMAT, INDEX,
    INDEX_MAX, TOTAL_MAX,
};

/// Reasons kept in the index's `not_recorded`.
const REASONS_MAX: usize = 100;
/// The largest description of an exchange the helper sends (JSON, bodies apart).
pub(crate) const META_MAX: u64 = 4 << 20;

/// The cassette being written.
pub struct Writer {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    total: u64,
    /// About how long the index's entries are (their strings).
    index: u64,
    written: HashSet<String>,
    not_recorded: Vec<String>,
    dropped: u64,
}

impl Writer {
    /// Makes `dir` (and its `bodies`) without following a link; one that already holds a
    /// cassette is refused.
    pub fn create(dir: &Path) -> Result<Writer, CassetteError> {
        let err = |why: String| CassetteError::Create {
            dir: dir.display().to_string(),
            why,
        };
        let fd = hostpath::make_dir(dir, 0o755).map_err(|e| err(e.to_string()))?;
        if hostpath::find(&dir.join(INDEX), false).is_ok() {
            return Err(err(format!("already holds a cassette ({INDEX})")));
        }
        hostpath::make_dir_in(&fd, BODIES, 0o755).map_err(|e| err(format!("{BODIES}: {e}")))?;
        Ok(Writer {
            dir: dir.to_path_buf(),
            state: Mutex::new(State::default()),
        })
    }

    /// The cassette's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the bodies of `ex` and keeps its entry (or says why it was not recorded).
    pub fn add(&self, ex: Exchange, not_recorded: Option<String>) {
        let mut st = crate::proxy::lock(&self.state);
        let name = format!(
            "{} {}://{}:{}{}",
            ex.method, ex.scheme, ex.host, ex.port, ex.target
        );
        let size = (ex.request_body.len() + ex.response_body.len()) as u64;
        let why = match not_recorded {
            Some(why) => Some(why),
            None if st.entries.len() >= ENTRIES_MAX => {
                Some(format!("the cassette holds {ENTRIES_MAX} entries"))
            }
            None if ex.request_body.len() as u64 > BODY_MAX
                || ex.response_body.len() as u64 > BODY_MAX =>
            {
                Some(format!("a body over {BODY_MAX} bytes"))
            }
            None if st.total + size > TOTAL_MAX => Some(format!(
                "the cassette's bodies would pass {TOTAL_MAX} bytes"
            )),
            None if st.index + text_len(&ex) > INDEX_MAX / 2 => {
                Some(format!("the index would pass {} bytes", INDEX_MAX / 2))
            }
            None => None,
        };
        if let Some(why) = why {
            return st.skip(format!("{name}: {why}"));
        }
        let request_body = Body::of(&ex.request_body);
        let response_body = Body::of(&ex.response_body);
        for (body, bytes) in [
            (&request_body, &ex.request_body),
            (&response_body, &ex.response_body),
        ] {
            if st.written.contains(&body.sha256) {
                continue;
            }
            if let Err(why) = self.write_body(&body.sha256, bytes) {
                return st.skip(format!("{name}: writing its body: {why}"));
            }
            st.total += body.size;
            st.written.insert(body.sha256.clone());
        }
        st.index += text_len(&ex);
        let order = st.entries.len() as u64;
        st.entries.push(Entry {
            order,
            method: ex.method,
            scheme: ex.scheme,
            host: ex.host,
            port: ex.port,
            target: ex.target,
            request_headers: ex.request_headers,
            request_body,
            status: ex.status,
            reason: ex.reason,
            response_headers: ex.response_headers,
            response_body,
        });
    }

    fn write_body(&self, digest: &str, bytes: &[u8]) -> Result<(), String> {
        let path = self.dir.join(BODIES).join(digest);
        let mut f =
            hostpath::open_write(&path, false, Write::Truncate).map_err(|e| e.to_string())?;
        f.write_all(bytes).map_err(|e| e.to_string())
    }

    /// Writes the index; returns how many entries it holds.
    pub fn finish(&self) -> Result<usize, CassetteError> {
        let st = crate::proxy::lock(&self.state);
        let mut not_recorded = st.not_recorded.clone();
        if st.dropped > 0 {
            not_recorded.push(format!("{} more not recorded", st.dropped));
        }
        let index = Index {
            format: FORMAT.into(),
            entries: st.entries.clone(),
            not_recorded,
        };
        let err = |why: String| CassetteError::Write {
            dir: self.dir.display().to_string(),
            why,
        };
        let text = serde_json::to_string_pretty(&index).map_err(|e| err(e.to_string()))?;
        let path = self.dir.join(INDEX);
        let mut f = hostpath::open_write(&path, false, Write::Truncate)
            .map_err(|e| err(format!("{INDEX}: {e}")))?;
        f.write_all(format!("{text}\n").as_bytes())
            .map_err(|e| err(format!("{INDEX}: {e}")))?;
        Ok(index.entries.len())
    }
}

/// The length of an exchange's strings (what its entry adds to the index, about).
fn text_len(ex: &Exchange) -> u64 {
    let fields = ex.request_headers.iter().chain(&ex.response_headers);
    let headers: usize = fields.map(|(n, v)| n.len() + v.len() + 8).sum();
    (headers + ex.method.len() + ex.host.len() + ex.target.len() + ex.reason.len() + 512) as u64
}

impl State {
    fn skip(&mut self, why: String) {
        if self.not_recorded.len() < REASONS_MAX {
            self.not_recorded.push(why);
        } else {
            self.dropped += 1;
        }
    }
}

/// An exchange the helper sent: `lens` (its description, the request body, the response
/// body, in that order in `fd`), each checked against its bound before anything is read.
/// `None` for anything malformed. The second value says why the helper did not record it.
pub(crate) fn read_wire(fd: OwnedFd, lens: [u64; 3]) -> Option<(Exchange, Option<String>)> {
    let [meta, req, resp] = lens;
    if meta > META_MAX || req > BODY_MAX || resp > BODY_MAX {
        return None;
    }
    let file = std::fs::File::from(fd);
    let part = |at: u64, len: u64| -> Option<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        file.read_exact_at(&mut buf, at).ok()?;
        Some(buf)
    };
    #[derive(serde::Deserialize)]
    struct Wire {
        #[serde(flatten)]
        ex: Exchange,
        not_recorded: Option<String>,
    }
    let w: Wire = serde_json::from_slice(&part(0, meta)?).ok()?;
    let mut ex = w.ex;
    ex.request_body = part(meta, req)?;
    ex.response_body = part(meta + req, resp)?;
    sane(&ex).then_some((
        ex,
        w.not_recorded.map(|mut s| {
            s.truncate(s.floor_char_boundary_compat(512));
            s
        }),
    ))
}

/// The fields of an exchange the helper sent are within the index's bounds.
fn sane(ex: &Exchange) -> bool {
    let short = |s: &str| s.len() <= super::VALUE_MAX;
    let token = |s: &str| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic());
    token(&ex.method)
        && (ex.scheme == "http" || ex.scheme == "https")
        && !ex.host.is_empty()
        && ex.host.len() <= 255
        && short(&ex.target)
        && short(&ex.reason)
        && ex.request_headers.len() <= super::HEADERS_MAX
        && ex.response_headers.len() <= super::HEADERS_MAX
        && ex
            .request_headers
            .iter()
            .chain(&ex.response_headers)
            .all(|(n, v)| short(n) && short(v))
}

/// `str::floor_char_boundary` for MSRV 1.80.
trait FloorBoundary {
    fn floor_char_boundary_compat(&self, at: usize) -> usize;
}

impl FloorBoundary for String {
    fn floor_char_boundary_compat(&self, at: usize) -> usize {
        let mut at = at.min(self.len());
        while !self.is_char_boundary(at) {
            at -= 1;
        }
        at
    }
}
