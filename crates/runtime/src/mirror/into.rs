//! `mirror pull --into DIR`: adds to an existing mirror what the requirements need and it
//! lacks, at the mirror's own date (a mirror holds one date: another is refused). The pull
//! goes to a directory beside DIR first; only files DIR does not have are copied in, then
//! the lock and index are rewritten.

use std::path::Path;

use super::pull::{pull, PullOpts};
use super::{io, read_lock, rfc3339, write, Lock, MirrorError, FILES_DIR};

/// Pulls `o` (its `out` ignored) into the mirror `into`; returns the new lock and how many
/// files were added.
pub(crate) fn pull_into_existing(o: PullOpts, into: &Path) -> Result<(Lock, usize), MirrorError> {
    let mut lock = read_lock(into)?;
    let want = rfc3339(o.date);
    if lock.date.as_deref() != Some(want.as_str()) {
        return Err(MirrorError::Pull(format!(
            "--into {}: the mirror is cut at {}, not {want}; a mirror holds one date, so pull \
             another with --out",
            into.display(),
            lock.date.as_deref().unwrap_or("no date")
        )));
    }
    if o.go_mod.is_some() || o.npm.is_some() {
        return Err(MirrorError::Pull(
            "--into with --go or --npm: Go modules and npm packages cannot be added to a mirror yet; pull another with --out"
                .into(),
        ));
    }
    let name = into
        .file_name()
        .map_or("mirror".into(), |n| n.to_string_lossy().into_owned());
    let aside = into.with_file_name(format!(".{name}.into-{}", std::process::id()));
    let pulled = pull(&PullOpts {
        out: aside.clone(),
        ..o
    });
    let result = pulled.and_then(|new| merge(&mut lock, new, &aside, into));
    let _ = std::fs::remove_dir_all(&aside);
    let added = result?;
    write(into, &lock)?;
    Ok((lock, added))
}

/// Copies the files of `new` (pulled into `from`) that `lock` lacks into `into`.
fn merge(lock: &mut Lock, new: Lock, from: &Path, into: &Path) -> Result<usize, MirrorError> {
    let files = into.join(FILES_DIR);
    std::fs::create_dir_all(&files).map_err(io("create", &files))?;
    let mut added = 0;
    for r in new.files {
        if let Some(have) = lock.files.iter().find(|x| x.filename == r.filename) {
            if have.sha256 != r.sha256 {
                return Err(MirrorError::Conflict {
                    path: into.to_path_buf(),
                    filename: r.filename,
                    existing: have.sha256.clone(),
                });
            }
            continue;
        }
        let src = from.join(FILES_DIR).join(&r.filename);
        let tmp = files.join(format!(".{}.tmp-{}", r.filename, std::process::id()));
        let dest = files.join(&r.filename);
        std::fs::copy(&src, &tmp).map_err(io("copy", &src))?;
        std::fs::rename(&tmp, &dest).map_err(io("rename", &dest))?;
        lock.files.push(r);
        added += 1;
    }
    Ok(added)
}
