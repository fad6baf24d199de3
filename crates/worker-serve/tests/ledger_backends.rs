//! The ledger's behaviour as the serve loop sees it ([`JobLedger`]), run against both
//! backends (issue #45): the SQLite ledger in a temporary directory and the fleet ledger on a
//! database of its own on the test Postgres cluster (`test_postgres`; without it the Postgres
//! half skips, except under CI=true, where it fails). Each body is written once, over the
//! trait; each backend is opened the one way `worker serve` opens it ([`AnyLedger::open`]).
//!
//! What only one backend has stays beside it: SQLite's write-ahead log, migrations and
//! `worker ledger --retry` in `ledger.rs`; leases, take-overs and the fence in `fleet.rs`.
//! The SQLite-only originals of these tests left `ledger.rs` where every assertion of theirs is
//! here (the clock step back, a new round); the others stay there for what only the SQLite
//! ledger records (attempts, causes and reasons, run rows, seen times, the refused transition).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use worker_serve::fleet::{Binding, FleetLedger, Recorded};
use worker_serve::fleet_conn::FleetUrl;
use worker_serve::ledger::{JobKey, JobState, Ledger, RunKind, RunResult, Seen};
use worker_serve::store::{AnyLedger, FleetOptions, FleetStore, JobLedger, LedgerLocation};

fn binding() -> Binding {
    Binding {
        feed: "http://127.0.0.1:9/feed".into(),
        verifiers: vec!["0x00000000000000000000000000000000000000a1".into()],
    }
}

/// One backend, opened (and reopened, as after a restart) the way `worker serve` opens it.
trait Backend {
    type Ledger: JobLedger;
    /// Opens the ledger with `retry_base` as the base of a job's own back-off; closes the
    /// runs a dead predecessor left open.
    fn open(&self, retry_base: Duration) -> Self::Ledger;
    /// Every job's state, oldest first, as a reader of the store sees it.
    fn states(&self) -> Vec<(String, JobState)>;
}

fn options() -> FleetOptions {
    FleetOptions {
        host: "host-a".into(),
        lease: Duration::from_secs(3600),
        password_file: None,
    }
}

struct Sqlite(tempfile::TempDir);

impl Backend for Sqlite {
    type Ledger = Ledger;
    fn open(&self, retry_base: Duration) -> Ledger {
        let location = LedgerLocation::Sqlite(self.0.path().to_owned());
        match AnyLedger::open(&location, &binding(), &options(), retry_base).unwrap() {
            AnyLedger::Sqlite(ledger) => *ledger,
            AnyLedger::Fleet(_) => panic!("a directory opened a fleet ledger"),
        }
    }
    fn states(&self) -> Vec<(String, JobState)> {
        Ledger::open(self.0.path())
            .unwrap()
            .jobs(None)
            .unwrap()
            .into_iter()
            .map(|j| (j.job_id, j.status))
            .collect()
    }
}

struct Postgres(test_postgres::TestDb);

impl Postgres {
    fn url(&self) -> FleetUrl {
        FleetUrl::parse(&self.0.url)
            .unwrap()
            .with_password(self.0.password())
    }
}

impl Backend for Postgres {
    type Ledger = FleetStore;
    fn open(&self, retry_base: Duration) -> FleetStore {
        let location = LedgerLocation::parse(&self.0.url).unwrap();
        let fleet = FleetOptions {
            password_file: Some(self.0.password_file()),
            ..options()
        };
        match AnyLedger::open(&location, &binding(), &fleet, retry_base).unwrap() {
            AnyLedger::Fleet(ledger) => *ledger,
            AnyLedger::Sqlite(_) => panic!("a postgres:// URL opened a SQLite ledger"),
        }
    }
    fn states(&self) -> Vec<(String, JobState)> {
        FleetLedger::open(&self.url(), &binding(), "reader")
            .unwrap()
            .states()
            .unwrap()
    }
}

/// `body` once on each backend: `<name>::sqlite` and `<name>::postgres`.
macro_rules! on_both_backends {
    ($($name:ident => $body:ident;)*) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$body(&super::Sqlite(tempfile::tempdir().unwrap()));
            }
            #[test]
            fn postgres() {
                let Some(db) = test_postgres::TestDb::new("ledger", stringify!($name)) else {
                    return;
                };
                super::$body(&super::Postgres(db));
            }
        }
    )*};
}

on_both_backends! {
    serve_ledger_a_completed_job_is_never_due_again_even_after_reopening => completed_is_never_due_again;
    serve_ledger_a_run_left_open_by_a_dead_process_is_interrupted_and_retried => open_run_of_a_dead_process;
    serve_ledger_own_failures_back_off_and_are_given_up_at_the_window_not_by_count => own_failures_back_off;
    serve_ledger_a_wall_clock_step_back_does_not_delay_a_retry_by_the_step => clock_step_back;
    serve_ledger_backoff_past_the_last_start_is_capped_before_it => backoff_capped_at_last_start;
    serve_ledger_host_failures_are_not_attempts => host_failures_are_not_attempts;
    serve_ledger_a_new_round_of_the_same_id_is_a_new_job => new_round_is_a_new_job;
    serve_ledger_same_id_and_round_with_other_content_is_conflicting_never_due => other_content_is_conflicting;
    serve_ledger_a_claimed_or_finished_job_is_not_started_again => claimed_or_finished_not_started_again;
    serve_ledger_a_job_given_up_names_its_round_attempts_and_last_reason => given_up_names_its_last_reason;
}

const BASE: Duration = Duration::from_secs(60);

fn key(id: &str) -> JobKey<'_> {
    JobKey {
        job_id: id,
        round: 1,
        content_hash: "sha256:c1",
    }
}

fn completed() -> RunResult {
    RunResult::passed("sha256:00", "c.json")
}

fn failed(kind: RunKind, code: &str) -> RunResult {
    RunResult::without_candidate(kind, "no_verdict", code, Some("detail"))
}

fn seen(ledger: &impl JobLedger, key: JobKey<'_>, expires: Option<i64>, at: i64) -> Seen {
    ledger.seen_until(key, expires, at).unwrap()
}

/// Runs the job `seen` to `result` at `at`; the run must start and be recorded.
fn run(ledger: &mut impl JobLedger, seen: &Seen, result: &RunResult, at: i64) {
    let run = ledger
        .start_run(seen.job, at)
        .unwrap()
        .expect("the job starts");
    let recorded = ledger.finish_run_at(run, seen.job, result, at).unwrap();
    assert_eq!(recorded, Recorded::Yes);
}

// Wall-clock-like times (ms), so the fleet's database clock, which stamps what it stores, and
// the service's clock given here tell the same story.
fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn completed_is_never_due_again(b: &impl Backend) {
    let t = now_ms();
    let mut ledger = b.open(BASE);
    let s = seen(&ledger, key("j1"), None, t);
    assert!(s.due && s.new);
    run(&mut ledger, &s, &completed(), t);
    drop(ledger);
    let ledger = b.open(BASE);
    let again = seen(&ledger, key("j1"), None, t + 10);
    assert!(!again.due && !again.new, "{again:?}");
    assert_eq!(
        ledger.candidate_of(s.job).unwrap().as_deref(),
        Some("c.json")
    );
    assert_eq!(b.states(), [("j1".to_owned(), JobState::Completed)]);
}

fn open_run_of_a_dead_process(b: &impl Backend) {
    let t = now_ms();
    let mut ledger = b.open(BASE);
    let s = seen(&ledger, key("j1"), None, t);
    ledger.start_run(s.job, t).unwrap().unwrap();
    drop(ledger); // the process dies here
    let ledger = b.open(BASE);
    assert_eq!(b.states(), [("j1".to_owned(), JobState::Interrupted)]);
    assert!(
        seen(&ledger, key("j1"), None, t + 10).due,
        "an interrupted job is retried"
    );
    assert_eq!(ledger.candidate_of(s.job).unwrap(), None);
}

/// Issue 23.1: the job's own failures back off by doubling intervals and never end by a
/// count; the job is given up when its window ends.
/// The operator's WARN for a job given up says why it never got a verdict: the fleet once
/// reported every such job as round 0, 0 attempts, "never ran", after eight failed runs.
fn given_up_names_its_last_reason(b: &impl Backend) {
    let mut ledger = b.open(Duration::from_millis(1));
    let mut at = now_ms();
    let expires = at + 1_000_000;
    for code in ["timeout", "input_mismatch"] {
        let s = seen(&ledger, key("j"), Some(expires), at);
        assert!(s.due, "{code}");
        run(&mut ledger, &s, &failed(RunKind::NoVerdict, code), at);
        at += 1_000;
    }
    let given_up = ledger.give_up_expired(expires).unwrap();
    assert_eq!(given_up.len(), 1, "{given_up:?}");
    let g = &given_up[0];
    assert_eq!(
        (g.job_id.as_str(), g.round, g.attempts),
        ("j", 1, 2),
        "{g:?}"
    );
    assert_eq!(g.last_reason.as_deref(), Some("input_mismatch: detail"));
}

fn own_failures_back_off(b: &impl Backend) {
    let mut ledger = b.open(Duration::from_secs(10));
    let mut at = now_ms();
    let expires = at + 1_000_000;
    for attempt in 1..=6i64 {
        let s = seen(&ledger, key("j"), Some(expires), at);
        assert!(s.due, "attempt {attempt} at {at}");
        run(&mut ledger, &s, &failed(RunKind::NoVerdict, "timeout"), at);
        let wait = 10_000 * (1 << (attempt - 1));
        assert!(
            !seen(&ledger, key("j"), Some(expires), at + wait - 1).due,
            "retried before its back-off of {wait} ms"
        );
        at += wait;
    }
    assert_eq!(b.states(), [("j".to_owned(), JobState::Retry)]);
    assert!(ledger.give_up_expired(expires - 1).unwrap().is_empty());
    assert_eq!(ledger.give_up_expired(expires).unwrap().len(), 1);
    let s = seen(&ledger, key("j"), Some(expires), expires + 1);
    assert!(!s.due && s.given_up, "{s:?}");
    assert!(
        ledger.give_up_expired(expires + 1).unwrap().is_empty(),
        "given up twice"
    );
    assert_eq!(b.states(), [("j".to_owned(), JobState::Exhausted)]);
}

/// Issue #43 (late-image lane, seed 11): a job failing while its image is missing doubled its
/// back-off to 256 s, past the last moment it could still start and settle, and was given up
/// although its image came in time. Its retry time is never after that moment less one poll
/// interval (so a poll finds it due in time), however many times it failed.
fn backoff_capped_at_last_start(b: &impl Backend) {
    let base = Duration::from_secs(10);
    let base_ms = 10_000;
    let mut ledger = b.open(base);
    let start = now_ms();
    let expires = start + 1_000_000;
    // The window end less what settling still needs (400 s).
    let last_start = expires - 400_000;
    let latest_retry = last_start - base_ms;
    let mut at = start;
    for attempt in 1..=9i64 {
        let s = seen(&ledger, key("j"), Some(expires), at);
        assert!(s.due, "attempt {attempt} at +{} ms", at - start);
        let result = RunResult {
            last_start_ms: Some(last_start),
            ..failed(RunKind::NoVerdict, "image_missing")
        };
        run(&mut ledger, &s, &result, at);
        let backoff = base_ms << (attempt - 1);
        let retry_at = (at + backoff).min(latest_retry).max(at);
        if retry_at > at {
            assert!(
                !seen(&ledger, key("j"), Some(expires), retry_at - 1).due,
                "attempt {attempt}: retried before its back-off (due at +{} ms)",
                retry_at - start
            );
        }
        assert!(
            seen(&ledger, key("j"), Some(expires), retry_at).due,
            "attempt {attempt} at +{} ms: not due at +{} ms, the last retry before the last start at +{} ms (its back-off is {backoff} ms)",
            at - start,
            retry_at - start,
            last_start - start
        );
        at = retry_at;
    }
    assert_eq!(at, latest_retry, "the back-off reached the cap");
    assert_eq!(b.states(), [("j".to_owned(), JobState::Retry)]);
}

/// Chaos (clock steps): a job that failed while the service's clock ran 30 minutes ahead is
/// retried after its own back-off once the clock steps back, not after the step.
fn clock_step_back(b: &impl Backend) {
    let mut ledger = b.open(Duration::from_secs(1));
    let real = now_ms();
    let ahead = real + 1_800_000;
    let s = seen(&ledger, key("j"), None, ahead);
    run(
        &mut ledger,
        &s,
        &failed(RunKind::NoVerdict, "image_missing"),
        ahead,
    );
    assert!(
        !seen(&ledger, key("j"), None, ahead + 999).due,
        "retried within its 1 s back-off on the clock it failed on"
    );
    assert!(
        seen(&ledger, key("j"), None, real + 2_000).due,
        "the clock stepped back 30 min: the job waits out the step on top of its 1 s back-off"
    );
}

/// Issue 23.1: a host failure is not an attempt and sets no back-off of the job's own.
fn host_failures_are_not_attempts(b: &impl Backend) {
    let mut ledger = b.open(BASE);
    let t = now_ms();
    for at in t..t + 10 {
        let s = seen(&ledger, key("j"), Some(t + 1_000_000), at);
        assert!(s.due, "{at}");
        run(&mut ledger, &s, &failed(RunKind::Host, "image_missing"), at);
    }
    assert_eq!(b.states(), [("j".to_owned(), JobState::Pending)]);
}

fn new_round_is_a_new_job(b: &impl Backend) {
    let mut ledger = b.open(BASE);
    let t = now_ms();
    let r1 = seen(&ledger, key("j1"), None, t);
    assert!(r1.due && r1.new, "{r1:?}");
    run(&mut ledger, &r1, &completed(), t);
    let round2 = JobKey {
        round: 2,
        content_hash: "sha256:c2",
        ..key("j1")
    };
    let r2 = seen(&ledger, round2, None, t + 10);
    assert!(r2.due && r2.new && r2.job != r1.job, "{r2:?}");
    assert_eq!(ledger.candidate_of(r2.job).unwrap(), None);
    assert_eq!(
        ledger.candidate_of(r1.job).unwrap().as_deref(),
        Some("c.json")
    );
}

fn other_content_is_conflicting(b: &impl Backend) {
    let mut ledger = b.open(BASE);
    let t = now_ms();
    let first = seen(&ledger, key("j1"), None, t);
    run(&mut ledger, &first, &completed(), t);
    let other = JobKey {
        content_hash: "sha256:evil",
        ..key("j1")
    };
    for at in [t + 20, t + 30] {
        let s = seen(&ledger, other, None, at);
        assert!(!s.due, "changed content would run");
        assert_ne!(s.job, first.job);
        assert_eq!(
            ledger.candidate_of(s.job).unwrap(),
            None,
            "the first content's verdict is offered for the changed one"
        );
        assert!(
            ledger.start_run(s.job, at).map_or(true, |r| r.is_none()),
            "a conflicting job started"
        );
    }
    // Even before the first content completed.
    let pending = JobKey {
        job_id: "j2",
        ..key("j1")
    };
    assert!(seen(&ledger, pending, None, t + 40).due);
    let changed = JobKey {
        content_hash: "sha256:other",
        ..pending
    };
    assert!(!seen(&ledger, changed, None, t + 41).due);
    assert_eq!(
        b.states(),
        [
            ("j1".to_owned(), JobState::Completed),
            ("j1".to_owned(), JobState::Conflicting),
            ("j2".to_owned(), JobState::Pending),
            ("j2".to_owned(), JobState::Conflicting),
        ]
    );
}

/// A job under a run is not started a second time, a completed one never again, and a run is
/// not recorded twice: refused (SQLite: an illegal transition; a fleet: no claim) either way.
fn claimed_or_finished_not_started_again(b: &impl Backend) {
    let mut ledger = b.open(BASE);
    let t = now_ms();
    let s = seen(&ledger, key("j"), None, t);
    let run = ledger.start_run(s.job, t).unwrap().unwrap();
    assert!(
        !matches!(ledger.start_run(s.job, t), Ok(Some(_))),
        "a running job started twice"
    );
    assert_eq!(
        ledger.finish_run_at(run, s.job, &completed(), t).unwrap(),
        Recorded::Yes
    );
    assert!(
        !matches!(ledger.start_run(s.job, t + 1), Ok(Some(_))),
        "a completed job started again"
    );
    assert!(
        !matches!(
            ledger.finish_run_at(run, s.job, &completed(), t + 1),
            Ok(Recorded::Yes)
        ),
        "a run recorded twice"
    );
    assert_eq!(b.states(), [("j".to_owned(), JobState::Completed)]);
}
