//! The fault chaos seed 4 found in `worker serve` (lanes without `--pull`), replayed without
//! the luck of the job order: a service whose first due jobs pin an image digest that is
//! not on the host. Without `--pull` a missing image is a *host* failure, so the host backs
//! off and then probes one job at a time; if the probe is always the first due job, the job
//! behind it (a good solution, image present) never runs. [`play`] lists two absent-image
//! jobs and then one good job, runs `worker serve --parallel 2` and reports whether the good
//! job got its candidate within [`WAIT`].

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use alloy::primitives::keccak256;
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{Testkit, dev_signer};
use serde_json::Value;
use verifier_sdk::fixtures::{BENCHMARK_COMMIT, JobParams};

use super::inject::{FaultyServer, sigterm};
use super::ledger::read_ledger;
use crate::server::codeload_archive;
use crate::{
    BENCHMARK_SUBDIR, E2eConfig, E2eError, VERIFIER_KEYS, deploy_for_job, fresh_dir, io, manifest,
    s, tree_digest, tree_files, wall_clock,
};

/// How long the good job may take: generous for a six-test Python run on a loaded machine,
/// and far beyond the 1+2+4+8 s of host back-off a healthy probe order would cost.
pub const WAIT: Duration = Duration::from_secs(120);

/// What happened.
#[derive(Debug)]
pub struct Outcome {
    /// With a clock step: whether the first absent-image job ran again within [`WAIT`]
    /// after the clock stepped back to the real time (its back-off is 1 s, then 2 s, …).
    pub retried_after_step: Option<bool>,
    /// The good job's candidate is listed by `out/manifest.json`.
    pub good_done: bool,
    /// Runs the service made of each job, in feed order (absent, absent, good).
    pub runs: Vec<usize>,
    /// The service's log.
    pub log: PathBuf,
}

/// Plays it once; `pull` passes `--pull` (the unit's default), which makes the missing
/// image the job's own failure instead of the host's. With `ahead_s`, the service starts on
/// a wall clock that many seconds ahead (libfaketime); once the first absent-image job's
/// run (a failure of its own, with `--pull`) has ended, the clock steps back to the real
/// time, and the outcome says whether that job is retried within [`WAIT`].
// One function on purpose: deploy, feed, service, wait and ledger read as the one scenario.
#[allow(clippy::too_many_lines)]
pub async fn play(cfg: &E2eConfig, pull: bool, ahead_s: Option<i64>) -> Result<Outcome, E2eError> {
    let work = cfg.work_dir.join(match (pull, ahead_s) {
        (_, Some(_)) => "absent-image-clock",
        (true, None) => "absent-image-pull",
        (false, None) => "absent-image",
    });
    fresh_dir(&work)?;
    let kit = Testkit::connect().await?;
    let fixtures = cfg.repo_root.join("fixtures/python-bounty");
    let benchmark = fixtures.join("benchmark");
    let benchmark_digest = tree_digest(&benchmark)?;
    let solution = fixtures.join("solution-good");
    let source_digest = tree_digest(&solution)?;
    let commit: String = source_digest
        .to_string()
        .trim_start_matches("sha256:")
        .chars()
        .take(40)
        .collect();
    let repo = "roman-solution-good";
    let verifier = dev_signer(VERIFIER_KEYS[0])?.address();
    let base = cfg
        .python_image
        .split('@')
        .next()
        .unwrap_or(&cfg.python_image);
    let now = kit.latest_timestamp().await?.max(wall_clock());
    let mut jobs = Vec::new();
    let mut ids = Vec::new();
    for (i, tag) in ["absent-1", "absent-2", "good"].iter().enumerate() {
        let image = if *tag == "good" {
            cfg.python_image.clone()
        } else {
            let digest = keccak256(format!("absent image {tag}"));
            format!("{base}@sha256:{}", alloy::hex::encode(digest))
        };
        let solver = PrivateKeySigner::random().address();
        let mut jp = JobParams {
            bounty_id: keccak256(format!("absent-image:{i}:{now}:{solver}")).to_string(),
            round: 1,
            solver: solver.to_string(),
            verifiers: vec![verifier.to_string().to_lowercase()],
            expires_at: now + 3600,
            artifact_reference: format!("https://github.com/solver-org/{repo}/commit/{commit}"),
            source_snapshot_digest: source_digest.to_string(),
            manifest: manifest(&image, benchmark_digest),
            ..JobParams::default()
        };
        let (_, _, job, validated) =
            deploy_for_job(&kit, &mut jp, solver, &[verifier], 1, now).await?;
        ids.push(validated.job_id().to_owned());
        jobs.push(job);
    }
    let server = FaultyServer::start(&Value::Array(jobs), 0).await?;
    let archive = |name: &str, sub: &str, dir: &std::path::Path| {
        codeload_archive(name, sub, &tree_files(dir)?).map_err(|e| E2eError::Setup {
            what: "build a tar.gz archive",
            detail: e.to_string(),
        })
    };
    server.add(
        &format!("/solver-org/{repo}/tar.gz/{commit}"),
        archive(&format!("{repo}-{commit}"), "", &solution)?,
    );
    server.add(
        &format!("/bounty-org/benchmarks/tar.gz/{BENCHMARK_COMMIT}"),
        archive(
            &format!("benchmarks-{BENCHMARK_COMMIT}"),
            BENCHMARK_SUBDIR,
            &benchmark,
        )?,
    );
    let dirs = ["state", "out", "staging", "scratch"].map(|d| work.join(d));
    for d in &dirs {
        std::fs::create_dir_all(d).map_err(io("create a service directory", d))?;
    }
    let [state, out, staging, scratch] = &dirs;
    let mut args = vec![
        s("serve"),
        s("--api"),
        server.url().to_owned(),
        s("--verifier"),
        verifier.to_string(),
        s("--archive-base"),
        server.url().to_owned(),
        s("--out"),
        s(out.display()),
        s("--state"),
        s(state.display()),
        s("--staging-root"),
        s(staging.display()),
        s("--work-dir"),
        s(scratch.display()),
        s("--poll-interval"),
        s(1),
        // Both absent-image jobs start first, whatever the host's cores.
        s("--parallel"),
        s(2),
    ];
    if pull {
        args.push(s("--pull"));
    }
    let clock = match ahead_s {
        Some(s) => {
            let c = super::clock::FakeClock::new(&work.join("clock-offset"))?;
            c.set(s)?;
            Some(c)
        }
        None => None,
    };
    let log = work.join("serve.stderr");
    let stderr = std::fs::File::create(&log).map_err(io("create a log", &log))?;
    let worker = cfg.bin_dir.join("worker");
    let mut child = tokio::process::Command::new(&worker)
        .args(&args)
        .envs(crate::logscan::JSON_LOG_ENV)
        .envs(
            clock
                .as_ref()
                .map(super::clock::FakeClock::env)
                .unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .map_err(io("start worker serve", &worker))?;
    let started = Instant::now();
    let good = ids.get(2).cloned().unwrap_or_default();
    let absent = ids.first().cloned().unwrap_or_default();
    let runs_of = |l: &Value, id: &str| {
        l.get("runs").and_then(Value::as_array).map_or(0, |r| {
            r.iter()
                .filter(|r| {
                    r.get("job_id").and_then(Value::as_str) == Some(id)
                        && r.get("ended_at").is_some_and(|e| !e.is_null())
                })
                .count()
        })
    };
    let mut retried_after_step = None;
    if let Some(c) = &clock {
        // The first run of the absent-image job ends (its own failure), then the step back.
        let mut before = None;
        while started.elapsed() < WAIT && before.is_none() {
            if let Some(l) = read_ledger(&worker, state).await {
                before = Some(runs_of(&l, &absent)).filter(|n| *n > 0);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        c.set(0)?;
        let stepped = Instant::now();
        let mut again = false;
        while let Some(n) = before {
            if stepped.elapsed() >= WAIT {
                break;
            }
            if read_ledger(&worker, state)
                .await
                .is_some_and(|l| runs_of(&l, &absent) > n)
            {
                again = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        retried_after_step = Some(again);
    }
    let mut good_done = false;
    while started.elapsed() < WAIT {
        if crate::dedicated::manifest_lists(out, &good) {
            good_done = true;
            break;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if let Some(pid) = child.id() {
        sigterm(pid);
    }
    let _ = tokio::time::timeout(Duration::from_secs(40), child.wait()).await;
    let _ = child.start_kill();
    let ledger = read_ledger(&worker, state).await;
    let runs = ids
        .iter()
        .map(|id| {
            ledger.as_ref().map_or(0, |l| {
                l.get("runs").and_then(Value::as_array).map_or(0, |r| {
                    r.iter()
                        .filter(|r| r.get("job_id").and_then(Value::as_str) == Some(id))
                        .count()
                })
            })
        })
        .collect();
    if let Some(l) = &ledger {
        let copy = work.join("ledger.json");
        std::fs::write(&copy, l.to_string()).map_err(io("write a ledger copy", &copy))?;
    }
    Ok(Outcome {
        retried_after_step,
        good_done,
        runs,
        log,
    })
}
