//! The sandbox of one agent run, as a request: a root of the host's system directories only
//! (or an image), `/work` read-only with the snapshot, the paper and the prompt, `/out` the
//! one writable directory besides `/tmp`, a private empty HOME, no network or only the
//! allowlist, the real clock and entropy (TLS to a model API needs both), the limits.
//!
//! What must never enter: the hidden issues (the corpus manifest), the clone and its
//! history, the caller's home, the study's database. The host's root is not the sandbox's
//! root here: only `/usr`, `/etc` (its secrets covered) and the top-level links into `/usr`
//! are, and a corpus or database under one of those is refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::agent::{Invocation, CODEX_HOME, OUT, SELF_BIN};
use reprorun_runtime::determinism::{DateChoice, RandomMode};
use reprorun_runtime::parse::BindSpec;
use reprorun_runtime::plan::{ExecRequest, ExtraMount, Isolation, NetMode, WorkdirMode};

/// Host directories an agent's root holds (read-only), when they are directories.
pub(crate) const SYSTEM_DIRS: &[&str] = &[
    "usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
];

/// Files under /etc covered by the null device: credentials of the host.
const ETC_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
];
/// Directories under /etc covered by an empty tmpfs.
const ETC_SECRET_DIRS: &[&str] = &[
    "/etc/ssh",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/munge",
];

/// What every run of a study shares.
#[derive(Debug, Clone)]
pub(crate) struct Sandbox {
    /// The directory the agent root's top-level links live in (`FILE.work/agent-root`);
    /// `None` with an image.
    pub(crate) root: Option<PathBuf>,
    pub(crate) image: Option<reprorun_runtime::plan::image::ImageRoot>,
    /// `--agent-root`: bound read-only at /opt/agent, its `bin` first on PATH.
    pub(crate) agent_root: Option<PathBuf>,
    /// The reprorun binary (for the built-in auditor).
    pub(crate) self_bin: PathBuf,
    pub(crate) net: reprorun_runtime::plan::NetChoice,
    /// `--pass-env`: names and values (never recorded anywhere).
    pub(crate) pass_env: Vec<(String, String)>,
    /// The model key the proxy puts into requests to the model API (`crate::keys`); `None`
    /// with `--key-in-sandbox` or an agent without one.
    pub(crate) key: Option<crate::keys::ModelKey>,
    pub(crate) timeout: Duration,
    pub(crate) memory: Option<u64>,
    pub(crate) pids: Option<u64>,
}

/// Makes the agent root's top level in `dir`: for each host system directory that is a
/// link (`/bin -> usr/bin` on merged-/usr systems), the same link; the directories
/// themselves are bound by [`request`].
pub(crate) fn prepare_root(dir: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    for name in SYSTEM_DIRS {
        let host = Path::new("/").join(name);
        if let Ok(target) = std::fs::read_link(&host) {
            std::os::unix::fs::symlink(target, dir.join(name))?;
        }
    }
    Ok(())
}

/// Whether `path` lies under a directory the agent's root exposes.
pub(crate) fn exposed(path: &Path) -> Option<&'static str> {
    let dirs: Vec<(&'static str, PathBuf)> = SYSTEM_DIRS
        .iter()
        .map(|d| (*d, Path::new("/").join(d)))
        .collect();
    exposed_among(path, &dirs)
}

/// Which of `dirs` (name, host path) `path` lies under, compared by what the directories
/// are, not by text: the path is resolved as the kernel resolves it (`..`, links; a part
/// not made yet is looked at from its nearest existing ancestor), and each ancestor of the
/// result is compared by device and inode with each directory (so a bind mount of one
/// counts too). A `..` or a link in the text would otherwise put the corpus under `/usr`
/// while the text says elsewhere.
fn exposed_among(path: &Path, dirs: &[(&'static str, PathBuf)]) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let ids: Vec<(&'static str, (u64, u64))> = dirs
        .iter()
        .filter_map(|(name, p)| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (*name, (m.dev(), m.ino())))
        })
        .collect();
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let existing = abs
        .ancestors()
        .find_map(|a| std::fs::canonicalize(a).ok())?;
    existing.ancestors().find_map(|a| {
        let m = std::fs::metadata(a).ok()?;
        ids.iter()
            .find(|(_, id)| *id == (m.dev(), m.ino()))
            .map(|(name, _)| *name)
    })
}

fn bind(src: impl Into<PathBuf>, dest: &str, readonly: bool) -> ExtraMount {
    ExtraMount::Bind(BindSpec {
        src: src.into(),
        dest: dest.into(),
        readonly,
    })
}

/// The request of one run: `work` is the run's `/work` (repo, paper, prompt already in
/// place), `out` its output directory, `codex_home` its Codex home. The model key, if any,
/// gets a placeholder of this run's own.
pub(crate) fn request(
    sb: &Sandbox,
    inv: &Invocation,
    work: &Path,
    out: &Path,
    codex_home: Option<&Path>,
) -> Result<ExecRequest, crate::keys::KeyError> {
    let mut req = ExecRequest::new(inv.argv.clone());
    req.isolation = Isolation::Full;
    req.workdir = Some(work.to_path_buf());
    req.workdir_mode = WorkdirMode::Ro;
    req.date = Some(DateChoice::Now);
    req.random = RandomMode::Real;
    req.timeout = Some(sb.timeout);
    req.resources.memory = sb.memory;
    req.resources.pids = sb.pids;
    req.net = sb.net.mode;
    if sb.net.mode == NetMode::Allow {
        req.egress = sb.net.egress.clone();
    }
    match (&sb.image, &sb.root) {
        (Some(img), _) => req.image = Some(img.clone()),
        (None, Some(root)) => {
            req.rootfs = Some(root.clone());
            for name in SYSTEM_DIRS {
                let host = Path::new("/").join(name);
                if host.is_dir() && !host.is_symlink() {
                    req.extra_mounts
                        .push(bind(&host, &format!("/{name}"), true));
                }
            }
            for f in ETC_SECRETS.iter().filter(|f| Path::new(f).exists()) {
                req.extra_mounts.push(bind("/dev/null", f, true));
            }
            for d in ETC_SECRET_DIRS.iter().filter(|d| Path::new(d).is_dir()) {
                req.extra_mounts.push(ExtraMount::Tmpfs(PathBuf::from(d)));
            }
        }
        (None, None) => {}
    }
    req.extra_mounts.push(bind(out, OUT, false));
    req.extra_mounts.push(bind(&sb.self_bin, SELF_BIN, true));
    if let Some(home) = codex_home {
        req.extra_mounts.push(bind(home, CODEX_HOME, false));
    }
    let mut env = Vec::new();
    if let Some(root) = &sb.agent_root {
        req.extra_mounts.push(bind(root, "/opt/agent", true));
        env.push((
            "PATH".into(),
            format!(
                "/opt/agent/bin:{}",
                reprorun_runtime::determinism::env::FROZEN_PATH
            ),
        ));
    }
    env.extend(inv.env.iter().cloned());
    env.extend(sb.pass_env.iter().cloned());
    req.env = env;
    if let Some(key) = &sb.key {
        crate::keys::inject(&mut req, key)?;
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_under_an_exposed_directory_is_found_through_dotdot_and_links() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("usr/share")).unwrap();
        std::fs::create_dir_all(root.join("home/me")).unwrap();
        std::os::unix::fs::symlink(root.join("usr/share"), root.join("home/me/link")).unwrap();
        let dirs = [("usr", root.join("usr"))];
        let under = |p: PathBuf| exposed_among(&p, &dirs);
        assert_eq!(under(root.join("usr/share/corpus")), Some("usr"));
        assert_eq!(under(root.join("home/me/../../usr/share/c")), Some("usr"));
        assert_eq!(under(root.join("home/me/link/corpus")), Some("usr"));
        assert_eq!(under(root.join("home/me/link/new/deeper")), Some("usr"));
        assert_eq!(under(root.join("home/me/corpus")), None);
        assert_eq!(under(root.join("home/me/usr")), None);
    }
}
