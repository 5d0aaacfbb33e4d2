//! Every git call of `audit snapshot`, through the `git` CLI: `git --git-dir=DIR ...` with
//! no system or user configuration (`GIT_CONFIG_NOSYSTEM=1`, `HOME` an empty directory),
//! `LC_ALL=C`, no prompts, and `safe.directory=*` (the clone may belong to another user).
//! Read-only on the user's repository; a bundle is first cloned (bare) to a temporary dir.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use super::select::Commit;

/// An opened repository. Failures are reasons (`String`) the caller names the pair in.
pub(crate) struct Repo {
    git_dir: PathBuf,
    home: tempfile::TempDir,
    /// The bare clone of a bundle, removed on drop.
    _bundle: Option<tempfile::TempDir>,
}

impl Repo {
    /// A local repository (a directory: work tree or bare) or a bundle file.
    pub(crate) fn open(clone: &Path) -> Result<Repo, String> {
        let meta =
            std::fs::metadata(clone).map_err(|e| format!("clone {}: {e}", clone.display()))?;
        let home = tempfile::tempdir().map_err(|e| format!("temporary HOME: {e}"))?;
        if meta.is_file() {
            let tmp = tempfile::tempdir().map_err(|e| format!("temporary clone: {e}"))?;
            let dest = tmp.path().join("repo.git");
            let out = base_command(home.path())
                .args(["clone", "--bare", "--quiet", "--"])
                .arg(clone)
                .arg(&dest)
                .output()
                .map_err(|e| format!("run git: {e}; install git"))?;
            if !out.status.success() {
                return Err(format!(
                    "clone {}: not a git bundle: {}",
                    clone.display(),
                    last_line(&out.stderr)
                ));
            }
            return Ok(Repo {
                git_dir: dest,
                home,
                _bundle: Some(tmp),
            });
        }
        let out = base_command(home.path())
            .arg("-C")
            .arg(clone)
            .args(["rev-parse", "--absolute-git-dir"])
            .output()
            .map_err(|e| format!("run git: {e}; install git"))?;
        if !out.status.success() {
            return Err(format!(
                "clone {}: not a git repository: {}",
                clone.display(),
                last_line(&out.stderr)
            ));
        }
        let git_dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim_end());
        Ok(Repo {
            git_dir,
            home,
            _bundle: None,
        })
    }

    fn command(&self) -> Command {
        let mut c = base_command(self.home.path());
        c.arg("--git-dir").arg(&self.git_dir);
        c
    }

    /// `git ARGS`' stdout, or its last stderr line.
    fn run(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = self
            .command()
            .args(args)
            .output()
            .map_err(|e| format!("run git: {e}; install git"))?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(format!(
                "git {}: {}",
                args.join(" "),
                last_line(&out.stderr)
            ))
        }
    }

    /// Whether a full ref name exists.
    fn has_ref(&self, name: &str) -> bool {
        self.run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{name}^{{commit}}"),
        ])
        .is_ok()
    }

    /// The default branch as a full ref: the given branch (local, else `origin/`), else
    /// where `HEAD` or `origin/HEAD` points, else `main`, else `master`.
    pub(crate) fn default_branch(&self, given: Option<&str>) -> Result<String, String> {
        if let Some(b) = given {
            return [
                format!("refs/heads/{b}"),
                format!("refs/remotes/origin/{b}"),
            ]
            .into_iter()
            .find(|r| self.has_ref(r))
            .ok_or_else(|| format!("default_branch {b:?}: no such branch in the clone"));
        }
        for sym in ["HEAD", "refs/remotes/origin/HEAD"] {
            if let Ok(out) = self.run(&["symbolic-ref", "-q", sym]) {
                let name = String::from_utf8_lossy(&out).trim().to_string();
                if self.has_ref(&name) {
                    return Ok(name);
                }
            }
        }
        ["main", "master"]
            .iter()
            .flat_map(|b| [format!("refs/heads/{b}"), format!("refs/remotes/origin/{b}")])
            .find(|r| self.has_ref(r))
            .ok_or_else(|| {
                "no default branch: HEAD names none, and there is no main or master; give \"default_branch\"".to_string()
            })
    }

    /// The commits of `rev`, newest first: its first-parent chain, or all its history.
    pub(crate) fn log(&self, rev: &str, first_parent: bool) -> Result<Vec<Commit>, String> {
        let mut args = vec!["log", "-z", "--format=%H%x1f%P%x1f%ct%x1f%B"];
        if first_parent {
            args.push("--first-parent");
        }
        args.extend([rev, "--"]);
        let out = self.run(&args)?;
        let text = String::from_utf8_lossy(&out);
        text.split('\0')
            .filter(|r| !r.trim().is_empty())
            .map(|r| {
                let mut f = r.trim_start_matches('\n').splitn(4, '\u{1f}');
                let (id, parents, time, message) = (f.next(), f.next(), f.next(), f.next());
                let bad = || format!("git log: unexpected record {r:?}");
                Ok(Commit {
                    id: id.ok_or_else(bad)?.to_string(),
                    parents: parents
                        .ok_or_else(bad)?
                        .split_whitespace()
                        .map(str::to_string)
                        .collect(),
                    time: time.ok_or_else(bad)?.parse().map_err(|_| bad())?,
                    message: message.unwrap_or_default().to_string(),
                })
            })
            .collect()
    }

    /// The full id of a commit named by a (possibly abbreviated) hex id and its first
    /// parent; `None` when the clone has no such commit.
    pub(crate) fn resolve(&self, id: &str) -> Option<(String, Option<String>)> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let out = self
            .run(&[
                "rev-list",
                "--no-walk",
                "--parents",
                "-n",
                "1",
                &format!("{id}^{{commit}}"),
                "--",
            ])
            .ok()?;
        let text = String::from_utf8_lossy(&out);
        let mut ids = text.split_whitespace();
        let full = ids.next()?.to_string();
        Some((full, ids.next().map(str::to_string)))
    }

    /// `git ls-tree -r -z --full-tree COMMIT`, raw.
    pub(crate) fn ls_tree(&self, commit: &str) -> Result<Vec<u8>, String> {
        self.run(&["ls-tree", "-r", "-z", "--full-tree", commit, "--"])
    }

    /// A `git cat-file --batch` process for reading blobs one at a time.
    pub(crate) fn blobs(&self) -> Result<Blobs, String> {
        let mut child = self
            .command()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("run git cat-file: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("git cat-file: no pipes".into());
        };
        Ok(Blobs {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
        })
    }
}

/// Reads objects by id: each request is answered in full before the next is sent.
pub(crate) struct Blobs {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Blobs {
    pub(crate) fn read(&mut self, oid: &str) -> std::io::Result<Vec<u8>> {
        let bad = |why: String| std::io::Error::other(format!("git cat-file {oid}: {why}"));
        let stdin = self.stdin.as_mut().ok_or_else(|| bad("closed".into()))?;
        stdin.write_all(format!("{oid}\n").as_bytes())?;
        stdin.flush()?;
        let mut header = String::new();
        self.stdout.read_line(&mut header)?;
        // `<oid> <type> <size>`, or `<oid> missing`.
        let mut f = header.split_whitespace();
        let (_, kind, size) = (f.next(), f.next(), f.next());
        if kind != Some("blob") {
            return Err(bad(header.trim().to_string()));
        }
        let size: usize = size
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(header.trim().to_string()))?;
        let mut data = vec![0; size];
        self.stdout.read_exact(&mut data)?;
        let mut nl = [0u8; 1];
        self.stdout.read_exact(&mut nl)?;
        Ok(data)
    }
}

impl Drop for Blobs {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn base_command(home: &Path) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .args(["-c", "safe.directory=*", "-c", "core.quotePath=false"])
        .stdin(Stdio::null());
    c
}

fn last_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("failed")
        .trim()
        .to_string()
}
