//! Rules on the Python environment: no dependency specification (`no_dependency_spec`),
//! imports no specification declares (`undeclared_import`), CUDA with no fallback
//! (`cuda_only`).

use std::collections::{BTreeMap, BTreeSet};

use super::pylex::{self, Tok};
use super::stdlib::{arrives_with, distributions, is_stdlib, normalize, BUNDLED};
use super::tree::{self, file_name};
use super::{ev, kind_of, Candidate, Ctx, Rule};
use crate::findings::detail::EvidenceType;
use crate::findings::{Confidence, Severity};

/// The declared distributions (PEP 503 names) and the files that declare them.
#[derive(Debug, Default)]
pub(super) struct Declared {
    pub(super) names: BTreeSet<String>,
    /// Dependency specification files (requirements, setup, pyproject, conda, Pipfile...).
    pub(super) spec_files: Vec<String>,
    /// Documentation lines with `pip install`/`conda install` of named packages.
    pub(super) doc_installs: Vec<(String, u32)>,
}

/// Whether `path` is a dependency specification file by its name.
fn is_spec_name(path: &str) -> bool {
    let name = file_name(path).to_ascii_lowercase();
    let ext = tree::ext(path);
    (name.starts_with("requirements")
        || name.ends_with("requirements.txt")
        || path.starts_with("requirements/"))
        && ext == "txt"
        || matches!(
            name.as_str(),
            "setup.py"
                | "setup.cfg"
                | "pyproject.toml"
                | "pipfile"
                | "pipfile.lock"
                | "poetry.lock"
        )
        || ((name.starts_with("environment")
            || name.starts_with("conda")
            || name.starts_with("env"))
            && matches!(ext.as_str(), "yml" | "yaml"))
}

/// Reads every dependency declaration in the tree.
pub(super) fn declared(ctx: &Ctx) -> Declared {
    let mut d = Declared::default();
    for (path, text) in ctx.tree.texts() {
        if path.matches('/').count() > 3 {
            continue;
        }
        let name = file_name(path).to_ascii_lowercase();
        let ext = tree::ext(path);
        let yaml_env = matches!(ext.as_str(), "yml" | "yaml")
            && text.lines().any(|l| l.starts_with("dependencies:"));
        if is_spec_name(path) || yaml_env {
            d.spec_files.push(path.to_string());
            let names: Vec<String> = if ext == "txt" {
                text.lines().filter_map(requirement_name).collect()
            } else if name == "setup.py" {
                setup_py(text)
            } else if name == "setup.cfg" {
                setup_cfg(text)
            } else if matches!(ext.as_str(), "yml" | "yaml") {
                conda_env(text)
            } else {
                quoted_or_keys(text)
            };
            d.names.extend(names.iter().map(|n| normalize(n)));
        }
        let install_file =
            name == "dockerfile" || ext == "sh" || ctx.docs.iter().any(|p| p == path);
        if install_file {
            for (i, line) in text.lines().enumerate() {
                let pkgs = install_line(line);
                if !pkgs.is_empty() {
                    d.names.extend(pkgs.iter().map(|n| normalize(n)));
                    if ctx.docs.iter().any(|p| p == path) {
                        d.doc_installs.push((path.to_string(), tree::line_no(i)));
                    }
                }
            }
        }
    }
    // The top-most specification first: the one evidence points at.
    d.spec_files
        .sort_by_key(|p| (p.matches('/').count(), p.clone()));
    // Conda's PyTorch is `pytorch`; the import is `torch`.
    if d.names.contains("pytorch") {
        d.names.insert("torch".into());
    }
    d
}

/// The distribution a requirements line names (`name[extra]>=1`, `-e git+...#egg=name`,
/// `name @ url`, `git+https://host/org/name.git`).
pub(super) fn requirement_name(line: &str) -> Option<String> {
    let line = line.split(" #").next().unwrap_or(line).trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    if let Some(egg) = line.split("#egg=").nth(1) {
        return Some(egg.split(['&', ' ', '[']).next().unwrap_or(egg).to_string());
    }
    let line = line
        .strip_prefix("-e ")
        .or_else(|| line.strip_prefix("--editable "))
        .unwrap_or(line)
        .trim();
    if line.starts_with('-') || line.starts_with('.') || line.starts_with('/') {
        return None;
    }
    if line.contains("://") && !line.contains(" @ ") {
        let last = line.trim_end_matches('/').rsplit('/').next()?;
        let last = last.split('@').next().unwrap_or(last);
        return Some(last.trim_end_matches(".git").to_string()).filter(|s| !s.is_empty());
    }
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(line.len());
    Some(line[..end].to_string()).filter(|s| !s.is_empty())
}

/// The requirement strings of `install_requires=[...]` and `extras_require` in a setup.py.
fn setup_py(text: &str) -> Vec<String> {
    let toks = pylex::lex(text);
    let mut out = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        if !(t.is_name("install_requires")
            || t.is_name("extras_require")
            || t.is_name("requirements"))
        {
            continue;
        }
        let mut depth = 0i32;
        for n in &toks[k + 1..] {
            match &n.tok {
                Tok::Op('[' | '(' | '{') => depth += 1,
                Tok::Op(']' | ')' | '}') => {
                    depth -= 1;
                    if depth <= 0 {
                        break;
                    }
                }
                Tok::Str(s) if depth > 0 => out.extend(requirement_name(s)),
                Tok::Op(',') | Tok::Op('=') | Tok::Op(':') | Tok::Op('+') => {}
                _ if depth == 0 && n.line != t.line => break,
                _ => {}
            }
        }
    }
    out
}

/// The requirement lines of `install_requires =` (and `extras_require` entries) in a
/// setup.cfg: the indented lines that follow.
fn setup_cfg(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let indented = line.starts_with([' ', '\t']);
        if inside && indented {
            out.extend(requirement_name(line.trim()));
            continue;
        }
        inside = false;
        if let Some((key, value)) = line.split_once('=') {
            let key = key.trim();
            if key == "install_requires" || key == "tests_require" {
                inside = true;
                out.extend(requirement_name(value.trim()));
            }
        }
    }
    out
}

/// Package names of a conda environment file: `- name=1.0`, `- channel::name`, and the
/// `- pip:` list's requirement lines.
fn conda_env(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(item) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        let item = item.trim().trim_matches(['"', '\'']);
        if item == "pip:" || item.ends_with(':') {
            continue;
        }
        let item = item.rsplit("::").next().unwrap_or(item);
        let item = item.replace('=', " ").replace(['<', '>', '!', '~'], " ");
        out.extend(requirement_name(&item));
    }
    out
}

/// Requirement names of a TOML-like or lock file: quoted strings in `dependencies = [...]`
/// / `requires = [...]` lists (pyproject, setup.cfg-like), `name = ...` keys of dependency
/// sections (Pipfile, Poetry), `name = "x"` of `[[package]]` (poetry.lock) and
/// `"name": {` keys (Pipfile.lock).
fn quoted_or_keys(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut in_list = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && t.ends_with(']') && !in_list {
            section = t.to_ascii_lowercase();
            continue;
        }
        let quoted: Vec<&str> = t.split('"').skip(1).step_by(2).collect();
        let bare: String = t.split('"').step_by(2).collect();
        let starts_list =
            (bare.contains("dependencies") || bare.contains("requires")) && bare.contains('[');
        if starts_list || in_list {
            out.extend(quoted.iter().filter_map(|q| requirement_name(q)));
            in_list = !bare.contains(']');
            continue;
        }
        if section == "[[package]]" {
            if let Some(name) = t.strip_prefix("name = ") {
                out.extend(requirement_name(name.trim_matches('"')));
            }
        } else if section.contains("dependencies") || section.contains("packages") {
            if let Some((key, _)) = t.split_once('=') {
                out.extend(requirement_name(key.trim().trim_matches('"')));
            }
        } else if t.starts_with('"') && t.ends_with('{') {
            out.extend(quoted.first().and_then(|q| requirement_name(q)));
        }
    }
    out
}

/// The packages a `pip install a b` / `conda install a` line installs (not `-r` files).
pub(super) fn install_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for cmd in line.split("&&").flat_map(|c| c.split(';')) {
        let words: Vec<&str> = cmd
            .split_whitespace()
            .map(|w| w.trim_matches(['"', '\'', '`']))
            .collect();
        let Some(pos) = words
            .windows(2)
            .position(|w| {
                matches!(w[0], "pip" | "pip3" | "conda" | "mamba" | "uv") && w[1] == "install"
            })
            .or_else(|| {
                words
                    .windows(3)
                    .position(|w| w[0] == "uv" && w[1] == "pip" && w[2] == "install")
                    .map(|p| p + 1)
            })
        else {
            continue;
        };
        let mut skip_next = false;
        for w in &words[pos + 2..] {
            let w = w.trim_matches(['"', '\'', '`']);
            if skip_next {
                skip_next = false;
                continue;
            }
            if matches!(
                w,
                "-r" | "--requirement"
                    | "-c"
                    | "-f"
                    | "--find-links"
                    | "-i"
                    | "--index-url"
                    | "--extra-index-url"
                    | "-n"
                    | "--name"
                    | "-p"
                    | "--prefix"
            ) {
                skip_next = true;
                continue;
            }
            if w.starts_with('-') || w.is_empty() {
                continue;
            }
            out.extend(requirement_name(w));
        }
    }
    out
}

/// Top-level names that are the repository's own: Python file stems and the directories
/// that hold Python files.
pub(super) fn local_modules(ctx: &Ctx) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for path in ctx.tree.files() {
        if matches!(tree::ext(path).as_str(), "py" | "so" | "pyx" | "pyd") {
            let name = file_name(path);
            out.insert(name.split('.').next().unwrap_or(name).to_string());
            let mut dir = tree::parent(path);
            while !dir.is_empty() {
                out.insert(file_name(dir).to_string());
                dir = tree::parent(dir);
            }
        }
    }
    out
}

/// Third-party imports: distribution → (module, [(path, line)]).
type Imports = BTreeMap<String, (String, Vec<(String, u32)>)>;

/// `no_dependency_spec` and `undeclared_import`.
pub(super) fn dependencies(ctx: &Ctx) -> Vec<Candidate> {
    let decl = declared(ctx);
    let local = local_modules(ctx);
    let doc_words = doc_words(ctx);
    // Third-party imports: distribution → (module, [(path, line)]).
    let mut third: Imports = BTreeMap::new();
    for (path, toks) in &ctx.py {
        for (module, line, guarded) in pylex::imports(toks) {
            if guarded || is_stdlib(&module) || local.contains(&module) || module.starts_with('_') {
                continue;
            }
            let dists = distributions(&module);
            let provided = dists.iter().any(|d| decl.names.contains(d))
                || BUNDLED
                    .iter()
                    .any(|(m, p)| *m == module && decl.names.contains(*p))
                || dists.iter().any(|d| arrives_with(d, &decl.names))
                || doc_words.contains(&module.to_ascii_lowercase())
                || dists.iter().any(|d| doc_words.contains(d));
            if provided {
                continue;
            }
            let entry = third
                .entry(dists[0].clone())
                .or_insert_with(|| (module.clone(), Vec::new()));
            entry.1.push((path.clone(), line));
        }
    }
    let has_spec = !decl.spec_files.is_empty() || !decl.doc_installs.is_empty();
    if !has_spec {
        if ctx.py.is_empty() {
            return Vec::new();
        }
        return vec![no_spec(ctx, &third)];
    }
    let mut out = Vec::new();
    for (dist, (module, places)) in third {
        let mut c = Candidate::new(Rule::UndeclaredImport, dist.clone());
        let files: BTreeSet<&str> = places.iter().map(|(p, _)| p.as_str()).collect();
        c.weight = files.len();
        c.title = format!(
            "ModuleNotFoundError: No module named '{module}' ({dist} is not in the requirements)"
        );
        c.symptom = format!("ModuleNotFoundError: No module named '{module}'");
        let first = files.iter().next().copied().unwrap_or_default();
        c.trigger = format!(
            "installing the declared dependencies ({}), then running {first}",
            spec_list(&decl)
        );
        c.cause = format!(
            "{} import(s) {module} but no dependency specification declares {dist}.",
            files.iter().take(3).copied().collect::<Vec<_>>().join(", ")
        );
        for file in files.iter().take(5) {
            let lines: Vec<u32> = places
                .iter()
                .filter(|(p, _)| p == file)
                .map(|(_, l)| *l)
                .take(5)
                .collect();
            c.evidence.push(ev(
                file,
                &lines,
                EvidenceType::Code,
                format!("imports {module}"),
            ));
        }
        if let Some(spec) = decl.spec_files.first() {
            c.evidence.push(ev(
                spec,
                &[],
                EvidenceType::Config,
                format!("declares no {dist}"),
            ));
        }
        if files.iter().all(|f| is_test_or_example(f)) {
            c.severity = Severity::Medium;
        }
        c.impact = format!("Every script that imports {module} fails until the user guesses the package and a compatible version.");
        out.push(c);
    }
    out.truncate(15);
    out
}

fn spec_list(decl: &Declared) -> String {
    match decl.spec_files.first() {
        Some(f) => format!("pip install -r {f}")
            .replace("-r setup.py", "-e .")
            .replace("-r pyproject.toml", "-e ."),
        None => "the README's pip install line".into(),
    }
}

fn is_test_or_example(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    ["test", "example", "demo", "notebook", "docs/", "scripts/"]
        .iter()
        .any(|w| p.contains(w))
}

/// Lowercase words of the documentation's requirement lines (a README that lists a package
/// tells the user): bullet or table lines, and lines that speak of installing, requirements,
/// dependencies or versions. Prose that merely names a library ("our JAX implementation")
/// declares nothing.
fn doc_words(ctx: &Ctx) -> BTreeSet<String> {
    const CUES: &[&str] = &[
        "install",
        "require",
        "depend",
        "version",
        "==",
        ">=",
        "prerequisite",
        "package",
    ];
    let mut out = BTreeSet::new();
    for (_, text) in ctx.doc_texts() {
        for line in text.lines() {
            let t = line.trim_start();
            let lower = t.to_ascii_lowercase();
            let listed = t.starts_with(['-', '*', '+', '|'])
                || t.split_once(". ")
                    .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
                || CUES.iter().any(|c| lower.contains(c));
            if !listed {
                continue;
            }
            for w in lower.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
                if w.len() > 1 {
                    out.insert(w.to_string());
                }
            }
        }
    }
    out
}

fn no_spec(ctx: &Ctx, third: &Imports) -> Candidate {
    let mut c = Candidate::new(Rule::NoDependencySpec, "requirements.txt");
    c.weight = third.len();
    c.title =
        "No requirements.txt or environment file: which packages and versions are needed?".into();
    let first = third
        .values()
        .next()
        .map_or("torch".to_string(), |(m, _)| m.clone());
    c.symptom = format!(
        "ModuleNotFoundError: No module named '{first}', with no requirements file to install from"
    );
    c.trigger = "setting up an environment to run the code after cloning".into();
    let names: Vec<&str> = third.keys().map(String::as_str).take(12).collect();
    c.cause = if names.is_empty() {
        "The repository has no requirements.txt, setup.py, pyproject.toml, environment.yml or Pipfile, and the README gives no install command.".into()
    } else {
        format!(
            "The repository has no requirements.txt, setup.py, pyproject.toml, environment.yml or Pipfile, and the README gives no install command; the code imports {}.",
            names.join(", ")
        )
    };
    c.evidence.push(ev(
        "requirements.txt",
        &[],
        EvidenceType::Absence,
        "no dependency specification in the repository",
    ));
    if let Some((readme, _)) = ctx.doc_texts().next() {
        c.evidence.push(ev(
            readme,
            &[],
            EvidenceType::Documentation,
            "no pip/conda install instructions",
        ));
    }
    for (dist, (module, places)) in third.iter().take(6) {
        if let Some((path, line)) = places.first() {
            c.evidence.push(ev(
                path,
                &[*line],
                kind_of(path),
                format!("imports {module} ({dist})"),
            ));
        }
    }
    c.impact = "Users must reconstruct the environment and versions by trial and error; results may differ with other versions.".into();
    c
}

/// `cuda_only`: files that put tensors or models on CUDA with no `is_available()` check,
/// no `"cpu"` fallback and no device flag anywhere in the same file.
pub(super) fn cuda_only(ctx: &Ctx) -> Vec<Candidate> {
    let mut files: Vec<(&str, Vec<u32>)> = Vec::new();
    for (path, toks) in &ctx.py {
        let mut hits = Vec::new();
        let mut guarded = false;
        for (k, t) in toks.iter().enumerate() {
            match &t.tok {
                Tok::Name(n)
                    if n == "is_available"
                        || n == "no_cuda"
                        || n == "use_cuda"
                        || n == "use_gpu" =>
                {
                    guarded = true
                }
                Tok::Str(s)
                    if s == "cpu"
                        || s.starts_with("--device")
                        || s.starts_with("--gpu")
                        || s.starts_with("--cpu")
                        || s.contains("cuda\" if") =>
                {
                    guarded = true
                }
                Tok::Name(n)
                    if n == "cuda"
                        && k > 0
                        && toks[k - 1].is_op('.')
                        && toks.get(k + 1).is_some_and(|x| x.is_op('('))
                        // `.cuda()`, not `torch.cuda(`.
                        && !toks.get(k.wrapping_sub(2)).is_some_and(|x| x.is_name("torch")) =>
                {
                    hits.push(t.line);
                }
                Tok::Str(s) if s == "cuda" || s.starts_with("cuda:") => hits.push(t.line),
                _ => {}
            }
        }
        if !hits.is_empty() && !guarded {
            hits.dedup();
            files.push((path, hits));
        }
    }
    if files.is_empty() {
        return Vec::new();
    }
    let mut c = Candidate::new(Rule::CudaOnly, "cuda");
    c.weight = files.len();
    let names: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    c.title = format!(
        "Cannot run on a machine without a CUDA GPU: {} calls .cuda() unconditionally",
        names[0]
    );
    c.symptom = "AssertionError: Torch not compiled with CUDA enabled (or RuntimeError: No CUDA GPUs are available)".into();
    c.trigger = format!("running {} on a CPU-only machine or a laptop", names[0]);
    c.cause = format!(
        "{} move models or tensors to CUDA without a torch.cuda.is_available() check, a CPU fallback or a device option.",
        names.iter().take(4).copied().collect::<Vec<_>>().join(", ")
    );
    for (path, lines) in files.iter().take(6) {
        let lines: Vec<u32> = lines.iter().copied().take(5).collect();
        c.evidence.push(ev(
            path,
            &lines,
            EvidenceType::Code,
            "CUDA device used unconditionally",
        ));
    }
    c.confidence = if files.len() > 2 {
        Confidence::High
    } else {
        Confidence::Medium
    };
    c.impact =
        "Users without an NVIDIA GPU cannot run the code at all, not even a small evaluation."
            .into();
    vec![c]
}
