//! Reading a cassette (`--net-replay DIR`): loaded whole and checked before the run starts
//! (the index's format and bounds, every body's SHA-256 against its name), so a corrupted
//! cassette is refused with one line instead of answering wrongly; then the requests of the
//! run are matched against it ([`super::Key`]): identical requests get the recorded answers
//! in recorded order, and the last one again once those are used up.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use reprorun_base::sys::hostpath;

use super::{
    is_digest, sha256_hex, CassetteError, Entry, Index, Key, BODIES, BODY_MAX, ENTRIES_MAX, FORMAT,
    INDEX, INDEX_MAX, TOTAL_MAX,
};

/// A loaded cassette.
pub struct Cassette {
    dir: PathBuf,
    entries: Vec<Entry>,
    bodies: HashMap<String, Arc<Vec<u8>>>,
    by_key: HashMap<Key, Vec<usize>>,
    used: Mutex<HashMap<Key, usize>>,
    hosts: HashSet<(String, u16)>,
}

/// A recorded answer.
pub struct Answer<'a> {
    pub entry: &'a Entry,
    pub body: Arc<Vec<u8>>,
}

impl Cassette {
    /// Loads `dir` (no link followed) and checks all of it.
    pub fn load(dir: &Path) -> Result<Cassette, CassetteError> {
        let err = |why: String| CassetteError::Load {
            dir: dir.display().to_string(),
            why,
        };
        let text = hostpath::read_to_string(&dir.join(INDEX), false, INDEX_MAX)
            .map_err(|e| err(format!("{INDEX}: {e}")))?;
        let index = parse_index(&text).map_err(|why| err(format!("{INDEX}: {why}")))?;
        let mut bodies: HashMap<String, Arc<Vec<u8>>> = HashMap::new();
        let mut total = 0u64;
        for e in &index.entries {
            for body in [&e.request_body, &e.response_body] {
                if bodies.contains_key(&body.sha256) {
                    continue;
                }
                let bytes = read_body(dir, &body.sha256)
                    .map_err(|why| err(format!("{BODIES}/{}: {why}", body.sha256)))?;
                if bytes.len() as u64 != body.size {
                    return Err(err(format!(
                        "{BODIES}/{}: {} bytes, the index says {}",
                        body.sha256,
                        bytes.len(),
                        body.size
                    )));
                }
                total += body.size;
                if total > TOTAL_MAX {
                    return Err(err(format!("its bodies pass {TOTAL_MAX} bytes")));
                }
                bodies.insert(body.sha256.clone(), Arc::new(bytes));
            }
        }
        Ok(Cassette::of(dir, index.entries, bodies))
    }

    fn of(dir: &Path, mut entries: Vec<Entry>, bodies: HashMap<String, Arc<Vec<u8>>>) -> Self {
        entries.sort_by_key(|e| e.order);
        let mut by_key: HashMap<Key, Vec<usize>> = HashMap::new();
        let mut hosts = HashSet::new();
        for (i, e) in entries.iter().enumerate() {
            by_key.entry(e.key()).or_default().push(i);
            hosts.insert((e.host.to_ascii_lowercase(), e.port));
        }
        Cassette {
            dir: dir.to_path_buf(),
            entries,
            bodies,
            by_key,
            used: Mutex::new(HashMap::new()),
            hosts,
        }
    }

    /// The cassette's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any entry is for `host:port`.
    pub fn serves(&self, host: &str, port: u16) -> bool {
        self.hosts.contains(&(host.to_ascii_lowercase(), port))
    }

    /// The next recorded answer to `key`: the n-th identical request gets the n-th recorded
    /// answer, and the last one once they are used up.
    pub fn answer(&self, key: &Key) -> Option<Answer<'_>> {
        let list = self.by_key.get(key)?;
        let n = {
            let mut used = crate::proxy::lock(&self.used);
            let n = used.entry(key.clone()).or_insert(0);
            let this = *n;
            *n += 1;
            this
        };
        let entry = &self.entries[list[n.min(list.len() - 1)]];
        let body = Arc::clone(self.bodies.get(&entry.response_body.sha256)?);
        Some(Answer { entry, body })
    }
}

/// The index, checked: its format, its bounds, the digests' form, orders unique.
pub(crate) fn parse_index(text: &str) -> Result<Index, String> {
    let index: Index =
        serde_json::from_str(text).map_err(|e| format!("not a cassette index ({e})"))?;
    if index.format != FORMAT {
        return Err(format!(
            "format {:?}, this reprorun reads {FORMAT:?}",
            index.format
        ));
    }
    if index.entries.len() > ENTRIES_MAX {
        return Err(format!("more than {ENTRIES_MAX} entries"));
    }
    let mut orders = HashSet::new();
    for e in &index.entries {
        for b in [&e.request_body, &e.response_body] {
            if !is_digest(&b.sha256) {
                return Err(format!(
                    "entry {}: {:?} is not a SHA-256",
                    e.order, b.sha256
                ));
            }
            if b.size > BODY_MAX {
                return Err(format!("entry {}: a body over {BODY_MAX} bytes", e.order));
            }
        }
        if !orders.insert(e.order) {
            return Err(format!("two entries of order {}", e.order));
        }
        if e.scheme != "http" && e.scheme != "https" {
            return Err(format!("entry {}: scheme {:?}", e.order, e.scheme));
        }
        let clean = |s: &str| !s.bytes().any(|b| b.is_ascii_control());
        let fields_clean = e.response_headers.iter().all(|(n, v)| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic() && b != b':') && clean(v)
        });
        if !(100..=999).contains(&e.status) || !clean(&e.reason) || !fields_clean {
            return Err(format!("entry {}: a malformed response head", e.order));
        }
    }
    Ok(index)
}

/// The body named `digest`, checked against it.
fn read_body(dir: &Path, digest: &str) -> Result<Vec<u8>, String> {
    let path = dir.join(BODIES).join(digest);
    let probe = std::fs::File::from(hostpath::find(&path, false).map_err(|e| e.to_string())?);
    let file = reprorun_base::sys::reopen_regular(&probe, false)
        .map_err(|e| format!("not a regular file ({e})"))?;
    let mut bytes = Vec::new();
    file.take(BODY_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > BODY_MAX {
        return Err(format!("larger than {BODY_MAX} bytes"));
    }
    if sha256_hex(&bytes) != digest {
        return Err("its SHA-256 is not its name (the cassette was changed)".into());
    }
    Ok(bytes)
}
