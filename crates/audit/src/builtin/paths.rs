//! Rules on files and paths: Git LFS pointers (`lfs_pointer`), empty submodules
//! (`empty_submodule`), hard-coded absolute paths (`hardcoded_path`), and referenced
//! checkpoints, configs and data that are absent (`missing_checkpoint`, `missing_config`,
//! `missing_data`).

use std::collections::BTreeMap;

use super::commands::{doc_commands, placeholder, resolve, target};
use super::tree::{ext, file_name, join, line_no, parent};
use super::{ev, kind_of, Candidate, Ctx, Rule};
use crate::findings::detail::{EvidenceType, Stage};
use crate::findings::Confidence;

const LFS_HEADER: &str = "version https://git-lfs.github.com/spec/v1";
const CKPT_EXT: &[&str] = &[
    "pth",
    "pt",
    "ckpt",
    "safetensors",
    "h5",
    "hdf5",
    "pkl",
    "pickle",
    "npy",
    "npz",
    "onnx",
    "pb",
    "bin",
    "caffemodel",
    "params",
];
const CONFIG_EXT: &[&str] = &["yaml", "yml", "json", "cfg", "ini", "toml"];
const DOWNLOAD: &[&str] = &[
    "wget",
    "curl ",
    "gdown",
    "huggingface",
    "hf_hub_download",
    "snapshot_download",
    "from_pretrained",
    "download",
    "drive.google",
    "dropbox",
    "zenodo",
    "figshare",
    "onedrive",
    "baidu",
    "releases/",
    "torch.hub",
    "load_state_dict_from_url",
    "http://",
    "https://",
];
/// Flag or key words that name outputs, not inputs.
const OUTPUT_WORDS: &[&str] = &[
    "out", "save", "log", "dump", "result", "work", "exp", "dest", "target", "write", "cache",
    "tmp", "export",
];

/// `lfs_pointer`: files that hold a Git LFS pointer instead of their content.
pub(super) fn lfs_pointers(ctx: &Ctx) -> Vec<Candidate> {
    let pointers: Vec<(&str, &str)> = ctx
        .tree
        .texts()
        .filter(|(_, t)| t.starts_with(LFS_HEADER))
        .collect();
    if pointers.is_empty() {
        return Vec::new();
    }
    let mut c = Candidate::new(Rule::LfsPointer, "git-lfs");
    c.weight = pointers.len();
    let (first, text) = pointers[0];
    let size = text
        .lines()
        .find_map(|l| l.strip_prefix("size "))
        .unwrap_or("?");
    c.title = format!(
        "{first} is a Git LFS pointer ({} bytes), not the real file",
        text.len()
    );
    let loadable = CKPT_EXT.contains(&ext(first).as_str());
    c.symptom = if loadable {
        "_pickle.UnpicklingError: invalid load key, 'v'.".into()
    } else {
        format!("{first} contains 'version https://git-lfs.github.com/spec/v1' instead of data")
    };
    c.trigger = format!(
        "loading {first} after downloading the repository (archive or clone without git-lfs)"
    );
    c.cause = format!(
        "{} file(s) are stored with Git LFS and the release holds only their pointers (the real {first} is {size} bytes); LFS quota or a ZIP download leaves users without content.",
        pointers.len()
    );
    for (p, _) in pointers.iter().take(10) {
        c.evidence
            .push(ev(p, &[1], kind_of(p), "Git LFS pointer file"));
    }
    if !loadable {
        c.stage = Stage::DataPreparation;
    }
    c.impact = "Everything that loads these files fails.".into();
    vec![c]
}

/// `empty_submodule`: `.gitmodules` paths that are missing or empty when the README never
/// says to clone with `--recursive` or to update submodules.
pub(super) fn submodules(ctx: &Ctx) -> Vec<Candidate> {
    let Some(text) = ctx.tree.text(".gitmodules") else {
        return Vec::new();
    };
    let told = ctx.doc_texts().any(|(_, t)| {
        [
            "--recursive",
            "--recurse-submodules",
            "submodule update",
            "submodule init",
        ]
        .iter()
        .any(|w| t.contains(w))
    });
    if told {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(path) = line
            .trim()
            .strip_prefix("path")
            .map(str::trim)
            .and_then(|r| r.strip_prefix('='))
        else {
            continue;
        };
        let path = path.trim().trim_end_matches('/');
        let empty = match ctx.tree.entries.get(path) {
            None => true,
            Some(e) => e.is_dir && e.empty_dir,
        };
        if !empty || path.is_empty() {
            continue;
        }
        let mut c = Candidate::new(Rule::EmptySubmodule, path);
        c.title = format!("{path} is empty after cloning (git submodule not fetched)");
        c.symptom = format!("ModuleNotFoundError / FileNotFoundError for files under {path}/: the directory is empty");
        c.trigger = "git clone as the README says, then running the code".into();
        c.cause = format!("{path} is a git submodule; the README never says to clone with --recursive or run git submodule update --init.");
        c.evidence.push(ev(
            ".gitmodules",
            &[line_no(i)],
            EvidenceType::Config,
            format!("submodule path {path}"),
        ));
        c.evidence.push(ev(
            path,
            &[],
            EvidenceType::Absence,
            "empty directory in the release",
        ));
        c.impact =
            "Code that depends on the submodule cannot run until the user finds the missing step."
                .into();
        out.push(c);
    }
    out
}

/// The absolute path that starts at byte `i` of `line`, if it looks like a machine-specific
/// one (`/home/<user>/…`, `/data/<x>/…`, `/mnt/…`, `C:\Users\…`), and its root.
fn abs_path_at(line: &str, i: usize) -> Option<(String, String)> {
    let rest = &line[i..];
    let end = rest
        .find(|c: char| {
            matches!(
                c,
                '"' | '\'' | ' ' | ',' | ')' | ']' | '}' | '`' | '\t' | ';'
            )
        })
        .unwrap_or(rest.len());
    let path = &rest[..end];
    let norm = path.replace("\\\\", "/").replace('\\', "/");
    let parts: Vec<&str> = norm.split('/').filter(|s| !s.is_empty()).collect();
    let lower = norm.to_ascii_lowercase();
    if [
        "site-packages",
        "/lib/python",
        "anaconda",
        "miniconda",
        "/.cache",
        "/usr/",
        "/.local/",
    ]
    .iter()
    .any(|w| lower.contains(w))
    {
        return None;
    }
    let windows = parts
        .first()
        .is_some_and(|p| p.len() == 2 && p.ends_with(':'));
    let min = if windows || matches!(parts.first(), Some(&"home" | &"Users" | &"data")) {
        3
    } else {
        2
    };
    if parts.len() < min {
        return None;
    }
    let root = if windows {
        parts[..parts.len().min(3)].join("/")
    } else {
        format!("/{}", parts[..2].join("/"))
    };
    Some((path.to_string(), root))
}

/// `hardcoded_path`: absolute paths of the authors' machines in code and configs, one
/// finding per root (`/home/alice`).
pub(super) fn hardcoded(ctx: &Ctx) -> Vec<Candidate> {
    const MARKERS: &[&str] = &[
        "/home/",
        "/Users/",
        "/data/",
        "/mnt/",
        "/scratch/",
        "/nfs/",
        "/gpfs/",
        "/raid/",
        "/media/",
        "C:\\",
        "C:/",
        "D:\\",
        "D:/",
    ];
    let exts = [
        "py", "sh", "bash", "yaml", "yml", "json", "cfg", "ini", "toml", "ipynb",
    ];
    // root → [(file, line, path)]
    let mut roots: BTreeMap<String, Vec<(String, u32, String)>> = BTreeMap::new();
    for (path, text) in ctx.tree.texts_with(&exts) {
        for (i, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with('#') || t.starts_with("//") {
                continue;
            }
            for m in MARKERS {
                for (pos, _) in line.match_indices(m) {
                    let before = line[..pos].chars().next_back();
                    if !before.map_or(true, |b| {
                        matches!(b, '"' | '\'' | ' ' | '=' | ':' | '(' | ',' | '[' | '\t')
                    }) {
                        continue;
                    }
                    if let Some((p, root)) = abs_path_at(line, pos) {
                        roots
                            .entry(root)
                            .or_default()
                            .push((path.to_string(), line_no(i), p));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for (root, hits) in roots {
        let mut files: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
        files.dedup();
        let mut c = Candidate::new(Rule::HardcodedPath, root.clone());
        c.weight = hits.len();
        let (f0, _, p0) = &hits[0];
        c.title = if files.len() > 1 {
            format!(
                "Hard-coded path {root}/... in {f0} and {} other file(s)",
                files.len() - 1
            )
        } else {
            format!("Hard-coded path {root}/... in {f0}")
        };
        c.symptom = format!("FileNotFoundError: [Errno 2] No such file or directory: '{p0}'");
        c.trigger = format!("running {f0} on another machine without editing it");
        c.cause = format!("Absolute paths from the authors' machine ({root}) are written into the code/configs instead of options or relative paths.");
        for f in files.iter().take(8) {
            let lines: Vec<u32> = hits
                .iter()
                .filter(|h| h.0 == *f)
                .map(|h| h.1)
                .take(5)
                .collect();
            let example = hits
                .iter()
                .find(|h| h.0 == *f)
                .map(|h| h.2.clone())
                .unwrap_or_default();
            c.evidence
                .push(ev(f, &lines, kind_of(f), format!("hard-coded {example}")));
        }
        if hits
            .iter()
            .any(|h| h.2.to_ascii_lowercase().contains("data"))
        {
            c.stage = Stage::DataPreparation;
        }
        c.impact = "Users must find and edit every hard-coded path before anything runs.".into();
        out.push(c);
    }
    out.truncate(3);
    out
}

/// What a referenced path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum RefKind {
    Checkpoint,
    Config,
    Data,
}

/// Classifies a referenced value: by extension, else by the flag/key that names it.
fn classify(value: &str, key: &str) -> Option<RefKind> {
    let key = key.to_ascii_lowercase();
    if value.is_empty()
        || value.contains("://")
        || value.contains(' ')
        || placeholder(value)
        || OUTPUT_WORDS.iter().any(|w| key.contains(w))
    {
        return None;
    }
    let e = ext(value);
    if CKPT_EXT.contains(&e.as_str()) || value.ends_with(".pth.tar") {
        Some(RefKind::Checkpoint)
    } else if CONFIG_EXT.contains(&e.as_str())
        || (e == "py" && (key.contains("config") || key.contains("cfg")))
    {
        Some(RefKind::Config)
    } else if e.is_empty()
        && value.contains('/')
        && ["data", "dataset", "root", "dir", "path"]
            .iter()
            .any(|w| key.contains(w))
    {
        Some(RefKind::Data)
    } else {
        None
    }
}

/// Where a path is referenced: `(file, line, as written)`.
type Uses = Vec<(String, u32, String)>;

/// `missing_checkpoint`, `missing_config`, `missing_data`.
pub(super) fn missing_references(ctx: &Ctx) -> Vec<Candidate> {
    let refs = references(ctx);
    let downloads = download_lines(ctx);
    let download_script = ctx.tree.files().any(|p| {
        file_name(p).to_ascii_lowercase().contains("download")
            && matches!(ext(p).as_str(), "sh" | "py")
    });
    let prep_script = ctx.tree.files().any(|p| {
        [
            "prepare",
            "preprocess",
            "make_data",
            "build_data",
            "download",
        ]
        .iter()
        .any(|w| file_name(p).to_ascii_lowercase().contains(w))
    });
    let data_source = downloads.iter().any(|l| l.contains("data"));
    let mut out = Vec::new();
    let mut counts: BTreeMap<RefKind, usize> = BTreeMap::new();
    for ((kind, path), uses) in refs {
        let name = file_name(&path).to_ascii_lowercase();
        let dir = file_name(parent(&path)).to_ascii_lowercase();
        let mentioned = downloads
            .iter()
            .any(|l| l.contains(&name) || (!dir.is_empty() && l.contains(&dir)));
        let skip = match kind {
            RefKind::Checkpoint => mentioned || download_script,
            RefKind::Config => false,
            RefKind::Data => mentioned || data_source || prep_script,
        };
        let n = counts.entry(kind).or_default();
        if skip || *n >= 6 {
            continue;
        }
        *n += 1;
        out.push(reference(kind, &path, &uses));
    }
    out
}

/// The checkpoints, configs and data paths that documentation commands, YAML/JSON configs
/// and Python string literals refer to and the tree lacks.
fn references(ctx: &Ctx) -> BTreeMap<(RefKind, String), Uses> {
    // (kind, normalized path) → [(file, line, written)]
    let mut refs: BTreeMap<(RefKind, String), Uses> = BTreeMap::new();
    let mut add = |kind: RefKind, path: String, file: &str, line: u32, written: &str| {
        refs.entry((kind, path))
            .or_default()
            .push((file.to_string(), line, written.to_string()));
    };
    for cmd in doc_commands(ctx) {
        let Some((_, args)) = target(&cmd.words) else {
            continue;
        };
        for (k, a) in args.iter().enumerate() {
            let (key, value) = match a.split_once('=') {
                Some((f, v)) if f.starts_with('-') => (f.to_string(), v.to_string()),
                _ if a.starts_with('-') => continue,
                _ => (
                    k.checked_sub(1)
                        .map(|p| args[p].clone())
                        .filter(|p| p.starts_with('-'))
                        .unwrap_or_default(),
                    a.clone(),
                ),
            };
            let Some(kind) = classify(&value, &key) else {
                continue;
            };
            if resolve(ctx, &cmd, &value).is_none() && !by_name(ctx, &value) {
                let norm = join(&cmd.cwd, &value).unwrap_or(value.clone());
                add(kind, norm, &cmd.doc, cmd.line, &value);
            }
        }
    }
    for (file, text) in ctx.tree.texts_with(&["yaml", "yml", "json"]) {
        for (i, line) in text.lines().enumerate() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let key = key.trim().trim_matches(['"', '\'', '-', ' ']);
            let value = value
                .trim()
                .trim_end_matches(',')
                .trim()
                .trim_matches(['"', '\'']);
            let Some(kind) = classify(value, key) else {
                continue;
            };
            if !exists_from(ctx, file, value) {
                add(
                    kind,
                    join("", value).unwrap_or(value.to_string()),
                    file,
                    line_no(i),
                    value,
                );
            }
        }
    }
    for (file, toks) in &ctx.py {
        let Some(text) = ctx.tree.text(file) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        for t in toks {
            let Some(s) = t.str_value() else { continue };
            let src = lines
                .get((t.line as usize).saturating_sub(1))
                .map(|l| l.to_ascii_lowercase())
                .unwrap_or_default();
            if OUTPUT_WORDS.iter().any(|w| src.contains(w))
                || src.contains("'w'")
                || src.contains("\"w\"")
                || src.contains("mkdir")
            {
                continue;
            }
            let e = ext(s);
            let kind = if CKPT_EXT.contains(&e.as_str()) && s.contains('/') {
                RefKind::Checkpoint
            } else if matches!(e.as_str(), "yaml" | "yml" | "json") && s.contains('/') {
                RefKind::Config
            } else {
                continue;
            };
            if classify(s, "").is_some() && !exists_from(ctx, file, s) {
                add(kind, join("", s).unwrap_or(s.to_string()), file, t.line, s);
            }
        }
    }
    refs
}

/// Whether a file of that name exists anywhere (a path computed another way).
fn by_name(ctx: &Ctx, value: &str) -> bool {
    let name = file_name(value);
    !ext(value).is_empty() && ctx.tree.files().any(|p| file_name(p) == name)
}

/// Whether `value`, written in `file`, exists relative to that file's directory or the root.
fn exists_from(ctx: &Ctx, file: &str, value: &str) -> bool {
    [parent(file), ""]
        .iter()
        .filter_map(|b| join(b, value))
        .any(|p| ctx.tree.exists(&p))
        || by_name(ctx, value)
        || value.starts_with('/')
}

/// Lowercased lines of documentation, shell scripts and Python that download something.
fn download_lines(ctx: &Ctx) -> Vec<String> {
    let mut out = Vec::new();
    for (path, text) in ctx.tree.texts() {
        let doc = ctx.docs.iter().any(|d| d == path);
        if !(doc || matches!(ext(path).as_str(), "sh" | "py" | "ipynb")) {
            continue;
        }
        for line in text.lines() {
            let l = line.to_ascii_lowercase();
            if DOWNLOAD.iter().any(|w| l.contains(w)) {
                out.push(l);
            }
        }
    }
    out
}

fn reference(kind: RefKind, path: &str, uses: &[(String, u32, String)]) -> Candidate {
    let (rule, what) = match kind {
        RefKind::Checkpoint => (Rule::MissingCheckpoint, "checkpoint"),
        RefKind::Config => (Rule::MissingConfig, "config file"),
        RefKind::Data => (Rule::MissingData, "data"),
    };
    let mut c = Candidate::new(rule, path);
    c.weight = uses.len();
    let (f0, l0, w0) = &uses[0];
    c.title = match kind {
        RefKind::Checkpoint => format!(
            "Where is the pretrained model {}? FileNotFoundError for {w0}",
            file_name(path)
        ),
        RefKind::Config => format!("Config file {w0} not found"),
        RefKind::Data => format!(
            "How to get the data for {w0}? The path does not exist and no download is documented"
        ),
    };
    c.symptom = format!("FileNotFoundError: [Errno 2] No such file or directory: '{w0}'");
    c.trigger = format!("running the step that {f0} line {l0} describes");
    c.cause = match kind {
        RefKind::Checkpoint => format!("{path} is referenced but not in the release, and no download link or script for it is given."),
        RefKind::Config => format!("{path} is referenced but not in the release."),
        RefKind::Data => format!("{path} is referenced, not in the release, and the documentation says nowhere how to obtain or prepare it."),
    };
    for (f, l, w) in uses.iter().take(4) {
        c.evidence
            .push(ev(f, &[*l], kind_of(f), format!("refers to {what} {w}")));
    }
    c.evidence.push(ev(
        path,
        &[],
        EvidenceType::Absence,
        format!("no such {what} in the release"),
    ));
    let p = format!("{f0} {path}").to_ascii_lowercase();
    if kind == RefKind::Checkpoint && p.contains("train") {
        c.stage = Stage::Training;
    } else if kind == RefKind::Checkpoint && ["eval", "test"].iter().any(|w| p.contains(w)) {
        c.stage = Stage::Evaluation;
    }
    if uses.len() > 1 {
        c.confidence = Confidence::High;
    }
    c.impact = format!("The step that needs this {what} cannot run.");
    c
}
