//! The durable ledger of `worker serve`: every job seen, every run and every candidate
//! written, in an embedded SQLite database (`ledger.sqlite3` in the state directory, WAL
//! mode, so a crash mid-write leaves the last committed state). The schema is versioned in
//! the code with `PRAGMA user_version`; each migration runs in one transaction.
//!
//! A run row is written *before* its container starts and closed after the job's row is
//! known. A run still open when the ledger is opened again belonged to a process that died
//! (SIGKILL, power loss): it is closed as `interrupted`, which is never a verdict, and its
//! job becomes retryable.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// The database file inside the state directory.
pub const LEDGER_FILE: &str = "ledger.sqlite3";

/// Attempts that ended without a verdict (no-verdict or error) after which a job is given
/// up as `exhausted`; interrupted runs do not count, they were not the job's fault.
pub const MAX_ATTEMPTS: i64 = 3;

/// Statuses of a job in the ledger.
pub mod status {
    /// Seen, not run yet (or to be retried).
    pub const PENDING: &str = "pending";
    /// A run is in progress.
    pub const RUNNING: &str = "running";
    /// A verdict candidate was written; never run again.
    pub const COMPLETED: &str = "completed";
    /// Refused by rule (invalid job, hostile archive, expired); never run again.
    pub const REJECTED: &str = "rejected";
    /// The last run ended without a verdict; retried up to [`super::MAX_ATTEMPTS`].
    pub const RETRY: &str = "retry";
    /// [`super::MAX_ATTEMPTS`] runs without a verdict; not run again.
    pub const EXHAUSTED: &str = "exhausted";
    /// The last run was interrupted (shutdown or crash); retried.
    pub const INTERRUPTED: &str = "interrupted";
}

/// The outcome recorded for a run that a shutdown or crash cut short.
pub const INTERRUPTED: &str = "interrupted";

/// Migrations, in order; `user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
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
];

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
    /// The database was written by a newer worker.
    #[error("ledger {path:?} has schema version {found}; this worker knows up to {known}")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its version.
        found: i64,
        /// Ours.
        known: i64,
    },
}

/// One job's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobEntry {
    /// The platform's job id.
    pub job_id: String,
    /// The bounty round.
    pub round: i64,
    /// First poll that listed it (unix ms).
    pub first_seen_ms: i64,
    /// Last poll that listed it (unix ms).
    pub last_seen_ms: i64,
    /// One of [`status`].
    pub status: String,
    /// Runs that ended without a verdict.
    pub attempts: i64,
}

/// One run's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunEntry {
    /// Ledger run id.
    pub run_id: i64,
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
}

/// One candidate file written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateEntry {
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
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Ledger {
    /// Opens (creating if needed) the ledger in `state_dir` and applies pending migrations.
    pub fn open(state_dir: &Path) -> Result<Self, LedgerError> {
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
        let open: Vec<(i64, String)> = {
            let mut stmt = tx
                .prepare("SELECT run_id, job_id FROM runs WHERE ended_ms IS NULL")
                .map_err(err)?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(err)?
                .collect::<Result<_, _>>()
                .map_err(err)?
        };
        let now = now_ms();
        for (run_id, job_id) in &open {
            tx.execute(
                "UPDATE runs SET ended_ms = ?1, outcome = ?2, reason_code = ?2,
                 reason = 'the worker stopped before the run ended (crash or kill)'
                 WHERE run_id = ?3",
                params![now, INTERRUPTED, run_id],
            )
            .map_err(err)?;
            tx.execute(
                "UPDATE jobs SET status = ?1 WHERE job_id = ?2 AND status = ?3",
                params![status::INTERRUPTED, job_id, status::RUNNING],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(open.into_iter().map(|(id, _)| id).collect())
    }

    /// Records that a poll listed `job_id`; returns whether it should run now (new, or
    /// retryable).
    pub fn seen(&self, job_id: &str, round: u64, at_ms: i64) -> Result<bool, LedgerError> {
        let round = i64::try_from(round).unwrap_or(i64::MAX);
        self.conn
            .execute(
                "INSERT INTO jobs (job_id, round, first_seen_ms, last_seen_ms, status)
                 VALUES (?1, ?2, ?3, ?3, ?4)
                 ON CONFLICT(job_id) DO UPDATE SET last_seen_ms = excluded.last_seen_ms",
                params![job_id, round, at_ms, status::PENDING],
            )
            .map_err(self.err())?;
        let status: String = self
            .conn
            .query_row(
                "SELECT status FROM jobs WHERE job_id = ?1",
                params![job_id],
                |r| r.get(0),
            )
            .map_err(self.err())?;
        Ok(matches!(
            status.as_str(),
            status::PENDING | status::RETRY | status::INTERRUPTED
        ))
    }

    /// Whether `job_id` is in the ledger.
    pub fn knows(&self, job_id: &str) -> Result<bool, LedgerError> {
        self.conn
            .query_row(
                "SELECT 1 FROM jobs WHERE job_id = ?1",
                params![job_id],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(self.err())
    }

    /// The first-seen time of the oldest of `job_ids` still to run (pending, running, to be
    /// retried), or `None`.
    pub fn oldest_unfinished(
        &self,
        job_ids: &std::collections::BTreeSet<String>,
    ) -> Result<Option<i64>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT first_seen_ms, status FROM jobs WHERE job_id = ?1")
            .map_err(self.err())?;
        let mut oldest: Option<i64> = None;
        for id in job_ids {
            let row: Option<(i64, String)> = stmt
                .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(self.err())?;
            if let Some((first_seen, st)) = row
                && matches!(
                    st.as_str(),
                    status::PENDING | status::RUNNING | status::RETRY | status::INTERRUPTED
                )
            {
                oldest = Some(oldest.map_or(first_seen, |o| o.min(first_seen)));
            }
        }
        Ok(oldest)
    }

    /// Opens a run of `job_id` (before anything is started for it); returns its run id.
    pub fn start_run(&mut self, job_id: &str) -> Result<i64, LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "INSERT INTO runs (job_id, started_ms, worker_version, pid) VALUES (?1, ?2, ?3, ?4)",
            params![
                job_id,
                now_ms(),
                env!("CARGO_PKG_VERSION"),
                i64::from(std::process::id())
            ],
        )
        .map_err(err)?;
        let run_id = tx.last_insert_rowid();
        tx.execute(
            "UPDATE jobs SET status = ?1 WHERE job_id = ?2",
            params![status::RUNNING, job_id],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(run_id)
    }

    /// Closes run `run_id` with its result; the job's status follows (completed and rejected
    /// are final; a run without a verdict counts as an attempt; interrupted does not).
    pub fn finish_run(
        &mut self,
        run_id: i64,
        job_id: &str,
        result: &RunResult,
    ) -> Result<(), LedgerError> {
        let path = self.path.clone();
        let err = |source| LedgerError::Sqlite {
            path: path.clone(),
            source,
        };
        let now = now_ms();
        let tx = self.conn.transaction().map_err(err)?;
        tx.execute(
            "UPDATE runs SET ended_ms = ?1, outcome = ?2, reason_code = ?3, reason = ?4,
             evidence = ?5 WHERE run_id = ?6",
            params![
                now,
                result.outcome,
                result.reason_code,
                result.reason,
                result.evidence,
                run_id
            ],
        )
        .map_err(err)?;
        if let Some(file) = &result.candidate_file {
            tx.execute(
                "INSERT INTO candidates (job_id, run_id, file, written_ms) VALUES (?1, ?2, ?3, ?4)",
                params![job_id, run_id, file, now],
            )
            .map_err(err)?;
        }
        let (new_status, counts) = match result.kind {
            RunKind::Completed => (status::COMPLETED, false),
            RunKind::Rejected => (status::REJECTED, false),
            RunKind::Interrupted => (status::INTERRUPTED, false),
            RunKind::NoVerdict => (status::RETRY, true),
        };
        tx.execute(
            "UPDATE jobs SET status = ?1, attempts = attempts + ?2 WHERE job_id = ?3",
            params![new_status, i64::from(counts), job_id],
        )
        .map_err(err)?;
        tx.execute(
            "UPDATE jobs SET status = ?1 WHERE job_id = ?2 AND status = ?3 AND attempts >= ?4",
            params![status::EXHAUSTED, job_id, status::RETRY, MAX_ATTEMPTS],
        )
        .map_err(err)?;
        tx.commit().map_err(err)
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
                    now_ms(),
                    i64::from(std::process::id()),
                    env!("CARGO_PKG_VERSION"),
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
        let mut stmt = self
            .conn
            .prepare(
                "SELECT job_id, round, first_seen_ms, last_seen_ms, status, attempts FROM jobs
                 WHERE ?1 IS NULL OR job_id = ?1 ORDER BY first_seen_ms, job_id",
            )
            .map_err(self.err())?;
        stmt.query_map(params![job_id], |r| {
            Ok(JobEntry {
                job_id: r.get(0)?,
                round: r.get(1)?,
                first_seen_ms: r.get(2)?,
                last_seen_ms: r.get(3)?,
                status: r.get(4)?,
                attempts: r.get(5)?,
            })
        })
        .map_err(self.err())?
        .collect::<Result<_, _>>()
        .map_err(self.err())
    }

    /// Every run, in order (or only `job_id`'s).
    pub fn runs(&self, job_id: Option<&str>) -> Result<Vec<RunEntry>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT run_id, job_id, started_ms, ended_ms, outcome, reason_code, reason,
                 evidence, worker_version FROM runs WHERE ?1 IS NULL OR job_id = ?1
                 ORDER BY run_id",
            )
            .map_err(self.err())?;
        stmt.query_map(params![job_id], |r| {
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
            })
        })
        .map_err(self.err())?
        .collect::<Result<_, _>>()
        .map_err(self.err())
    }

    /// Every candidate written, in order (or only `job_id`'s).
    pub fn candidates(&self, job_id: Option<&str>) -> Result<Vec<CandidateEntry>, LedgerError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT job_id, run_id, file, written_ms FROM candidates
                 WHERE ?1 IS NULL OR job_id = ?1 ORDER BY run_id",
            )
            .map_err(self.err())?;
        stmt.query_map(params![job_id], |r| {
            Ok(CandidateEntry {
                job_id: r.get(0)?,
                run_id: r.get(1)?,
                file: r.get(2)?,
                written_ms: r.get(3)?,
            })
        })
        .map_err(self.err())?
        .collect::<Result<_, _>>()
        .map_err(self.err())
    }
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
    /// No verdict, or an error: retried.
    NoVerdict,
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
}

impl RunResult {
    /// A run cut short by a shutdown of this process.
    pub fn interrupted(detail: &str) -> Self {
        Self {
            kind: RunKind::Interrupted,
            outcome: INTERRUPTED.into(),
            reason_code: Some(INTERRUPTED.into()),
            reason: Some(detail.into()),
            evidence: None,
            candidate_file: None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn completed() -> RunResult {
        RunResult {
            kind: RunKind::Completed,
            outcome: "completed_passed".into(),
            reason_code: None,
            reason: None,
            evidence: Some("sha256:00".into()),
            candidate_file: Some("c.json".into()),
        }
    }

    #[test]
    fn serve_ledger_a_completed_job_is_never_due_again_even_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        assert!(ledger.seen("j1", 1, 10).unwrap());
        let run = ledger.start_run("j1").unwrap();
        ledger.finish_run(run, "j1", &completed()).unwrap();
        drop(ledger);
        let mut ledger = Ledger::open(dir.path()).unwrap();
        assert!(ledger.recover_interrupted().unwrap().is_empty());
        assert!(!ledger.seen("j1", 1, 20).unwrap());
        let jobs = ledger.jobs(None).unwrap();
        assert_eq!((jobs[0].first_seen_ms, jobs[0].last_seen_ms), (10, 20));
        assert_eq!(ledger.candidates(Some("j1")).unwrap().len(), 1);
    }

    #[test]
    fn serve_ledger_a_run_left_open_by_a_dead_process_is_interrupted_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        ledger.seen("j1", 1, 10).unwrap();
        let run = ledger.start_run("j1").unwrap();
        drop(ledger); // the process dies here
        let mut ledger = Ledger::open(dir.path()).unwrap();
        assert_eq!(ledger.recover_interrupted().unwrap(), vec![run]);
        let runs = ledger.runs(Some("j1")).unwrap();
        assert_eq!(runs[0].outcome.as_deref(), Some(INTERRUPTED));
        assert!(runs[0].ended_ms.is_some());
        assert_eq!(ledger.jobs(None).unwrap()[0].status, status::INTERRUPTED);
        assert!(
            ledger.seen("j1", 1, 20).unwrap(),
            "an interrupted job is retried"
        );
        assert!(ledger.candidates(None).unwrap().is_empty());
    }

    #[test]
    fn serve_ledger_runs_without_a_verdict_are_retried_a_bounded_number_of_times() {
        let dir = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(dir.path()).unwrap();
        let nv = RunResult {
            kind: RunKind::NoVerdict,
            outcome: "no_verdict".into(),
            reason_code: Some("timeout".into()),
            reason: None,
            evidence: None,
            candidate_file: None,
        };
        for i in 0..MAX_ATTEMPTS {
            assert!(ledger.seen("j", 1, i).unwrap());
            let run = ledger.start_run("j").unwrap();
            ledger.finish_run(run, "j", &nv).unwrap();
        }
        assert!(!ledger.seen("j", 1, 9).unwrap());
        assert_eq!(ledger.jobs(None).unwrap()[0].status, status::EXHAUSTED);
    }

    /// The files a crash leaves: the database and its WAL copied while the writer still has
    /// them open (nothing checkpointed), then a torn frame appended to the WAL. The committed
    /// state survives, the torn tail is ignored, and the ledger keeps working.
    #[test]
    fn serve_ledger_survives_a_crash_with_a_torn_wal_tail() {
        let live = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(live.path()).unwrap();
        ledger.seen("j1", 1, 10).unwrap();
        let run = ledger.start_run("j1").unwrap();
        ledger.finish_run(run, "j1", &completed()).unwrap();
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
        assert_eq!(ledger.jobs(None).unwrap()[0].status, status::COMPLETED);
        assert!(
            !ledger.seen("j1", 1, 20).unwrap(),
            "the completed job would run again"
        );
        assert!(ledger.seen("j2", 1, 20).unwrap());
        let run = ledger.start_run("j2").unwrap();
        ledger.finish_run(run, "j2", &completed()).unwrap();
        assert_eq!(ledger.candidates(None).unwrap().len(), 2);
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
}
