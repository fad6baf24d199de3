//! The dedicated-host route to a signature (docs/operations.md, "A dedicated host"), played
//! on the local services: `worker serve` (the worker host) runs the bounty's job and writes
//! its candidate to `--out`; the signer host pulls that directory read-only with
//! `deploy/pull-candidates.sh` through an `rrsync -ro` forced command (here
//! `deploy/tests/forced-command-ssh.sh` stands in for ssh, so rrsync's own restriction is what
//! is exercised); `signer sign` (both verifiers) and `keeper relay` read only the pulled copy;
//! the chain must end in `BountySettled` paying the solver.
//!
//! Unlike [`crate::run_scenario`], the keeper pays gas from a fresh random key funded for
//! this run, so this test shares no sending account (and no nonce) with any other.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use alloy::primitives::{U256, keccak256};
use alloy::signers::local::PrivateKeySigner;
use chain_testkit::{Testkit, status};
use serde_json::Value;
use verifier_sdk::fixtures::JobParams;
use verifier_sdk::settle::SettlementEvent;

use crate::{
    E2eConfig, E2eError, Scenario, ScenarioResult, VERIFIER_KEYS, archive_commit, deploy_for_job,
    fresh_dir, info, io, job_params, keeper_relay_args, manifest, piped_command, relay_first_job,
    s, serve_job_archives, settlement_events, sign_as_dev_key, stderr_path, step, tree_digest,
    verifier_addresses, wall_clock, worker_feed_args,
};

/// How long `worker serve` may take to produce the candidate (image start, a six-test
/// Python run) on a loaded two-core machine; the wait ends as soon as it is there.
const SERVE_DEADLINE: Duration = Duration::from_secs(300);
/// How long the stopped service may take to exit (it kills its container within 30 s).
const STOP_DEADLINE: Duration = Duration::from_secs(60);
/// How often the candidates manifest is looked at while waiting.
const POLL: Duration = Duration::from_millis(200);

/// The `worker serve` child, killed if the test ends early.
struct Service {
    child: tokio::process::Child,
    stderr: PathBuf,
}

impl Service {
    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGTERM, as systemd's stop does, then waits for the exit.
    async fn stop(mut self) -> Result<Option<i32>, E2eError> {
        let fail = |detail: String| E2eError::Step {
            step: "worker serve (stop)".into(),
            code: None,
            detail,
        };
        if let Some(pid) = self.child.id() {
            let sent = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await
                .map_err(|e| fail(format!("could not run kill: {e}")))?;
            if !sent.success() {
                return Err(fail(format!("kill -TERM {pid} failed")));
            }
        }
        let status = tokio::time::timeout(STOP_DEADLINE, self.child.wait())
            .await
            .map_err(|_| fail(format!("no exit within {STOP_DEADLINE:?} of SIGTERM")))?
            .map_err(|e| fail(e.to_string()))?;
        Ok(status.code())
    }
}

/// Runs a shell script of the repository; returns its stdout.
async fn run_script(
    label: &str,
    program: &Path,
    args: &[String],
    env: &[(&str, &Path)],
) -> Result<String, E2eError> {
    let mut cmd = piped_command(program, args, env.iter().copied());
    let fail = |code, detail| E2eError::Step {
        step: label.to_owned(),
        code,
        detail,
    };
    let output = tokio::time::timeout(super::STEP_TIMEOUT, cmd.output())
        .await
        .map_err(|_| fail(None, "no exit in time".into()))?
        .map_err(|e| fail(None, format!("could not start {}: {e}", program.display())))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(fail(
            output.status.code(),
            format!("{}{stdout}", String::from_utf8_lossy(&output.stderr)),
        ));
    }
    Ok(stdout)
}

/// Whether `dir/manifest.json` lists `job_id` and its candidate file is there.
pub(crate) fn manifest_lists(dir: &Path, job_id: &str) -> bool {
    let Ok(bytes) = std::fs::read(dir.join("manifest.json")) else {
        return false;
    };
    let Ok(manifest) = serde_json::from_slice::<Value>(&bytes) else {
        return false;
    };
    manifest
        .get("candidates")
        .and_then(Value::as_array)
        .is_some_and(|entries| {
            entries.iter().any(|e| {
                e.get("job_id").and_then(Value::as_str) == Some(job_id)
                    && e.get("file")
                        .and_then(Value::as_str)
                        .is_some_and(|f| dir.join(f).is_file())
            })
        })
}

/// Plays one passing bounty through the dedicated-host route; errors unless the chain ends
/// in `BountySettled` for it with the solver paid.
// One function on purpose, like `run_scenario`: it reads top to bottom as the route it plays.
#[allow(clippy::too_many_lines)]
pub async fn run_dedicated_route(cfg: &E2eConfig) -> Result<ScenarioResult, E2eError> {
    let started = Instant::now();
    let mut timings = Vec::new();
    let mut lap = Instant::now();
    let mut mark = |name: &str| {
        timings.push((name.to_owned(), lap.elapsed()));
        lap = Instant::now();
    };
    let work = cfg.work_dir.join("dedicated");
    fresh_dir(&work)?;
    let fixtures = cfg.repo_root.join("fixtures/python-bounty");
    let solution = fixtures.join(Scenario::Settled.solution_dir());
    let benchmark = fixtures.join("benchmark");
    let pull_script = cfg.repo_root.join("deploy/pull-candidates.sh");
    let forced_ssh = cfg.repo_root.join("deploy/tests/forced-command-ssh.sh");
    for tool in ["rsync", "rrsync"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(tool).is_file()));
        if !found {
            return Err(E2eError::Setup {
                what: "find the pull route's tools",
                detail: format!(
                    "{tool} is not installed (Debian package rsync; deploy/tests/run.sh installs it)"
                ),
            });
        }
    }

    step("[dedicated] deploy TestBounty for solution-good (verifiers = dev keys 1, 2)");
    let source_digest = tree_digest(&solution)?;
    let benchmark_digest = tree_digest(&benchmark)?;
    let kit = Testkit::connect().await?;
    let now = kit.latest_timestamp().await?.max(wall_clock());
    let verifiers = verifier_addresses()?;
    let solver = PrivateKeySigner::random().address();
    let bounty_id = keccak256(format!("e2e:dedicated:{now}:{solver}"));
    let commit = archive_commit(&source_digest);
    let repo = "roman-dedicated";
    let mut jp = JobParams {
        manifest: manifest(&cfg.python_image, benchmark_digest),
        ..job_params(
            bounty_id,
            solver,
            &verifiers,
            now,
            repo,
            &commit,
            &source_digest,
        )
    };
    let (params, bounty, job, validated) =
        deploy_for_job(&kit, &mut jp, solver, &verifiers, 2, now).await?;
    let job_id = validated.job_id().to_owned();
    let solver_balance_before = kit.balance(solver).await?;
    info(&format!("bounty   {}", bounty.address()));
    info(&format!("job id   {job_id}"));

    let server = serve_job_archives(job, repo, &commit, &solution, &benchmark).await?;
    mark("deploy");

    // The worker host: its own directories, as the unit names them; nothing of the signer's.
    let worker_host = work.join("worker-host");
    let out = worker_host.join("out");
    step("[dedicated] worker host: worker serve writes the candidate to --out");
    let mut args = worker_feed_args("serve", server.url(), &verifiers);
    args.extend([
        s("--archive-base"),
        server.url().to_owned(),
        s("--out"),
        s(out.display()),
        s("--state"),
        s(worker_host.join("state").display()),
        s("--staging-root"),
        s(worker_host.join("staging").display()),
        s("--work-dir"),
        s(worker_host.join("work").display()),
        s("--poll-interval"),
        s(1),
    ]);
    info(&format!("$ worker {}", args.join(" ")));
    std::fs::create_dir_all(&worker_host)
        .map_err(io("create the worker host directory", &worker_host))?;
    let stderr_path = stderr_path("worker serve", worker_host.join("serve.log"));
    let stderr =
        std::fs::File::create(&stderr_path).map_err(io("create the serve log", &stderr_path))?;
    let child = tokio::process::Command::new(cfg.bin_dir.join("worker"))
        .args(&args)
        .envs(crate::logscan::JSON_LOG_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| E2eError::Step {
            step: "worker serve".into(),
            code: None,
            detail: format!("could not start: {e}"),
        })?;
    let mut service = Service {
        child,
        stderr: stderr_path,
    };
    let deadline = Instant::now() + SERVE_DEADLINE;
    loop {
        if manifest_lists(&out, &job_id) {
            break;
        }
        if let Some(exit) = service.child.try_wait().map_err(|e| E2eError::Step {
            step: "worker serve".into(),
            code: None,
            detail: e.to_string(),
        })? {
            return Err(E2eError::Step {
                step: "worker serve".into(),
                code: exit.code(),
                detail: format!(
                    "exited before writing the candidate:\n{}",
                    service.stderr_tail()
                ),
            });
        }
        if Instant::now() > deadline {
            return Err(E2eError::Step {
                step: "worker serve".into(),
                code: None,
                detail: format!(
                    "no candidate for {job_id} in {} within {SERVE_DEADLINE:?}:\n{}",
                    out.display(),
                    service.stderr_tail()
                ),
            });
        }
        tokio::time::sleep(POLL).await;
    }
    info(&format!(
        "{} lists the candidate",
        out.join("manifest.json").display()
    ));
    mark("worker serve");

    // The signer host pulls while the service still runs, as it would in production.
    step("[dedicated] signer host: pull-candidates.sh through an rrsync -ro forced command");
    let signer_host = work.join("signer-host");
    let pulled = signer_host.join("candidates");
    let summary = run_script(
        "pull-candidates.sh",
        &pull_script,
        &[
            s("--from"),
            s("worker-host:"),
            s("--to"),
            s(pulled.display()),
        ],
        &[
            ("RSYNC_RSH", forced_ssh.as_path()),
            ("FORCED_RRSYNC_DIR", out.as_path()),
        ],
    )
    .await?;
    info(summary.trim());
    if !summary.starts_with("pulled 1 of 1 listed candidate(s)") {
        return Err(E2eError::Step {
            step: "pull-candidates.sh".into(),
            code: Some(0),
            detail: format!("expected the one candidate: {summary}"),
        });
    }
    let code = service.stop().await?;
    info(&format!("worker serve stopped (SIGTERM), exit {code:?}"));
    if code != Some(0) {
        return Err(E2eError::Step {
            step: "worker serve".into(),
            code,
            detail: "a SIGTERM must end the service with exit 0".into(),
        });
    }
    mark("pull");

    let bin = |name: &str| cfg.bin_dir.join(name);
    let mut attestation_dirs = Vec::new();
    for key in VERIFIER_KEYS {
        step(&format!(
            "[dedicated] signer sign the pulled copy as verifier dev key {key}"
        ));
        let att = signer_host.join(format!("att-{key}"));
        let report = sign_as_dev_key(
            &bin("signer"),
            key,
            &pulled,
            (server.url(), kit.url()),
            &att,
        )
        .await?;
        if report.get("signed").and_then(Value::as_u64) != Some(1) {
            return Err(E2eError::Step {
                step: "signer sign".into(),
                code: Some(0),
                detail: format!("expected one signature: {report}"),
            });
        }
        info("signed 1");
        attestation_dirs.push(att);
    }
    mark("signer sign (2 keys)");

    step("[dedicated] keeper relay from the pulled copy (a fresh funded gas key)");
    let keeper = PrivateKeySigner::random();
    kit.set_balance(keeper.address(), U256::from(10u128.pow(21)))
        .await?;
    let keeper_key = keeper.to_bytes().to_string();
    let args = keeper_relay_args(
        &pulled,
        &attestation_dirs,
        server.url(),
        kit.url(),
        &signer_host.join("keeper-state"),
    );
    let (_, tx_hash) = relay_first_job(&bin("keeper"), &args, &keeper_key).await?;
    info(&format!("keeper: tx {tx_hash}"));
    mark("keeper relay");

    step("[dedicated] read the result back from the chain");
    let events = settlement_events(&kit, tx_hash, bounty.address()).await?;
    let [event @ SettlementEvent::Settled(ev)] = events.as_slice() else {
        return Err(E2eError::Mismatch(format!(
            "expected one BountySettled from the bounty in {tx_hash}, found {events:?}"
        )));
    };
    if ev.bountyId != params.bounty_id || ev.round != params.round || ev.solver != solver {
        return Err(E2eError::Mismatch(format!(
            "BountySettled does not match the bounty: {ev:?}"
        )));
    }
    let chain_status = bounty.status().await?;
    if chain_status != status::SETTLED {
        return Err(E2eError::Mismatch(format!(
            "status is {chain_status}, expected {} (Settled)",
            status::SETTLED
        )));
    }
    let solver_balance_after = kit.balance(solver).await?;
    if solver_balance_after != solver_balance_before + params.reward {
        return Err(E2eError::Mismatch(format!(
            "solver balance {solver_balance_after}, expected {solver_balance_before} + {}",
            params.reward
        )));
    }
    info(&format!(
        "BountySettled: bountyId {} round {} solver {}; status {chain_status} (Settled); solver received {} wei",
        ev.bountyId, ev.round, ev.solver, params.reward
    ));
    mark("read back");
    timings.push(("total".into(), started.elapsed()));
    Ok(ScenarioResult {
        scenario: Scenario::Settled,
        bounty: bounty.address(),
        tx_hash,
        status: chain_status,
        event: event.clone(),
        timings,
    })
}
