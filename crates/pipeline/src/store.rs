//! A study's store, the parts every pipeline shares: one SQLite file (`--db FILE`) with a
//! `meta` table (schema version, the options fingerprint a resumed study must match, and
//! whatever the pipeline keeps there), exactly-once inserts, logs on disk content-addressed
//! in `FILE.logs/`, scratch in `FILE.work/`, and the study lock on `FILE.lock`.
//!
//! A pipeline brings its own tables ([`Schema::sql`]) and rows; this module never reads
//! them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use rusqlite::{params, Connection, OptionalExtension, Params};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// What a pipeline's store is made of, and how its errors name the pipeline.
#[derive(Debug)]
pub struct Schema {
    /// `CREATE TABLE IF NOT EXISTS` statements of the pipeline's tables (`meta` is added).
    pub sql: &'static str,
    /// Bumped when the pipeline's schema changes meaning.
    pub version: i64,
    /// The command that makes a study (`reprorun reproduce run`), for a missing `--db`.
    pub make: &'static str,
    /// The options the fingerprint covers (`--seed, --timeout`), for a changed one.
    pub options: &'static str,
}

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("--db {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("--db {path}: made by another version of reprorun (schema {found}, this one reads {expected}); use a new --db")]
    Schema {
        path: PathBuf,
        found: i64,
        expected: i64,
    },
    #[error("--db {path}: the study was made with other options ({recorded}); this run asks {asked}: pass the same {options}, or use a new --db")]
    Options {
        path: PathBuf,
        recorded: String,
        asked: String,
        options: &'static str,
    },
    #[error("--db {path}: no such study (run `{make} --db {path}` first)")]
    Missing { path: PathBuf, make: &'static str },
    #[error("--db {path}: {link} is a symbolic link (perhaps planted by an earlier run in its /work); a study's database, logs and work files are never written through one: pass the resolved path (realpath)")]
    Link { path: PathBuf, link: PathBuf },
    #[error("write log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An open study database.
pub struct Db {
    path: PathBuf,
    conn: Connection,
    schema: &'static Schema,
}

const META: &str = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";

/// A digest as lowercase hex (log names, input digests).
pub fn sha256_hex(bytes: &[u8]) -> String {
    reprorun_runtime::image::digest::hex(&Sha256::digest(bytes))
}

/// `FILE.suffix` beside `FILE`.
/// What a study writes beside its database: its logs, its work files, its lock, SQLite's own.
const SIBLINGS: &[&str] = &["logs", "work", "lock"];
const SQLITE_SIBLINGS: &[&str] = &["-wal", "-shm", "-journal"];

/// A symbolic link among the components of `db`, or at one of the paths beside it that the
/// study writes (root writes the sandbox's output there: a link planted by an earlier run
/// would choose where).
pub(crate) fn planted_link(db: &Path) -> Option<PathBuf> {
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_symlink());
    reprorun_runtime::sys::first_link(db).or_else(|| {
        let name = db.file_name().unwrap_or_default().to_string_lossy();
        SIBLINGS
            .iter()
            .map(|s| sibling(db, s))
            .chain(
                SQLITE_SIBLINGS
                    .iter()
                    .map(|s| db.with_file_name(format!("{name}{s}"))),
            )
            .find(|p| is_link(p))
    })
}

pub fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let name = db.file_name().unwrap_or_default().to_string_lossy();
    db.with_file_name(format!("{name}.{suffix}"))
}

impl Db {
    /// Opens (creating if `create`) the study database. An existing file is checked
    /// before anything is written into it: it may be another program's database.
    pub fn open(path: &Path, create: bool, schema: &'static Schema) -> Result<Db, StoreError> {
        if let Some(link) = planted_link(path) {
            return Err(StoreError::Link {
                path: path.to_path_buf(),
                link,
            });
        }
        if !create && !path.is_file() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
                make: schema.make,
            });
        }
        let err = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let existing = std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(60)).map_err(err)?;
        let db = Db {
            path: path.to_path_buf(),
            conn,
            schema,
        };
        if existing || !create {
            db.check_schema()?;
        }
        // WAL: workers write while the coordinator reads progress.
        db.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        db.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        if create && !existing {
            db.conn.execute_batch(META).map_err(err)?;
            db.conn.execute_batch(schema.sql).map_err(err)?;
            db.conn
                .execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema', ?1)",
                    params![schema.version.to_string()],
                )
                .map_err(err)?;
        }
        db.check_schema()?;
        Ok(db)
    }

    fn check_schema(&self) -> Result<(), StoreError> {
        let found: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
                r.get(0)
            })
            .optional()
            .or_else(|e| match e {
                rusqlite::Error::SqliteFailure(..) => Ok(None),
                e => Err(self.err()(e)),
            })?;
        let found = found.and_then(|v| v.parse().ok()).unwrap_or(0);
        if found != self.schema.version {
            return Err(StoreError::Schema {
                path: self.path.clone(),
                found,
                expected: self.schema.version,
            });
        }
        Ok(())
    }

    /// The connection, for the pipeline's own tables.
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Names this database in an SQLite error.
    pub fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Inserts a row that is recorded at most once (`sql` is an `INSERT OR IGNORE`): a row
    /// already there is kept and this one dropped. Returns whether it was inserted.
    pub fn insert_once(&self, sql: &str, row: impl Params) -> Result<bool, StoreError> {
        debug_assert!(sql.starts_with("INSERT OR IGNORE "), "{sql}");
        self.conn
            .prepare_cached(sql)
            .and_then(|mut st| st.execute(row))
            .map(|n| n > 0)
            .map_err(self.err())
    }

    /// The directory logs are kept in: `FILE.logs`.
    pub fn logs_dir(&self) -> PathBuf {
        sibling(&self.path, "logs")
    }

    /// The scratch directory (trees, per-unit files): `FILE.work`. It can be deleted
    /// between invocations; it is rebuilt.
    pub fn work_dir(&self) -> PathBuf {
        sibling(&self.path, "work")
    }

    /// A meta value, set to `value` the first time it is asked for.
    pub fn meta_or_set(&self, key: &str, value: &str) -> Result<String, StoreError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO meta VALUES (?1, ?2)",
                params![key, value],
            )
            .map_err(self.err())?;
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .map_err(self.err())
    }

    /// Sets a meta value (replacing it).
    pub fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta VALUES (?1, ?2)",
                params![key, value],
            )
            .map(drop)
            .map_err(self.err())
    }

    /// A meta value, if set.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.err())
    }

    /// Records the options fingerprint the first time; later, refuses a different one
    /// (units made under other conditions would be mixed into one study).
    pub fn check_options(&self, fingerprint: &str) -> Result<(), StoreError> {
        let recorded = self.meta_or_set("options", fingerprint)?;
        if recorded != fingerprint {
            return Err(StoreError::Options {
                path: self.path.clone(),
                recorded,
                asked: fingerprint.to_string(),
                options: self.schema.options,
            });
        }
        Ok(())
    }

    /// Writes a log (content-addressed; an existing one is kept) and returns its digest.
    pub fn put_log(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let digest = sha256_hex(bytes);
        let dir = self.logs_dir();
        let path = dir.join(&digest);
        if !path.exists() {
            std::fs::create_dir_all(&dir)
                .and_then(|()| reprorun_runtime::sys::write_atomic(&path, bytes, 0o644))
                .map_err(|source| StoreError::Log { path, source })?;
        }
        Ok(digest)
    }

    /// Stores a worker's log file `src`, whose name is its digest `d`, as log `d`: a hard
    /// link where both are on one filesystem (the worker made the file durable; only the
    /// directory entry is new), else a copy not yet synced. The stored bytes are hashed
    /// again, so what is stored is what was checked. Returns whether it copied; before
    /// committing rows that name the logs, call [`Self::sync_logs`] with that.
    pub fn adopt_log(&self, src: &Path, d: &str) -> Result<bool, StoreError> {
        let dir = self.logs_dir();
        let dest = dir.join(d);
        let fail = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Log { path, source }
        };
        if dest.exists() {
            return Ok(false);
        }
        std::fs::create_dir_all(&dir).map_err(fail(&dir))?;
        match std::fs::hard_link(src, &dest) {
            Ok(()) => {
                let bytes = std::fs::read(&dest).map_err(fail(&dest))?;
                if sha256_hex(&bytes) != d {
                    let _ = std::fs::remove_file(&dest);
                    return Err(fail(src)(std::io::Error::other(
                        "changed while merging: its digest no longer matches",
                    )));
                }
                Ok(false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(_) => {
                // Another filesystem (or one without hard links): a copy.
                let bytes = std::fs::read(src).map_err(fail(src))?;
                if sha256_hex(&bytes) != d {
                    return Err(fail(src)(std::io::Error::other(
                        "changed while merging: its digest no longer matches",
                    )));
                }
                self.put_log_unsynced(&bytes)?;
                Ok(true)
            }
        }
    }

    /// [`Self::put_log`] without the fsync.
    fn put_log_unsynced(&self, bytes: &[u8]) -> Result<String, StoreError> {
        use std::io::Write;
        let digest = sha256_hex(bytes);
        let dir = self.logs_dir();
        let path = dir.join(&digest);
        if !path.exists() {
            let fail = |source| StoreError::Log {
                path: path.clone(),
                source,
            };
            std::fs::create_dir_all(&dir).map_err(fail)?;
            let mut tmp = tempfile::Builder::new()
                .prefix(&format!(".{digest}."))
                .tempfile_in(&dir)
                .map_err(fail)?;
            tmp.write_all(bytes).map_err(fail)?;
            tmp.persist(&path).map_err(|e| fail(e.error))?;
        }
        Ok(digest)
    }

    /// Makes the logs [`Self::adopt_log`] stored durable: the directory's entries (an
    /// fsync of it), and with `copied` their bytes too (one `syncfs(2)` of its filesystem).
    pub fn sync_logs(&self, copied: bool) -> Result<(), StoreError> {
        let dir = self.logs_dir();
        let fail = |source| StoreError::Log {
            path: dir.clone(),
            source,
        };
        let d = match std::fs::File::open(&dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(fail(e)),
        };
        if copied {
            nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d))
                .map_err(|e| fail(std::io::Error::from(e)))?;
        }
        d.sync_all().map_err(fail)
    }

    /// Reads a log back by digest.
    pub fn log(&self, digest: &str) -> Option<Vec<u8>> {
        if !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        std::fs::read(self.logs_dir().join(digest)).ok()
    }
}

/// Why the study lock could not be taken.
#[derive(Debug, Error)]
pub enum LockError {
    #[error("--db: lock {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: reprorun_runtime::sys::hostpath::HostPathError,
    },
    #[error("--db {db}: another reprorun is running this study; wait for it or stop it")]
    Busy { db: PathBuf },
}

/// One invocation at a time per database: an exclusive lock on `FILE.lock`, held by the
/// coordinator (workers close their copy, so no sandbox holds it) until it ends or is
/// killed. A study that was just killed may take a moment to let go: wait a little.
pub fn lock(db: &Path) -> Result<Flock<File>, LockError> {
    let path = sibling(db, "lock");
    // No link followed, no FIFO opened (an earlier run may have planted either).
    use reprorun_runtime::sys::hostpath::{open_write, Write};
    let mut file = open_write(&path, false, Write::Keep).map_err(|source| LockError::Open {
        path: path.clone(),
        source,
    })?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => return Ok(held),
            Err((back, _)) if Instant::now() < deadline => {
                file = back;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(_) => {
                return Err(LockError::Busy {
                    db: db.to_path_buf(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TEST: Schema = Schema {
        sql: "CREATE TABLE IF NOT EXISTS units (id TEXT PRIMARY KEY, v TEXT NOT NULL);",
        version: 3,
        make: "reprorun test make",
        options: "--x",
    };

    #[test]
    fn a_link_at_the_database_or_beside_it_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        assert_eq!(planted_link(&db), None);
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("s.db.logs")).unwrap();
        assert_eq!(planted_link(&db), Some(dir.path().join("s.db.logs")));
        let e = Db::open(&db, true, &TEST).err().unwrap();
        assert!(matches!(e, StoreError::Link { .. }), "{e}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        std::fs::remove_file(dir.path().join("s.db.logs")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("link")).unwrap();
        let through = dir.path().join("link/s.db");
        assert_eq!(planted_link(&through), Some(dir.path().join("link")));
        std::os::unix::fs::symlink("/nonexistent", dir.path().join("s.db-wal")).unwrap();
        assert!(planted_link(&db).is_some());
    }

    #[test]
    fn a_study_needs_to_exist_and_have_a_known_schema() {
        let dir = tempfile::tempdir().unwrap();
        let e = Db::open(&dir.path().join("none.db"), false, &TEST)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("no such study (run `reprorun test make --db"),
            "{e}"
        );
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '99');")
            .unwrap();
        let e = Db::open(&other, true, &TEST).err().unwrap();
        assert!(e.to_string().contains("schema 99, this one reads 3"), "{e}");
    }

    #[test]
    fn a_worker_log_is_adopted_by_link_or_copy_and_only_with_its_digest() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("s.db"), true, &TEST).unwrap();
        let logs = dir.path().join("results-logs");
        std::fs::create_dir(&logs).unwrap();
        let put = |dir: &Path, bytes: &[u8]| {
            let d = sha256_hex(bytes);
            std::fs::write(dir.join(&d), bytes).unwrap();
            d
        };
        // Same filesystem: the same inode, nothing to copy.
        let d = put(&logs, b"12 passed\n");
        assert!(!db.adopt_log(&logs.join(&d), &d).unwrap());
        let stored = db.logs_dir().join(&d);
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(ino(&stored), ino(&logs.join(&d)));
        assert_eq!(db.log(&d).unwrap(), b"12 passed\n");
        // Adopting it again keeps it.
        assert!(!db.adopt_log(&logs.join(&d), &d).unwrap());
        // A file that is not what its name says is refused and not stored.
        let forged = "0".repeat(64);
        std::fs::write(logs.join(&forged), b"forged").unwrap();
        let e = db.adopt_log(&logs.join(&forged), &forged).unwrap_err();
        assert!(e.to_string().contains("digest no longer matches"), "{e}");
        assert!(db.log(&forged).is_none());
        db.sync_logs(false).unwrap();
        // Another filesystem (tmpfs): a copy, made durable by sync_logs(true).
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            let d = put(shm.path(), b"from another filesystem");
            assert!(db.adopt_log(&shm.path().join(&d), &d).unwrap());
            assert_ne!(ino(&db.logs_dir().join(&d)), ino(&shm.path().join(&d)));
            assert_eq!(db.log(&d).unwrap(), b"from another filesystem");
            db.sync_logs(true).unwrap();
        }
    }

    #[test]
    fn inserts_happen_once_and_options_cannot_change() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("s.db"), true, &TEST).unwrap();
        let sql = "INSERT OR IGNORE INTO units VALUES (?1, ?2)";
        assert!(db.insert_once(sql, params!["a", "1"]).unwrap());
        assert!(!db.insert_once(sql, params!["a", "2"]).unwrap());
        db.check_options("{\"seed\":1}").unwrap();
        db.check_options("{\"seed\":1}").unwrap();
        let e = db.check_options("{\"seed\":2}").unwrap_err().to_string();
        assert!(e.contains("pass the same --x, or use a new --db"), "{e}");
        assert_eq!(db.meta("absent").unwrap(), None);
        assert_eq!(db.meta_or_set("k", "5").unwrap(), "5");
        assert_eq!(db.meta_or_set("k", "6").unwrap(), "5");
    }

    #[test]
    fn logs_are_content_addressed() {
        let dir = tempfile::tempdir().unwrap();
        let s = Db::open(&dir.path().join("s.db"), true, &TEST).unwrap();
        let d = s.put_log(b"hello").unwrap();
        assert_eq!(d, sha256_hex(b"hello"));
        assert_eq!(s.put_log(b"hello").unwrap(), d);
        assert_eq!(s.log(&d).unwrap(), b"hello");
        assert!(s.log("../etc/passwd").is_none());
    }

    #[test]
    fn one_holder_of_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let held = lock(&db).unwrap();
        assert!(sibling(&db, "lock").is_file());
        drop(held);
        let _again = lock(&db).unwrap();
    }
}
