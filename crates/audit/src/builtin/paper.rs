//! Rules that compare the paper's text with the repository: hyper-parameters
//! (`hyperparameter_mismatch`, `hyperparameter_unset`), datasets (`paper_dataset`) and
//! metrics (`paper_metric`) the paper uses and the code never mentions.
//!
//! The paper is read with simple patterns (`learning rate of 0.001`, `lr = 1e-4`,
//! `batch size of 64`, `100 epochs`); the repository's values come from assignments and
//! keyword arguments in Python, argparse/click/absl defaults, YAML/JSON keys and README
//! command flags.

use std::collections::BTreeMap;

use super::commands::{doc_commands, target};
use super::pylex::{self, Tok};
use super::tree::{ext, line_no};
use super::{ev, kind_of, Candidate, Ctx, Rule};
use crate::findings::detail::EvidenceType;
use crate::findings::Confidence;

/// A hyper-parameter: its name, the repository keys that set it (lowercase, `_` for `-`),
/// and whether it is an integer.
#[rustfmt::skip]
const PARAMS: &[(&str, &[&str], bool)] = &[
    ("learning rate", &["lr", "learning_rate", "base_lr", "init_lr", "initial_lr", "lr0"], false),
    ("batch size", &["batch_size", "batchsize", "bs", "batch", "train_batch_size", "per_device_train_batch_size"], true),
    ("epochs", &["epochs", "epoch", "num_epochs", "n_epochs", "max_epochs", "total_epochs", "num_train_epochs", "nepochs", "max_epoch", "num_epoch"], true),
];

/// Datasets: (name, forms in the paper; a leading `=` means case-sensitive).
#[rustfmt::skip]
const DATASETS: &[(&str, &[&str])] = &[
    ("CIFAR-10", &["cifar-10", "cifar10"]), ("CIFAR-100", &["cifar-100", "cifar100"]), ("ImageNet", &["imagenet"]),
    ("MNIST", &["=MNIST"]), ("Fashion-MNIST", &["fashion-mnist"]), ("SVHN", &["svhn"]), ("STL-10", &["stl-10", "stl10"]),
    ("CelebA", &["celeba"]), ("FFHQ", &["ffhq"]), ("LSUN", &["lsun"]), ("COCO", &["=COCO", "mscoco"]),
    ("Pascal VOC", &["pascal voc", "voc2007", "voc2012"]), ("Cityscapes", &["cityscapes"]), ("ADE20K", &["ade20k"]),
    ("KITTI", &["kitti"]), ("nuScenes", &["nuscenes"]), ("ShapeNet", &["shapenet"]), ("ModelNet40", &["modelnet40", "modelnet"]),
    ("ScanNet", &["scannet"]), ("Human3.6M", &["human3.6m"]), ("Kinetics", &["kinetics-400", "kinetics"]),
    ("UCF101", &["ucf101", "ucf-101"]), ("HMDB51", &["hmdb51", "hmdb-51"]), ("LibriSpeech", &["librispeech"]),
    ("SQuAD", &["squad"]), ("GLUE", &["=GLUE"]), ("SuperGLUE", &["superglue"]), ("MNLI", &["mnli", "multinli"]),
    ("SST-2", &["sst-2", "sst2"]), ("WikiText-103", &["wikitext-103", "wikitext"]), ("Penn Treebank", &["penn treebank"]),
    ("IMDB", &["=IMDB"]), ("CNN/DailyMail", &["cnn/dailymail", "cnn/dm", "cnn-dailymail"]), ("XSum", &["xsum"]),
    ("MS MARCO", &["ms marco", "msmarco"]), ("Natural Questions", &["natural questions"]), ("HotpotQA", &["hotpotqa"]),
    ("TriviaQA", &["triviaqa"]), ("GSM8K", &["gsm8k"]), ("HumanEval", &["humaneval"]), ("MMLU", &["mmlu"]),
    ("Cora", &["=Cora"]), ("Citeseer", &["citeseer"]), ("OGB", &["ogbn-arxiv", "ogbn-products", "ogbg-molhiv"]),
    ("Omniglot", &["omniglot"]), ("miniImageNet", &["miniimagenet", "mini-imagenet"]), ("CUB-200", &["cub-200", "cub200"]),
    ("Places365", &["places365"]), ("NYU Depth v2", &["nyu depth", "nyuv2", "nyu-depth"]), ("Flickr30k", &["flickr30k"]),
    ("Visual Genome", &["visual genome"]), ("VQA v2", &["vqav2", "vqa v2", "vqa-v2"]), ("CLEVR", &["=CLEVR"]), ("D4RL", &["d4rl"]),
];

/// Metrics: (name, forms in the paper).
#[rustfmt::skip]
const METRICS: &[(&str, &[&str])] = &[
    ("BLEU", &["=BLEU"]), ("ROUGE", &["=ROUGE"]), ("METEOR", &["=METEOR"]), ("CIDEr", &["=CIDEr"]),
    ("FID", &["=FID", "fréchet inception distance", "frechet inception distance"]), ("Inception Score", &["inception score"]),
    ("LPIPS", &["=LPIPS"]), ("PSNR", &["=PSNR"]), ("SSIM", &["=SSIM"]), ("mIoU", &["=mIoU"]), ("mAP", &["=mAP"]),
    ("AUROC", &["=AUROC", "=AUC"]), ("NDCG", &["=NDCG"]), ("MRR", &["=MRR"]), ("WER", &["=WER", "word error rate"]),
    ("Chamfer distance", &["chamfer distance"]), ("EER", &["=EER"]),
];

/// Every rule of this module; nothing without paper text.
pub(super) fn paper_rules(ctx: &Ctx) -> Vec<Candidate> {
    let Some(paper) = ctx.paper else {
        return Vec::new();
    };
    if !ctx.has_code() {
        return Vec::new();
    }
    let mut out = hyperparameters(ctx, paper);
    let corpus = repo_corpus(ctx);
    out.extend(absent(ctx, paper, &corpus, DATASETS, Rule::PaperDataset, 3));
    out.extend(absent(ctx, paper, &corpus, METRICS, Rule::PaperMetric, 2));
    out
}

/// A number at the start of `s`: `0.001`, `1e-4`, `3 × 10^-4`, `10^{-4}`, `1,000`; its
/// value and length in bytes.
pub(super) fn number(s: &str) -> Option<(f64, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len()
        && (b[i].is_ascii_digit()
            || (b[i] == b'.' && i > 0)
            || (b[i] == b',' && i > 0 && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
    {
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let digits = s[..i].trim_end_matches('.').replace(',', "");
    let mut value: f64 = digits.parse().ok()?;
    let rest = &s[i..];
    if let Some(e) = rest.strip_prefix('e').or_else(|| rest.strip_prefix('E')) {
        let end = e
            .find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+'))
            .unwrap_or(e.len());
        if let Ok(exp) = e[..end].parse::<i32>() {
            // Parsed as one literal: `3e-4` is exactly the f64 nearest 0.0003.
            let v = format!("{digits}e{exp}").parse().ok()?;
            return Some((v, i + 1 + end));
        }
    }
    // `10^-4`, `10^{-4}`, and `3 × 10^-4` / `3x10^-4` / `3·10^-4`.
    let mut j = i;
    let mut mantissa = None;
    for sep in [" × ", "×", " x ", "x", " · ", "·", " * ", "*"] {
        if let Some(after) = rest.strip_prefix(sep) {
            if after.starts_with("10^") {
                mantissa = Some(value);
                value = 10.0;
                j = i + sep.len() + 2;
                break;
            }
        }
    }
    if value == 10.0 && s[j..].starts_with('^') {
        let e = s[j + 1..].trim_start_matches('{');
        let end = e
            .find(|c: char| !(c.is_ascii_digit() || c == '-' || c == '+'))
            .unwrap_or(e.len());
        if let Ok(exp) = e[..end].parse::<i32>() {
            let consumed = s.len() - e.len() + end;
            let v = format!("{}e{exp}", mantissa.unwrap_or(1.0)).parse().ok()?;
            return Some((v, consumed + usize::from(s[consumed..].starts_with('}'))));
        }
    }
    Some((value, i))
}

/// The values the paper gives for each hyper-parameter, with their lines.
pub(super) fn paper_values(paper: &str) -> BTreeMap<&'static str, Vec<(f64, u32)>> {
    let mut out: BTreeMap<&'static str, Vec<(f64, u32)>> = BTreeMap::new();
    const BLOCK: &[&str] = &[
        "decay", "warmup", "warm-up", "schedul", "multipl", "factor", "divided", "reduc", "drop",
        "%", "gpu",
    ];
    for (i, raw) in paper.lines().enumerate() {
        let line = raw.to_lowercase().replace('\u{2212}', "-");
        let mut push = |name: &'static str, v: f64| {
            let vals = out.entry(name).or_default();
            if !vals.iter().any(|(x, _)| close(*x, v)) {
                vals.push((v, line_no(i)));
            }
        };
        for (name, keys) in [
            (
                "learning rate",
                &["learning rate", "lr =", "lr of", "lr:"][..],
            ),
            (
                "batch size",
                &["batch size", "batch-size", "batch_size"][..],
            ),
        ] {
            for key in keys {
                for (pos, _) in line.match_indices(key) {
                    let after = &line[pos + key.len()..];
                    let window: String = after.chars().take(40).collect();
                    let Some(d) = window.find(|c: char| c.is_ascii_digit()) else {
                        continue;
                    };
                    if BLOCK.iter().any(|w| window[..d].contains(w))
                        || window[..d].contains(['(', ';'])
                    {
                        continue;
                    }
                    if let Some((v, len)) = number(&window[d..]) {
                        if !window[d + len..].trim_start().starts_with('%') {
                            push(name, v);
                        }
                    }
                }
            }
        }
        for (pos, _) in line.match_indices("epoch") {
            let before = line[..pos].trim_end();
            let before = before
                .strip_suffix("training")
                .or_else(|| before.strip_suffix("total"))
                .unwrap_or(before)
                .trim_end();
            let start = before
                .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
                .map_or(0, |k| k + 1);
            if start < before.len() {
                if let Some((v, _)) = number(&before[start..]) {
                    push("epochs", v);
                }
            }
        }
    }
    out
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// Where the repository sets each hyper-parameter: `(value, file, line)`.
fn repo_values(ctx: &Ctx) -> BTreeMap<&'static str, Vec<(f64, String, u32)>> {
    let mut out: BTreeMap<&'static str, Vec<(f64, String, u32)>> = BTreeMap::new();
    let param_of = |key: &str| -> Option<&'static str> {
        let k = key
            .trim_start_matches('-')
            .to_ascii_lowercase()
            .replace('-', "_");
        PARAMS
            .iter()
            .find(|(_, keys, _)| keys.contains(&k.as_str()))
            .map(|(n, _, _)| *n)
    };
    let mut add = |key: &str, value: &str, file: &str, line: u32| {
        if let (Some(p), Some((v, len))) = (param_of(key), number(value.trim())) {
            if len == value.trim().len() {
                out.entry(p).or_default().push((v, file.to_string(), line));
            }
        }
    };
    for (file, toks) in &ctx.py {
        for (k, t) in toks.iter().enumerate() {
            if let Tok::Name(n) = &t.tok {
                if toks.get(k + 1).is_some_and(|x| x.is_op('='))
                    && !toks.get(k + 2).is_some_and(|x| x.is_op('='))
                {
                    if let Some(v) = pylex::literal_at(toks, k + 2) {
                        add(n, &v, file, t.line);
                    }
                }
            }
        }
        for def in pylex::flag_defs(toks) {
            if let Some(v) = &def.default {
                for f in &def.flags {
                    add(f, v, file, def.line);
                }
            }
        }
    }
    for (file, text) in ctx
        .tree
        .texts_with(&["yaml", "yml", "json", "cfg", "ini", "toml"])
    {
        for (i, line) in text.lines().enumerate() {
            // `key: value`, `key = value`, a dotted key (`model_opt.lr: 2e-4`) and the
            // entries of a flow mapping (`dataset: {batch: 16, length: 50}`).
            let inner = line
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .map(|(inner, _)| inner);
            let parts: Vec<&str> = match inner {
                Some(inner) => inner.split(',').collect(),
                None => vec![line],
            };
            for part in parts {
                if let Some((k, v)) = part.split_once(':').or_else(|| part.split_once('=')) {
                    let k = k.trim().trim_matches(['"', '\'']);
                    add(
                        k.rsplit('.').next().unwrap_or(k),
                        v.trim().trim_end_matches(',').trim_matches(['"', '\'']),
                        file,
                        line_no(i),
                    );
                }
            }
        }
    }
    // Shell scripts (`run_train.sh`, `scripts/pretrain.sh`, slurm files): `--flag value`,
    // `--flag=value` and `NAME=value` assignments (`LR=0.0006`, `BATCH_SIZE=32`).
    for (file, text) in ctx.tree.texts_with(&["sh", "bash", "slurm"]) {
        for (i, line) in text.lines().enumerate() {
            let words: Vec<&str> = line
                .split(|c: char| c.is_whitespace() || c == '\\')
                .filter(|w| !w.is_empty())
                .collect();
            if words.first().is_some_and(|w| w.starts_with('#')) {
                continue;
            }
            for (k, w) in words.iter().enumerate() {
                let w = w.trim_start_matches("export").trim_matches(['"', '\'']);
                match w.split_once('=') {
                    Some((f, v)) => add(f, v.trim_matches(['"', '\'']), file, line_no(i)),
                    None if w.starts_with("--") => {
                        if let Some(v) = words.get(k + 1) {
                            add(w, v.trim_matches(['"', '\'']), file, line_no(i));
                        }
                    }
                    None => {}
                }
            }
        }
    }
    for cmd in doc_commands(ctx) {
        let Some((_, args)) = target(&cmd.words) else {
            continue;
        };
        for (k, a) in args.iter().enumerate() {
            match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => add(f, v, &cmd.doc, cmd.line),
                _ if a.starts_with("--") => {
                    if let Some(v) = args.get(k + 1) {
                        add(a, v, &cmd.doc, cmd.line);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn show(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e9 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn hyperparameters(ctx: &Ctx, paper: &str) -> Vec<Candidate> {
    let paper_vals = paper_values(paper);
    let repo_vals = repo_values(ctx);
    let mut out = Vec::new();
    for (name, vals) in paper_vals {
        let repo = repo_vals.get(name).map(Vec::as_slice).unwrap_or_default();
        let paper_list: Vec<String> = vals.iter().map(|(v, _)| show(*v)).collect();
        let paper_lines: Vec<u32> = vals.iter().map(|(_, l)| *l).collect();
        if repo.is_empty() {
            let mut c = Candidate::new(Rule::HyperparameterUnset, name);
            c.title = format!(
                "Where is the {name} of the paper ({}) set in the code?",
                paper_list.join(", ")
            );
            c.symptom = format!(
                "Cannot find the paper's {name} ({}) in any script, default or config",
                paper_list.join(", ")
            );
            c.trigger = "checking the code's settings against the paper's before training".into();
            c.cause = format!("The paper gives {name} {}, but the repository sets no {name} anywhere the built-in auditor can see.", paper_list.join(", "));
            c.evidence.push(ev(
                "paper",
                &paper_lines,
                EvidenceType::Paper,
                format!("{name} {}", paper_list.join(", ")),
            ));
            c.impact = "Users may train with another value and get other numbers.".into();
            out.push(c);
            continue;
        }
        if repo
            .iter()
            .any(|(r, _, _)| vals.iter().any(|(p, _)| close(*p, *r)))
        {
            continue;
        }
        let mut c = Candidate::new(Rule::HyperparameterMismatch, name);
        let (r0, f0, _) = &repo[0];
        c.weight = repo.len();
        c.title = format!(
            "The paper's {name} is {} but {f0} uses {}",
            paper_list.join("/"),
            show(*r0)
        );
        c.symptom = format!("Training with the released defaults does not match the paper's setup ({name} {} vs {})", show(*r0), paper_list.join("/"));
        c.trigger =
            "training with the repository's defaults to reproduce the paper's numbers".into();
        c.cause = format!(
            "The paper gives {name} {}; the repository sets {}.",
            paper_list.join(", "),
            {
                let mut r: Vec<String> = repo
                    .iter()
                    .map(|(v, f, l)| format!("{} ({f}:{l})", show(*v)))
                    .collect();
                r.truncate(4);
                r.join(", ")
            }
        );
        c.evidence.push(ev(
            "paper",
            &paper_lines,
            EvidenceType::Paper,
            format!("{name} {}", paper_list.join(", ")),
        ));
        for (v, f, l) in repo.iter().take(4) {
            c.evidence
                .push(ev(f, &[*l], kind_of(f), format!("{name} = {}", show(*v))));
        }
        if repo.len() > 1 {
            c.confidence = Confidence::Low;
        }
        c.impact =
            "Results obtained with the released settings may differ from the paper's.".into();
        c.claims.push(format!(
            "results trained with {name} {}",
            paper_list.join("/")
        ));
        out.push(c);
    }
    out
}

/// The repository's text and paths, lowercase, letters and digits only.
fn repo_corpus(ctx: &Ctx) -> String {
    let mut s = String::new();
    for path in ctx.tree.entries.keys() {
        s.extend(
            path.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase()),
        );
        s.push(' ');
    }
    for (path, text) in ctx.tree.texts() {
        if matches!(ext(path).as_str(), "png" | "svg" | "csv" | "tsv" | "lock") {
            continue;
        }
        s.extend(
            text.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase()),
        );
        s.push(' ');
    }
    s
}

fn squash(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The paper lines (1-based) mentioning one of `forms` as a whole word.
fn mentions(paper: &str, forms: &[&str]) -> Vec<u32> {
    let mut lines = Vec::new();
    for (i, line) in paper.lines().enumerate() {
        let lower = line.to_lowercase();
        let hit = forms.iter().any(|f| {
            let (hay, needle) = match f.strip_prefix('=') {
                Some(exact) => (line, exact.to_string()),
                None => (lower.as_str(), f.to_lowercase()),
            };
            hay.match_indices(&needle).any(|(p, _)| {
                let before = hay[..p].chars().next_back();
                let after = hay[p + needle.len()..].chars().next();
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            })
        });
        if hit {
            lines.push(line_no(i));
        }
    }
    lines
}

/// `paper_dataset` / `paper_metric`: names the paper mentions at least twice and the
/// repository (text and paths) never mentions; at most `cap`, most-mentioned first.
fn absent(
    ctx: &Ctx,
    paper: &str,
    corpus: &str,
    table: &[(&str, &[&str])],
    rule: Rule,
    cap: usize,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (name, forms) in table {
        let lines = mentions(paper, forms);
        if lines.len() < 2 {
            continue;
        }
        let in_repo = forms
            .iter()
            .map(|f| squash(f.trim_start_matches('=')))
            .chain([squash(name)])
            .any(|f| corpus.contains(&f));
        if in_repo {
            continue;
        }
        let mut c = Candidate::new(rule, *name);
        c.weight = lines.len();
        let shown: Vec<u32> = lines.iter().copied().take(5).collect();
        if rule == Rule::PaperDataset {
            c.title =
                format!("How to run the {name} experiments? No code or data loader for {name}");
            c.symptom = format!("The paper reports results on {name}, but no script, config or loader in the repository handles {name}");
            c.trigger = format!("trying to reproduce the paper's {name} results");
            c.cause = format!("The paper uses {name} ({} mentions); no file or path of the repository mentions it.", lines.len());
            c.impact = format!("The {name} results cannot be reproduced with the release.");
        } else {
            c.title = format!(
                "How is {name} computed? No evaluation code for the {name} numbers in the paper"
            );
            c.symptom =
                format!("No script in the repository computes {name}, which the paper reports");
            c.trigger = format!("trying to recompute the paper's {name} numbers");
            c.cause = format!(
                "The paper reports {name} ({} mentions); no file of the repository mentions it.",
                lines.len()
            );
            c.impact = format!("The reported {name} values cannot be checked.");
        }
        c.evidence.push(ev(
            "paper",
            &shown,
            EvidenceType::Paper,
            format!("mentions {name}"),
        ));
        c.evidence.push(ev(
            ".",
            &[],
            EvidenceType::Absence,
            format!("no file of the repository mentions {name}"),
        ));
        c.claims.push(format!("{name} results"));
        out.push(c);
    }
    out.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.key.cmp(&b.key)));
    out.truncate(cap);
    let _ = ctx;
    out
}
