//! The fleet ledger against a real Postgres (issue #45): every test its own database on the
//! cluster `scripts/services.sh` starts (its URL in `.work/postgres.url`, or
//! `$VERIFIER_TEST_POSTGRES_URL`). Without a server the tests skip, except under CI=true,
//! where they fail. No outcome depends on which host wins a race: the assertions count what
//! was recorded, and waits are on states the database reports, with generous timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use test_postgres::{OwnCluster, TestDb};
use worker_serve::fleet::{Binding, Claim, FleetError, FleetLedger, Recorded};
use worker_serve::fleet_conn::FleetUrl;
use worker_serve::ledger::{JobKey, JobState, Polls, RunKind, RunResult};
use worker_serve::shutdown::Shutdown;
use worker_serve::store::{FleetStore, JobLedger, OUTAGE_BOUND};

/// A database of its own on the test cluster (`test_postgres`), dropped at the end.
struct Db(TestDb);

impl Db {
    /// `None` (skip) without the test cluster, unless CI=true.
    fn new(test: &str) -> Option<Self> {
        TestDb::new("fleet", test).map(Self)
    }

    /// Its URL with the password, as a host is given it.
    fn url(&self) -> FleetUrl {
        FleetUrl::parse(&self.0.url)
            .unwrap()
            .with_password(self.0.password())
    }

    fn open(&self, host: &str) -> FleetLedger {
        FleetLedger::open(&self.url(), &binding(), host).unwrap()
    }

    /// Runs `sql` on the test database directly (what another worker version or an operator
    /// would have written).
    fn exec(&self, sql: &str) {
        self.0.exec(sql);
    }
}

/// A database of its own (as [`Db::new`]) with two hosts on it: `first` and `host-b`.
fn two_hosts(test: &str, first: &str) -> Option<(Db, FleetLedger, FleetLedger)> {
    let db = Db::new(test)?;
    let (first, b) = (db.open(first), db.open("host-b"));
    Some((db, first, b))
}

/// [`two_hosts`] where `first` has seen one job, `job`, and holds a lease of `lease` on it.
fn two_hosts_first_leasing(
    test: &str,
    first: &str,
    lease: Duration,
) -> Option<(Db, FleetLedger, FleetLedger, Claim)> {
    let (db, mut first, b) = two_hosts(test, first)?;
    see(&mut first, "job", far_future());
    let claim = first.claim(lease).unwrap().unwrap();
    Some((db, first, b, claim))
}

/// A cluster of the test's own, its superuser's URL (trust on loopback: no password).
fn cluster_url(cluster: &OwnCluster) -> FleetUrl {
    FleetUrl::parse(&cluster.url()).unwrap()
}

fn binding() -> Binding {
    Binding {
        feed: "http://127.0.0.1:9/feed".into(),
        verifiers: vec!["0x00000000000000000000000000000000000000a1".into()],
    }
}

fn hash(id: &str) -> String {
    format!("sha256:{id:0>64}")
}

fn see(ledger: &mut FleetLedger, id: &str, expires_ms: i64) {
    let h = hash(id);
    ledger
        .seen(
            JobKey {
                job_id: id,
                round: 1,
                content_hash: &h,
            },
            Some(expires_ms),
        )
        .unwrap();
}

fn far_future() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
        + 86_400_000
}

fn completed(file: &str) -> RunResult {
    RunResult::passed("sha256:aa", file)
}

const LONG: Duration = Duration::from_secs(3600);

/// Claims until a job is claimable, the database deciding when the lease has ended.
fn claim_when_due(ledger: &mut FleetLedger, lease: Duration) -> Claim {
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(claim) = ledger.claim(lease).unwrap() {
            return claim;
        }
        assert!(
            Instant::now() < give_up,
            "no job became claimable within 120 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fleet_three_hosts_fifty_jobs_every_job_runs_exactly_once() {
    let Some(db) = Db::new("three_hosts") else {
        return;
    };
    let mut first = db.open("host-0");
    for i in 0..50 {
        see(&mut first, &format!("job-{i:02}"), far_future() + i);
    }
    drop(first);
    let start = Arc::new(Barrier::new(3));
    let hosts: Vec<_> = (0..3)
        .map(|h| {
            let url = db.url();
            let start = start.clone();
            std::thread::spawn(move || {
                let host = format!("host-{h}");
                let mut ledger = FleetLedger::open(&url, &binding(), &host).unwrap();
                // Every host polls the same feed: its sightings land on the same rows.
                for i in 0..50 {
                    see(&mut ledger, &format!("job-{i:02}"), far_future() + i);
                }
                start.wait();
                let mut ran = Vec::new();
                while let Some(claim) = ledger.claim(LONG).unwrap() {
                    let file = format!("{}.{host}.candidate.json", claim.job_id);
                    assert_eq!(
                        ledger.finish(&claim, &completed(&file)).unwrap(),
                        Recorded::Yes
                    );
                    ran.push(claim.job_id);
                }
                ran
            })
        })
        .collect();
    let mut ran: Vec<String> = hosts.into_iter().flat_map(|h| h.join().unwrap()).collect();
    ran.sort();
    let expected: Vec<String> = (0..50).map(|i| format!("job-{i:02}")).collect();
    assert_eq!(ran, expected, "every job claimed by exactly one host");
    let mut ledger = db.open("observer");
    assert_eq!(
        ledger.states().unwrap().len(),
        50,
        "one row per job whatever the sightings"
    );
    assert_eq!(ledger.runs().unwrap().len(), 50);
    assert_eq!(ledger.candidates().unwrap().len(), 50);
    assert!(
        ledger
            .states()
            .unwrap()
            .iter()
            .all(|(_, s)| *s == JobState::Completed)
    );
}

#[test]
fn fleet_claims_follow_the_earliest_window_end_across_hosts() {
    let Some((_db, mut a, mut b)) = two_hosts("deadline", "host-a") else {
        return;
    };
    let base = far_future();
    // Seen out of deadline order, by two hosts.
    see(&mut a, "late", base + 3_000);
    see(&mut b, "early", base + 1_000);
    see(&mut a, "middle", base + 2_000);
    let first = a.claim(LONG).unwrap().unwrap();
    let second = b.claim(LONG).unwrap().unwrap();
    let third = a.claim(LONG).unwrap().unwrap();
    assert_eq!(
        [first.job_id, second.job_id, third.job_id],
        ["early", "middle", "late"]
    );
    assert!(b.claim(LONG).unwrap().is_none(), "all three are leased");
}

#[test]
fn fleet_a_live_lease_is_not_claimed_by_another_host_and_renewal_keeps_it() {
    let Some((db, mut a, mut b, claim)) =
        two_hosts_first_leasing("live_lease", "host-a", Duration::from_millis(500))
    else {
        return;
    };
    assert!(
        a.renew(&claim, LONG).unwrap(),
        "the holder renews its own lease"
    );
    // Past the first lease by the database's clock: the renewal is what holds the job.
    db.exec("SELECT pg_sleep(1)");
    assert!(
        b.claim(LONG).unwrap().is_none(),
        "a renewed lease is not taken over"
    );
    let view = a.view().unwrap();
    assert_eq!(
        (view.leased_here, view.leased_elsewhere, view.takeovers),
        (1, 0, 0)
    );
    let view = b.view().unwrap();
    assert_eq!((view.leased_here, view.leased_elsewhere), (0, 1));
}

#[test]
fn fleet_a_dead_hosts_job_is_taken_over_after_its_lease_and_finished_once() {
    let Some((_db, dead, mut b, lost)) =
        two_hosts_first_leasing("dead_host", "host-dead", Duration::from_millis(300))
    else {
        return;
    };
    drop(dead); // the host is gone: no renewal, no result
    let claim = claim_when_due(&mut b, LONG);
    assert_eq!(claim.job_id, "job");
    assert!(claim.took_over);
    assert_eq!(claim.fence, lost.fence + 1);
    assert_eq!(
        b.finish(&claim, &completed("job.candidate.json")).unwrap(),
        Recorded::Yes
    );
    let runs = b.runs().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].reason_code.as_deref(), Some("lease_expired"));
    assert_eq!(runs[1].outcome.as_deref(), Some("completed_passed"));
    assert_eq!(b.candidates().unwrap().len(), 1, "one candidate");
    assert_eq!(b.view().unwrap().takeovers, 1);
}

#[test]
fn fleet_a_paused_hosts_late_candidate_is_refused_by_the_fence() {
    let Some((_db, mut paused, mut b, stale)) =
        two_hosts_first_leasing("paused_host", "host-paused", Duration::from_millis(300))
    else {
        return;
    };
    // The paused host's lease ends; another host takes the job over and is still running it
    // when the paused one wakes up with its result.
    let current = claim_when_due(&mut b, LONG);
    let fenced = |paused: &mut FleetLedger| {
        assert_eq!(
            paused
                .finish(&stale, &completed("job.paused.json"))
                .unwrap(),
            Recorded::Fenced {
                held: stale.fence,
                current: current.fence
            }
        );
    };
    fenced(&mut paused);
    assert!(!paused.renew(&stale, LONG).unwrap(), "nor can it renew");
    assert!(
        b.candidates().unwrap().is_empty(),
        "nothing recorded from the stale claim"
    );
    assert_eq!(
        b.finish(&current, &completed("job.b.json")).unwrap(),
        Recorded::Yes
    );
    // Woken up again after the job finished: still refused.
    fenced(&mut paused);
    let candidates = b.candidates().unwrap();
    assert_eq!(candidates.len(), 1, "{candidates:?}");
    assert_eq!(candidates[0].host, "host-b");
    assert_eq!(
        b.states().unwrap(),
        [("job".to_owned(), JobState::Completed)]
    );
}

#[test]
fn fleet_lease_times_are_the_databases_even_when_a_hosts_clock_is_ten_minutes_off() {
    let Some(db) = Db::new("skewed_clock") else {
        return;
    };
    let mut host = db.open("host-a");
    see(&mut host, "job", far_future());
    // A host under libfaketime, its clock 10 minutes behind, claims for 60 s: a lease
    // computed from its clock would have ended 9 minutes ago for everyone else.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("faketime")
        .args(["-f", "-10m"])
        .arg(&exe)
        .args([
            "--exact",
            "fleet_skewed_host_child",
            "--nocapture",
            "--include-ignored",
        ])
        .env("FLEET_CHILD_URL", &db.0.url)
        .env("FLEET_CHILD_PASSWORD_FILE", db.0.password_file())
        .output()
        .unwrap_or_else(|e| {
            panic!("faketime (apt-get install faketime; scripts/services.sh does): {e}")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let child_ms: i64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("child-clock-ms "))
        .unwrap_or_else(|| panic!("the child did not report its clock: {stdout}"))
        .parse()
        .unwrap();
    let ours = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    assert!(
        ours - child_ms > 500_000,
        "the child's clock is not 10 minutes behind ({child_ms} vs {ours}): the test proves nothing"
    );
    assert!(stdout.contains("child-claimed job"), "{stdout}");
    assert!(
        host.claim(LONG).unwrap().is_none(),
        "the skewed host's 60 s lease is live by the database's clock"
    );
    let view = host.view().unwrap();
    assert_eq!(view.leased_elsewhere, 1);
}

/// The skewed host of the test above, run in its own process under libfaketime.
#[test]
#[ignore = "run by fleet_lease_times_are_the_databases_even_when_a_hosts_clock_is_ten_minutes_off"]
fn fleet_skewed_host_child() {
    let url = FleetUrl::parse(&std::env::var("FLEET_CHILD_URL").unwrap())
        .unwrap()
        .find_password(Some(
            std::env::var("FLEET_CHILD_PASSWORD_FILE").unwrap().as_ref(),
        ))
        .unwrap();
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    println!("child-clock-ms {ms}");
    let mut ledger = FleetLedger::open(&url, &binding(), "host-skewed").unwrap();
    let claim = ledger.claim(Duration::from_secs(60)).unwrap().unwrap();
    println!("child-claimed {}", claim.job_id);
}

#[test]
fn fleet_a_database_of_another_schema_version_is_refused_naming_both() {
    let Some(db) = Db::new("schema_version") else {
        return;
    };
    drop(db.open("host-a"));
    db.exec("UPDATE fleet_meta SET schema_version = 7");
    let err = FleetLedger::open(&db.url(), &binding(), "host-a").unwrap_err();
    assert!(
        matches!(err, FleetError::SchemaVersion { found: 7, known: 1 }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("version 7") && text.contains("version 1"),
        "{text}"
    );
    assert!(err.is_permanent());
}

#[test]
fn fleet_a_database_bound_to_another_feed_or_verifier_set_is_refused_at_start() {
    let Some(db) = Db::new("binding") else { return };
    drop(db.open("host-a"));
    let other_feed = Binding {
        feed: "http://127.0.0.1:9/other".into(),
        ..binding()
    };
    let err = FleetLedger::open(&db.url(), &other_feed, "host-b").unwrap_err();
    assert!(
        matches!(err, FleetError::Bound { what: "feed", .. }),
        "{err:?}"
    );
    assert!(err.is_permanent());
    let other_set = Binding {
        verifiers: vec!["0x00000000000000000000000000000000000000b2".into()],
        ..binding()
    };
    let err = FleetLedger::open(&db.url(), &other_set, "host-b").unwrap_err();
    assert!(
        matches!(
            err,
            FleetError::Bound {
                what: "verifier set",
                ..
            }
        ),
        "{err:?}"
    );
    // The same set in another order and case is the same set.
    let same = Binding {
        verifiers: vec!["0x00000000000000000000000000000000000000A1".into()],
        ..binding()
    };
    FleetLedger::open(&db.url(), &same, "host-c").unwrap();
}

#[test]
fn fleet_an_unreachable_server_at_start_is_transient_not_a_configuration_error() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = FleetUrl::parse(&format!(
        "postgres://nobody@127.0.0.1:{port}/fleet?connect_timeout=5"
    ))
    .unwrap()
    .with_password("secret");
    let err = FleetLedger::open(&url, &binding(), "host-a").unwrap_err();
    assert!(matches!(err, FleetError::Connect { .. }), "{err:?}");
    assert!(!err.is_permanent(), "exit 1 (restarted), not 78: {err}");
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[test]
fn fleet_a_refused_login_is_permanent() {
    let Some(db) = Db::new("login") else { return };
    let url = FleetUrl::parse(&db.0.url)
        .unwrap()
        .with_password("wrong-password");
    let err = FleetLedger::open(&url, &binding(), "host-a").unwrap_err();
    assert!(err.is_permanent(), "{err}");
}

#[test]
fn fleet_sightings_are_idempotent_and_other_content_is_conflicting() {
    let Some((_db, mut a, mut b)) = two_hosts("sightings", "host-a") else {
        return;
    };
    let h = hash("one");
    let key = JobKey {
        job_id: "job",
        round: 1,
        content_hash: &h,
    };
    let first = a.seen(key, Some(far_future())).unwrap();
    let again = b.seen(key, Some(far_future())).unwrap();
    assert!(first.new && !again.new);
    assert_eq!(first.job, again.job);
    let other = hash("two");
    let conflicting = b
        .seen(
            JobKey {
                content_hash: &other,
                ..key
            },
            Some(far_future()),
        )
        .unwrap();
    assert!(!conflicting.due);
    let states = a.states().unwrap();
    assert_eq!(
        states,
        [
            ("job".to_owned(), JobState::Pending),
            ("job".to_owned(), JobState::Conflicting)
        ]
    );
    let claim = a.claim(LONG).unwrap().unwrap();
    assert_eq!(claim.job, first.job);
    assert!(
        b.claim(LONG).unwrap().is_none(),
        "the conflicting row is never claimed"
    );
}

/// Calls `op` until it succeeds, reconnecting between failures with a back-off, as a host
/// does while the database is down; every failure must be a transient one.
fn through_outage<T>(
    ledger: &mut FleetLedger,
    mut op: impl FnMut(&mut FleetLedger) -> Result<T, FleetError>,
) -> (T, usize) {
    let give_up = Instant::now() + Duration::from_secs(120);
    let mut failures = 0;
    let mut wait = Duration::from_millis(50);
    loop {
        let err = match ledger.reconnect_if_closed().and_then(|()| op(ledger)) {
            Ok(value) => return (value, failures),
            Err(err) => err,
        };
        assert!(!err.is_permanent(), "an outage is transient: {err}");
        failures += 1;
        assert!(
            Instant::now() < give_up,
            "the database did not come back within 120 s: {err}"
        );
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

#[test]
fn fleet_postgres_restarted_mid_batch_loses_nothing_and_runs_nothing_twice() {
    let Some(cluster) = OwnCluster::new() else {
        return;
    };
    let mut a = FleetLedger::open(&cluster_url(&cluster), &binding(), "host-a").unwrap();
    let mut b = FleetLedger::open(&cluster_url(&cluster), &binding(), "host-b").unwrap();
    for i in 0..20 {
        see(&mut a, &format!("job-{i:02}"), far_future() + i);
    }
    let mut ran = Vec::new();
    for _ in 0..5 {
        let claim = a.claim(LONG).unwrap().unwrap();
        assert_eq!(
            a.finish(&claim, &completed("c.json")).unwrap(),
            Recorded::Yes
        );
        ran.push(claim.job_id);
    }
    // A run under way when the server restarts.
    let in_flight = b.claim(LONG).unwrap().unwrap();
    cluster.pg_ctl("restart");
    // Both sessions were cut: the first statement after the restart fails (transiently),
    // then each host reconnects.
    let (recorded, _) = through_outage(&mut b, |b| b.finish(&in_flight, &completed("c.json")));
    assert_eq!(
        recorded,
        Recorded::Yes,
        "a lease outlives a restart of the server"
    );
    ran.push(in_flight.job_id.clone());
    let (_, failures) = through_outage(&mut a, |a| a.view());
    assert!(
        failures >= 1,
        "host a's session was not cut by the restart: the test proves nothing"
    );
    loop {
        let (claim, _) = through_outage(&mut a, |a| a.claim(LONG));
        let Some(claim) = claim else { break };
        let (recorded, _) = through_outage(&mut a, |a| a.finish(&claim, &completed("c.json")));
        assert_eq!(recorded, Recorded::Yes);
        ran.push(claim.job_id);
    }
    ran.sort();
    let expected: Vec<String> = (0..20).map(|i| format!("job-{i:02}")).collect();
    assert_eq!(ran, expected);
    assert_eq!(a.runs().unwrap().len(), 20, "no job run twice");
    assert_eq!(a.candidates().unwrap().len(), 20, "nothing lost");
}

/// A job's own failure backs off on the service's clock, as on the SQLite ledger: a service
/// whose (injected) clock stands still keeps the job waiting, whatever the database's clock
/// does. Found by the serve loop's deadline test on a fleet: with the back-off on the
/// database's clock the failed job ran again before the next one ([2, 3, 2], not [2, 3, 1]).
#[test]
fn fleet_a_failed_jobs_back_off_is_judged_on_the_services_clock() {
    let Some(db) = Db::new("backoff_clock") else {
        return;
    };
    let mut host = db.open("host-a");
    host.set_retry_base(Duration::from_millis(50));
    see(&mut host, "job", far_future());
    let frozen = 1_000_000;
    let claim = host.claim(LONG).unwrap().unwrap();
    let failed = RunResult::without_candidate(RunKind::NoVerdict, "no_verdict", "timeout", None);
    assert_eq!(
        host.finish_at(&claim, &failed, Some(frozen)).unwrap(),
        Recorded::Yes
    );
    // Well past the 50 ms back-off by the database's clock.
    db.exec("SELECT pg_sleep(0.3)");
    let h = hash("job");
    let key = JobKey {
        job_id: "job",
        round: 1,
        content_hash: &h,
    };
    let seen = host.seen_at(key, Some(far_future()), Some(frozen)).unwrap();
    assert!(
        !seen.due,
        "due before its back-off ended on the service's clock"
    );
    assert!(host.claim_job_at(seen.job, LONG, frozen).unwrap().is_none());
    let later = host
        .seen_at(key, Some(far_future()), Some(frozen + 1_000))
        .unwrap();
    assert!(later.due);
    assert!(
        host.claim_job_at(seen.job, LONG, frozen + 1_000)
            .unwrap()
            .is_some()
    );
}

/// Issue #45: a host told to stop (SIGTERM) while its database did not answer went on
/// reconnecting for the whole outage bound (120 s), past systemd's `TimeoutStopSec` (45 s),
/// and was SIGKILLed. A stop request now ends the reconnecting at its next back-off step; the
/// runs it holds are left to their leases. Measured as "did not run to the bound", so the
/// machine's load does not decide it.
#[test]
fn fleet_a_stop_request_ends_the_reconnecting_to_a_database_that_does_not_answer() {
    let Some(cluster) = OwnCluster::new() else {
        return;
    };
    let ledger = FleetLedger::open(&cluster_url(&cluster), &binding(), "host-a").unwrap();
    let mut store = FleetStore::new(ledger, LONG);
    let outage = Arc::new(Mutex::new(None));
    store.report_outage_to(outage.clone());
    let (stop, shutdown) = Shutdown::by_hand();
    store.stop_retrying_on(shutdown);
    store.heartbeat(&Polls::default()).unwrap();
    cluster.pg_ctl("stop");
    // The stop comes while the heartbeat is already reconnecting (the outage is said only
    // from inside that loop), as a SIGTERM during an outage does.
    let stopper = std::thread::spawn(move || {
        let give_up = Instant::now() + Duration::from_secs(60);
        while outage.lock().unwrap().is_none() {
            assert!(Instant::now() < give_up, "the heartbeat never reconnected");
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.fire();
        Instant::now()
    });
    let err = store.heartbeat(&Polls::default()).unwrap_err();
    let returned = Instant::now();
    let fired = stopper.join().unwrap();
    let took = returned.saturating_duration_since(fired);
    assert!(
        took < Duration::from_secs(30),
        "the heartbeat returned {took:?} after the stop request (the outage bound is {OUTAGE_BOUND:?})"
    );
    assert!(!err.is_permanent(), "an outage is transient: {err}");
}

/// Issue #45: a run whose lease another host took over was reported lost at every renewal
/// tick (the serve loop warned for it again and again, ten times in three seconds once the
/// database answered after a cut), because the lost claim was renewed again each time. A
/// lost claim is reported once and not renewed again.
#[test]
fn fleet_a_lost_lease_is_reported_once_not_at_every_renewal() {
    let Some(db) = Db::new("lost_once") else {
        return;
    };
    let mut store = FleetStore::new(db.open("host-a"), Duration::from_millis(300));
    let mut b = db.open("host-b");
    let h = hash("job");
    let key = JobKey {
        job_id: "job",
        round: 1,
        content_hash: &h,
    };
    let now = far_future() - 86_400_000;
    let seen = store.seen_until(key, Some(far_future()), now).unwrap();
    let run_id = store.start_run(seen.job, now).unwrap().unwrap();
    let current = claim_when_due(&mut b, LONG);
    assert!(current.took_over, "host b did not take the job over");
    assert_eq!(store.renew().unwrap(), [run_id], "the lost lease is named");
    assert_eq!(
        store.renew().unwrap(),
        Vec::<i64>::new(),
        "the same lost lease named again"
    );
    // Its late result is still refused by the fence, naming both tokens.
    let late = store
        .finish_run_at(run_id, seen.job, &completed("job.a.json"), now)
        .unwrap();
    assert_eq!(
        late,
        Recorded::Fenced {
            held: current.fence - 1,
            current: current.fence
        }
    );
}
