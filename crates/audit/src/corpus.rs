//! The corpus directory `reprorun audit snapshot` writes and `audit run` reads:
//!
//! ```text
//! CORPUS/corpus.json          the manifest (below); holds the hidden issues: never bound
//!                             into a sandbox
//! CORPUS/trees/<sha256>.tar   one deterministic tar per distinct snapshot tree
//! CORPUS/papers/<sha256>.<ext> each paper file (pdf, md, txt), stored once
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The manifest's format version.
pub(crate) const CORPUS_VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("corpus {path}: {why}")]
    Bad { path: PathBuf, why: String },
    #[error("corpus {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CorpusError {
    let path = path.to_path_buf();
    move |source| CorpusError::Io { path, source }
}

/// A paper and its repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PairEntry {
    pub(crate) paper_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// `owner/name`.
    pub(crate) repo: String,
    /// The paper file in `papers/`: `<sha256>.<ext>`.
    pub(crate) paper: String,
    /// `pdf`, `md` or `txt`.
    pub(crate) paper_kind: String,
    pub(crate) collected_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) venue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) year: Option<String>,
    /// The default branch the snapshots were taken from (a full ref name).
    #[serde(default)]
    pub(crate) default_branch: String,
}

/// One snapshot the agents audit: a commit of a pair's repository, and the hidden issues
/// whose reporters saw that tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Group {
    /// Stable id: `<paper_id>@<commit[..12]>`.
    pub(crate) group_id: String,
    pub(crate) paper_id: String,
    pub(crate) repo: String,
    pub(crate) commit: String,
    /// The tree in `trees/`: the sha256 of its tar.
    pub(crate) tree: String,
    /// Issue numbers (of `repo`) grounded on this snapshot, ascending.
    pub(crate) issues: Vec<u64>,
    /// Issue numbers whose fix commit this is (the post-fix snapshot of `closed_gold`
    /// issues), ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) post_fix_for: Vec<u64>,
}

/// How an issue was grounded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Grounding {
    /// `open`, `closed_silver` or `closed_gold`.
    pub(crate) target: String,
    /// The group of the snapshot the reporter saw (pre-fix for gold).
    pub(crate) group_id: String,
    /// Its commit.
    #[serde(default)]
    pub(crate) commit: String,
    /// For `closed_gold`: the group of the fix commit's tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) post_fix_group_id: Option<String>,
    /// Which rule chose the snapshot (e.g. `default_branch_at_collected_at`,
    /// `before_created_at`, `merged_pr`, `closed_event_commit`, `fixes_keyword`).
    pub(crate) rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fix_commit: Option<String>,
    /// For `closed_gold`: which pre-fix snapshot `commit` is (`fix_parent`, `issue_time`;
    /// absent in corpora before the choice existed: `fix_parent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pre_fix: Option<String>,
    /// The file of the issue's own snapshot that names it outright (its URL, or `#N` and
    /// its title): the answer is in the snapshot (`audit snapshot --leaked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) named_in: Option<String>,
}

/// The manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) version: u32,
    pub(crate) pairs: Vec<PairEntry>,
    /// Sorted by `group_id`.
    pub(crate) groups: Vec<Group>,
    /// The hidden issues (normalized, `input::Issue`) with their grounding, as JSON objects
    /// `{ "issue": Issue, "grounding": Grounding }`; the judge reads them, agents never.
    pub(crate) issues: Vec<serde_json::Value>,
    /// Leak-scan warnings and, with `--skip-bad`, what was skipped: one line each.
    #[serde(default)]
    pub(crate) warnings: Vec<String>,
}

/// An opened corpus.
#[derive(Debug, Clone)]
pub(crate) struct Corpus {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: Manifest,
    /// The sha256 (hex) of `corpus.json` as read.
    sha256: String,
}

/// The manifest file's name.
pub(crate) const MANIFEST: &str = "corpus.json";

fn sha256_hex(bytes: &[u8]) -> String {
    reprorun_runtime::image::digest::hex(&Sha256::digest(bytes))
}

impl Corpus {
    /// Opens and checks `dir/corpus.json` (version, every group's tree and paper present).
    pub(crate) fn open(dir: &Path) -> Result<Corpus, CorpusError> {
        let bad = |why: String| CorpusError::Bad {
            path: dir.to_path_buf(),
            why,
        };
        let path = dir.join(MANIFEST);
        let bytes = std::fs::read(&path).map_err(|e| bad(format!("read {MANIFEST}: {e}")))?;
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("{MANIFEST} is not a corpus manifest: {e}")))?;
        if manifest.version != CORPUS_VERSION {
            return Err(bad(format!(
                "{MANIFEST} has version {}; this reprorun reads version {CORPUS_VERSION}",
                manifest.version
            )));
        }
        let corpus = Corpus {
            dir: dir.to_path_buf(),
            sha256: sha256_hex(&bytes),
            manifest,
        };
        let m = &corpus.manifest;
        for pair in &m.pairs {
            if !corpus.paper_path(pair).is_file() {
                return Err(bad(format!(
                    "pair {}: paper papers/{} is missing",
                    pair.paper_id, pair.paper
                )));
            }
        }
        for group in &m.groups {
            if !m.pairs.iter().any(|p| p.paper_id == group.paper_id) {
                return Err(bad(format!(
                    "group {}: no pair {}",
                    group.group_id, group.paper_id
                )));
            }
            if !corpus.tree_path(group).is_file() {
                return Err(bad(format!(
                    "group {}: tree trees/{}.tar is missing",
                    group.group_id, group.tree
                )));
            }
        }
        Ok(corpus)
    }

    /// The tar of a group's tree.
    pub(crate) fn tree_path(&self, group: &Group) -> PathBuf {
        self.dir.join("trees").join(format!("{}.tar", group.tree))
    }

    /// A pair's paper file.
    pub(crate) fn paper_path(&self, pair: &PairEntry) -> PathBuf {
        self.dir.join("papers").join(&pair.paper)
    }

    /// The sha256 of the manifest as stored: what a study on this corpus depends on.
    pub(crate) fn fingerprint(&self) -> String {
        self.sha256.clone()
    }
}

/// Builds a corpus in `OUT.partial` beside `OUT`, then puts it in place. `OUT` must not
/// exist, or be an earlier corpus (it has a `corpus.json` manifest): that one is replaced.
pub(crate) struct Writer {
    out: PathBuf,
    partial: PathBuf,
}

impl Writer {
    pub(crate) fn create(out: &Path) -> Result<Writer, CorpusError> {
        let bad = |why: &str| CorpusError::Bad {
            path: out.to_path_buf(),
            why: why.to_string(),
        };
        if std::fs::symlink_metadata(out).is_ok() {
            let manifest = std::fs::read(out.join(MANIFEST)).ok();
            let is_corpus = manifest
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v.get("version").is_some() && v.get("groups").is_some());
            if !is_corpus {
                return Err(bad(
                    "exists and is not a corpus: give a new directory (an earlier corpus is rebuilt in place)",
                ));
            }
        }
        let mut name = out
            .file_name()
            .ok_or_else(|| bad("not a directory name"))?
            .to_os_string();
        name.push(".partial");
        let partial = out.with_file_name(name);
        if std::fs::symlink_metadata(&partial).is_ok() {
            std::fs::remove_dir_all(&partial).map_err(io_err(&partial))?;
        }
        for sub in ["trees", "papers"] {
            let d = partial.join(sub);
            std::fs::create_dir_all(&d).map_err(io_err(&d))?;
        }
        Ok(Writer {
            out: out.to_path_buf(),
            partial,
        })
    }

    /// Where a tree's tar is written before [`Writer::add_tree`] names it.
    pub(crate) fn tree_tmp(&self) -> PathBuf {
        self.partial.join("trees").join(".tmp.tar")
    }

    /// Names the tar at [`Writer::tree_tmp`] by its sha256; an identical tree is kept once.
    pub(crate) fn add_tree(&self, sha256: &str) -> Result<(), CorpusError> {
        let tmp = self.tree_tmp();
        let dest = self.partial.join("trees").join(format!("{sha256}.tar"));
        if dest.exists() {
            std::fs::remove_file(&tmp).map_err(io_err(&tmp))
        } else {
            std::fs::rename(&tmp, &dest).map_err(io_err(&dest))
        }
    }

    /// Copies a paper in as `papers/<sha256>.<kind>`; returns that name.
    pub(crate) fn add_paper(&self, src: &Path, kind: &str) -> Result<String, CorpusError> {
        let bytes = std::fs::read(src).map_err(io_err(src))?;
        let name = format!("{}.{kind}", sha256_hex(&bytes));
        let dest = self.partial.join("papers").join(&name);
        if !dest.exists() {
            reprorun_runtime::sys::write_atomic(&dest, &bytes, 0o644).map_err(io_err(&dest))?;
        }
        Ok(name)
    }

    /// Writes the manifest and puts the corpus in place of `OUT`.
    pub(crate) fn finish(&self, manifest: &Manifest) -> Result<Corpus, CorpusError> {
        let mut json = serde_json::to_vec_pretty(manifest).map_err(|e| CorpusError::Bad {
            path: self.out.clone(),
            why: format!("serialize the manifest: {e}"),
        })?;
        json.push(b'\n');
        let path = self.partial.join(MANIFEST);
        reprorun_runtime::sys::write_atomic(&path, &json, 0o644).map_err(io_err(&path))?;
        if std::fs::symlink_metadata(&self.out).is_ok() {
            let mut old = self.partial.clone().into_os_string();
            old.push(".old");
            let old = PathBuf::from(old);
            let _ = std::fs::remove_dir_all(&old);
            std::fs::rename(&self.out, &old).map_err(io_err(&self.out))?;
            std::fs::rename(&self.partial, &self.out).map_err(io_err(&self.out))?;
            std::fs::remove_dir_all(&old).map_err(io_err(&old))?;
        } else {
            std::fs::rename(&self.partial, &self.out).map_err(io_err(&self.out))?;
        }
        Corpus::open(&self.out)
    }
}

impl Drop for Writer {
    /// A corpus not finished (an error) leaves nothing behind.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.partial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(tree: &str) -> Manifest {
        Manifest {
            version: CORPUS_VERSION,
            pairs: vec![PairEntry {
                paper_id: "p".into(),
                title: None,
                repo: "a/b".into(),
                paper: "x.txt".into(),
                paper_kind: "txt".into(),
                collected_at: "2024-01-01".into(),
                venue: None,
                year: None,
                default_branch: "refs/heads/main".into(),
            }],
            groups: vec![Group {
                group_id: "p@0123456789ab".into(),
                paper_id: "p".into(),
                repo: "a/b".into(),
                commit: "0123456789abcdef".into(),
                tree: tree.into(),
                issues: vec![1],
                post_fix_for: vec![],
            }],
            issues: vec![],
            warnings: vec![],
        }
    }

    #[test]
    fn a_written_corpus_opens_and_a_damaged_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("c");
        let paper = dir.path().join("paper.txt");
        std::fs::write(&paper, "the paper").unwrap();
        let w = Writer::create(&out).unwrap();
        let name = w.add_paper(&paper, "txt").unwrap();
        std::fs::write(w.tree_tmp(), b"tar bytes").unwrap();
        w.add_tree("ab12").unwrap();
        let mut m = manifest("ab12");
        m.pairs[0].paper = name;
        let written = w.finish(&m).unwrap();
        let opened = Corpus::open(&out).unwrap();
        assert_eq!(opened.manifest, m);
        assert_eq!(opened.fingerprint(), written.fingerprint());
        let bytes = std::fs::read(out.join(MANIFEST)).unwrap();
        assert_eq!(opened.fingerprint(), sha256_hex(&bytes));
        assert_eq!(opened.fingerprint().len(), 64);

        // Rebuilt in place: an earlier corpus may be the --out.
        let w = Writer::create(&out).unwrap();
        w.add_paper(&paper, "txt").unwrap();
        std::fs::write(w.tree_tmp(), b"tar bytes").unwrap();
        w.add_tree("ab12").unwrap();
        w.finish(&m).unwrap();
        assert_eq!(
            Corpus::open(&out).unwrap().fingerprint(),
            written.fingerprint()
        );

        std::fs::remove_file(out.join("trees/ab12.tar")).unwrap();
        let e = Corpus::open(&out).unwrap_err().to_string();
        assert!(e.contains("trees/ab12.tar is missing"), "{e}");
        let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        v["version"] = 99.into();
        std::fs::write(out.join(MANIFEST), v.to_string()).unwrap();
        let e = Corpus::open(&out).unwrap_err().to_string();
        assert!(e.contains("version 99"), "{e}");
    }

    #[test]
    fn an_out_directory_that_is_no_corpus_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("precious.txt"), "x").unwrap();
        let e = Writer::create(dir.path()).err().unwrap().to_string();
        assert!(e.contains("not a corpus"), "{e}");
        assert!(dir.path().join("precious.txt").exists());
    }
}
