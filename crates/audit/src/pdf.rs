//! A PDF paper's text, by `pdftotext` (poppler-utils): the built-in auditor reads text, and
//! a paper given as a PDF would otherwise reach it as nothing. The PDF is untrusted input:
//! this runs where the agent runs, inside its sandbox (`audit agent-builtin`), never in the
//! study's host process, bounded in time and in the bytes read back.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

/// The longest `pdftotext` may take.
pub(crate) const LIMIT: Duration = Duration::from_secs(120);
/// The most text kept (16 MiB: a long paper's text is under 1 MiB).
pub(crate) const MAX_TEXT: u64 = 16 << 20;

/// Why a PDF's text could not be had; each is one line.
#[derive(Debug, Error)]
pub(crate) enum PdfError {
    #[error("pdftotext is not installed (Debian: poppler-utils)")]
    NotInstalled,
    #[error("pdftotext: {0}")]
    Start(std::io::Error),
    #[error("pdftotext took over {0:?}; stopped")]
    TimedOut(Duration),
    #[error("pdftotext failed ({0}): the PDF is unreadable")]
    Failed(std::process::ExitStatus),
}

/// Whether `bytes` start as a PDF does.
pub(crate) fn is_pdf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"%PDF-")
}

/// The text of the PDF at `path` (UTF-8, pages in order, at most [`MAX_TEXT`] bytes).
pub(crate) fn text(path: &Path) -> Result<String, PdfError> {
    let mut child = Command::new("pdftotext")
        .args(["-q", "-enc", "UTF-8"])
        .arg(path)
        .arg("-")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => PdfError::NotInstalled,
            _ => PdfError::Start(e),
        })?;
    let out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(out) = out {
            // A read error leaves what was read; the status decides.
            let _ = out.take(MAX_TEXT).read_to_end(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        match child.try_wait().map_err(PdfError::Start)? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PdfError::TimedOut(LIMIT));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let bytes = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(PdfError::Failed(status));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pdf_magic_is_a_pdf() {
        assert!(is_pdf(b"%PDF-1.4\n"));
        assert!(!is_pdf(b"# A paper"));
        assert!(!is_pdf(b""));
    }

    #[test]
    fn an_unreadable_pdf_is_one_line() {
        if !Path::new("/usr/bin/pdftotext").exists() {
            reprorun_runtime::util::skip_test(
                "an_unreadable_pdf_is_one_line",
                "pdftotext is not installed (.ci/setup installs poppler-utils)",
            );
            return;
        }
        let dir = std::env::temp_dir().join(format!("rr-pdf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.pdf");
        std::fs::write(&bad, b"%PDF-1.4\nnot really").unwrap();
        let e = text(&bad).unwrap_err();
        assert!(matches!(e, PdfError::Failed(_)), "{e}");
        assert!(!e.to_string().contains('\n'));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
