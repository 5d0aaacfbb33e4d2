//! The leak scan: does a snapshot hold what the agent must find on its own? A warning when
//! a file holds a hidden issue's URL, `#N` together with its title, or a verbatim passage
//! of [`PASSAGE`] characters of its body (whitespace runs compared as one space). Bodies
//! often quote the repository's own code, so a passage warning asks for a look, no more.
//! The passage search is a rolling hash over each file (hand-written: a few lines, and it
//! keeps the scan one pass per file).

use std::collections::{BTreeMap, HashMap};

use crate::input::Issue;

/// The shortest body passage that counts as a leak.
pub(crate) const PASSAGE: usize = 80;

/// Files larger than this, or with a NUL byte early on (binary), are not scanned.
const MAX_FILE: usize = 4 << 20;

const BASE: u64 = 1_000_003;

struct Needle {
    id: String,
    url: String,
    tag: String,
    title: String,
}

/// One group's scan: its hidden issues, and what was found (first file per issue and kind).
pub(crate) struct Scanner {
    needles: Vec<Needle>,
    /// Body text (normalized) of each issue.
    bodies: Vec<Vec<u8>>,
    /// Window hash → (issue, offset in its body).
    windows: HashMap<u64, Vec<(usize, usize)>>,
    pow: u64,
    found: BTreeMap<(String, &'static str), String>,
}

/// Whitespace runs to one space, trimmed.
fn normalize(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_whitespace() {
            if out.last().is_some_and(|l| *l != b' ') {
                out.push(b' ');
            }
        } else {
            out.push(b);
        }
    }
    while out.last() == Some(&b' ') {
        out.pop();
    }
    out
}

fn hash(window: &[u8]) -> u64 {
    window.iter().fold(0u64, |h, &b| {
        h.wrapping_mul(BASE).wrapping_add(u64::from(b))
    })
}

/// A window worth reporting: mostly words, not a ruler of dashes.
fn meaningful(window: &[u8]) -> bool {
    window.iter().filter(|b| b.is_ascii_alphanumeric()).count() >= PASSAGE / 2
}

impl Scanner {
    pub(crate) fn new(issues: &[&Issue]) -> Scanner {
        let mut windows: HashMap<u64, Vec<(usize, usize)>> = HashMap::new();
        let mut bodies = Vec::new();
        for (i, issue) in issues.iter().enumerate() {
            let body = normalize(issue.body.as_bytes());
            for (off, w) in body.windows(PASSAGE).enumerate() {
                if meaningful(w) {
                    windows.entry(hash(w)).or_default().push((i, off));
                }
            }
            bodies.push(body);
        }
        let pow = (1..PASSAGE).fold(1u64, |p, _| p.wrapping_mul(BASE));
        Scanner {
            needles: issues
                .iter()
                .map(|i| Needle {
                    id: i.id(),
                    url: i.url.clone(),
                    tag: format!("#{}", i.number),
                    title: i.title.trim().to_string(),
                })
                .collect(),
            bodies,
            windows,
            pow,
            found: BTreeMap::new(),
        }
    }

    fn note(&mut self, i: usize, kind: &'static str, path: &[u8]) {
        self.found
            .entry((self.needles[i].id.clone(), kind))
            .or_insert_with(|| String::from_utf8_lossy(path).into_owned());
    }

    /// Scans one file of the snapshot.
    pub(crate) fn scan(&mut self, path: &[u8], bytes: &[u8]) {
        if self.needles.is_empty()
            || bytes.len() > MAX_FILE
            || bytes[..bytes.len().min(8000)].contains(&0)
        {
            return;
        }
        let text = String::from_utf8_lossy(bytes);
        for i in 0..self.needles.len() {
            let n = &self.needles[i];
            let url = !n.url.is_empty() && text.contains(&n.url);
            let titled = n.title.len() >= 8 && has_tag(&text, &n.tag) && text.contains(&n.title);
            if url {
                self.note(i, "the URL", path);
            }
            if titled {
                self.note(i, "#N and the title", path);
            }
        }
        if self.windows.is_empty() {
            return;
        }
        let norm = normalize(bytes);
        if norm.len() < PASSAGE {
            return;
        }
        let mut h = hash(&norm[..PASSAGE]);
        for start in 0..=norm.len() - PASSAGE {
            if start > 0 {
                let out = u64::from(norm[start - 1]).wrapping_mul(self.pow);
                h = h
                    .wrapping_sub(out)
                    .wrapping_mul(BASE)
                    .wrapping_add(u64::from(norm[start + PASSAGE - 1]));
            }
            let Some(hits) = self.windows.get(&h) else {
                continue;
            };
            let window = &norm[start..start + PASSAGE];
            let matched: Vec<usize> = hits
                .iter()
                .filter(|(i, off)| &self.bodies[*i][*off..*off + PASSAGE] == window)
                .map(|(i, _)| *i)
                .collect();
            for i in matched {
                self.note(i, "a verbatim passage of the body", path);
            }
        }
    }

    /// The hidden issues this snapshot names outright (by URL, or `#N` with the title),
    /// each with the first file that does: the answer is in the snapshot.
    pub(crate) fn named(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for ((id, kind), path) in &self.found {
            if *kind != "a verbatim passage of the body" {
                out.entry(id.clone()).or_insert_with(|| path.clone());
            }
        }
        out
    }

    /// One line per issue and kind: `group G: FILE holds ... of hidden issue o/n#N`.
    pub(crate) fn warnings(&self, group: &str) -> Vec<String> {
        self.found
            .iter()
            .map(|((id, kind), path)| {
                format!("leak: group {group}: {path} holds {kind} of hidden issue {id}")
            })
            .collect()
    }
}

/// `#N` not followed by another digit.
fn has_tag(text: &str, tag: &str) -> bool {
    text.match_indices(tag)
        .any(|(at, _)| !text[at + tag.len()..].starts_with(|c: char| c.is_ascii_digit()))
}
