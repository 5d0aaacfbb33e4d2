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
use thiserror::Error;

/// The manifest's format version.
pub(crate) const CORPUS_VERSION: u32 = 1;

#[derive(Debug, Error)]
pub(crate) enum CorpusError {
    #[error("corpus {path}: {why}")]
    Bad { path: PathBuf, why: String },
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
}

/// How an issue was grounded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Grounding {
    /// `open`, `closed_silver` or `closed_gold`.
    pub(crate) target: String,
    /// The group of the snapshot the reporter saw (pre-fix for gold).
    pub(crate) group_id: String,
    /// For `closed_gold`: the group of the fix commit's tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) post_fix_group_id: Option<String>,
    /// Which rule chose the snapshot (e.g. `default_branch_at_collected_at`,
    /// `before_created_at`, `merged_pr`, `closed_event_commit`, `fixes_keyword`).
    pub(crate) rule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fix_commit: Option<String>,
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
    /// Leak-scan warnings, one line each.
    #[serde(default)]
    pub(crate) warnings: Vec<String>,
}

/// An opened corpus.
#[derive(Debug, Clone)]
pub(crate) struct Corpus {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: Manifest,
}

impl Corpus {
    /// Opens and checks `dir/corpus.json` (version, every group's tree and paper present).
    pub(crate) fn open(dir: &Path) -> Result<Corpus, CorpusError> {
        Err(CorpusError::Bad {
            path: dir.to_path_buf(),
            why: "not yet built".into(),
        })
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
        String::new()
    }
}
