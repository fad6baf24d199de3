//! `worker serve --ledger postgres://…` as a fleet (issue #45): real `worker serve`
//! processes, the real Docker sandbox, a real Postgres (a database of its own per test on the
//! cluster `scripts/services.sh` starts). Each host has its own state, output and work
//! directories; they share the feed and the database.
//!
//! No outcome depends on timing: the tests wait on states the database reports (with
//! generous bounds), leases are long where a take-over is not the point, and a host is
//! stopped (SIGKILL, SIGSTOP) only once its container runs, so the take-over is certain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead as _;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use worker_serve::fleet::{Binding, FleetCandidate, FleetLedger, FleetRun};
use worker_serve::fleet_conn::FleetUrl;
use worker_serve::ledger::JobState;

use super::serve::{
    World, containers_of, exit_within, free_loopback, get, id, signable, signal, wait_container,
};
use crate::feed_support::VERIFIER;
use test_postgres::{OwnCluster, TestDb};

/// What the fleet database holds.
struct FleetState {
    states: Vec<(String, JobState)>,
    runs: Vec<FleetRun>,
    candidates: Vec<FleetCandidate>,
}

impl FleetState {
    fn runs_of(&self, job: &Value) -> Vec<&FleetRun> {
        self.runs.iter().filter(|r| r.job_id == id(job)).collect()
    }
    fn completed(&self) -> usize {
        self.states
            .iter()
            .filter(|(_, s)| *s == JobState::Completed)
            .count()
    }
}

fn binding(w: &World) -> Binding {
    Binding {
        feed: w.server.base.clone(),
        verifiers: vec![VERIFIER.to_lowercase()],
    }
}

/// The fleet database as the hosts reach it: its URL (no password) and, where it asks for
/// one, the password in a 0600 file.
struct Db {
    url: String,
    password: Option<(String, std::path::PathBuf)>,
}

impl Db {
    fn of(db: &TestDb) -> Self {
        Self {
            url: db.url.clone(),
            password: Some((db.password().to_owned(), db.password_file())),
        }
    }
    fn of_cluster(cluster: &OwnCluster) -> Self {
        Self {
            url: cluster.url(),
            password: None,
        }
    }
    /// The URL with its password, for the test's own reads.
    fn fleet_url(&self) -> FleetUrl {
        let url = FleetUrl::parse(&self.url).unwrap();
        match &self.password {
            Some((password, _)) => url.with_password(password),
            None => url,
        }
    }
}

/// Reads the database on a thread of its own (the blocking client starts a runtime).
fn read(db: &Db, binding: &Binding) -> FleetState {
    let (url, binding) = (db.fleet_url(), binding.clone());
    std::thread::spawn(move || {
        let mut ledger = FleetLedger::open(&url, &binding, "test-reader").unwrap();
        FleetState {
            states: ledger.states().unwrap(),
            runs: ledger.runs().unwrap(),
            candidates: ledger.candidates().unwrap(),
        }
    })
    .join()
    .unwrap()
}

async fn wait_fleet(
    db: &Db,
    binding: &Binding,
    what: &str,
    done: impl Fn(&FleetState) -> bool,
) -> FleetState {
    let give_up = Instant::now() + Duration::from_secs(300);
    loop {
        let state = read(db, binding);
        if done(&state) {
            return state;
        }
        assert!(
            Instant::now() < give_up,
            "timed out waiting for {what}: {} jobs, runs {:?}",
            state.states.len(),
            state.runs
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Host `i` of the fleet: its own directories, the shared database, `lease` seconds.
fn host(w: &World, db: &Db, i: usize, lease: u64) -> Child {
    host_command(w, db, i, lease).spawn().unwrap()
}

/// [`host`]'s command, to add flags to.
fn host_command(w: &World, db: &Db, i: usize, lease: u64) -> std::process::Command {
    for d in ["state", "out", "work", "staging"] {
        std::fs::create_dir_all(w.path(&format!("{d}{i}"))).unwrap();
    }
    let (state, out, work, staging) = (
        w.path(&format!("state{i}")),
        w.path(&format!("out{i}")),
        w.path(&format!("work{i}")),
        w.path(&format!("staging{i}")),
    );
    // Everything of a host its own, as on separate machines: only the feed, the engine and
    // the database are shared.
    let mut cmd = w.command_with(&[
        ("--state", state.as_ref()),
        ("--out", out.as_ref()),
        ("--work-dir", work.as_ref()),
        ("--staging-root", staging.as_ref()),
    ]);
    if let Some((_, file)) = &db.password {
        cmd.arg("--ledger-password-file").arg(file);
    }
    cmd.arg("--ledger")
        .arg(&db.url)
        .arg("--fleet-host")
        .arg(format!("host-{i}"))
        .arg("--lease")
        .arg(lease.to_string())
        .arg("--parallel")
        .arg("1");
    cmd
}

/// Collects a host's stderr lines as they come, so a test can wait for one.
fn watch_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let pipe = child.stderr.take().unwrap();
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let mut t = sink.lock().unwrap();
            t.push_str(&line);
            t.push('\n');
        }
    });
    text
}

async fn stop(hosts: Vec<Child>) {
    for host in hosts {
        signal(&host, "TERM");
        let (code, stderr) = exit_within(host, Duration::from_secs(60)).await;
        assert_eq!(code, Some(0), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_three_serve_processes_on_one_database_give_each_of_50_jobs_exactly_one_verdict() {
    let Some(test_db) = tokio::task::block_in_place(|| TestDb::new("serve", "three_hosts_50"))
    else {
        return;
    };
    let db = Db::of(&test_db);
    let w = World::new().await;
    let jobs = w.serve_rounds(100..150, 0);
    let b = binding(&w);
    let hosts: Vec<Child> = (0..3).map(|i| host(&w, &db, i, 600)).collect();
    let state = wait_fleet(&db, &b, "every job to complete", |s| {
        s.completed() == jobs.len()
    })
    .await;
    stop(hosts).await;
    let state_after = read(&db, &b);
    assert_eq!(
        state_after.runs.len(),
        state.runs.len(),
        "runs after completion"
    );
    // Exactly one verdict per job. A job runs again only after a run that ended without
    // one (a run the sandbox could not start is the job's to retry, on whichever host
    // claims it next), never beside or after a verdict.
    let mut reruns = 0;
    for job in &jobs {
        let runs = state_after.runs_of(job);
        let (last, before) = runs.split_last().unwrap();
        assert_eq!(
            last.outcome.as_deref(),
            Some("completed_passed"),
            "{}: {runs:?}",
            id(job)
        );
        for (i, run) in before.iter().enumerate() {
            assert!(
                run.outcome
                    .as_deref()
                    .is_some_and(|o| !o.starts_with("completed")),
                "{} ran again after a verdict or while running: {runs:?}",
                id(job)
            );
            assert!(run.fence < runs[i + 1].fence, "{runs:?}");
        }
        reruns += before.len();
    }
    eprintln!("runs retried after a run without a verdict: {reruns}");
    assert_eq!(state_after.candidates.len(), jobs.len());
    let hosts_used: std::collections::BTreeSet<&str> =
        state_after.runs.iter().map(|r| r.host.as_str()).collect();
    eprintln!("hosts that ran jobs: {hosts_used:?}");
    // Each host offers exactly the candidates it recorded; together, every job once.
    let mut offered: Vec<String> = (0..3)
        .flat_map(|i| {
            let out = w.path(&format!("out{i}"));
            if out.join("manifest.json").exists() {
                signable(&out)
            } else {
                Vec::new()
            }
        })
        .collect();
    offered.sort();
    let mut want: Vec<String> = jobs.iter().map(id).collect();
    want.sort();
    assert_eq!(offered, want, "every job offered once across the fleet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_a_host_sigkilled_mid_run_loses_its_job_to_another_after_the_lease_one_candidate() {
    let Some(test_db) = tokio::task::block_in_place(|| TestDb::new("serve", "sigkill")) else {
        return;
    };
    let db = Db::of(&test_db);
    let w = World::new().await;
    let slow = w.job(200, 6);
    w.serve_jobs(&[&slow]);
    let b = binding(&w);
    let doomed = host(&w, &db, 0, 3);
    let pid = doomed.id();
    wait_container(pid).await;
    signal(&doomed, "KILL");
    let (code, _) = exit_within(doomed, Duration::from_secs(20)).await;
    assert_eq!(code, None, "SIGKILL leaves no exit code");
    // Another host, started after the first died: the job is still leased (or its lease just
    // ended); it takes it over once the lease has ended by the database's clock.
    let survivor = host(&w, &db, 1, 600);
    let state = wait_fleet(&db, &b, "the job to complete on the other host", |s| {
        s.completed() == 1
    })
    .await;
    let runs = state.runs_of(&slow);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].host, "host-0");
    assert_eq!(runs[0].reason_code.as_deref(), Some("lease_expired"));
    assert_eq!(runs[1].host, "host-1");
    assert_eq!(runs[1].outcome.as_deref(), Some("completed_passed"));
    assert_eq!(runs[1].fence, runs[0].fence + 1);
    assert_eq!(state.candidates.len(), 1);
    stop(vec![survivor]).await;
    assert_eq!(read(&db, &b).runs.len(), 2, "finished once");
    assert_eq!(signable(&w.path("out1")), vec![id(&slow)]);
    // The dead host's orphan container is its own host's to sweep at its next start.
    let _ = containers_of(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_a_host_paused_past_its_lease_and_resumed_has_its_late_candidate_refused_by_the_fence()
 {
    let Some(test_db) = tokio::task::block_in_place(|| TestDb::new("serve", "sigstop")) else {
        return;
    };
    let db = Db::of(&test_db);
    let w = World::new().await;
    let slow = w.job(300, 5);
    w.serve_jobs(&[&slow]);
    let b = binding(&w);
    let mut paused = host(&w, &db, 0, 2);
    let paused_log = watch_stderr(&mut paused);
    wait_container(paused.id()).await;
    signal(&paused, "STOP");
    // While it is stopped it renews nothing: the other host takes the job over once the
    // lease has ended and runs it to its end.
    let other = host(&w, &db, 1, 600);
    wait_fleet(&db, &b, "the job to complete on the other host", |s| {
        s.completed() == 1
    })
    .await;
    signal(&paused, "CONT");
    // The paused host's container ran on; once resumed it has a verdict and tries to record
    // it: refused by the fence.
    let give_up = Instant::now() + Duration::from_secs(300);
    while !paused_log
        .lock()
        .unwrap()
        .contains("the run's result is refused")
    {
        assert!(
            Instant::now() < give_up,
            "the resumed host never tried to record its result: {}",
            paused_log.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    signal(&paused, "TERM");
    let give_up = Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(status) = paused.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < give_up, "the resumed host did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(code, Some(0), "{}", paused_log.lock().unwrap());
    stop(vec![other]).await;
    let state = read(&db, &b);
    assert_eq!(state.candidates.len(), 1, "{:?}", state.candidates);
    assert_eq!(state.candidates[0].host, "host-1");
    let runs = state.runs_of(&slow);
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0].reason_code.as_deref(), Some("lease_expired"));
    // Nothing of the job is offered by the paused host; the other offers it once.
    let paused_out = w.path("out0");
    let offered = if paused_out.join("manifest.json").exists() {
        signable(&paused_out)
    } else {
        Vec::new()
    };
    assert!(offered.is_empty(), "the fenced host offers {offered:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&paused_out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("candidate"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "the fenced candidate is left in --out: {leftovers:?}"
    );
    assert_eq!(signable(&w.path("out1")), vec![id(&slow)]);
}

/// A password inside `--ledger` is on the command line: every user's `ps`, the shell's
/// history, a unit file. Refused before anything connects (78), the safe ways named, the
/// password nowhere in what the service prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_serve_refuses_a_password_in_the_ledger_url_naming_the_safe_ways_and_never_printing_it()
 {
    let w = World::new().await;
    let port = free_loopback().port();
    for url in [
        format!("postgres://fleet:s3cret-in-url@127.0.0.1:{port}/fleet?connect_timeout=5"),
        format!("postgresql://fleet@127.0.0.1:{port}/fleet?password=s3cret-in-url"),
    ] {
        let mut cmd = w.command_with(&[]);
        cmd.arg("--ledger").arg(&url);
        let (code, stderr) = exit_within(cmd.spawn().unwrap(), Duration::from_secs(60)).await;
        assert_eq!(code, Some(78), "{stderr}");
        assert!(!stderr.contains("s3cret-in-url"), "{stderr}");
        for way in ["--ledger-password-file", "PGPASSFILE", "~/.pgpass"] {
            assert!(stderr.contains(way), "{way} not named: {stderr}");
        }
    }
}

/// The password reaches the server from a 0600 file (`--ledger-password-file`) or from
/// libpq's own password file (`PGPASSFILE`), and goes nowhere else: no log line (debug
/// included), neither /healthz nor /metrics. A password file others may read is refused (78)
/// without its contents in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_serve_takes_the_password_from_a_0600_file_or_pgpass_and_never_shows_it() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(test_db) = tokio::task::block_in_place(|| TestDb::new("serve", "password")) else {
        return;
    };
    let db = Db::of(&test_db);
    let password = test_db.password().to_owned();
    assert!(!password.is_empty(), "the test role has a password");
    let w = World::new().await;
    let jobs = w.serve_rounds(500..502, 1);
    let b = binding(&w);
    // Host 0 with --ledger-password-file.
    let addr0 = free_loopback();
    let mut cmd = host_command(&w, &db, 0, 600);
    cmd.arg("--metrics-listen")
        .arg(addr0.to_string())
        .env("WORKER_LOG", "debug");
    let mut host0 = cmd.spawn().unwrap();
    let log0 = watch_stderr(&mut host0);
    // Host 1 with no flag: libpq's password file.
    let dir = tempfile::tempdir().unwrap();
    let pgpass = dir.path().join("pgpass");
    std::fs::write(&pgpass, format!("*:*:*:*:{password}\n")).unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let without_file = Db {
        url: db.url.clone(),
        password: None,
    };
    let addr1 = free_loopback();
    let mut cmd = host_command(&w, &without_file, 1, 600);
    cmd.arg("--metrics-listen")
        .arg(addr1.to_string())
        .env("PGPASSFILE", &pgpass)
        .env("WORKER_LOG", "debug");
    let mut host1 = cmd.spawn().unwrap();
    let log1 = watch_stderr(&mut host1);
    wait_fleet(&db, &b, "every job to complete", |s| {
        s.completed() == jobs.len()
    })
    .await;
    let mut shown = Vec::new();
    for addr in [addr0, addr1] {
        shown.push(wait_health(addr, 200, "ok").await);
        shown.push(get(addr, "/metrics").await.unwrap().1);
    }
    for host in [host0, host1] {
        signal(&host, "TERM");
        let mut host = host;
        let give_up = Instant::now() + Duration::from_secs(60);
        let code = loop {
            if let Some(status) = host.try_wait().unwrap() {
                break status.code();
            }
            assert!(Instant::now() < give_up, "a host did not stop");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(code, Some(0));
    }
    shown.push(log0.lock().unwrap().clone());
    shown.push(log1.lock().unwrap().clone());
    assert!(
        shown[4].contains("fleet"),
        "host 0 logged nothing: {}",
        shown[4]
    );
    for text in &shown {
        assert!(!text.contains(&password), "the password is shown: {text}");
    }
    // A password file others may read: refused before any session.
    std::fs::set_permissions(
        test_db.password_file(),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let cmd = host_command(&w, &db, 2, 600).spawn().unwrap();
    let (code, stderr) = exit_within(cmd, Duration::from_secs(60)).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("0600"), "{stderr}");
    assert!(!stderr.contains(&password), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_serve_an_unreachable_database_at_start_exits_1_and_another_feed_or_schema_78() {
    let w = World::new().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let closed = format!("postgres://nobody@127.0.0.1:{port}/fleet?connect_timeout=5");
    let mut cmd = w.command_with(&[]);
    cmd.arg("--ledger").arg(&closed);
    let (code, stderr) = exit_within(cmd.spawn().unwrap(), Duration::from_secs(60)).await;
    assert_eq!(
        code,
        Some(1),
        "a server that does not answer may come back: {stderr}"
    );

    let Some(test_db) = tokio::task::block_in_place(|| TestDb::new("serve", "exit_codes")) else {
        return;
    };
    let db = Db::of(&test_db);
    // A database bound to another feed.
    let other = Binding {
        feed: "http://127.0.0.1:9/another-feed".into(),
        verifiers: vec![VERIFIER.to_lowercase()],
    };
    let url = db.fleet_url();
    std::thread::spawn(move || drop(FleetLedger::open(&url, &other, "elsewhere").unwrap()))
        .join()
        .unwrap();
    let mut cmd = w.command_with(&[]);
    cmd.arg("--ledger").arg(&db.url);
    cmd.arg("--ledger-password-file")
        .arg(test_db.password_file());
    let (code, stderr) = exit_within(cmd.spawn().unwrap(), Duration::from_secs(60)).await;
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("another-feed"), "{stderr}");
}

/// Waits until `/healthz` at `addr` answers `status` with a body containing `needle`.
async fn wait_health(addr: std::net::SocketAddr, status: u16, needle: &str) -> String {
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some((code, body)) = get(addr, "/healthz").await
            && code == status
            && body.contains(needle)
        {
            return body;
        }
        assert!(
            Instant::now() < give_up,
            "/healthz at {addr} never answered {status} with {needle:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_postgres_stopped_and_started_mid_batch_hosts_stay_up_degraded_and_nothing_is_lost_or_run_twice()
 {
    let Some(cluster) = tokio::task::block_in_place(OwnCluster::new) else {
        return;
    };
    let db = Db::of_cluster(&cluster);
    let w = World::new().await;
    let jobs = w.serve_rounds(400..416, 1);
    let b = binding(&w);
    let addrs: Vec<std::net::SocketAddr> = (0..2).map(|_| free_loopback()).collect();
    let mut hosts = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let mut cmd_host = host_command(&w, &db, i, 600);
        cmd_host.arg("--metrics-listen").arg(addr.to_string());
        hosts.push(cmd_host.spawn().unwrap());
    }
    wait_fleet(&db, &b, "a few jobs to complete", |s| s.completed() >= 3).await;
    // The database goes away mid-batch; the hosts stay up and say so on /healthz.
    tokio::task::block_in_place(|| cluster.pg_ctl("stop"));
    let body = wait_health(addrs[0], 503, "ledger database").await;
    assert!(body.contains("degraded"), "{body}");
    for h in &mut hosts {
        assert!(
            h.try_wait().unwrap().is_none(),
            "a host exited while the database was away"
        );
    }
    tokio::task::block_in_place(|| cluster.pg_ctl("start"));
    let state = wait_fleet(&db, &b, "every job to complete after the restart", |s| {
        s.completed() == jobs.len()
    })
    .await;
    for addr in &addrs {
        wait_health(*addr, 200, "ok").await;
    }
    stop(hosts).await;
    let after = read(&db, &b);
    assert_eq!(after.runs.len(), state.runs.len());
    for job in &jobs {
        let runs = after.runs_of(job);
        let verdicts = runs
            .iter()
            .filter(|r| {
                r.outcome
                    .as_deref()
                    .is_some_and(|o| o.starts_with("completed"))
            })
            .count();
        assert_eq!(verdicts, 1, "{}: {runs:?}", id(job));
    }
    assert_eq!(
        after.candidates.len(),
        jobs.len(),
        "nothing lost, nothing twice"
    );
}
