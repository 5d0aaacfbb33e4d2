//! The effects beside the API: a repository's mirror clone (made once, then fetched into),
//! and a paper stored once under its content's sha256, with its text when `pdftotext` is
//! installed. Neither is given the token: clones and paper downloads are anonymous.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::papers::PaperSource;
use super::CollectError;
use reprorun_pipeline::store::sha256_hex;

fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("failed")
        .to_string()
}

fn git(args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let out = Command::new("git")
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/true")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(last_line(&out.stderr))
    }
}

/// `git clone --mirror URL DEST` into `DEST.partial` then renamed (a clone cut short by a
/// kill is made again); an existing mirror is fetched into (`fetch --prune`).
pub(crate) fn mirror(url: &str, dest: &Path, repo: &str) -> Result<(), CollectError> {
    let fail = |reason: String| CollectError::Clone {
        repo: repo.to_string(),
        reason,
    };
    if dest.join("HEAD").is_file() {
        return git(&[
            "--git-dir".as_ref(),
            dest.as_os_str(),
            "fetch".as_ref(),
            "--prune".as_ref(),
            "--quiet".as_ref(),
            "origin".as_ref(),
        ])
        .map_err(|e| fail(format!("fetch into {}: {e}", dest.display())));
    }
    let mut partial = dest.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let _ = std::fs::remove_dir_all(&partial);
    git(&[
        "clone".as_ref(),
        "--mirror".as_ref(),
        "--quiet".as_ref(),
        url.as_ref(),
        partial.as_os_str(),
    ])
    .map_err(|e| fail(format!("git clone --mirror {url}: {e}")))?;
    std::fs::rename(&partial, dest)
        .map_err(|e| fail(format!("rename into {}: {e}", dest.display())))
}

/// A stored paper: the file the pair names (relative to the output), and the PDF's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Paper {
    /// `papers/SHA.txt` when the text was extracted, else the paper itself.
    pub(crate) file: String,
    pub(crate) pdf: Option<String>,
}

/// The kind of a paper's bytes: a PDF by its magic, else by the name's extension.
pub(crate) fn paper_kind(bytes: &[u8], name: &str) -> Option<&'static str> {
    if bytes.starts_with(b"%PDF-") {
        return Some("pdf");
    }
    let name = name.split(['?', '#']).next().unwrap_or_default();
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "md" | "markdown" => Some("md"),
        "txt" | "text" => Some("txt"),
        _ => None,
    }
}

/// Stores the paper under `out/papers/` (once per URL: `.cache/papers/` remembers which file
/// a URL gave) and extracts a PDF's text beside it.
pub(crate) fn paper(out: &Path, paper_id: &str, src: &PaperSource) -> Result<Paper, CollectError> {
    let fail = |reason: String| CollectError::Paper {
        paper_id: paper_id.to_string(),
        reason,
    };
    let dir = out.join("papers");
    let remembered = out.join(".cache").join("papers");
    for d in [&dir, &remembered] {
        std::fs::create_dir_all(d).map_err(|e| fail(format!("{}: {e}", d.display())))?;
    }
    let (bytes, name, memo) = match src {
        PaperSource::Path(p) => {
            let bytes = std::fs::read(p).map_err(|e| fail(format!("{}: {e}", p.display())))?;
            (bytes, p.to_string_lossy().into_owned(), None)
        }
        PaperSource::Url(u) => {
            let memo = remembered.join(sha256_hex(u.as_bytes()));
            let known = std::fs::read_to_string(&memo).ok();
            match known.filter(|f| dir.join(f.trim()).is_file()) {
                Some(f) => return finish(&dir, f.trim()),
                None => (download(u).map_err(fail)?, u.clone(), Some(memo)),
            }
        }
    };
    let kind = paper_kind(&bytes, &name)
        .ok_or_else(|| fail(format!("{name}: not a PDF, Markdown or text file")))?;
    let file = format!("{}.{kind}", sha256_hex(&bytes));
    let dest = dir.join(&file);
    if !dest.is_file() {
        reprorun_runtime::sys::write_atomic(&dest, &bytes, 0o644)
            .map_err(|e| fail(format!("{}: {e}", dest.display())))?;
    }
    if let Some(memo) = memo {
        reprorun_runtime::sys::write_atomic(&memo, file.as_bytes(), 0o644)
            .map_err(|e| fail(format!("{}: {e}", memo.display())))?;
    }
    finish(&dir, &file)
}

/// The pair's view of a stored paper: a PDF's text beside it when `pdftotext` makes one.
fn finish(dir: &Path, file: &str) -> Result<Paper, CollectError> {
    if !file.ends_with(".pdf") {
        return Ok(Paper {
            file: format!("papers/{file}"),
            pdf: None,
        });
    }
    let txt = file.replace(".pdf", ".txt");
    let have = dir.join(&txt).is_file() || pdftotext(&dir.join(file), &dir.join(&txt));
    Ok(Paper {
        file: format!("papers/{}", if have { &txt } else { file }),
        pdf: Some(format!("papers/{file}")),
    })
}

/// `pdftotext PDF TXT` into a temporary name, renamed; false when it is not installed or fails.
fn pdftotext(pdf: &Path, txt: &Path) -> bool {
    let mut tmp = txt.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let ok = Command::new("pdftotext")
        .arg("-enc")
        .arg("UTF-8")
        .arg(pdf)
        .arg(&tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok && tmp.is_file() && std::fs::rename(&tmp, txt).is_ok()
}

/// `curl -fsSL URL` (no token: papers live on other hosts).
fn download(url: &str) -> Result<Vec<u8>, String> {
    let out = Command::new("curl")
        .args(["-fsSL", "--retry", "2", "--connect-timeout", "20"])
        .args(["--max-time", "600", "--config", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            if let Some(mut stdin) = child.stdin.take() {
                use std::io::Write;
                let url = url.replace(['\\', '"'], "");
                stdin.write_all(format!("url = \"{url}\"\n").as_bytes())?;
            }
            child.wait_with_output()
        })
        .map_err(|e| format!("run curl: {e}"))?;
    if !out.status.success() {
        return Err(format!("download {url}: {}", last_line(&out.stderr)));
    }
    Ok(out.stdout)
}
