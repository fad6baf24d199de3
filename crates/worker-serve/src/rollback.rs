//! Upgrade and rollback of the ledger (issue #46 item 7).
//!
//! Before [`crate::ledger::Ledger::open`] applies a migration to a ledger that already has a
//! schema, it writes a consistent copy beside it, `ledger.v{FROM}-before-v{TO}.sqlite3`
//! (SQLite's `VACUUM INTO`, one read snapshot whatever else writes), and migrates only once
//! the copy is in place. An older worker refuses a newer ledger (exit 78), so bringing one
//! back needs the older schema back: [`downgrade`] (`worker ledger --downgrade-to N`) puts
//! that copy in place of the ledger, keeping the newer one beside it as
//! `ledger.v{FROM}-before-downgrade-to-v{N}.sqlite3`. What the newer worker recorded after
//! the upgrade is then not in the ledger the older one reads: those jobs run again (a
//! candidate is written again; nothing is signed or settled here).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::lock::{LockError, lock_state};

/// The SQLite ledger's database file inside the state directory.
pub const LEDGER_FILE: &str = "ledger.sqlite3";

/// The name of the copy of a schema-`from` ledger taken before migrating it to `to`.
pub fn backup_name(from: i64, to: i64) -> String {
    format!("ledger.v{from}-before-v{to}.sqlite3")
}

/// The name the newer ledger is kept under when schema `to` is restored.
pub fn replaced_name(from: i64, to: i64) -> String {
    format!("ledger.v{from}-before-downgrade-to-v{to}.sqlite3")
}

/// The ledger could not be backed up or rolled back.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    /// SQLite refused.
    #[error("{path:?}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file operation failed.
    #[error("{path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A `worker serve` holds the state directory: stop it first.
    #[error("{0} (stop the service before a downgrade)")]
    Locked(#[from] LockError),
    /// No ledger in the state directory.
    #[error("no ledger in {0:?}")]
    NoLedger(PathBuf),
    /// The ledger's schema is not newer than the one asked for.
    #[error("the ledger has schema version {current}; nothing to downgrade to version {requested}")]
    NotOlder {
        /// The ledger's schema.
        current: i64,
        /// `--downgrade-to`.
        requested: i64,
    },
    /// No copy of the ledger at that schema was taken (it was never migrated from it here).
    #[error(
        "no backup of schema version {requested} in {dir:?} (looked for ledger.v{requested}-before-v*.sqlite3 up to v{current}); restore one from your own backups"
    )]
    NoBackup {
        /// The state directory.
        dir: PathBuf,
        /// The ledger's schema.
        current: i64,
        /// `--downgrade-to`.
        requested: i64,
    },
    /// A backup whose content is not what its name says.
    #[error(
        "backup {path:?} has schema version {found} (expected {expected}) or fails SQLite's check"
    )]
    BadBackup {
        /// The backup.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The one its name gives.
        expected: i64,
    },
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> RollbackError + '_ {
    move |source| RollbackError::Sqlite {
        path: path.to_owned(),
        source,
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> RollbackError + '_ {
    move |source| RollbackError::Io {
        path: path.to_owned(),
        source,
    }
}

fn schema_of(conn: &Connection, path: &Path) -> Result<i64, RollbackError> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(sqlite(path))
}

/// Whether the database at `path` has schema `expected` and passes SQLite's quick check.
fn check_copy(path: &Path, expected: i64) -> Result<(), RollbackError> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sqlite(path))?;
    let found = schema_of(&conn, path)?;
    let check: String = conn
        .pragma_query_value(None, "quick_check", |row| row.get(0))
        .map_err(sqlite(path))?;
    if found != expected || check != "ok" {
        return Err(RollbackError::BadBackup {
            path: path.to_owned(),
            found,
            expected,
        });
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), RollbackError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// Writes a consistent copy of `conn`'s database to `dest` (replacing an older copy there
/// only once the new one is complete and checked to have schema `expected`). `Ok(false)`
/// when the database no longer has that schema (another process migrated it meanwhile, and
/// took the copy itself).
fn snapshot(
    conn: &Connection,
    src: &Path,
    dest: &Path,
    expected: i64,
) -> Result<bool, RollbackError> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new()
        .prefix(".ledger-copy-")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    let tmp_path = tmp.path().to_owned();
    let target = tmp_path
        .to_str()
        .ok_or_else(|| io(&tmp_path)(std::io::ErrorKind::InvalidFilename.into()))?;
    conn.execute("VACUUM INTO ?1", [target])
        .map_err(sqlite(src))?;
    match check_copy(&tmp_path, expected) {
        Ok(()) => {}
        Err(RollbackError::BadBackup { .. }) if schema_of(conn, src)? != expected => {
            return Ok(false);
        }
        Err(other) => return Err(other),
    }
    tmp.as_file().sync_all().map_err(io(&tmp_path))?;
    tmp.persist(dest).map_err(|e| io(dest)(e.error))?;
    sync_dir(dir)?;
    Ok(true)
}

/// Called by the ledger before it migrates `ledger` from schema `from` to `to`: the copy
/// [`backup_name`] beside it. A fresh database (schema 0) has nothing to keep.
pub(crate) fn backup_before_migration(
    conn: &Connection,
    ledger: &Path,
    from: i64,
    to: i64,
) -> Result<Option<PathBuf>, RollbackError> {
    if from == 0 || from >= to {
        return Ok(None);
    }
    let dir = ledger.parent().unwrap_or(Path::new("."));
    let dest = dir.join(backup_name(from, to));
    Ok(snapshot(conn, ledger, &dest, from)?.then_some(dest))
}

/// What [`downgrade`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downgraded {
    /// The ledger's schema before.
    pub from: i64,
    /// Its schema now.
    pub to: i64,
    /// The backup put in place.
    pub restored: PathBuf,
    /// Where the newer ledger was kept.
    pub kept: PathBuf,
}

/// Puts the ledger of `state_dir` back at schema `to` from the copy taken before it was
/// migrated from `to`, keeping the newer ledger beside it. Takes the state directory's lock,
/// so it never runs under a live `worker serve`.
pub fn downgrade(state_dir: &Path, to: i64) -> Result<Downgraded, RollbackError> {
    let _lock = lock_state(state_dir)?;
    let ledger = state_dir.join(LEDGER_FILE);
    if !ledger.is_file() {
        return Err(RollbackError::NoLedger(state_dir.to_owned()));
    }
    let conn = Connection::open(&ledger).map_err(sqlite(&ledger))?;
    let from = schema_of(&conn, &ledger)?;
    if to >= from || to < 1 {
        return Err(RollbackError::NotOlder {
            current: from,
            requested: to,
        });
    }
    // The copy taken on the way up from `to` (the latest one when it went up more than once).
    let restored = ((to + 1)..=from)
        .rev()
        .map(|k| state_dir.join(backup_name(to, k)))
        .find(|p| p.is_file())
        .ok_or_else(|| RollbackError::NoBackup {
            dir: state_dir.to_owned(),
            current: from,
            requested: to,
        })?;
    check_copy(&restored, to)?;
    let kept = state_dir.join(replaced_name(from, to));
    snapshot(&conn, &ledger, &kept, from)?;
    // The WAL belongs to the newer database: once it is checkpointed and the last
    // connection closed, no frame of it may be applied to the copy put in its place.
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .map_err(sqlite(&ledger))?;
    conn.close().map_err(|(_, e)| sqlite(&ledger)(e))?;
    for suffix in ["-wal", "-shm"] {
        let side = state_dir.join(format!("{LEDGER_FILE}{suffix}"));
        match std::fs::remove_file(&side) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&side)(e)),
        }
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".ledger-restore-")
        .tempfile_in(state_dir)
        .map_err(io(state_dir))?;
    let bytes = std::fs::read(&restored).map_err(io(&restored))?;
    tmp.write_all(&bytes).map_err(io(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    tmp.persist(&ledger).map_err(|e| io(&ledger)(e.error))?;
    sync_dir(state_dir)?;
    check_copy(&ledger, to)?;
    Ok(Downgraded {
        from,
        to,
        restored,
        kept,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    use rusqlite::Connection;

    use super::*;
    use crate::ledger::{LEDGER_FILE, Ledger, MIGRATIONS};

    /// A version-2 ledger as a worker of that schema left it: one completed job with its
    /// run and candidate.
    fn version_2_ledger(dir: &Path) {
        let conn = Connection::open(dir.join(LEDGER_FILE)).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        for sql in &MIGRATIONS[..2] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 2).unwrap();
        conn.execute_batch(
            "INSERT INTO jobs (job, job_id, round, content_hash, first_seen_ms, last_seen_ms,
                 status, attempts) VALUES (1, 'done', 7, 'sha256:aa', 10, 20, 'completed', 0);
             INSERT INTO runs VALUES (1, 1, 'done', 100, 200, 'completed_passed', NULL, NULL,
                 'sha256:ev', '0.0.9', 42);
             INSERT INTO candidates VALUES (1, 'done', 1, 'candidate-done.json', 200);",
        )
        .unwrap();
    }

    fn version_of(path: &Path) -> i64 {
        Connection::open(path)
            .unwrap()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_migration_keeps_a_backup_of_the_older_ledger_named_with_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        version_2_ledger(dir.path());
        drop(Ledger::open(dir.path()).unwrap());
        let backup = dir.path().join(format!(
            "ledger.v2-before-v{}.sqlite3",
            Ledger::schema_version()
        ));
        assert!(
            backup.is_file(),
            "no backup {backup:?} beside the migrated ledger: {:?}",
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect::<Vec<_>>()
        );
        assert_eq!(version_of(&backup), 2);
        let done: String = Connection::open(&backup)
            .unwrap()
            .query_row("SELECT file FROM candidates", [], |r| r.get(0))
            .unwrap();
        assert_eq!(done, "candidate-done.json");
    }

    /// The whole round trip: the previous schema's ledger, an upgrade that migrates it (and
    /// keeps the copy), work recorded by the newer worker, and a downgrade that brings the
    /// older schema back, readable, with the newer ledger kept beside it; the newer worker
    /// then migrates it again.
    #[test]
    fn a_ledger_upgraded_then_downgraded_is_the_older_schema_again() {
        let dir = tempfile::tempdir().unwrap();
        version_2_ledger(dir.path());
        let known = Ledger::schema_version();
        {
            let ledger = Ledger::open(dir.path()).unwrap();
            ledger
                .seen(
                    crate::ledger::JobKey {
                        job_id: "after-upgrade",
                        round: 1,
                        content_hash: "sha256:bb",
                    },
                    1_000,
                )
                .unwrap();
        }
        let done = downgrade(dir.path(), 2).unwrap();
        assert_eq!((done.from, done.to), (known, 2));
        assert_eq!(done.restored, dir.path().join(backup_name(2, known)));
        let ledger = dir.path().join(LEDGER_FILE);
        assert_eq!(version_of(&ledger), 2);
        let conn = Connection::open(&ledger).unwrap();
        let ids: Vec<String> = conn
            .prepare("SELECT job_id FROM jobs ORDER BY job")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ids, ["done"]);
        let quick: String = conn
            .pragma_query_value(None, "quick_check", |r| r.get(0))
            .unwrap();
        assert_eq!(quick, "ok");
        drop(conn);
        // The newer ledger, with what was recorded after the upgrade, is kept.
        assert_eq!(version_of(&done.kept), known);
        let kept: i64 = Connection::open(&done.kept)
            .unwrap()
            .query_row(
                "SELECT count(*) FROM jobs WHERE job_id = 'after-upgrade'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, 1);
        // Upgrading again works, and takes a fresh copy.
        let ledger = Ledger::open(dir.path()).unwrap();
        assert_eq!(ledger.jobs(None).unwrap().len(), 1);
    }

    #[test]
    fn a_downgrade_is_refused_under_a_running_service_or_without_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        version_2_ledger(dir.path());
        drop(Ledger::open(dir.path()).unwrap());
        {
            let _serve = crate::lock::lock_state(dir.path()).unwrap();
            let err = downgrade(dir.path(), 2).unwrap_err();
            assert!(matches!(err, RollbackError::Locked(_)), "{err}");
        }
        let err = downgrade(dir.path(), 1).unwrap_err();
        assert!(matches!(err, RollbackError::NoBackup { .. }), "{err}");
        let err = downgrade(dir.path(), Ledger::schema_version()).unwrap_err();
        assert!(matches!(err, RollbackError::NotOlder { .. }), "{err}");
        // A refused downgrade changed nothing.
        assert_eq!(
            version_of(&dir.path().join(LEDGER_FILE)),
            Ledger::schema_version()
        );
    }
}
