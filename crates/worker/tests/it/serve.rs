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

use crate::example_feed::{ExampleFeed, commit, example};
use crate::feed_support::*;

/// The shared example feed, with the directories `worker serve` uses.
struct World(ExampleFeed);

impl std::ops::Deref for World {
    type Target = ExampleFeed;
    fn deref(&self) -> &ExampleFeed {
        &self.0
    }
}

impl World {
    async fn new() -> Self {
        Self(ExampleFeed::new(&["work", "staging", "state", "out"]).await)
    }

    /// A job on the passing example source: the example's `cmp`, or with `sleep` > 0 a
    /// `sleep` of that many seconds.
    fn job(&self, round: u64, sleep: u32) -> Value {
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
    fn command_with(&self, overrides: &[(&str, &std::ffi::OsStr)]) -> Command {
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
        ledger_of(&self.path("state"))
    }

    /// Waits until the ledger satisfies `done` (with `what` in the panic message).
    async fn wait_ledger(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let give_up = Instant::now() + Duration::from_secs(120);
        loop {
            if self.path("state/ledger.sqlite3").exists() {
                let ledger = self.ledger();
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

fn ledger_of(state: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["ledger", "--json", "--state"])
        .arg(state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "worker ledger: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn id(job: &Value) -> String {
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
fn containers_of(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--no-trunc", "--filter"])
        .arg(format!("label={}=1", worker::sandbox::LABEL_VERIFIER))
        .args([
            "--format",
            "{{.ID}} {{.Label \"dev.agent-bounties.owner\"}}",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker ps failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (id, owner) = line.split_once(' ')?;
            (owner.split('/').nth(2) == Some(&pid.to_string())).then(|| id.to_owned())
        })
        .collect()
}

async fn wait_container(pid: u32) -> Vec<String> {
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

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to exit within `bound`; returns its exit code and stderr.
async fn exit_within(mut child: Child, bound: Duration) -> (Option<i32>, String) {
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
fn signable(out: &Path) -> Vec<String> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sigkilled_mid_run_restarts_reruns_the_job_once_and_never_a_completed_one() {
    let w = World::new().await;
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
    assert_eq!(runs_of(&killed, &slow)[0]["ended_ms"], Value::Null);

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sigterm_mid_run_exits_0_within_the_bound_and_leaves_nothing() {
    let w = World::new().await;
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
        took < worker::serve::SHUTDOWN_BOUND,
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
    assert!(runs[0]["ended_ms"].is_i64());
    assert_eq!(job_status(&ledger, &slow), "interrupted");
    assert_eq!(candidates_of(&ledger, &slow), 0);
    assert!(
        std::fs::read_dir(w.path("out"))
            .unwrap()
            .all(|e| e.unwrap().file_name() == "manifest.json"),
        "a candidate was written for an interrupted run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_running_while_the_feed_is_down_counts_failed_polls_and_recovers() {
    let w = World::new().await;
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
    assert!(ledger["heartbeat"]["polls"]["last_ok_ms"].is_i64());
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(signable(&w.path("out")), vec![id(&job)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_two_shards_on_one_feed_run_every_job_exactly_once() {
    let w = World::new().await;
    let jobs: Vec<Value> = (10..14).map(|round| w.job(round, 0)).collect();
    let refs: Vec<&Value> = jobs.iter().collect();
    w.serve_jobs(&refs);
    let shard = |i: u64| {
        jobs.iter()
            .filter(|j| worker::serve::shard::shard_of(&id(j), 2) == i)
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
            if worker::serve::shard::shard_of(&id(j), 2) == i {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_parallel_2_runs_two_jobs_at_once_and_sigterm_interrupts_both() {
    let w = World::new().await;
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
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
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
fn free_loopback() -> std::net::SocketAddr {
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

async fn get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
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
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_after_a_completed_job_show_the_outcome_and_a_duration_sample() {
    let w = World::new().await;
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
                "worker_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
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
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_hostile_clients_cannot_block_healthz_or_the_service() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let w = World::new().await;
    let addr = free_loopback();
    w.serve_jobs(&[]);
    let child = w.start_with_metrics(addr);
    wait_metrics(addr, "a successful poll", |m| {
        sample(m, POLLS_OK) >= Some(1.0)
    })
    .await;

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
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_ledger_a_new_round_runs_again_and_changed_content_in_a_round_is_never_completed() {
    let w = World::new().await;
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
    signal(&child, "TERM");
    let (code, stderr) = exit_within(child, Duration::from_secs(40)).await;
    assert_eq!(code, Some(0), "{stderr}");
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
