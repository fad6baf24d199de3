//! `worker serve` and `worker ledger`.
//!
//! `serve` exits 0 after a SIGTERM/SIGINT shutdown (the running container killed and removed,
//! the run recorded as interrupted), 78 on configuration a restart cannot fix (bad URL or
//! verifier set, unusable staging, state or output directory, a ledger from a newer worker),
//! and 1 on failures a restart may fix (engine unreachable, ledger write failed). A feed that
//! does not answer is not a failure: the service keeps polling and counts the failed polls.
//!
//! `ledger` exits 0, or 78 when the state directory holds no usable ledger.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{fail, print_json, print_text};
use crate::cli::ServeArgs;
use crate::exit::ExitCode;
use crate::feed::FeedConfig;
use crate::serve::http;
use crate::serve::ledger::{LEDGER_FILE, Ledger};
use crate::serve::shutdown::Shutdown;
use crate::serve::telemetry::Telemetry;
use crate::serve::{ServeConfig, ServeError, prepare};
use crate::staging_root::{self, Fallback};

/// Runs the service until a signal or a failure.
pub fn serve(args: &ServeArgs) -> ExitCode {
    let staging_root = match staging_root::resolve(args.staging_root.as_deref(), Fallback::Required)
        .and_then(|root| staging_root::ensure_writable(&root).map(|()| root))
    {
        Ok(root) => root,
        Err(error) => return fail(ExitCode::Config, &error),
    };
    let config = serve_config(args);
    let ledger = match prepare(&config) {
        Ok(ledger) => ledger,
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
    let pull = args.pull;
    let telemetry = Arc::new(Telemetry::new(config.poll_interval));
    let result = super::block_on(async move {
        let endpoint = listener.map(|l| {
            tracing::info!(addr = ?config.metrics_listen, "serving /healthz and /metrics");
            tokio::spawn(http::run(l, telemetry.clone()))
        });
        let shutdown = Shutdown::install()
            .map_err(|e| ServeError::Transient(format!("installing signal handlers: {e}")))?;
        // The sweep removes containers of a worker that died mid-run (SIGKILL, crash): its
        // open run was closed as interrupted by `prepare`, and the job runs again below.
        let docker = super::connect_swept()
            .await
            .map_err(|e| ServeError::Transient(e.to_string()))?;
        let served = crate::serve::serve(
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

fn serve_config(args: &ServeArgs) -> ServeConfig {
    let mut feed = FeedConfig::new(&args.api, args.network, args.verifiers.clone(), &args.out);
    feed.cache_dir = args.cache_dir.clone();
    if let Some(work) = &args.work_dir {
        feed.work_dir = work.clone();
    }
    if let Some(base) = &args.archive_base {
        feed.archive_base = base.clone();
    }
    // A service logs through `tracing`; per-download progress lines are for terminals.
    feed.progress = false;
    feed.shard = args.shard;
    ServeConfig {
        feed,
        state_dir: args.state.clone(),
        poll_interval: Duration::from_secs(args.poll_interval),
        parallel: args.parallel,
        metrics_listen: args.metrics_listen,
    }
}

/// Prints the ledger, or one job's history.
pub fn ledger(state: &Path, job: Option<&str>, json: bool) -> ExitCode {
    // Opening creates a database; a reader must not leave an empty ledger behind.
    if !state.join(LEDGER_FILE).is_file() {
        return fail(
            ExitCode::Config,
            &format_args!("no ledger in {}", state.display()),
        );
    }
    let ledger = match Ledger::open(state) {
        Ok(ledger) => ledger,
        Err(error) => return fail(ExitCode::Config, &error),
    };
    let read = (|| {
        Ok::<_, crate::serve::ledger::LedgerError>((
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
        return print_json(&serde_json::json!({
            "schema_version": Ledger::schema_version(),
            "heartbeat": heartbeat,
            "jobs": jobs,
            "runs": runs,
            "candidates": candidates,
        }));
    }
    let mut text = String::new();
    if let Some(h) = heartbeat {
        text.push_str(&format!(
            "heartbeat {} ms (pid {}, worker {}): {} poll(s) ok, {} failed\n",
            h.at_ms, h.pid, h.worker_version, h.polls.ok, h.polls.failed
        ));
    }
    for j in &jobs {
        text.push_str(&format!(
            "job {} round {} content {}: {} ({} attempt(s) without a verdict)\n",
            j.job_id.escape_debug(),
            j.round,
            j.content_hash.as_deref().unwrap_or("(not recorded)"),
            j.status,
            j.attempts
        ));
        for r in runs.iter().filter(|r| r.job == j.job) {
            text.push_str(&format!(
                "  run {} {}..{}: {}{}{}\n",
                r.run_id,
                r.started_ms,
                r.ended_ms
                    .map_or_else(|| "running".into(), |e| e.to_string()),
                r.outcome.as_deref().unwrap_or("-"),
                r.reason_code
                    .as_deref()
                    .map(|c| format!(" ({})", c.escape_debug()))
                    .unwrap_or_default(),
                r.evidence
                    .as_deref()
                    .map(|e| format!(" evidence {e}"))
                    .unwrap_or_default(),
            ));
        }
        for c in candidates.iter().filter(|c| c.job == j.job) {
            text.push_str(&format!("  candidate {} (run {})\n", c.file, c.run_id));
        }
    }
    print_text(&text)
}
