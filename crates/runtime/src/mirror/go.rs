//! The Go half of a mirror: a GOPROXY tree (`go/MODULE/@v/{list,VERSION.info,.mod,.zip}`)
//! holding the modules a `go.mod` needs, each published no later than the mirror's date.
//! Resolution is Go's own (minimal version selection over the go.mod's requirements): `go mod
//! download` fetches through the upstream proxy into a private module cache, which is then
//! copied into the tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{hash_file, io, GoRecord, MirrorError};
use crate::mirror::layout::GO_DIR;

/// Go's module path escaping for proxies: an upper-case letter becomes `!` + lower case.
pub(crate) fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn unescape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut bang = false;
    for c in path.chars() {
        if c == '!' {
            bang = true;
        } else if bang {
            out.push(c.to_ascii_uppercase());
            bang = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Downloads what `gomod` (a go.mod file) needs through `proxy` and writes the tree under
/// `out/go`. A needed version published after `date` is an error naming it.
pub(crate) fn pull(
    gomod: &Path,
    proxy: &str,
    date: i64,
    out: &Path,
) -> Result<Vec<GoRecord>, MirrorError> {
    let module_dir = gomod
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !gomod.is_file() {
        return Err(MirrorError::Pull(format!(
            "--go {}: no such go.mod file",
            gomod.display()
        )));
    }
    let scratch = out.join(".go-scratch");
    let cache = scratch.join("modcache");
    let gopath = scratch.join("gopath");
    std::fs::create_dir_all(&cache).map_err(io("create", &cache))?;
    // A copy of the module's go.mod and go.sum: `go mod download` may rewrite them.
    let work = scratch.join("module");
    std::fs::create_dir_all(&work).map_err(io("create", &work))?;
    std::fs::copy(gomod, work.join("go.mod")).map_err(io("copy", gomod))?;
    let sum = module_dir.join("go.sum");
    if sum.is_file() {
        std::fs::copy(&sum, work.join("go.sum")).map_err(io("copy", &sum))?;
    }
    let o = Command::new("go")
        .args(["mod", "download", "all"])
        .current_dir(&work)
        .env("GOPROXY", proxy)
        .env("GOMODCACHE", &cache)
        .env("GOPATH", &gopath)
        .env("GOFLAGS", "-mod=mod")
        .env("GOSUMDB", "off")
        .env("GOTOOLCHAIN", "local")
        .env("GOCACHE", scratch.join("gocache"))
        .output()
        .map_err(|e| MirrorError::Pull(format!("run go (golang-go): {e}")))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let line = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .unwrap_or("go mod download failed");
        return Err(MirrorError::Pull(format!(
            "go mod download through {proxy}: {line}"
        )));
    }
    let downloads = cache.join("cache/download");
    let tree = out.join(GO_DIR);
    let mut records = Vec::new();
    let mut infos = Vec::new();
    find_infos(&downloads, &mut infos);
    infos.sort();
    for info in infos {
        let Some(vdir) = info.parent() else { continue };
        let Ok(rel) = vdir.strip_prefix(&downloads) else {
            continue;
        };
        let escaped = rel
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let version = info
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&info).map_err(io("read", &info))?;
        let meta: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| MirrorError::Pull(format!("{}: {e}", info.display())))?;
        let time = meta["Time"].as_str().unwrap_or_default().to_string();
        let t = crate::determinism::date::parse_date(&time)
            .map_err(|_| MirrorError::Pull(format!("{}: no publication time", info.display())))?;
        let module = unescape(&escaped);
        if t > date {
            return Err(MirrorError::Pull(format!(
                "{module}@{version} was published {time}, after {}; pin an earlier version in go.mod",
                super::rfc3339(date)
            )));
        }
        let dest = tree.join(&escaped).join("@v");
        std::fs::create_dir_all(&dest).map_err(io("create", &dest))?;
        let copy = |ext: &str| -> Result<Option<String>, MirrorError> {
            let src = vdir.join(format!("{version}.{ext}"));
            if !src.is_file() {
                return Ok(None);
            }
            let to = dest.join(format!("{version}.{ext}"));
            std::fs::copy(&src, &to).map_err(io("copy", &src))?;
            Ok(Some(hash_file(&to)?.0))
        };
        copy("info")?;
        let mod_sha256 = copy("mod")?.unwrap_or_default();
        let zip_sha256 = copy("zip")?.unwrap_or_default();
        records.push(GoRecord {
            module,
            version,
            time: super::rfc3339(t),
            zip_sha256,
            mod_sha256,
        });
    }
    write_lists(&tree, &records)?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(records)
}

fn find_infos(at: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(at) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            find_infos(&p, out);
        } else if p.extension().is_some_and(|x| x == "info")
            && p.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n == "@v")
        {
            out.push(p);
        }
    }
}

/// `@v/list` of every module: its versions, one per line.
fn write_lists(tree: &Path, records: &[GoRecord]) -> Result<(), MirrorError> {
    let mut by_module: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for r in records {
        by_module.entry(&r.module).or_default().push(&r.version);
    }
    for (module, versions) in by_module {
        let path = tree.join(escape(module)).join("@v/list");
        let text: String = versions.iter().map(|v| format!("{v}\n")).collect();
        std::fs::write(&path, text).map_err(io("write", &path))?;
    }
    Ok(())
}

/// Problems with the Go tree against the lock.
pub(crate) fn verify(dir: &Path, records: &[GoRecord]) -> Vec<String> {
    let mut problems = Vec::new();
    for r in records {
        let at = dir.join(GO_DIR).join(escape(&r.module)).join("@v");
        for (ext, want) in [("zip", &r.zip_sha256), ("mod", &r.mod_sha256)] {
            if want.is_empty() {
                continue;
            }
            let path = at.join(format!("{}.{ext}", r.version));
            match hash_file(&path) {
                Ok((sha, _)) if &sha == want => {}
                Ok((sha, _)) => problems.push(format!(
                    "go/{}/@v/{}.{ext}: sha256 {sha}, the lock says {want}",
                    escape(&r.module),
                    r.version
                )),
                Err(_) => problems.push(format!(
                    "go/{}/@v/{}.{ext}: missing",
                    escape(&r.module),
                    r.version
                )),
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths_escape_both_ways() {
        assert_eq!(
            escape("github.com/BurntSushi/toml"),
            "github.com/!burnt!sushi/toml"
        );
        assert_eq!(
            unescape("github.com/!burnt!sushi/toml"),
            "github.com/BurntSushi/toml"
        );
        assert_eq!(escape("golang.org/x/mod"), "golang.org/x/mod");
    }
}
