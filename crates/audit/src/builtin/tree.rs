//! The repository as the built-in auditor sees it: every path (files, symlinks, directories)
//! and the text of the files worth reading, under fixed budgets so any tree is safe to scan.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Files larger than this are listed but not read (1 MiB).
pub(super) const MAX_FILE_BYTES: u64 = 1 << 20;
/// Directories deeper than this are not entered.
pub(super) const MAX_DEPTH: usize = 24;
/// At most this many paths are listed.
pub(super) const MAX_ENTRIES: usize = 50_000;
/// At most this much text is read in all (64 MiB).
pub(super) const MAX_TEXT_BYTES: u64 = 64 << 20;

/// One listed path.
#[derive(Debug)]
pub(super) struct Entry {
    /// The UTF-8 text of a regular file that is small, not binary and valid UTF-8.
    pub(super) text: Option<String>,
    pub(super) is_dir: bool,
    /// For a directory: whether it has no entries at all.
    pub(super) empty_dir: bool,
}

/// The scanned tree: paths relative to the root, `/`-separated, sorted.
#[derive(Debug, Default)]
pub(super) struct Tree {
    pub(super) entries: BTreeMap<String, Entry>,
    /// Paths not listed or read because a budget ran out or a read failed.
    pub(super) skipped: usize,
}

impl Tree {
    /// Lists `root` depth-first in name order. Symlinks are listed, never followed; `.git`
    /// is not entered; nothing here fails: what cannot be read is counted in `skipped`.
    pub(super) fn scan(root: &Path) -> Tree {
        let mut tree = Tree::default();
        let mut text_budget = MAX_TEXT_BYTES;
        let mut stack: Vec<(std::path::PathBuf, String, usize)> =
            vec![(root.to_path_buf(), String::new(), 0)];
        while let Some((dir, rel, depth)) = stack.pop() {
            let Ok(read) = fs::read_dir(&dir) else {
                tree.skipped += 1;
                continue;
            };
            let mut names: Vec<(String, fs::DirEntry)> = Vec::new();
            for entry in read.flatten() {
                match entry.file_name().into_string() {
                    Ok(name) => names.push((name, entry)),
                    Err(_) => tree.skipped += 1,
                }
            }
            names.sort_by(|a, b| a.0.cmp(&b.0));
            if !rel.is_empty() {
                if let Some(e) = tree.entries.get_mut(&rel) {
                    e.empty_dir = names.is_empty();
                }
            }
            let mut subdirs = Vec::new();
            for (name, entry) in names {
                if tree.entries.len() >= MAX_ENTRIES {
                    tree.skipped += 1;
                    continue;
                }
                let path = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                let Ok(meta) = fs::symlink_metadata(entry.path()) else {
                    tree.skipped += 1;
                    continue;
                };
                let is_dir = meta.file_type().is_dir();
                let mut text = None;
                if is_dir {
                    if name == ".git" {
                        continue;
                    }
                    if depth + 1 < MAX_DEPTH {
                        subdirs.push((entry.path(), path.clone(), depth + 1));
                    } else {
                        tree.skipped += 1;
                    }
                } else if meta.file_type().is_file()
                    && meta.len() <= MAX_FILE_BYTES
                    && meta.len() <= text_budget
                {
                    text = read_text(&entry.path());
                    if let Some(t) = &text {
                        text_budget -= t.len() as u64;
                    }
                }
                tree.entries.insert(
                    path,
                    Entry {
                        text,
                        is_dir,
                        empty_dir: false,
                    },
                );
            }
            // Pushed in reverse so the stack pops them in name order.
            stack.extend(subdirs.into_iter().rev());
        }
        tree
    }

    /// Sets aside the text of third-party code the repository carries (listed still, so its
    /// paths exist and its modules count as the repository's own, but no rule reads it): the
    /// directories of [`vendored_dirs`]. Returns them.
    pub(super) fn set_aside_vendored(&mut self) -> Vec<String> {
        let dirs = vendored_dirs(self);
        for (path, e) in self.entries.iter_mut() {
            if dirs.iter().any(|d| path.starts_with(&format!("{d}/"))) {
                e.text = None;
            }
        }
        dirs
    }

    /// Whether `rel` (normalized, relative) is listed: a file, a symlink or a directory.
    pub(super) fn exists(&self, rel: &str) -> bool {
        rel.is_empty() || self.entries.contains_key(rel)
    }

    /// The text of `rel`, if it was read.
    pub(super) fn text(&self, rel: &str) -> Option<&str> {
        self.entries.get(rel).and_then(|e| e.text.as_deref())
    }

    /// Every read file, in path order.
    pub(super) fn texts(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .filter_map(|(p, e)| e.text.as_deref().map(|t| (p.as_str(), t)))
    }

    /// Every read file whose extension (lowercase, without the dot) is one of `exts`.
    pub(super) fn texts_with<'a>(
        &'a self,
        exts: &'a [&str],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.texts()
            .filter(move |(p, _)| exts.contains(&ext(p).as_str()))
    }

    /// Every listed non-directory path.
    pub(super) fn files(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|(_, e)| !e.is_dir)
            .map(|(p, _)| p.as_str())
    }
}

/// A small file's text: `None` for binary (a NUL in the first 8 KiB) or non-UTF-8 files.
fn read_text(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// The lowercase extension of a path's last component (`""` when it has none).
pub(super) fn ext(path: &str) -> String {
    let name = file_name(path);
    match name.rfind('.') {
        Some(i) if i > 0 => name[i + 1..].to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The last component of a `/`-separated path.
pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The directory part of a `/`-separated path (`""` at the root).
pub(super) fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// `rel` resolved against directory `base` (both relative to the root): `.` and `..`
/// applied, `./` and doubled slashes dropped. `None` for absolute paths and paths that
/// leave the root.
pub(super) fn join(base: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') || rel.starts_with('~') {
        return None;
    }
    let mut parts: Vec<&str> = base
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// 1-based line numbers as `u32`.
pub(super) fn line_no(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

/// Directory names that hold other projects' code or editor copies, not the paper's code.
const VENDOR_NAMES: &[&str] = &[
    ".ipynb_checkpoints",
    "third_party",
    "third-party",
    "thirdparty",
    "3rdparty",
    "vendor",
    "vendored",
    "external",
    "externals",
    "site-packages",
    "node_modules",
];

/// Vendored third-party code: directories named as such ([`VENDOR_NAMES`]), and any
/// directory below the root that is a Python project of its own (its own `setup.py`,
/// `setup.cfg` or `pyproject.toml`: a bundled toolkit such as an evaluation harness, whose
/// dependencies are its own) and either two levels down (`eval/lmms-eval`) or with a
/// license of its own (a top-level `code/` with a setup.py is the paper's own package).
/// Outermost only, sorted.
pub(super) fn vendored_dirs(tree: &Tree) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    for (path, e) in &tree.entries {
        let dir = parent(path);
        let own_project = !e.is_dir
            && matches!(file_name(path), "setup.py" | "setup.cfg" | "pyproject.toml")
            && !dir.is_empty()
            && (dir.contains('/')
                || ["LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"]
                    .iter()
                    .any(|l| tree.exists(&format!("{dir}/{l}"))));
        let dir = if own_project {
            parent(path).to_string()
        } else if e.is_dir && VENDOR_NAMES.contains(&file_name(path)) {
            path.clone()
        } else {
            continue;
        };
        dirs.push(dir);
    }
    dirs.sort();
    dirs.dedup();
    let mut out: Vec<String> = Vec::new();
    for d in dirs {
        if !out.iter().any(|o| d.starts_with(&format!("{o}/"))) {
            out.push(d);
        }
    }
    out
}
