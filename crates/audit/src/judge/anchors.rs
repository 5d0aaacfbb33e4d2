//! The anchors of the built-in judge: the named things an issue and a finding can share.
//!
//! - **Strong** (name one problem's object): CLI flags (`flag:--fp16`), Python modules
//!   (`module:cv2`, after `import`/`from`, `No module named`, `pip install`, or a package name
//!   such as `opencv-python`), model and data files (`artifact:best.pth`), hyper-parameters
//!   (`hparam:lr`, `hparam:batch`, `hparam:epochs`, `hparam:weight_decay`,
//!   `hparam:precision`: mixed or half precision) and three problem kinds
//!   (`concept:checkpoint`: pretrained weights to obtain, a bare "checkpoint" only beside a
//!   word of obtaining such as a link or a download; `concept:release`: code or data
//!   announced but not released; `concept:result_gap`: the paper's results not reached).
//! - **Weak** (a place or a symptom many problems share): file names (`file:train.py`) and
//!   exception classes (`exception:keyerror`).
//!
//! Files an issue names only in a traceback frame (`File "x.py", line 3, in f`) are not its
//! anchors: a crash passes through many files that are not its cause. A module an issue names
//! matches a finding that names the bare package in its claim (title, symptom, root cause:
//! "Add a requirement: scipy" against "No module named 'scipy'"); paths and quoted `import`
//! statements do not count as naming. A finding naming more than [`MAX_FOCUSED`] strong
//! anchors (flags aside) or [`MAX_FOCUSED_KINDS`] hyper-parameters and problem kinds is a
//! list of the snapshot's names, not a finding about one of them: its anchors are not
//! counted (keyword stuffing). A finding's problem kinds and hyper-parameters count only
//! where its claim (title, symptom, root cause) names them in prose, not in the code it
//! quotes; settings listed beside a problem drop, the problem stays ([`claimed_anchors`]).

use std::collections::BTreeSet;

/// Strong anchors (flags aside) a focused finding names at most.
pub(crate) const MAX_FOCUSED: usize = 5;
/// Hyper-parameters and problem kinds a focused finding names at most; in a finding's claim
/// more are a list of settings beside a problem, and only the problem counts
/// ([`claimed_anchors`]).
pub(crate) const MAX_FOCUSED_KINDS: usize = 3;
/// Flags a focused finding names at most (an `unknown_flag` finding lists a README's flags).
pub(crate) const MAX_FOCUSED_FLAGS: usize = 32;

/// Words too common to weigh or to name anything (also the lexical judge's stop words).
#[rustfmt::skip]
pub(crate) const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from",
    "has", "have", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or",
    "so", "that", "the", "there", "this", "to", "was", "we", "when", "with", "you", "your", "our",
    "they", "will", "would", "should", "which", "what", "any", "all", "also", "been", "into",
    "than", "then", "these", "those", "only", "some", "get", "got", "use", "using", "used", "run",
    "running", "try", "tried", "hi", "thanks", "thank", "please",
];

/// Extensions of code, scripts and configuration: `file:` anchors.
const CODE_EXTS: &[&str] = &[
    "py", "sh", "ipynb", "yaml", "yml", "json", "toml", "cfg", "ini", "txt", "cpp", "cu", "c", "h",
    "hpp", "js", "ts", "r", "jl", "m", "lua", "java", "go", "rs", "md", "bash",
];
/// Extensions of checkpoints, weights and data: `artifact:` anchors.
const ARTIFACT_EXTS: &[&str] = &[
    "pth",
    "ckpt",
    "pt",
    "safetensors",
    "bin",
    "h5",
    "hdf5",
    "pkl",
    "pickle",
    "npy",
    "npz",
    "onnx",
    "tar",
    "zip",
    "gz",
    "csv",
    "tsv",
    "parquet",
    "jsonl",
    "mat",
    "tfrecord",
];
/// Package names users install under another import name.
const PACKAGE_MODULES: &[(&str, &str)] = &[
    ("opencv", "cv2"),
    ("opencv-python", "cv2"),
    ("opencv-python-headless", "cv2"),
    ("opencv-contrib-python", "cv2"),
    ("pillow", "pil"),
    ("scikit-learn", "sklearn"),
    ("scikit-image", "skimage"),
    ("pyyaml", "yaml"),
    ("beautifulsoup4", "bs4"),
    ("pytorch", "torch"),
    ("tensorflow-gpu", "tensorflow"),
    ("protobuf", "google"),
    ("python-dateutil", "dateutil"),
];
/// Phrases of the problem kinds and hyper-parameters (lower case, matched in text whose
/// `-`/`_` became spaces).
const CONCEPTS: &[(&str, &[&str])] = &[
    ("hparam:lr", &["learning rate", " lr "]),
    ("hparam:batch", &["batch size", "batchsize", " bs "]),
    (
        "hparam:epochs",
        &[" epochs ", "num epochs", "max epochs", "number of epochs"],
    ),
    ("hparam:weight_decay", &["weight decay"]),
    (
        "hparam:precision",
        &[
            "mixed precision",
            "half precision",
            "precision 16",
            "precision 32",
            " fp16 ",
            " float16 ",
        ],
    ),
    (
        "concept:checkpoint",
        &[
            "checkpoint",
            "pretrained model",
            "pre trained model",
            "pretrained weight",
            "pre trained weight",
            "model weight",
            "trained model",
        ],
    ),
    (
        "concept:release",
        &[
            "coming soon",
            "will upload",
            "will be uploaded",
            "will release",
            "will be released",
            "not released",
            "not yet released",
            "after acceptance",
            "paper is accepted",
            "be made available",
        ],
    ),
    (
        "concept:result_gap",
        &[
            "not reproduce",
            "cannot reproduce",
            "can t reproduce",
            "couldn t reproduce",
            "fail to reproduce",
            "failed to reproduce",
            "unable to reproduce",
            "not reproduced",
            "reproduce the result",
            "reproduce the paper",
            "than reported",
            "lower than the paper",
            "worse than the paper",
            "below the paper",
            "not match the paper",
            "inconsistent result",
            "inconsistent experimental result",
        ],
    ),
];
/// Forms of `concept:checkpoint` that name weights to obtain by themselves; a bare
/// "checkpoint" names one only beside an [`ACQUISITION`] word (a checkpoint the code writes,
/// loads or pickles is another problem).
const CHECKPOINT_BARE: &str = "checkpoint";
/// Words saying an artifact is to be obtained: a link, a download, its absence (matched at
/// a word start in the flattened text).
const ACQUISITION: &[&str] = &[
    "download",
    "link",
    "url",
    "404",
    "drive",
    "host",
    "obtain",
    "available",
    "unavailable",
    "missing",
    "absent",
    "provide",
    "not released",
    "release the",
    "be released",
    "unreleased",
    "where is",
    "where can",
    "share",
    "upload",
];

/// Whether an anchor is strong (names one problem's object) rather than weak (a file, a
/// place many problems pass through, or an exception class many problems raise).
pub(crate) fn strong(anchor: &str) -> bool {
    !anchor.starts_with("exception:") && !anchor.starts_with("file:")
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// The anchors `text` names (`file:train.py`, `flag:--fp16`, `module:cv2`,
/// `artifact:model.pth`, `exception:keyerror`, `hparam:lr`, `concept:checkpoint`).
pub(crate) fn anchors(text: &str) -> BTreeSet<String> {
    anchors_with(text, true)
}

/// The anchors of a finding's text: as [`anchors`], but an `import`/`from` statement names no
/// module (a finding that quotes the snapshot's code names every module it imports; a finding
/// about a package says so: `No module named`, `pip install`, the package's name).
pub(crate) fn finding_anchors(text: &str) -> BTreeSet<String> {
    anchors_with(text, false)
}

/// The anchors of a finding's `text` whose claim (title, symptom, root cause) is `claim`: as
/// [`finding_anchors`], but a problem kind or hyper-parameter counts only when the claim's
/// prose names it too. Quoted code is not a claim: `checkpoint = torch.load(...)`, a
/// `help='path to latest checkpoint'` in a copied argument line or `pretrained_weights`
/// name no problem with a checkpoint (the keyword-stuffing agent's findings matched
/// checkpoint issues through such lines).
pub(crate) fn claimed_anchors(text: &str, claim: &str) -> BTreeSet<String> {
    let said = concepts(&prose(claim));
    let mut out = finding_anchors(text);
    out.retain(|a| !kind(a) || said.contains(a));
    // Settings listed beside a problem are a list, not the claim: the problem still counts.
    if out.iter().filter(|a| kind(a)).count() > MAX_FOCUSED_KINDS {
        out.retain(|a| !a.starts_with("hparam:"));
    }
    out
}

/// Whether an anchor is a problem kind or a hyper-parameter.
fn kind(a: &str) -> bool {
    a.starts_with("concept:") || a.starts_with("hparam:")
}

/// `text` without its code: tokens with `/`, `_`, `=`, a call or a dotted name, the target of
/// an assignment (`x = ...`) and everything after a quoted argument line's start
/// (`parser.add_argument(`, `help=`) up to the end of its line.
fn prose(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        for (i, t) in tokens.iter().enumerate() {
            if t.contains("add_argument(") || t.starts_with("help=") {
                break;
            }
            let code = t.contains(['/', '_', '=', '('])
                || t.trim_end_matches(['.', ',', ':', ';']).contains('.')
                || tokens.get(i + 1).is_some_and(|n| *n == "=");
            if !code {
                out.push(*t);
            }
        }
        out.push("\n");
    }
    out.join(" ")
}

fn anchors_with(text: &str, code_imports: bool) -> BTreeSet<String> {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "'\"`()[]{}<>,;:=|!?*".contains(c))
        .map(|t| t.trim_end_matches('.'))
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = BTreeSet::new();
    for (i, t) in tokens.iter().enumerate() {
        let lower = t.to_lowercase();
        let prev = |k: usize| i.checked_sub(k).map(|j| tokens[j].to_lowercase());
        if let Some(flag) = lower.strip_prefix("--") {
            if flag.starts_with(|c: char| c.is_ascii_alphabetic())
                && flag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                out.insert(format!("flag:{lower}"));
            }
            continue;
        }
        let base = lower.rsplit('/').next().unwrap_or(&lower);
        if let Some((stem, ext)) = base.rsplit_once('.') {
            if !stem.is_empty() && CODE_EXTS.contains(&ext) {
                out.insert(format!("file:{base}"));
                continue;
            }
            if !stem.is_empty() && ARTIFACT_EXTS.contains(&ext) {
                out.insert(format!("artifact:{base}"));
                continue;
            }
        }
        let class = t.rsplit('.').next().unwrap_or(t);
        if class.starts_with(|c: char| c.is_ascii_uppercase())
            && (class.ends_with("Error") || class.ends_with("Exception"))
            && class.chars().all(|c| c.is_ascii_alphanumeric())
        {
            out.insert(format!("exception:{}", class.to_lowercase()));
            continue;
        }
        let after_import = code_imports && matches!(prev(1).as_deref(), Some("import" | "from"));
        let after_named =
            prev(1).as_deref() == Some("named") && prev(2).as_deref() == Some("module");
        let after_install =
            prev(1).as_deref() == Some("install") && prev(2).as_deref() == Some("pip");
        if let Some((_, module)) = PACKAGE_MODULES.iter().find(|(p, _)| *p == lower) {
            out.insert(format!("module:{module}"));
        } else if (after_import || after_named || after_install)
            && lower.len() >= 2
            && is_ident(&lower)
            && !STOPWORDS.contains(&lower.as_str())
        {
            let top = lower.split('.').next().unwrap_or(&lower);
            out.insert(format!("module:{top}"));
        }
    }
    out.extend(concepts(text));
    out
}

/// The problem kinds and hyper-parameters `text` names.
fn concepts(text: &str) -> BTreeSet<String> {
    let flat: String = text
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let flat = format!(
        " {} ",
        flat.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let acquired = || ACQUISITION.iter().any(|w| flat.contains(&format!(" {w}")));
    CONCEPTS
        .iter()
        .filter(|(a, forms)| {
            forms.iter().any(|f| {
                flat.contains(f)
                    && (*f != CHECKPOINT_BARE || *a != "concept:checkpoint" || acquired())
            })
        })
        .map(|(a, _)| a.to_string())
        .collect()
}

/// The anchors of an issue's text: those of [`anchors`], without the files only its
/// traceback frames name.
pub(crate) fn issue_anchors(text: &str) -> BTreeSet<String> {
    let stripped: Vec<&str> = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            match t.strip_prefix("File \"") {
                Some(rest) if rest.contains("\", line ") => "",
                _ => l,
            }
        })
        .collect();
    anchors(&stripped.join("\n"))
}

/// The bare names a claim text uses (lower case; a package name as its module): words that
/// are not part of a path or a file name.
pub(crate) fn claim_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut prev = String::new();
    for t in text.split(|c: char| c.is_whitespace() || "'\"`()[]{}<>,;:=|!?*".contains(c)) {
        let t = t.trim_end_matches('.').to_lowercase();
        let quoted_import = matches!(prev.as_str(), "import" | "from");
        if !t.is_empty() {
            prev = t.clone();
        }
        if quoted_import
            || t.len() < 2
            || t.contains('/')
            || t.contains('.')
            || STOPWORDS.contains(&t.as_str())
        {
            continue;
        }
        match PACKAGE_MODULES.iter().find(|(p, _)| *p == t) {
            Some((_, m)) => out.insert(m.to_string()),
            None => out.insert(t.replace('-', "_")),
        };
    }
    out
}

/// Whether a finding's anchors are too many to be about one thing.
pub(crate) fn unfocused(a: &BTreeSet<String>) -> bool {
    let flags = a.iter().filter(|x| x.starts_with("flag:")).count();
    let kinds = a.iter().filter(|x| kind(x)).count();
    let strong_n = a.iter().filter(|x| strong(x)).count() - flags;
    strong_n > MAX_FOCUSED || flags > MAX_FOCUSED_FLAGS || kinds > MAX_FOCUSED_KINDS
}

/// The anchors an issue and a finding share: common anchors, and modules the issue names
/// outright that the finding names bare in its claim.
pub(crate) fn shared(
    issue: &BTreeSet<String>,
    finding: &BTreeSet<String>,
    finding_names: &BTreeSet<String>,
) -> BTreeSet<String> {
    if unfocused(finding) {
        return BTreeSet::new();
    }
    let mut out: BTreeSet<String> = finding.intersection(issue).cloned().collect();
    let bare = |a: &String, names: &BTreeSet<String>| {
        a.strip_prefix("module:")
            .is_some_and(|m| names.contains(&m.replace('-', "_")))
    };
    out.extend(issue.iter().filter(|a| bare(a, finding_names)).cloned());
    // Both name modules, none the same: the error both raise is not a common cause.
    let modules = |s: &BTreeSet<String>| s.iter().any(|a| a.starts_with("module:"));
    if modules(issue) && modules(finding) && !modules(&out) {
        out.retain(|a| !a.starts_with("exception:"));
    }
    // "The paper's results are not reached" is the cause only of an issue naming no other:
    // where the issue names a setting, a module or a file, a match must be on that.
    if issue
        .iter()
        .any(|a| strong(a) && a.as_str() != RESULT_GAP && !a.starts_with("flag:"))
    {
        out.remove(RESULT_GAP);
    }
    out
}

/// The problem kind of an issue or a finding saying the paper's results are not reached.
pub(crate) const RESULT_GAP: &str = "concept:result_gap";
