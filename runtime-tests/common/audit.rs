//! The audit pipeline's fixtures, shared by its runtime tests: a findings document, a
//! corpus written by hand in the format of `spec/audit.md`, and a scripted agent.

use std::path::PathBuf;

use super::{sha256_hex, store_tree, Work};

/// Two findings: the missing cv2 dependency, then an unrelated schedule mismatch.
pub const FINDINGS: &str = r#"{"reproducibility_assessment": {"overall": "partially_reproducible", "summary": "two"},
 "findings": [{"finding_id": "F1", "rank_reason": "first thing a user hits", "severity": "high",
   "stage": "environment_setup", "category": "missing_dependency",
   "issue_title": "ModuleNotFoundError: No module named cv2 when running main.py",
   "user_symptom": "python main.py fails at startup with ModuleNotFoundError: No module named cv2",
   "trigger_context": "python main.py",
   "root_cause": "main.py does import cv2 but opencv-python is in no requirements file",
   "evidence": [{"path": "main.py", "line_refs": [1], "evidence_type": "code", "summary": "import cv2"}],
   "impact": "nothing runs", "affected_claims_or_metrics": [], "reproducibility_blocker": true,
   "confidence": "high"},
  {"finding_id": "F2", "rank_reason": "numbers", "severity": "medium",
   "stage": "evaluation", "category": "config_mismatch",
   "issue_title": "Learning rate schedule differs from the paper",
   "user_symptom": "Reported accuracy is lower than Table 2",
   "trigger_context": "bash scripts/eval.sh",
   "root_cause": "configs/base.yaml sets cosine decay while the paper describes step decay",
   "evidence": [{"path": "configs/base.yaml", "line_refs": [3], "evidence_type": "config", "summary": "scheduler cosine"}],
   "impact": "accuracy differs", "affected_claims_or_metrics": [], "reproducibility_blocker": false,
   "confidence": "medium"}],
 "missing_or_ambiguous_artifacts": []}"#;

/// `reprorun audit snapshot` of a corpus an `images/*/build.sh` wrote to `input/` (its cwd):
/// the pairs and issues there, the corpus to `corpus/`, reproducibility issues only.
pub const SNAPSHOT_BUILT_INPUT: [&str; 9] = [
    "audit",
    "snapshot",
    "--pairs",
    "input/pairs.jsonl",
    "--issues",
    "input/issues",
    "--out",
    "corpus",
    "--only-reproducibility",
];

/// The pre-fix snapshot group of [`Corpus::new`] and the one that fixes its gold issue.
pub const PRE: &str = "p1@000000000000";
pub const FIX: &str = "p1@000000000001";

/// A corpus at `corpus/` in a fresh work directory (its tests' cwd).
pub struct Corpus {
    pub work: Work,
}

/// A snapshot's files: path, text, mode.
pub type Tree<'a> = &'a [(&'a str, &'a str, u32)];

impl Corpus {
    /// Writes a corpus: each tree stored under `trees/`, `paper` under `papers/` (named by its
    /// digest), and `corpus.json`, which `manifest` makes from the trees' digests and the
    /// paper's file name.
    pub fn write(
        trees: &[Tree],
        paper: &str,
        manifest: impl FnOnce(&[String], &str) -> serde_json::Value,
    ) -> Corpus {
        let work = Work::new();
        let dir = work.path().join("corpus");
        std::fs::create_dir_all(dir.join("trees")).unwrap();
        std::fs::create_dir_all(dir.join("papers")).unwrap();
        let digests: Vec<String> = trees.iter().map(|t| store_tree(&dir, t)).collect();
        let paper_name = format!("{}.md", sha256_hex(paper.as_bytes()));
        std::fs::write(dir.join("papers").join(&paper_name), paper).unwrap();
        std::fs::write(
            dir.join("corpus.json"),
            serde_json::to_vec_pretty(&manifest(&digests, &paper_name)).unwrap(),
        )
        .unwrap();
        Corpus { work }
    }

    /// A corpus of one pair: `p1@000000000000` (pre-fix: gold issue #1, fixed in
    /// `p1@000000000001`, and open issue #2) and `p1@000000000001` (the fix).
    pub fn new() -> Corpus {
        let readme = ("README.md", "Run `python main.py`.\n", 0o644);
        let trees: [Tree; 2] = [
            &[
                ("main.py", "import cv2\nprint(cv2.__version__)\n", 0o644),
                readme,
            ],
            &[("main.py", "print('fixed')\n", 0o644), readme],
        ];
        Corpus::write(
            &trees,
            "# A paper\nWe train for 100 epochs.\n",
            |digests, paper| {
                let groups: Vec<serde_json::Value> = digests
                    .iter()
                    .enumerate()
                    .map(|(i, digest)| {
                        serde_json::json!({
                            "group_id": format!("p1@{i:012}"), "paper_id": "p1", "repo": "o/demo",
                            "commit": format!("{i:040}"), "tree": digest,
                            "issues": if i == 0 { vec![1, 2] } else { vec![] },
                            "post_fix_for": if i == 1 { vec![1] } else { vec![] },
                        })
                    })
                    .collect();
                serde_json::json!({
                    "version": 1,
                    "pairs": [{"paper_id": "p1", "title": "A paper", "repo": "o/demo", "paper": paper,
                               "paper_kind": "md", "collected_at": "2024-01-01T00:00:00Z"}],
                    "groups": groups,
                "issues": [
                        {"issue": {"repo": "o/demo", "number": 1, "title": "HIDDEN: No module named 'cv2'",
                                   "body": "Running `python main.py` gives\nModuleNotFoundError: No module named 'cv2'",
                                   "state": "closed", "created_at": "2024-01-02T00:00:00Z", "closed_at": "2024-02-01T00:00:00Z",
                                   "comments": [{"body": "same here", "created_at": "2024-01-03T00:00:00Z"},
                                                {"body": "FIX-DISCUSSION added opencv-python", "created_at": "2024-02-02T00:00:00Z"}]},
                         "grounding": {"target": "closed_gold", "group_id": PRE, "post_fix_group_id": FIX,
                                       "rule": "merged_pr", "fix_commit": format!("{:040}", 1)}},
                        {"issue": {"repo": "o/demo", "number": 2, "title": "Where is the pretrained checkpoint?",
                                   "body": "The README links model_best.pth but the link is dead.", "state": "open",
                                   "created_at": "2024-01-05T00:00:00Z"},
                         "grounding": {"target": "open", "group_id": PRE, "rule": "default_branch_at_collected_at"}},
                    ],
                    "warnings": [],
                })
            },
        )
    }

    pub fn dir(&self) -> PathBuf {
        self.work.path().join("corpus")
    }

    /// A file of the study's log store (`audit.db.logs/DIGEST`).
    pub fn log(&self, digest: &str) -> String {
        let path = self.work.path().join("audit.db.logs").join(digest);
        String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
    }
}

/// A scripted agent's command: writes `doc` as its findings (with `only_cv2`, only on
/// snapshots whose main.py imports cv2, and nothing elsewhere).
pub fn agent_writing(doc: &str, only_cv2: bool) -> String {
    let doc = doc.replace('\'', "");
    if only_cv2 {
        format!(
            "grep -q cv2 /work/repo/main.py && printf '%s' '{doc}' > \"$REPRORUN_AUDIT_OUT\"; true"
        )
    } else {
        format!("printf '%s' '{doc}' > \"$REPRORUN_AUDIT_OUT\"")
    }
}
