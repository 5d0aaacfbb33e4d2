//! `mirror pull --npm package.json`: the registry packages a project needs, as the registry
//! stood at a date.
//!
//! With a lockfile, its versions are mirrored and one published after the date fails the
//! pull. Without one, resolution is npm's own: reprorun serves a date-cut view of the
//! registry on loopback ([`super::cut`] of every packument) and runs `npm install
//! --package-lock-only --ignore-scripts` against it in a scratch directory, then mirrors the
//! lockfile npm wrote. Every tarball is fetched with curl and checked against its sha512
//! integrity (the registry's, and the lockfile's when it has one).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::lockfile::{self, Locked};
use crate::mirror::layout::NpmRecord;
use crate::mirror::serve::{Response, Server};
use crate::mirror::{io, rfc3339, MirrorError};

/// What `--npm` asks for.
pub(crate) struct NpmOpts<'a> {
    pub(crate) package_json: &'a Path,
    pub(crate) lock: Option<&'a Path>,
    pub(crate) registry: &'a str,
    pub(crate) date: i64,
}

fn fail(msg: impl Into<String>) -> MirrorError {
    MirrorError::Pull(msg.into())
}

/// Tarballs fetched at once.
const WORKERS: usize = 8;

/// The upstream registry's documents, fetched once each (shared by the cut view and the
/// tarball fetches).
struct Upstream {
    registry: String,
    docs: Mutex<HashMap<String, Arc<Value>>>,
    /// The first failure the cut view met (reported instead of npm's account of it).
    error: Mutex<Option<String>>,
}

impl Upstream {
    fn new(registry: &str) -> Upstream {
        Upstream {
            registry: registry.trim_end_matches('/').to_string(),
            docs: Mutex::default(),
            error: Mutex::default(),
        }
    }

    /// The registry's full document of `name` (with its `time` map).
    fn doc(&self, name: &str) -> Result<Arc<Value>, String> {
        if let Some(d) = self.docs.lock().ok().and_then(|m| m.get(name).cloned()) {
            return Ok(d);
        }
        let url = format!("{}/{}", self.registry, super::escaped(name));
        let (status, body) = get(&url)?;
        match status {
            200 => {}
            404 => {
                return Err(format!(
                    "{name}: no such package in the registry {}",
                    self.registry
                ))
            }
            s => return Err(format!("fetch {url}: HTTP {s}")),
        }
        let doc: Value =
            serde_json::from_slice(&body).map_err(|e| format!("{url}: not a packument: {e}"))?;
        if !doc["versions"].is_object() {
            return Err(format!("{url}: not a packument (no versions)"));
        }
        let doc = Arc::new(doc);
        if let Ok(mut m) = self.docs.lock() {
            m.insert(name.to_string(), doc.clone());
        }
        Ok(doc)
    }
}

/// GET `url` with curl (`Accept: application/json`, the full document): status and body.
fn get(url: &str) -> Result<(u16, Vec<u8>), String> {
    let out = Command::new("curl")
        .args(["-sSL", "--retry", "2", "--connect-timeout", "10"])
        .args(["--max-time", "300", "-H", "Accept: application/json"])
        .args(["-w", "\n%{http_code}", url])
        .output()
        .map_err(|e| format!("run curl: {e}; mirror pull fetches with curl"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "fetch {url}: {}",
            line.unwrap_or("curl failed").trim()
        ));
    }
    let mut body = out.stdout;
    let nl = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let status = String::from_utf8_lossy(&body[nl..])
        .trim()
        .parse()
        .unwrap_or(0);
    body.truncate(nl);
    Ok((status, body))
}

/// `curl -fsSL URL -o DEST`.
fn download(url: &str, dest: &Path) -> Result<(), String> {
    let out = Command::new("curl")
        .args(["-fsSL", "--retry", "2", "--connect-timeout", "10"])
        .args(["--max-time", "600", "-o"])
        .arg(dest)
        .arg(url)
        .output()
        .map_err(|e| format!("run curl: {e}; mirror pull fetches with curl"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().rev().find(|l| !l.trim().is_empty());
    Err(format!(
        "fetch {url}: {}",
        line.unwrap_or("curl failed").trim()
    ))
}

/// The sha512 token of an SRI string (`sha512-…`), if it has one.
fn sha512_of(sri: &str) -> Option<&str> {
    sri.split_whitespace().find(|t| t.starts_with("sha512-"))
}

/// Mirrors what `o` needs into the mirror directory `out`; returns its records.
pub(crate) fn pull(o: &NpmOpts<'_>, out: &Path) -> Result<Vec<NpmRecord>, MirrorError> {
    let pj = o.package_json;
    let text = std::fs::read_to_string(pj).map_err(io("read --npm", pj))?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(_)) => {}
        Ok(_) => return Err(fail(format!("--npm {}: not a JSON object", pj.display()))),
        Err(e) => return Err(fail(format!("--npm {}: not JSON: {e}", pj.display()))),
    }
    let upstream = Arc::new(Upstream::new(o.registry));
    let locked = match o.lock {
        Some(lock) => {
            let text = std::fs::read_to_string(lock).map_err(io("read --npm-lock", lock))?;
            lockfile::parse(&text)
                .map_err(|e| fail(format!("--npm-lock {}: {e}", lock.display())))?
        }
        None => resolve(o, &text, out, &upstream)?,
    };
    fetch_all(&locked, o.date, out, &upstream)
}

/// Runs npm's resolver against a date-cut view of the registry served on loopback; returns
/// the packages of the lockfile it writes.
fn resolve(
    o: &NpmOpts<'_>,
    package_json: &str,
    out: &Path,
    upstream: &Arc<Upstream>,
) -> Result<Vec<Locked>, MirrorError> {
    let scratch = out.join(".npm-scratch");
    std::fs::create_dir_all(&scratch).map_err(io("create", &scratch))?;
    // npm runs in it: every path given to npm is absolute.
    let scratch = std::fs::canonicalize(&scratch).map_err(io("create", &scratch))?;
    let pj = scratch.join("package.json");
    std::fs::write(&pj, package_json).map_err(io("write", &pj))?;
    let (npmrc, global) = (scratch.join("npmrc"), scratch.join("global-npmrc"));
    for f in [&npmrc, &global] {
        std::fs::write(f, "").map_err(io("write", f))?;
    }
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(io("listen on", Path::new("127.0.0.1")))?;
    let port = listener
        .local_addr()
        .map_err(io("listen on", Path::new("127.0.0.1")))?
        .port();
    let (up, date) = (upstream.clone(), o.date);
    let server = Server::start(
        listener,
        Arc::new(move |path: &str, _accept: &str| cut_view(&up, path, date)),
    )
    .map_err(io("serve on", Path::new("127.0.0.1")))?;
    let mut cmd = Command::new("npm");
    cmd.args(["install", "--package-lock-only", "--ignore-scripts"])
        .args(["--no-audit", "--no-fund", "--loglevel=error"])
        .arg(format!("--registry=http://127.0.0.1:{port}/"))
        .current_dir(&scratch);
    // The caller's npm settings (another registry, a proxy, `before`) are not read.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy()
            .to_ascii_lowercase()
            .starts_with("npm_config_")
        {
            cmd.env_remove(k);
        }
    }
    cmd.env("npm_config_cache", scratch.join("cache"))
        .env("npm_config_userconfig", &npmrc)
        .env("npm_config_globalconfig", &global)
        .env("npm_config_update_notifier", "false");
    let res = cmd.output();
    drop(server);
    let res =
        res.map_err(|e| fail(format!("run npm: {e}; mirror pull --npm resolves with npm")))?;
    if let Some(e) = upstream.error.lock().ok().and_then(|e| e.clone()) {
        return Err(fail(e));
    }
    if !res.status.success() {
        return Err(fail(format!(
            "npm's resolution against {} as of {} failed: {}",
            o.registry,
            rfc3339(o.date),
            npm_error(&res.stderr)
        )));
    }
    let lock = scratch.join("package-lock.json");
    let text = std::fs::read_to_string(&lock).map_err(io("read", &lock))?;
    let locked = lockfile::parse(&text).map_err(|e| fail(format!("npm's lockfile: {e}")))?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(locked)
}

/// The cut view's answer to a request path: the packument as it stood at `date`.
fn cut_view(up: &Upstream, path: &str, date: i64) -> Response {
    let name = path.trim_start_matches('/').trim_end_matches('/');
    if !super::valid_name(name) {
        return Response::Status(404, "not a package".into());
    }
    match up.doc(name) {
        Ok(doc) => {
            let cut = super::cut(&doc, date);
            Response::Bytes(
                serde_json::to_vec(&cut).unwrap_or_default(),
                "application/json",
            )
        }
        Err(e) => {
            if let Ok(mut first) = up.error.lock() {
                first.get_or_insert(e);
            }
            Response::Status(404, "not found".into())
        }
    }
}

/// The line of npm's error output that says why (`npm error notarget No matching version
/// found for x@^3.`), without its prefix.
pub(crate) fn npm_error(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text.lines().filter_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("npm error ")
            .or_else(|| l.strip_prefix("npm ERR! "))?
            .trim();
        let skip = rest.is_empty()
            || ["code ", "errno ", "A complete log", "syscall ", "path "]
                .iter()
                .any(|p| rest.starts_with(p));
        (!skip).then(|| rest.to_string())
    });
    lines
        .next()
        .or_else(|| {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(String::from)
        })
        .unwrap_or_else(|| "npm failed".into())
}

/// Fetches every locked package version (a few at a time); the first failure in name order
/// is the one reported.
fn fetch_all(
    locked: &[Locked],
    date: i64,
    out: &Path,
    up: &Upstream,
) -> Result<Vec<NpmRecord>, MirrorError> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<NpmRecord, String>>>> =
        Mutex::new(vec![None; locked.len()]);
    std::thread::scope(|s| {
        for _ in 0..WORKERS.min(locked.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(l) = locked.get(i) else { break };
                let r = fetch_one(l, date, out, up);
                let failed = r.is_err();
                if let Ok(mut v) = results.lock() {
                    v[i] = Some(r);
                }
                if failed {
                    // Stop handing out work: the pull fails anyway.
                    next.store(locked.len(), Ordering::SeqCst);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_default();
    let mut records = Vec::new();
    for r in results.into_iter().flatten() {
        records.push(r.map_err(fail)?);
    }
    if records.len() != locked.len() {
        return Err(fail("npm tarball fetch stopped early"));
    }
    Ok(records)
}

/// One package version: checked against the date, fetched, checked against its integrity.
fn fetch_one(l: &Locked, date: i64, out: &Path, up: &Upstream) -> Result<NpmRecord, String> {
    let id = format!("{}@{}", l.name, l.version);
    let doc = up.doc(&l.name)?;
    let vdoc = doc["versions"]
        .get(&l.version)
        .ok_or_else(|| format!("{id}: the registry has no such version"))?;
    let time = doc["time"][&l.version].as_str().ok_or_else(|| {
        format!("{id}: the registry gives no publish time, so it cannot be dated")
    })?;
    let t = crate::determinism::date::parse_date(time)
        .map_err(|_| format!("{id}: publish time {time:?} is not a date"))?;
    if t > date {
        return Err(format!(
            "{id} was published {time}, after {}; pin an earlier version in the lockfile",
            rfc3339(date)
        ));
    }
    let dist = &vdoc["dist"];
    let url = dist["tarball"]
        .as_str()
        .ok_or_else(|| format!("{id}: no dist.tarball"))?;
    let registry_sha512 = dist["integrity"].as_str().and_then(sha512_of);
    let lock_sha512 = l.integrity.as_deref().and_then(sha512_of);
    if let (Some(r), Some(k)) = (registry_sha512, lock_sha512) {
        if r != k {
            return Err(format!(
                "{id}: the lockfile's integrity {k} is not the registry's {r}"
            ));
        }
    }
    let rel = super::tarball_rel(&l.name, &l.version);
    let dest = out.join(&rel);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    }
    download(url, &dest)?;
    let (sri, size) = super::integrity_of(&dest).map_err(|e| format!("read {rel}: {e}"))?;
    let shasum = dist["shasum"].as_str().unwrap_or_default().to_string();
    match registry_sha512.or(lock_sha512) {
        Some(want) if want != sri => {
            return Err(format!(
                "{id}: tarball {url} has integrity {sri}, the registry says {want}; refusing it"
            ))
        }
        Some(_) => {}
        None if !shasum.is_empty() => {
            let have = super::sha1_of(&dest).map_err(|e| format!("read {rel}: {e}"))?;
            if have != shasum {
                return Err(format!(
                    "{id}: tarball {url} has sha1 {have}, the registry says {shasum}; refusing it"
                ));
            }
        }
        None => {
            return Err(format!(
                "{id}: the registry gives no integrity to check it by"
            ))
        }
    }
    Ok(NpmRecord {
        name: l.name.clone(),
        version: l.version.clone(),
        time: time.to_string(),
        integrity: sri,
        shasum,
        size,
        manifest: super::manifest_of(vdoc),
    })
}
