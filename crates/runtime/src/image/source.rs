//! The input of `image import`: an OCI layout directory, or a tar archive (an OCI layout or
//! a `docker save`, optionally gzip-compressed) unpacked first — regular files only, every
//! name checked — into the import's private directory.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::extract::{normalize, Limits};
use super::ImageError;

/// Files of the input, by their path inside it.
pub struct Source {
    /// What the user named (for messages).
    pub input: PathBuf,
    root: PathBuf,
    /// Symbolic and hard links of an archive (older `docker save` links repeated layers).
    aliases: HashMap<PathBuf, PathBuf>,
}

impl Source {
    /// Opens `input`: a directory is read in place; a file is unpacked into `scratch`.
    pub fn open(input: &Path, scratch: &Path, limits: Limits) -> Result<Source, ImageError> {
        let meta = std::fs::metadata(input).map_err(|e| ImageError::Input {
            path: input.to_path_buf(),
            detail: e.to_string(),
        })?;
        if meta.is_dir() {
            return Ok(Source {
                input: input.to_path_buf(),
                root: input.to_path_buf(),
                aliases: HashMap::new(),
            });
        }
        let mut source = Source {
            input: input.to_path_buf(),
            root: scratch.to_path_buf(),
            aliases: HashMap::new(),
        };
        source.unpack(limits)?;
        Ok(source)
    }

    fn unpack(&mut self, limits: Limits) -> Result<(), ImageError> {
        let bad = |detail: String| ImageError::Input {
            path: self.input.clone(),
            detail,
        };
        let file = File::open(&self.input).map_err(|e| bad(e.to_string()))?;
        let mut reader = BufReader::new(file);
        let magic = {
            use std::io::BufRead;
            reader.fill_buf().map_err(|e| bad(e.to_string()))?.to_vec()
        };
        let stream: Box<dyn Read> = if magic.starts_with(&[0x1f, 0x8b]) {
            Box::new(flate2::read::MultiGzDecoder::new(reader))
        } else {
            Box::new(reader)
        };
        let mut archive = tar::Archive::new(stream.take(limits.max_bytes));
        let mut count = 0u64;
        let entries = archive
            .entries()
            .map_err(|e| bad(format!("not a tar archive: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad(format!("read archive: {e}")))?;
            count += 1;
            if count > limits.max_entries {
                return Err(bad(format!("more than {} entries", limits.max_entries)));
            }
            let raw = entry.path_bytes().into_owned();
            let shown = String::from_utf8_lossy(&raw).into_owned();
            let rel = match normalize(&raw, &shown) {
                Ok(Some(rel)) => rel,
                Ok(None) => continue,
                Err(e) => return Err(bad(format!("archive member {e}"))),
            };
            use tar::EntryType as T;
            match entry.header().entry_type() {
                T::Regular | T::Continuous => {
                    let dest = self.root.join(&rel);
                    if let Some(parent) = dest.parent() {
                        std::fs::create_dir_all(parent)
                            .map_err(|e| bad(format!("{}: {e}", rel.display())))?;
                    }
                    let mut out =
                        File::create(&dest).map_err(|e| bad(format!("{}: {e}", rel.display())))?;
                    std::io::copy(&mut entry, &mut out)
                        .map_err(|e| bad(format!("{}: {e}", rel.display())))?;
                }
                T::Symlink | T::Link => {
                    let kind = entry.header().entry_type();
                    let target = entry
                        .link_name_bytes()
                        .map(|t| t.into_owned())
                        .unwrap_or_default();
                    let base = if kind == T::Symlink {
                        rel.parent().unwrap_or(Path::new("")).to_path_buf()
                    } else {
                        PathBuf::new()
                    };
                    let resolved = lexical(&base, Path::new(std::ffi::OsStr::from_bytes(&target)))
                        .ok_or_else(|| {
                            bad(format!(
                                "archive member {shown}: its link leads outside the archive"
                            ))
                        })?;
                    self.aliases.insert(rel, resolved);
                }
                _ => {} // directories are implied; nothing else is part of an image archive
            }
        }
        Ok(())
    }

    /// The path of one file of the input (`rel` uses `/`, never `..`).
    pub fn path(&self, rel: &str) -> Result<PathBuf, ImageError> {
        let missing = || ImageError::Format {
            what: self.input.display().to_string(),
            detail: format!("{rel} is missing"),
        };
        let mut rel = match normalize(rel.as_bytes(), rel) {
            Ok(Some(r)) => r,
            _ => {
                return Err(ImageError::Format {
                    what: self.input.display().to_string(),
                    detail: format!("{rel:?} is not a path inside the image"),
                })
            }
        };
        for _ in 0..16 {
            match self.aliases.get(&rel) {
                Some(next) => rel = next.clone(),
                None => {
                    let path = self.root.join(&rel);
                    return if path.is_file() {
                        Ok(path)
                    } else {
                        Err(missing())
                    };
                }
            }
        }
        Err(missing())
    }

    pub fn has(&self, rel: &str) -> bool {
        self.path(rel).is_ok()
    }
}

/// `base/link` resolved by name only; `None` if it climbs out.
fn lexical(base: &Path, link: &Path) -> Option<PathBuf> {
    let mut out = if link.is_absolute() {
        PathBuf::new()
    } else {
        base.to_path_buf()
    };
    for part in link.components() {
        match part {
            // Popping is the point of the guard: `..` climbs one level, or out.
            Component::ParentDir if !out.pop() => return None,
            Component::Normal(p) => out.push(p),
            _ => {}
        }
    }
    Some(out)
}
