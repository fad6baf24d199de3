//! `worker serve` end to end: the real binary as a service, the real Docker sandbox (busybox
//! from the local registry) and a job feed plus codeload-style archives on a loopback HTTP
//! server. The jobs are the bundled example (`cmp` of the benchmark's expected output with the
//! solver's result), some behind a `sleep` so a run can be cut short from outside.
//!
//! Other suites share the engine: containers are found by this test's own worker pid in the
//! owner label, never by the generic sandbox label alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use verifier_sdk::{Candidate, CandidateManifest};

use crate::example_feed::{ExampleFeed, commit, example, ledger_of};
use crate::feed_support::*;
use test_postgres::TestDb;
use worker_serve::fleet_conn::FleetUrl;
use worker_serve::timefmt::iso_utc;

/// The shared example feed, with the directories `worker serve` uses, and the ledger its
/// `worker serve` keeps: the SQLite file under `state/` or, with `fleet`, a database of its
/// own on the test Postgres cluster (`--ledger postgres://…`).
pub(super) struct World {
    feed: ExampleFeed,
    fleet: Option<TestDb>,
}

impl std::ops::Deref for World {
    type Target = ExampleFeed;
    fn deref(&self) -> &ExampleFeed {
        &self.feed
    }
}

/// This host's name in a single-host fleet; its heartbeat row is read under it.
const FLEET_HOST: &str = "serve-test";

/// Each body once on the SQLite ledger (`$sqlite`) and once on a fleet ledger (`$fleet`):
/// what `worker serve` promises does not depend on where it keeps its ledger.
macro_rules! on_both_ledgers {
    ($($sqlite:ident, $fleet:ident => $body:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            $body(World::new().await).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $fleet() {
            if let Some(w) = World::on_fleet(stringify!($body)).await {
                $body(w).await;
            }
        }
    )*};
}

impl World {
    pub(super) async fn new() -> Self {
        Self {
            feed: ExampleFeed::new(&["work", "staging", "state", "out"]).await,
            fleet: None,
        }
    }

    /// [`World::new`] with a fleet ledger; `None` (skipped) without the test cluster, unless
    /// CI=true. `test` names the database (short: Postgres cuts names at 63 bytes).
    async fn on_fleet(test: &str) -> Option<Self> {
        let db = tokio::task::block_in_place(|| TestDb::new("serve", test))?;
        let mut w = Self::new().await;
        w.fleet = Some(db);
        Some(w)
    }

    /// [`Self::job`] for each of `rounds`, all listed in the feed.
    pub(super) fn serve_rounds(&self, rounds: std::ops::Range<u64>, sleep: u32) -> Vec<Value> {
        let jobs: Vec<Value> = rounds.map(|round| self.job(round, sleep)).collect();
        self.serve_jobs(&jobs.iter().collect::<Vec<_>>());
        jobs
    }

    /// A job on the passing example source: the example's `cmp`, or with `sleep` > 0 a
    /// `sleep` of that many seconds.
    pub(super) fn job(&self, round: u64, sleep: u32) -> Value {
        let tree = example("source-pass");
        let archive = codeload_dir(&format!("sol-{round}-{}", commit(round)), "", &tree);
        // The protocol refuses a shell as argv[0], so a slow job is a plain `sleep`, which
        // exits 0: a passing verdict once it runs to its end.
        let seconds = sleep.to_string();
        let command: &[&str] = if sleep == 0 {
            &[
                "/bin/cmp",
                "/benchmark/expected.txt",
                "/workspace/result.txt",
            ]
        } else {
            &["/bin/sleep", &seconds]
        };
        self.job_running(round, archive, dir_digest(&tree), command)
    }

    /// `worker serve` on this world; `overrides` replace the default value of a flag.
    pub(super) fn command_with(&self, overrides: &[(&str, &std::ffi::OsStr)]) -> Command {
        let mut flags: Vec<(&str, std::ffi::OsString)> = vec![
            ("--api", self.server.base.clone().into()),
            ("--verifier", VERIFIER.into()),
            ("--out", self.path("out").into()),
            ("--state", self.path("state").into()),
            ("--work-dir", self.path("work").into()),
            ("--staging-root", self.path("staging").into()),
            ("--archive-base", self.server.base.clone().into()),
            ("--poll-interval", "1".into()),
            ("--shard", "0/1".into()),
        ];
        if let Some(db) = &self.fleet {
            flags.extend([
                ("--ledger", db.url.clone().into()),
                ("--ledger-password-file", db.password_file().into()),
                ("--fleet-host", FLEET_HOST.into()),
            ]);
        }
        for (flag, value) in overrides {
            let slot = flags.iter_mut().find(|(f, _)| f == flag).unwrap();
            slot.1 = (*value).to_owned();
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
        cmd.arg("serve");
        for (flag, value) in flags {
            cmd.arg(flag).arg(value);
        }
        cmd.env("WORKER_LOG", "info")
            .env_remove("GITHUB_SHA")
            .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    fn start(&self) -> Child {
        self.command_with(&[]).spawn().unwrap()
    }

    fn ledger(&self) -> Value {
        self.try_ledger().expect("the ledger exists")
    }

    /// The ledger as `worker ledger --json` shows the SQLite file; `None` while `worker
    /// serve` has not created it yet.
    fn try_ledger(&self) -> Option<Value> {
        match &self.fleet {
            None => self
                .path("state/ledger.sqlite3")
                .exists()
                .then(|| ledger_of(&self.path("state"))),
            Some(db) => fleet_ledger(db),
        }
    }

    /// [`Self::wait_ledger`] until `job` has at least `n` runs that failed with `reason`; the
    /// job must still be retried then, not given up.
    async fn wait_failed_runs(&self, what: &str, job: &Value, reason: &str, n: usize) -> Value {
        let ledger = self
            .wait_ledger(what, |l| {
                runs_of(l, job)
                    .iter()
                    .filter(|r| r["reason_code"] == reason)
                    .count()
                    >= n
            })
            .await;
        assert_ne!(job_status(&ledger, job), "exhausted", "{ledger:#}");
        ledger
    }

    /// Waits until the ledger satisfies `done` (with `what` in the panic message).
    async fn wait_ledger(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let give_up = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(ledger) = self.try_ledger() {
                if done(&ledger) {
                    return ledger;
                }
                assert!(
                    Instant::now() < give_up,
                    "timed out waiting for {what}: {ledger:#}"
                );
            }
            assert!(Instant::now() < give_up, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl World {
    /// From now on the ledger refuses to record a run's end, a fault of the ledger itself
    /// (not of the session with it, which a fleet host would reconnect through): on SQLite
    /// another writer holds the file's lock (as long as the returned connection lives); on a
    /// fleet a trigger refuses every update of a run.
    fn refuse_recording(&self) -> Option<rusqlite::Connection> {
        match &self.fleet {
            None => {
                let holder = rusqlite::Connection::open(self.path("state/ledger.sqlite3")).unwrap();
                holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
                Some(holder)
            }
            Some(db) => {
                db.exec(
                    "CREATE FUNCTION refuse_run_end() RETURNS trigger LANGUAGE plpgsql AS
                     $$ BEGIN RAISE EXCEPTION 'the test refuses to record a run'; END $$;
                     CREATE TRIGGER refuse_run_end BEFORE UPDATE ON fleet_runs
                     FOR EACH ROW EXECUTE FUNCTION refuse_run_end();",
                );
                None
            }
        }
    }
}

/// The fleet database's rows in the shape of `worker ledger --json` (the fields these tests
/// read), so each assertion reads the same on both ledgers; `None` until `worker serve` has
/// created the tables. Read on a thread of its own: the blocking client starts a runtime.
fn fleet_ledger(db: &TestDb) -> Option<Value> {
    let url = FleetUrl::parse(&db.url)
        .unwrap()
        .with_password(db.password());
    std::thread::spawn(move || {
        let mut c = url.connect().ok()?;
        let jobs = c
            .query(
                "SELECT job, job_id, round, content_hash, status, attempts, expires_ms,
                 not_before_ms FROM fleet_jobs ORDER BY job",
                &[],
            )
            .ok()?;
        let runs = c
            .query(
                "SELECT run_id, job, job_id, started_ms, ended_ms, outcome, cause, reason_code,
                 reason, evidence FROM fleet_runs ORDER BY run_id",
                &[],
            )
            .ok()?;
        let candidates = c
            .query(
                "SELECT job, job_id, run_id, file FROM fleet_candidates ORDER BY run_id",
                &[],
            )
            .ok()?;
        let heartbeat = c
            .query_opt(
                "SELECT polls_ok, polls_failed, last_poll_ok_ms FROM fleet_hosts WHERE host = $1",
                &[&FLEET_HOST],
            )
            .ok()?;
        let at = |ms: Option<i64>| ms.map(iso_utc);
        Some(json!({
            "heartbeat": heartbeat.map(|h| json!({"polls": {
                "ok": h.get::<_, i64>(0),
                "failed": h.get::<_, i64>(1),
                "last_ok_at": at(h.get(2)),
            }})),
            "jobs": jobs.iter().map(|j| json!({
                "job": j.get::<_, i64>(0),
                "job_id": j.get::<_, String>(1),
                "round": j.get::<_, i64>(2),
                "content_hash": j.get::<_, String>(3),
                "status": j.get::<_, String>(4),
                "attempts": j.get::<_, i64>(5),
                "expires_at": at(j.get(6)),
                "retry_not_before": at(j.get(7)),
            })).collect::<Vec<_>>(),
            "runs": runs.iter().map(|r| json!({
                "run_id": r.get::<_, i64>(0),
                "job": r.get::<_, i64>(1),
                "job_id": r.get::<_, String>(2),
                "started_at": iso_utc(r.get(3)),
                "ended_at": at(r.get(4)),
                "outcome": r.get::<_, Option<String>>(5),
                "cause": r.get::<_, Option<String>>(6),
                "reason_code": r.get::<_, Option<String>>(7),
                "reason": r.get::<_, Option<String>>(8),
                "evidence": r.get::<_, Option<String>>(9),
            })).collect::<Vec<_>>(),
            "candidates": candidates.iter().map(|c| json!({
                "job": c.get::<_, i64>(0),
                "job_id": c.get::<_, String>(1),
                "run_id": c.get::<_, i64>(2),
                "file": c.get::<_, String>(3),
            })).collect::<Vec<_>>(),
        }))
    })
    .join()
    .unwrap()
}

pub(super) fn id(job: &Value) -> String {
    job["job_id"].as_str().unwrap().to_owned()
}

fn job_status(ledger: &Value, job: &Value) -> String {
    ledger["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == job["job_id"])
        .map(|j| j["status"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn runs_of(ledger: &Value, job: &Value) -> Vec<Value> {
    ledger["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["job_id"] == job["job_id"])
        .cloned()
        .collect()
}

fn candidates_of(ledger: &Value, job: &Value) -> usize {
    ledger["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["job_id"] == job["job_id"])
        .count()
}

/// Every container (any state) whose owner label names the worker process `pid`.
pub(super) fn containers_of(pid: u32) -> Vec<String> {
    crate::example_feed::containers_of(pid, true)
}

pub(super) async fn wait_container(pid: u32) -> Vec<String> {
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let found = containers_of(pid);
        if !found.is_empty() {
            return found;
        }
        assert!(
            Instant::now() < give_up,
            "worker {pid} never started a container"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(super) fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to exit within `bound`; returns its exit code and stderr.
pub(super) async fn exit_within(mut child: Child, bound: Duration) -> (Option<i32>, String) {
    let give_up = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return (status.code(), stderr);
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "worker serve did not exit within {bound:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The manifest's job ids, each candidate re-checked as the signer does.
pub(super) fn signable(out: &Path) -> Vec<String> {
    let raw: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let manifest = CandidateManifest::from_value(&raw).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut ids = Vec::new();
    for entry in &manifest.candidates {
        let bytes = std::fs::read(out.join(&entry.file)).unwrap();
        let c = Candidate::from_value(&serde_json::from_slice(&bytes).unwrap()).unwrap();
        verifier_sdk::revalidate_candidate(&c.job, &c.job, &c.outcome, c.evidence.as_ref(), now)
            .unwrap_or_else(|e| panic!("the signer would refuse {}: {e}", entry.job_id));
        ids.push(entry.job_id.clone());
    }
    ids.sort();
    ids
}

async fn sigkilled_mid_run(w: World) {
    let done = w.job(1, 0);
    w.serve_jobs(&[&done]);
    let first = w.start();
    w.wait_ledger("the first job to complete", |l| {
        job_status(l, &done) == "completed"
    })
    .await;

    // A second job that sleeps; SIGKILL the service while its container runs.
    let slow = w.job(2, 8);
    w.serve_jobs(&[&done, &slow]);
    let pid1 = first.id();
    let orphans = wait_container(pid1).await;
    signal(&first, "KILL");
    let (code, _) = exit_within(first, Duration::from_secs(10)).await;
    assert_eq!(code, None, "SIGKILL leaves no exit code");
    assert_eq!(
        containers_of(pid1),
        orphans,
        "the killed worker's container outlives it (else the test proves nothing)"
    );
    let killed = w.ledger();
    assert_eq!(job_status(&killed, &slow), "running");
    assert_eq!(runs_of(&killed, &slow)[0]["ended_at"], Value::Null);

    let second = w.start();
    let ledger = w
        .wait_ledger("the slow job to complete after the restart", |l| {
            job_status(l, &slow) == "completed"
        })
        .await;
    assert!(
        containers_of(pid1).is_empty(),
        "the dead worker's container was not reaped"
    );
    let slow_runs = runs_of(&ledger, &slow);
    assert_eq!(slow_runs.len(), 2, "{slow_runs:#?}");
    assert_eq!(slow_runs[0]["outcome"], "interrupted");
    assert_eq!(slow_runs[0]["evidence"], Value::Null);
    assert_eq!(slow_runs[1]["outcome"], "completed_passed");
    assert!(
        slow_runs[1]["evidence"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(candidates_of(&ledger, &slow), 1);
    // A few more polls: nothing completed runs again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid2 = second.id();
    signal(&second, "TERM");
    let (code, stderr) = exit_within(second, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
    let ledger = w.ledger();
    assert_eq!(
        runs_of(&ledger, &done).len(),
        1,
        "a completed job ran again"
    );
    assert_eq!(candidates_of(&ledger, &done), 1);
    assert_eq!(runs_of(&ledger, &slow).len(), 2);
    assert_eq!(candidates_of(&ledger, &slow), 1);
    assert!(containers_of(pid2).is_empty());
    let mut want = vec![id(&done), id(&slow)];
    want.sort();
    assert_eq!(signable(&w.path("out")), want);
}

async fn sigterm_mid_run(w: World) {
    let slow = w.job(3, 120);
    w.serve_jobs(&[&slow]);
    let child = w.start();
    let pid = child.id();
    wait_container(pid).await;
    let asked = Instant::now();
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    let took = asked.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        took < worker_serve::SHUTDOWN_BOUND,
        "shutdown took {took:?}"
    );
    assert!(
        containers_of(pid).is_empty(),
        "a container survived the shutdown"
    );
    let ledger = w.ledger();
    let runs = runs_of(&ledger, &slow);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["outcome"], "interrupted");
    assert!(runs[0]["ended_at"].is_string());
    assert_eq!(job_status(&ledger, &slow), "interrupted");
    assert_eq!(candidates_of(&ledger, &slow), 0);
    assert!(
        std::fs::read_dir(w.path("out"))
            .unwrap()
            .all(|e| e.unwrap().file_name() == "manifest.json"),
        "a candidate was written for an interrupted run"
    );
}

async fn feed_down_recovers(w: World) {
    w.server.route(&feed_path(VERIFIER), Reply::status(503));
    let mut child = w.start();
    w.wait_ledger("failed polls to be counted", |l| {
        l["heartbeat"]["polls"]["failed"].as_i64() >= Some(2)
    })
    .await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "serve exited while the feed was down"
    );
    let job = w.job(4, 0);
    w.serve_jobs(&[&job]);
    let ledger = w
        .wait_ledger("the job to complete once the feed is back", |l| {
            job_status(l, &job) == "completed" && l["heartbeat"]["polls"]["ok"].as_i64() >= Some(2)
        })
        .await;
    assert!(ledger["heartbeat"]["polls"]["last_ok_at"].is_string());
    stop_cleanly(child).await;
    assert_eq!(signable(&w.path("out")), vec![id(&job)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_two_shards_on_one_feed_run_every_job_exactly_once() {
    let w = World::new().await;
    let jobs = w.serve_rounds(10..14, 0);
    let shard = |i: u64| {
        jobs.iter()
            .filter(|j| worker_serve::shard::shard_of(&id(j), 2) == i)
            .count()
    };
    assert!(
        shard(0) > 0 && shard(1) > 0,
        "the fixture jobs all fall in one shard"
    );
    // Two hosts: separate state, output and work dirs; one staging root is fine.
    let mut hosts = Vec::new();
    for i in 0..2 {
        for d in ["state", "out", "work"] {
            std::fs::create_dir_all(w.path(&format!("{d}{i}"))).unwrap();
        }
        let shard = format!("{i}/2");
        let (state, out, work) = (
            w.path(&format!("state{i}")),
            w.path(&format!("out{i}")),
            w.path(&format!("work{i}")),
        );
        let mut cmd = w.command_with(&[
            ("--shard", shard.as_ref()),
            ("--state", state.as_ref()),
            ("--out", out.as_ref()),
            ("--work-dir", work.as_ref()),
        ]);
        hosts.push(cmd.spawn().unwrap());
    }
    let give_up = Instant::now() + Duration::from_secs(180);
    loop {
        let completed: usize = (0..2)
            .map(|i| {
                let state = w.path(&format!("state{i}"));
                if !state.join("ledger.sqlite3").exists() {
                    return 0;
                }
                let l = ledger_of(&state);
                jobs.iter()
                    .filter(|j| job_status(&l, j) == "completed")
                    .count()
            })
            .sum();
        if completed == jobs.len() {
            break;
        }
        assert!(Instant::now() < give_up, "not every job completed");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    for host in hosts {
        signal(&host, "TERM");
        let (code, stderr) = exit_within(host, Duration::from_secs(40)).await;
        assert_eq!(code, Some(0), "{stderr}");
    }
    let mut seen = Vec::new();
    for i in 0..2u64 {
        let l = ledger_of(&w.path(&format!("state{i}")));
        for j in &jobs {
            let runs = runs_of(&l, j).len();
            if worker_serve::shard::shard_of(&id(j), 2) == i {
                assert_eq!(runs, 1, "shard {i} ran {} {runs} times", id(j));
            } else {
                assert_eq!(runs, 0, "shard {i} ran another shard's job {}", id(j));
                assert_eq!(
                    job_status(&l, j),
                    "",
                    "shard {i} recorded another shard's job"
                );
            }
        }
        seen.extend(signable(&w.path(&format!("out{i}"))));
    }
    seen.sort();
    let mut want: Vec<String> = jobs.iter().map(id).collect();
    want.sort();
    assert_eq!(seen, want, "every job once across the shards");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_configuration_errors_exit_78() {
    let w = World::new().await;
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Plain http to a non-loopback host breaks the URL policy.
    let (code, err) = run(&mut w.command_with(&[("--api", "http://example.com".as_ref())]));
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("api base url"), "{err}");
    // The state directory is a file.
    let file = w.path("a-file");
    std::fs::write(&file, b"x").unwrap();
    let (code, err) = run(&mut w.command_with(&[("--state", file.as_ref())]));
    assert_eq!(code, Some(78), "{err}");
    // A ledger written by a newer worker: this one must not guess at its schema.
    let newer = w.path("state-newer");
    std::fs::create_dir(&newer).unwrap();
    rusqlite::Connection::open(newer.join("ledger.sqlite3"))
        .unwrap()
        .pragma_update(None, "user_version", 999)
        .unwrap();
    let (code, err) = run(&mut w.command_with(&[("--state", newer.as_ref())]));
    assert_eq!(code, Some(78), "{err}");
    assert!(err.contains("schema version 999"), "{err}");
    // The staging root is a file.
    let (code, err) = run(&mut w.command_with(&[("--staging-root", file.as_ref())]));
    assert_eq!(code, Some(78), "{err}");
    // None of these started a poll.
    assert_eq!(w.server.hits(&feed_path(VERIFIER)), 0);
}

async fn parallel_2_sigterm(w: World) {
    let (a, b, c) = (w.job(20, 120), w.job(21, 120), w.job(22, 120));
    w.serve_jobs(&[&a, &b, &c]);
    let mut cmd = w.command_with(&[]);
    cmd.args(["--parallel", "2"]);
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let give_up = Instant::now() + Duration::from_secs(120);
    while containers_of(pid).len() < 2 {
        assert!(Instant::now() < give_up, "two containers never ran at once");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        containers_of(pid).len(),
        2,
        "more than --parallel jobs ran at once"
    );
    stop_cleanly(child).await;
    assert!(
        containers_of(pid).is_empty(),
        "a container survived the shutdown"
    );
    let ledger = w.ledger();
    let runs: Vec<Value> = [&a, &b, &c]
        .iter()
        .flat_map(|j| runs_of(&ledger, j))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert!(
        runs.iter().all(|r| r["outcome"] == "interrupted"),
        "{runs:#?}"
    );
    assert!(ledger["candidates"].as_array().unwrap().is_empty());
}

/// A loopback port nobody listens on (bound then released; the race with another binder is
/// harmless here: the service would exit and the test fail loudly).
pub(super) fn free_loopback() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One raw HTTP/1.1 request; returns the status and body, or `None` when nothing answered
/// within 3 s (refused, reset, or a stalled server).
async fn http(addr: std::net::SocketAddr, request: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.ok()?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?.parse().ok()?;
        Some((status, body.to_owned()))
    };
    tokio::time::timeout(Duration::from_secs(3), exchange)
        .await
        .ok()
        .flatten()
}

pub(super) async fn get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
    )
    .await
}

/// The value of one series (`name` or `name{labels}`, exactly as exposed) in a text
/// exposition.
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        rest.split(' ').next()?.parse().ok()
    })
}

/// Polls `/metrics` until `done` holds for the exposition.
async fn wait_metrics(
    addr: std::net::SocketAddr,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let give_up = Instant::now() + Duration::from_secs(120);
    let mut last = String::new();
    loop {
        if let Some((200, body)) = get(addr, "/metrics").await {
            if done(&body) {
                return body;
            }
            last = body;
        }
        assert!(
            Instant::now() < give_up,
            "timed out waiting for {what}; last /metrics:\n{last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl World {
    fn start_with_metrics(&self, addr: std::net::SocketAddr) -> Child {
        let mut cmd = self.command_with(&[]);
        cmd.arg("--metrics-listen").arg(addr.to_string());
        cmd.spawn().unwrap()
    }

    /// Starts the service on an empty feed with metrics at a free loopback address, once its
    /// first poll has succeeded.
    async fn start_idle_with_metrics(&self) -> (std::net::SocketAddr, Child) {
        let addr = free_loopback();
        self.serve_jobs(&[]);
        let child = self.start_with_metrics(addr);
        wait_first_poll(addr).await;
        (addr, child)
    }
}

async fn wait_first_poll(addr: std::net::SocketAddr) {
    wait_metrics(addr, "a successful poll", |m| {
        sample(m, POLLS_OK) >= Some(1.0)
    })
    .await;
}

const POLLS_FAILED: &str = "worker_serve_polls_total{result=\"failed\"}";
const POLLS_OK: &str = "worker_serve_polls_total{result=\"ok\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_feed_down_counts_failed_polls_healthz_503_then_recovers_to_200() {
    let w = World::new().await;
    w.server.route(&feed_path(VERIFIER), Reply::status(503));
    let addr = free_loopback();
    let child = w.start_with_metrics(addr);
    let first = wait_metrics(addr, "two failed polls", |m| {
        sample(m, POLLS_FAILED) >= Some(2.0)
    })
    .await;
    assert_eq!(sample(&first, POLLS_OK), Some(0.0), "{first}");
    let later = wait_metrics(addr, "the failed polls to keep increasing", |m| {
        sample(m, POLLS_FAILED) > sample(&first, POLLS_FAILED)
    })
    .await;
    assert_eq!(
        sample(
            &later,
            "worker_serve_last_successful_poll_timestamp_seconds"
        ),
        Some(0.0),
        "{later}"
    );
    // No successful poll ever: unhealthy, and the body says why.
    let (status, body) = get(addr, "/healthz").await.expect("/healthz answers");
    assert_eq!(status, 503, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "unhealthy", "{health}");
    assert!(
        health["reason"].as_str().unwrap().contains("poll"),
        "{health}"
    );

    // The feed comes back with a job: polls succeed, the job runs, health returns.
    let job = w.job(30, 0);
    w.serve_jobs(&[&job]);
    w.wait_ledger("the job to complete once the feed is back", |l| {
        job_status(l, &job) == "completed"
    })
    .await;
    let back = wait_metrics(addr, "successful polls", |m| {
        sample(m, POLLS_OK) >= Some(1.0)
    })
    .await;
    assert!(
        sample(&back, "worker_serve_last_successful_poll_timestamp_seconds") > Some(1.0e9),
        "{back}"
    );
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = get(addr, "/healthz").await;
        if let Some((200, body)) = &answer {
            let health: Value = serde_json::from_str(body).unwrap();
            assert_eq!(health["status"], "ok", "{health}");
            break;
        }
        assert!(
            Instant::now() < give_up,
            "/healthz never recovered: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_cleanly(child).await;
}

async fn metrics_after_completed(w: World) {
    let job = w.job(31, 0);
    w.serve_jobs(&[&job]);
    let addr = free_loopback();
    let child = w.start_with_metrics(addr);
    w.wait_ledger("the job to complete", |l| {
        job_status(l, &job) == "completed"
    })
    .await;
    let m = wait_metrics(addr, "the completed run", |m| {
        sample(m, "worker_serve_runs_total{outcome=\"completed_passed\"}") == Some(1.0)
    })
    .await;
    assert_eq!(
        sample(&m, "worker_serve_run_duration_seconds_count"),
        Some(1.0),
        "{m}"
    );
    assert!(
        sample(&m, "worker_serve_run_duration_seconds_sum") > Some(0.0),
        "{m}"
    );
    assert_eq!(sample(&m, "worker_serve_jobs_seen_total"), Some(1.0), "{m}");
    assert_eq!(sample(&m, "worker_serve_runs_in_flight"), Some(0.0), "{m}");
    assert_eq!(
        sample(&m, "worker_serve_interrupted_runs_total"),
        Some(0.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "worker_serve_oldest_pending_job_age_seconds"),
        Some(0.0),
        "nothing is pending once the only job completed: {m}"
    );
    assert_eq!(
        sample(
            &m,
            &format!(
                "worker_build_info{{version=\"{}\",build=\"{}\"}}",
                env!("CARGO_PKG_VERSION"),
                super::build_identity::worker_build()
            )
        ),
        Some(1.0),
        "{m}"
    );
    // Only GET of the two paths.
    assert_eq!(get(addr, "/").await.map(|r| r.0), Some(404));
    assert_eq!(
        get(addr, "/metrics/../healthz").await.map(|r| r.0),
        Some(404)
    );
    assert_eq!(
        http(addr, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            .await
            .map(|r| r.0),
        Some(405)
    );
    assert_eq!(http(addr, "garbage\r\n\r\n").await.map(|r| r.0), Some(400));
    let stderr = stop_cleanly(child).await;
    // No --parallel: the default was sized from the engine and the job's manifest, and said so.
    assert!(stderr.contains("--parallel not given"), "{stderr}");
    assert!(
        stderr.contains("jobs at once") && stderr.contains("millis per job"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_listen_on_a_non_loopback_address_exits_78_on_a_held_port_1() {
    let w = World::new().await;
    for addr in ["0.0.0.0:9464", "[::]:9464", "192.0.2.1:9464"] {
        let mut cmd = w.command_with(&[]);
        cmd.args(["--metrics-listen", addr]);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{addr}: {stderr}");
        assert!(stderr.contains("--metrics-listen"), "{addr}: {stderr}");
        assert!(stderr.contains("loopback"), "{addr}: {stderr}");
        assert!(
            stderr.contains("--metrics-allow-remote"),
            "{addr}: {stderr}"
        );
    }
    assert_eq!(
        w.server.hits(&feed_path(VERIFIER)),
        0,
        "a refused start polled"
    );
    // A port still held (a predecessor stopping) is something a restart may fix: exit 1,
    // which systemd restarts, not 78, which it does not.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cmd = w.command_with(&[]);
    cmd.arg("--metrics-listen")
        .arg(held.local_addr().unwrap().to_string());
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
    assert_eq!(w.server.hits(&feed_path(VERIFIER)), 0);
}

/// #46 item 6: with --metrics-allow-remote, a central Prometheus reaches the endpoint on a
/// non-loopback address (0.0.0.0 here, answered on every address of the host); the start says
/// so in its log. Before, every such address exited 78.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_listen_beyond_loopback_with_metrics_allow_remote() {
    let w = World::new().await;
    w.serve_jobs(&[]);
    let port = free_loopback().port();
    let mut cmd = w.command_with(&[]);
    cmd.args([
        "--metrics-listen",
        &format!("0.0.0.0:{port}"),
        "--metrics-allow-remote",
    ]);
    let child = cmd.spawn().unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    wait_first_poll(addr).await;
    let stderr = stop_cleanly(child).await;
    assert!(
        stderr.contains("beyond this host") && stderr.contains("firewall"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_hostile_clients_cannot_block_healthz_or_the_service() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let w = World::new().await;
    let (addr, child) = w.start_idle_with_metrics().await;

    // Slowloris: many connections that send a request head a byte at a time, never ending it.
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    let dribble = tokio::spawn(async move {
        let started = Instant::now();
        let mut closed = vec![None; slow.len()];
        while started.elapsed() < Duration::from_secs(30) && closed.iter().any(Option::is_none) {
            for (i, s) in slow.iter_mut().enumerate() {
                if closed[i].is_some() {
                    continue;
                }
                let mut buf = [0u8; 256];
                // The server ends the connection (with or without an answer) once its
                // deadline passes: a read returning 0 or an error, or a failed write.
                match tokio::time::timeout(Duration::from_millis(5), s.read(&mut buf)).await {
                    Ok(Ok(0) | Err(_)) => closed[i] = Some(started.elapsed()),
                    _ => {
                        if s.write_all(b"a").await.is_err() {
                            closed[i] = Some(started.elapsed());
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        closed
    });
    // A huge request: an endless header line.
    let huge = tokio::spawn(async move {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = 0usize;
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX-Huge: ").await;
        let started = Instant::now();
        while sent < 64 * 1024 * 1024 && started.elapsed() < Duration::from_secs(20) {
            match tokio::time::timeout(Duration::from_secs(2), s.write_all(&chunk)).await {
                Ok(Ok(())) => sent += chunk.len(),
                _ => break,
            }
        }
        sent
    });

    // Meanwhile /healthz and /metrics answer promptly, every time.
    for _ in 0..10 {
        let asked = Instant::now();
        let answer = get(addr, "/healthz").await;
        assert_eq!(answer.as_ref().map(|a| a.0), Some(200), "{answer:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(get(addr, "/metrics").await.map(|a| a.0), Some(200));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // And the service goes on: a job listed now runs to its verdict.
    let job = w.job(32, 0);
    w.serve_jobs(&[&job]);
    w.wait_ledger("the job to complete under attack", |l| {
        job_status(l, &job) == "completed"
    })
    .await;

    let sent = huge.await.unwrap();
    assert!(
        sent < 64 * 1024 * 1024,
        "the server read a 64 MiB request head to its end"
    );
    let closed = dribble.await.unwrap();
    assert!(
        closed
            .iter()
            .all(|c| c.is_some_and(|t| t < Duration::from_secs(20))),
        "slow connections were kept open: {closed:?}"
    );
    assert_eq!(get(addr, "/healthz").await.map(|a| a.0), Some(200));
    stop_cleanly(child).await;
}

/// The job under one opaque id: the platform's ids usually name the round, but the id is
/// opaque (PROTOCOL §2), so the ledger must not assume it.
fn under_id(mut job: Value, id: &str) -> Value {
    job["job_id"] = json!(id);
    job
}

/// The round of the candidate the output's manifest lists for `id`.
fn listed_round(out: &Path, id: &str) -> Option<u64> {
    let raw: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).ok()?).ok()?;
    let manifest = CandidateManifest::from_value(&raw).unwrap();
    let entry = manifest.candidates.iter().find(|c| c.job_id == id)?;
    let bytes = std::fs::read(out.join(&entry.file)).unwrap();
    let c = Candidate::from_value(&serde_json::from_slice(&bytes).unwrap()).unwrap();
    Some(c.job["round"].as_u64().unwrap())
}

async fn new_round_changed_content(w: World) {
    let id = "opaque-job-1";
    let first = under_id(w.job(40, 0), id);
    w.serve_jobs(&[&first]);
    let child = w.start();
    w.wait_ledger("round 40 to complete", |l| {
        runs_of(l, &first)
            .iter()
            .any(|r| r["outcome"] == "completed_passed")
    })
    .await;
    assert_eq!(listed_round(&w.path("out"), id), Some(40));

    // A new round under the same id: a new job, run once.
    let next = under_id(w.job(41, 0), id);
    w.serve_jobs(&[&next]);
    let ledger = w
        .wait_ledger("round 41 to run", |l| {
            runs_of(l, &next)
                .iter()
                .filter(|r| r["outcome"] == "completed_passed")
                .count()
                == 2
        })
        .await;
    let rounds: Vec<i64> = ledger["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["job_id"] == id)
        .map(|j| j["round"].as_i64().unwrap())
        .collect();
    assert_eq!(rounds, vec![40, 41], "{ledger:#}");
    let give_up = Instant::now() + Duration::from_secs(30);
    while listed_round(&w.path("out"), id) != Some(41) {
        assert!(
            Instant::now() < give_up,
            "the manifest still lists round 40"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Round 41 again with other content (another command): recorded, never run, and the
    // verdict for the content that did run is not offered for it.
    let changed = under_id(w.job(41, 1), id);
    assert_ne!(changed, next);
    w.serve_jobs(&[&changed]);
    w.wait_ledger("the changed content to be recorded", |l| {
        l["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["job_id"] == id && j["status"] == "conflicting")
    })
    .await;
    let give_up = Instant::now() + Duration::from_secs(30);
    while listed_round(&w.path("out"), id).is_some() {
        assert!(
            Instant::now() < give_up,
            "the manifest offers the old content's verdict for the changed job"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A few more polls: still nothing run for it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_cleanly(child).await;
    let ledger = w.ledger();
    assert_eq!(runs_of(&ledger, &changed).len(), 2, "{ledger:#}");
    assert_eq!(candidates_of(&ledger, &changed), 2);
    assert!(
        ledger["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["status"] != "conflicting" || j["content_hash"].is_string()),
        "{ledger:#}"
    );
    assert_eq!(listed_round(&w.path("out"), id), None);
}

// ---------------------------------------------------------------------------------------
// Faults of the host, of a job, and of a second instance (issues 21 and 23).

/// Unix seconds now.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Unix ms of an ISO 8601 UTC time as `worker ledger` prints it (`2026-12-01T10:00:00.123Z`),
/// parsed here independently of the worker's own formatter.
fn iso_ms(s: &str) -> i64 {
    let b = s.as_bytes();
    assert!(
        s.len() == 24 && s.ends_with('Z') && b[10] == b'T' && b[19] == b'.',
        "not ISO 8601 UTC with ms: {s:?}"
    );
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + n(11..13)) * 60 + n(14..16)) * 60_000 + n(17..19) * 1000 + n(20..23)
}

#[test]
fn serve_test_iso_parser_reads_known_instants() {
    assert_eq!(iso_ms("1970-01-01T00:00:00.000Z"), 0);
    assert_eq!(iso_ms("2001-09-09T01:46:40.000Z"), 1_000_000_000_000);
    assert_eq!(iso_ms("2024-02-29T23:59:59.999Z"), 1_709_251_199_999);
}

/// Run rows of `job`, each with its start (unix ms) read from its ISO time.
fn run_starts(ledger: &Value, job: &Value) -> Vec<i64> {
    runs_of(ledger, job)
        .iter()
        .map(|r| iso_ms(r["started_at"].as_str().unwrap()))
        .collect()
}

/// The example job whose source archive does not match the digest it commits to: the job's
/// own failure (`input_mismatch`, no verdict), every time it runs, no container needed.
fn mismatched_job(w: &World, round: u64) -> Value {
    let tree = example("source-pass");
    let archive = codeload_dir(&format!("sol-{round}-{}", commit(round)), "", &tree);
    let wrong = dir_digest(&example("benchmark"));
    w.job_running(
        round,
        archive,
        wrong,
        &[
            "/bin/cmp",
            "/benchmark/expected.txt",
            "/workspace/result.txt",
        ],
    )
}

/// The example job (`cmp`, passing) in the digest-pinned `image` instead of busybox.
fn job_with_image(w: &World, round: u64, image: &str) -> Value {
    let tree = example("source-pass");
    w.job_in_image(
        round,
        codeload_dir(&format!("sol-{round}-{}", commit(round)), "", &tree),
        dir_digest(&tree),
        &[
            "/bin/cmp",
            "/benchmark/expected.txt",
            "/workspace/result.txt",
        ],
        image,
    )
}

/// A loopback TCP gate in front of the test server: while closed, every connection is
/// dropped at once (the archive host unreachable, `download_transport`); once opened, bytes
/// pass through.
struct Gate {
    base: String,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Gate {
    async fn start(target_base: &str) -> Self {
        use std::sync::atomic::Ordering;
        let target: std::net::SocketAddr =
            target_base.trim_start_matches("http://").parse().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gate = open.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !gate.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                tokio::spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
            }
        });
        Self { base, open }
    }

    fn open(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Stops the service with SIGTERM and checks that it exits 0 within 40 s; returns its stderr.
async fn stop_cleanly(child: Child) -> String {
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
    stderr
}

/// [`stop_cleanly`] for a child whose stderr `log` drains.
async fn stop_drained_cleanly(mut child: Child, log: std::thread::JoinHandle<String>) -> String {
    signal(&child, "TERM");
    let code = code_within(&mut child, Duration::from_secs(40)).await;
    let stderr = log.join().unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    stderr
}

/// Reads the child's stderr to its end on a thread, so a long-running service never blocks
/// on a full pipe; the text is returned by `join`.
fn drain_stderr(child: &mut Child) -> std::thread::JoinHandle<String> {
    let mut pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
        text
    })
}

/// Waits for the child to exit within `bound` (its stderr already taken); returns the code.
async fn code_within(child: &mut Child, bound: Duration) -> Option<i32> {
    let give_up = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            let _ = child.wait();
            panic!("worker serve did not exit within {bound:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 21.5: a second `worker serve` on the same `--state` refuses (before touching the
/// ledger), also when it would have exited on a port clash; the live run stays as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_second_instance_on_one_state_refuses_and_leaves_the_live_run_alone() {
    let w = World::new().await;
    let slow = w.job(50, 120);
    w.serve_jobs(&[&slow]);
    let mut first = w.start();
    let first_log = drain_stderr(&mut first);
    let pid1 = first.id();
    wait_container(pid1).await;
    let live = w.ledger();
    assert_eq!(runs_of(&live, &slow).len(), 1);

    // The port clash: the second exits, but must not have rewritten the first's live run.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut clash = w.command_with(&[]);
    clash
        .arg("--metrics-listen")
        .arg(held.local_addr().unwrap().to_string());
    let out = clash.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let after = w.ledger();
    assert_eq!(
        runs_of(&after, &slow),
        runs_of(&live, &slow),
        "the second instance rewrote the live run: {stderr}"
    );
    assert_eq!(job_status(&after, &slow), "running");

    // A plain second instance: refuses at once with a clear message, runs nothing.
    let mut second = w.start();
    let second_log = drain_stderr(&mut second);
    let pid2 = second.id();
    let code = code_within(&mut second, Duration::from_secs(30)).await;
    let stderr = second_log.join().unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("another worker serve") && stderr.contains(&pid1.to_string()),
        "{stderr}"
    );
    assert!(containers_of(pid2).is_empty(), "the second ran a container");
    let after = w.ledger();
    let runs = runs_of(&after, &slow);
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0]["ended_at"], Value::Null, "{runs:#?}");
    assert_eq!(
        containers_of(pid1).len(),
        1,
        "the live run's container is gone"
    );
    signal(&first, "TERM");
    let code = code_within(&mut first, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{}", first_log.join().unwrap());
}

/// Issue 21.6: a ledger locked by another process past the busy timeout is transient (exit 1,
/// which systemd restarts); a corrupt ledger is not (exit 78).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_a_busy_ledger_at_start_exits_1_and_a_corrupt_one_78() {
    let w = World::new().await;
    let state = w.path("state");
    drop(worker_serve::ledger::Ledger::open(&state).unwrap());
    let holder = rusqlite::Connection::open(state.join("ledger.sqlite3")).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let out = w.command_with(&[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("locked") || stderr.contains("busy"),
        "{stderr}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);

    let corrupt = w.path("state-corrupt");
    std::fs::create_dir(&corrupt).unwrap();
    std::fs::write(corrupt.join("ledger.sqlite3"), vec![0x5a; 8192]).unwrap();
    let out = w
        .command_with(&[("--state", corrupt.as_ref())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert_eq!(w.server.hits(&feed_path(VERIFIER)), 0);
}

/// Issue 21.6: the ledger first created on a full disk (here: its file on `/dev/full`, which
/// answers every write with ENOSPC, as SQLite's "database or disk is full") is transient:
/// exit 1, which systemd restarts, not 78.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_a_ledger_on_a_full_disk_at_start_exits_1() {
    let w = World::new().await;
    let full = w.path("state-full");
    std::fs::create_dir(&full).unwrap();
    std::os::unix::fs::symlink("/dev/full", full.join("ledger.sqlite3")).unwrap();
    let out = w
        .command_with(&[("--state", full.as_ref())])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("full"), "{stderr}");
    assert_eq!(w.server.hits(&feed_path(VERIFIER)), 0);
}

/// Issue 21.9: `worker serve --parallel 2` exiting 1 on a ledger error (the ledger locked by
/// another process when a run ends) removes the container of the run still going.
async fn error_exit_removes_containers(w: World) {
    let (long, short) = (w.job(51, 120), w.job(52, 15));
    w.serve_jobs(&[&long, &short]);
    let mut cmd = w.command_with(&[]);
    cmd.args(["--parallel", "2"]);
    let mut child = cmd.spawn().unwrap();
    let log = drain_stderr(&mut child);
    let pid = child.id();
    let give_up = Instant::now() + Duration::from_secs(120);
    while containers_of(pid).len() < 2 {
        assert!(Instant::now() < give_up, "two containers never ran at once");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The short run ends within 15 s and cannot be recorded: the service exits 1.
    let holder = w.refuse_recording();
    let code = code_within(&mut child, Duration::from_secs(120)).await;
    drop(holder);
    let stderr = log.join().unwrap();
    assert_eq!(code, Some(1), "{stderr}");
    if w.fleet.is_some() {
        // The exit is the refused record's, not some other fault of the fleet.
        assert!(stderr.contains("fleet ledger: recording a run"), "{stderr}");
        // And it says why, in the server's words: the client's own text is only "db error".
        assert!(
            stderr.contains("the test refuses to record a run"),
            "{stderr}"
        );
    }
    assert!(
        containers_of(pid).is_empty(),
        "a container outlived the error exit: {stderr}"
    );
}

/// Issue 21.10: a local user holding 64 and more idle connections cannot make `/healthz`
/// fail (a false alert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_64_idle_connections_do_not_starve_healthz() {
    let w = World::new().await;
    let (addr, child) = w.start_idle_with_metrics().await;
    for wave in 0..2 {
        // Idle: connected, nothing sent, kept open.
        let mut idle = Vec::new();
        for _ in 0..100 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        for i in 0..10 {
            let answer = get(addr, "/healthz").await;
            assert_eq!(
                answer.as_ref().map(|a| a.0),
                Some(200),
                "wave {wave}, check {i}: {answer:?}"
            );
        }
        drop(idle);
    }
    stop_cleanly(child).await;
}

/// Issue 23.1, as the chaos driver corrected it (seed 4): an image missing without `--pull`
/// is that job's own failure, not the host's. The job backs off alone and is never given up
/// for it while its window is open, the host stays healthy (so other bounties' jobs keep
/// running: as a host fault, one absent digest stalled them all), and the job runs by itself
/// once the image is there.
async fn missing_image_recovers(w: World) {
    let unique = format!("{}-{}", std::process::id(), unix_now());
    let image = crate::support::derived_image(
        &format!("serve-missing-{unique}"),
        &format!("LABEL dev.agent-bounties.test=\"{unique}\""),
    );
    let removed = Command::new("docker")
        .args(["image", "rm", "-f"])
        .arg(&image)
        .arg(format!(
            "127.0.0.1:5000/verifier-sandbox-serve-missing-{unique}:test"
        ))
        .output()
        .unwrap();
    assert!(removed.status.success(), "{removed:?}");
    let job = job_with_image(&w, 53, &image);
    w.serve_jobs(&[&job]);
    let addr = free_loopback();
    let mut child = w.start_with_metrics(addr);
    let log = drain_stderr(&mut child);
    // More failed runs than the old limit of three attempts (back-offs of 1, 2 and 4 s).
    let ledger = w
        .wait_failed_runs(
            "four runs failing on the missing image",
            &job,
            "image_missing",
            4,
        )
        .await;
    let entry = ledger["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == job["job_id"])
        .unwrap()
        .clone();
    assert!(
        entry["attempts"].as_i64() >= Some(4),
        "a missing image is the job's own failure: {entry}"
    );
    assert!(
        runs_of(&ledger, &job)
            .iter()
            .filter(|r| r["reason_code"] == "image_missing")
            .all(|r| r["cause"] == "job"),
        "{ledger:#}"
    );
    // The host is healthy: other jobs would run.
    let (status, body) = get(addr, "/healthz").await.expect("/healthz answers");
    assert_eq!(status, 200, "{body}");
    // The job is waiting, and the age of the oldest pending job says so.
    let m = wait_metrics(addr, "the scrape", |_| true).await;
    assert!(
        sample(&m, "worker_serve_oldest_pending_job_age_seconds") >= Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            "worker_serve_host_failures_total{reason=\"image_missing\"}"
        )
        .unwrap_or(0.0),
        0.0,
        "{m}"
    );
    // Fixed: the image is pulled. The job runs by itself at its next retry (its back-off
    // is at most 16 s after five failures here, well inside the 120 s wait).
    let pulled = Command::new("docker")
        .args(["pull", "-q"])
        .arg(&image)
        .output()
        .unwrap();
    assert!(pulled.status.success(), "{pulled:?}");
    w.wait_ledger("the job to complete once the image is there", |l| {
        job_status(l, &job) == "completed"
    })
    .await;
    let m = wait_metrics(addr, "the scrape", |_| true).await;
    assert_eq!(
        sample(&m, "worker_serve_jobs_given_up_total"),
        Some(0.0),
        "{m}"
    );
    let stderr = stop_drained_cleanly(child, log).await;
    // The reason is still said at WARN, not only `status="error"` at INFO.
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("WARN") && l.contains("image_missing")),
        "{stderr}"
    );
    let _ = Command::new("docker")
        .args(["image", "rm", "-f"])
        .arg(&image)
        .output();
}

/// Issue 23.1: the archive host unreachable (`download_transport`) is the host's fault; the
/// job runs by itself once the host answers again.
async fn unreachable_archive_host(w: World) {
    let gate = Gate::start(&w.server.base).await;
    let job = w.job(54, 0);
    w.serve_jobs(&[&job]);
    let mut child = w
        .command_with(&[("--archive-base", gate.base.as_ref())])
        .spawn()
        .unwrap();
    let log = drain_stderr(&mut child);
    w.wait_failed_runs(
        "four runs failing on the archive host",
        &job,
        "download_transport",
        4,
    )
    .await;
    gate.open();
    w.wait_ledger("the job to complete once the archive host answers", |l| {
        job_status(l, &job) == "completed"
    })
    .await;
    stop_drained_cleanly(child, log).await;
}

/// Issue 23.1: a job's own failure (its archive does not match the digest it commits to) is
/// retried with growing intervals, more than three times, and given up when its
/// verification window ends: not run after it, counted, and said at WARN.
async fn own_failure_backs_off(w: World) {
    let mut job = mismatched_job(&w, 55);
    let expires = unix_now() + 50;
    job["verification_expires_at"] = json!(expires);
    // #43: a job is started only when its run and its settlement fit in its window. This test
    // is about the job's own failure, not its deadline: a 5 s timeout and no time after the run.
    job["terms"]["document"]["benchmark"]["runner_manifest"]["timeout_seconds"] = json!(5);
    verifier_sdk::fixtures::rehash(&mut job);
    w.serve_jobs(&[&job]);
    let addr = free_loopback();
    let mut cmd = w.command_with(&[]);
    cmd.args(["--settle-costs", "pull=0,staging=0,signing=0,relay=0"])
        .arg("--metrics-listen")
        .arg(addr.to_string());
    let mut child = cmd.spawn().unwrap();
    let log = drain_stderr(&mut child);
    let ledger = w
        .wait_ledger("the job to be given up", |l| {
            job_status(l, &job) == "exhausted"
        })
        .await;
    let given_up_at = unix_now();
    assert!(
        given_up_at + 1 >= expires,
        "given up before its window ended: {ledger:#}"
    );
    // A run selected just before the window ended may start just after it: the runner then
    // refuses it as expired before anything runs. Every run inside the window is an attempt.
    let window_ms = i64::try_from(expires).unwrap() * 1000;
    // A retry due in the last 5 s (the timeout) is not started at all: window_too_short (#43).
    for r in &runs_of(&ledger, &job) {
        let started = iso_ms(r["started_at"].as_str().unwrap());
        let want: &[&str] = if started >= window_ms {
            &["expired"]
        } else if started >= window_ms - 5_000 {
            &["input_mismatch", "window_too_short"]
        } else {
            &["input_mismatch"]
        };
        assert!(want.iter().any(|w| r["reason_code"] == *w), "{ledger:#}");
    }
    let starts: Vec<i64> = run_starts(&ledger, &job)
        .into_iter()
        .filter(|&s| s < window_ms)
        .collect();
    assert!(starts.len() > 3, "{ledger:#}");
    // Growing intervals: the k-th retry waits at least 2^(k-1) poll intervals (1 s here;
    // 10 % off for the poll jitter), except where the back-off would pass the job's last
    // start (#43): a retry is then set one poll interval before it (the window end less the
    // 5 s timeout; settle costs are 0 here), and from then on every poll may try it while
    // it still fits. Such a retry starts in the last 6 s of the window, jitter allowed.
    let capped_from = window_ms - 5_000 - 1_000 - 100;
    for (k, pair) in starts.windows(2).enumerate() {
        let least = 900 * (1i64 << k.min(4));
        assert!(
            pair[1] - pair[0] >= least || pair[1] >= capped_from,
            "retry {k} after {} ms: {starts:?}",
            pair[1] - pair[0]
        );
    }
    let m = wait_metrics(addr, "the given-up job", |m| {
        sample(m, "worker_serve_jobs_given_up_total") == Some(1.0)
    })
    .await;
    assert!(sample(&m, POLLS_OK) >= Some(1.0), "{m}");
    let stderr = stop_drained_cleanly(child, log).await;
    assert!(
        stderr.lines().any(|l| l.contains("WARN")
            && l.contains("given up")
            && (l.contains("input_mismatch") || l.contains("window_too_short"))),
        "{stderr}"
    );
}

/// Issue 23.1: `worker ledger --retry JOB` re-queues exactly that job (here: refused because
/// its archive answered 404, which a fixed archive host no longer does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_ledger_retry_reruns_exactly_that_job() {
    let w = World::new().await;
    let (a, b) = (w.job(56, 0), w.job(57, 0));
    for round in [56, 57] {
        w.server.route(
            &format!("/solver-org/sol-{round}/tar.gz/{}", commit(round)),
            Reply::status(404),
        );
    }
    w.serve_jobs(&[&a, &b]);
    let mut child = w.start();
    let log = drain_stderr(&mut child);
    w.wait_ledger("both jobs to be refused", |l| {
        job_status(l, &a) == "rejected" && job_status(l, &b) == "rejected"
    })
    .await;
    // The archives come back; only `--retry a` brings a job back.
    let (a, b) = (w.job(56, 0), w.job(57, 0));
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["ledger", "--state"])
        .arg(w.path("state"))
        .args(["--retry", &id(&a)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("re-queued 1 job"), "{stdout}");
    w.wait_ledger("the re-queued job to complete", |l| {
        job_status(l, &a) == "completed"
    })
    .await;
    // A few more polls: the other one stays as it was.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ledger = w.ledger();
    assert_eq!(job_status(&ledger, &b), "rejected");
    assert_eq!(runs_of(&ledger, &b).len(), 1, "{ledger:#}");
    assert_eq!(runs_of(&ledger, &a).len(), 2, "{ledger:#}");
    // A job with a verdict is not re-queued.
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["ledger", "--state"])
        .arg(w.path("state"))
        .args(["--retry", &id(&a)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    stop_drained_cleanly(child, log).await;
}

/// Issue 23.4: a restart whose listed jobs are all given up says so at WARN once per poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_a_restart_with_every_job_given_up_warns_once_per_poll() {
    let w = World::new().await;
    let job = w.job(58, 0);
    w.server.route(
        &format!("/solver-org/sol-58/tar.gz/{}", commit(58)),
        Reply::status(404),
    );
    w.serve_jobs(&[&job]);
    let child = w.start();
    w.wait_ledger("the job to be refused", |l| {
        job_status(l, &job) == "rejected"
    })
    .await;
    stop_cleanly(child).await;
    // As an older worker left it: given up.
    rusqlite::Connection::open(w.path("state/ledger.sqlite3"))
        .unwrap()
        .execute("UPDATE jobs SET status = 'exhausted'", [])
        .unwrap();
    let child = w.start();
    w.wait_ledger("three polls", |l| {
        l["heartbeat"]["polls"]["ok"].as_i64() >= Some(3)
    })
    .await;
    let stderr = stop_cleanly(child).await;
    let polls = w.ledger()["heartbeat"]["polls"]["ok"].as_i64().unwrap();
    let warned = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("every listed job is given up"))
        .count();
    assert!(
        warned >= 3 && i64::try_from(warned).unwrap() <= polls,
        "{warned} warnings in {polls} polls:\n{stderr}"
    );
}

/// Issue 23.4: `worker ledger` prints UTC ISO 8601 times and durations, and its JSON names
/// its schema like every other output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_ledger_output_names_its_schema_and_prints_utc_times() {
    let w = World::new().await;
    let job = w.job(59, 0);
    w.serve_jobs(&[&job]);
    let child = w.start();
    w.wait_ledger("the job to complete", |l| {
        job_status(l, &job) == "completed"
    })
    .await;
    stop_cleanly(child).await;
    let l = w.ledger();
    assert_eq!(
        l["schema_version"], "agent-bounties/worker-ledger-v1",
        "{l:#}"
    );
    let run = &runs_of(&l, &job)[0];
    let (start, end) = (
        iso_ms(run["started_at"].as_str().unwrap()),
        iso_ms(run["ended_at"].as_str().unwrap()),
    );
    assert_eq!(run["duration_ms"].as_i64(), Some(end - start), "{run}");
    let now = i64::try_from(unix_now()).unwrap() * 1000;
    assert!((now - 600_000..=now + 1000).contains(&start), "{run}");
    iso_ms(l["heartbeat"]["at"].as_str().unwrap());
    let text = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["ledger", "--state"])
        .arg(w.path("state"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(run["started_at"].as_str().unwrap()), "{text}");
    assert!(text.contains(" s)"), "no duration: {text}");
    assert!(
        !text.contains(&start.to_string()),
        "epoch ms printed: {text}"
    );
}

on_both_ledgers! {
    serve_sigkilled_mid_run_restarts_reruns_the_job_once_and_never_a_completed_one, serve_on_a_fleet_ledger_sigkilled_mid_run_restarts_reruns_the_job_once_and_never_a_completed_one => sigkilled_mid_run;
    serve_sigterm_mid_run_exits_0_within_the_bound_and_leaves_nothing, serve_on_a_fleet_ledger_sigterm_mid_run_exits_0_within_the_bound_and_leaves_nothing => sigterm_mid_run;
    serve_keeps_running_while_the_feed_is_down_counts_failed_polls_and_recovers, serve_on_a_fleet_ledger_keeps_running_while_the_feed_is_down_counts_failed_polls_and_recovers => feed_down_recovers;
    serve_parallel_2_runs_two_jobs_at_once_and_sigterm_interrupts_both, serve_on_a_fleet_ledger_parallel_2_runs_two_jobs_at_once_and_sigterm_interrupts_both => parallel_2_sigterm;
    serve_metrics_after_a_completed_job_show_the_outcome_and_a_duration_sample, serve_on_a_fleet_ledger_metrics_after_a_completed_job_show_the_outcome_and_a_duration_sample => metrics_after_completed;
    serve_ledger_a_new_round_runs_again_and_changed_content_in_a_round_is_never_completed, serve_on_a_fleet_ledger_ledger_a_new_round_runs_again_and_changed_content_in_a_round_is_never_completed => new_round_changed_content;
    serve_a_missing_image_is_the_jobs_own_failure_and_recovers_once_the_image_is_there, serve_on_a_fleet_ledger_a_missing_image_is_the_jobs_own_failure_and_recovers_once_the_image_is_there => missing_image_recovers;
    serve_an_unreachable_archive_host_is_the_hosts_fault_and_recovers, serve_on_a_fleet_ledger_an_unreachable_archive_host_is_the_hosts_fault_and_recovers => unreachable_archive_host;
    serve_a_jobs_own_failure_backs_off_and_is_given_up_at_its_window, serve_on_a_fleet_ledger_a_jobs_own_failure_backs_off_and_is_given_up_at_its_window => own_failure_backs_off;
    serve_an_error_exit_removes_every_container_of_the_process, serve_on_a_fleet_ledger_an_error_exit_removes_every_container_of_the_process => error_exit_removes_containers;
}
