//! Plays one schedule: deploys the bounties, runs cycles of the real binaries while the
//! schedule's faults are injected, keeps running clean cycles until every bounty that can
//! settle has (as systemd restarts or the next workflow run would), then collects the
//! observations from the chain, Docker and the files, and checks them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256, keccak256};
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{DEV_KEYS, DeployedBounty, Testkit, dev_signer, status};
use serde_json::Value;
use tokio::sync::Notify;
use verifier_sdk::candidate_file_name;
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams};
use verifier_sdk::settle::{SettlementEvent, decode_settlement_event};

use super::check::{BountyObservation, KeeperTx, LedgerJob, Observations, Violation, check};
use super::clock::{FakeClock, probe_worker};
use super::inject::{
    FaultyServer, RpcProxy, Tmpfs, containers_of, docker_kill, restart_docker,
    running_container_of, sigterm, wait_for_docker,
};
use super::ledger::read_ledger;
use super::liveness::{
    LANE_SETTLE_COSTS, LateImage, Liveness, chain_now, first_run_args, sleep_until_chain,
};
use super::schedule::{
    BountyKind, Disk, Fault, FaultKind, KillAt, Runner, Schedule, ScheduleOptions, Sig, Target,
    generate,
};
use super::serve::{
    LaneJob, ServeSpec, Supervised, add_pids, feed_dead, host_failing, lane_done, last_run_id,
    ledger_job, snapshot,
};
use super::trigger::{Trigger, candidate_names, trigger_future};
use crate::server::codeload_archive;
use crate::{
    BENCHMARK_SUBDIR, E2eConfig, E2eError, KEEPER_KEY_ENV, VERIFIER_KEY_ENV, VERIFIER_KEYS,
    archive_commit, deploy_for_job, init_signer_history, io, job_params, keeper_relay_args,
    manifest, s, signer_sign_args, tree_digest, tree_files, wall_clock, worker_feed_args,
};

/// What to play.
#[derive(Debug, Clone, Copy)]
pub struct ChaosOptions {
    /// The seed.
    pub seed: u64,
    /// Bounties in the feed.
    pub bounties: usize,
    /// Faults drawn.
    pub faults: usize,
    /// What the generator may draw.
    pub schedule: ScheduleOptions,
    /// Clean cycles allowed after the chaos cycles before a bounty counts as stuck.
    pub max_drain_cycles: u32,
    /// Print the schedules instead of running them (`--dry-run`).
    pub dry_run: bool,
    /// `worker serve` pulls missing images by their pinned digest (`--pull`, the unit's
    /// default); off (`--serve-no-pull`) plays a host that uses only pre-pulled images.
    pub serve_pull: bool,
    /// Issue #43 item 5: an RPC endpoint that fails for the whole schedule, given to every
    /// signer and keeper run *before* the working one (`--rpc FAILING --rpc WORKING`), so every
    /// settlement has to fail over (`--failing-rpc down|forbidden|rate-limited`).
    pub failing_rpc: Option<FailingRpc>,
    /// Issue #43 item 5: one more good bounty, listed last, whose window is short
    /// (`--liveness short-window`) or whose image appears half-way through it
    /// (`--liveness late-image`); see [`super::liveness`].
    pub liveness: Option<Liveness>,
    /// With `--liveness short-window`: the first run takes the jobs in the order first seen
    /// instead of the worker's deadline-first order (`--first-seen-order`, the lane's control).
    pub first_seen_order: bool,
    /// Issue #45 item 5: play the fleet lane with this many hosts instead of the money path
    /// (`--fleet N`; see [`super::fleet`]).
    pub fleet: Option<usize>,
}

/// How the failing endpoint of [`ChaosOptions::failing_rpc`] fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailingRpc {
    /// Nothing listens on its port.
    Down,
    /// HTTP 403 to everything but `eth_chainId` and `eth_blockNumber`.
    Forbidden,
    /// JSON-RPC -32005 to everything but `eth_chainId` and `eth_blockNumber`.
    RateLimited,
}

impl FailingRpc {
    /// The flag's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Down => "down",
            Self::Forbidden => "forbidden",
            Self::RateLimited => "rate-limited",
        }
    }

    /// The value named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Down, Self::Forbidden, Self::RateLimited]
            .into_iter()
            .find(|f| f.name() == name)
    }
}

/// Puts `--rpc failing` before the first `--rpc` of `args`: the failing endpoint first in the
/// order of preference, so each request meets it before failing over.
fn failing_first(args: &mut Vec<String>, failing: Option<&str>) {
    if let (Some(url), Some(at)) = (failing, args.iter().position(|a| a == "--rpc")) {
        args.splice(at..at, [s("--rpc"), url.to_owned()]);
    }
}

impl ChaosOptions {
    /// The defaults for `seed`: 6 bounties, 4 faults, 2 chaos cycles, 4 drain cycles.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            bounties: 6,
            faults: 4,
            schedule: ScheduleOptions::default(),
            max_drain_cycles: 4,
            dry_run: false,
            serve_pull: true,
            failing_rpc: None,
            liveness: None,
            first_seen_order: false,
            fleet: None,
        }
    }

    /// The command that replays this run exactly.
    pub fn replay_command(&self) -> String {
        if let Some(n) = self.fleet {
            return format!(
                "target/debug/bounty-e2e chaos --seed {} --fleet {n}",
                self.seed
            );
        }
        let mut c = format!(
            "target/debug/bounty-e2e chaos --seed {} --bounties {} --faults {} --chaos-cycles {}",
            self.seed, self.bounties, self.faults, self.schedule.chaos_cycles
        );
        if !self.schedule.disk {
            c.push_str(" --no-disk");
        }
        if self.schedule.docker_restart {
            c.push_str(" --allow-docker-restart");
        }
        if !self.schedule.clock {
            c.push_str(" --no-clock");
        }
        if let Some(r) = self.schedule.runner {
            c.push_str(" --runner ");
            c.push_str(r.name());
        }
        if !self.serve_pull {
            c.push_str(" --serve-no-pull");
        }
        if let Some(f) = self.failing_rpc {
            c.push_str(" --failing-rpc ");
            c.push_str(f.name());
        }
        if let Some(l) = self.liveness {
            c.push_str(" --liveness ");
            c.push_str(l.name());
        }
        if self.first_seen_order {
            c.push_str(" --first-seen-order");
        }
        c
    }
}

/// What one schedule did and found.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The options it ran with.
    pub options: ChaosOptions,
    /// The schedule played.
    pub schedule: Schedule,
    /// Each fault and whether its trigger fired (a kill whose process ended first did not).
    pub fired: Vec<(Fault, bool)>,
    /// What was observed.
    pub observations: Observations,
    /// Broken invariants (empty: all held).
    pub violations: Vec<Violation>,
    /// Cycles run (chaos and drain).
    pub cycles: u32,
    /// Wall time.
    pub elapsed: Duration,
    /// One line per step: cycle, step, exit code, kill.
    pub steps: Vec<String>,
}

impl RunResult {
    /// The report printed when an invariant breaks: the seed, the schedule, the replay command.
    pub fn failure_report(&self) -> String {
        let mut out = format!(
            "chaos seed {}: {} invariant(s) broken\n",
            self.schedule.seed,
            self.violations.len()
        );
        for v in &self.violations {
            out.push_str(&format!("  VIOLATION {v}\n"));
        }
        out.push_str(&format!("schedule:\n{}", self.schedule));
        out.push_str("fired:\n");
        for (f, fired) in &self.fired {
            out.push_str(&format!(
                "  cycle {}: {} -> {}\n",
                f.cycle,
                f.kind,
                if *fired { "fired" } else { "did not fire" }
            ));
        }
        out.push_str("steps:\n");
        for st in &self.steps {
            out.push_str(&format!("  {st}\n"));
        }
        out.push_str(&format!("replay: {}\n", self.options.replay_command()));
        out
    }
}

/// One verifier set: its runner, its signers and its keeper run per cycle.
struct Lane {
    name: &'static str,
    keys: Vec<usize>,
    addresses: Vec<Address>,
    runner: Runner,
}

/// A serve lane's directories: the ledger and the verdict cache on the state tmpfs, the
/// staging root on the staging tmpfs (its own: a service and a feed run of the other lane
/// may run at once), `--out` and scratch in the work dir. They persist over the cycles.
struct ServeDirs {
    state: PathBuf,
    cache: PathBuf,
    staging: PathBuf,
    out: PathBuf,
    scratch: PathBuf,
}

/// How long the driver waits for a service to finish a cycle's jobs before it moves on (the
/// jobs then stay for the next cycle, as they would on a host).
const SERVE_WAIT: Duration = Duration::from_secs(150);

/// Set once `clock::probe_worker` has shown, in this process, that the preload moves the
/// real worker's clock.
static CLOCK_PROBED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

struct Bounty {
    lane: &'static str,
    kind: BountyKind,
    deployed: DeployedBounty,
    solver: Address,
    reward: U256,
    balance_before: U256,
    job_id: String,
    expires_at: u64,
    verdicts: Vec<String>,
    last_status: Option<String>,
    ledger: Option<LedgerJob>,
}

impl Bounty {
    /// Deploys `jp`'s bounty and starts tracking it in `lane` as a `kind`; the solver's balance
    /// is read after the deployment, so a payout is the only later change to it.
    async fn deploy(
        kit: &Testkit,
        jp: &mut JobParams,
        (lane, kind): (&'static str, BountyKind),
        solver: Address,
        verifiers: &[Address],
        threshold: u8,
        now: u64,
    ) -> Result<(Self, Value), E2eError> {
        let (params, deployed, job, validated) =
            deploy_for_job(kit, jp, solver, verifiers, threshold, now).await?;
        let bounty = Self {
            lane,
            kind,
            balance_before: kit.balance(solver).await?,
            deployed,
            solver,
            reward: params.reward,
            job_id: validated.job_id().to_owned(),
            expires_at: jp.expires_at,
            verdicts: Vec::new(),
            last_status: None,
            ledger: None,
        };
        Ok((bounty, job))
    }
}

struct StepOut {
    code: Option<i32>,
    report: Option<Value>,
    fired: bool,
    hung: Option<String>,
    docker_kills_fired: Vec<bool>,
    /// Exit of the killed run, when a kill fired (the other fields are the restart's).
    killed_code: Option<i32>,
}

#[derive(Clone)]
struct Step<'a> {
    label: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    logs: &'a Path,
    deadline: Duration,
}

/// Runs one step; when its kill fired, restarts it at once with the cycle's other faults
/// still in force (as `Restart=on-failure` or a re-run job would), and reports the restart's
/// exit and report.
async fn run_step(
    step: Step<'_>,
    kill: Option<(Sig, Trigger)>,
    docker_kills: &[u64],
    docker_restart: Option<PathBuf>,
    release: Option<Arc<Notify>>,
    pids: &mut HashSet<u32>,
) -> Result<StepOut, E2eError> {
    let again = Step {
        label: format!("{}-restart", step.label),
        ..step.clone()
    };
    let first = run_once(step, kill, docker_kills, docker_restart, release, pids).await?;
    if !first.fired {
        return Ok(first);
    }
    let second = run_once(again, None, &[], None, None, pids).await?;
    Ok(StepOut {
        code: second.code,
        report: second.report,
        fired: true,
        hung: first.hung.or(second.hung),
        docker_kills_fired: first.docker_kills_fired,
        killed_code: first.code,
    })
}

/// Runs one binary to its end or to its fault; every pid goes into `pids`.
// One function on purpose: the spawn, the trigger race, the signal and its grace read as
// the one sequence they are.
#[allow(clippy::too_many_lines)]
async fn run_once(
    step: Step<'_>,
    kill: Option<(Sig, Trigger)>,
    docker_kills: &[u64],
    docker_restart: Option<PathBuf>,
    release: Option<Arc<Notify>>,
    pids: &mut HashSet<u32>,
) -> Result<StepOut, E2eError> {
    let out_path = step.logs.join(format!("{}.stdout", step.label));
    let err_path = step.logs.join(format!("{}.stderr", step.label));
    let stdout = std::fs::File::create(&out_path).map_err(io("create a log", &out_path))?;
    let stderr = std::fs::File::create(&err_path).map_err(io("create a log", &err_path))?;
    let mut cmd = tokio::process::Command::new(&step.program);
    cmd.args(&step.args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .envs(crate::logscan::JSON_LOG_ENV);
    for (k, v) in &step.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(io("start a binary", &step.program))?;
    let pid = child.id().unwrap_or(0);
    pids.insert(pid);
    let kill_tasks: Vec<_> = docker_kills
        .iter()
        .map(|&ms| {
            tokio::spawn(async move {
                let id = running_container_of(pid).await;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                docker_kill(&id).await
            })
        })
        .collect();
    let restart = docker_restart.map(|log| {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            restart_docker(&log).await
        })
    });
    let sig = kill.as_ref().map(|(s, _)| *s);
    let trigger = trigger_future(pid, kill.map(|(_, t)| t));
    enum Ended {
        Exited(Option<i32>),
        Fire,
        Deadline,
    }
    let ended = match tokio::time::timeout(step.deadline, async {
        tokio::select! {
            r = child.wait() => Ended::Exited(r.ok().and_then(|s| s.code())),
            () = trigger => Ended::Fire,
        }
    })
    .await
    {
        Ok(e) => e,
        Err(_) => Ended::Deadline,
    };
    let mut fired = false;
    let mut hung = None;
    let code = match ended {
        Ended::Exited(code) => code,
        Ended::Fire => {
            fired = true;
            let grace = match sig {
                Some(Sig::Term) => {
                    sigterm(pid);
                    Duration::from_secs(40)
                }
                _ => {
                    let _ = child.start_kill();
                    Duration::from_secs(10)
                }
            };
            if let Some(r) = &release {
                r.notify_one();
            }
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(r) => r.ok().and_then(|s| s.code()),
                Err(_) => {
                    hung = Some(format!(
                        "{} did not exit within {grace:?} of its signal",
                        step.label
                    ));
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    None
                }
            }
        }
        Ended::Deadline => {
            hung = Some(format!(
                "{} did not exit within {:?}",
                step.label, step.deadline
            ));
            let _ = child.start_kill();
            let _ = child.wait().await;
            None
        }
    };
    let mut docker_kills_fired = Vec::new();
    for t in kill_tasks {
        if t.is_finished() {
            docker_kills_fired.push(t.await.unwrap_or(false));
        } else {
            t.abort();
            docker_kills_fired.push(false);
        }
    }
    if let Some(t) = restart {
        docker_kills_fired.push(t.await.unwrap_or(false));
    }
    let report = std::fs::read(&out_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    Ok(StepOut {
        code,
        report,
        fired,
        hung,
        docker_kills_fired,
        killed_code: None,
    })
}

fn killed_note(out: &StepOut) -> String {
    if out.fired {
        format!(
            " after a kill (killed run exit {:?}) and a restart",
            out.killed_code
        )
    } else {
        String::new()
    }
}

fn key_hex(k: &str) -> String {
    k.trim_start_matches("0x").to_ascii_lowercase()
}

/// Plays the schedule for `opts` end to end and checks the invariants.
#[allow(clippy::too_many_lines)]
pub async fn run(cfg: &E2eConfig, opts: &ChaosOptions) -> Result<RunResult, E2eError> {
    let started = Instant::now();
    let mut drawn = opts.schedule;
    if opts.liveness == Some(Liveness::ShortWindow) {
        // `--max-jobs` and the first-seen control are a feed run's.
        drawn.runner = Some(super::schedule::RunnerMode::Feed);
    }
    let mut schedule = generate(opts.seed, opts.bounties, opts.faults, drawn);
    if opts.liveness == Some(Liveness::ShortWindow) {
        // The short window is sized for one clean run (module doc of `liveness`).
        schedule.faults.retain(|f| f.cycle != 0);
    }
    // Stale mounts of a killed earlier run go first; the lock keeps a second run out.
    let workdir = super::workdir::prepare(&cfg.work_dir, opts.seed)?;
    let work = workdir.path.clone();
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).map_err(io("create the log dir", &logs))?;

    // Filesystems: small tmpfs mounts the disk faults fill, or plain directories.
    let (stage_fs, state_fs) = if opts.schedule.disk {
        (
            Some(Tmpfs::mount(&work.join("stage-fs"), 64)?),
            Some(Tmpfs::mount(&work.join("state-fs"), 16)?),
        )
    } else {
        (None, None)
    };
    let staging = work.join("stage-fs/staging");
    let keeper_state = work.join("state-fs/keeper");
    let cache = work.join("state-fs/cache");
    let scratch = work.join("scratch");
    for d in [&staging, &keeper_state, &cache, &scratch] {
        std::fs::create_dir_all(d).map_err(io("create a work directory", d))?;
    }
    let serve_dirs = |lane: &str| ServeDirs {
        state: work.join(format!("state-fs/serve-{lane}")),
        cache: work.join(format!("state-fs/serve-{lane}-cache")),
        staging: work.join(format!("stage-fs/serve-{lane}")),
        out: work.join(format!("serve-{lane}/out")),
        scratch: work.join(format!("scratch/serve-{lane}")),
    };
    // The daemon restart's dockerd output: outside seed-S/, which the next run removes.
    let dockerd_log = cfg.work_dir.join("dockerd.log");
    // The wall clock of the cycles with a clock step; the preload is checked once per process.
    let clock = if schedule
        .faults
        .iter()
        .any(|f| matches!(f.kind, FaultKind::ClockStep { .. }))
    {
        if !CLOCK_PROBED.load(std::sync::atomic::Ordering::Relaxed) {
            probe_worker(&cfg.bin_dir.join("worker"), &work.join("clock-probe")).await?;
            CLOCK_PROBED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Some(FakeClock::new(&work.join("clock-offset"))?)
    } else {
        None
    };

    // The run's own node: another test's clock warp on a shared one would decide its windows.
    let chain = super::node::OwnChain::start().await?;
    let kit = chain.kit();
    let proxy = RpcProxy::start(kit.url(), opts.seed).await?;
    // Held for the whole run: the proxy serves as long as it lives.
    let (_failing_proxy, failing_url) = match opts.failing_rpc {
        None => (None, None),
        Some(FailingRpc::Down) => {
            // A port that was free a moment ago and has no listener now: connection refused.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io(
                "bind a port for the down endpoint",
                Path::new("127.0.0.1"),
            ))?;
            let port = listener
                .local_addr()
                .map_err(io("read the down endpoint's port", Path::new("127.0.0.1")))?
                .port();
            drop(listener);
            (None, Some(format!("http://127.0.0.1:{port}")))
        }
        Some(f) => {
            let how = if f == FailingRpc::Forbidden {
                chain_testkit::proxy::Misbehaviour::Forbidden
            } else {
                chain_testkit::proxy::Misbehaviour::RateLimited
            };
            let p = chain_testkit::proxy::start(kit.url(), how)
                .await
                .map_err(io("start the failing RPC endpoint", Path::new("127.0.0.1")))?;
            let url = p.url.clone();
            (Some(p), Some(url))
        }
    };
    let keeper_signer = kit.fund_new_account(U256::from(10u128.pow(21))).await?;
    let keeper_key = keeper_signer.to_bytes().to_string();
    let keeper_addr = keeper_signer.address();
    let start_block = kit
        .provider()
        .get_block_number()
        .await
        .map_err(|e| E2eError::Mismatch(format!("eth_blockNumber: {e}")))?;

    // The bounties and their jobs.
    let fixtures = cfg.repo_root.join("fixtures/python-bounty");
    let benchmark = fixtures.join("benchmark");
    let benchmark_digest = tree_digest(&benchmark)?;
    // A job's threshold is the size of its verifier set (PROTOCOL), and a runner serves
    // exactly one set: threshold-2 bounties go to the pair of verifiers, threshold-1 ones to
    // verifier 1 alone, each set with its own runner, signers and keeper run per cycle.
    let mut lanes = Vec::new();
    for (name, keys) in [
        ("pair", VERIFIER_KEYS.to_vec()),
        ("solo", vec![VERIFIER_KEYS[0]]),
    ] {
        let addresses = keys
            .iter()
            .map(|i| dev_signer(*i).map(|s| s.address()))
            .collect::<Result<Vec<_>, _>>()?;
        let runner = schedule.runner.lane(name == "pair");
        if runner == Runner::Serve {
            let d = serve_dirs(name);
            for p in [&d.state, &d.cache, &d.staging, &d.out, &d.scratch] {
                std::fs::create_dir_all(p).map_err(io("create a serve directory", p))?;
            }
        }
        lanes.push(Lane {
            name,
            keys,
            addresses,
            runner,
        });
    }
    let now = kit.latest_timestamp().await?.max(wall_clock());
    let wrong_image = {
        let base = cfg
            .python_image
            .split('@')
            .next()
            .unwrap_or(&cfg.python_image);
        let digest = keccak256("chaos: an image digest nobody pushed");
        format!("{base}@sha256:{}", alloy::hex::encode(digest))
    };
    let mut archives: Vec<(String, Vec<u8>)> = Vec::new();
    let mut bounties = Vec::new();
    let mut jobs = Vec::new();
    for (i, spec) in schedule.bounties.iter().enumerate() {
        let solution_dir = match spec.kind {
            BountyKind::Bad => "solution-bad",
            BountyKind::Good | BountyKind::WrongImage => "solution-good",
        };
        let solution = fixtures.join(solution_dir);
        let source_digest = tree_digest(&solution)?;
        let commit = archive_commit(&source_digest);
        let repo = format!("roman-{solution_dir}");
        let path = format!("/solver-org/{repo}/tar.gz/{commit}");
        if !archives.iter().any(|(p, _)| *p == path) {
            let files = tree_files(&solution)?;
            let tgz = codeload_archive(&format!("{repo}-{commit}"), "", &files).map_err(|e| {
                E2eError::Setup {
                    what: "build a tar.gz archive",
                    detail: e.to_string(),
                }
            })?;
            archives.push((path, tgz));
        }
        let solver = PrivateKeySigner::random().address();
        let lane = if spec.threshold >= 2 {
            &lanes[0]
        } else {
            &lanes[1]
        };
        let verifiers = &lane.addresses;
        let image = if spec.kind == BountyKind::WrongImage {
            wrong_image.clone()
        } else {
            cfg.python_image.clone()
        };
        let mut jp = JobParams {
            manifest: manifest(&image, benchmark_digest),
            ..job_params(
                keccak256(format!("chaos:{}:{i}:{now}:{solver}", opts.seed)),
                solver,
                verifiers,
                now,
                &repo,
                &commit,
                &source_digest,
            )
        };
        let (bounty, job) = Bounty::deploy(
            kit,
            &mut jp,
            (lane.name, spec.kind),
            solver,
            verifiers,
            spec.threshold,
            now,
        )
        .await?;
        bounties.push(bounty);
        jobs.push(job);
    }
    // The liveness lane's bounty: good, in the lane of bounty 0 (listed in cycle 0 too, so the
    // first run has something to take instead), listed last, its window starting now.
    let late_image = match opts.liveness {
        Some(l) => {
            let lane = if schedule.bounties.first().is_some_and(|b| b.threshold >= 2) {
                &lanes[0]
            } else {
                &lanes[1]
            };
            let late = if l == Liveness::LateImage {
                Some(
                    LateImage::prepare(
                        &cfg.python_image,
                        &format!("s{}-{}", opts.seed, wall_clock()),
                    )
                    .await?,
                )
            } else {
                None
            };
            let image = late
                .as_ref()
                .map_or_else(|| cfg.python_image.clone(), |li| li.reference.clone());
            let solution = fixtures.join("solution-good");
            let source_digest = tree_digest(&solution)?;
            let commit = archive_commit(&source_digest);
            let solver = PrivateKeySigner::random().address();
            let start = kit.latest_timestamp().await?.max(wall_clock());
            let i = schedule.bounties.len();
            let mut jp = JobParams {
                manifest: manifest(&image, benchmark_digest),
                expires_at: start + l.window_secs(),
                ..job_params(
                    keccak256(format!("chaos:{}:{i}:{now}:{solver}", opts.seed)),
                    solver,
                    &lane.addresses,
                    start,
                    "roman-solution-good",
                    &commit,
                    &source_digest,
                )
            };
            let threshold = u8::try_from(lane.addresses.len()).unwrap_or(1);
            let (bounty, job) = Bounty::deploy(
                kit,
                &mut jp,
                (lane.name, BountyKind::Good),
                solver,
                &lane.addresses,
                threshold,
                start,
            )
            .await?;
            bounties.push(bounty);
            jobs.push(job);
            late.map(|li| (li, start + l.window_secs() / 2))
        }
        None => None,
    };
    // The node's lead over the wall clock, just after the lane's bounty was mined.
    let chain_lead = i64::try_from(kit.latest_timestamp().await?).unwrap_or(i64::MAX)
        - i64::try_from(wall_clock()).unwrap_or(0);
    let lane_bounty = opts.liveness.map(|_| schedule.bounties.len());
    // Pushed half-way through its window, whatever the cycles are doing then.
    let mut late_push = late_image.as_ref().map(|(li, at)| {
        let (li, at, provider) = (li.clone(), *at, kit.provider().clone());
        tokio::spawn(async move {
            sleep_until_chain(&provider, chain_lead, at).await;
            li.push().await
        })
    });
    lanes.retain(|l| bounties.iter().any(|b| b.lane == l.name));
    // Bounties are posted over the chaos cycles (bounty i from cycle i mod C on), so every
    // chaos cycle has fresh work for its faults to land on, as a live feed would.
    let listed_from = |i: usize| {
        if Some(i) == lane_bounty {
            0
        } else {
            u32::try_from(i).unwrap_or(0) % schedule.chaos_cycles
        }
    };
    let feed_at = |cycle: u32| {
        Value::Array(
            jobs.iter()
                .enumerate()
                .filter(|(i, _)| listed_from(*i) <= cycle)
                .map(|(_, j)| j.clone())
                .collect(),
        )
    };
    let server = FaultyServer::start(&feed_at(0), opts.seed).await?;
    for (p, a) in archives {
        server.add(&p, a);
    }
    let benchmark_tgz = codeload_archive(
        &format!("benchmarks-{BENCHMARK_COMMIT}"),
        BENCHMARK_SUBDIR,
        &tree_files(&benchmark)?,
    )
    .map_err(|e| E2eError::Setup {
        what: "build a tar.gz archive",
        detail: e.to_string(),
    })?;
    server.add(
        &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
        benchmark_tgz,
    );

    let bin = |name: &str| cfg.bin_dir.join(name);
    let mut pids = HashSet::new();
    let mut fired: Vec<(Fault, bool)> = schedule.faults.iter().map(|f| (*f, false)).collect();
    let mut steps = Vec::new();
    if let (Some(l), Some(b)) = (opts.liveness, lane_bounty.and_then(|i| bounties.get(i))) {
        steps.push(format!(
            "liveness {}: bounty {} (good, lane {}, listed last) window {} s{}",
            l.name(),
            schedule.bounties.len(),
            b.lane,
            l.window_secs(),
            if opts.first_seen_order {
                ", first run in first-seen order"
            } else {
                ""
            }
        ));
    }
    let mut hung = Vec::new();
    let mut serve_stopped_for_good = Vec::new();
    let mut cycle = 0u32;
    loop {
        let chaos = cycle < schedule.chaos_cycles;
        // The next workflow run or restart comes minutes later, not milliseconds: a cycle
        // does not start while the daemon is down (restarted by a fault, or by anyone on a
        // shared machine), or the drain would burn its cycles in a second on exit 5s.
        if !wait_for_docker(Duration::from_secs(120)).await {
            return Err(E2eError::Setup {
                what: "reach the Docker daemon before a cycle",
                detail: "`docker version` has not answered for 120 s".into(),
            });
        }
        // The liveness lanes' cadence: the run after the short window's first one comes once
        // that window has closed (only when it is still unsettled: otherwise nothing waits on
        // it); the drain's runs come after the late image has been pushed.
        if let (Some(i), Some(Liveness::ShortWindow), 1) = (lane_bounty, opts.liveness, cycle)
            && let Some(b) = bounties.get(i)
            && b.deployed.status().await? == status::SUBMITTED
        {
            let left = b
                .expires_at
                .saturating_add(1)
                .saturating_sub(chain_now(kit.provider(), chain_lead).await);
            steps.push(format!(
                "liveness: the next run comes after the short window: {left} s"
            ));
            sleep_until_chain(kit.provider(), chain_lead, b.expires_at.saturating_add(1)).await;
        }
        if cycle >= schedule.chaos_cycles
            && let Some(h) = late_push.take()
        {
            h.await.map_err(|e| E2eError::Setup {
                what: "push the late image",
                detail: e.to_string(),
            })??;
            steps.push(format!("liveness: late image pushed before cycle {cycle}"));
        }
        server.set_jobs(&feed_at(cycle))?;
        let faults: Vec<(usize, Fault)> = schedule
            .faults
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, f)| f.cycle == cycle)
            .collect();
        // Environment faults hold for the whole cycle.
        for (i, f) in &faults {
            match f.kind {
                FaultKind::Feed(m) => {
                    server.set_mode(Some(m));
                    fired[*i].1 = true;
                }
                FaultKind::Rpc(m) => {
                    proxy.set_mode(Some(m));
                    fired[*i].1 = true;
                }
                FaultKind::DiskFull(d) => {
                    let fs = match d {
                        Disk::Staging => stage_fs.as_ref(),
                        Disk::State => state_fs.as_ref(),
                    };
                    if let Some(fs) = fs {
                        fs.fill()?;
                        fired[*i].1 = true;
                    }
                }
                _ => {}
            }
        }
        // The clock step: every process started in this cycle runs on the fake clock, which a
        // task steps forward and back; it is back at the real time when the cycle ends.
        let clock_fault = faults.iter().find_map(|(i, f)| match f.kind {
            FaultKind::ClockStep {
                after_ms,
                forward_s,
                hold_ms,
                back_s,
            } => Some((*i, after_ms, forward_s, hold_ms, back_s)),
            _ => None,
        });
        let mut clock_env = Vec::new();
        let mut clock_task = None;
        if let (Some(c), Some((i, after_ms, forward_s, hold_ms, back_s))) = (&clock, clock_fault) {
            clock_env = c.env();
            let c = c.clone();
            let stepped = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = stepped.clone();
            let task = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                c.set(i64::try_from(forward_s).unwrap_or(0))?;
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                c.set(-i64::try_from(back_s).unwrap_or(0))
            });
            clock_task = Some((i, stepped, task));
        }
        // A kill or docker kill applies to the first step of its target in the cycle that it
        // fires in; one that did not fire (the process ended first) is tried at the next lane.
        // A service takes its faults along for the whole cycle (`claimed`): they may still
        // fire while it runs beside the later steps.
        let mut claimed: HashSet<usize> = HashSet::new();
        let kill_for = |t: Target, fired: &[(Fault, bool)], claimed: &HashSet<usize>| {
            faults.iter().find_map(|(i, f)| match f.kind {
                FaultKind::Kill { target, sig, at }
                    if target == t && !fired[*i].1 && !claimed.contains(i) =>
                {
                    Some((*i, sig, at))
                }
                _ => None,
            })
        };
        // The docker kills and the docker restart not yet fired nor taken by a running service.
        let docker_kills_for = |fired: &[(Fault, bool)], claimed: &HashSet<usize>| {
            faults
                .iter()
                .filter_map(|(i, f)| match f.kind {
                    FaultKind::DockerKill { after_ms } if !fired[*i].1 && !claimed.contains(i) => {
                        Some((*i, after_ms))
                    }
                    _ => None,
                })
                .collect::<Vec<(usize, u64)>>()
        };
        let restart_for = |fired: &[(Fault, bool)], claimed: &HashSet<usize>| {
            faults
                .iter()
                .find(|(i, f)| {
                    f.kind == FaultKind::DockerRestart && !fired[*i].1 && !claimed.contains(i)
                })
                .map(|(i, _)| *i)
        };
        let mut serving = Vec::new();
        for lane in &lanes {
            let cdir = work.join(format!("cycle-{cycle}/{}", lane.name));
            let cand = cdir.join("candidates");
            let att: Vec<PathBuf> = lane
                .keys
                .iter()
                .map(|k| cdir.join(format!("att-{k}")))
                .collect();
            for d in std::iter::once(&cand).chain(&att) {
                std::fs::create_dir_all(d).map_err(io("create a cycle directory", d))?;
            }
            let tag = format!("c{cycle}-{}", lane.name);

            if lane.runner == Runner::Serve {
                // worker serve: started for the lane's turn, running on beside its signers
                // and keeper (and the other lane), stopped when the cycle ends.
                let sd = serve_dirs(lane.name);
                let mut args = worker_feed_args("serve", server.url(), &lane.addresses);
                args.extend([
                    s("--out"),
                    s(sd.out.display()),
                    s("--state"),
                    s(sd.state.display()),
                    s("--archive-base"),
                    server.url().to_owned(),
                    s("--staging-root"),
                    s(sd.staging.display()),
                    s("--work-dir"),
                    s(sd.scratch.display()),
                    s("--cache-dir"),
                    s(sd.cache.display()),
                    s("--poll-interval"),
                    s(1),
                ]);
                if opts.serve_pull {
                    args.push(s("--pull"));
                }
                if opts.liveness.is_some() {
                    args.extend([s("--settle-costs"), s(LANE_SETTLE_COSTS)]);
                }
                let wk = kill_for(Target::Worker, &fired, &claimed);
                let trigger = wk.map(|(_, sig, at)| {
                    (
                        sig,
                        match at {
                            KillAt::AfterMs(ms) => Trigger::After(Duration::from_millis(ms)),
                            KillAt::ContainerRunning => Trigger::ContainerRunning,
                            _ => Trigger::CandidateWritten {
                                dir: sd.out.clone(),
                                existing: candidate_names(&sd.out),
                            },
                        },
                    )
                });
                let dk = docker_kills_for(&fired, &claimed);
                let restart =
                    restart_for(&fired, &claimed).filter(|_| opts.schedule.docker_restart);
                claimed.extend(wk.map(|(i, _, _)| i));
                claimed.extend(dk.iter().map(|(i, _)| *i));
                claimed.extend(restart);
                let sup = Supervised::start(
                    ServeSpec {
                        label: format!("{tag}-serve"),
                        program: bin("worker"),
                        args,
                        env: clock_env.clone(),
                        logs: logs.clone(),
                        min_run: match wk {
                            Some((_, _, KillAt::AfterMs(ms))) => Duration::from_millis(ms + 500),
                            _ => Duration::ZERO,
                        },
                    },
                    trigger,
                    dk.iter().map(|(_, ms)| *ms).collect(),
                    restart.map(|_| dockerd_log.clone()),
                );
                // Until the lane's listed jobs are done in its ledger (or nothing more can
                // happen this cycle), then a snapshot of --out for the signers.
                let listed: Vec<LaneJob<'_>> = bounties
                    .iter()
                    .enumerate()
                    .filter(|(i, b)| b.lane == lane.name && listed_from(*i) <= cycle)
                    .map(|(_, b)| LaneJob {
                        job_id: &b.job_id,
                        kind: b.kind,
                    })
                    .collect();
                let waited = Instant::now();
                let runs_before = read_ledger(&bin("worker"), &sd.state)
                    .await
                    .map_or(0, |l| last_run_id(&l));
                let why = loop {
                    if let Some(l) = read_ledger(&bin("worker"), &sd.state).await {
                        if lane_done(&l, &sd.out, &listed) {
                            break "its jobs done";
                        }
                        if feed_dead(&l, sup.pid(), 4) {
                            break "no poll answered";
                        }
                        if host_failing(&l, runs_before, 4) {
                            break "the host keeps failing its runs";
                        }
                    }
                    if sup.ended() {
                        break "the service stopped";
                    }
                    // A full state disk or a daemon that is gone: it exits at start, is
                    // restarted, exits again; nothing more happens this cycle.
                    if sup.crashes() >= 3 {
                        break "the service keeps exiting";
                    }
                    if waited.elapsed() > SERVE_WAIT {
                        break "the wait timed out";
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                };
                snapshot(&sd.out, &cand)?;
                steps.push(format!(
                    "{tag} serve: {why} after {:.0} s",
                    waited.elapsed().as_secs_f64()
                ));
                serving.push((tag.clone(), wk.map(|(i, _, _)| i), dk, restart, sup));
            } else {
                // worker feed
                let mut args = worker_feed_args("feed", server.url(), &lane.addresses);
                args.extend([
                    s("--out"),
                    s(cand.display()),
                    s("--archive-base"),
                    server.url().to_owned(),
                    s("--staging-root"),
                    s(staging.display()),
                    s("--work-dir"),
                    s(scratch.display()),
                    s("--cache-dir"),
                    s(cache.display()),
                    s("--json"),
                ]);
                if opts.liveness.is_some() {
                    args.extend([s("--settle-costs"), s(LANE_SETTLE_COSTS)]);
                }
                // A runner takes every job whose verifiers are all its own: the pair's runner
                // sees the solo jobs too, so the first run's room is set in every lane that
                // sees the short window's job, over the jobs that lane sees.
                let sees = |b: &Bounty| {
                    lanes
                        .iter()
                        .find(|l| l.name == b.lane)
                        .is_some_and(|own| own.addresses.iter().all(|a| lane.addresses.contains(a)))
                };
                if cycle == 0
                    && opts.liveness == Some(Liveness::ShortWindow)
                    && lane_bounty.is_some_and(|i| bounties.get(i).is_some_and(sees))
                {
                    let listed: Vec<&str> = bounties
                        .iter()
                        .enumerate()
                        .filter(|(i, b)| sees(b) && listed_from(*i) == 0)
                        .map(|(_, b)| b.job_id.as_str())
                        .collect();
                    args.extend(first_run_args(&listed, opts.first_seen_order));
                }
                let wk = kill_for(Target::Worker, &fired, &claimed);
                let trigger = wk.map(|(_, sig, at)| {
                    (
                        sig,
                        match at {
                            KillAt::AfterMs(ms) => Trigger::After(Duration::from_millis(ms)),
                            KillAt::ContainerRunning => Trigger::ContainerRunning,
                            _ => Trigger::CandidateWritten {
                                dir: cand.clone(),
                                existing: HashSet::new(),
                            },
                        },
                    )
                });
                let dk = docker_kills_for(&fired, &claimed);
                let dk_ms: Vec<u64> = dk.iter().map(|(_, ms)| *ms).collect();
                let restart = restart_for(&fired, &claimed);
                let out = run_step(
                    Step {
                        label: format!("{tag}-worker"),
                        program: bin("worker"),
                        args,
                        env: clock_env.clone(),
                        logs: &logs,
                        deadline: Duration::from_secs(300),
                    },
                    trigger,
                    &dk_ms,
                    (restart.is_some() && opts.schedule.docker_restart)
                        .then(|| dockerd_log.clone()),
                    None,
                    &mut pids,
                )
                .await?;
                if let Some((i, _, _)) = wk {
                    fired[i].1 |= out.fired;
                }
                for ((i, _), ok) in dk.iter().zip(&out.docker_kills_fired) {
                    fired[*i].1 |= *ok;
                }
                if let (Some(i), Some(ok)) = (restart, out.docker_kills_fired.get(dk.len())) {
                    fired[i].1 |= *ok;
                }
                if let Some(h) = out.hung.clone() {
                    hung.push(format!("cycle {cycle}: {h}"));
                }
                steps.push(format!(
                    "{tag} worker: exit {:?}{}",
                    out.code,
                    killed_note(&out)
                ));
                // What the worker decided, job by job.
                let rows = out
                    .report
                    .as_ref()
                    .and_then(|r| r.get("jobs"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for b in bounties.iter_mut().filter(|b| b.lane == lane.name) {
                    let file = cand.join(candidate_file_name(&b.job_id));
                    if let Some(verdict) = std::fs::read(&file)
                        .ok()
                        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                        .and_then(|c| {
                            c.pointer("/outcome/verdict")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                    {
                        b.verdicts.push(verdict);
                    }
                    b.last_status = rows
                        .iter()
                        .find(|r| {
                            r.get("job_id").and_then(Value::as_str) == Some(b.job_id.as_str())
                        })
                        .and_then(|r| r.get("status").and_then(Value::as_str).map(str::to_owned));
                }
            }

            // signer sign, as each verifier of the lane
            for (slot, key) in lane.keys.iter().enumerate() {
                let target = if *key == VERIFIER_KEYS[0] {
                    Target::Signer1
                } else {
                    Target::Signer2
                };
                let signer = dev_signer(*key)?;
                init_signer_history(&bin("signer"), &att[slot], signer.address())?;
                let mut args = signer_sign_args(
                    &cand,
                    server.url(),
                    proxy.url(),
                    signer.address(),
                    &att[slot],
                );
                failing_first(&mut args, failing_url.as_deref());
                let sk = kill_for(target, &fired, &claimed);
                let out = run_step(
                    Step {
                        label: format!("{tag}-{}", target.name()),
                        program: bin("signer"),
                        args,
                        env: std::iter::once((
                            VERIFIER_KEY_ENV,
                            DEV_KEYS.get(*key).copied().unwrap_or_default().to_owned(),
                        ))
                        .chain(clock_env.iter().cloned())
                        .collect(),
                        logs: &logs,
                        deadline: Duration::from_secs(180),
                    },
                    sk.map(|(_, sig, at)| {
                        let d = match at {
                            KillAt::AfterMs(ms) => ms,
                            _ => 100,
                        };
                        (sig, Trigger::After(Duration::from_millis(d)))
                    }),
                    &[],
                    None,
                    None,
                    &mut pids,
                )
                .await?;
                if let Some((i, _, _)) = sk {
                    fired[i].1 |= out.fired;
                }
                if let Some(h) = out.hung.clone() {
                    hung.push(format!("cycle {cycle}: {h}"));
                }
                steps.push(format!(
                    "{tag} {}: exit {:?}{}",
                    target.name(),
                    out.code,
                    killed_note(&out)
                ));
            }

            // keeper relay
            let mut args = keeper_relay_args(&cand, &att, server.url(), proxy.url(), &keeper_state);
            failing_first(&mut args, failing_url.as_deref());
            args.extend([s("--receipt-timeout"), s(30)]);
            let kk = kill_for(Target::Keeper, &fired, &claimed);
            let mut release = None;
            let trigger = kk.map(|(_, sig, at)| match at {
                KillAt::Broadcast => {
                    let (f, r) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
                    proxy.arm_broadcast(f.clone(), r.clone());
                    release = Some(r);
                    (sig, Trigger::Broadcast(f))
                }
                KillAt::AfterMs(ms) => (sig, Trigger::After(Duration::from_millis(ms))),
                _ => (sig, Trigger::After(Duration::from_millis(200))),
            });
            let out = run_step(
                Step {
                    label: format!("{tag}-keeper"),
                    program: bin("keeper"),
                    args,
                    env: std::iter::once((KEEPER_KEY_ENV, keeper_key.clone()))
                        .chain(clock_env.iter().cloned())
                        .collect(),
                    logs: &logs,
                    deadline: Duration::from_secs(240),
                },
                trigger,
                &[],
                None,
                release,
                &mut pids,
            )
            .await?;
            proxy.disarm_broadcast();
            if let Some((i, _, _)) = kk {
                fired[i].1 |= out.fired;
            }
            if let Some(h) = out.hung.clone() {
                hung.push(format!("cycle {cycle}: {h}"));
            }
            let statuses: Vec<String> = out
                .report
                .as_ref()
                .and_then(|r| r.get("jobs"))
                .and_then(Value::as_array)
                .map(|jobs| {
                    jobs.iter()
                        .filter_map(|j| j.get("status").and_then(Value::as_str).map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            steps.push(format!(
                "{tag} keeper: exit {:?}{} {statuses:?}",
                out.code,
                killed_note(&out)
            ));
        }

        // The services stop with the cycle (SIGTERM, as `systemctl stop` sends).
        for (tag, wk, dk, restart, sup) in serving {
            let out = sup.stop().await?;
            add_pids(&out, &mut pids);
            if let Some(i) = wk {
                fired[i].1 |= out.fired;
            }
            for ((i, _), ok) in dk.iter().zip(&out.docker_kills_fired) {
                fired[*i].1 |= *ok;
            }
            if let (Some(i), Some(ok)) = (restart, out.docker_restart_fired) {
                fired[i].1 |= ok;
            }
            if let Some(h) = &out.hung {
                hung.push(format!("cycle {cycle}: {h}"));
            }
            if out.stopped_for_good {
                serve_stopped_for_good.push(format!("cycle {cycle}: {tag}-serve"));
            }
            let killed = if out.fired {
                format!(" after a kill (killed run exit {:?})", out.killed_code)
            } else {
                String::new()
            };
            steps.push(format!(
                "{tag} serve: stopped, exit {:?}{killed}, {} start(s), crash exits {:?}",
                out.stop_code,
                out.pids.len(),
                out.crashes
            ));
        }
        if let Some((i, stepped, task)) = clock_task {
            task.abort();
            fired[i].1 = stepped.load(std::sync::atomic::Ordering::Relaxed);
            if let Some(c) = &clock {
                c.set(0)?;
            }
        }
        // The cycle's faults end with it.
        server.set_mode(None);
        proxy.set_mode(None);
        for fs in [&stage_fs, &state_fs].into_iter().flatten() {
            fs.release();
        }
        cycle += 1;
        if !chaos {
            let mut settled_all = true;
            for b in &bounties {
                if b.kind != BountyKind::WrongImage
                    && b.deployed.status().await? == status::SUBMITTED
                {
                    settled_all = false;
                }
            }
            if settled_all || cycle >= schedule.chaos_cycles + opts.max_drain_cycles {
                break;
            }
        }
    }

    // What each service's ledger says, once every service has stopped.
    for lane in lanes.iter().filter(|l| l.runner == Runner::Serve) {
        let state = serve_dirs(lane.name).state;
        let ledger = read_ledger(&bin("worker"), &state)
            .await
            .ok_or(E2eError::Setup {
                what: "read a serve lane's ledger after the drain",
                detail: format!("`worker ledger --state {} --json` failed", state.display()),
            })?;
        // Kept beside the logs: the state tmpfs goes with the run.
        let dump = logs.join(format!("serve-{}-ledger.json", lane.name));
        std::fs::write(&dump, ledger.to_string()).map_err(io("write a ledger copy", &dump))?;
        for b in bounties.iter_mut().filter(|b| b.lane == lane.name) {
            let lj = ledger_job(&ledger, &b.job_id);
            b.verdicts.extend(lj.verdicts.iter().cloned());
            b.last_status.clone_from(&lj.status);
            b.ledger = Some(lj);
        }
    }

    // Observations.
    let provider = kit.provider();
    let chain_now = kit.latest_timestamp().await?;
    let mut obs = Observations::default();
    for (index, b) in bounties.iter().enumerate() {
        let filter = Filter::new()
            .address(b.deployed.address())
            .from_block(start_block);
        let logs = provider
            .get_logs(&filter)
            .await
            .map_err(|e| E2eError::Mismatch(format!("eth_getLogs: {e}")))?;
        let (mut settled, mut rejected) = (0, 0);
        let mut settled_block = None;
        for l in &logs {
            match decode_settlement_event(l.topics(), &l.data().data) {
                Some(Ok(SettlementEvent::Settled(_))) => {
                    settled += 1;
                    settled_block = settled_block.or(l.block_number);
                }
                Some(Ok(SettlementEvent::Rejected(_))) => rejected += 1,
                _ => {}
            }
        }
        let settled_at = match settled_block {
            Some(n) => Some(
                provider
                    .get_block_by_number(n.into())
                    .await
                    .map_err(|e| E2eError::Mismatch(format!("eth_getBlockByNumber: {e}")))?
                    .ok_or_else(|| E2eError::Mismatch(format!("block {n} not found")))?
                    .header
                    .timestamp,
            ),
            None => None,
        };
        let after = kit.balance(b.solver).await?;
        obs.bounties.push(BountyObservation {
            index,
            kind: b.kind,
            settled_events: settled,
            rejected_events: rejected,
            solver_gain: u128::try_from(after.saturating_sub(b.balance_before))
                .unwrap_or(u128::MAX),
            reward: u128::try_from(b.reward).unwrap_or(u128::MAX),
            verdicts: b.verdicts.clone(),
            last_status: b.last_status.clone(),
            // The next block carries at least the wall clock (the node mines only on demand, so
            // the last block's time can be minutes old).
            window_open: b.expires_at > chain_now.max(wall_clock()),
            ledger: b.ledger.clone(),
            settled_at,
            expires_at: b.expires_at,
        });
    }
    let end_block = provider
        .get_block_number()
        .await
        .map_err(|e| E2eError::Mismatch(format!("eth_blockNumber: {e}")))?;
    let keeper_lc = keeper_addr.to_string().to_lowercase();
    for n in start_block..=end_block {
        let block: Value = provider
            .raw_request("eth_getBlockByNumber".into(), (format!("0x{n:x}"), true))
            .await
            .map_err(|e| E2eError::Mismatch(format!("eth_getBlockByNumber {n}: {e}")))?;
        let txs = block
            .get("transactions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for tx in txs {
            let from = tx
                .get("from")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_lowercase();
            if from != keeper_lc {
                continue;
            }
            let hash = tx
                .get("hash")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let receipt: Value = provider
                .raw_request("eth_getTransactionReceipt".into(), (hash.clone(),))
                .await
                .map_err(|e| E2eError::Mismatch(format!("eth_getTransactionReceipt: {e}")))?;
            let succeeded = receipt.get("status").and_then(Value::as_str) == Some("0x1");
            obs.keeper_txs.push(KeeperTx { hash, succeeded });
        }
    }
    obs.leftover_containers = containers_of(&pids)
        .await
        .into_iter()
        .map(|(id, st)| format!("{id} ({st})"))
        .collect();
    let mut keys: Vec<String> = VERIFIER_KEYS
        .iter()
        .filter_map(|k| DEV_KEYS.get(*k))
        .map(|k| key_hex(k))
        .collect();
    keys.push(key_hex(&keeper_key));
    scan_files(&work, &work, &keys, &mut obs);
    obs.log_problems = crate::logscan::chaos_log_problems(&logs);
    obs.hung_steps = hung;
    obs.serve_stopped_for_good = serve_stopped_for_good;
    let violations = check(&obs);
    if let Some((li, _)) = &late_image {
        li.forget().await;
    }
    drop(stage_fs);
    drop(state_fs);
    drop(workdir);
    Ok(RunResult {
        options: *opts,
        schedule,
        fired,
        observations: obs,
        violations,
        cycles: cycle,
        elapsed: started.elapsed(),
        steps,
    })
}

/// Every file under `dir`: a key's hex in it is a leak; a panic in a log is a bug.
fn scan_files(root: &Path, dir: &Path, keys: &[String], obs: &mut Observations) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            scan_files(root, &path, keys, obs);
            continue;
        }
        if !meta.is_file() || path.file_name().is_some_and(|n| n == ".chaos-fill") {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let lower = bytes.to_ascii_lowercase();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        if keys.iter().any(|k| contains(&lower, k.as_bytes())) {
            obs.key_leaks.push(rel.clone());
        }
        if rel.ends_with(".stderr") {
            let text = String::from_utf8_lossy(&bytes);
            if let Some(line) = text.lines().find(|l| l.contains("panicked at")) {
                obs.panics.push(format!("{rel}: {line}"));
            }
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failing endpoint goes first, so every request meets it before the working one; the
    /// replay command names the lane.
    #[test]
    fn the_failing_endpoint_is_put_before_the_working_one() {
        let mut args: Vec<String> = ["sign", "--api", "A", "--rpc", "P", "--json"]
            .map(String::from)
            .to_vec();
        failing_first(&mut args, Some("F"));
        assert_eq!(
            args,
            ["sign", "--api", "A", "--rpc", "F", "--rpc", "P", "--json"]
        );
        let mut o = ChaosOptions::new(3);
        o.failing_rpc = FailingRpc::parse("rate-limited");
        assert!(o.replay_command().ends_with(" --failing-rpc rate-limited"));
        assert_eq!(FailingRpc::parse("slow"), None);
    }

    #[test]
    fn the_file_scan_finds_a_key_in_any_case_and_a_panic_in_a_log() {
        let dir = std::env::temp_dir().join(format!("chaos-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("logs/deep")).unwrap();
        let key = key_hex(DEV_KEYS[3]);
        std::fs::write(dir.join("logs/clean.stderr"), "nothing to see\n").unwrap();
        std::fs::write(
            dir.join("logs/deep/leak.json"),
            format!("{{\"k\":\"0x{}\"}}", key.to_ascii_uppercase()),
        )
        .unwrap();
        std::fs::write(
            dir.join("logs/c0-worker.stderr"),
            "thread 'main' panicked at src/x.rs:1:1:\n",
        )
        .unwrap();
        let mut obs = Observations::default();
        scan_files(&dir, &dir, &[key], &mut obs);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(obs.key_leaks, vec!["logs/deep/leak.json".to_owned()]);
        assert_eq!(obs.panics.len(), 1, "{:?}", obs.panics);
        assert!(obs.panics[0].starts_with("logs/c0-worker.stderr: "));
    }
}
