//! The fleet ledger (issue #45): many `worker serve` hosts on one Postgres database instead of
//! one SQLite file each. Any host takes any job: a job is claimed with `FOR UPDATE SKIP
//! LOCKED` in deadline order (earliest window end first), held by a lease the running host
//! renews, and claimable again once the lease has ended, so a dead or partitioned host's job
//! is taken over within one lease period.
//!
//! Every claim bumps the job's fencing token; the result of a run (its run row, the job's
//! state, the candidate) is recorded only while the claim's token is still the job's, checked
//! in the same transaction that writes it. A host paused past its lease and resumed after
//! another host claimed the job is refused ([`Recorded::Fenced`]) and writes nothing.
//!
//! Lease times are the database's (`now()`), never a host's: a host whose clock is off cannot
//! make a live lease look ended, nor hold one longer than granted. Stored times are the
//! database's too, so the fleet's rows share one clock, except a failed job's back-off, which
//! spaces its retries only and is judged on the service's clock as on one host (`*_at`).
//!
//! The database is bound at its creation to one feed and one verifier set
//! ([`Binding`]); a host configured with another is refused at start, as is a database of
//! another schema version. The job state machine is the SQLite ledger's
//! ([`super::jobstate::next`]), asked before every status write.
//!
//! Not here: the serve loop's use of it (the candidate file and the fence, lease renewal
//! while a run lasts, the reconnect back-off) and `worker ledger` on a fleet database.

use std::time::Duration;

use postgres::{Client, Transaction};

use super::fleet_conn::{ConnError, FleetUrl};

use super::jobstate::{IllegalTransition, JobEvent, JobState, next};
use super::ledger::{GivenUp, JobKey, RunKind, RunResult, Seen};

/// The fleet schema this code writes (its own numbering: the SQLite ledger's `user_version`
/// is another database's).
pub const FLEET_SCHEMA_VERSION: i32 = 1;

/// The database clock in unix milliseconds, for every time the fleet stores.
const NOW_MS: &str = "(extract(epoch from now()) * 1000)::bigint";

/// Whether a job's back-off is over at `$at` (ms, the service's clock): its retry time has
/// come, or lies further ahead than the longest back-off the job could have been given
/// (`$base` × 2^(attempts−1), at most `$max`, as [`super::retry::job_backoff`]), which means
/// the clock was ahead when the retry time was written and has stepped back since; the job
/// is due then instead of waiting out the step on top of its back-off (the SQLite ledger's
/// rule). `$at`, `$base`, `$max` are placeholders.
fn back_off_over(at: &str, base: &str, max: &str) -> String {
    format!(
        "(not_before_ms IS NULL OR not_before_ms <= {at}
          OR not_before_ms - {at} > LEAST({base}::bigint << LEAST(GREATEST(attempts, 1) - 1, 20)::int,
                                         GREATEST({max}::bigint, {base}::bigint)))"
    )
}

/// `retry_base` and the longest job back-off in ms, for [`back_off_over`].
fn back_off_ms(base: Duration) -> (i64, i64) {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    (ms(base), ms(super::retry::JOB_BACKOFF_MAX))
}

/// The key of the advisory lock that serialises the schema's creation.
const MIGRATION_LOCK: i64 = 0x4645_4c45_4554; // "FLEET"

/// The schema, created in one transaction.
const SCHEMA: &str = "
    CREATE TABLE fleet_jobs (
        job BIGSERIAL PRIMARY KEY,
        job_id TEXT NOT NULL,
        round BIGINT NOT NULL,
        content_hash TEXT NOT NULL,
        first_seen_ms BIGINT NOT NULL,
        last_seen_ms BIGINT NOT NULL,
        status TEXT NOT NULL,
        attempts BIGINT NOT NULL DEFAULT 0,
        expires_ms BIGINT,
        not_before_ms BIGINT,
        fence BIGINT NOT NULL DEFAULT 0,
        lease_holder TEXT,
        lease_until TIMESTAMPTZ,
        takeovers BIGINT NOT NULL DEFAULT 0,
        UNIQUE (job_id, round, content_hash)
    );
    CREATE INDEX fleet_jobs_claimable ON fleet_jobs (expires_ms, job) WHERE status IN
        ('pending', 'retry', 'interrupted', 'running');
    CREATE TABLE fleet_runs (
        run_id BIGSERIAL PRIMARY KEY,
        job BIGINT NOT NULL REFERENCES fleet_jobs(job),
        job_id TEXT NOT NULL,
        host TEXT NOT NULL,
        fence BIGINT NOT NULL,
        started_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        outcome TEXT,
        reason_code TEXT,
        reason TEXT,
        evidence TEXT,
        cause TEXT,
        worker_version TEXT NOT NULL,
        pid BIGINT NOT NULL
    );
    CREATE INDEX fleet_runs_by_job ON fleet_runs (job);
    CREATE TABLE fleet_candidates (
        job BIGINT NOT NULL REFERENCES fleet_jobs(job),
        job_id TEXT NOT NULL,
        run_id BIGINT NOT NULL REFERENCES fleet_runs(run_id),
        host TEXT NOT NULL,
        fence BIGINT NOT NULL,
        file TEXT NOT NULL,
        written_ms BIGINT NOT NULL,
        PRIMARY KEY (job, run_id)
    );
    CREATE TABLE fleet_hosts (
        host TEXT PRIMARY KEY,
        at_ms BIGINT NOT NULL,
        pid BIGINT NOT NULL,
        worker_version TEXT NOT NULL,
        polls_ok BIGINT NOT NULL,
        polls_failed BIGINT NOT NULL,
        last_poll_ok_ms BIGINT
    );
";

/// What a fleet database serves: one feed and one verifier set, fixed when it is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The feed's URL.
    pub feed: String,
    /// The verifier addresses, lowercase hex, in the order the host lists them.
    pub verifiers: Vec<String>,
}

impl Binding {
    /// The verifier set as stored: sorted and joined, so its order on a command line does not
    /// matter.
    fn verifier_set(&self) -> String {
        let mut set: Vec<String> = self.verifiers.iter().map(|v| v.to_lowercase()).collect();
        set.sort();
        set.dedup();
        set.join(",")
    }
}

/// The fleet ledger could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The `postgres://` URL, its password or its TLS settings cannot be used.
    #[error(transparent)]
    Conn(#[from] ConnError),
    /// The server could not be reached or refused the session.
    #[error("fleet ledger {host}: connecting: {source}{why}")]
    Connect {
        /// The server's host as the URL names it (never the password).
        host: String,
        /// The causes under the client's error (a TLS refusal says why only there), each
        /// after `: `.
        why: String,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// A statement failed.
    #[error("fleet ledger: {op}: {}", server_says(source))]
    Query {
        /// What was being done.
        op: &'static str,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// The database holds another schema version.
    #[error(
        "fleet ledger has schema version {found}; this worker writes version {known} (docs/operations.md, \"Running a fleet\")"
    )]
    SchemaVersion {
        /// The database's.
        found: i32,
        /// Ours.
        known: i32,
    },
    /// The database serves another feed or verifier set.
    #[error("fleet ledger is bound to {what} {bound:?}; this host is configured with {ours:?}")]
    Bound {
        /// `feed` or `verifier set`.
        what: &'static str,
        /// The database's.
        bound: String,
        /// This host's.
        ours: String,
    },
    /// A write the job state machine refuses: a bug of the caller; nothing was written.
    #[error("fleet ledger: job {job}: {source}")]
    Transition {
        /// The job's ledger key.
        job: i64,
        /// The refused move.
        #[source]
        source: IllegalTransition,
    },
    /// The session was used after the service let it go (a bug of the caller).
    #[error("fleet ledger: the session is closed")]
    Closed,
    /// A stored status this worker does not know.
    #[error("fleet ledger: job {job}: unknown status {status:?}")]
    UnknownStatus {
        /// The job's ledger key.
        job: i64,
        /// The stored text.
        status: String,
    },
}

impl FleetError {
    /// Whether a restart cannot fix it (exit 78): another schema version, another feed or
    /// verifier set, a URL that does not parse or holds a password, an unusable password file
    /// or CA, a refused login, a missing database or a
    /// missing privilege. A server that does not answer, or drops the session, may come
    /// back (exit 1, restarted).
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Conn(_) | Self::SchemaVersion { .. } | Self::Bound { .. } => true,
            // The server's certificate does not chain to sslrootcert or does not name the
            // host: the configuration's to fix, not a restart's.
            Self::Connect { source, .. } if certificate_refused(source) => true,
            Self::Transition { .. } | Self::UnknownStatus { .. } | Self::Closed => false,
            Self::Connect { source, .. } | Self::Query { source, .. } => {
                source.as_db_error().is_some_and(|db| {
                    let code = db.code().code();
                    // 28: invalid authorisation; 3D000: no such database; 42501: no privilege.
                    code.starts_with("28") || code == "3D000" || code == "42501"
                })
            }
        }
    }
}

impl FleetError {
    /// Whether the session with the server is what failed (refused, dropped, the server shut
    /// down or restarting), so a new session may succeed: the ledger reconnects and tries
    /// again. A statement the server refused for its content is not.
    pub fn is_connection(&self) -> bool {
        match self {
            Self::Connect { .. } => !self.is_permanent(),
            Self::Query { source, .. } => match source.as_db_error() {
                None => true,
                // 08: connection exception; 57P: the server shutting down or restarting.
                Some(db) => {
                    let code = db.code().code();
                    code.starts_with("08") || code.starts_with("57P")
                }
            },
            _ => false,
        }
    }
}

/// A claim on one job: recorded results carry its fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The job's ledger key.
    pub job: i64,
    /// The platform's job id.
    pub job_id: String,
    /// The fencing token of this claim.
    pub fence: i64,
    /// The run row written for it.
    pub run_id: i64,
    /// Whether it took over a lease that had ended (a host died or was cut off).
    pub took_over: bool,
}

/// Whether a run's result was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Recorded: the claim was still the job's.
    Yes,
    /// Refused: the job was claimed again since (this claim's lease had ended); nothing was
    /// written, and the candidate must not be published.
    Fenced {
        /// This claim's token.
        held: i64,
        /// The job's token now.
        current: i64,
    },
}

/// The fleet as one host sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetView {
    /// Jobs under a live lease of this host.
    pub leased_here: i64,
    /// Jobs under a live lease of another host.
    pub leased_elsewhere: i64,
    /// Leases that ended and were taken over, over the database's life.
    pub takeovers: i64,
}

/// One run's row, for the operator and the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetRun {
    /// Ledger run id.
    pub run_id: i64,
    /// The platform's job id.
    pub job_id: String,
    /// The host that ran it.
    pub host: String,
    /// Its claim's fencing token.
    pub fence: i64,
    /// The outcome, once ended.
    pub outcome: Option<String>,
    /// Its reason code.
    pub reason_code: Option<String>,
    /// Its reason.
    pub reason: Option<String>,
}

/// One candidate recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetCandidate {
    /// The platform's job id.
    pub job_id: String,
    /// The run that produced it.
    pub run_id: i64,
    /// The host that ran it.
    pub host: String,
    /// Its claim's fencing token.
    pub fence: i64,
    /// The file name.
    pub file: String,
}

/// One host's session on the fleet database.
pub struct FleetLedger {
    url: FleetUrl,
    client: Client,
    host: String,
    retry_base: Duration,
}

impl std::fmt::Debug for FleetLedger {
    // The URL holds the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLedger")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// The client's error with the server's own words when the server refused the statement: the
/// client's text alone is "db error", which tells an operator nothing (a trigger, a
/// constraint, a privilege, a full disk on the server).
fn server_says(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!(
            "{error}: {} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        ),
        None => error.to_string(),
    }
}

fn query(op: &'static str) -> impl Fn(postgres::Error) -> FleetError {
    move |source| FleetError::Query { op, source }
}

/// Whether `url` names a fleet database (the one place that tells the backends apart).
pub fn is_fleet_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

impl FleetLedger {
    /// Connects as the host `host` (its name in leases, runs and candidates), creates the
    /// schema in a new database, and refuses one of another schema version or bound to
    /// another feed or verifier set.
    pub fn open(url: &FleetUrl, binding: &Binding, host: &str) -> Result<Self, FleetError> {
        let mut url = url.clone();
        url.default_connect_timeout(Duration::from_secs(10));
        url.default_liveness();
        let client = connect(&url)?;
        let mut ledger = Self {
            url,
            client,
            host: host.to_owned(),
            retry_base: Duration::from_secs(60),
        };
        ledger.migrate(binding)?;
        Ok(ledger)
    }

    /// The base of the back-off after a job's own failure (the poll interval; default 60 s).
    pub fn set_retry_base(&mut self, base: Duration) {
        self.retry_base = base;
    }

    /// This host's name in the fleet.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Opens a new session when the server dropped the last one (a restart of Postgres, a
    /// network cut); the caller backs off between failed attempts.
    pub fn reconnect_if_closed(&mut self) -> Result<(), FleetError> {
        if self.client.is_closed() {
            self.client = connect(&self.url)?;
        }
        Ok(())
    }

    fn migrate(&mut self, binding: &Binding) -> Result<(), FleetError> {
        let mut tx = self.client.transaction().map_err(query("migrating"))?;
        // Two hosts starting on a new database at once must not both create the schema.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(query("migrating"))?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS fleet_meta (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                schema_version INTEGER NOT NULL,
                feed TEXT NOT NULL,
                verifiers TEXT NOT NULL
            )",
        )
        .map_err(query("migrating"))?;
        let ours = binding.verifier_set();
        let row = tx
            .query_opt(
                "SELECT schema_version, feed, verifiers FROM fleet_meta WHERE id = 1",
                &[],
            )
            .map_err(query("reading the schema version"))?;
        let Some(row) = row else {
            tx.batch_execute(SCHEMA)
                .map_err(query("creating the schema"))?;
            tx.execute(
                "INSERT INTO fleet_meta (id, schema_version, feed, verifiers) VALUES (1, $1, $2, $3)",
                &[&FLEET_SCHEMA_VERSION, &binding.feed, &ours],
            )
            .map_err(query("binding the database"))?;
            return tx.commit().map_err(query("migrating"));
        };
        let found: i32 = row.get(0);
        if found != FLEET_SCHEMA_VERSION {
            return Err(FleetError::SchemaVersion {
                found,
                known: FLEET_SCHEMA_VERSION,
            });
        }
        let feed: String = row.get(1);
        if feed != binding.feed {
            return Err(FleetError::Bound {
                what: "feed",
                bound: feed,
                ours: binding.feed.clone(),
            });
        }
        let verifiers: String = row.get(2);
        if verifiers != ours {
            return Err(FleetError::Bound {
                what: "verifier set",
                bound: verifiers,
                ours,
            });
        }
        tx.commit().map_err(query("migrating"))
    }

    /// Records that a poll listed the job `key`, ending its window at `expires_ms`. An
    /// idempotent upsert: every host's poll of the same job lands on one row. A job whose id
    /// and round the database holds with other content is recorded as
    /// [`JobState::Conflicting`] and never claimed.
    pub fn seen(&mut self, key: JobKey<'_>, expires_ms: Option<i64>) -> Result<Seen, FleetError> {
        self.seen_at(key, expires_ms, None)
    }

    /// [`FleetLedger::seen`] with a job's back-off judged at `at_ms` (the service's clock, as
    /// the SQLite ledger judges it; `None`: the database's). A back-off only spaces a job's
    /// retries, so a host's clock may decide it; leases never are.
    pub fn seen_at(
        &mut self,
        key: JobKey<'_>,
        expires_ms: Option<i64>,
        at_ms: Option<i64>,
    ) -> Result<Seen, FleetError> {
        let round = i64::try_from(key.round).unwrap_or(i64::MAX);
        let (base_ms, max_ms) = back_off_ms(self.retry_base);
        let mut tx = self
            .client
            .transaction()
            .map_err(query("recording a job"))?;
        // Two hosts seeing two contents of one id and round at once: one of them waits, so
        // the second content is recorded as conflicting whoever is first.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2::bigint::text, 45))",
            &[&key.job_id, &round],
        )
        .map_err(query("recording a job"))?;
        let over = back_off_over(&format!("COALESCE($7::bigint, {NOW_MS})"), "$8", "$9");
        let sql = format!(
            "INSERT INTO fleet_jobs (job_id, round, content_hash, first_seen_ms, last_seen_ms,
                status, expires_ms)
             VALUES ($1, $2, $3, {NOW_MS}, {NOW_MS},
                CASE WHEN EXISTS (SELECT 1 FROM fleet_jobs WHERE job_id = $1 AND round = $2
                    AND content_hash <> $3) THEN $5 ELSE $6 END, $4)
             ON CONFLICT (job_id, round, content_hash) DO UPDATE
                SET last_seen_ms = EXCLUDED.last_seen_ms,
                    expires_ms = COALESCE(fleet_jobs.expires_ms, EXCLUDED.expires_ms)
             RETURNING job, status, (xmax = 0),
                {over},
                (status = 'running' AND lease_until < now())"
        );
        let row = tx
            .query_one(
                sql.as_str(),
                &[
                    &key.job_id,
                    &round,
                    &key.content_hash,
                    &expires_ms,
                    &JobState::first_seen(true).as_str(),
                    &JobState::first_seen(false).as_str(),
                    &at_ms,
                    &base_ms,
                    &max_ms,
                ],
            )
            .map_err(query("recording a job"))?;
        tx.commit().map_err(query("recording a job"))?;
        let job: i64 = row.get(0);
        let status = parse_state(job, row.get(1))?;
        let new: bool = row.get(2);
        let back_off_over: bool = row.get(3);
        let lease_ended: bool = row.get(4);
        Ok(Seen {
            job,
            due: (status.may_start() && back_off_over) || lease_ended,
            new,
            given_up: status == JobState::Exhausted,
        })
    }

    /// Claims the due job whose window ends first, for `lease`: a job to run (pending,
    /// interrupted, or to be retried after its back-off) or one whose lease has ended (its
    /// open run is closed as `interrupted` and the job taken over). Rows another host is
    /// claiming are skipped, not waited for. `None` when nothing is due.
    pub fn claim(&mut self, lease: Duration) -> Result<Option<Claim>, FleetError> {
        self.claim_where(None, lease, None)
    }

    /// [`FleetLedger::claim`] of the job `job` only (the serve loop's own deadline order
    /// picks it): `None` when it is not due or another host is claiming or holding it.
    pub fn claim_job(&mut self, job: i64, lease: Duration) -> Result<Option<Claim>, FleetError> {
        self.claim_where(Some(job), lease, None)
    }

    /// [`FleetLedger::claim_job`] with the job's back-off judged at `at_ms` (see
    /// [`FleetLedger::seen_at`]).
    pub fn claim_job_at(
        &mut self,
        job: i64,
        lease: Duration,
        at_ms: i64,
    ) -> Result<Option<Claim>, FleetError> {
        self.claim_where(Some(job), lease, Some(at_ms))
    }

    fn claim_where(
        &mut self,
        only: Option<i64>,
        lease: Duration,
        at_ms: Option<i64>,
    ) -> Result<Option<Claim>, FleetError> {
        let (base_ms, max_ms) = back_off_ms(self.retry_base);
        let mut tx = self.client.transaction().map_err(query("claiming"))?;
        let over = back_off_over(&format!("COALESCE($6::bigint, {NOW_MS})"), "$7", "$8");
        let sql = format!(
            "SELECT job, job_id, status FROM fleet_jobs
             WHERE ($5::bigint IS NULL OR job = $5)
               AND ((status IN ($1, $2, $3) AND {over})
                OR (status = $4 AND lease_until < now()))
             ORDER BY expires_ms ASC NULLS LAST, job
             LIMIT 1 FOR UPDATE SKIP LOCKED"
        );
        let row = tx
            .query_opt(
                sql.as_str(),
                &[
                    &JobState::Pending.as_str(),
                    &JobState::Retry.as_str(),
                    &JobState::Interrupted.as_str(),
                    &JobState::Running.as_str(),
                    &only,
                    &at_ms,
                    &base_ms,
                    &max_ms,
                ],
            )
            .map_err(query("claiming"))?;
        let Some(row) = row else {
            tx.commit().map_err(query("claiming"))?;
            return Ok(None);
        };
        let job: i64 = row.get(0);
        let job_id: String = row.get(1);
        let status = parse_state(job, row.get(2))?;
        let took_over = status == JobState::Running;
        if took_over {
            let reason = format!(
                "the lease of the host running it ended before the run did; taken over by {}",
                self.host
            );
            tx.execute(
                &format!(
                    "UPDATE fleet_runs SET ended_ms = {NOW_MS}, outcome = 'interrupted',
                     reason_code = 'lease_expired', reason = $2
                     WHERE job = $1 AND ended_ms IS NULL"
                ),
                &[&job, &reason],
            )
            .map_err(query("taking over a lease"))?;
            apply(&mut tx, job, JobEvent::Interrupt)?;
            tx.execute(
                "UPDATE fleet_jobs SET takeovers = takeovers + 1 WHERE job = $1",
                &[&job],
            )
            .map_err(query("taking over a lease"))?;
        }
        apply(&mut tx, job, JobEvent::Start)?;
        let fence: i64 = tx
            .query_one(
                "UPDATE fleet_jobs SET fence = fence + 1, lease_holder = $2,
                 lease_until = now() + make_interval(secs => $3)
                 WHERE job = $1 RETURNING fence",
                &[&job, &self.host, &lease.as_secs_f64()],
            )
            .map_err(query("claiming"))?
            .get(0);
        let run_id: i64 = tx
            .query_one(
                &format!(
                    "INSERT INTO fleet_runs (job, job_id, host, fence, started_ms, worker_version, pid)
                     VALUES ($1, $2, $3, $4, {NOW_MS}, $5, $6) RETURNING run_id"
                ),
                &[
                    &job,
                    &job_id,
                    &self.host,
                    &fence,
                    &verifier_sdk::build::identity(),
                    &i64::from(std::process::id()),
                ],
            )
            .map_err(query("claiming"))?
            .get(0);
        tx.commit().map_err(query("claiming"))?;
        Ok(Some(Claim {
            job,
            job_id,
            fence,
            run_id,
            took_over,
        }))
    }

    /// Extends `claim`'s lease to `lease` from the database's now. `false` when the claim is
    /// no longer the job's (taken over): the run should stop, its result will be refused.
    pub fn renew(&mut self, claim: &Claim, lease: Duration) -> Result<bool, FleetError> {
        let n = self
            .client
            .execute(
                "UPDATE fleet_jobs SET lease_until = now() + make_interval(secs => $3)
                 WHERE job = $1 AND fence = $2 AND status = $4",
                &[
                    &claim.job,
                    &claim.fence,
                    &lease.as_secs_f64(),
                    &JobState::Running.as_str(),
                ],
            )
            .map_err(query("renewing a lease"))?;
        Ok(n == 1)
    }

    /// Records how `claim`'s run ended (the run row, the job's state, the candidate), only
    /// while `claim` is still the job's: checked in the same transaction that writes.
    pub fn finish(&mut self, claim: &Claim, result: &RunResult) -> Result<Recorded, FleetError> {
        self.finish_at(claim, result, None)
    }

    /// [`FleetLedger::finish`], a failed job's back-off counted from `at_ms` (see
    /// [`FleetLedger::seen_at`]).
    pub fn finish_at(
        &mut self,
        claim: &Claim,
        result: &RunResult,
        at_ms: Option<i64>,
    ) -> Result<Recorded, FleetError> {
        let base = self.retry_base;
        let mut tx = self
            .client
            .transaction()
            .map_err(query("recording a run"))?;
        let row = tx
            .query_one(
                "SELECT fence, attempts FROM fleet_jobs WHERE job = $1 FOR UPDATE",
                &[&claim.job],
            )
            .map_err(query("recording a run"))?;
        let current: i64 = row.get(0);
        let attempts: i64 = row.get(1);
        // The fence: the row is locked until this transaction ends, so no claim can slip in
        // between this check and the writes below.
        if current != claim.fence {
            tx.rollback().map_err(query("recording a run"))?;
            return Ok(Recorded::Fenced {
                held: claim.fence,
                current,
            });
        }
        // Tried again after a session was cut: the first attempt may have committed before
        // its answer was lost. Still our claim and the run already closed: it was recorded.
        let ended = tx
            .query_one(
                "SELECT ended_ms IS NOT NULL FROM fleet_runs WHERE run_id = $1",
                &[&claim.run_id],
            )
            .map_err(query("recording a run"))?
            .get::<_, bool>(0);
        if ended {
            tx.rollback().map_err(query("recording a run"))?;
            return Ok(Recorded::Yes);
        }
        let event = match result.kind {
            RunKind::Completed => JobEvent::Complete,
            RunKind::Rejected => JobEvent::Reject,
            RunKind::NoVerdict => JobEvent::OwnFailure,
            RunKind::Interrupted => JobEvent::Interrupt,
            RunKind::Host => JobEvent::HostFailure {
                attempted: attempts > 0,
            },
        };
        apply(&mut tx, claim.job, event)?;
        let cause = match result.kind {
            RunKind::NoVerdict => Some("job"),
            RunKind::Host => Some("host"),
            _ => None,
        };
        tx.execute(
            &format!(
                "UPDATE fleet_runs SET ended_ms = {NOW_MS}, outcome = $2, reason_code = $3,
                 reason = $4, evidence = $5, cause = $6 WHERE run_id = $1"
            ),
            &[
                &claim.run_id,
                &result.outcome,
                &result.reason_code,
                &result.reason,
                &result.evidence,
                &cause,
            ],
        )
        .map_err(query("recording a run"))?;
        if let Some(file) = &result.candidate_file {
            tx.execute(
                &format!(
                    "INSERT INTO fleet_candidates (job, job_id, run_id, host, fence, file, written_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, {NOW_MS})"
                ),
                &[
                    &claim.job,
                    &claim.job_id,
                    &claim.run_id,
                    &self.host,
                    &claim.fence,
                    file,
                ],
            )
            .map_err(query("recording a candidate"))?;
        }
        if result.kind == RunKind::NoVerdict {
            let at = match at_ms {
                Some(at) => at,
                None => tx
                    .query_one(&format!("SELECT {NOW_MS}"), &[])
                    .map_err(query("recording a run"))?
                    .get::<_, i64>(0),
            };
            // The one rule of both ledgers: the back-off, never past the job's last start.
            let not_before = super::retry::job_retry_at(
                at,
                base,
                attempts.saturating_add(1),
                result.last_start_ms,
            );
            tx.execute(
                "UPDATE fleet_jobs SET attempts = attempts + 1, not_before_ms = $2 WHERE job = $1",
                &[&claim.job, &not_before],
            )
            .map_err(query("recording a run"))?;
        }
        tx.execute(
            "UPDATE fleet_jobs SET lease_holder = NULL, lease_until = NULL WHERE job = $1",
            &[&claim.job],
        )
        .map_err(query("recording a run"))?;
        tx.commit().map_err(query("recording a run"))?;
        Ok(Recorded::Yes)
    }

    /// Closes as `interrupted` the runs this host (the same host name) left open when it
    /// stopped, and makes their jobs claimable at once instead of after their lease; returns
    /// the run ids. Called at start-up, before any claim.
    pub fn recover_own(&mut self) -> Result<Vec<i64>, FleetError> {
        let mut tx = self.client.transaction().map_err(query("recovering"))?;
        let rows = tx
            .query(
                &format!(
                    "UPDATE fleet_runs SET ended_ms = {NOW_MS}, outcome = 'interrupted',
                     reason_code = 'interrupted',
                     reason = 'the worker stopped before the run ended (crash or kill)'
                     WHERE host = $1 AND ended_ms IS NULL RETURNING run_id, job, fence"
                ),
                &[&self.host],
            )
            .map_err(query("recovering"))?;
        let mut closed = Vec::with_capacity(rows.len());
        for row in rows {
            let job: i64 = row.get(1);
            let fence: i64 = row.get(2);
            // Only while the job is still under this host's claim: another host may have
            // taken it over meanwhile.
            let held = tx
                .query_opt(
                    "SELECT 1 FROM fleet_jobs WHERE job = $1 AND fence = $2 AND status = $3
                     FOR UPDATE",
                    &[&job, &fence, &JobState::Running.as_str()],
                )
                .map_err(query("recovering"))?
                .is_some();
            if held {
                apply(&mut tx, job, JobEvent::Interrupt)?;
                tx.execute(
                    "UPDATE fleet_jobs SET lease_holder = NULL, lease_until = NULL WHERE job = $1",
                    &[&job],
                )
                .map_err(query("recovering"))?;
            }
            closed.push(row.get(0));
        }
        tx.commit().map_err(query("recovering"))?;
        Ok(closed)
    }

    /// The file of the last candidate this host recorded for the job `job` (the file is in
    /// this host's output directory; another host's is in its own).
    pub fn own_candidate_of(&mut self, job: i64) -> Result<Option<String>, FleetError> {
        let row = self
            .client
            .query_opt(
                "SELECT file FROM fleet_candidates WHERE job = $1 AND host = $2
                 ORDER BY run_id DESC LIMIT 1",
                &[&job, &self.host],
            )
            .map_err(query("reading a candidate"))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The first-seen time of the oldest of `jobs` still to run, or `None`.
    pub fn oldest_unfinished(&mut self, jobs: &[i64]) -> Result<Option<i64>, FleetError> {
        let row = self
            .client
            .query_one(
                "SELECT min(first_seen_ms) FROM fleet_jobs WHERE job = ANY($1)
                 AND status IN ($2, $3, $4, $5)",
                &[
                    &jobs,
                    &JobState::Pending.as_str(),
                    &JobState::Running.as_str(),
                    &JobState::Retry.as_str(),
                    &JobState::Interrupted.as_str(),
                ],
            )
            .map_err(query("reading the oldest job"))?;
        Ok(row.get(0))
    }

    /// Writes this host's heartbeat row with its poll counters.
    pub fn heartbeat(
        &mut self,
        ok: i64,
        failed: i64,
        last_ok_ms: Option<i64>,
    ) -> Result<(), FleetError> {
        self.client
            .execute(
                &format!(
                    "INSERT INTO fleet_hosts (host, at_ms, pid, worker_version, polls_ok,
                     polls_failed, last_poll_ok_ms) VALUES ($1, {NOW_MS}, $2, $3, $4, $5, $6)
                     ON CONFLICT (host) DO UPDATE SET at_ms = EXCLUDED.at_ms, pid = EXCLUDED.pid,
                     worker_version = EXCLUDED.worker_version, polls_ok = EXCLUDED.polls_ok,
                     polls_failed = EXCLUDED.polls_failed,
                     last_poll_ok_ms = EXCLUDED.last_poll_ok_ms"
                ),
                &[
                    &self.host,
                    &i64::from(std::process::id()),
                    &verifier_sdk::build::identity(),
                    &ok,
                    &failed,
                    &last_ok_ms,
                ],
            )
            .map_err(query("writing the heartbeat"))?;
        Ok(())
    }

    /// Gives up every job still to run whose window has ended at `at_ms` (the service's
    /// clock: a window is the protocol's time, judged as the liveness checks judge it; a
    /// lease is the database's); returns them with what the operator's warning says of each
    /// (as the SQLite ledger does: its round, attempts and last run's reason).
    pub fn give_up_expired(&mut self, at_ms: i64) -> Result<Vec<GivenUp>, FleetError> {
        let mut tx = self.client.transaction().map_err(query("giving up"))?;
        let rows = tx
            .query(
                "SELECT j.job, j.job_id, j.round, j.attempts,
                 (SELECT r.reason_code || ': ' || COALESCE(r.reason, '') FROM fleet_runs r
                  WHERE r.job = j.job AND r.reason_code IS NOT NULL
                  ORDER BY r.run_id DESC LIMIT 1)
                 FROM fleet_jobs j WHERE j.status IN ($1, $2, $3)
                 AND j.expires_ms IS NOT NULL AND j.expires_ms <= $4
                 ORDER BY j.job FOR UPDATE OF j SKIP LOCKED",
                &[
                    &JobState::Pending.as_str(),
                    &JobState::Retry.as_str(),
                    &JobState::Interrupted.as_str(),
                    &at_ms,
                ],
            )
            .map_err(query("giving up"))?;
        let mut given_up = Vec::with_capacity(rows.len());
        for row in rows {
            apply(&mut tx, row.get(0), JobEvent::GiveUp)?;
            given_up.push(GivenUp {
                job_id: row.get(1),
                round: row.get(2),
                attempts: row.get(3),
                last_reason: row.get(4),
            });
        }
        tx.commit().map_err(query("giving up"))?;
        Ok(given_up)
    }

    /// The fleet as this host sees it (for `/metrics` and `/healthz`).
    pub fn view(&mut self) -> Result<FleetView, FleetError> {
        let row = self
            .client
            .query_one(
                "SELECT
                    count(*) FILTER (WHERE status = $2 AND lease_until >= now() AND lease_holder = $1),
                    count(*) FILTER (WHERE status = $2 AND lease_until >= now() AND lease_holder <> $1),
                    COALESCE(sum(takeovers), 0)::bigint
                 FROM fleet_jobs",
                &[&self.host, &JobState::Running.as_str()],
            )
            .map_err(query("reading the fleet"))?;
        Ok(FleetView {
            leased_here: row.get(0),
            leased_elsewhere: row.get(1),
            takeovers: row.get(2),
        })
    }

    /// Every job's state, oldest first: (job id, state).
    pub fn states(&mut self) -> Result<Vec<(String, JobState)>, FleetError> {
        let rows = self
            .client
            .query(
                "SELECT job, job_id, status FROM fleet_jobs ORDER BY job",
                &[],
            )
            .map_err(query("listing jobs"))?;
        rows.iter()
            .map(|r| Ok((r.get(1), parse_state(r.get(0), r.get(2))?)))
            .collect()
    }

    /// Every run, in order.
    pub fn runs(&mut self) -> Result<Vec<FleetRun>, FleetError> {
        read_runs(&mut self.client).map_err(query("listing runs"))
    }

    /// Every candidate recorded, in order.
    pub fn candidates(&mut self) -> Result<Vec<FleetCandidate>, FleetError> {
        read_candidates(&mut self.client).map_err(query("listing candidates"))
    }
}

/// Every run in `fleet_runs`, in order, over any connection to the fleet's database: the
/// ledger's own, or that of a reader that only looks and registers no session (the chaos
/// lane's).
pub fn read_runs(client: &mut postgres::Client) -> Result<Vec<FleetRun>, postgres::Error> {
    let rows = client.query(
        "SELECT run_id, job_id, host, fence, outcome, reason_code, reason FROM fleet_runs
         ORDER BY run_id",
        &[],
    )?;
    Ok(rows
        .iter()
        .map(|r| FleetRun {
            run_id: r.get(0),
            job_id: r.get(1),
            host: r.get(2),
            fence: r.get(3),
            outcome: r.get(4),
            reason_code: r.get(5),
            reason: r.get(6),
        })
        .collect())
}

/// Every candidate in `fleet_candidates`, in order, over any connection (as [`read_runs`]).
pub fn read_candidates(
    client: &mut postgres::Client,
) -> Result<Vec<FleetCandidate>, postgres::Error> {
    let rows = client.query(
        "SELECT job_id, run_id, host, fence, file FROM fleet_candidates ORDER BY run_id",
        &[],
    )?;
    Ok(rows
        .iter()
        .map(|r| FleetCandidate {
            job_id: r.get(0),
            run_id: r.get(1),
            host: r.get(2),
            fence: r.get(3),
            file: r.get(4),
        })
        .collect())
}

fn connect(url: &FleetUrl) -> Result<Client, FleetError> {
    url.connect().map_err(|source| FleetError::Connect {
        host: url.host(),
        why: causes(&source),
        source,
    })
}

/// The causes under `error`, each after `: ` (none of them holds the password: the client
/// never puts it in an error).
fn causes(error: &postgres::Error) -> String {
    let mut text = String::new();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

/// Whether TLS refused the server's certificate somewhere under `error`.
fn certificate_refused(error: &postgres::Error) -> bool {
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        let tls = cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if matches!(tls, Some(rustls::Error::InvalidCertificate(_))) {
            return true;
        }
        next = cause.source();
    }
    false
}

fn parse_state(job: i64, text: &str) -> Result<JobState, FleetError> {
    text.parse().map_err(|_| FleetError::UnknownStatus {
        job,
        status: text.to_owned(),
    })
}

/// Moves job `job` by `event` inside `tx`: reads its state, asks the state machine, writes
/// the state it answers. An illegal move writes nothing and is an error.
fn apply(tx: &mut Transaction<'_>, job: i64, event: JobEvent) -> Result<JobState, FleetError> {
    let row = tx
        .query_one("SELECT status FROM fleet_jobs WHERE job = $1", &[&job])
        .map_err(query("reading a job's state"))?;
    let from = parse_state(job, row.get(0))?;
    let to = next(from, event).map_err(|source| FleetError::Transition { job, source })?;
    tx.execute(
        "UPDATE fleet_jobs SET status = $1 WHERE job = $2",
        &[&to.as_str(), &job],
    )
    .map_err(query("writing a job's state"))?;
    Ok(to)
}
