use std::fs;
use std::path::Path;

use super::*;
use crate::findings::validate;

/// The built-in auditor's verdict (it always writes the object form).
fn overall(f: &Findings) -> Overall {
    match &f.reproducibility_assessment {
        Assessment::Verdict(v) => v.overall,
        Assessment::Text(t) => panic!("the built-in auditor wrote free text: {t}"),
    }
}

const README: &str = "# Method

## Install
```bash
pip install -r requirements.txt
```

## Data
Download the dataset from https://example.org/data.zip into `data/`.

## Training
```bash
python train.py --lr 0.001 --epochs 100
```

## Evaluation
```bash
python eval.py --checkpoint checkpoints/model.pth
```
Pretrained weights: download https://example.org/model.pth into checkpoints/.
";

const TRAIN: &str = r#"import argparse
import os
import numpy as np
import torch
import cv2
from model import Net

try:
    import wandb
except ImportError:
    wandb = None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--dataset", default="cifar10")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    net = Net().to(args.device)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        loss = net(torch.zeros(1)).sum()
        loss.backward()
        opt.step()
    # Saved to /home/alice/ckpt during development.
    torch.save(net.state_dict(), os.path.join("checkpoints", "model.pth"))


if __name__ == "__main__":
    main()
"#;

const EVAL: &str = r#"import argparse
import torch
from model import Net

parser = argparse.ArgumentParser()
parser.add_argument("--checkpoint", default="checkpoints/model.pth")
args = parser.parse_args()
net = Net()
net.load_state_dict(torch.load(args.checkpoint, map_location="cpu"))
net.eval()
"#;

const MODEL: &str =
    "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n";

const PAPER: &str = "# A Method\n\nWe train on CIFAR-10 with a learning rate of 0.001 and a batch size of 64 for 100 epochs.\nCIFAR-10 results are in Table 1.\n";

fn base() -> Vec<(String, String)> {
    [
        ("README.md", README),
        ("requirements.txt", "torch>=1.8\nnumpy\nopencv-python\n"),
        ("train.py", TRAIN),
        ("eval.py", EVAL),
        ("model.py", MODEL),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), t.to_string()))
    .collect()
}

fn with(files: &[(String, String)], path: &str, text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = files.iter().filter(|(p, _)| p != path).cloned().collect();
    out.push((path.to_string(), text.to_string()));
    out
}

fn without(files: &[(String, String)], path: &str) -> Vec<(String, String)> {
    files.iter().filter(|(p, _)| p != path).cloned().collect()
}

fn edit(files: &[(String, String)], path: &str, from: &str, to: &str) -> Vec<(String, String)> {
    let text = files
        .iter()
        .find(|(p, _)| p == path)
        .map(|(_, t)| t.clone())
        .unwrap();
    assert!(text.contains(from), "{path} has no {from:?}");
    with(files, path, &text.replace(from, to))
}

fn write(dir: &Path, files: &[(String, String)]) {
    for (p, t) in files {
        let path = dir.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, t).unwrap();
    }
}

/// Audits a fixture; checks that the output passes the validator and is deterministic.
fn run_paper(files: &[(String, String)], paper: Option<&str>) -> Findings {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), files);
    let f = audit(dir.path(), paper);
    let json = f.to_json();
    assert_eq!(
        validate(json.as_bytes()).unwrap(),
        f,
        "output must pass the validator"
    );
    assert_eq!(
        audit(dir.path(), paper).to_json(),
        json,
        "output must be deterministic"
    );
    f
}

fn run(files: &[(String, String)]) -> Findings {
    run_paper(files, Some(PAPER))
}

fn rules(f: &Findings) -> Vec<String> {
    f.findings
        .iter()
        .map(|x| x.finding_id.split(':').next().unwrap().to_string())
        .collect()
}

fn fired<'a>(f: &'a Findings, rule: &str) -> Vec<&'a Finding> {
    f.findings
        .iter()
        .filter(|x| x.finding_id.starts_with(&format!("{rule}:")))
        .collect()
}

#[test]
fn the_clean_fixture_has_no_findings() {
    let f = run(&base());
    assert!(f.findings.is_empty(), "{:#?}", rules(&f));
    assert_eq!(overall(&f), Overall::LikelyReproducible);
}

#[test]
fn no_dependency_spec() {
    let broken = edit(
        &without(&base(), "requirements.txt"),
        "README.md",
        "pip install -r requirements.txt",
        "",
    );
    let f = run(&broken);
    let hits = fired(&f, "no_dependency_spec");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert!(hits[0]
        .evidence
        .iter()
        .any(|e| e.evidence_type == Some(EvidenceType::Absence.paper())));
    assert!(
        hits[0].root_cause.contains("opencv-python"),
        "{}",
        hits[0].root_cause
    );
    // The README's pip line alone is a specification, also in prose.
    let prose = edit(
        &without(&base(), "requirements.txt"),
        "README.md",
        "```bash\npip install -r requirements.txt\n```",
        "* Libraries: `pip install torch numpy opencv-python`.",
    );
    assert!(fired(&run(&prose), "no_dependency_spec").is_empty());
    let readme_only = edit(
        &without(&base(), "requirements.txt"),
        "README.md",
        "pip install -r requirements.txt",
        "pip install torch numpy opencv-python",
    );
    assert!(fired(&run(&readme_only), "no_dependency_spec").is_empty());
    assert!(fired(&run(&base()), "no_dependency_spec").is_empty());
}

#[test]
fn undeclared_import() {
    let broken = edit(
        &base(),
        "model.py",
        "import torch\n",
        "import torch\nimport sklearn.metrics\nfrom PIL import Image\n",
    );
    let f = run(&broken);
    let hits = fired(&f, "undeclared_import");
    let keys: Vec<&str> = hits.iter().map(|h| h.finding_id.as_str()).collect();
    assert_eq!(
        keys,
        ["undeclared_import:pillow", "undeclared_import:scikit-learn"],
        "{:?}",
        rules(&f)
    );
    let sk = hits[1];
    assert_eq!(
        sk.user_symptom,
        "ModuleNotFoundError: No module named 'sklearn'"
    );
    assert_eq!(sk.evidence[0].path, "model.py");
    assert_eq!(sk.evidence[0].line_refs, vec![LineRange::line(2)]);
    // Declared (any PEP 503 spelling) → silent; stdlib, local modules, guarded imports never fire.
    let fixed = with(
        &broken,
        "requirements.txt",
        "torch\nnumpy\nopencv_python\nScikit_Learn==1.0\nPillow\n",
    );
    assert!(fired(&run(&fixed), "undeclared_import").is_empty());
}

#[test]
fn undeclared_import_reads_every_spec_format() {
    let broken = edit(
        &without(&base(), "requirements.txt"),
        "README.md",
        "pip install -r requirements.txt",
        "conda env create -f environment.yml",
    );
    let env = "name: m\ndependencies:\n  - python=3.9\n  - pytorch::pytorch=1.12\n  - numpy\n  - pip:\n    - opencv-python==4.5\n";
    assert!(fired(
        &run(&with(&broken, "environment.yml", env)),
        "undeclared_import"
    )
    .is_empty());
    let setup = "from setuptools import setup\nsetup(name='m', install_requires=['torch>=1', 'numpy', 'opencv-python'])\n";
    assert!(fired(&run(&with(&broken, "setup.py", setup)), "undeclared_import").is_empty());
    let pyproject = "[project]\nname = \"m\"\ndependencies = [\n  \"torch\",\n  \"numpy>=1\",\n  \"opencv-python\",\n]\n";
    assert!(fired(
        &run(&with(&broken, "pyproject.toml", pyproject)),
        "undeclared_import"
    )
    .is_empty());
    let cfg = "[metadata]\nname = m\n\n[options]\ninstall_requires =\n    torch>=1\n    numpy\n    opencv-python\n";
    assert!(fired(&run(&with(&broken, "setup.cfg", cfg)), "undeclared_import").is_empty());
    let pipfile = "[packages]\ntorch = \"*\"\nnumpy = \"*\"\nopencv-python = \"==4.5\"\n";
    assert!(fired(
        &run(&with(&broken, "Pipfile", pipfile)),
        "undeclared_import"
    )
    .is_empty());
    let partial = "[project]\nname = \"m\"\ndependencies = [\"torch\", \"numpy\"]\n";
    let f = run(&with(&broken, "pyproject.toml", partial));
    assert_eq!(fired(&f, "undeclared_import").len(), 1, "{:?}", rules(&f));
}

#[test]
fn missing_script_and_cd() {
    let broken = edit(&base(), "README.md", "python eval.py", "python test.py");
    let f = run(&broken);
    let hits = fired(&f, "missing_script");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert!(hits[0].user_symptom.contains("can't open file 'test.py'"));
    assert!(hits[0]
        .evidence
        .iter()
        .any(|e| e.path == "README.md" && e.line_refs == vec![LineRange::line(18)]));
    assert!(fired(&run(&with(&broken, "test.py", EVAL)), "missing_script").is_empty());
    // `cd src` holds for the rest of the block.
    let cd = edit(
        &base(),
        "README.md",
        "python eval.py --checkpoint checkpoints/model.pth",
        "cd tools\npython run.py",
    );
    assert_eq!(
        fired(&run(&cd), "missing_script")[0].finding_id,
        "missing_script:tools/run.py"
    );
    assert!(fired(
        &run(&with(&cd, "tools/run.py", "print(1)\n")),
        "missing_script"
    )
    .is_empty());
    // A run.py elsewhere: the command lacks a `cd`; reported, ranked low, pointing at it.
    let moved = run(&with(&cd, "scripts/run.py", "print(1)\n"));
    assert!(fired(&moved, "missing_script").is_empty());
    assert!(fired(&moved, "moved_script")[0]
        .root_cause
        .contains("scripts/run.py"));
    // Another project's script (`../other/x.py`) is not this repository's.
    let other = edit(
        &base(),
        "README.md",
        "python eval.py",
        "python ../other-repo/eval.py",
    );
    assert!(fired(&run(&other), "missing_script").is_empty());
}

#[test]
fn missing_module() {
    let broken = edit(
        &base(),
        "README.md",
        "python eval.py",
        "python -m pkg.evaluate",
    );
    let broken = with(&broken, "pkg/__init__.py", "");
    let f = run(&broken);
    assert_eq!(fired(&f, "missing_script").len(), 1, "{:?}", rules(&f));
    assert!(fired(
        &run(&with(&broken, "pkg/evaluate.py", EVAL)),
        "missing_script"
    )
    .is_empty());
}

#[test]
fn unknown_flag() {
    let broken = edit(&base(), "README.md", "--lr 0.001", "--learning_rate 0.001");
    let f = run(&broken);
    let hits = fired(&f, "unknown_flag");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert!(
        hits[0]
            .user_symptom
            .contains("unrecognized arguments: --learning_rate"),
        "{}",
        hits[0].user_symptom
    );
    // Prefixes argparse accepts, and scripts that do not use argparse, are not flagged.
    assert!(fired(
        &run(&edit(&base(), "README.md", "--lr 0.001", "--batch 3")),
        "unknown_flag"
    )
    .is_empty());
    // Click spells its error differently; `--max_images` is not `--max-images`.
    let click = "import click\n\n@click.command()\n@click.option('--max-images', type=int)\ndef main(max_images):\n    pass\n";
    let click = edit(
        &with(&base(), "tool.py", click),
        "README.md",
        "## Training",
        "```\npython tool.py --max_images=10\n```\n## Training",
    );
    let f = run(&click);
    assert_eq!(
        fired(&f, "unknown_flag")[0].user_symptom,
        "Error: No such option: --max_images"
    );
    assert!(fired(
        &run(&edit(&click, "README.md", "--max_images", "--max-images")),
        "unknown_flag"
    )
    .is_empty());
    let known = edit(
        &broken,
        "train.py",
        "parser.parse_args()",
        "parser.parse_known_args()[0]",
    );
    assert!(fired(&run(&known), "unknown_flag").is_empty());
}

#[test]
fn missing_checkpoint_config_and_data() {
    let no_link = edit(
        &base(),
        "README.md",
        "Pretrained weights: download https://example.org/model.pth into checkpoints/.",
        "",
    );
    let f = run(&no_link);
    let hits = fired(&f, "missing_checkpoint");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert_eq!(
        hits[0].finding_id,
        "missing_checkpoint:checkpoints/model.pth"
    );
    assert!(f
        .missing_or_ambiguous_artifacts
        .iter()
        .any(|a| matches!(a, Artifact::Item(i) if i.artifact == "checkpoints/model.pth")));
    // Released in the tree → silent.
    assert!(fired(
        &run(&with(&no_link, "checkpoints/model.pth", "weights")),
        "missing_checkpoint"
    )
    .is_empty());

    let cfg = edit(&base(), "train.py", "default=\"cifar10\")", "default=\"cifar10\")\n    parser.add_argument(\"--config\", default=\"configs/base.yaml\")");
    let cfg = edit(
        &cfg,
        "README.md",
        "--epochs 100",
        "--epochs 100 --config configs/cifar.yaml",
    );
    let f = run(&cfg);
    let keys: Vec<&str> = fired(&f, "missing_config")
        .iter()
        .map(|h| h.finding_id.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "missing_config:configs/base.yaml",
            "missing_config:configs/cifar.yaml"
        ],
        "{:?}",
        rules(&f)
    );
    let fixed = with(
        &with(&cfg, "configs/base.yaml", "lr: 0.001\n"),
        "configs/cifar.yaml",
        "_base_: base.yaml\n",
    );
    assert!(fired(&run(&fixed), "missing_config").is_empty());

    let data = edit(
        &base(),
        "README.md",
        "Download the dataset from https://example.org/data.zip into `data/`.",
        "",
    );
    let data = with(&data, "configs/base.yaml", "data_root: datasets/cifar\n");
    let f = run(&data);
    assert_eq!(fired(&f, "missing_data").len(), 1, "{:?}", rules(&f));
    assert!(fired(
        &run(&with(&data, "datasets/cifar/README.md", "x")),
        "missing_data"
    )
    .is_empty());
}

#[test]
fn hardcoded_path() {
    let broken = edit(
        &base(),
        "train.py",
        "import cv2\n",
        "import cv2\nDATA = \"/home/alice/datasets/cifar\"\n",
    );
    let broken = with(
        &broken,
        "configs/a.yaml",
        "root: /home/alice/datasets/cifar\nout: /home/alice/out\n",
    );
    let f = run(&broken);
    let hits = fired(&f, "hardcoded_path");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert_eq!(hits[0].finding_id, "hardcoded_path:/home/alice");
    assert_eq!(hits[0].evidence.len(), 2);
    assert_eq!(
        hits[0].evidence[0].line_refs,
        vec![LineRange::line(1), LineRange::line(2)]
    );
    assert!(hits[0].user_symptom.contains("/home/alice/datasets/cifar"));
    // The comment in the clean train.py mentions /home/alice: comments are not code.
    let fixed = edit(
        &without(&broken, "configs/a.yaml"),
        "train.py",
        "\"/home/alice/datasets/cifar\"",
        "\"datasets/cifar\"",
    );
    assert!(fired(&run(&fixed), "hardcoded_path").is_empty());
    for path in [
        "C:\\\\Users\\\\bob\\\\data",
        "/scratch/bob/x",
        "/mnt/nas/data",
    ] {
        let other = edit(
            &base(),
            "model.py",
            "import torch\n",
            &format!("import torch\nP = \"{path}\"\n"),
        );
        assert_eq!(fired(&run(&other), "hardcoded_path").len(), 1, "{path}");
    }
}

#[test]
fn cuda_only() {
    let broken = edit(&base(), "model.py", "return x", "return x.cuda()");
    let f = run(&broken);
    let hits = fired(&f, "cuda_only");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert_eq!(hits[0].evidence[0].path, "model.py");
    let guarded = edit(
        &broken,
        "model.py",
        "return x.cuda()",
        "return x.cuda() if torch.cuda.is_available() else x",
    );
    assert!(fired(&run(&guarded), "cuda_only").is_empty());
    let device = edit(&base(), "model.py", "return x", "return x.to(\"cuda:0\")");
    assert_eq!(fired(&run(&device), "cuda_only").len(), 1);
}

#[test]
fn missing_entry_points() {
    let no_train = edit(
        &without(&base(), "train.py"),
        "README.md",
        "python train.py --lr 0.001 --epochs 100",
        "",
    );
    let f = run(&no_train);
    assert_eq!(fired(&f, "missing_train_entry").len(), 1, "{:?}", rules(&f));
    // A training loop in a file of another name is training code.
    let renamed = with(&no_train, "main.py", TRAIN);
    assert!(fired(&run(&renamed), "missing_train_entry").is_empty());

    let no_eval = edit(
        &without(&base(), "eval.py"),
        "README.md",
        "python eval.py --checkpoint checkpoints/model.pth",
        "",
    );
    let f = run(&no_eval);
    assert_eq!(fired(&f, "missing_eval_entry").len(), 1, "{:?}", rules(&f));
    assert!(fired(&run(&base()), "missing_eval_entry").is_empty());
    // Nothing said about training, nothing missing.
    assert!(fired(
        &run_paper(
            &edit(&no_train, "README.md", "## Training", "## Usage"),
            None
        ),
        "missing_train_entry"
    )
    .is_empty());
}

#[test]
fn coming_soon() {
    let broken = edit(&base(), "README.md", "## Install", "## TODO\n- [x] Release inference code\n- [ ] Release training code\n\nPretrained models are coming soon.\n\n## Install");
    let f = run(&broken);
    let keys: Vec<&str> = fired(&f, "coming_soon")
        .iter()
        .map(|h| h.finding_id.as_str())
        .collect();
    assert_eq!(
        keys,
        ["coming_soon:checkpoints", "coming_soon:training code"],
        "{:?}",
        rules(&f)
    );
    let ck = fired(&f, "coming_soon")[0];
    assert_eq!(ck.category, Some(crate::findings::Category::ModelWeights));
    assert_eq!(ck.extra["reprorun_category"], "missing_checkpoint");
    assert_eq!(ck.issue_title, "When will the checkpoints be released?");
    assert!(fired(&run(&base()), "coming_soon").is_empty());
}

#[test]
fn lfs_pointers_and_submodules() {
    let pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 104857600\n";
    let broken = with(&base(), "checkpoints/model.pth", pointer);
    let f = run(&broken);
    let hits = fired(&f, "lfs_pointer");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert_eq!(
        f.findings[0].finding_id, "lfs_pointer:git-lfs",
        "the highest prior ranks first"
    );
    assert_eq!(
        hits[0].user_symptom,
        "_pickle.UnpicklingError: invalid load key, 'v'."
    );
    assert_eq!(overall(&f), Overall::UnlikelyReproducible);
    assert!(fired(
        &run(&with(&base(), "checkpoints/model.pth", "real weights")),
        "lfs_pointer"
    )
    .is_empty());

    let gm = "[submodule \"third_party/lib\"]\n\tpath = third_party/lib\n\turl = https://github.com/x/lib\n";
    let sub = with(&base(), ".gitmodules", gm);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &sub);
    fs::create_dir_all(dir.path().join("third_party/lib")).unwrap();
    let f = audit(dir.path(), None);
    assert_eq!(
        f.findings
            .iter()
            .filter(|x| x.finding_id == "empty_submodule:third_party/lib")
            .count(),
        1
    );
    let told = edit(
        &sub,
        "README.md",
        "## Install",
        "## Install\ngit clone --recursive https://github.com/x/m\n",
    );
    assert!(fired(&run(&told), "empty_submodule").is_empty());
    // Missing entirely also counts.
    assert_eq!(fired(&run(&sub), "empty_submodule").len(), 1);
}

#[test]
fn paper_hyperparameters() {
    let f = run_paper(
        &base(),
        Some(&PAPER.replace("learning rate of 0.001", "learning rate of 1e-2")),
    );
    let hits = fired(&f, "hyperparameter_mismatch");
    assert_eq!(hits.len(), 1, "{:?}", rules(&f));
    assert!(
        hits[0].issue_title.contains("0.01"),
        "{}",
        hits[0].issue_title
    );
    assert_eq!(
        hits[0].evidence[0].evidence_type,
        Some(EvidenceType::Paper.paper())
    );
    assert_eq!(hits[0].evidence[0].line_refs, vec![LineRange::line(3)]);
    assert!(fired(&run(&base()), "hyperparameter_mismatch").is_empty());
    let unset = edit(
        &base(),
        "train.py",
        "    parser.add_argument(\"--batch_size\", type=int, default=64)\n",
        "",
    );
    let f = run(&unset);
    assert_eq!(
        fired(&f, "hyperparameter_unset").len(),
        1,
        "{:?}",
        rules(&f)
    );
}

#[test]
fn paper_datasets_and_metrics() {
    let paper = format!("{PAPER}\nWe also evaluate on ImageNet and report FID.\nImageNet FID scores are in Table 2.\n");
    let f = run_paper(&base(), Some(&paper));
    assert_eq!(
        fired(&f, "paper_dataset")
            .iter()
            .map(|h| h.finding_id.as_str())
            .collect::<Vec<_>>(),
        ["paper_dataset:ImageNet"]
    );
    assert_eq!(fired(&f, "paper_metric").len(), 1, "{:?}", rules(&f));
    let fixed = with(
        &with(&base(), "data/imagenet.py", "# loader\n"),
        "metrics/fid.py",
        "def fid(a, b):\n    return 0\n",
    );
    let f = run_paper(&fixed, Some(&paper));
    assert!(
        fired(&f, "paper_dataset").is_empty() && fired(&f, "paper_metric").is_empty(),
        "{:?}",
        rules(&f)
    );
    // No paper, no paper rules.
    assert!(run_paper(&base(), None).findings.is_empty());
}

#[test]
fn ranking_follows_the_priors() {
    let broken = edit(&base(), "model.py", "return x", "return x.cuda()");
    let broken = edit(&broken, "README.md", "python eval.py", "python test.py");
    let broken = with(
        &broken,
        "checkpoints/model.pth",
        "version https://git-lfs.github.com/spec/v1\n",
    );
    let f = run(&broken);
    assert_eq!(rules(&f), ["lfs_pointer", "missing_script", "cuda_only"]);
    assert!(f.findings[0].rank_reason.contains("prior 92"));
}

#[test]
fn findings_are_capped() {
    let mut files = base();
    for i in 0..80 {
        files = edit(
            &files,
            "README.md",
            "## Install",
            &format!("## Install\n```\npython missing_{i:02}.py\n```\n"),
        );
    }
    let f = run(&files);
    assert_eq!(f.findings.len(), MAX_FINDINGS);
}

#[test]
fn odd_trees_do_not_panic() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, &base());
    fs::write(root.join("weights.bin"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
    fs::write(root.join("latin1.py"), b"import caf\xe9\n").unwrap();
    fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"bad\xffname.py")),
        "import x\n",
    )
    .unwrap();
    let mut big = "import hugepkg\n".repeat(10);
    big.push_str(&"x = 1\n".repeat(200_000));
    fs::write(root.join("big.py"), big).unwrap();
    std::os::unix::fs::symlink(".", root.join("loop")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", root.join("dangling.py")).unwrap();
    let mut deep = root.to_path_buf();
    for i in 0..40 {
        deep = deep.join(format!("d{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("deep.py"), "import deeppkg\n").unwrap();
    fs::write(
        root.join("unterminated.py"),
        "s = '''never closed\nimport inside_string\n",
    )
    .unwrap();
    fs::write(root.join("empty.py"), "").unwrap();
    let f = audit(
        root,
        Some("\u{0}\u{feff} learning rate of 1e-9999 and batch size of 99999999999999999999"),
    );
    let json = f.to_json();
    validate(json.as_bytes()).unwrap();
    assert_eq!(audit(root, None).to_json(), audit(root, None).to_json());
    let text = json.to_lowercase();
    for never in ["hugepkg", "deeppkg", "inside_string", "caf"] {
        assert!(!text.contains(never), "{never} must not be read");
    }
}

#[test]
fn empty_and_missing_roots() {
    let dir = tempfile::tempdir().unwrap();
    let f = audit(dir.path(), Some(PAPER));
    assert_eq!(overall(&f), Overall::Unknown);
    let f = audit(&dir.path().join("absent"), None);
    assert!(f.findings.is_empty());
}

#[test]
fn helpers() {
    assert!(
        stdlib::STDLIB.windows(2).all(|w| w[0] < w[1]),
        "STDLIB must stay sorted"
    );
    assert_eq!(stdlib::normalize("Scikit__Learn.x"), "scikit-learn-x");
    assert_eq!(stdlib::distributions("cv2")[0], "opencv-python");
    for (line, want) in [
        ("torch>=1.8 # comment", Some("torch")),
        ("-e git+https://github.com/a/b.git#egg=bee", Some("bee")),
        ("git+https://github.com/openai/CLIP.git", Some("CLIP")),
        ("pkg @ https://x/y.whl", Some("pkg")),
        ("-r other.txt", None),
        ("opencv-python[contrib]==4", Some("opencv-python")),
    ] {
        assert_eq!(python::requirement_name(line).as_deref(), want, "{line}");
    }
    assert_eq!(
        python::install_line("pip install -U torch 'numpy<2' -r r.txt"),
        ["torch", "numpy"]
    );
    let toks = pylex::lex("import a.b as c, d\nfrom e.f import g\nfrom . import h\ntry:\n    import i\nexcept ImportError:\n    import j\nx = '''\nimport k\n'''\n");
    let mods: Vec<(String, bool)> = pylex::imports(&toks)
        .into_iter()
        .map(|(m, _, g)| (m, g))
        .collect();
    let want: Vec<(String, bool)> = [
        ("a", false),
        ("d", false),
        ("e", false),
        ("i", true),
        ("j", true),
    ]
    .iter()
    .map(|(m, g)| (m.to_string(), *g))
    .collect();
    assert_eq!(mods, want);
    let defs = pylex::flag_defs(&pylex::lex("p.add_argument('--lr', '-l', type=float, default=-1e-3)\nflags.DEFINE_integer('steps', 10, 'help')\n"));
    assert_eq!(defs[0].flags, ["--lr", "-l"]);
    assert_eq!(defs[0].default.as_deref(), Some("-1e-3"));
    assert_eq!(defs[1].flags, ["--steps"]);
    assert_eq!(defs[1].default.as_deref(), Some("10"));
    for (s, v) in [
        ("0.001", 1e-3),
        ("1e-4,", 1e-4),
        ("3 × 10^-4", 3e-4),
        ("10^{-5}", 1e-5),
        ("1,000 ", 1000.0),
        ("64.", 64.0),
    ] {
        let (got, _) = paper::number(s).unwrap();
        assert!((got - v).abs() < 1e-12, "{s}: {got}");
    }
    let vals = paper::paper_values("lr = 3e-4; a batch size of 256 and 90 training epochs.\nlearning rate decay of 0.1 at 30 epochs (2 GPUs).");
    let got: Vec<(&str, Vec<f64>)> = vals
        .iter()
        .map(|(k, v)| (*k, v.iter().map(|x| x.0).collect()))
        .collect();
    assert_eq!(
        got,
        [
            ("batch size", vec![256.0]),
            ("epochs", vec![90.0, 30.0]),
            ("learning rate", vec![3e-4])
        ]
    );
    assert_eq!(
        tree::join("a/b", "../c/./d.py").as_deref(),
        Some("a/c/d.py")
    );
    assert_eq!(tree::join("", "../x"), None);
}

#[test]
fn rule_table_is_in_order_and_documented() {
    let doc = include_str!("../builtin.rs");
    let mut codes = std::collections::BTreeSet::new();
    for (i, row) in RULES.iter().enumerate() {
        assert_eq!(row.rule as usize, i, "{}", row.code);
        assert!(codes.insert(row.code), "duplicate code {}", row.code);
        let line = format!("|    {} | `{}`", row.prior, row.code);
        assert!(doc.contains(&line), "the module docs' table lacks {line:?}");
    }
    assert!(
        RULES.windows(2).all(|w| w[0].prior > w[1].prior),
        "priors strictly decrease"
    );
}

// Issue 46 §3: the built-in auditor on real code.

#[test]
fn packages_that_arrive_with_a_declared_one_are_not_undeclared() {
    // torchvision brings numpy and pillow; transformers brings filelock; tensorflow brings six.
    let files = with(
        &edit(
            &base(),
            "model.py",
            "import torch\n",
            "import torch\nimport numpy\nfrom PIL import Image\nimport filelock\nimport six\n",
        ),
        "requirements.txt",
        "torch\ntorchvision\ntransformers\ntensorflow\nopencv-python\n",
    );
    let f = run(&files);
    assert!(fired(&f, "undeclared_import").is_empty(), "{:?}", rules(&f));
    // Without their carriers they are undeclared (numpy still arrives with opencv-python,
    // filelock with torch).
    let bare = with(&files, "requirements.txt", "torch\nopencv-python\n");
    let keys: Vec<String> = fired(&run(&bare), "undeclared_import")
        .iter()
        .map(|h| h.finding_id.clone())
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for want in ["pillow", "six"] {
        assert!(
            keys.contains(&format!("undeclared_import:{want}")),
            "{keys:?}"
        );
    }
}

#[test]
fn imports_inside_if_blocks_and_functions_are_optional() {
    let files = edit(
        &base(),
        "model.py",
        "import torch\n",
        "import torch\n\nif torch.cuda.is_available():\n    import apex\n\n\ndef plot(x):\n    import seaborn\n    return seaborn.lineplot(x)\n\n\nclass Logger:\n    def start(self):\n        with open('x') as f:\n            import wandb\n\n\nif __name__ == \"__main__\":\n    import fire\n",
    );
    let keys: Vec<String> = fired(&run(&files), "undeclared_import")
        .iter()
        .map(|h| h.finding_id.clone())
        .collect();
    assert_eq!(
        keys,
        ["undeclared_import:fire"],
        "the main block is not optional"
    );
}

#[test]
fn vendored_third_party_code_is_not_audited_as_the_papers() {
    let files = with(
        &with(
            &with(
                &base(),
                "eval/lmms-eval/pyproject.toml",
                "[project]\nname = \"lmms_eval\"\ndependencies = [\"editdistance\"]\n",
            ),
            "eval/lmms-eval/lmms_eval/tasks/utils.py",
            "import editdistance\nimport sacrebleu\nDATA = '/home/someone/data'\n",
        ),
        "guided_diffusion/.ipynb_checkpoints/train_util-checkpoint.py",
        "import blobfile\n",
    );
    let f = run(&files);
    for rule in ["undeclared_import", "hardcoded_path"] {
        let hits: Vec<&str> = fired(&f, rule)
            .iter()
            .map(|h| h.finding_id.as_str())
            .collect();
        assert!(
            !hits.iter().any(|h| h.contains("sacrebleu")
                || h.contains("editdistance")
                || h.contains("blobfile")
                || h.contains("/home/someone")),
            "{hits:?}"
        );
    }
    // The paper's own code importing the same package is still audited.
    let own = with(&files, "metrics.py", "import sacrebleu\n");
    assert_eq!(
        fired(&run(&own), "undeclared_import")
            .iter()
            .map(|h| h.finding_id.as_str())
            .collect::<Vec<_>>(),
        ["undeclared_import:sacrebleu"]
    );
}

#[test]
fn hyper_parameters_set_in_shell_scripts_and_flow_mappings_count() {
    let paper = "# A Method\n\nWe train with a learning rate of 2e-4 and a batch size of 50.\n";
    // No Python default; run_train.sh and configs.yaml set both, differently from the paper.
    let files = with(
        &with(
            &edit(
                &edit(&base(), "train.py", "default=0.001)", ")"),
                "train.py",
                "\"--batch_size\", type=int, default=64)",
                "\"--batch_size\", type=int)",
            ),
            "scripts/run_train.sh",
            "#!/bin/bash\nLR=0.0006\npython train.py \\\n    --learning_rate 5e-5 \\\n    --epochs 100\n",
        ),
        "configs.yaml",
        "defaults:\n  dataset: {batch: 16, length: 50}\n  model_opt.lr: 1e-4\n",
    );
    let f = run_paper(&files, Some(paper));
    let mut mism: Vec<&str> = fired(&f, "hyperparameter_mismatch")
        .iter()
        .map(|h| h.finding_id.as_str())
        .collect();
    mism.sort();
    assert_eq!(
        mism,
        [
            "hyperparameter_mismatch:batch size",
            "hyperparameter_mismatch:learning rate"
        ],
        "{:?}",
        rules(&f)
    );
    assert!(fired(&f, "hyperparameter_unset").is_empty());
    // A script that sets the paper's value settles it.
    let agree = with(
        &files,
        "scripts/run_paper.sh",
        "python train.py --lr 2e-4 --batch_size 50\n",
    );
    assert!(fired(&run_paper(&agree, Some(paper)), "hyperparameter_mismatch").is_empty());
}

#[test]
fn a_readme_that_mentions_jax_in_prose_does_not_declare_it() {
    let files = with(
        &edit(
            &base(),
            "model.py",
            "import torch\n",
            "import torch\nimport jax\n",
        ),
        "README.md",
        &format!("{README}\nOur JAX implementation of the sampler is much faster.\n"),
    );
    let keys: Vec<String> = fired(&run(&files), "undeclared_import")
        .iter()
        .map(|h| h.finding_id.clone())
        .collect();
    assert_eq!(keys, ["undeclared_import:jax"]);
    // A requirements list in the README does declare it.
    let listed = with(
        &files,
        "README.md",
        &format!("{README}\n## Requirements\n- jax 0.4\n"),
    );
    assert!(fired(&run(&listed), "undeclared_import").is_empty());
}
