//! GETs against the GitHub REST API with curl, as `mirror pull` fetches (no TLS stack to
//! build on a small machine; the host's curl has the host's certificates and proxies). The
//! token and the other headers reach curl through `--config -` on its stdin, never its
//! command line. Every 200 with an `ETag` is cached (body and `Link`) under the output's
//! `.cache/http/`; the next request for that URL is conditional (`If-None-Match`), and a 304
//! is answered from the cache: a re-run, or a run resumed after a kill, fetches nothing it
//! has. Rate limits are honoured as [`limits::decide`] says.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, Budget, Decision, Head};
use super::CollectError;
use reprorun_pipeline::store::sha256_hex;

/// An answer: its status, JSON body (`Null` when none), and the next page.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Value,
    pub(crate) next: Option<String>,
}

/// What the run cost.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct Stats {
    /// Requests sent (retries included).
    pub(crate) requests: u64,
    /// Of those, conditional ones.
    pub(crate) conditional: u64,
    /// Answered 304 (from the cache).
    pub(crate) not_modified: u64,
    /// Waits for a rate limit or an error.
    pub(crate) retries: u64,
}

/// One cached answer.
#[derive(Serialize, Deserialize)]
struct Cached {
    url: String,
    etag: String,
    link: Option<String>,
    body: String,
}

/// Told the reason and the seconds before each wait (the progress shows it).
pub(crate) type OnWait = Box<dyn FnMut(&str, f64)>;

pub(crate) struct Client {
    api: String,
    /// The `Authorization` header's value, never printed.
    auth: Option<String>,
    cache: PathBuf,
    scratch: tempfile::TempDir,
    pub(crate) stats: Stats,
    pub(crate) budget: Option<Budget>,
    /// Called with the reason before each wait (the progress line shows it).
    pub(crate) on_wait: OnWait,
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A number in [0, 1) that differs between processes and calls (wait spreading only).
fn jitter() -> f64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let digest = sha256_hex(format!("{t}:{}", std::process::id()).as_bytes());
    let n = u32::from_str_radix(&digest[..8], 16).unwrap_or(0);
    f64::from(n) / (f64::from(u32::MAX) + 1.0)
}

/// A string in curl's config syntax.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Client {
    /// `token`: the value of the user's `--token-env` variable, when set.
    pub(crate) fn new(
        api: &str,
        token: Option<String>,
        out: &Path,
    ) -> Result<Client, CollectError> {
        let cache = out.join(".cache").join("http");
        std::fs::create_dir_all(&cache).map_err(|source| CollectError::Write {
            path: cache.clone(),
            source,
        })?;
        let scratch = tempfile::tempdir().map_err(|source| CollectError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
        Ok(Client {
            api: api.trim_end_matches('/').to_string(),
            auth: token.map(|t| format!("Bearer {}", t.trim())),
            cache,
            scratch,
            stats: Stats::default(),
            budget: None,
            on_wait: Box::new(|_, _| {}),
        })
    }

    /// `path` (`/repos/...`) on the API, or a full URL (a `Link`'s next page).
    pub(crate) fn url(&self, path: &str) -> String {
        if path.contains("://") {
            path.to_string()
        } else {
            format!("{}{path}", self.api)
        }
    }

    fn cache_path(&self, url: &str) -> PathBuf {
        self.cache
            .join(format!("{}.json", sha256_hex(url.as_bytes())))
    }

    fn cached(&self, url: &str) -> Option<Cached> {
        let text = std::fs::read(self.cache_path(url)).ok()?;
        serde_json::from_slice::<Cached>(&text)
            .ok()
            .filter(|c| c.url == url)
    }

    /// One transfer: the head, and the body's bytes.
    fn transfer(&self, url: &str, etag: Option<&str>) -> Result<(Head, Vec<u8>), String> {
        let body = self.scratch.path().join("body");
        let _ = std::fs::remove_file(&body);
        let mut config = format!("url = {}\n", quoted(url));
        let mut header = |h: &str| config.push_str(&format!("header = {}\n", quoted(h)));
        header("Accept: application/vnd.github+json");
        header("X-GitHub-Api-Version: 2022-11-28");
        header("User-Agent: reprorun-audit-collect");
        if let Some(a) = &self.auth {
            header(&format!("Authorization: {a}"));
        }
        if let Some(e) = etag {
            header(&format!("If-None-Match: {e}"));
        }
        let mut child = Command::new("curl")
            .args(["-sS", "-L", "--connect-timeout", "20", "--max-time", "300"])
            .args(["--config", "-", "-D", "-", "-o"])
            .arg(&body)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("run curl: {e}; audit collect fetches with curl"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(config.as_bytes())
                .map_err(|e| format!("write curl's config: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("wait for curl: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(err
                .trim()
                .lines()
                .last()
                .unwrap_or("curl failed")
                .to_string());
        }
        let head = limits::parse_head(&String::from_utf8_lossy(&out.stdout))
            .ok_or("no HTTP status line in the answer")?;
        let bytes = std::fs::read(&body).unwrap_or_default();
        Ok((head, bytes))
    }

    fn wait(&mut self, secs: f64, why: &str) {
        self.stats.retries += 1;
        (self.on_wait)(why, secs);
        std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
    }

    /// GET `path` with the rate limits honoured; a 304 is answered from the cache, a 200
    /// with an `ETag` is cached. Other statuses come back as they are, for the caller.
    pub(crate) fn get(&mut self, path: &str) -> Result<Answer, CollectError> {
        let url = self.url(path);
        let cached = self.cached(&url);
        let mut attempt = 0;
        let (head, bytes) = loop {
            if let Some(secs) = limits::wait_for_budget(self.budget, now()) {
                self.wait(secs as f64, "primary rate limit spent");
            }
            self.stats.requests += 1;
            if cached.is_some() {
                self.stats.conditional += 1;
            }
            let got = self.transfer(&url, cached.as_ref().map(|c| c.etag.as_str()));
            if let Ok((h, _)) = &got {
                if let Some(b) = h.budget() {
                    self.budget = Some(b);
                }
            }
            let says_limit = got.as_ref().is_ok_and(|(_, b)| {
                String::from_utf8_lossy(b)
                    .to_ascii_lowercase()
                    .contains("rate limit")
            });
            let decision = limits::decide(
                got.as_ref().ok().map(|(h, _)| h),
                says_limit,
                now(),
                attempt,
                jitter(),
            );
            match (decision, got) {
                (Decision::Use, Ok(answer)) => break answer,
                (Decision::Retry { secs, why }, _) => self.wait(secs, &why),
                (Decision::GiveUp(why), Err(e)) => {
                    return Err(CollectError::Http {
                        url,
                        reason: format!("{e} ({why})"),
                    })
                }
                (Decision::GiveUp(why), Ok(_)) | (Decision::Use, Err(why)) => {
                    return Err(CollectError::Http { url, reason: why })
                }
            }
            attempt += 1;
        };
        self.answer(url, cached, head, bytes)
    }

    fn answer(
        &mut self,
        url: String,
        cached: Option<Cached>,
        head: Head,
        bytes: Vec<u8>,
    ) -> Result<Answer, CollectError> {
        let bad = |reason: String| CollectError::Http {
            url: url.clone(),
            reason,
        };
        if head.status == 304 {
            let c = cached.ok_or_else(|| {
                bad("304 Not Modified for a request that was not conditional".into())
            })?;
            self.stats.not_modified += 1;
            let body =
                serde_json::from_str(&c.body).map_err(|e| bad(format!("cached body: {e}")))?;
            return Ok(Answer {
                status: 200,
                body,
                next: c.link.as_deref().and_then(limits::next_link),
            });
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| bad(format!("HTTP {}: not JSON: {e}", head.status)))?
        };
        let link = head.get("link").map(str::to_string);
        if let (200, Some(etag)) = (head.status, head.get("etag")) {
            let entry = Cached {
                url: url.clone(),
                etag: etag.to_string(),
                link: link.clone(),
                body: text,
            };
            let path = self.cache_path(&url);
            let json = serde_json::to_vec(&entry).map_err(|e| bad(format!("cache: {e}")))?;
            reprorun_runtime::sys::write_atomic(&path, &json, 0o600)
                .map_err(|source| CollectError::Write { path, source })?;
        }
        Ok(Answer {
            status: head.status,
            body,
            next: link.as_deref().and_then(limits::next_link),
        })
    }

    /// Every page of a list, from `path` on through `Link: rel="next"`; `None` on a 404 or
    /// 410 (GitHub's answer when a repository's issues are disabled).
    pub(crate) fn get_all(&mut self, path: &str) -> Result<Option<Vec<Value>>, CollectError> {
        let mut items = Vec::new();
        let mut next = Some(path.to_string());
        while let Some(page) = next.take() {
            let a = self.get(&page)?;
            match (a.status, a.body) {
                (200, Value::Array(list)) => items.extend(list),
                (404 | 410, _) => return Ok(None),
                (status, body) => return Err(api_error(&self.url(&page), status, &body)),
            }
            next = a.next;
            if let Some(n) = next
                .as_deref()
                .filter(|n| !limits::same_origin(&self.api, n))
            {
                return Err(CollectError::Http {
                    url: self.url(&page),
                    reason: format!("the next page {n} is not on {}: not followed", self.api),
                });
            }
        }
        Ok(Some(items))
    }
}

/// A status the caller does not expect, with GitHub's `message`.
pub(crate) fn api_error(url: &str, status: u16, body: &Value) -> CollectError {
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    CollectError::Http {
        url: url.to_string(),
        reason: format!("HTTP {status}: {message}"),
    }
}
