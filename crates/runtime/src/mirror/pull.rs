//! `mirror pull`: the index as it stood at a date. Resolution is delegated to uv
//! (`uv pip compile --exclude-newer DATE`); files are fetched with curl from the index's
//! PEP 691 JSON pages, only those uploaded by DATE, each checked against the index's sha256.
//! Everything is written into a temporary directory renamed into place at the end.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::dist::{self, Kind};
use super::{io, rfc3339, Lock, MirrorError, Record};

pub(crate) const DEFAULT_INDEX: &str = "https://pypi.org/simple";
pub(crate) const DEFAULT_GOPROXY: &str = "https://proxy.golang.org";

pub(crate) struct PullOpts {
    pub(crate) date: i64,
    pub(crate) requirements: Option<PathBuf>,
    pub(crate) packages: Vec<String>,
    pub(crate) python: String,
    pub(crate) platform: Option<String>,
    pub(crate) index: String,
    pub(crate) out: PathBuf,
    pub(crate) go_mod: Option<PathBuf>,
    pub(crate) go_proxy: String,
    /// `--npm package.json`, its `--npm-lock` and the `--npm-registry`.
    pub(crate) npm: Option<PathBuf>,
    pub(crate) npm_lock: Option<PathBuf>,
    pub(crate) npm_registry: String,
}

fn fail(msg: impl Into<String>) -> MirrorError {
    MirrorError::Pull(msg.into())
}

/// The last meaningful line of a tool's error output.
fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // uv explains an unsatisfiable resolution over several lines: keep the first that says why.
    let find = |needle: &str| lines.iter().find(|l| l.contains(needle));
    find("Because")
        .or_else(|| find("not found"))
        .or_else(|| find("No solution"))
        .or(lines.last())
        .map(|l| {
            l.trim_start_matches("error: ")
                .trim_start_matches("╰─▶ ")
                .to_string()
        })
        .unwrap_or_else(|| "failed".into())
}

/// Resolves `requirements` (a requirements file) at the date with uv; returns `name==version`
/// pins.
fn resolve(
    o: &PullOpts,
    requirements: &Path,
    scratch: &Path,
) -> Result<Vec<(String, String)>, MirrorError> {
    let pins = scratch.join(format!("pins-{}.txt", std::process::id()));
    let mut cmd = Command::new("uv");
    cmd.args([
        "pip",
        "compile",
        "--quiet",
        "--no-header",
        "--no-annotate",
        "--no-config",
    ])
    .arg(requirements)
    .args(["--exclude-newer", &rfc3339(o.date)])
    .args(["--index-url", &o.index])
    .args(["--python-version", &o.python])
    .arg("--output-file")
    .arg(&pins)
    .env("UV_NO_PROGRESS", "1");
    if o.index.starts_with("http://") {
        if let Some(host) = o
            .index
            .trim_start_matches("http://")
            .split(['/', ':'])
            .next()
        {
            cmd.args(["--allow-insecure-host", host]);
        }
    }
    if let Some(p) = &o.platform {
        cmd.args(["--python-platform", p]);
    }
    let out = cmd.output().map_err(|e| {
        fail(format!(
            "run uv: {e}; mirror pull resolves with uv (install it: pip install uv)"
        ))
    })?;
    if !out.status.success() {
        return Err(fail(format!(
            "resolution against {} as of {} failed: {}",
            o.index,
            rfc3339(o.date),
            last_line(&out.stderr)
        )));
    }
    let text = std::fs::read_to_string(&pins).map_err(io("read", &pins))?;
    let mut list = Vec::new();
    for line in text.lines() {
        let line = line
            .split('#')
            .next()
            .unwrap_or("")
            .trim()
            .trim_end_matches('\\')
            .trim();
        if line.is_empty() || line.starts_with('-') {
            continue;
        }
        let spec = line.split(';').next().unwrap_or(line).trim();
        if let Some((name, version)) = spec.split_once("==") {
            let name = name.split('[').next().unwrap_or(name);
            list.push((dist::normalize(name.trim()), version.trim().to_string()));
        }
    }
    Ok(list)
}

/// `curl -fsSL` to a file or to memory.
fn curl(url: &str, accept: Option<&str>, to: Option<&Path>) -> Result<Vec<u8>, MirrorError> {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-fsSL",
        "--retry",
        "2",
        "--connect-timeout",
        "10",
        "--max-time",
        "600",
    ]);
    if let Some(a) = accept {
        cmd.args(["-H", &format!("Accept: {a}")]);
    }
    if let Some(p) = to {
        cmd.arg("-o").arg(p);
    }
    cmd.arg(url);
    let out = cmd
        .output()
        .map_err(|e| fail(format!("run curl: {e}; mirror pull fetches with curl")))?;
    if !out.status.success() {
        return Err(fail(format!("fetch {url}: {}", last_line(&out.stderr))));
    }
    Ok(out.stdout)
}

/// `rel` resolved against the page `base` (a URL ending in `/`).
fn join_url(base: &str, rel: &str) -> String {
    if rel.contains("://") {
        return rel.to_string();
    }
    let rel = rel.split('#').next().unwrap_or(rel);
    let (scheme_host, path) = match base
        .find("://")
        .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
    {
        Some(at) => (&base[..at], &base[at..]),
        None => (base, "/"),
    };
    if rel.starts_with('/') {
        return format!("{scheme_host}{rel}");
    }
    let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if !path.ends_with('/') {
        parts.pop();
    }
    for seg in rel.split('/') {
        match seg {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            s => parts.push(s),
        }
    }
    format!("{scheme_host}/{}", parts.join("/"))
}

/// One file of a project page, as the index describes it.
struct IndexFile {
    filename: String,
    url: String,
    sha256: String,
    upload_time: i64,
    requires_python: Option<String>,
}

/// The files of `version` of `project` the index lists (PEP 691 JSON, PEP 700 upload times).
fn project_files(index: &str, project: &str, version: &str) -> Result<Vec<IndexFile>, MirrorError> {
    let page = format!("{}/{project}/", index.trim_end_matches('/'));
    let body = curl(&page, Some("application/vnd.pypi.simple.v1+json"), None)?;
    let json: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
        fail(format!(
            "{page}: not a PEP 691 JSON page; mirror pull needs an index that serves JSON with upload times (PEP 700)"
        ))
    })?;
    let mut out = Vec::new();
    for f in json["files"].as_array().into_iter().flatten() {
        let Some(filename) = f["filename"].as_str() else {
            continue;
        };
        let Some(name) = dist::parse(filename) else {
            continue;
        };
        if name.version != version || f["yanked"].as_bool() == Some(true) || f["yanked"].is_string()
        {
            continue;
        }
        let Some(sha256) = f["hashes"]["sha256"].as_str() else {
            continue;
        };
        let Some(upload) = f["upload-time"]
            .as_str()
            .and_then(|t| crate::determinism::date::parse_date(t).ok())
        else {
            continue; // no upload time: cannot prove it existed by the date
        };
        out.push(IndexFile {
            filename: filename.to_string(),
            url: join_url(&page, f["url"].as_str().unwrap_or(filename)),
            sha256: sha256.to_ascii_lowercase(),
            upload_time: upload,
            requires_python: f["requires-python"].as_str().map(String::from),
        });
    }
    Ok(out)
}

/// `[build-system] requires` of an sdist's pyproject.toml (PEP 517's default without one).
fn build_requires(sdist: &Path) -> Vec<String> {
    let default = vec!["setuptools>=40.8.0".to_string(), "wheel".to_string()];
    let Ok(f) = std::fs::File::open(sdist) else {
        return default;
    };
    let text = if sdist.to_string_lossy().ends_with(".tar.gz") {
        let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(f));
        let Ok(entries) = ar.entries() else {
            return default;
        };
        let mut found = None;
        for e in entries.flatten() {
            let is_top_pyproject = e
                .path()
                .ok()
                .is_some_and(|p| p.components().count() == 2 && p.ends_with("pyproject.toml"));
            if is_top_pyproject {
                let mut e = e;
                let mut s = String::new();
                use std::io::Read;
                if e.by_ref().take(1 << 20).read_to_string(&mut s).is_ok() {
                    found = Some(s);
                }
                break;
            }
        }
        match found {
            Some(s) => s,
            None => return default,
        }
    } else {
        return default;
    };
    parse_build_requires(&text).unwrap_or(default)
}

/// The `requires` list of `[build-system]` in a pyproject.toml (the common single- or
/// multi-line array of strings).
fn parse_build_requires(toml: &str) -> Option<Vec<String>> {
    let at = toml.find("[build-system]")?;
    let section = &toml[at + "[build-system]".len()..];
    let section = section.split("\n[").next().unwrap_or(section);
    let req = section.find("requires")?;
    let rest = &section[req..];
    let open = rest.find('[')?;
    let close = rest[open..].find(']')? + open;
    // The quoted strings of the array (a comma may sit inside one: "x>=1,<2").
    let mut items = Vec::new();
    let mut quote = None;
    let mut cur = String::new();
    for c in rest[open + 1..close].chars() {
        match quote {
            Some(q) if c == q => {
                items.push(std::mem::take(&mut cur));
                quote = None;
            }
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => quote = Some(c),
            None => {}
        }
    }
    Some(items)
}

/// Builds the mirror. Nothing is left at `out` unless the whole pull succeeds.
pub(crate) fn pull(o: &PullOpts) -> Result<Lock, MirrorError> {
    if o.out.exists() {
        return Err(fail(format!(
            "--out {}: exists already; remove it or choose another directory",
            o.out.display()
        )));
    }
    let parent = o
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = o
        .out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "mirror".into());
    let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(io("create", &tmp))?;
    let result = pull_into(o, &tmp);
    match result {
        Ok(lock) => {
            let _ = std::fs::remove_dir_all(tmp.join(".scratch"));
            std::fs::rename(&tmp, &o.out).map_err(|e| {
                let _ = std::fs::remove_dir_all(&tmp);
                io("rename", &o.out)(e)
            })?;
            Ok(lock)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

fn pull_into(o: &PullOpts, tmp: &Path) -> Result<Lock, MirrorError> {
    let scratch = tmp.join(".scratch");
    std::fs::create_dir_all(&scratch).map_err(io("create", &scratch))?;
    let mut records = Vec::new();
    if o.requirements.is_some() || !o.packages.is_empty() {
        let req = match &o.requirements {
            Some(r) if o.packages.is_empty() => {
                std::fs::metadata(r).map_err(io("read -r", r))?;
                r.clone()
            }
            // -r with packages (or --project): one file that includes the other.
            Some(r) => {
                let r = std::fs::canonicalize(r).map_err(io("read -r", r))?;
                let p = scratch.join("requirements.in");
                let text = format!("-r {}\n{}\n", r.display(), o.packages.join("\n"));
                std::fs::write(&p, text).map_err(io("write", &p))?;
                p
            }
            None => {
                let p = scratch.join("requirements.in");
                std::fs::write(&p, o.packages.join("\n") + "\n").map_err(io("write", &p))?;
                p
            }
        };
        let files_dir = tmp.join(super::layout::FILES_DIR);
        std::fs::create_dir_all(&files_dir).map_err(io("create", &files_dir))?;
        let mut pins = resolve(o, &req, &scratch)?;
        let mut done = std::collections::BTreeSet::new();
        let mut build_round = false;
        loop {
            let mut backend_reqs = Vec::new();
            for (project, version) in &pins {
                if !done.insert((project.clone(), version.clone())) {
                    continue;
                }
                let files = project_files(&o.index, project, version)?;
                let by_date: Vec<&IndexFile> =
                    files.iter().filter(|f| f.upload_time <= o.date).collect();
                let fitting: Vec<&IndexFile> = by_date
                    .iter()
                    .copied()
                    .filter(|f| {
                        dist::parse(&f.filename).is_some_and(|n| {
                            dist::wheel_fits(&n.kind, &o.python, o.platform.as_deref())
                        })
                    })
                    .collect();
                if fitting.is_empty() {
                    return Err(fail(format!(
                        "{project}=={version}: no file for Python {} uploaded by {}",
                        o.python,
                        rfc3339(o.date)
                    )));
                }
                let has_wheel = fitting.iter().any(|f| {
                    dist::parse(&f.filename).is_some_and(|n| matches!(n.kind, Kind::Wheel { .. }))
                });
                for f in fitting {
                    let dest = files_dir.join(&f.filename);
                    curl(&f.url, None, Some(&dest))?;
                    let (sha, size) = super::hash_file(&dest)?;
                    if sha != f.sha256 {
                        return Err(fail(format!(
                            "{}: sha256 {sha}, the index says {}; refusing it",
                            f.filename, f.sha256
                        )));
                    }
                    if !has_wheel && f.filename.ends_with(".tar.gz") {
                        backend_reqs.extend(build_requires(&dest));
                    }
                    records.push(Record {
                        name: project.clone(),
                        version: version.clone(),
                        filename: f.filename.clone(),
                        sha256: sha,
                        size,
                        upload_time: rfc3339(f.upload_time),
                        requires_python: f.requires_python.clone(),
                    });
                }
            }
            // Build backends of sdist-only packages, resolved at the same date (one round:
            // backends are wheels in practice).
            if backend_reqs.is_empty() || build_round {
                break;
            }
            build_round = true;
            backend_reqs.sort();
            backend_reqs.dedup();
            let p = scratch.join("build-requirements.in");
            std::fs::write(&p, backend_reqs.join("\n") + "\n").map_err(io("write", &p))?;
            pins = resolve(o, &p, &scratch)?;
        }
    }
    let go = match &o.go_mod {
        Some(m) => super::go::pull(m, &o.go_proxy, o.date, tmp)?,
        None => Vec::new(),
    };
    let npm = match &o.npm {
        Some(pj) => super::npm::pull::pull(
            &super::npm::pull::NpmOpts {
                package_json: pj,
                lock: o.npm_lock.as_deref(),
                registry: &o.npm_registry,
                date: o.date,
            },
            tmp,
        )?,
        None => Vec::new(),
    };
    let lock = Lock {
        lock_version: super::layout::LOCK_VERSION,
        date: Some(rfc3339(o.date)),
        index: Some(o.index.clone()),
        files: records,
        go,
        npm,
    };
    let _ = std::fs::remove_dir_all(&scratch);
    super::write(tmp, &lock)?;
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_join_like_a_browser() {
        let page = "https://pypi.org/simple/foo/";
        assert_eq!(
            join_url(page, "../../files/a.whl#sha256=x"),
            "https://pypi.org/files/a.whl"
        );
        assert_eq!(
            join_url(page, "/packages/a.whl"),
            "https://pypi.org/packages/a.whl"
        );
        assert_eq!(
            join_url(page, "https://files.example/a.whl"),
            "https://files.example/a.whl"
        );
        assert_eq!(
            join_url("http://127.0.0.1:8000/simple/foo/", "a.whl"),
            "http://127.0.0.1:8000/simple/foo/a.whl"
        );
    }

    #[test]
    fn build_requires_read_from_pyproject() {
        let toml = "[project]\nname='x'\n[build-system]\nrequires = [\n  \"flit_core >=3.2,<4\",\n  'wheel',\n]\nbuild-backend = \"flit_core.buildapi\"\n[tool.x]\nrequires=['no']\n";
        assert_eq!(
            parse_build_requires(toml).unwrap(),
            ["flit_core >=3.2,<4", "wheel"]
        );
        assert!(parse_build_requires("[project]\nname='x'\n").is_none());
    }

    #[test]
    fn tool_errors_keep_the_reason() {
        let uv = b"  x No solution found when resolving dependencies:\n  \xe2\x95\xb0\xe2\x94\x80\xe2\x96\xb6 Because there are no versions of foo and you require foo, we can conclude that your requirements are unsatisfiable.\n";
        assert!(last_line(uv).contains("Because there are no versions of foo"));
        assert_eq!(
            last_line(b"curl: (7) Failed to connect\n"),
            "curl: (7) Failed to connect"
        );
    }
}
