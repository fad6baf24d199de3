//! The durable ledger of `worker serve`: every job seen, every run and every candidate
//! written, in an embedded SQLite database (`ledger.sqlite3` in the state directory, WAL
//! mode, so a crash mid-write leaves the last committed state). The schema is versioned in
//! the code with `PRAGMA user_version`; each migration runs in one transaction.
//!
//! A job is keyed by its id, its round and its content hash (the SHA-256 of the canonical
//! JSON of its receipt scope, which commits to the terms, the runner manifest, the
//! submission and the evidence): a new round of the same id is a new job, and the same id
//! and round listed with other content is recorded as `conflicting` and never run or
//! offered to the signer, whatever was completed for the content seen first.
//!
//! A run that ends without a verdict records whose fault it was ([`super::retry::Cause`]): a
//! host cause is not an attempt of the job; the job's own failure is, and the job is not due
//! again before its back-off ends. A job is given up (`exhausted`) only when its verification
//! window ends without a verdict; `worker ledger --retry` puts a job back.
//!
//! A run row is written *before* its container starts and closed after the job's row is
//! known. A run still open when the ledger is opened again belonged to a process that died
//! (SIGKILL, power loss): it is closed as `interrupted`, which is never a verdict, and its
//! job becomes retryable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use worker_store::clock::{Clock, SystemClock};

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, ToSql, params};
use serde::Serialize;

use super::jobstate::next;
pub use super::jobstate::{IllegalTransition, JobEvent, JobState};

/// The database file inside the state directory (named where the backup before a migration
/// reads it, so that module need not import this one).
pub use super::rollback::LEDGER_FILE;

// Job statuses are [`JobState`]s, stored under their names (`jobs.status`); the legal moves
// between them are [`super::jobstate::next`], asked before every write.

impl ToSql for JobState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(
            self.as_str().as_bytes(),
        )))
    }
}

impl FromSql for JobState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

/// The outcome recorded for a run that a shutdown or crash cut short.
pub const INTERRUPTED: &str = "interrupted";

/// Migrations, in order; `user_version` is the number applied.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: jobs, runs, candidates, heartbeat.
    "CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        round INTEGER NOT NULL,
        first_seen_ms INTEGER NOT NULL,
        last_seen_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE runs (
        run_id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL REFERENCES jobs(job_id),
        started_ms INTEGER NOT NULL,
        ended_ms INTEGER,
        outcome TEXT,
        reason_code TEXT,
        reason TEXT,
        evidence TEXT,
        worker_version TEXT NOT NULL,
        pid INTEGER NOT NULL
    );
    CREATE INDEX runs_by_job ON runs(job_id);
    CREATE TABLE candidates (
        job_id TEXT NOT NULL REFERENCES jobs(job_id),
        run_id INTEGER NOT NULL REFERENCES runs(run_id),
        file TEXT NOT NULL,
        written_ms INTEGER NOT NULL,
        PRIMARY KEY (job_id, run_id)
    );
    CREATE TABLE heartbeat (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        at_ms INTEGER NOT NULL,
        pid INTEGER NOT NULL,
        worker_version TEXT NOT NULL,
        polls_ok INTEGER NOT NULL,
        polls_failed INTEGER NOT NULL,
        last_poll_ok_ms INTEGER
    );",
    // 2: jobs keyed by (job_id, round, content_hash); runs and candidates point at that key.
    // Version-1 rows keep a NULL content hash: they never match a job seen from now on,
    // so a job completed before the upgrade runs once more under its full key.
    "CREATE TABLE jobs2 (
        job INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        round INTEGER NOT NULL,
        content_hash TEXT,
        first_seen_ms INTEGER NOT NULL,
        last_seen_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        UNIQUE (job_id, round, content_hash)
    );
    INSERT INTO jobs2 (job_id, round, content_hash, first_seen_ms, last_seen_ms, status, attempts)
        SELECT job_id, round, NULL, first_seen_ms, last_seen_ms, status, attempts FROM jobs
        ORDER BY first_seen_ms, job_id;
    CREATE TABLE runs2 (
        run_id INTEGER PRIMARY KEY AUTOINCREMENT,
        job INTEGER NOT NULL REFERENCES jobs2(job),
        job_id TEXT NOT NULL,
        started_ms INTEGER NOT NULL,
        ended_ms INTEGER,
        outcome TEXT,
        reason_code TEXT,
        reason TEXT,
        evidence TEXT,
        worker_version TEXT NOT NULL,
        pid INTEGER NOT NULL
    );
    INSERT INTO runs2 SELECT r.run_id, j.job, r.job_id, r.started_ms, r.ended_ms, r.outcome,
        r.reason_code, r.reason, r.evidence, r.worker_version, r.pid
        FROM runs r JOIN jobs2 j ON j.job_id = r.job_id;
    CREATE TABLE candidates2 (
        job INTEGER NOT NULL REFERENCES jobs2(job),
        job_id TEXT NOT NULL,
        run_id INTEGER NOT NULL REFERENCES runs2(run_id),
        file TEXT NOT NULL,
        written_ms INTEGER NOT NULL,
        PRIMARY KEY (job, run_id)
    );
    INSERT INTO candidates2 SELECT j.job, c.job_id, c.run_id, c.file, c.written_ms
        FROM candidates c JOIN jobs2 j ON j.job_id = c.job_id;
    DROP TABLE candidates;
    DROP TABLE runs;
    DROP TABLE jobs;
    ALTER TABLE jobs2 RENAME TO jobs;
    ALTER TABLE runs2 RENAME TO runs;
    ALTER TABLE candidates2 RENAME TO candidates;
    CREATE INDEX runs_by_job ON runs(job);
    CREATE INDEX jobs_by_id ON jobs(job_id, round);",
    // 3: the job's verification window and retry time; whose fault a run without a verdict
    // was. Rows from before keep NULL: a window is learnt at the next poll that lists the job.
    "ALTER TABLE jobs ADD COLUMN expires_ms INTEGER;
    ALTER TABLE jobs ADD COLUMN not_before_ms INTEGER;
    ALTER TABLE runs ADD COLUMN cause TEXT;",
];

/// What identifies a job in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobKey<'a> {
    /// The platform's job id (opaque).
    pub job_id: &'a str,
    /// The bounty round.
    pub round: u64,
    /// `sha256:` of the canonical JSON of the job's receipt scope.
    pub content_hash: &'a str,
}

/// What [`Ledger::seen`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The job's ledger key.
    pub job: i64,
    /// Whether it should run now (new, or retryable).
    pub due: bool,
    /// Whether this poll recorded it for the first time.
    pub new: bool,
    /// Whether it is given up ([`JobState::Exhausted`]).
    pub given_up: bool,
}

/// A job given up because its window ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp {
    /// The platform's job id.
    pub job_id: String,
    /// The bounty round.
    pub round: i64,
    /// Runs that failed for the job's own cause.
    pub attempts: i64,
    /// The last run's reason code and detail, if it ran.
    pub last_reason: Option<String>,
}

/// What `worker ledger --retry` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requeued {
    /// Rows put back to `pending`.
    pub requeued: usize,
    /// Rows left as they were, with their status (completed, conflicting, running).
    pub kept: Vec<(i64, JobState)>,
}

/// The ledger could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// SQLite refused.
    #[error("ledger {path:?}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: rusqlite::Error,
    },
    /// A write the job state machine refuses (a running job claimed again, a finished one
    /// run again): a bug of the caller; nothing was written.
    #[error("ledger {path:?}: job {job}: {source}")]
    Transition {
        /// The database file.
        path: PathBuf,
        /// The job's ledger key.
        job: i64,
        /// The refused move.
        #[source]
        source: IllegalTransition,
    },
    /// The copy of the ledger kept before a migration could not be written; nothing was
    /// migrated.
    #[error("backing up the ledger before its migration: {0}")]
    Backup(#[from] crate::rollback::RollbackError),
    /// The database was written by a newer worker.
    #[error(
        "ledger {path:?} has schema version {found}; this worker knows up to {known} (`worker ledger --state DIR --downgrade-to {known}` puts back the copy taken before the upgrade; docs/operations.md, \"Upgrade and rollback\")"
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its version.
        found: i64,
        /// Ours.
        known: i64,
    },
}

impl LedgerError {
    /// Whether a restart cannot fix it (exit 78): a file that is not a ledger or is corrupt,
    /// one from a newer worker, one this user may not open or write. Busy or locked past the
    /// timeout, a full disk or an I/O error may pass (exit 1, which systemd restarts).
    pub fn is_permanent(&self) -> bool {
        use rusqlite::ErrorCode as C;
        match self {
            Self::TooNew { .. } => true,
            Self::Transition { .. } | Self::Backup(_) => false,
            Self::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(
                    C::NotADatabase
                        | C::DatabaseCorrupt
                        | C::CannotOpen
                        | C::PermissionDenied
                        | C::ReadOnly
                        | C::AuthorizationForStatementDenied
                )
            ),
        }
    }
}

/// One job's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobEntry {
    /// Its ledger key (runs and candidates name it).
    pub job: i64,
    /// The platform's job id.
    pub job_id: String,
    /// The bounty round.
    pub round: i64,
    /// `sha256:` of its receipt scope (`None` for a row from a version-1 ledger).
    pub content_hash: Option<String>,
    /// First poll that listed it (unix ms).
    pub first_seen_ms: i64,
    /// Last poll that listed it (unix ms).
    pub last_seen_ms: i64,
    /// Its state (stored under [`JobState::as_str`]).
    pub status: JobState,
    /// Runs that ended without a verdict for the job's own cause.
    pub attempts: i64,
    /// The end of its verification window (unix ms), once a poll listed it.
    pub expires_ms: Option<i64>,
    /// Not run again before this time (unix ms): the back-off after its own failure.
    pub not_before_ms: Option<i64>,
}

/// One run's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunEntry {
    /// Ledger run id.
    pub run_id: i64,
    /// The job's ledger key.
    pub job: i64,
    /// The job.
    pub job_id: String,
    /// Start (unix ms).
    pub started_ms: i64,
    /// End (unix ms); `None` while running.
    pub ended_ms: Option<i64>,
    /// The job row's status (`completed_passed`, `no_verdict`, …) or `interrupted`.
    pub outcome: Option<String>,
    /// The no-verdict or refusal reason code.
    pub reason_code: Option<String>,
    /// Its detail.
    pub reason: Option<String>,
    /// Address of the evidence record (`sha256:…` of its canonical JSON, the store's name).
    pub evidence: Option<String>,
    /// The worker version that ran it.
    pub worker_version: String,
    /// For a run without a verdict: `host` (not an attempt of the job) or `job`.
    pub cause: Option<String>,
}

/// One candidate file written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateEntry {
    /// The job's ledger key.
    pub job: i64,
    /// The job.
    pub job_id: String,
    /// The run that produced it.
    pub run_id: i64,
    /// File name in the output directory.
    pub file: String,
    /// When (unix ms).
    pub written_ms: i64,
}

/// The open ledger.
pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    retry_base: std::time::Duration,
    /// Where run, recovery and heartbeat times are read (the service's clock).
    clock: Arc<dyn Clock>,
}

impl Ledger {
    /// Opens (creating if needed) the ledger in `state_dir` and applies pending migrations.
    pub fn open(state_dir: &Path) -> Result<Self, LedgerError> {
        // Two processes creating the database at once (`worker ledger` polling while the
        // service starts) can meet in SQLite's lock upgrade, which answers "busy" at once
        // instead of waiting: opening is idempotent, so it is tried again for a while.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match Self::open_once(state_dir) {
                Err(LedgerError::Sqlite { source, .. })
                    if source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && std::time::Instant::now() < give_up =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                result => return result,
            }
        }
    }

    fn open_once(state_dir: &Path) -> Result<Self, LedgerError> {
        let path = state_dir.join(LEDGER_FILE);
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        // WAL: a crash mid-transaction loses only that transaction; readers (`worker
        // ledger`) never block the service.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err)?;
        let mut ledger = Self {
            conn,
            path: path.clone(),
            retry_base: std::time::Duration::from_secs(60),
            clock: Arc::new(SystemClock::new()),
        };
        ledger.migrate()?;
        Ok(ledger)
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
        |source| LedgerError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The clock run, recovery and heartbeat times are read from (default: the system's).
    pub fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        self.clock = clock;
    }

    /// The base of the back-off after a job's own failure (the poll interval; default 60 s).
    pub fn set_retry_base(&mut self, base: std::time::Duration) {
        self.retry_base = base;
    }

    /// The schema version this code writes.
    pub fn schema_version() -> i64 {
        i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX)
    }

    fn migrate(&mut self) -> Result<(), LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let known = Self::schema_version();
        // Before the first migration of a ledger that has a schema, a copy of it beside it, so
        // the older worker can be brought back (`worker ledger --downgrade-to`).
        let before: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(err)?;
        if before > 0 && before < known {
            crate::rollback::backup_before_migration(&self.conn, &path, before, known)?;
        }
        // The version is read inside a write transaction: a `worker ledger` opening the
        // database while the service creates it must not apply the same migration twice.
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
            let found: i64 = tx
                .pragma_query_value(None, "user_version", |row| row.get(0))
                .map_err(err)?;
            if found > known {
                return Err(LedgerError::TooNew { path, found, known });
            }
            let Some(sql) = usize::try_from(found).ok().and_then(|i| MIGRATIONS.get(i)) else {
                return tx.commit().map_err(err);
            };
            tx.execute_batch(sql).map_err(err)?;
            tx.pragma_update(None, "user_version", found + 1)
                .map_err(err)?;
            tx.commit().map_err(err)?;
        }
    }

    /// Closes every run left open by a dead process as `interrupted` and makes its job
    /// retryable; returns the run ids closed. Called once at start-up, before any run.
    pub fn recover_interrupted(&mut self) -> Result<Vec<i64>, LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        let open: Vec<(i64, i64)> = {
            let mut stmt = tx
                .prepare("SELECT run_id, job FROM runs WHERE ended_ms IS NULL")
                .map_err(err)?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(err)?
                .collect::<Result<_, _>>()
                .map_err(err)?
        };
        let now = self.clock.wall_ms();
        for (run_id, job) in &open {
            tx.execute(
                "UPDATE runs SET ended_ms = ?1, outcome = ?2, reason_code = ?2,
                 reason = 'the worker stopped before the run ended (crash or kill)'
                 WHERE run_id = ?3",
                params![now, INTERRUPTED, run_id],
            )
            .map_err(err)?;
            // A job no longer running (put back by `worker ledger --retry` after the
            // crash) keeps its state.
            let from = job_state(&tx, *job).map_err(err)?;
            if next(from, JobEvent::Interrupt).is_ok() {
                apply(&tx, &path, *job, JobEvent::Interrupt)?;
            }
        }
        tx.commit().map_err(err)?;
        Ok(open.into_iter().map(|(id, _)| id).collect())
    }

    /// Runs `sightings` (a poll's [`Ledger::seen_until`] calls) as one transaction: with
    /// `synchronous = FULL` each autocommit statement is a write-ahead log sync, so a poll
    /// listing n jobs cost n syncs, and the listing's cost was per job and per poll. One
    /// commit is as durable at its end; an error, or a panic, rolls the poll's sightings back
    /// (the next poll records them again) and is returned as before.
    pub fn in_one_commit<T, E: From<LedgerError>>(
        &mut self,
        sightings: impl FnOnce(&Self) -> Result<T, E>,
    ) -> Result<T, E> {
        // `&self` methods run inside it on the same connection; dropped uncommitted (an
        // error, a panic) it rolls back.
        let tx = self.conn.unchecked_transaction().map_err(self.err())?;
        let value = sightings(self)?;
        tx.commit().map_err(self.err())?;
        Ok(value)
    }

    /// Records that a poll listed the job `key`. A job whose id and round the ledger holds
    /// with other content is recorded as [`JobState::Conflicting`] and is never due.
    pub fn seen(&self, key: JobKey<'_>, at_ms: i64) -> Result<Seen, LedgerError> {
        self.seen_until(key, None, at_ms)
    }

    /// [`Ledger::seen`], recording the end of the job's verification window (unix ms). A job
    /// is due when it is pending, interrupted, or to be retried and past its back-off.
    pub fn seen_until(
        &self,
        key: JobKey<'_>,
        expires_ms: Option<i64>,
        at_ms: i64,
    ) -> Result<Seen, LedgerError> {
        let round = i64::try_from(key.round).unwrap_or(i64::MAX);
        let existing: Option<(i64, JobState, Option<i64>, i64)> = self
            .conn
            .query_row(
                "SELECT job, status, not_before_ms, attempts FROM jobs WHERE job_id = ?1
                 AND round = ?2 AND content_hash = ?3",
                params![key.job_id, round, key.content_hash],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(self.err())?;
        if let Some((job, st, not_before, attempts)) = existing {
            // The window is part of the content hash: it cannot change for this row.
            self.conn
                .execute(
                    "UPDATE jobs SET last_seen_ms = ?1, expires_ms = COALESCE(expires_ms, ?2)
                     WHERE job = ?3",
                    params![at_ms, expires_ms, job],
                )
                .map_err(self.err())?;
            let due =
                st.may_start() && not_before.is_none_or(|t| self.back_off_over(t, attempts, at_ms));
            return Ok(Seen {
                job,
                due,
                new: false,
                given_up: st == JobState::Exhausted,
            });
        }
        let other_content: bool = self
            .conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM jobs WHERE job_id = ?1 AND round = ?2
                 AND content_hash IS NOT NULL)",
                params![key.job_id, round],
                |r| r.get(0),
            )
            .map_err(self.err())?;
        let new_status = JobState::first_seen(other_content);
        self.conn
            .execute(
                "INSERT INTO jobs (job_id, round, content_hash, first_seen_ms, last_seen_ms, status,
                 expires_ms) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)",
                params![key.job_id, round, key.content_hash, at_ms, new_status, expires_ms],
            )
            .map_err(self.err())?;
        Ok(Seen {
            job: self.conn.last_insert_rowid(),
            due: !other_content,
            new: true,
            given_up: false,
        })
    }

    /// The first-seen time of the oldest of `jobs` still to run (pending, running, to be
    /// retried), or `None`.
    pub fn oldest_unfinished(
        &self,
        jobs: &std::collections::BTreeMap<i64, String>,
    ) -> Result<Option<i64>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT first_seen_ms, status FROM jobs WHERE job = ?1")
            .map_err(self.err())?;
        let mut oldest: Option<i64> = None;
        for job in jobs.keys() {
            let row: Option<(i64, JobState)> = stmt
                .query_row(params![job], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(self.err())?;
            if let Some((first_seen, st)) = row
                && st.is_unfinished()
            {
                oldest = Some(oldest.map_or(first_seen, |o| o.min(first_seen)));
            }
        }
        Ok(oldest)
    }

    /// The file of the last candidate written for the job `job`, if any.
    pub fn candidate_of(&self, job: i64) -> Result<Option<String>, LedgerError> {
        self.conn
            .query_row(
                "SELECT file FROM candidates WHERE job = ?1 ORDER BY run_id DESC LIMIT 1",
                params![job],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err())
    }

    /// Opens a run of the job `job` (before anything is started for it); returns its run id.
    pub fn start_run(&mut self, job: i64) -> Result<i64, LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        // Refused (and nothing written) unless the job waits to run: a running job is not
        // claimed twice, a finished one never runs again.
        apply(&tx, &path, job, JobEvent::Start)?;
        tx.execute(
            "INSERT INTO runs (job, job_id, started_ms, worker_version, pid)
             SELECT job, job_id, ?2, ?3, ?4 FROM jobs WHERE job = ?1",
            params![
                job,
                self.clock.wall_ms(),
                verifier_sdk::build::identity(),
                i64::from(std::process::id())
            ],
        )
        .map_err(err)?;
        let run_id = tx.last_insert_rowid();
        tx.commit().map_err(err)?;
        Ok(run_id)
    }

    /// Closes run `run_id` with its result, now; see [`Ledger::finish_run_at`].
    pub fn finish_run(
        &mut self,
        run_id: i64,
        job: i64,
        result: &RunResult,
    ) -> Result<(), LedgerError> {
        self.finish_run_at(run_id, job, result, self.clock.wall_ms())
    }

    /// Closes run `run_id` with its result at `at_ms`; the job's status follows (completed
    /// and rejected are final; the job's own failure counts as an attempt and is retried after
    /// its back-off; a host failure and an interruption do not count and are retried at once).
    pub fn finish_run_at(
        &mut self,
        run_id: i64,
        job: i64,
        result: &RunResult,
        at_ms: i64,
    ) -> Result<(), LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let base = self.retry_base;
        let tx = self.conn.transaction().map_err(err)?;
        let event = match result.kind {
            RunKind::Completed => JobEvent::Complete,
            RunKind::Rejected => JobEvent::Reject,
            RunKind::Interrupted => JobEvent::Interrupt,
            RunKind::NoVerdict => JobEvent::OwnFailure,
            RunKind::Host => {
                let attempts: i64 = tx
                    .query_row(
                        "SELECT attempts FROM jobs WHERE job = ?1",
                        params![job],
                        |r| r.get(0),
                    )
                    .map_err(err)?;
                JobEvent::HostFailure {
                    attempted: attempts > 0,
                }
            }
        };
        // Before anything is written: only a running job ends a run.
        apply(&tx, &path, job, event)?;
        let cause = match result.kind {
            RunKind::NoVerdict => Some("job"),
            RunKind::Host => Some("host"),
            _ => None,
        };
        tx.execute(
            "UPDATE runs SET ended_ms = ?1, outcome = ?2, reason_code = ?3, reason = ?4,
             evidence = ?5, cause = ?6 WHERE run_id = ?7",
            params![
                at_ms,
                result.outcome,
                result.reason_code,
                result.reason,
                result.evidence,
                cause,
                run_id
            ],
        )
        .map_err(err)?;
        if let Some(file) = &result.candidate_file {
            tx.execute(
                "INSERT INTO candidates (job, job_id, run_id, file, written_ms)
                 SELECT job, job_id, ?2, ?3, ?4 FROM jobs WHERE job = ?1",
                params![job, run_id, file, at_ms],
            )
            .map_err(err)?;
        }
        if result.kind == RunKind::NoVerdict {
            let attempts: i64 = tx
                .query_row(
                    "UPDATE jobs SET attempts = attempts + 1 WHERE job = ?1 RETURNING attempts",
                    params![job],
                    |r| r.get(0),
                )
                .map_err(err)?;
            let not_before =
                super::retry::job_retry_at(at_ms, base, attempts, result.last_start_ms);
            tx.execute(
                "UPDATE jobs SET not_before_ms = ?1 WHERE job = ?2",
                params![not_before, job],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// Whether a job whose retry time is `not_before` (wall clock, ms) may run at `at_ms`.
    ///
    /// The retry time is stored on the wall clock because it must survive a restart, but a
    /// wall clock can step back (an NTP correction after running ahead): a retry time further
    /// away than the longest back-off this job could have been given means the clock was
    /// ahead when it was written, and the job is due now instead of waiting out the step on
    /// top of its back-off.
    fn back_off_over(&self, not_before: i64, attempts: i64, at_ms: i64) -> bool {
        let longest = super::retry::job_backoff(self.retry_base, attempts);
        let longest = i64::try_from(longest.as_millis()).unwrap_or(i64::MAX);
        not_before <= at_ms || not_before.saturating_sub(at_ms) > longest
    }

    /// Gives up every job still to run whose verification window has ended at `at_ms`
    /// ([`JobState::Exhausted`]); returns them, with their last run's reason.
    pub fn give_up_expired(&mut self, at_ms: i64) -> Result<Vec<GivenUp>, LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        let expired: Vec<(i64, GivenUp)> = {
            let mut stmt = tx
                .prepare(
                    "SELECT j.job, j.job_id, j.round, j.attempts,
                     (SELECT r.reason_code || ': ' || COALESCE(r.reason, '') FROM runs r
                      WHERE r.job = j.job AND r.reason_code IS NOT NULL
                      ORDER BY r.run_id DESC LIMIT 1)
                     FROM jobs j WHERE j.status IN (?1, ?2, ?3) AND j.expires_ms IS NOT NULL
                     AND j.expires_ms <= ?4 ORDER BY j.job",
                )
                .map_err(err)?;
            stmt.query_map(
                params![
                    JobState::Pending,
                    JobState::Retry,
                    JobState::Interrupted,
                    at_ms
                ],
                |r| {
                    Ok((
                        r.get(0)?,
                        GivenUp {
                            job_id: r.get(1)?,
                            round: r.get(2)?,
                            attempts: r.get(3)?,
                            last_reason: r.get(4)?,
                        },
                    ))
                },
            )
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?
        };
        for (job, _) in &expired {
            apply(&tx, &path, *job, JobEvent::GiveUp)?;
        }
        tx.commit().map_err(err)?;
        Ok(expired.into_iter().map(|(_, g)| g).collect())
    }

    /// Puts every row of `job_id` that has no verdict and is not running or conflicting back
    /// to `pending`, with no attempts and no back-off (`worker ledger --retry`).
    pub fn retry(&mut self, job_id: &str) -> Result<Requeued, LedgerError> {
        self.requeue(Some(job_id))
    }

    /// Puts every given-up job back to `pending` (`worker ledger --retry-exhausted`).
    pub fn retry_exhausted(&mut self) -> Result<Requeued, LedgerError> {
        self.requeue(None)
    }

    /// Requeues the rows of `job_id`, or every given-up row; the state machine decides which
    /// rows may go back ([`JobEvent::Requeue`]), the others are kept.
    fn requeue(&mut self, job_id: Option<&str>) -> Result<Requeued, LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(err)?;
        let rows: Vec<(i64, i64, JobState)> = {
            let mut stmt = tx
                .prepare(
                    "SELECT job, round, status FROM jobs
                     WHERE (?1 IS NOT NULL AND job_id = ?1) OR (?1 IS NULL AND status = ?2)
                     ORDER BY job",
                )
                .map_err(err)?;
            stmt.query_map(params![job_id, JobState::Exhausted], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?
        };
        let mut done = Requeued::default();
        for (job, round, st) in rows {
            if next(st, JobEvent::Requeue).is_err() {
                done.kept.push((round, st));
                continue;
            }
            apply(&tx, &path, job, JobEvent::Requeue)?;
            tx.execute(
                "UPDATE jobs SET attempts = 0, not_before_ms = NULL WHERE job = ?1",
                params![job],
            )
            .map_err(err)?;
            done.requeued += 1;
        }
        tx.commit().map_err(err)?;
        Ok(done)
    }

    /// Writes the heartbeat row with this process's poll counters.
    pub fn heartbeat(&self, polls: &Polls) -> Result<(), LedgerError> {
        self.conn
            .execute(
                "INSERT INTO heartbeat (id, at_ms, pid, worker_version, polls_ok, polls_failed,
                 last_poll_ok_ms) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(id) DO UPDATE SET at_ms = excluded.at_ms, pid = excluded.pid,
                 worker_version = excluded.worker_version, polls_ok = excluded.polls_ok,
                 polls_failed = excluded.polls_failed, last_poll_ok_ms = excluded.last_poll_ok_ms",
                params![
                    self.clock.wall_ms(),
                    i64::from(std::process::id()),
                    verifier_sdk::build::identity(),
                    polls.ok,
                    polls.failed,
                    polls.last_ok_ms
                ],
            )
            .map(drop)
            .map_err(self.err())
    }

    /// The last heartbeat, if any.
    pub fn last_heartbeat(&self) -> Result<Option<Heartbeat>, LedgerError> {
        self.conn
            .query_row(
                "SELECT at_ms, pid, worker_version, polls_ok, polls_failed, last_poll_ok_ms
                 FROM heartbeat WHERE id = 1",
                [],
                |r| {
                    Ok(Heartbeat {
                        at_ms: r.get(0)?,
                        pid: r.get(1)?,
                        worker_version: r.get(2)?,
                        polls: Polls {
                            ok: r.get(3)?,
                            failed: r.get(4)?,
                            last_ok_ms: r.get(5)?,
                        },
                    })
                },
            )
            .optional()
            .map_err(self.err())
    }

    /// Every job, oldest first (or only `job_id`).
    pub fn jobs(&self, job_id: Option<&str>) -> Result<Vec<JobEntry>, LedgerError> {
        self.select(
            "SELECT job_id, round, content_hash, first_seen_ms, last_seen_ms, status, attempts,
             job, expires_ms, not_before_ms FROM jobs WHERE ?1 IS NULL OR job_id = ?1
             ORDER BY first_seen_ms, job",
            job_id,
            |r| {
                Ok(JobEntry {
                    job_id: r.get(0)?,
                    round: r.get(1)?,
                    content_hash: r.get(2)?,
                    first_seen_ms: r.get(3)?,
                    last_seen_ms: r.get(4)?,
                    status: r.get(5)?,
                    attempts: r.get(6)?,
                    job: r.get(7)?,
                    expires_ms: r.get(8)?,
                    not_before_ms: r.get(9)?,
                })
            },
        )
    }

    /// Every run, in order (or only `job_id`'s).
    pub fn runs(&self, job_id: Option<&str>) -> Result<Vec<RunEntry>, LedgerError> {
        self.select(
            "SELECT run_id, job_id, started_ms, ended_ms, outcome, reason_code, reason,
             evidence, worker_version, job, cause FROM runs WHERE ?1 IS NULL OR job_id = ?1
             ORDER BY run_id",
            job_id,
            |r| {
                Ok(RunEntry {
                    run_id: r.get(0)?,
                    job_id: r.get(1)?,
                    started_ms: r.get(2)?,
                    ended_ms: r.get(3)?,
                    outcome: r.get(4)?,
                    reason_code: r.get(5)?,
                    reason: r.get(6)?,
                    evidence: r.get(7)?,
                    worker_version: r.get(8)?,
                    job: r.get(9)?,
                    cause: r.get(10)?,
                })
            },
        )
    }

    /// Every candidate written, in order (or only `job_id`'s).
    pub fn candidates(&self, job_id: Option<&str>) -> Result<Vec<CandidateEntry>, LedgerError> {
        self.select(
            "SELECT job_id, run_id, file, written_ms, job FROM candidates
             WHERE ?1 IS NULL OR job_id = ?1 ORDER BY run_id",
            job_id,
            |r| {
                Ok(CandidateEntry {
                    job_id: r.get(0)?,
                    run_id: r.get(1)?,
                    file: r.get(2)?,
                    written_ms: r.get(3)?,
                    job: r.get(4)?,
                })
            },
        )
    }

    /// The rows of `sql` (one parameter: a job id or NULL for all), each read by `row`.
    fn select<T>(
        &self,
        sql: &str,
        job_id: Option<&str>,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, LedgerError> {
        let mut stmt = self.conn.prepare(sql).map_err(self.err())?;
        stmt.query_map(params![job_id], row)
            .map_err(self.err())?
            .collect::<Result<_, _>>()
            .map_err(self.err())
    }
}

/// The state of job `job`.
fn job_state(conn: &Connection, job: i64) -> rusqlite::Result<JobState> {
    conn.query_row(
        "SELECT status FROM jobs WHERE job = ?1",
        params![job],
        |r| r.get(0),
    )
}

/// Moves job `job` by `event`: reads its state, asks the state machine, writes the state it
/// answers. An illegal move writes nothing and is an error (a bug, never a job's doing).
fn apply(
    conn: &Connection,
    path: &Path,
    job: i64,
    event: JobEvent,
) -> Result<JobState, LedgerError> {
    let err = |source| LedgerError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let from = job_state(conn, job).map_err(err)?;
    let to = next(from, event).map_err(|source| LedgerError::Transition {
        path: path.to_owned(),
        job,
        source,
    })?;
    conn.execute(
        "UPDATE jobs SET status = ?1 WHERE job = ?2",
        params![to, job],
    )
    .map_err(err)?;
    Ok(to)
}

/// Poll counters of one serving process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Polls {
    /// Polls where every verifier's query answered.
    pub ok: i64,
    /// Polls where some query failed (feed down, timeout, refused answer).
    pub failed: i64,
    /// Time of the last fully successful poll (unix ms).
    pub last_ok_ms: Option<i64>,
}

/// The heartbeat row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heartbeat {
    /// When it was written (unix ms).
    pub at_ms: i64,
    /// The serving process.
    pub pid: i64,
    /// Its version.
    pub worker_version: String,
    /// Its poll counters.
    pub polls: Polls,
}

/// How a run ended, for the job's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// A verdict candidate was written.
    Completed,
    /// Refused by rule.
    Rejected,
    /// No verdict, or an error, the job's own fault: an attempt, retried after a back-off.
    NoVerdict,
    /// No verdict, or an error, for a host cause: not an attempt, retried once the host works.
    Host,
    /// Cut short by a shutdown.
    Interrupted,
}

/// What is recorded when a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    /// For the job's status.
    pub kind: RunKind,
    /// The report row's status (`completed_passed`, …) or `interrupted`.
    pub outcome: String,
    /// Reason code.
    pub reason_code: Option<String>,
    /// Reason detail.
    pub reason: Option<String>,
    /// Evidence address.
    pub evidence: Option<String>,
    /// Candidate file written.
    pub candidate_file: Option<String>,
    /// The last moment (wall clock, unix ms) at which the job can still start and settle:
    /// its window end less what it still needs (`worker_jobs::feed::deadline::last_start`).
    /// A retry of the job's own failure is never set after it; `None`: no window known.
    pub last_start_ms: Option<i64>,
}

impl RunResult {
    /// A run cut short by a shutdown of this process.
    pub fn interrupted(detail: &str) -> Self {
        Self::without_candidate(RunKind::Interrupted, INTERRUPTED, INTERRUPTED, Some(detail))
    }

    /// A run of `kind` that wrote no candidate: the report row's `outcome`, its reason code
    /// and detail; no window known.
    pub fn without_candidate(
        kind: RunKind,
        outcome: &str,
        reason_code: &str,
        reason: Option<&str>,
    ) -> Self {
        Self {
            kind,
            outcome: outcome.into(),
            reason_code: Some(reason_code.into()),
            reason: reason.map(str::to_owned),
            evidence: None,
            candidate_file: None,
            last_start_ms: None,
        }
    }

    /// A run that wrote the candidate `candidate_file` with the evidence at `evidence`:
    /// `completed_passed`.
    pub fn passed(evidence: &str, candidate_file: &str) -> Self {
        Self {
            kind: RunKind::Completed,
            outcome: "completed_passed".into(),
            reason_code: None,
            reason: None,
            evidence: Some(evidence.into()),
            candidate_file: Some(candidate_file.into()),
            last_start_ms: None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(id: &str) -> JobKey<'_> {
        JobKey {
            job_id: id,
            round: 1,
            content_hash: "sha256:c1",
        }
    }

    /// The ledger key of the job `id` (round 1, content c1).
    fn job(ledger: &Ledger, id: &str) -> i64 {
        ledger
            .conn
            .query_row(
                "SELECT job FROM jobs WHERE job_id = ?1 AND round = 1 AND content_hash = 'sha256:c1'",
                params![id],
                |r| r.get(0),
            )
            .unwrap()
    }

    fn completed() -> RunResult {
        RunResult::passed("sha256:00", "c.json")
    }

    /// The frames the write-ahead log holds (each commit appends the pages it changed).
    fn wal_frames(ledger: &Ledger) -> i64 {
        ledger
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
            .unwrap()
    }

    #[test]
    fn serve_ledger_a_poll_listing_many_jobs_commits_once_not_once_a_job() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let ids: Vec<String> = (0..40).map(|i| format!("j{i}")).collect();
        let poll = |ledger: &mut Ledger, at| {
            ledger
                .in_one_commit(|l| {
                    ids.iter()
                        .map(|id| l.seen_until(key(id), Some(1_000_000), at))
                        .collect::<Result<Vec<_>, LedgerError>>()
                })
                .unwrap()
        };
        assert!(poll(&mut ledger, 10).iter().all(|s| s.new && s.due));
        ledger
            .conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        // The second poll only updates `last_seen_ms`: one commit of the pages holding the
        // 40 rows, where one commit a job appended a frame for each.
        assert!(poll(&mut ledger, 20).iter().all(|s| !s.new && s.due));
        let frames = wal_frames(&ledger);
        assert!(frames < 10, "{frames} frames for one poll of 40 jobs");
        let jobs = ledger.jobs(None).unwrap();
        assert!(jobs.iter().all(|j| j.last_seen_ms == 20));
        // A failing poll leaves nothing of itself behind.
        let failed: Result<(), LedgerError> = ledger.in_one_commit(|l| {
            l.seen_until(key("j0"), None, 30)?;
            Err(l.err()(rusqlite::Error::InvalidQuery))
        });
        assert!(failed.is_err());
        let j0 = ledger.jobs(Some("j0")).unwrap();
        assert_eq!(j0[0].last_seen_ms, 20);
    }

    #[test]
    fn serve_ledger_a_completed_job_is_never_due_again_even_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        assert!(ledger.seen(key("j1"), 10).unwrap().due);
        let run = ledger.start_run(job(&ledger, "j1")).unwrap();
        ledger
            .finish_run(run, job(&ledger, "j1"), &completed())
            .unwrap();
        drop(ledger);
        let mut ledger = Ledger::open(dir.path()).unwrap();
        assert!(ledger.recover_interrupted().unwrap().is_empty());
        assert!(!ledger.seen(key("j1"), 20).unwrap().due);
        let jobs = ledger.jobs(None).unwrap();
        assert_eq!((jobs[0].first_seen_ms, jobs[0].last_seen_ms), (10, 20));
        assert_eq!(ledger.candidates(Some("j1")).unwrap().len(), 1);
    }

    #[test]
    fn serve_ledger_a_run_left_open_by_a_dead_process_is_interrupted_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        ledger.seen(key("j1"), 10).unwrap();
        let run = ledger.start_run(job(&ledger, "j1")).unwrap();
        drop(ledger); // the process dies here
        let mut ledger = Ledger::open(dir.path()).unwrap();
        assert_eq!(ledger.recover_interrupted().unwrap(), vec![run]);
        let runs = ledger.runs(Some("j1")).unwrap();
        assert_eq!(runs[0].outcome.as_deref(), Some(INTERRUPTED));
        assert!(runs[0].ended_ms.is_some());
        assert_eq!(ledger.jobs(None).unwrap()[0].status, JobState::Interrupted);
        assert!(
            ledger.seen(key("j1"), 20).unwrap().due,
            "an interrupted job is retried"
        );
        assert!(ledger.candidates(None).unwrap().is_empty());
    }

    fn failed(kind: RunKind, code: &str) -> RunResult {
        RunResult::without_candidate(kind, "no_verdict", code, Some("detail"))
    }

    /// Issue 23.1: the job's own failures back off by doubling intervals and never end by a
    /// count; the job is given up when its window ends, with its last reason.
    #[test]
    fn serve_ledger_own_failures_back_off_and_are_given_up_at_the_window_not_by_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        ledger.set_retry_base(std::time::Duration::from_secs(10));
        let expires = 1_000_000;
        let mut at = 0;
        for attempt in 1..=6i64 {
            let seen = ledger.seen_until(key("j"), Some(expires), at).unwrap();
            assert!(seen.due, "attempt {attempt} at {at}");
            let run = ledger.start_run(seen.job).unwrap();
            let nv = failed(RunKind::NoVerdict, "timeout");
            ledger.finish_run_at(run, seen.job, &nv, at).unwrap();
            let wait = 10_000 * (1 << (attempt - 1));
            assert!(
                !ledger
                    .seen_until(key("j"), Some(expires), at + wait - 1)
                    .unwrap()
                    .due,
                "retried before its back-off of {wait} ms"
            );
            at += wait;
        }
        let jobs = ledger.jobs(None).unwrap();
        assert_eq!((jobs[0].status, jobs[0].attempts), (JobState::Retry, 6));
        assert_eq!(ledger.runs(None).unwrap()[0].cause.as_deref(), Some("job"));
        assert!(ledger.give_up_expired(expires - 1).unwrap().is_empty());
        let given_up = ledger.give_up_expired(expires).unwrap();
        assert_eq!(given_up.len(), 1);
        assert_eq!(given_up[0].attempts, 6);
        assert_eq!(given_up[0].last_reason.as_deref(), Some("timeout: detail"));
        let seen = ledger
            .seen_until(key("j"), Some(expires), expires + 1)
            .unwrap();
        assert!(!seen.due && seen.given_up);
        assert!(
            ledger.give_up_expired(expires + 1).unwrap().is_empty(),
            "given up twice"
        );
    }

    /// Issue 23.1: a host failure is not an attempt and sets no back-off of the job's own.
    #[test]
    fn serve_ledger_host_failures_are_not_attempts() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        for at in 0..10 {
            let seen = ledger.seen_until(key("j"), Some(1_000), at).unwrap();
            assert!(seen.due, "{at}");
            let run = ledger.start_run(seen.job).unwrap();
            let host = failed(RunKind::Host, "image_missing");
            ledger.finish_run_at(run, seen.job, &host, at).unwrap();
        }
        let jobs = ledger.jobs(None).unwrap();
        assert_eq!((jobs[0].status, jobs[0].attempts), (JobState::Pending, 0));
        assert_eq!(ledger.runs(None).unwrap()[9].cause.as_deref(), Some("host"));
    }

    /// Issue 23.1: `--retry JOB` re-queues exactly that job, `--retry-exhausted` every
    /// given-up one; a job with a verdict is kept.
    #[test]
    fn serve_ledger_retry_requeues_exactly_the_job_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        for id in ["a", "b", "c"] {
            let seen = ledger.seen_until(key(id), Some(100), 0).unwrap();
            let run = ledger.start_run(seen.job).unwrap();
            let result = if id == "c" {
                completed()
            } else {
                failed(RunKind::NoVerdict, "timeout")
            };
            ledger.finish_run_at(run, seen.job, &result, 0).unwrap();
        }
        assert_eq!(ledger.give_up_expired(100).unwrap().len(), 2);
        let done = ledger.retry("a").unwrap();
        assert_eq!(
            done,
            Requeued {
                requeued: 1,
                kept: vec![]
            }
        );
        let by_id = |l: &Ledger| {
            l.jobs(None)
                .unwrap()
                .into_iter()
                .map(|j| (j.job_id, j.status, j.attempts))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            by_id(&ledger),
            vec![
                ("a".into(), JobState::Pending, 0),
                ("b".into(), JobState::Exhausted, 1),
                ("c".into(), JobState::Completed, 0),
            ]
        );
        let kept = ledger.retry("c").unwrap();
        assert_eq!(kept.requeued, 0);
        assert_eq!(kept.kept, vec![(1, JobState::Completed.to_owned())]);
        assert_eq!(ledger.retry("nobody").unwrap(), Requeued::default());
        assert_eq!(ledger.retry_exhausted().unwrap().requeued, 1);
        assert_eq!(by_id(&ledger)[1].1, JobState::Pending);
        assert_eq!(by_id(&ledger)[2].1, JobState::Completed);
    }

    #[test]
    fn serve_ledger_only_what_a_restart_cannot_fix_is_permanent() {
        let sqlite = |code| LedgerError::Sqlite {
            path: "l".into(),
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        };
        for transient in [
            rusqlite::ffi::SQLITE_BUSY,
            rusqlite::ffi::SQLITE_LOCKED,
            rusqlite::ffi::SQLITE_FULL,
            rusqlite::ffi::SQLITE_IOERR,
        ] {
            assert!(!sqlite(transient).is_permanent(), "{transient}");
        }
        for permanent in [
            rusqlite::ffi::SQLITE_NOTADB,
            rusqlite::ffi::SQLITE_CORRUPT,
            rusqlite::ffi::SQLITE_CANTOPEN,
            rusqlite::ffi::SQLITE_READONLY,
        ] {
            assert!(sqlite(permanent).is_permanent(), "{permanent}");
        }
    }

    /// The files a crash leaves: the database and its WAL copied while the writer still has
    /// them open (nothing checkpointed), then a torn frame appended to the WAL. The committed
    /// state survives, the torn tail is ignored, and the ledger keeps working.
    #[test]
    fn serve_ledger_survives_a_crash_with_a_torn_wal_tail() {
        let live = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(live.path()).unwrap();
        ledger.seen(key("j1"), 10).unwrap();
        let run = ledger.start_run(job(&ledger, "j1")).unwrap();
        ledger
            .finish_run(run, job(&ledger, "j1"), &completed())
            .unwrap();
        let wal = live.path().join(format!("{LEDGER_FILE}-wal"));
        assert!(
            std::fs::metadata(&wal).unwrap().len() > 0,
            "the commit is in the WAL"
        );
        let crashed = tempfile::tempdir().unwrap();
        for name in [LEDGER_FILE.to_owned(), format!("{LEDGER_FILE}-wal")] {
            std::fs::copy(live.path().join(&name), crashed.path().join(&name)).unwrap();
        }
        let mut torn = std::fs::OpenOptions::new()
            .append(true)
            .open(crashed.path().join(format!("{LEDGER_FILE}-wal")))
            .unwrap();
        std::io::Write::write_all(&mut torn, &[0xA5; 3000]).unwrap();
        drop(torn);
        drop(ledger);
        let mut ledger = Ledger::open(crashed.path()).unwrap();
        assert!(ledger.recover_interrupted().unwrap().is_empty());
        assert_eq!(ledger.jobs(None).unwrap()[0].status, JobState::Completed);
        assert!(
            !ledger.seen(key("j1"), 20).unwrap().due,
            "the completed job would run again"
        );
        assert!(ledger.seen(key("j2"), 20).unwrap().due);
        let run = ledger.start_run(job(&ledger, "j2")).unwrap();
        ledger
            .finish_run(run, job(&ledger, "j2"), &completed())
            .unwrap();
        assert_eq!(ledger.candidates(None).unwrap().len(), 2);
    }

    #[test]
    fn serve_ledger_same_id_and_round_with_other_content_is_conflicting_never_due() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let first = ledger.seen(key("j1"), 10).unwrap();
        let run = ledger.start_run(first.job).unwrap();
        ledger.finish_run(run, first.job, &completed()).unwrap();
        let other = JobKey {
            content_hash: "sha256:evil",
            ..key("j1")
        };
        for at in [20, 30] {
            let seen = ledger.seen(other, at).unwrap();
            assert!(!seen.due, "changed content would run");
            assert_ne!(seen.job, first.job);
            assert_eq!(
                ledger.candidate_of(seen.job).unwrap(),
                None,
                "the first content's verdict is offered for the changed one"
            );
        }
        let jobs = ledger.jobs(Some("j1")).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].status, JobState::Conflicting);
        assert_eq!(jobs[1].content_hash.as_deref(), Some("sha256:evil"));
        assert_eq!(jobs[1].last_seen_ms, 30);
        // Even before the first content completed.
        let pending = JobKey {
            job_id: "j2",
            ..key("j1")
        };
        assert!(ledger.seen(pending, 40).unwrap().due);
        assert!(
            !ledger
                .seen(
                    JobKey {
                        content_hash: "sha256:other",
                        ..pending
                    },
                    41
                )
                .unwrap()
                .due
        );
    }

    /// A version-1 ledger (jobs keyed by id alone) as the previous worker left it: a completed
    /// job with its candidate, a job whose run a crash left open, and a job to retry.
    #[test]
    fn serve_ledger_migrates_a_version_1_database_keeping_its_history() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join(LEDGER_FILE)).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute_batch(
                "INSERT INTO jobs VALUES ('done', 7, 10, 20, 'completed', 0);
                 INSERT INTO jobs VALUES ('open', 8, 11, 21, 'running', 0);
                 INSERT INTO jobs VALUES ('retry', 9, 12, 22, 'retry', 1);
                 INSERT INTO runs VALUES (1, 'done', 100, 200, 'completed_passed', NULL, NULL,
                     'sha256:ev', '0.0.9', 42);
                 INSERT INTO runs VALUES (2, 'open', 300, NULL, NULL, NULL, NULL, NULL,
                     '0.0.9', 42);
                 INSERT INTO runs VALUES (3, 'retry', 400, 500, 'no_verdict', 'timeout', NULL,
                     NULL, '0.0.9', 42);
                 INSERT INTO candidates VALUES ('done', 1, 'candidate-done.json', 200);",
            )
            .unwrap();
        }
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let version: i64 = ledger
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, Ledger::schema_version());
        assert_eq!(ledger.recover_interrupted().unwrap(), vec![2]);
        let jobs = ledger.jobs(None).unwrap();
        let summary: Vec<_> = jobs
            .iter()
            .map(|j| {
                (
                    j.job_id.as_str(),
                    j.round,
                    j.content_hash.clone(),
                    j.status,
                    j.attempts,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("done", 7, None, JobState::Completed, 0),
                ("open", 8, None, JobState::Interrupted, 0),
                ("retry", 9, None, JobState::Retry, 1),
            ]
        );
        let runs = ledger.runs(None).unwrap();
        assert_eq!(runs.len(), 3);
        assert_eq!(runs[0].evidence.as_deref(), Some("sha256:ev"));
        assert_eq!(runs[1].outcome.as_deref(), Some(INTERRUPTED));
        assert_eq!(
            ledger.candidates(Some("done")).unwrap()[0].file,
            "candidate-done.json"
        );
        // A version-1 row does not know what content it ran: the job seen now, with its
        // content hash, is a new job (run once more), not a conflict and not completed.
        let again = ledger
            .seen(
                JobKey {
                    job_id: "done",
                    round: 7,
                    content_hash: "sha256:c1",
                },
                1000,
            )
            .unwrap();
        assert!(again.due && again.new);
        assert_eq!(ledger.candidate_of(again.job).unwrap(), None);
        // New run ids continue after the old ones.
        let run = ledger.start_run(again.job).unwrap();
        assert!(run > 3, "{run}");
    }

    /// `worker ledger` polling a state directory while `worker serve` creates the database:
    /// both see version 0, and the second to migrate must not run the migration again.
    #[test]
    fn serve_ledger_concurrent_opens_of_a_new_database_migrate_once() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let opened: Vec<_> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4)
                    .map(|_| scope.spawn(|| Ledger::open(dir.path()).map(drop)))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for result in opened {
                result.unwrap();
            }
        }
    }

    #[test]
    fn serve_ledger_a_newer_schema_is_refused_and_version_0_is_migrated() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = Connection::open(dir.path().join(LEDGER_FILE)).unwrap();
            conn.pragma_update(None, "user_version", 0).unwrap();
        }
        let ledger = Ledger::open(dir.path()).unwrap();
        let v: i64 = ledger
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, Ledger::schema_version());
        ledger
            .conn
            .pragma_update(None, "user_version", Ledger::schema_version() + 1)
            .unwrap();
        drop(ledger);
        assert!(matches!(
            Ledger::open(dir.path()),
            Err(LedgerError::TooNew { .. })
        ));
    }
    /// A ledger written by the worker before statuses were typed (commit 116b45b, schema 3,
    /// one job in every state, one run left open by a "dead" process) loads: every status
    /// reads back as its state, the open run is recovered, and the state machine holds on it.
    #[test]
    fn serve_ledger_a_ledger_written_before_typed_states_loads_and_keeps_its_states() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/ledger-v3-116b45b.sqlite3"
            ),
            dir.path().join(LEDGER_FILE),
        )
        .unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let states = |l: &Ledger| {
            l.jobs(None)
                .unwrap()
                .into_iter()
                .map(|j| (j.job_id, j.content_hash.unwrap(), j.status))
                .collect::<Vec<_>>()
        };
        let c1 = |id: &str, st| (id.to_owned(), "sha256:c1".to_owned(), st);
        let before = vec![
            c1("pending", JobState::Pending),
            c1("completed", JobState::Completed),
            c1("rejected", JobState::Rejected),
            c1("retry", JobState::Retry),
            c1("exhausted", JobState::Exhausted),
            c1("interrupted", JobState::Interrupted),
            c1("host", JobState::Pending),
            c1("running", JobState::Running),
            (
                "completed".to_owned(),
                "sha256:c2".to_owned(),
                JobState::Conflicting,
            ),
        ];
        assert_eq!(states(&ledger), before);
        let open = ledger.recover_interrupted().unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(states(&ledger)[7].2, JobState::Interrupted);
        assert_eq!(ledger.candidates(None).unwrap().len(), 1);
        assert_eq!(ledger.last_heartbeat().unwrap().unwrap().polls.ok, 3);
        // The same strings are on disk, and the state machine works over the old rows.
        let raw: Vec<String> = {
            let mut stmt = ledger
                .conn
                .prepare("SELECT status FROM jobs ORDER BY job")
                .unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(raw[1], "completed");
        assert_eq!(raw[8], "interrupted");
        assert_eq!(raw[7], "conflicting");
        let completed = job(&ledger, "completed");
        assert!(!ledger.seen(key("completed"), 400).unwrap().due);
        assert!(matches!(
            ledger.start_run(completed),
            Err(LedgerError::Transition { .. })
        ));
        assert!(ledger.seen(key("retry"), 1_000_000_000).unwrap().due);
        let retry = job(&ledger, "retry");
        ledger.start_run(retry).unwrap();
        assert_eq!(ledger.retry_exhausted().unwrap().requeued, 1);
    }

    /// The state machine, not the caller, holds the ledger: a running job is not claimed a
    /// second time, a completed one never runs again, and a refused move writes nothing.
    #[test]
    fn serve_ledger_a_claimed_or_finished_job_is_not_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let seen = ledger.seen(key("j"), 10).unwrap();
        let run = ledger.start_run(seen.job).unwrap();
        let twice = ledger.start_run(seen.job);
        assert!(
            matches!(
                &twice,
                Err(LedgerError::Transition { source, .. })
                    if source.from == JobState::Running && source.event == JobEvent::Start
            ),
            "{twice:?}"
        );
        assert_eq!(
            ledger.runs(None).unwrap().len(),
            1,
            "a second run row was written"
        );
        ledger.finish_run(run, seen.job, &completed()).unwrap();
        assert!(ledger.start_run(seen.job).is_err());
        assert!(
            ledger.finish_run(run, seen.job, &completed()).is_err(),
            "a run ended twice"
        );
        assert_eq!(ledger.candidates(None).unwrap().len(), 1);
        assert_eq!(ledger.jobs(None).unwrap()[0].status, JobState::Completed);
    }
    /// One injected clock: run, recovery and heartbeat times are the service clock's, not
    /// `SystemTime::now()` read inside the ledger.
    #[test]
    fn serve_ledger_times_come_from_the_injected_clock() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let clock = Arc::new(worker_store::clock::ManualClock::new(5_000));
        ledger.set_clock(clock.clone());
        let seen = ledger.seen(key("j"), 5_000).unwrap();
        let run = ledger.start_run(seen.job).unwrap();
        clock.advance(std::time::Duration::from_secs(2));
        ledger.finish_run(run, seen.job, &completed()).unwrap();
        ledger.heartbeat(&Polls::default()).unwrap();
        let runs = ledger.runs(None).unwrap();
        assert_eq!((runs[0].started_ms, runs[0].ended_ms), (5_000, Some(7_000)));
        assert_eq!(ledger.candidates(None).unwrap()[0].written_ms, 7_000);
        assert_eq!(ledger.last_heartbeat().unwrap().unwrap().at_ms, 7_000);
        let other = ledger.seen(key("k"), 7_000).unwrap();
        ledger.start_run(other.job).unwrap();
        drop(ledger);
        let mut ledger = Ledger::open(dir.path()).unwrap();
        ledger.set_clock(clock.clone());
        clock.advance(std::time::Duration::from_secs(1));
        ledger.recover_interrupted().unwrap();
        assert_eq!(ledger.runs(Some("k")).unwrap()[0].ended_ms, Some(8_000));
    }
}
