//! Prepared trees: the repository checked out at `base_commit` with the model patch (or,
//! for a baseline, none) and the test patch applied. A tree is made once per instance and
//! variant and shared read-only by its runs, each of which gets a fresh writable overlay
//! over it; patch application is deterministic, so doing it once per run would only repeat
//! the same result.
//!
//! The checkout is made on the host by git (the repository is the user's). The patches come
//! from a model and are untrusted, so they are applied *inside a sandbox* (no network, the
//! tree the only writable path), trying `git apply`, `git apply --3way`, `git apply
//! --reject` and `patch --batch --fuzz=5 -p1` in turn, from a clean tree each time.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::input::Instance;
use reprorun_pipeline::unit::{self, UnitError, UnitOutcome, OUT_DIR};
use reprorun_runtime::parse::BindSpec;
use reprorun_runtime::plan::{ExecRequest, ExtraMount, HostFacts, Isolation};

#[derive(Debug, Error)]
pub enum TreeError {
    #[error("instance {id}: {step}: {reason}")]
    Checkout {
        id: String,
        step: &'static str,
        reason: String,
    },
    #[error("prepare tree {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("apply patches for {id}: {source}")]
    Unit {
        id: String,
        #[source]
        source: UnitError,
    },
    #[error("apply patches for {id}: {source}")]
    Missing {
        id: String,
        #[source]
        source: unit::CommandMissing,
    },
    #[error("apply patches for {id}: {source}")]
    Sandbox {
        id: String,
        #[source]
        source: unit::HostFailure,
    },
}

/// Which patches a tree holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The model patch, then the test patch.
    Patched,
    /// The test patch only (the unpatched repository).
    Baseline,
}

/// How the patches went on; stored beside the tree as `KEY.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Applied {
    /// Both patches applied.
    pub ok: bool,
    /// The method that applied the model patch (`git-apply`, `git-apply-3way`,
    /// `git-apply-reject`, `patch-fuzz`), `none` for a baseline, or `failed`/`empty`.
    pub model: String,
    /// The same for the test patch (`none` when the instance has none).
    pub test: String,
    /// The apply step's combined output.
    pub log: String,
    /// The commit checked out (`git rev-parse HEAD` before any patch went on; empty for a
    /// tree made before it was recorded).
    #[serde(default)]
    pub commit: String,
}

/// A tree ready to run: its directory and how its patches applied.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    pub dir: PathBuf,
    pub applied: Applied,
}

/// The cache key of a tree: what makes it differ.
pub(crate) fn key(inst: &Instance, variant: Variant) -> String {
    let mut h = Sha256::new();
    for part in [
        inst.repo_path.to_string_lossy().as_bytes(),
        inst.base_commit.as_bytes(),
        match variant {
            Variant::Patched => inst.model_patch.as_bytes(),
            Variant::Baseline => b"\0baseline",
        },
        inst.test_patch.as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    reprorun_runtime::image::digest::hex(&h.finalize()[..10])
}

/// The tree for `inst`/`variant` under `dir`, made if missing. Concurrent callers (workers)
/// serialize on a lock file; a tree left half-made by a killed run is made again.
pub(crate) fn ensure(dir: &Path, inst: &Instance, variant: Variant) -> Result<Tree, TreeError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TreeError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let k = key(inst, variant);
    let tree = dir.join(&k);
    let meta = dir.join(format!("{k}.json"));
    let lock_path = dir.join(format!("{k}.lock"));
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    // Released when `lock` is dropped.
    let lock = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| io(&lock_path)(errno.into()))?;
    if let Ok(text) = std::fs::read_to_string(&meta) {
        if let Ok(applied) = serde_json::from_str::<Applied>(&text) {
            if tree.is_dir() {
                return Ok(Tree { dir: tree, applied });
            }
        }
    }
    if tree.exists() {
        std::fs::remove_dir_all(&tree).map_err(io(&tree))?;
    }
    let commit = checkout(inst, &tree)?;
    let mut applied = match (variant, inst.model_patch.trim().is_empty()) {
        (Variant::Patched, true) => Applied {
            ok: false,
            model: "empty".into(),
            test: "none".into(),
            log: "the prediction's model_patch is empty\n".into(),
            commit: String::new(),
        },
        _ => apply(dir, &tree, inst, variant)?,
    };
    applied.commit = commit;
    let json = serde_json::to_vec_pretty(&applied).map_err(|e| TreeError::Io {
        path: meta.clone(),
        source: e.into(),
    })?;
    reprorun_runtime::sys::write_atomic(&meta, &json, 0o644).map_err(io(&meta))?;
    drop(lock);
    Ok(Tree { dir: tree, applied })
}

/// `git clone --no-checkout` (objects hard-linked from a local repository, or read from a
/// bundle) and a detached checkout of the base commit; returns the commit checked out
/// (read before any patch, which the sandbox applies, touches the tree).
fn checkout(inst: &Instance, tree: &Path) -> Result<String, TreeError> {
    let fail = |step: &'static str, reason: String| TreeError::Checkout {
        id: inst.instance_id.clone(),
        step,
        reason,
    };
    let partial = tree.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let git = |args: &[&std::ffi::OsStr], step: &'static str| -> Result<(), TreeError> {
        let out = Command::new("git")
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| fail(step, format!("run git: {e}; install git")))?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(fail(
                step,
                err.lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("git failed")
                    .trim()
                    .to_string(),
            ))
        }
    };
    git(
        &[
            "clone".as_ref(),
            "--quiet".as_ref(),
            "--no-checkout".as_ref(),
            "--".as_ref(),
            inst.repo_path.as_os_str(),
            partial.as_os_str(),
        ],
        "git clone",
    )?;
    git(
        &[
            "-C".as_ref(),
            partial.as_os_str(),
            "-c".as_ref(),
            "advice.detachedHead=false".as_ref(),
            "checkout".as_ref(),
            "--quiet".as_ref(),
            "--detach".as_ref(),
            inst.base_commit.as_ref(),
            "--".as_ref(),
        ],
        "git checkout base_commit",
    )?;
    let head = Command::new("git")
        .args([
            "-C".as_ref(),
            partial.as_os_str(),
            "rev-parse".as_ref(),
            "HEAD".as_ref(),
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail("git rev-parse HEAD", e.to_string()))?;
    if !head.status.success() {
        return Err(fail(
            "git rev-parse HEAD",
            String::from_utf8_lossy(&head.stderr).trim().to_string(),
        ));
    }
    std::fs::rename(&partial, tree).map_err(|source| TreeError::Io {
        path: tree.to_path_buf(),
        source,
    })?;
    Ok(String::from_utf8_lossy(&head.stdout).trim().to_string())
}

/// The apply step, run by `/bin/sh` in the sandbox with the tree at /work and the patches
/// at /.reprorun/in. It prints `model METHOD` and `test METHOD` lines to fd 3's file.
const APPLY_SCRIPT: &str = r#"
set -u
exec 3>/.reprorun/out/applied
git config --global --add safe.directory /work 2>/dev/null
git add -A >/dev/null 2>&1 && clean=$(git write-tree) || clean=
restore() {
    if [ -n "$clean" ]; then git read-tree -u --reset "$clean" && git clean -fdq; fi
}
try() {
    name=$1 file=$2
    [ -s "$file" ] || { echo "$name none" >&3; return 0; }
    for m in git-apply git-apply-3way git-apply-reject patch-fuzz; do
        echo "--- $name: $m"
        case $m in
            git-apply) git apply --verbose "$file" ;;
            git-apply-3way) git apply --verbose --3way "$file" ;;
            git-apply-reject) git apply --verbose --reject "$file" ;;
            patch-fuzz) patch --batch --fuzz=5 -p1 --no-backup-if-mismatch -i "$file" ;;
        esac && { echo "$name $m" >&3; git add -A >/dev/null 2>&1 && clean=$(git write-tree); return 0; }
        restore
    done
    echo "$name failed" >&3
    return 1
}
try model /.reprorun/in/model.diff && try test /.reprorun/in/test.diff
status=$?
git reset -q >/dev/null 2>&1
exit $status
"#;

fn apply(dir: &Path, tree: &Path, inst: &Instance, variant: Variant) -> Result<Applied, TreeError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TreeError::Io { path, source }
    };
    let scratch = dir.join(format!("{}.apply", key(inst, variant)));
    let _ = std::fs::remove_dir_all(&scratch);
    let (input, out) = (scratch.join("in"), scratch.join("out"));
    for d in [&input, &out] {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    let model = match variant {
        Variant::Patched => inst.model_patch.as_str(),
        Variant::Baseline => "",
    };
    for (name, text) in [
        ("model.diff", model),
        ("test.diff", inst.test_patch.as_str()),
    ] {
        let p = input.join(name);
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    let log_path = scratch.join("log");
    let log = File::create(&log_path).map_err(io(&log_path))?;
    let mut req = ExecRequest::new(vec!["/bin/sh".into(), "-c".into(), APPLY_SCRIPT.into()]);
    req.workdir = Some(tree.to_path_buf());
    req.isolation = Isolation::Full;
    req.timeout = Some(std::time::Duration::from_secs(600));
    req.extra_mounts = vec![
        ExtraMount::Bind(BindSpec {
            src: input.clone(),
            dest: "/.reprorun/in".into(),
            readonly: true,
        }),
        ExtraMount::Bind(BindSpec {
            src: out.clone(),
            dest: OUT_DIR.into(),
            readonly: false,
        }),
    ];
    let id = || inst.instance_id.clone();
    let unit_err = |source| TreeError::Unit { id: id(), source };
    let host = HostFacts::current().map_err(|e| unit_err(UnitError::Plan(e)))?;
    let outcome = match unit::sandboxed(&req, &host, &log, &log).map_err(unit_err)? {
        UnitOutcome::Ran(o) => o,
        UnitOutcome::CommandMissing(source) => return Err(TreeError::Missing { id: id(), source }),
        UnitOutcome::HostFailure(source) => return Err(TreeError::Sandbox { id: id(), source }),
    };
    // Written by the sandbox: read without following links or blocking, capped.
    let methods = unit::read_untrusted(&out, "applied")
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let method = |name: &str| {
        methods
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or("failed")
            .to_string()
    };
    let mut log = unit::read_untrusted(&scratch, "log")
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    if outcome.timed_out {
        log.push_str("reprorun: applying the patches timed out\n");
    }
    let applied = Applied {
        ok: outcome.exit_code == 0,
        model: match variant {
            Variant::Baseline => "none".into(),
            Variant::Patched => method("model"),
        },
        test: if outcome.exit_code == 0 || methods.contains("test ") {
            method("test")
        } else {
            "not tried".into()
        },
        log,
        commit: String::new(),
    };
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(applied)
}

/// Checks that the study's scratch directory can hold overlay lower directories (the
/// overlay options string cannot name a path with ',', ':' or '\\').
pub(crate) fn check_work_dir(dir: &Path) -> Result<(), crate::ReproduceError> {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    if abs.to_string_lossy().contains([',', ':', '\\']) {
        return Err(crate::ReproduceError::Usage(format!(
            "--db: the study's scratch directory {} holds ',', ':' or '\\', which overlayfs cannot name; put the database elsewhere",
            abs.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_path_must_suit_overlayfs() {
        assert!(check_work_dir(Path::new("/tmp/study.db.work")).is_ok());
        let e = check_work_dir(Path::new("/tmp/2024-05-10T12:00/study.db.work")).unwrap_err();
        assert!(e.to_string().contains("overlayfs cannot name"), "{e}");
    }
}
