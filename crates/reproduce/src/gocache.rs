//! A Go build cache per instance and tree, warmed once and shared read-only by the runs.
//!
//! Every run starts from a fresh sandbox, so `go test` compiled and linked everything from a
//! cold `GOCACHE` each time (seconds of work per run before a test ran). For an instance
//! whose test command runs `go`, the first run of each tree (base or patched) is preceded by
//! one warm-up: the test command run as the shim arm runs it, with a writable cache bound at
//! [`MOUNT`]; its outcome is not a run and is not recorded. Every run of that tree then gets
//! the same cache bound read-only (Go leaves a cache it cannot write as it is and builds
//! what it lacks), `GOCACHE` naming it, and `-count=1` in `GOFLAGS`, so no test result is
//! replayed from the cache: the tests always run. `--go-cache` turns it on, for the shim arm
//! only
//! (`spec/reproduce.md` says what a cache can hide).
//!
//! The cache is written by a sandbox: the host only creates its directory, takes a lock
//! beside it and writes the marker saying the warm-up ended; it reads nothing in it.

use std::fs::File;
use std::path::{Path, PathBuf};

use reprorun_runtime::parse::BindSpec;
use reprorun_runtime::plan::{ExecRequest, ExtraMount};

/// Where the cache is inside the sandbox.
pub(crate) const MOUNT: &str = "/.reprorun/go-cache";

/// The file that says a cache's warm-up ended (written by the host, beside the cache).
const READY: &str = "ready";

#[derive(Debug, thiserror::Error)]
pub enum GoCacheError {
    #[error("go build cache {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Whether `test_cmd` (a shell command) runs `go`: a word of it is `go` or a path ending in
/// `/go`.
pub(crate) fn runs_go(test_cmd: &str) -> bool {
    test_cmd
        .split(|c: char| c.is_whitespace() || ";|&()'\"`".contains(c))
        .any(|w| w == "go" || w.ends_with("/go"))
}

/// The warmed cache of tree `key` under `dir` (`dir/KEY/cache`): made by `warm` (given the
/// cache directory, to bind writable) the first time, under a lock so that concurrent runs
/// of one tree warm it once. A warm-up that failed with an error leaves no marker: the next
/// run warms again.
pub(crate) fn ensure<E>(
    dir: &Path,
    key: &str,
    warm: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<Result<PathBuf, E>, GoCacheError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GoCacheError::Io { path, source }
    };
    let home = dir.join(key);
    std::fs::create_dir_all(&home).map_err(io(&home))?;
    let lock_path = home.join("lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    // Released when `_lock` is dropped.
    let _lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| io(&lock_path)(errno.into()))?;
    let cache = home.join("cache");
    let ready = home.join(READY);
    if std::fs::symlink_metadata(&ready).is_ok_and(|m| m.is_file()) {
        return Ok(Ok(cache));
    }
    // A warm-up cut short (killed) may have left part of a cache: Go's entries are written
    // whole or not at all, so it is kept and completed.
    std::fs::create_dir_all(&cache).map_err(io(&cache))?;
    if let Err(e) = warm(&cache) {
        return Ok(Err(e));
    }
    std::fs::write(&ready, "").map_err(io(&ready))?;
    Ok(Ok(cache))
}

/// Points the run of `req` at the cache in `cache`: bound at [`MOUNT`] (read-only unless
/// `writable`, the warm-up's), `GOCACHE` naming it and `-count=1` added to `GOFLAGS` (the
/// request's own, from the mirror or the caller, kept before it).
pub(crate) fn attach(req: &mut ExecRequest, cache: &Path, writable: bool) {
    req.extra_mounts.push(ExtraMount::Bind(BindSpec {
        src: cache.to_path_buf(),
        dest: MOUNT.into(),
        readonly: !writable,
    }));
    let flags = req
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "GOFLAGS")
        .map(|(_, v)| v.clone());
    let flags = match flags.as_deref().map(str::trim) {
        Some(f) if !f.is_empty() => format!("{f} -count=1"),
        _ => "-count=1".to_string(),
    };
    req.env.retain(|(k, _)| k != "GOFLAGS" && k != "GOCACHE");
    req.env.push(("GOCACHE".into(), MOUNT.into()));
    req.env.push(("GOFLAGS".into(), flags));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_commands_are_told_from_others() {
        assert!(runs_go("go test -v ./..."));
        assert!(runs_go("cd sub && go test -run 'TestA|TestB' ."));
        assert!(runs_go("/usr/lib/go-1.19/bin/go test ./..."));
        assert!(runs_go("make deps; (go vet ./... && go test ./...)"));
        assert!(!runs_go("pytest -rA tests/"));
        assert!(!runs_go("cargo test --lib gopher"));
        assert!(!runs_go("./go.sh"));
    }

    #[test]
    fn the_cache_is_warmed_once_and_a_failed_warm_up_again() {
        let d = tempfile::tempdir().unwrap();
        let mut warmed = 0;
        let first = ensure::<String>(d.path(), "inst-patched", |c| {
            warmed += 1;
            std::fs::write(c.join("entry"), "x").map_err(|e| e.to_string())
        });
        let cache = first.unwrap().unwrap();
        assert_eq!(cache, d.path().join("inst-patched/cache"));
        let again = ensure::<String>(d.path(), "inst-patched", |_| {
            warmed += 1;
            Ok(())
        });
        assert_eq!(again.unwrap().unwrap(), cache);
        assert_eq!(warmed, 1, "warmed once");
        assert!(cache.join("entry").is_file());
        // A warm-up that errs marks nothing: the next one warms.
        let failed = ensure(d.path(), "other", |_| Err("no sandbox"));
        assert_eq!(failed.unwrap(), Err("no sandbox"));
        let retried = ensure::<()>(d.path(), "other", |_| {
            warmed += 1;
            Ok(())
        });
        assert!(retried.unwrap().is_ok());
        assert_eq!(warmed, 2);
    }

    #[test]
    fn a_run_gets_the_cache_read_only_and_never_a_cached_test_result() {
        let mut req = ExecRequest::new(vec!["sh".into()]);
        req.env.push(("GOFLAGS".into(), "-mod=mod".into()));
        req.env
            .push(("GOCACHE".into(), "/home/u/.cache/go-build".into()));
        attach(&mut req, Path::new("/w/go-cache/i/cache"), false);
        let env: Vec<_> = req.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            env,
            ["GOCACHE=/.reprorun/go-cache", "GOFLAGS=-mod=mod -count=1"]
        );
        assert!(matches!(
            req.extra_mounts.last(),
            Some(ExtraMount::Bind(BindSpec { readonly: true, dest, .. })) if dest == Path::new(MOUNT)
        ));
        let mut warm = ExecRequest::new(vec!["sh".into()]);
        attach(&mut warm, Path::new("/c"), true);
        assert_eq!(warm.env.last().unwrap().1, "-count=1");
        assert!(matches!(
            warm.extra_mounts.last(),
            Some(ExtraMount::Bind(BindSpec {
                readonly: false,
                ..
            }))
        ));
    }
}
