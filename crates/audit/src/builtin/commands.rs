//! The commands of the documentation (fenced blocks, inline code, `$ ` lines, with `cd`
//! followed) and the rules on them: a command that runs a script or module not in the tree
//! (`missing_script`), a command that passes a flag the script does not define
//! (`unknown_flag`).

use std::collections::{BTreeMap, BTreeSet};

use super::pylex::{self, Tok};
use super::tree::{file_name, join, line_no, parent};
use super::{ev, Candidate, Ctx, Rule};
use crate::findings::detail::{EvidenceType, Stage};

/// One shell command from the documentation.
#[derive(Debug, Clone)]
pub(super) struct Command {
    pub(super) doc: String,
    pub(super) line: u32,
    /// The directory it runs in, relative to the root (after `cd`).
    pub(super) cwd: String,
    pub(super) words: Vec<String>,
}

/// What a command runs.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Target {
    /// `python X.py`, `bash X.sh`, `./X.sh`.
    Script(String),
    /// `python -m pkg.mod`.
    Module(String),
}

/// The commands of every documentation file: lines of fenced code blocks (a `cd` holds
/// for the rest of its block), inline code spans, `$ `-prompted lines. Continuation
/// backslashes are joined; `&&`, `;` and `|` split commands.
pub(super) fn doc_commands(ctx: &Ctx) -> Vec<Command> {
    let mut out = Vec::new();
    for (doc, text) in ctx.doc_texts() {
        let base = parent(doc).to_string();
        let mut in_fence = false;
        let mut cwd = base.clone();
        let mut pending = String::new();
        let mut pending_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let t = raw.trim();
            if t.starts_with("```") || t.starts_with("~~~") {
                in_fence = !in_fence;
                cwd = base.clone();
                pending.clear();
                continue;
            }
            let spans: Vec<String> = if in_fence {
                if pending.is_empty() {
                    pending_line = line_no(i);
                }
                pending.push_str(t.trim_end_matches('\\'));
                pending.push(' ');
                if t.ends_with('\\') {
                    continue;
                }
                vec![std::mem::take(&mut pending)]
            } else if let Some(rest) = t.strip_prefix("$ ") {
                pending_line = line_no(i);
                vec![rest.to_string()]
            } else {
                pending_line = line_no(i);
                t.split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect()
            };
            for span in spans {
                let mut span_cwd = if in_fence { cwd.clone() } else { base.clone() };
                for part in span
                    .split("&&")
                    .flat_map(|p| p.split(';'))
                    .flat_map(|p| p.split('|'))
                {
                    let words = shell_words(part);
                    if words.first().is_some_and(|w| w == "cd") {
                        if let Some(dir) = words
                            .get(1)
                            .and_then(|d| join(&span_cwd, d.trim_end_matches('/')))
                        {
                            span_cwd = dir;
                        }
                        continue;
                    }
                    if !words.is_empty() {
                        out.push(Command {
                            doc: doc.to_string(),
                            line: pending_line,
                            cwd: span_cwd.clone(),
                            words,
                        });
                    }
                }
                if in_fence {
                    cwd = span_cwd;
                }
            }
        }
    }
    out
}

/// A command's words without quotes, prompts, `VAR=value` prefixes and wrappers
/// (`nohup`, `time`, `sudo`, `srun`, `!`).
fn shell_words(part: &str) -> Vec<String> {
    let mut words: Vec<String> = part
        .split_whitespace()
        .map(|w| w.trim_matches(['"', '\'']).to_string())
        .collect();
    while let Some(first) = words.first() {
        let f = first.trim_start_matches('!').trim_start_matches('%');
        let is_env = f.contains('=')
            && !f.starts_with('-')
            && f.split('=')
                .next()
                .is_some_and(|k| k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if matches!(
            f,
            "$" | ">" | "nohup" | "time" | "sudo" | "srun" | "exec" | "env"
        ) || is_env
        {
            words.remove(0);
        } else {
            if f != first {
                words[0] = f.to_string();
            }
            break;
        }
    }
    words
}

/// What `words` runs and the words after it (its arguments).
pub(super) fn target(words: &[String]) -> Option<(Target, &[String])> {
    let first = words.first()?.as_str();
    let is_python = first == "python"
        || first == "python3"
        || first == "python2"
        || (first.starts_with("python3.") && first[8..].chars().all(|c| c.is_ascii_digit()));
    let launcher = matches!(first, "torchrun" | "deepspeed")
        || (first == "accelerate" && words.get(1).is_some_and(|w| w == "launch"));
    if is_python || launcher {
        let mut i = if first == "accelerate" { 2 } else { 1 };
        while i < words.len() {
            let w = words[i].as_str();
            if w == "-m" {
                let module = words.get(i + 1)?;
                if module.starts_with("torch.distributed") {
                    i += 2;
                    continue;
                }
                return Some((
                    Target::Module(module.clone()),
                    &words[(i + 2).min(words.len())..],
                ));
            }
            if w.starts_with('-') {
                // A launcher's `--opt value`: skip the value too unless it is the script.
                let takes_value = launcher
                    && !w.contains('=')
                    && words
                        .get(i + 1)
                        .is_some_and(|n| !n.starts_with('-') && !n.ends_with(".py"));
                i += if takes_value { 2 } else { 1 };
                continue;
            }
            return w
                .ends_with(".py")
                .then(|| (Target::Script(w.to_string()), &words[i + 1..]));
        }
        return None;
    }
    if matches!(first, "bash" | "sh" | "zsh" | "source" | ".") {
        let script = words.get(1).filter(|w| w.ends_with(".sh"))?;
        return Some((Target::Script(script.clone()), &words[2..]));
    }
    if let Some(rest) = first.strip_prefix("./") {
        if rest.ends_with(".sh") || rest.ends_with(".py") {
            return Some((Target::Script(first.to_string()), &words[1..]));
        }
    }
    None
}

/// Whether a path written in documentation is a placeholder, not a real path.
pub(super) fn placeholder(p: &str) -> bool {
    p.starts_with('/')
        || p.starts_with('~')
        || p.contains("path/to")
        || p.contains("your_")
        || p.contains("xxx")
        || p.contains("...")
        || p.chars()
            .any(|c| matches!(c, '<' | '>' | '{' | '}' | '$' | '*' | '[' | ']' | '%'))
}

/// Where a script named in a command is: relative to the command's directory, else the
/// documentation file's, else the root.
pub(super) fn resolve(ctx: &Ctx, cmd: &Command, rel: &str) -> Option<String> {
    [cmd.cwd.as_str(), parent(&cmd.doc), ""]
        .iter()
        .filter_map(|base| join(base, rel))
        .find(|p| ctx.tree.exists(p))
}

/// `missing_script` and `unknown_flag`.
pub(super) fn commands(ctx: &Ctx) -> Vec<Candidate> {
    let mut missing: BTreeMap<String, (String, Vec<&Command>)> = BTreeMap::new();
    let mut unknown: BTreeMap<String, (BTreeSet<String>, Vec<&Command>)> = BTreeMap::new();
    let cmds = doc_commands(ctx);
    for cmd in &cmds {
        let Some((target, args)) = target(&cmd.words) else {
            continue;
        };
        match target {
            // A path out of the repository (`../other-repo/x.py`) is another project's.
            Target::Script(s) if !placeholder(&s) && join(&cmd.cwd, &s).is_some() => {
                match resolve(ctx, cmd, &s) {
                    None => {
                        let key = join(&cmd.cwd, &s).unwrap_or(s.clone());
                        missing
                            .entry(key)
                            .or_insert_with(|| (s.clone(), Vec::new()))
                            .1
                            .push(cmd);
                    }
                    Some(path) if path.ends_with(".py") => {
                        let bad = unknown_flags(ctx, &path, args);
                        if !bad.is_empty() {
                            let e = unknown.entry(path).or_default();
                            e.0.extend(bad);
                            e.1.push(cmd);
                        }
                    }
                    Some(_) => {}
                }
            }
            Target::Module(m) if !placeholder(&m) => {
                let rel = m.replace('.', "/");
                let top = m.split('.').next().unwrap_or(&m);
                let top_local = [cmd.cwd.as_str(), ""]
                    .iter()
                    .any(|b| join(b, top).is_some_and(|p| ctx.tree.exists(&p)));
                let found = [format!("{rel}.py"), format!("{rel}/__main__.py")]
                    .iter()
                    .any(|p| resolve(ctx, cmd, p).is_some());
                if top_local && !found {
                    missing
                        .entry(rel.clone())
                        .or_insert_with(|| (format!("-m {m}"), Vec::new()))
                        .1
                        .push(cmd);
                }
            }
            _ => {}
        }
    }
    let mut out: Vec<Candidate> = missing
        .into_iter()
        .map(|(key, (written, uses))| missing_script(ctx, key, &written, &uses))
        .collect();
    out.extend(
        unknown
            .into_iter()
            .map(|(script, (flags, uses))| unknown_flag(ctx, script, flags, &uses)),
    );
    out
}

/// The `missing_script` finding for `key` (the path as resolved), `written` as the
/// commands in `uses` wrote it.
fn missing_script(ctx: &Ctx, key: String, written: &str, uses: &[&Command]) -> Candidate {
    let stem = file_name(&key);
    let elsewhere: Vec<&str> = ctx
        .tree
        .files()
        .filter(|p| file_name(p) == stem && *p != key)
        .take(2)
        .collect();
    // A file of that name elsewhere: the command most likely lacks a `cd`; users find it.
    let rule = if elsewhere.is_empty() {
        Rule::MissingScript
    } else {
        Rule::MovedScript
    };
    let mut c = Candidate::new(rule, key.clone());
    c.weight = uses.len();
    let module = written.starts_with("-m ");
    c.title = if module {
        format!(
            "No module named {}: the README's python {written} fails",
            &written[3..]
        )
    } else {
        format!("{} not found: the README command fails", file_name(&key))
    };
    c.symptom = if module {
        format!("/usr/bin/python: No module named {}", &written[3..])
    } else if written.ends_with(".py") {
        format!("python: can't open file '{written}': [Errno 2] No such file or directory")
    } else {
        format!("bash: {written}: No such file or directory")
    };
    let first = uses[0];
    c.trigger = format!(
        "running `{}` as {} line {} says",
        first.words.join(" "),
        first.doc,
        first.line
    );
    c.cause = if elsewhere.is_empty() {
        format!("The documentation runs {written}, which is not in the repository.")
    } else {
        format!("The documentation runs {written}, which is not in the repository (a file of that name is at {}).", elsewhere.join(", "))
    };
    for u in uses.iter().take(4) {
        c.evidence.push(ev(
            &u.doc,
            &[u.line],
            EvidenceType::Documentation,
            format!("runs {}", u.words.join(" ")),
        ));
    }
    c.evidence.push(ev(
        &key,
        &[],
        EvidenceType::Absence,
        "no such file in the repository",
    ));
    c.stage = stage_of(&key);
    c.impact = "The documented step cannot be run as written.".into();
    c
}

/// The `unknown_flag` finding for `script`.
fn unknown_flag(
    ctx: &Ctx,
    script: String,
    flags: BTreeSet<String>,
    uses: &[&Command],
) -> Candidate {
    let mut c = Candidate::new(Rule::UnknownFlag, script.clone());
    let flags: Vec<String> = flags.into_iter().collect();
    c.weight = flags.len();
    let click = ctx
        .py
        .get(&script)
        .is_some_and(|t| t.iter().any(|x| x.is_name("click")));
    c.symptom = if click {
        format!("Error: No such option: {}", flags[0])
    } else {
        format!(
            "{}: error: unrecognized arguments: {}",
            file_name(&script),
            flags.join(" ")
        )
    };
    c.title = format!("{} when running {script} as the README says", c.symptom);
    let first = uses[0];
    c.trigger = format!(
        "running `{}` as {} line {} says",
        first.words.join(" "),
        first.doc,
        first.line
    );
    c.cause = format!(
        "{script} defines no option {}; the documentation and the argument parser disagree.",
        flags.join(", ")
    );
    for u in uses.iter().take(4) {
        c.evidence.push(ev(
            &u.doc,
            &[u.line],
            EvidenceType::Documentation,
            format!("passes {}", flags.join(" ")),
        ));
    }
    let lines: Vec<u32> = script_flags(ctx, &script)
        .0
        .iter()
        .map(|d| d.line)
        .take(6)
        .collect();
    c.evidence.push(ev(
        &script,
        &lines,
        EvidenceType::Code,
        "the options the parser defines",
    ));
    c.stage = stage_of(&script);
    c.impact = "The documented command stops at argument parsing.".into();
    c
}

fn stage_of(path: &str) -> Stage {
    let p = path.to_ascii_lowercase();
    if p.contains("train") {
        Stage::Training
    } else if ["eval", "test", "bench"].iter().any(|w| p.contains(w)) {
        Stage::Evaluation
    } else if ["data", "prep", "download"].iter().any(|w| p.contains(w)) {
        Stage::DataPreparation
    } else if ["demo", "infer", "predict"].iter().any(|w| p.contains(w)) {
        Stage::Inference
    } else {
        Stage::Documentation
    }
}

/// The flags `script` and the local modules it imports define, and whether its options
/// can be checked at all (no `parse_known_args`, Hydra, Fire, HfArgumentParser...).
pub(super) fn script_flags(ctx: &Ctx, script: &str) -> (Vec<pylex::FlagDef>, bool) {
    let Some(toks) = ctx.py.get(script) else {
        return (Vec::new(), false);
    };
    let mut files = vec![script.to_string()];
    for (module, _, _) in pylex::imports(toks) {
        let rel = module.replace('.', "/");
        for base in [parent(script), ""] {
            for cand in [format!("{rel}.py"), format!("{rel}/__init__.py")] {
                if let Some(p) = join(base, &cand) {
                    if ctx.py.contains_key(&p) && !files.contains(&p) {
                        files.push(p);
                    }
                }
            }
        }
    }
    let mut defs = Vec::new();
    let mut checkable = true;
    for f in &files {
        let Some(t) = ctx.py.get(f) else { continue };
        if f == script {
            defs.extend(pylex::flag_defs(t));
        } else {
            defs.extend(pylex::flag_defs(t).into_iter().map(|mut d| {
                d.line = 0;
                d
            }));
        }
        checkable &= !t.iter().any(|x| {
            matches!(&x.tok, Tok::Name(n) if matches!(n.as_str(),
                "parse_known_args" | "HfArgumentParser" | "Fire" | "hydra" | "from_cli" | "jsonargparse" | "LightningCLI" | "tyro" | "simple_parsing"))
        });
    }
    (defs, checkable)
}

/// The `--flags` of `args` that `script` does not define (argparse's unambiguous prefixes
/// accepted); empty when the script defines no flags or cannot be checked.
fn unknown_flags(ctx: &Ctx, script: &str, args: &[String]) -> Vec<String> {
    let (defs, checkable) = script_flags(ctx, script);
    if defs.is_empty() || !checkable {
        return Vec::new();
    }
    let defined: BTreeSet<&str> = defs
        .iter()
        .flat_map(|d| d.flags.iter().map(String::as_str))
        .collect();
    let mut bad = Vec::new();
    for a in args {
        let Some(flag) = a.strip_prefix("--") else {
            continue;
        };
        let flag = flag.split('=').next().unwrap_or(flag);
        if flag.is_empty() || flag == "help" || placeholder(flag) {
            continue;
        }
        let full = format!("--{flag}");
        if !defined.iter().any(|d| d.starts_with(&full)) {
            bad.push(full);
        }
    }
    bad
}
