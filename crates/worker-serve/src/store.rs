//! The ledger as the serve loop sees it: one trait, [`JobLedger`], over its two backends,
//! and the one place that picks between them ([`LedgerLocation`], [`AnyLedger`]). SQLite
//! ([`super::ledger::Ledger`], one host, the default) and Postgres
//! ([`super::fleet::FleetLedger`], a fleet of hosts on one database, issue #45).
//!
//! The loop asks the same questions of both; where a fleet differs it answers through the
//! same calls: starting a run is a claim another host may have won ([`JobLedger::start_run`]
//! answers `None`), recording a run is refused once another host holds the job
//! ([`Recorded::Fenced`]), leases are renewed on the loop's tick ([`JobLedger::renew`]; a
//! single host holds no lease).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use worker_store::clock::Clock;

use super::fleet::{Binding, Claim, FleetError, FleetLedger, FleetView, Recorded, is_fleet_url};
use super::fleet_conn::{ConnError, FleetUrl};
use super::ledger::{GivenUp, JobKey, Ledger, LedgerError, Polls, RunResult, Seen};
use super::shutdown::Shutdown;
use super::telemetry::LedgerOutage;

/// A ledger operation failed, in either backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The SQLite ledger.
    #[error(transparent)]
    Sqlite(#[from] LedgerError),
    /// The fleet ledger.
    #[error(transparent)]
    Fleet(#[from] FleetError),
}

impl StoreError {
    /// Whether a restart cannot fix it (exit 78).
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Sqlite(e) => e.is_permanent(),
            Self::Fleet(e) => e.is_permanent(),
        }
    }
}

/// What the serve loop records and asks.
pub trait JobLedger: Send {
    /// The clock the backend's own times come from, where it keeps any (SQLite; a fleet's
    /// times are the database's).
    fn set_clock(&mut self, clock: Arc<dyn Clock>);
    /// A poll's sightings, committed at once where the backend batches them.
    fn in_one_commit<T, E: From<StoreError>>(
        &mut self,
        sightings: impl FnOnce(&Self) -> Result<T, E>,
    ) -> Result<T, E>;
    /// [`Ledger::seen_until`].
    fn seen_until(
        &self,
        key: JobKey<'_>,
        expires_ms: Option<i64>,
        at_ms: i64,
    ) -> Result<Seen, StoreError>;
    /// The file of this host's last candidate for `job`.
    fn candidate_of(&self, job: i64) -> Result<Option<String>, StoreError>;
    /// The first-seen time of the oldest of `jobs` still to run.
    fn oldest_unfinished(&self, jobs: &BTreeMap<i64, String>) -> Result<Option<i64>, StoreError>;
    /// Gives up the jobs whose window has ended.
    fn give_up_expired(&mut self, at_ms: i64) -> Result<Vec<GivenUp>, StoreError>;
    /// Opens a run of `job` at `at_ms` (the service's clock); `None` when another host has it
    /// (a fleet only).
    fn start_run(&mut self, job: i64, at_ms: i64) -> Result<Option<i64>, StoreError>;
    /// Records how the run ended; [`Recorded::Fenced`] when another host holds the job now
    /// (nothing recorded: its candidate must not be offered).
    fn finish_run_at(
        &mut self,
        run_id: i64,
        job: i64,
        result: &RunResult,
        at_ms: i64,
    ) -> Result<Recorded, StoreError>;
    /// The heartbeat with this process's poll counters.
    fn heartbeat(&self, polls: &Polls) -> Result<(), StoreError>;
    /// Renews the leases of the runs under way (a fleet only); the run ids whose claim was
    /// lost since the last call (each named once; a lost claim is not renewed again).
    fn renew(&mut self) -> Result<Vec<i64>, StoreError>;
    /// How often [`JobLedger::renew`] is due, if ever.
    fn renew_every(&self) -> Option<Duration>;
    /// The fleet as this host sees it (a fleet only).
    fn fleet_view(&self) -> Result<Option<FleetView>, StoreError>;
    /// Where an outage of the ledger's database is said while it reconnects (a fleet only:
    /// SQLite is a local file).
    fn report_outage_to(&mut self, outage: LedgerOutage);
    /// The service's stop request, which ends the reconnecting to the ledger's database at
    /// its next back-off step (a fleet only: SQLite does not reconnect).
    fn stop_retrying_on(&mut self, shutdown: Shutdown);
}

/// A poll's own error or the SQLite commit's, apart (the SQLite batch wants errors it can
/// make from its own).
enum Inner<E> {
    Outer(E),
    Ledger(LedgerError),
}

impl<E> From<LedgerError> for Inner<E> {
    fn from(e: LedgerError) -> Self {
        Self::Ledger(e)
    }
}

impl JobLedger for Ledger {
    fn set_clock(&mut self, clock: Arc<dyn Clock>) {
        Ledger::set_clock(self, clock);
    }
    fn in_one_commit<T, E: From<StoreError>>(
        &mut self,
        sightings: impl FnOnce(&Self) -> Result<T, E>,
    ) -> Result<T, E> {
        Ledger::in_one_commit(self, |l| sightings(l).map_err(Inner::Outer)).map_err(|e| match e {
            Inner::Outer(e) => e,
            Inner::Ledger(e) => StoreError::Sqlite(e).into(),
        })
    }
    fn seen_until(
        &self,
        key: JobKey<'_>,
        expires_ms: Option<i64>,
        at_ms: i64,
    ) -> Result<Seen, StoreError> {
        Ok(Ledger::seen_until(self, key, expires_ms, at_ms)?)
    }
    fn candidate_of(&self, job: i64) -> Result<Option<String>, StoreError> {
        Ok(Ledger::candidate_of(self, job)?)
    }
    fn oldest_unfinished(&self, jobs: &BTreeMap<i64, String>) -> Result<Option<i64>, StoreError> {
        Ok(Ledger::oldest_unfinished(self, jobs)?)
    }
    fn give_up_expired(&mut self, at_ms: i64) -> Result<Vec<GivenUp>, StoreError> {
        Ok(Ledger::give_up_expired(self, at_ms)?)
    }
    fn start_run(&mut self, job: i64, _at_ms: i64) -> Result<Option<i64>, StoreError> {
        // The SQLite ledger reads the same clock itself (set_clock).
        Ok(Some(Ledger::start_run(self, job)?))
    }
    fn finish_run_at(
        &mut self,
        run_id: i64,
        job: i64,
        result: &RunResult,
        at_ms: i64,
    ) -> Result<Recorded, StoreError> {
        Ledger::finish_run_at(self, run_id, job, result, at_ms)?;
        Ok(Recorded::Yes)
    }
    fn heartbeat(&self, polls: &Polls) -> Result<(), StoreError> {
        Ok(Ledger::heartbeat(self, polls)?)
    }
    fn renew(&mut self) -> Result<Vec<i64>, StoreError> {
        Ok(Vec::new())
    }
    fn renew_every(&self) -> Option<Duration> {
        None
    }
    fn fleet_view(&self) -> Result<Option<FleetView>, StoreError> {
        Ok(None)
    }
    fn report_outage_to(&mut self, _outage: LedgerOutage) {}
    fn stop_retrying_on(&mut self, _shutdown: Shutdown) {}
}

/// The fleet ledger as the serve loop holds it: the session, the lease length and the
/// claims of the runs under way.
#[derive(Debug)]
pub struct FleetStore {
    /// `None` only once dropped.
    ledger: Mutex<Option<FleetLedger>>,
    lease: Duration,
    claims: BTreeMap<i64, Claim>,
    /// Runs of `claims` whose lease another host took over: reported once, not renewed again
    /// (their result is still offered to the fence, which refuses it and says so).
    lost: BTreeSet<i64>,
    outage: Option<LedgerOutage>,
    shutdown: Option<Shutdown>,
}

/// How long the fleet ledger keeps reconnecting before the service gives up (exit 1, and a
/// restart tries again): a restart of Postgres takes seconds. A stop request ends it sooner.
pub const OUTAGE_BOUND: Duration = Duration::from_secs(120);

/// How soon a back-off sees a stop request.
const STOP_SEEN_WITHIN: Duration = Duration::from_millis(100);

impl FleetStore {
    /// The fleet ledger, its runs claimed for `lease` and renewed three times a lease.
    pub fn new(ledger: FleetLedger, lease: Duration) -> Self {
        Self {
            ledger: Mutex::new(Some(ledger)),
            lease,
            claims: BTreeMap::new(),
            lost: BTreeSet::new(),
            outage: None,
            shutdown: None,
        }
    }

    /// Runs `op` on the session. The client blocks; inside the service's (multi-threaded)
    /// runtime the worker thread is handed over while it does, so the other runs go on.
    ///
    /// A session the server dropped (a restart, a cut) is opened again and `op` tried again,
    /// with a back-off, for up to [`OUTAGE_BOUND`], the outage said to `/healthz` meanwhile.
    /// Once the service is asked to stop ([`JobLedger::stop_retrying_on`]), the back-off ends
    /// and the connection error is returned: a stop must not wait out the bound (systemd
    /// kills the service after `TimeoutStopSec`), and the runs left open are taken over when
    /// their leases end, or closed by this host's next start.
    /// Every operation may be tried twice: sightings, renewals and the heartbeat are
    /// idempotent, a claim whose answer was lost is not claimable again (its lease ends and
    /// it is taken over), and recording a run already recorded answers as recorded.
    fn with<T>(
        &self,
        mut op: impl FnMut(&mut FleetLedger) -> Result<T, FleetError>,
    ) -> Result<T, StoreError> {
        let call = || {
            let give_up = std::time::Instant::now() + OUTAGE_BOUND;
            let mut wait = Duration::from_millis(250);
            loop {
                let attempt = {
                    let mut guard = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
                    let ledger = guard.as_mut().ok_or(FleetError::Closed)?;
                    ledger.reconnect_if_closed().and_then(|()| op(ledger))
                };
                let error = match attempt {
                    Err(error) if error.is_connection() && std::time::Instant::now() < give_up => {
                        error
                    }
                    result => {
                        if result.is_ok() {
                            self.say_outage(None);
                        }
                        return result;
                    }
                };
                self.say_outage(Some(error.to_string()));
                if !self.stopping() {
                    tracing::warn!(%error, retry_in_ms = wait.as_millis(), "the fleet ledger's database does not answer; reconnecting");
                    self.back_off(wait);
                }
                if self.stopping() {
                    tracing::warn!(%error, "stopping as asked while the fleet ledger's database does not answer: not reconnecting (the runs under way are taken over when their leases end)");
                    return Err(error);
                }
                wait = (wait * 2).min(Duration::from_secs(10));
            }
        };
        Ok(blocking(call)?)
    }

    fn stopping(&self) -> bool {
        self.shutdown.as_ref().is_some_and(Shutdown::requested)
    }

    /// Sleeps `wait`, or less once a stop is asked for.
    fn back_off(&self, wait: Duration) {
        let until = std::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() || self.stopping() {
                return;
            }
            std::thread::sleep(left.min(STOP_SEEN_WITHIN));
        }
    }

    fn say_outage(&self, why: Option<String>) {
        if let Some(outage) = &self.outage {
            let mut slot = outage.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.is_some() && why.is_none() {
                tracing::info!("the fleet ledger's database answers again");
            }
            *slot = why;
        }
    }
}

/// Runs `op`, which blocks on the fleet database's client (it runs its own small runtime):
/// inside a multi-threaded tokio runtime the worker thread is handed over while it does, so
/// the other tasks go on and the client's runtime is not started inside the service's.
fn blocking<T>(op: impl FnOnce() -> T) -> T {
    let inside = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if inside {
        tokio::task::block_in_place(op)
    } else {
        op()
    }
}

impl Drop for FleetStore {
    fn drop(&mut self) {
        // Dropping the client shuts its runtime down, which may not happen on a thread that
        // drives the service's tasks.
        let ledger = self
            .ledger
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        blocking(move || drop(ledger));
    }
}

impl JobLedger for FleetStore {
    fn set_clock(&mut self, _clock: Arc<dyn Clock>) {
        // Every fleet time is the database's.
    }
    fn in_one_commit<T, E: From<StoreError>>(
        &mut self,
        sightings: impl FnOnce(&Self) -> Result<T, E>,
    ) -> Result<T, E> {
        // Each sighting is an idempotent upsert of its own: a poll cut half-way is
        // completed by the next one, by this host or another.
        sightings(self)
    }
    fn seen_until(
        &self,
        key: JobKey<'_>,
        expires_ms: Option<i64>,
        at_ms: i64,
    ) -> Result<Seen, StoreError> {
        self.with(|l| l.seen_at(key, expires_ms, Some(at_ms)))
    }
    fn candidate_of(&self, job: i64) -> Result<Option<String>, StoreError> {
        self.with(|l| l.own_candidate_of(job))
    }
    fn oldest_unfinished(&self, jobs: &BTreeMap<i64, String>) -> Result<Option<i64>, StoreError> {
        let keys: Vec<i64> = jobs.keys().copied().collect();
        self.with(|l| l.oldest_unfinished(&keys))
    }
    fn give_up_expired(&mut self, at_ms: i64) -> Result<Vec<GivenUp>, StoreError> {
        self.with(|l| l.give_up_expired(at_ms))
    }
    fn start_run(&mut self, job: i64, at_ms: i64) -> Result<Option<i64>, StoreError> {
        let lease = self.lease;
        let Some(claim) = self.with(|l| l.claim_job_at(job, lease, at_ms))? else {
            return Ok(None);
        };
        if claim.took_over {
            tracing::warn!(job = %claim.job_id.escape_debug(), fence = claim.fence, "took over a job whose lease had ended (its host stopped renewing it)");
        }
        let run_id = claim.run_id;
        self.claims.insert(run_id, claim);
        Ok(Some(run_id))
    }
    fn finish_run_at(
        &mut self,
        run_id: i64,
        _job: i64,
        result: &RunResult,
        at_ms: i64,
    ) -> Result<Recorded, StoreError> {
        let Some(claim) = self.claims.get(&run_id).cloned() else {
            return Ok(Recorded::Fenced {
                held: 0,
                current: 0,
            });
        };
        let recorded = self.with(|l| l.finish_at(&claim, result, Some(at_ms)))?;
        self.claims.remove(&run_id);
        self.lost.remove(&run_id);
        Ok(recorded)
    }
    fn heartbeat(&self, polls: &Polls) -> Result<(), StoreError> {
        self.with(|l| l.heartbeat(polls.ok, polls.failed, polls.last_ok_ms))
    }
    fn renew(&mut self) -> Result<Vec<i64>, StoreError> {
        let lease = self.lease;
        let claims: Vec<Claim> = self
            .claims
            .values()
            .filter(|c| !self.lost.contains(&c.run_id))
            .cloned()
            .collect();
        let mut lost = Vec::new();
        for claim in claims {
            // A lost claim stays lost: the job's fence only moves forward, and a job that
            // left `running` under this claim is not run under it again.
            if !self.with(|l| l.renew(&claim, lease))? {
                self.lost.insert(claim.run_id);
                lost.push(claim.run_id);
            }
        }
        Ok(lost)
    }
    fn renew_every(&self) -> Option<Duration> {
        Some(self.lease / 3)
    }
    fn fleet_view(&self) -> Result<Option<FleetView>, StoreError> {
        self.with(FleetLedger::view).map(Some)
    }
    fn report_outage_to(&mut self, outage: LedgerOutage) {
        self.outage = Some(outage);
    }
    fn stop_retrying_on(&mut self, shutdown: Shutdown) {
        self.shutdown = Some(shutdown);
    }
}

/// Where `worker serve --ledger` keeps the ledger.
#[derive(Debug, Clone)]
pub enum LedgerLocation {
    /// The SQLite ledger in this directory (the state directory unless named).
    Sqlite(PathBuf),
    /// A fleet database (`postgres://…`, `postgresql://…`), checked: no password in it.
    Postgres(Box<FleetUrl>),
}

impl LedgerLocation {
    /// A `postgres://` URL is a fleet database (refused with a password in it, or with TLS
    /// it cannot have: [`FleetUrl::parse`]); anything else is the SQLite ledger's directory.
    pub fn parse(text: &str) -> Result<Self, ConnError> {
        if is_fleet_url(text) {
            Ok(Self::Postgres(Box::new(FleetUrl::parse(text)?)))
        } else {
            Ok(Self::Sqlite(Path::new(text).to_owned()))
        }
    }
}

/// How the fleet ledger is opened: this host's name and lease, and where the database's
/// password is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetOptions {
    /// This host's name in leases, runs and candidates; unique in the fleet.
    pub host: String,
    /// How long a claim holds a job without renewal.
    pub lease: Duration,
    /// The file holding the database's password (`--ledger-password-file`); `None`: libpq's
    /// password file, if any ([`FleetUrl::find_password`]).
    pub password_file: Option<PathBuf>,
}

/// The open ledger, of either backend: the one place that picks it.
#[derive(Debug)]
pub enum AnyLedger {
    /// One host.
    Sqlite(Box<Ledger>),
    /// A fleet.
    Fleet(Box<FleetStore>),
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
}

impl From<Ledger> for AnyLedger {
    fn from(ledger: Ledger) -> Self {
        Self::Sqlite(Box::new(ledger))
    }
}

impl AnyLedger {
    /// Opens the ledger at `location`: the SQLite one closes the runs a dead predecessor
    /// left open; the fleet one checks the database's schema version and binding, and
    /// closes this host's own runs left open.
    pub fn open(
        location: &LedgerLocation,
        binding: &Binding,
        fleet: &FleetOptions,
        retry_base: Duration,
    ) -> Result<Self, StoreError> {
        match location {
            LedgerLocation::Sqlite(dir) => {
                let mut ledger = Ledger::open(dir)?;
                ledger.set_retry_base(retry_base);
                let closed = ledger.recover_interrupted()?;
                if !closed.is_empty() {
                    tracing::warn!(runs = ?closed, "runs left open by a stopped worker recorded as interrupted");
                }
                Ok(ledger.into())
            }
            LedgerLocation::Postgres(url) => {
                let url = FleetUrl::clone(url)
                    .find_password(fleet.password_file.as_deref())
                    .map_err(FleetError::Conn)?;
                let (ledger, closed) = blocking(|| {
                    let mut ledger = FleetLedger::open(&url, binding, &fleet.host)?;
                    ledger.set_retry_base(retry_base);
                    let closed = ledger.recover_own()?;
                    Ok::<_, FleetError>((ledger, closed))
                })?;
                if !closed.is_empty() {
                    tracing::warn!(runs = ?closed, host = fleet.host, "runs this host left open recorded as interrupted");
                }
                Ok(Self::Fleet(Box::new(FleetStore::new(ledger, fleet.lease))))
            }
        }
    }
}
