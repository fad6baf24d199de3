//! The fleet lane (issue #45 item 5, `bounty-e2e chaos --fleet N`): N real `worker serve
//! --ledger postgres://…` hosts on one database of their own (created per run on the cluster
//! `scripts/services.sh` starts), one feed of cheap busybox jobs, and a seeded schedule that
//! takes one host out at a time in three ways:
//!
//! - **kill**: SIGKILL while its container runs; started again (same name, same directories)
//!   once another host has finished the job it held, as `Restart=on-failure` would later;
//! - **stop**: SIGSTOP while its container runs, SIGCONT once another host has finished the
//!   job: the woken host's result must be refused by the fence;
//! - **partition**: its only way to the database is a [`TcpProxy`], cut while its container
//!   runs and restored once another host has finished the job: likewise refused.
//!
//! Every wait is on a state (a running container of the host's pid, the job completed in the
//! database, a log line), with generous bounds, never on a sleep: on a loaded machine the
//! schedule plays slower, not differently. Which job a fault lands on and who takes it over
//! depend on timing; the invariants ([`check`]) do not. The lane stops at the worker's
//! candidates: no chain and no settlement (the other lanes cover the signers and keeper).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams, job_value, sample_manifest};
use verifier_sdk::{Candidate, CandidateManifest};
use worker_serve::fleet::{FleetCandidate, FleetRun};
use worker_serve::jobstate::JobState;

use super::check::Violation;
use super::inject::containers_of;
use super::rng::SplitMix64;
use super::tcp_proxy::TcpProxy;
use crate::server::ArchiveServer;
use crate::{BENCHMARK_SUBDIR, E2eConfig, E2eError, fresh_dir, io, tree_digest, tree_files};

/// Jobs in the lane's feed: enough that the three faults, played one after another, each
/// find a job running on their host.
pub const FLEET_JOBS: u64 = 30;

/// The lease (`worker serve --lease`): short, so a take-over comes within seconds.
pub const FLEET_LEASE_SECS: u64 = 6;

/// The verifier the fixture jobs name (`JobParams::default`).
const VERIFIER: &str = "0xbe6292b9e465f549e2363b918d6dd9187038431e";

/// How long any one state is waited for before the run counts as stuck.
const STATE_WAIT: Duration = Duration::from_secs(600);

/// How long after exiting on its own a host is started again: a host that cannot reach its
/// database exits 1 at start, and without a pause would be restarted hundreds of times while a
/// partition lasts (seed 4: 614 starts of host-2).
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// How often a fault may land after its run ended before it counts as not fired.
const MAX_MISSES: u32 = 5;

/// The log lines of a late result refused (`worker_serve`'s warnings): by the fence in the
/// transaction that would record it, or before, when a renewal found the lease lost (seed 4:
/// a host cut off from the database found that first once it answered again).
const REFUSED: [&str; 2] = [
    "the run's result is refused",
    "the lease of a run under way was lost",
];

/// One way a host is taken out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL, started again later.
    Kill,
    /// SIGSTOP past its lease, then SIGCONT.
    Stop,
    /// Cut from the database by its proxy, then restored.
    Partition,
}

impl FaultKind {
    /// Its name in the schedule and the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Kill => "kill",
            Self::Stop => "stop",
            Self::Partition => "partition",
        }
    }
}

/// One fault of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// What is done.
    pub kind: FaultKind,
    /// To which host (index).
    pub host: usize,
    /// How long after the host's container is seen running.
    pub delay_ms: u64,
    /// For a kill: how long the host stays down after its job was finished elsewhere.
    pub down_ms: u64,
}

/// The lane's schedule: pure in the seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSchedule {
    /// The seed.
    pub seed: u64,
    /// Hosts.
    pub hosts: usize,
    /// Each job's `sleep` seconds, by round (1-based).
    pub job_secs: Vec<u32>,
    /// The faults, played in this order, one at a time.
    pub faults: Vec<Fault>,
}

/// The schedule for `seed` with `hosts` hosts (at least 3: one per fault) and `jobs` jobs.
pub fn schedule(seed: u64, hosts: usize, jobs: u64) -> FleetSchedule {
    // A stream of its own, so the lane's draws never shift the other lanes'.
    let mut rng = SplitMix64::new(seed ^ 0xf1ee_7000_0000_0045);
    let job_secs = (0..jobs)
        .map(|_| u32::try_from(rng.range(3, 8)).unwrap_or(5))
        .collect();
    let mut order = [FaultKind::Kill, FaultKind::Stop, FaultKind::Partition];
    shuffle(&mut rng, &mut order);
    let mut targets: Vec<usize> = (0..hosts).collect();
    shuffle(&mut rng, &mut targets);
    let faults = order
        .iter()
        .zip(targets)
        .map(|(&kind, host)| Fault {
            kind,
            host,
            delay_ms: rng.range(0, 1500),
            down_ms: if kind == FaultKind::Kill {
                rng.range(0, 5000)
            } else {
                0
            },
        })
        .collect();
    FleetSchedule {
        seed,
        hosts,
        job_secs,
        faults,
    }
}

fn shuffle<T>(rng: &mut SplitMix64, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = usize::try_from(rng.below(u64::try_from(i + 1).unwrap_or(1))).unwrap_or(0);
        items.swap(i, j);
    }
}

impl fmt::Display for FleetSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fleet schedule seed {}: {} hosts, {} jobs (sleep {}..{} s), lease {FLEET_LEASE_SECS} s",
            self.seed,
            self.hosts,
            self.job_secs.len(),
            self.job_secs.iter().min().unwrap_or(&0),
            self.job_secs.iter().max().unwrap_or(&0)
        )?;
        for (i, fault) in self.faults.iter().enumerate() {
            write!(
                f,
                "  {}. {} host-{} {} ms after its container runs",
                i + 1,
                fault.kind.name(),
                fault.host,
                fault.delay_ms
            )?;
            if fault.kind == FaultKind::Kill {
                write!(
                    f,
                    ", down {} ms after its job is done elsewhere",
                    fault.down_ms
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// What the lane saw, for [`check`].
#[derive(Debug, Clone, Default)]
pub struct FleetObservations {
    /// The feed's job ids.
    pub jobs: Vec<String>,
    /// Each job's state in the database.
    pub states: Vec<(String, JobState)>,
    /// Every run recorded.
    pub runs: Vec<FleetRun>,
    /// Every candidate recorded.
    pub candidates: Vec<FleetCandidate>,
    /// The candidates each host offers in its `--out` (host name, job id), each re-checked as
    /// the signer does; a candidate that does not re-check is in `unsignable`.
    pub offered: Vec<(String, String)>,
    /// Offered candidates the signer would refuse, or an unreadable `--out`.
    pub unsignable: Vec<String>,
    /// Hosts whose stop or partition ended after another host finished their job: each must
    /// have logged its result refused by the fence.
    pub fenced_hosts: Vec<(String, bool)>,
    /// Exits the driver did not cause (label, code); a host restarts after each.
    pub unexpected_exits: Vec<(String, Option<i32>)>,
    /// Each host's exit on the final SIGTERM.
    pub final_exits: Vec<(String, Option<i32>)>,
    /// What the log scan found.
    pub log_problems: Vec<String>,
}

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation { invariant, detail }
}

/// The lane's invariants, pure over the observations.
pub fn check(o: &FleetObservations) -> Vec<Violation> {
    let mut out = Vec::new();
    let states: BTreeMap<&str, JobState> = o.states.iter().map(|(j, s)| (j.as_str(), *s)).collect();
    let mut runs: BTreeMap<&str, Vec<&FleetRun>> = BTreeMap::new();
    for r in &o.runs {
        runs.entry(r.job_id.as_str()).or_default().push(r);
    }
    let mut candidates: BTreeMap<&str, Vec<&FleetCandidate>> = BTreeMap::new();
    for c in &o.candidates {
        candidates.entry(c.job_id.as_str()).or_default().push(c);
    }
    let mut offered: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (host, job) in &o.offered {
        offered.entry(job.as_str()).or_default().push(host.as_str());
    }
    for job in &o.jobs {
        let j = job.as_str();
        if states.get(j) != Some(&JobState::Completed) {
            out.push(violation(
                "fleet_every_job_completed",
                format!("{j}: {:?}", states.get(j)),
            ));
        }
        let job_runs = runs.get(j).cloned().unwrap_or_default();
        let verdicts: Vec<&&FleetRun> = job_runs
            .iter()
            .filter(|r| {
                r.outcome
                    .as_deref()
                    .is_some_and(|x| x.starts_with("completed"))
            })
            .collect();
        if verdicts.len() != 1 {
            out.push(violation(
                "fleet_one_verdict_per_job",
                format!("{j}: {} runs with a verdict: {job_runs:?}", verdicts.len()),
            ));
        }
        // Nothing runs a job again after its verdict.
        if let (Some(v), Some(last)) = (verdicts.first(), job_runs.last())
            && v.run_id != last.run_id
        {
            out.push(violation(
                "fleet_one_verdict_per_job",
                format!(
                    "{j}: run {} after the verdict of run {}",
                    last.run_id, v.run_id
                ),
            ));
        }
        let recorded = candidates.get(j).cloned().unwrap_or_default();
        let top_fence = job_runs.iter().map(|r| r.fence).max();
        match (recorded.as_slice(), verdicts.first()) {
            ([c], Some(v)) if c.run_id == v.run_id && Some(c.fence) == top_fence => {}
            _ => out.push(violation(
                "fleet_one_candidate_per_job",
                format!(
                    "{j}: candidates {recorded:?}, verdict run {:?}, last fence {top_fence:?}",
                    verdicts.first().map(|v| v.run_id)
                ),
            )),
        }
        let by = offered.get(j).cloned().unwrap_or_default();
        let want = recorded.first().map(|c| c.host.as_str());
        if by.len() != 1 || by.first().copied() != want {
            out.push(violation(
                "fleet_offered_once",
                format!("{j}: offered by {by:?}, recorded for {want:?}"),
            ));
        }
    }
    for (_, job) in &o.offered {
        if !o.jobs.contains(job) {
            out.push(violation(
                "fleet_offered_once",
                format!("{job}: offered, not in the feed"),
            ));
        }
    }
    for u in &o.unsignable {
        out.push(violation("fleet_offered_once", u.clone()));
    }
    for (host, refused) in &o.fenced_hosts {
        if !refused {
            out.push(violation(
                "fleet_fence_refused_late_result",
                format!("{host} never logged its late result refused"),
            ));
        }
    }
    for (label, code) in &o.unexpected_exits {
        // 1 is the transient failure systemd restarts (a database gone at start); anything
        // else (a panic's 101, a 78) is a host that a fault broke.
        if *code != Some(1) {
            out.push(violation(
                "fleet_hosts_survive",
                format!("{label} exited {code:?} on its own"),
            ));
        }
    }
    for (label, code) in &o.final_exits {
        if *code != Some(0) {
            out.push(violation(
                "fleet_hosts_survive",
                format!("{label} exited {code:?} on SIGTERM"),
            ));
        }
    }
    for p in &o.log_problems {
        out.push(violation("json_logs", p.clone()));
    }
    out
}

/// What one run of the lane did and found.
#[derive(Debug, Clone)]
pub struct FleetResult {
    /// The schedule played.
    pub schedule: FleetSchedule,
    /// Each fault, whether it fired, and what it came to.
    pub fired: Vec<(Fault, bool, String)>,
    /// The invariants broken.
    pub violations: Vec<Violation>,
    /// Runs recorded (more than the jobs: the runs the faults cut short).
    pub runs: usize,
    /// Wall time.
    pub elapsed: Duration,
}

impl FleetResult {
    /// The schedule, what each fault did and the violations.
    pub fn report(&self) -> String {
        let mut s = self.schedule.to_string();
        for (fault, fired, note) in &self.fired {
            s.push_str(&format!(
                "  {} host-{}: {} ({note})\n",
                fault.kind.name(),
                fault.host,
                if *fired { "fired" } else { "NOT fired" }
            ));
        }
        for v in &self.violations {
            s.push_str(&format!("  VIOLATION {v}\n"));
        }
        s.push_str(&format!(
            "  replay: target/debug/bounty-e2e chaos --seed {} --fleet {}\n",
            self.schedule.seed, self.schedule.hosts
        ));
        s
    }
}

/// One host: its directories, its process, its starts.
struct Host {
    name: String,
    /// `--ledger URL` and, for a worker that takes it, `--ledger-password-file FILE`.
    ledger: Vec<String>,
    dir: PathBuf,
    child: Option<tokio::process::Child>,
    starts: u32,
    /// When a host that exited on its own is started again ([`RESTART_AFTER`] after it
    /// exited, as systemd's `RestartSec`).
    restart_at: Option<Instant>,
}

impl Host {
    fn stderr_name(&self) -> String {
        // `serve-hI-N`: the log scan reads N+1 as N's restart.
        format!(
            "serve-h{}-{}",
            self.name.trim_start_matches("host-"),
            self.starts
        )
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(tokio::process::Child::id)
    }

    fn start(&mut self, cfg: &E2eConfig, api: &str, logs: &Path) -> Result<(), E2eError> {
        self.starts += 1;
        self.restart_at = None;
        let label = self.stderr_name();
        let err_path = logs.join(format!("{label}.stderr"));
        let out_path = logs.join(format!("{label}.stdout"));
        let stderr = std::fs::File::create(&err_path).map_err(io("create a log", &err_path))?;
        let stdout = std::fs::File::create(&out_path).map_err(io("create a log", &out_path))?;
        let d = |n: &str| self.dir.join(n).display().to_string();
        let worker = cfg.bin_dir.join("worker");
        let child = tokio::process::Command::new(&worker)
            .args([
                "serve",
                "--api",
                api,
                "--archive-base",
                api,
                "--network",
                "base-mainnet",
                "--verifier",
                VERIFIER,
                "--out",
                &d("out"),
                "--state",
                &d("state"),
                "--work-dir",
                &d("work"),
                "--staging-root",
                &d("staging"),
                "--poll-interval",
                "1",
                "--parallel",
                "1",
                "--pull",
                "--fleet-host",
                &self.name,
                "--lease",
                &FLEET_LEASE_SECS.to_string(),
            ])
            .args(&self.ledger)
            .envs(crate::logscan::JSON_LOG_ENV)
            .env_remove("GITHUB_SHA")
            .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true)
            .spawn()
            .map_err(io("start worker serve", &worker))?;
        self.child = Some(child);
        Ok(())
    }

    fn log(&self, logs: &Path) -> String {
        std::fs::read_to_string(logs.join(format!("{}.stderr", self.stderr_name())))
            .unwrap_or_default()
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .output();
}

/// Runs `f` on a thread of its own: the blocking Postgres client starts a runtime, which a
/// runtime's thread may not.
async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.await
        .map_err(|_| "the database thread ended early".to_owned())?
}

struct DbState {
    states: Vec<(String, JobState)>,
    runs: Vec<FleetRun>,
    candidates: Vec<FleetCandidate>,
}

impl DbState {
    fn completed(&self, job: &str) -> bool {
        self.states
            .iter()
            .any(|(j, s)| j == job && *s == JobState::Completed)
    }
    fn all_completed(&self, jobs: usize) -> bool {
        self.states
            .iter()
            .filter(|(_, s)| *s == JobState::Completed)
            .count()
            == jobs
    }
    /// The job `host` holds a run of that has not ended, if any.
    fn open_job_of(&self, host: &str) -> Option<String> {
        self.runs
            .iter()
            .rev()
            .find(|r| r.host == host && r.outcome.is_none())
            .map(|r| r.job_id.clone())
    }
}

/// Reads the fleet's tables read-only, as the rows `worker_serve::fleet` defines. Not through
/// `FleetLedger::open`: that registers a session and checks the binding, which a reader that
/// only looks has no part in (and its connection settings are being reworked, issue #45).
async fn read_db(url: &str) -> Result<DbState, E2eError> {
    let url = url.to_owned();
    off_runtime(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        let text = |e: postgres::Error| e.to_string();
        let mut states = Vec::new();
        for r in c
            .query("SELECT job_id, status FROM fleet_jobs ORDER BY job", &[])
            .map_err(text)?
        {
            let (job, status): (String, String) = (r.get(0), r.get(1));
            let state: JobState = status
                .parse()
                .map_err(|_| format!("{job}: unknown status {status:?}"))?;
            states.push((job, state));
        }
        let runs = worker_serve::fleet::read_runs(&mut c).map_err(text)?;
        let candidates = worker_serve::fleet::read_candidates(&mut c).map_err(text)?;
        Ok(DbState {
            states,
            runs,
            candidates,
        })
    })
    .await
    .map_err(|detail| E2eError::Setup {
        what: "read the fleet database",
        detail,
    })
}

/// The lane's database on the services.sh cluster, dropped at the end.
struct LaneDb {
    admin: String,
    name: String,
    url: String,
}

impl LaneDb {
    async fn create(cfg: &E2eConfig, seed: u64) -> Result<Self, E2eError> {
        let file = cfg.repo_root.join(".work/postgres.url");
        let admin = std::fs::read_to_string(&file)
            .map_err(io(
                "read the test Postgres URL (run scripts/services.sh first)",
                &file,
            ))?
            .trim()
            .to_owned();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("chaos_fleet_{seed}_{}_{nanos}", std::process::id());
        let Some((base, _)) = admin.rsplit_once('/') else {
            return Err(E2eError::Setup {
                what: "read the test Postgres URL",
                detail: "no database in it".into(),
            });
        };
        let url = format!("{base}/{name}");
        sql(&admin, format!("CREATE DATABASE \"{name}\""))
            .await
            .map_err(|detail| E2eError::Setup {
                what: "create the fleet lane's database (run scripts/services.sh)",
                detail,
            })?;
        Ok(Self { admin, name, url })
    }

    async fn drop_db(&self) {
        let _ = sql(
            &self.admin,
            format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
        )
        .await;
    }
}

async fn sql(url: &str, statement: String) -> Result<(), String> {
    let url = url.to_owned();
    off_runtime(move || {
        let mut client =
            postgres::Client::connect(&url, postgres::NoTls).map_err(|e| e.to_string())?;
        client.batch_execute(&statement).map_err(|e| e.to_string())
    })
    .await
}

/// The lane's feed: `secs.len()` jobs on the bundled example's passing source, each a busybox
/// `sleep` of its seconds (a passing verdict), each with its own round, repository and commit.
async fn feed(cfg: &E2eConfig, secs: &[u32]) -> Result<(ArchiveServer, Vec<String>), E2eError> {
    let images_path = cfg.repo_root.join(".work/images.json");
    let images: Value = serde_json::from_slice(
        &std::fs::read(&images_path).map_err(io("read .work/images.json", &images_path))?,
    )
    .map_err(|e| E2eError::Setup {
        what: "parse .work/images.json",
        detail: e.to_string(),
    })?;
    let busybox = images
        .get("busybox")
        .and_then(Value::as_str)
        .ok_or(E2eError::Setup {
            what: "find the busybox image in .work/images.json",
            detail: "no \"busybox\" entry; run scripts/services.sh".into(),
        })?
        .to_owned();
    let example = cfg.repo_root.join("fixtures/example");
    let source = example.join("source-pass");
    let benchmark = example.join("benchmark");
    let source_digest = tree_digest(&source)?;
    let benchmark_digest = tree_digest(&benchmark)?;
    let mut jobs = Vec::new();
    let mut archives = Vec::new();
    for (round, s) in (1u64..).zip(secs) {
        let repo = format!("fleet-{round}");
        let commit = format!("{round:040x}");
        let mut manifest = sample_manifest();
        manifest["image"] = json!(busybox);
        manifest["command"] = json!(["/bin/sleep", s.to_string()]);
        manifest["benchmark_digest"] = json!(benchmark_digest.to_string());
        jobs.push(job_value(&JobParams {
            round,
            artifact_reference: format!("https://github.com/solver-org/{repo}/commit/{commit}"),
            source_snapshot_digest: source_digest.to_string(),
            manifest,
            ..JobParams::default()
        }));
        archives.push((repo, commit));
    }
    let ids = jobs
        .iter()
        .map(|j| j["job_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    let server = ArchiveServer::start(Value::Array(jobs))
        .await
        .map_err(|detail| E2eError::Setup {
            what: "start the fleet lane's feed",
            detail,
        })?;
    let files = tree_files(&source)?;
    for (repo, commit) in archives {
        server.add_archive(
            &format!("/solver-org/{repo}/tar.gz/{commit}"),
            &format!("{repo}-{commit}"),
            "",
            &files,
        )?;
    }
    server.add_archive(
        &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
        &format!("benchmarks-{BENCHMARK_COMMIT}"),
        BENCHMARK_SUBDIR,
        &tree_files(&benchmark)?,
    )?;
    Ok((server, ids))
}

/// Restarts every host that exited without the driver's doing (as systemd would), noting it.
fn supervise(
    hosts: &mut [Host],
    cfg: &E2eConfig,
    api: &str,
    logs: &Path,
    exits: &mut Vec<(String, Option<i32>)>,
) -> Result<(), E2eError> {
    for h in hosts.iter_mut() {
        let ended = match h.child.as_mut().map(tokio::process::Child::try_wait) {
            Some(Ok(Some(status))) => Some(status.code()),
            _ => None,
        };
        if let Some(code) = ended {
            exits.push((h.stderr_name(), code));
            h.child = None;
            h.restart_at = Some(Instant::now() + RESTART_AFTER);
        }
        if h.restart_at.is_some_and(|at| Instant::now() >= at) {
            h.restart_at = None;
            h.start(cfg, api, logs)?;
        }
    }
    Ok(())
}

struct Lane<'a> {
    cfg: &'a E2eConfig,
    api: String,
    logs: PathBuf,
    url: String,
    hosts: Vec<Host>,
    exits: Vec<(String, Option<i32>)>,
    jobs: usize,
}

impl Lane<'_> {
    /// Waits (supervising the hosts) until `done` holds of the database; `Ok(None)` when the
    /// whole batch completed first (the state can no longer come), an error past the bound.
    async fn wait_db(
        &mut self,
        what: &str,
        done: impl Fn(&DbState) -> bool,
    ) -> Result<Option<DbState>, E2eError> {
        self.wait_until(what, Duration::from_millis(300), async |_, db| {
            if done(&db) { Ok(db) } else { Err(db) }
        })
        .await
    }

    /// Waits until host `i` runs a container and holds an open run; the job it holds.
    async fn wait_running(&mut self, i: usize) -> Result<Option<String>, E2eError> {
        let name_of = |lane: &Self| {
            lane.hosts
                .get(i)
                .map(|h| h.name.clone())
                .unwrap_or_default()
        };
        let what = format!("{} runs a container", name_of(self));
        self.wait_until(&what, Duration::from_millis(150), async |lane, db| {
            let pid = lane.hosts.get(i).and_then(Host::pid).unwrap_or(0);
            let running = containers_of(&HashSet::from([pid]))
                .await
                .iter()
                .any(|(_, s)| s == "running");
            match db.open_job_of(&name_of(lane)) {
                Some(job) if running => Ok(job),
                _ => Err(db),
            }
        })
        .await
    }

    /// The one wait loop: supervises the hosts and reads the database every `pause` until
    /// `probe` finds what it waits for (`Ok`); `Ok(None)` when the whole batch completed
    /// first (it can no longer come), an error past [`STATE_WAIT`].
    async fn wait_until<T>(
        &mut self,
        what: &str,
        pause: Duration,
        probe: impl AsyncFn(&Self, DbState) -> Result<T, DbState>,
    ) -> Result<Option<T>, E2eError> {
        let give_up = Instant::now() + STATE_WAIT;
        loop {
            supervise(
                &mut self.hosts,
                self.cfg,
                &self.api,
                &self.logs,
                &mut self.exits,
            )?;
            // Before the first host has made the tables, and while the server is busy, a
            // read fails: the state is not there yet.
            if let Ok(db) = read_db(&self.url).await {
                let db = match probe(self, db).await {
                    Ok(found) => return Ok(Some(found)),
                    Err(db) => db,
                };
                if db.all_completed(self.jobs) {
                    return Ok(None);
                }
                if Instant::now() > give_up {
                    return Err(E2eError::Mismatch(format!(
                        "the fleet never reached: {what} (within {STATE_WAIT:?})"
                    )));
                }
            } else if Instant::now() > give_up {
                return Err(E2eError::Mismatch(format!(
                    "the fleet database could not be read while waiting for: {what}"
                )));
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Waits until the log of host `i` shows its result refused by the fence.
    async fn wait_refused(&mut self, i: usize) -> bool {
        let give_up = Instant::now() + Duration::from_secs(300);
        while Instant::now() < give_up {
            if self.hosts.get(i).is_some_and(|h| {
                let log = h.log(&self.logs);
                REFUSED.iter().any(|line| log.contains(line))
            }) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        false
    }

    /// Takes host `fault.host` (process `pid`) out as `fault` says.
    async fn take_out(&mut self, fault: Fault, pid: u32, proxy: &TcpProxy) {
        match fault.kind {
            FaultKind::Kill => {
                if let Some(h) = self.hosts.get_mut(fault.host)
                    && let Some(mut child) = h.child.take()
                {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
            FaultKind::Stop => signal(pid, "STOP"),
            FaultKind::Partition => proxy.cut(),
        }
    }

    /// Undoes [`Self::take_out`]; a killed host starts again after `down_ms`.
    async fn bring_back(
        &mut self,
        fault: Fault,
        pid: u32,
        proxy: &TcpProxy,
        down_ms: u64,
    ) -> Result<(), E2eError> {
        match fault.kind {
            FaultKind::Kill => {
                tokio::time::sleep(Duration::from_millis(down_ms)).await;
                if let Some(h) = self.hosts.get_mut(fault.host) {
                    h.start(self.cfg, &self.api, &self.logs)?;
                }
            }
            FaultKind::Stop => signal(pid, "CONT"),
            FaultKind::Partition => proxy.restore(),
        }
        Ok(())
    }

    /// Whether `host`'s run of `job` is still without an outcome in the database.
    async fn still_open(&self, host: &str, job: &str) -> Result<bool, E2eError> {
        let mut tries = 0;
        loop {
            match read_db(&self.url).await {
                Ok(db) => {
                    return Ok(db
                        .runs
                        .iter()
                        .any(|r| r.host == host && r.job_id == job && r.outcome.is_none()));
                }
                Err(e) if tries >= 20 => return Err(e),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        }
    }

    /// Plays one fault; whether it fired, what happened, and whether the fence must have
    /// refused a late result of the host.
    async fn play(
        &mut self,
        fault: Fault,
        proxy: &TcpProxy,
    ) -> Result<(bool, String, Option<bool>), E2eError> {
        let name = self
            .hosts
            .get(fault.host)
            .map(|h| h.name.clone())
            .unwrap_or_default();
        // The fault must land while the run is under way: one that finds the run already
        // ended (the container was first seen late in its run) is undone and played again
        // on the host's next run.
        let mut missed = 0;
        let (job, pid) = loop {
            let Some(job) = self.wait_running(fault.host).await? else {
                return Ok((
                    false,
                    format!("the batch ended first ({missed} landed after a run)"),
                    None,
                ));
            };
            tokio::time::sleep(Duration::from_millis(fault.delay_ms)).await;
            let pid = self.hosts.get(fault.host).and_then(Host::pid).unwrap_or(0);
            self.take_out(fault, pid, proxy).await;
            if self.still_open(&name, &job).await? {
                break (job, pid);
            }
            missed += 1;
            self.bring_back(fault, pid, proxy, 0).await?;
            if missed == MAX_MISSES {
                return Ok((false, format!("landed after the run {missed} times"), None));
            }
        };
        let finished = self
            .wait_db(&format!("{job} completed while {name} is out"), |db| {
                db.completed(&job)
            })
            .await;
        // Whatever the wait found, the host comes back before anything else is decided.
        self.bring_back(fault, pid, proxy, fault.down_ms).await?;
        let db =
            finished?.map_or_else(|| Err(E2eError::Mismatch(format!("{job} vanished"))), Ok)?;
        let by: Vec<&str> = db
            .runs
            .iter()
            .filter(|r| {
                r.job_id == job
                    && r.outcome
                        .as_deref()
                        .is_some_and(|o| o.starts_with("completed"))
            })
            .map(|r| r.host.as_str())
            .collect();
        let taken_over = by.iter().any(|h| *h != name);
        let note = format!(
            "{name} held {job}; its verdict by {by:?}{}",
            if taken_over { " (taken over)" } else { "" }
        );
        // A stopped or cut-off host whose job another finished ran its container on: once
        // back it has a result to record, which the fence must refuse.
        let fenced = (taken_over && fault.kind != FaultKind::Kill).then_some(());
        let refused = match fenced {
            Some(()) => Some(self.wait_refused(fault.host).await),
            None => None,
        };
        Ok((true, note, refused))
    }
}

/// The candidates in `out` (job ids), each re-checked as the signer does; problems apart.
fn offered_in(out: &Path) -> (Vec<String>, Vec<String>) {
    let path = out.join("manifest.json");
    let Ok(bytes) = std::fs::read(&path) else {
        return (Vec::new(), Vec::new());
    };
    let manifest = serde_json::from_slice::<Value>(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|v| CandidateManifest::from_value(&v).map_err(|e| e.to_string()));
    let manifest = match manifest {
        Ok(m) => m,
        Err(e) => return (Vec::new(), vec![format!("{}: {e}", path.display())]),
    };
    let now = crate::wall_clock();
    let (mut ids, mut bad) = (Vec::new(), Vec::new());
    for entry in &manifest.candidates {
        let checked = std::fs::read(out.join(&entry.file))
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
            .and_then(|v| Candidate::from_value(&v).map_err(|e| e.to_string()))
            .and_then(|c| {
                verifier_sdk::revalidate_candidate(
                    &c.job,
                    &c.job,
                    &c.outcome,
                    c.evidence.as_ref(),
                    now,
                )
                .map(|_| ())
                .map_err(|e| e.to_string())
            });
        match checked {
            Ok(()) => ids.push(entry.job_id.clone()),
            Err(e) => bad.push(format!("{}: {}: {e}", out.display(), entry.job_id)),
        }
    }
    (ids, bad)
}

/// Where the hosts read the database's password: `Some(file)` when this worker takes
/// `--ledger-password-file` (a URL with a password in it is then refused, issue #45's
/// hardening), `None` for one that takes the password in the URL only.
fn password_file_if_taken(
    cfg: &E2eConfig,
    url: &str,
    root: &Path,
) -> Result<Option<PathBuf>, E2eError> {
    let worker = cfg.bin_dir.join("worker");
    let help = std::process::Command::new(&worker)
        .args(["serve", "--help"])
        .output()
        .map_err(io("ask worker serve for its flags", &worker))?;
    if !String::from_utf8_lossy(&help.stdout).contains("--ledger-password-file") {
        return Ok(None);
    }
    let Some((_, password)) = split_password(url) else {
        return Ok(None);
    };
    let file = root.join("ledger-password");
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)
            .map_err(io("write the ledger password file", &file))?;
        f.write_all(password.as_bytes())
            .map_err(io("write the ledger password file", &file))?;
    }
    Ok(Some(file))
}

/// `postgres://user:password@rest` as (`postgres://user@rest`, password).
fn split_password(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let (userinfo, host) = rest.split_once('@')?;
    let (user, password) = userinfo.split_once(':')?;
    Some((format!("{scheme}://{user}@{host}"), password.to_owned()))
}

/// A host's `--ledger` arguments for `url`: the password moved to `password_file` when given.
fn ledger_args(url: &str, password_file: Option<&Path>) -> Vec<String> {
    match (password_file, split_password(url)) {
        (Some(file), Some((bare, _))) => vec![
            "--ledger".into(),
            bare,
            "--ledger-password-file".into(),
            file.display().to_string(),
        ],
        _ => vec!["--ledger".into(), url.to_owned()],
    }
}

/// Plays the lane for `seed` with `hosts` hosts and checks its invariants.
pub async fn run(cfg: &E2eConfig, seed: u64, hosts: usize) -> Result<FleetResult, E2eError> {
    let started = Instant::now();
    let hosts = hosts.max(3);
    let schedule = schedule(seed, hosts, FLEET_JOBS);
    println!("{schedule}");
    let root = cfg.work_dir.join(format!("fleet-{seed}"));
    fresh_dir(&root)?;
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).map_err(io("create the log directory", &logs))?;
    // The sandbox's user, another uid, reads the trees staged below.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
            .map_err(io("open the work directory to the sandbox user", &root))?;
    }
    let db = LaneDb::create(cfg, seed).await?;
    let result = play_lane(cfg, &schedule, &root, &logs, &db).await;
    // Every host has stopped by now (or was dropped, which kills it); the database goes.
    db.drop_db().await;
    let (fired, obs) = result?;
    let violations = check(&obs);
    Ok(FleetResult {
        schedule,
        fired,
        violations,
        runs: obs.runs.len(),
        elapsed: started.elapsed(),
    })
}

/// The services.sh cluster's loopback address (its port beside the cluster).
fn postgres_addr(cfg: &E2eConfig) -> Result<std::net::SocketAddr, E2eError> {
    let port_file = cfg.repo_root.join(".work/postgres/port");
    let port = std::fs::read_to_string(&port_file)
        .map_err(io("read the test Postgres port", &port_file))?;
    format!("127.0.0.1:{}", port.trim())
        .parse()
        .map_err(|e: std::net::AddrParseError| E2eError::Setup {
            what: "read the test Postgres port",
            detail: e.to_string(),
        })
}

type Played = (Vec<(Fault, bool, String)>, FleetObservations);

async fn play_lane(
    cfg: &E2eConfig,
    schedule: &FleetSchedule,
    root: &Path,
    logs: &Path,
    db: &LaneDb,
) -> Result<Played, E2eError> {
    let (server, jobs) = feed(cfg, &schedule.job_secs).await?;
    let api = server.url().to_owned();
    let partitioned = schedule
        .faults
        .iter()
        .find(|f| f.kind == FaultKind::Partition)
        .map(|f| f.host);
    let pg = postgres_addr(cfg)?;
    let proxy = TcpProxy::start(pg).await?;
    let mut lane = Lane {
        cfg,
        api: api.clone(),
        logs: logs.to_owned(),
        url: db.url.clone(),
        hosts: Vec::new(),
        exits: Vec::new(),
        jobs: jobs.len(),
    };
    let password_file = password_file_if_taken(cfg, &db.url, root)?;
    for i in 0..schedule.hosts {
        let dir = root.join(format!("host-{i}"));
        for d in ["state", "out", "work", "staging"] {
            let p = dir.join(d);
            std::fs::create_dir_all(&p).map_err(io("create a host directory", &p))?;
        }
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                .map_err(io("open a host directory", &dir))?;
        }
        let url = if Some(i) == partitioned {
            db.url
                .replacen(&format!("@{pg}/"), &format!("@{}/", proxy.addr), 1)
        } else {
            db.url.clone()
        };
        let ledger = ledger_args(&url, password_file.as_deref());
        let mut host = Host {
            name: format!("host-{i}"),
            ledger,
            dir,
            child: None,
            starts: 0,
            restart_at: None,
        };
        host.start(cfg, &api, logs)?;
        lane.hosts.push(host);
    }
    let mut fired = Vec::new();
    let mut fenced_hosts = Vec::new();
    for fault in &schedule.faults {
        let (did, note, refused) = lane.play(*fault, &proxy).await?;
        println!(
            "  {} host-{}: {} ({note})",
            fault.kind.name(),
            fault.host,
            if did { "fired" } else { "not fired" }
        );
        if let Some(r) = refused {
            fenced_hosts.push((format!("host-{}", fault.host), r));
        }
        fired.push((*fault, did, note));
    }
    lane.wait_db("every job completed", |db| db.all_completed(jobs.len()))
        .await?;
    // Stop every host as systemd does, and wait for each.
    let mut final_exits = Vec::new();
    for h in &mut lane.hosts {
        if let Some(pid) = h.pid() {
            signal(pid, "TERM");
        }
        let label = h.stderr_name();
        if let Some(mut child) = h.child.take() {
            let code = match tokio::time::timeout(Duration::from_secs(90), child.wait()).await {
                Ok(Ok(status)) => status.code(),
                _ => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    None
                }
            };
            final_exits.push((label, code));
        }
    }
    let state = read_db(&db.url).await?;
    let mut offered = Vec::new();
    let mut unsignable = Vec::new();
    for h in &lane.hosts {
        let (ids, bad) = offered_in(&h.dir.join("out"));
        offered.extend(ids.into_iter().map(|j| (h.name.clone(), j)));
        unsignable.extend(bad);
    }
    let log_problems = match crate::logscan::LogScan::dir(logs, &[]) {
        // Hosts are SIGKILLed and started again: `serve-hI-N` is followed by `serve-hI-N+1`.
        Ok(scan) => scan.problems_of_killed_and_restarted(1),
        Err(e) => vec![e.to_string()],
    };
    drop(proxy);
    drop(server);
    Ok((
        fired,
        FleetObservations {
            jobs,
            states: state.states,
            runs: state.runs,
            candidates: state.candidates,
            offered,
            unsignable,
            fenced_hosts,
            unexpected_exits: lane.exits,
            final_exits,
            log_problems,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, job: &str, host: &str, fence: i64, outcome: Option<&str>) -> FleetRun {
        FleetRun {
            run_id: id,
            job_id: job.into(),
            host: host.into(),
            fence,
            outcome: outcome.map(str::to_owned),
            reason_code: None,
            reason: None,
        }
    }

    fn candidate(job: &str, run_id: i64, host: &str, fence: i64) -> FleetCandidate {
        FleetCandidate {
            job_id: job.into(),
            run_id,
            host: host.into(),
            fence,
            file: format!("candidate-{job}.json"),
        }
    }

    /// One job taken over after a lost lease and finished once: nothing broken.
    fn clean() -> FleetObservations {
        FleetObservations {
            jobs: vec!["j1".into()],
            states: vec![("j1".into(), JobState::Completed)],
            runs: vec![
                run(1, "j1", "host-0", 1, Some("host_failed")),
                run(2, "j1", "host-1", 2, Some("completed_passed")),
            ],
            candidates: vec![candidate("j1", 2, "host-1", 2)],
            offered: vec![("host-1".into(), "j1".into())],
            fenced_hosts: vec![("host-0".into(), true)],
            final_exits: vec![("serve-h0-1".into(), Some(0))],
            ..FleetObservations::default()
        }
    }

    fn broken(o: &FleetObservations) -> Vec<&'static str> {
        check(o).iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn a_job_taken_over_and_finished_once_breaks_nothing() {
        assert_eq!(broken(&clean()), Vec::<&str>::new());
    }

    /// A naive fleet without the fence: the woken host records its late candidate too.
    #[test]
    fn a_late_candidate_recorded_beside_the_take_overs_is_a_violation() {
        let mut o = clean();
        o.runs[0].outcome = Some("completed_passed".into());
        o.candidates.insert(0, candidate("j1", 1, "host-0", 1));
        o.offered.push(("host-0".into(), "j1".into()));
        let b = broken(&o);
        assert!(b.contains(&"fleet_one_verdict_per_job"), "{b:?}");
        assert!(b.contains(&"fleet_one_candidate_per_job"), "{b:?}");
        assert!(b.contains(&"fleet_offered_once"), "{b:?}");
    }

    #[test]
    fn a_candidate_of_a_superseded_fence_is_a_violation() {
        let mut o = clean();
        o.runs.push(run(3, "j1", "host-2", 3, Some("host_failed")));
        assert!(broken(&o).contains(&"fleet_one_candidate_per_job"));
    }

    #[test]
    fn a_job_left_unfinished_or_offered_by_the_wrong_host_is_a_violation() {
        let mut o = clean();
        o.states[0].1 = JobState::Running;
        o.offered = vec![("host-0".into(), "j1".into())];
        let b = broken(&o);
        assert!(b.contains(&"fleet_every_job_completed"), "{b:?}");
        assert!(b.contains(&"fleet_offered_once"), "{b:?}");
    }

    #[test]
    fn a_host_that_never_logged_its_refusal_or_crashed_is_a_violation() {
        let mut o = clean();
        o.fenced_hosts[0].1 = false;
        o.unexpected_exits.push(("serve-h2-1".into(), Some(101)));
        o.final_exits[0].1 = Some(1);
        let b = broken(&o);
        assert!(b.contains(&"fleet_fence_refused_late_result"), "{b:?}");
        assert_eq!(b.iter().filter(|n| **n == "fleet_hosts_survive").count(), 2);
        // A transient exit 1 on its own is what systemd restarts: no violation.
        let mut t = clean();
        t.unexpected_exits.push(("serve-h2-1".into(), Some(1)));
        assert!(broken(&t).is_empty());
    }

    #[test]
    fn the_password_moves_to_its_file_only_for_a_worker_that_takes_one() {
        let url = "postgres://u:s3cret@127.0.0.1:5/db";
        assert_eq!(ledger_args(url, None), ["--ledger", url]);
        let args = ledger_args(url, Some(Path::new("/p")));
        assert_eq!(
            args,
            [
                "--ledger",
                "postgres://u@127.0.0.1:5/db",
                "--ledger-password-file",
                "/p"
            ]
        );
    }

    #[test]
    fn the_schedule_is_pure_in_the_seed_and_takes_out_three_different_hosts() {
        let a = schedule(1, 3, FLEET_JOBS);
        assert_eq!(a, schedule(1, 3, FLEET_JOBS));
        assert_eq!(a.job_secs.len(), 30);
        let mut kinds: Vec<&str> = a.faults.iter().map(|f| f.kind.name()).collect();
        kinds.sort_unstable();
        assert_eq!(kinds, ["kill", "partition", "stop"]);
        let hosts: HashSet<usize> = a.faults.iter().map(|f| f.host).collect();
        assert_eq!(hosts.len(), 3);
        assert!((1..20).any(|s| schedule(s, 3, FLEET_JOBS).faults != a.faults));
    }
}
