//! `worker serve` and `worker ledger`.
//!
//! `serve` exits 0 after a SIGTERM/SIGINT shutdown (the running container killed and removed,
//! the run recorded as interrupted), 78 on configuration a restart cannot fix (bad URL or
//! verifier set, unusable staging, state or output directory, a corrupt ledger or one from a
//! newer worker), and 1 on failures a restart may fix (engine unreachable, the state
//! directory held by another `worker serve`, the ledger busy past its timeout or its disk
//! full, a ledger write failed). A feed that does not answer is not a failure: the service
//! keeps polling and counts the failed polls. Every exit removes this process's containers.
//!
//! `ledger` exits 0, 78 when the state directory holds no usable ledger, and 1 when
//! `--retry` re-queued nothing or the ledger could not be read or written.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{fail, print_json, print_text};
use crate::cli::{LedgerAction, ServeArgs};
use crate::exit::ExitCode;
use worker_jobs::feed::FeedConfig;
use worker_serve::clock::{ChainAligned, Clock, SystemClock};
use worker_serve::http;
use worker_serve::ledger::{
    CandidateEntry, Heartbeat, JobEntry, LEDGER_FILE, Ledger, Requeued, RunEntry,
};
use worker_serve::shutdown::Shutdown;
use worker_serve::store::{FleetOptions, LedgerLocation};
use worker_serve::telemetry::Telemetry;
use worker_serve::timefmt::{human_duration, iso_utc};
use worker_serve::{Prepared, ServeConfig, ServeError, prepare};

/// `schema_version` of `worker ledger --json`.
pub const LEDGER_SCHEMA_VERSION: &str = "agent-bounties/worker-ledger-v1";
use worker_store::staging_root::{self, Fallback};

/// Runs the service until a signal or a failure.
pub fn serve(args: &ServeArgs) -> ExitCode {
    let staging_root =
        match staging_root::resolve(args.run.staging_root.as_deref(), Fallback::Required)
            .and_then(|root| staging_root::ensure_writable(&root).map(|()| root))
        {
            Ok(root) => root,
            Err(error) => return fail(ExitCode::Config, &error),
        };
    let mut config = match serve_config(args) {
        Ok(config) => config,
        Err(error) => return fail(ExitCode::Config, &error),
    };
    // The lock lives to the end of this function: the whole life of the service.
    let Prepared {
        ledger,
        lock: _lock,
    } = match prepare(&config) {
        Ok(prepared) => prepared,
        Err(error) => return served(Err(error)),
    };
    let listener = match config.metrics_listen.map(http::bind).transpose() {
        Ok(listener) => listener,
        // Another process on the port may be a predecessor still stopping: a restart may
        // help. Anything else (no such address here, a privileged port) will not.
        Err(error) => {
            let in_use = matches!(&error, http::ListenError::Bind { source, .. }
                if source.kind() == std::io::ErrorKind::AddrInUse);
            let code = if in_use {
                ExitCode::Internal
            } else {
                ExitCode::Config
            };
            return fail(code, &error);
        }
    };
    let pull = args.run.pull;
    let oci_runtime = args.run.oci_runtime.name();
    // Windows are chain time: with --rpc, the service's one clock follows the chain's when it
    // runs ahead (crate::chain_clock).
    let window_clock = Arc::new(ChainAligned::new(Arc::new(SystemClock::new())));
    let clock: Arc<dyn Clock> = if args.run.rpc.is_empty() {
        Arc::new(SystemClock::new())
    } else {
        window_clock.clone()
    };
    let telemetry = Arc::new(Telemetry::new(config.poll_interval, clock));
    let rpc = args.run.rpc.clone();
    let result = super::block_on(async move {
        // Before any job, as the signer checks the same list before it signs: endpoints on two
        // chains are a configuration to fix, none answering an outage a restart may get past.
        config.feed.chain_readiness =
            crate::chain_readiness::connect(&rpc)
                .await
                .map_err(|error| {
                    let transient = error.is_transient();
                    let error = format!("--rpc: {error}");
                    if transient {
                        ServeError::Transient(error)
                    } else {
                        ServeError::Config(error)
                    }
                })?;
        let _following = crate::chain_clock::follow(&rpc, window_clock).await;
        let endpoint = listener.map(|l| {
            match config.metrics_listen {
                Some(listen) if listen.is_remote() => tracing::warn!(
                    addr = %listen.addr,
                    "serving /healthz and /metrics beyond this host (--metrics-allow-remote): \
                     unauthenticated; the firewall must let only your Prometheus in"
                ),
                _ => tracing::info!(addr = ?config.metrics_listen, "serving /healthz and /metrics"),
            }
            tokio::spawn(http::run(l, telemetry.clone()))
        });
        let shutdown = Shutdown::install()
            .map_err(|e| ServeError::Transient(format!("installing signal handlers: {e}")))?;
        // The sweep removes containers of a worker that died mid-run (SIGKILL, crash): its
        // open run was closed as interrupted by `prepare`, and the job runs again below.
        let docker = super::connect_swept(oci_runtime)
            .await
            .map_err(|e| ServeError::Transient(e.to_string()))?;
        let served = worker_serve::serve(
            &config,
            ledger,
            docker,
            staging_root,
            pull,
            &shutdown,
            &telemetry,
        )
        .await;
        if let Some(endpoint) = endpoint {
            endpoint.abort();
        }
        served
    });
    match result {
        Ok(result) => served(result),
        Err(error) => fail(ExitCode::Internal, &error),
    }
}

fn served(result: Result<(), ServeError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::Success,
        Err(error @ ServeError::Config(_)) => fail(ExitCode::Config, &error),
        // 1: a restart may help (systemd's Restart=on-failure does it).
        Err(error @ ServeError::Transient(_)) => fail(ExitCode::Internal, &error),
    }
}

fn serve_config(args: &ServeArgs) -> Result<ServeConfig, String> {
    let mut feed = FeedConfig::new(
        &args.source.api,
        args.source.network,
        args.source.verifiers.clone(),
        &args.out,
    );
    feed.cache_dir = args.cache_dir.clone();
    feed.settle = args.run.settle_costs;
    if let Some(work) = &args.run.work_dir {
        feed.work_dir = work.clone();
    }
    if let Some(base) = &args.run.archive_base {
        feed.archive_base = base.clone();
    }
    // A service logs through `tracing`; per-download progress lines are for terminals.
    feed.progress = false;
    feed.shard = args.shard;
    let ledger = match args.ledger.as_deref() {
        None => LedgerLocation::Sqlite(args.state.clone()),
        Some(text) => LedgerLocation::parse(text).map_err(|e| format!("--ledger: {e}"))?,
    };
    if args.ledger_password_file.is_some() && matches!(ledger, LedgerLocation::Sqlite(_)) {
        return Err(
            "--ledger-password-file is for a postgres:// --ledger; a SQLite ledger has no password"
                .to_owned(),
        );
    }
    Ok(ServeConfig {
        feed,
        state_dir: args.state.clone(),
        poll_interval: Duration::from_secs(args.poll_interval),
        parallel: args.parallel,
        metrics_listen: args.metrics_listen.map(|addr| http::Listen {
            addr,
            allow_remote: args.metrics_allow_remote,
        }),
        images: image_policy(&args.image, args.run.pull),
        ledger,
        fleet: FleetOptions {
            host: args
                .fleet_host
                .clone()
                .unwrap_or_else(|| default_fleet_host(&args.state)),
            lease: Duration::from_secs(args.lease),
            password_file: args.ledger_password_file.clone(),
        },
    })
}

/// HOSTNAME:STATE_DIR: unique per service on a host (one per state directory), and the same
/// across a restart, so a restarted host takes its own open runs back.
fn default_fleet_host(state: &Path) -> String {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let state = std::path::absolute(state).unwrap_or_else(|_| state.to_owned());
    format!("{hostname}:{}", state.display())
}

/// The image policy from its flags; pulls ahead of jobs only with `--pull`.
pub fn image_policy(args: &crate::cli::ImageArgs, pull: bool) -> worker_serve::images::ImagePolicy {
    worker_serve::images::ImagePolicy {
        pull,
        budget: args.image_budget,
        foreign: args.gc_foreign_images,
        min_free: args.image_min_free,
        keep_recent: args.image_keep_recent,
    }
}

/// Prints the ledger, or one job's history; or re-queues jobs.
pub fn ledger(state: &Path, action: &LedgerAction) -> ExitCode {
    // Before any open: opening migrates, and a newer ledger is refused.
    if let LedgerAction::DowngradeTo(to) = action {
        return downgrade(state, *to);
    }
    // Opening creates a database; a reader must not leave an empty ledger behind.
    if !state.join(LEDGER_FILE).is_file() {
        return fail(
            ExitCode::Config,
            &format_args!("no ledger in {}", state.display()),
        );
    }
    let mut ledger = match Ledger::open(state) {
        Ok(ledger) => ledger,
        Err(error) if error.is_permanent() => return fail(ExitCode::Config, &error),
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    match action {
        LedgerAction::Show { job, json } => show(&ledger, job.as_deref(), *json),
        LedgerAction::Retry(job) => match ledger.retry(job) {
            // A mistyped id must not read as success: the ledger holds no row of it.
            Ok(done) if done.requeued == 0 && done.kept.is_empty() => fail(
                ExitCode::Internal,
                &format_args!(
                    "the ledger holds no job {}: nothing re-queued (`worker ledger` lists the \
                     job ids it holds)",
                    job.escape_debug()
                ),
            ),
            Ok(done) => requeued(&done, &format!("job {}", job.escape_debug())),
            Err(error) => fail(ExitCode::Internal, &error),
        },
        LedgerAction::RetryExhausted => match ledger.retry_exhausted() {
            Ok(done) => requeued(&done, "given-up jobs"),
            Err(error) => fail(ExitCode::Internal, &error),
        },
        // Returned before the open above; kept here so the match stays exhaustive.
        LedgerAction::DowngradeTo(to) => {
            drop(ledger);
            downgrade(state, *to)
        }
    }
}

/// `worker ledger --downgrade-to N`.
fn downgrade(state: &Path, to: i64) -> ExitCode {
    use worker_serve::rollback::{RollbackError, downgrade};
    match downgrade(state, to) {
        Ok(done) => print_text(&format!(
            "ledger schema {} -> {}: restored {} (taken before the upgrade); the newer ledger is \
             kept as {}; now install a worker of ledger schema {} and start it\n",
            done.from,
            done.to,
            done.restored.display(),
            done.kept.display(),
            done.to
        )),
        // A live service or a passing I/O fault: stop it, or try again.
        Err(
            error @ (RollbackError::Locked(_)
            | RollbackError::Io { .. }
            | RollbackError::Sqlite { .. }),
        ) => fail(ExitCode::Internal, &error),
        Err(error) => fail(ExitCode::Config, &error),
    }
}

fn requeued(done: &Requeued, what: &str) -> ExitCode {
    let mut text = format!(
        "re-queued {} job row(s) of {what}: pending, run at the next poll that lists them\n",
        done.requeued
    );
    for (round, status) in &done.kept {
        text.push_str(&format!("  round {round} left as {status}\n"));
    }
    if done.requeued == 0 && !done.kept.is_empty() {
        print_text(&text);
        return fail(
            ExitCode::Internal,
            &format_args!(
                "nothing re-queued for {what}: it has a verdict, is running or conflicting"
            ),
        );
    }
    print_text(&text)
}

fn at(ms: Option<i64>) -> Value {
    ms.map_or(Value::Null, |ms| Value::String(iso_utc(ms)))
}

fn show(ledger: &Ledger, job: Option<&str>, json: bool) -> ExitCode {
    let read = (|| {
        Ok::<_, worker_serve::ledger::LedgerError>((
            ledger.jobs(job)?,
            ledger.runs(job)?,
            ledger.candidates(job)?,
            ledger.last_heartbeat()?,
        ))
    })();
    let (jobs, runs, candidates, heartbeat) = match read {
        Ok(parts) => parts,
        Err(error) => return fail(ExitCode::Internal, &error),
    };
    if json {
        return print_json(&ledger_json(&jobs, &runs, &candidates, heartbeat.as_ref()));
    }
    let mut text = String::new();
    if let Some(h) = heartbeat {
        text.push_str(&format!(
            "heartbeat {} (pid {}, worker {}): {} poll(s) ok, {} failed{}\n",
            iso_utc(h.at_ms),
            h.pid,
            h.worker_version,
            h.polls.ok,
            h.polls.failed,
            h.polls
                .last_ok_ms
                .map(|t| format!(", last ok {}", iso_utc(t)))
                .unwrap_or_default()
        ));
    }
    for j in &jobs {
        text.push_str(&format!(
            "job {} round {} content {}: {} ({} attempt(s) of its own without a verdict){}{}\n",
            j.job_id.escape_debug(),
            j.round,
            j.content_hash.as_deref().unwrap_or("(not recorded)"),
            j.status,
            j.attempts,
            j.not_before_ms
                .filter(|_| j.status == worker_serve::ledger::JobState::Retry)
                .map(|t| format!(", next try after {}", iso_utc(t)))
                .unwrap_or_default(),
            j.expires_ms
                .map(|t| format!(", window ends {}", iso_utc(t)))
                .unwrap_or_default(),
        ));
        for r in runs.iter().filter(|r| r.job == j.job) {
            text.push_str(&format!(
                "  run {} {} .. {}: {}{}{}{}\n",
                r.run_id,
                iso_utc(r.started_ms),
                r.ended_ms.map_or_else(
                    || "running".into(),
                    |e| format!("{} ({})", iso_utc(e), human_duration(e - r.started_ms))
                ),
                r.outcome.as_deref().unwrap_or("-"),
                r.reason_code
                    .as_deref()
                    .map(|c| format!(" ({})", c.escape_debug()))
                    .unwrap_or_default(),
                r.cause
                    .as_deref()
                    .map(|c| format!(" [{c} cause]"))
                    .unwrap_or_default(),
                r.evidence
                    .as_deref()
                    .map(|e| format!(" evidence {e}"))
                    .unwrap_or_default(),
            ));
        }
        for c in candidates.iter().filter(|c| c.job == j.job) {
            text.push_str(&format!(
                "  candidate {} (run {}, {})\n",
                c.file,
                c.run_id,
                iso_utc(c.written_ms)
            ));
        }
    }
    print_text(&text)
}

/// The `agent-bounties/worker-ledger-v1` document: times as ISO 8601 UTC, durations in ms.
fn ledger_json(
    jobs: &[JobEntry],
    runs: &[RunEntry],
    candidates: &[CandidateEntry],
    heartbeat: Option<&Heartbeat>,
) -> Value {
    json!({
    "schema_version": LEDGER_SCHEMA_VERSION,
    "ledger_schema": Ledger::schema_version(),
    "heartbeat": heartbeat.map(|h| json!({
        "at": iso_utc(h.at_ms),
        "pid": h.pid,
        "worker_version": h.worker_version,
        "polls": {
            "ok": h.polls.ok,
            "failed": h.polls.failed,
            "last_ok_at": at(h.polls.last_ok_ms),
        },
    })),
    "jobs": jobs.iter().map(|j| json!({
        "job": j.job,
        "job_id": j.job_id,
        "round": j.round,
        "content_hash": j.content_hash,
        "first_seen_at": iso_utc(j.first_seen_ms),
        "last_seen_at": iso_utc(j.last_seen_ms),
        "status": j.status,
        "attempts": j.attempts,
        "expires_at": at(j.expires_ms),
        "retry_not_before": at(j.not_before_ms),
    })).collect::<Vec<_>>(),
    "runs": runs.iter().map(|r| json!({
        "run_id": r.run_id,
        "job": r.job,
        "job_id": r.job_id,
        "started_at": iso_utc(r.started_ms),
        "ended_at": at(r.ended_ms),
        "duration_ms": r.ended_ms.map(|e| e - r.started_ms),
        "outcome": r.outcome,
        "cause": r.cause,
        "reason_code": r.reason_code,
        "reason": r.reason,
        "evidence": r.evidence,
        "worker_version": r.worker_version,
    })).collect::<Vec<_>>(),
    "candidates": candidates.iter().map(|c| json!({
        "job": c.job,
        "job_id": c.job_id,
        "run_id": c.run_id,
        "file": c.file,
        "written_at": iso_utc(c.written_ms),
    })).collect::<Vec<_>>(),
    })
}
