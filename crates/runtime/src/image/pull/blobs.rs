//! A pull's blobs: downloaded a few at a time into `STORE/pulls/blobs/sha256/`, resumed from
//! a partial file (`HEX.partial`, continued with a `Range` request), verified by size and
//! digest before they are renamed to `HEX`, then hard-linked into the pull's layout.
//!
//! Many pulls (on many nodes of a shared store) may want the same blob: each blob is fetched
//! under `flock` on `HEX.lock`, so one downloads while the others wait and then link what it
//! verified. A blob the store already holds (verified when imported) is not downloaded.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use super::super::digest::{Digest, Hashing};
use super::super::oci::Descriptor;
use super::super::store::Store;
use super::http::Client;
use super::{PullError, JOBS};

pub(super) struct Fetcher<'a> {
    pub(super) client: &'a Client,
    pub(super) store: &'a Store,
    /// `STORE/pulls/blobs/sha256`.
    pub(super) cache: &'a Path,
    /// The layout's `blobs/sha256`.
    pub(super) into: &'a Path,
}

impl Fetcher<'_> {
    /// Fetches every descriptor (once each), `JOBS` at a time; the first failure stops the rest.
    pub(super) fn fetch_all(&self, wanted: &[Descriptor]) -> Result<(), PullError> {
        let mut seen = BTreeSet::new();
        let queue: Vec<&Descriptor> = wanted
            .iter()
            .filter(|d| seen.insert(d.digest.clone()))
            .collect();
        let queue = Mutex::new(queue.into_iter().rev().collect::<Vec<_>>());
        let failure: Mutex<Option<PullError>> = Mutex::new(None);
        let jobs = JOBS.min(seen.len()).max(1);
        std::thread::scope(|s| {
            for _ in 0..jobs {
                s.spawn(|| loop {
                    if failure.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                        return;
                    }
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(desc) = next else { return };
                    if let Err(e) = self.fetch(desc) {
                        failure
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                        return;
                    }
                });
            }
        });
        match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn lock(&self, digest: &Digest) -> Result<nix::fcntl::Flock<std::fs::File>, PullError> {
        let path = self.cache.join(format!("{}.lock", digest.hex()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| PullError::store(&path, e))?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| PullError::store(&path, e))
    }

    fn link(&self, from: &Path, digest: &Digest) -> Result<(), PullError> {
        let dest = self.into.join(digest.hex());
        match std::fs::hard_link(from, &dest) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(_) => std::fs::copy(from, &dest)
                .map(drop)
                .map_err(|e| PullError::store(&dest, e)),
        }
    }

    fn fetch(&self, desc: &Descriptor) -> Result<(), PullError> {
        let digest = &desc.digest;
        let _lock = self.lock(digest)?;
        let size_is =
            |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == desc.size);
        let stored = self.store.blob(digest);
        if size_is(&stored) {
            return self.link(&stored, digest);
        }
        let done = self.cache.join(digest.hex());
        if size_is(&done) {
            return self.link(&done, digest);
        }
        let part = self.cache.join(format!("{}.partial", digest.hex()));
        let what = format!("blob {digest}");
        for attempt in 0..2 {
            let have = std::fs::metadata(&part).map_or(0, |m| m.len());
            if have > desc.size {
                let _ = std::fs::remove_file(&part);
            }
            if have < desc.size {
                let path = format!("blobs/{digest}");
                match self.client.get(&path, &[], &part, true, desc.size) {
                    // 33: the server ignored the range; start again from nothing.
                    Err(PullError::Curl { code: 33, .. }) if attempt == 0 => {
                        let _ = std::fs::remove_file(&part);
                        continue;
                    }
                    Err(e) => return Err(e),
                    Ok(a) if a.status == 200 || a.status == 206 => {}
                    Ok(a) => {
                        return Err(PullError::Status {
                            url: self.client.url(&path),
                            status: a.status,
                            detail: String::new(),
                        })
                    }
                }
            }
            match verify(&part, digest, desc.size, &what) {
                Ok(()) => {
                    std::fs::rename(&part, &done).map_err(|e| PullError::store(&done, e))?;
                    return self.link(&done, digest);
                }
                // A resumed file may hold a stale start: once more from nothing.
                Err(_) if attempt == 0 && have > 0 => {
                    let _ = std::fs::remove_file(&part);
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&part);
                    return Err(e);
                }
            }
        }
        Err(PullError::Http {
            url: self.client.url(&format!("blobs/{digest}")),
            detail: "the download did not complete".into(),
        })
    }

    /// Drops the downloaded copies once the store holds the blobs.
    pub(super) fn forget(&self, wanted: &[Descriptor]) {
        for d in wanted {
            if let Ok(_lock) = self.lock(&d.digest) {
                let _ = std::fs::remove_file(self.cache.join(d.digest.hex()));
            }
        }
    }
}

/// Checks a downloaded file's size and digest (reading at most `size + 1` bytes).
fn verify(path: &Path, digest: &Digest, size: u64, what: &str) -> Result<(), PullError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| PullError::store(path, e))?;
    let (actual, count) = Hashing::new(file.take(size + 1))
        .finish()
        .map_err(|e| PullError::store(path, e))?;
    if count != size {
        return Err(PullError::Size {
            what: what.to_string(),
            expected: size,
            actual: count,
        });
    }
    if &actual != digest {
        return Err(PullError::Digest {
            what: what.to_string(),
            expected: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    Ok(())
}
