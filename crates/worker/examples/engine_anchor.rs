//! The raw Engine-API anchor of `scripts/bench-serve.sh` (issue 29): the engine's own
//! throughput for the benchmark's jobs, with nothing of the worker around the container.
//!
//! It runs N jobs of the bundled example (busybox `cmp` of the benchmark's expected output
//! with the solver's result), alternately on its passing and its failing source as
//! `bench_feed` lists them, each as create / start / wait / remove through bollard, with K in
//! flight. The create request is the worker's own: the profile from
//! `worker_sandbox::plan_under` on the spec `worker_jobs::run::spec_for` makes of the same
//! manifest `bench_feed` serves (limits, read-only binds, network none, tmpfs, ulimits,
//! init, runtime), the image's `PATH` in the environment as the lifecycle sets it, turned
//! into the body by `worker_docker::profile::create_body` (the function the worker's engine
//! client calls). What it leaves out is everything the worker does besides: the feed,
//! archives, staging, the inspect checks, attach, the event watch, judging, the candidate.
//!
//! Each job's exit code is checked (0 on the passing source, 1 on the failing one), so a
//! container that did not really run the command fails the benchmark instead of speeding it
//! up. Prints one line: `jobs=N in_flight=K seconds=S jobs_per_hour=R`.
//!
//! `ANCHOR_ADD` (a comma-separated subset of `inspect,attach,events`) adds the worker's other
//! calls around each container one by one, for finding which of them costs the engine what
//! (issue 29): `inspect` reads the container back after create and after the stop, `attach`
//! streams its output from before the start to the end (with the worker's own options,
//! `worker_docker::client::attach_options`), `events` follows its events from
//! before the start (replaying the engine's buffer as the lifecycle does) until it died.
//!
//! Usage: `engine_anchor <image@sha256:…> <source-pass dir> <source-fail dir>
//! <benchmark dir> <jobs> <in flight>` (the directories readable by the sandbox user).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bollard::Docker;
use bollard::errors::Error;
use bollard::query_parameters::{
    CreateContainerOptions, RemoveContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt as _;
use serde_json::json;
use verifier_sdk::fixtures::sample_manifest;

#[derive(Debug, thiserror::Error)]
enum AnchorError {
    #[error(
        "usage: engine_anchor <image@sha256:…> <source-pass> <source-fail> <benchmark> <jobs> <in flight>"
    )]
    Usage,
    #[error("the engine: {0}")]
    Engine(#[from] Error),
    #[error("the manifest: {0}")]
    Manifest(String),
    #[error("job {job}: exit {got}, expected {want}")]
    Exit { job: u64, got: i64, want: i64 },
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("engine_anchor: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(AnchorError::Usage) => {
            eprintln!("{}", AnchorError::Usage);
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("engine_anchor: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run(args: &[String]) -> Result<(), AnchorError> {
    let [image, pass, fail, benchmark, jobs, in_flight] = args else {
        return Err(AnchorError::Usage);
    };
    let jobs: u64 = jobs.parse().map_err(|_| AnchorError::Usage)?;
    let in_flight: usize = in_flight.parse().map_err(|_| AnchorError::Usage)?;
    if jobs == 0 || in_flight == 0 {
        return Err(AnchorError::Usage);
    }
    let docker = Docker::connect_with_defaults()?.negotiate_version().await?;
    // The image's PATH, read from its config as the lifecycle's image check reads it.
    let inspect = docker.inspect_image(image).await?;
    let image_path = inspect
        .config
        .and_then(|c| c.env)
        .unwrap_or_default()
        .into_iter()
        .find_map(|e| e.strip_prefix("PATH=").map(str::to_owned));
    // The manifest bench_feed serves, so the profile is the one `worker serve` asks for.
    let mut manifest = sample_manifest();
    manifest["image"] = json!(image);
    manifest["command"] = json!([
        "/bin/cmp",
        "/benchmark/expected.txt",
        "/workspace/result.txt"
    ]);
    manifest["benchmark_digest"] = json!(format!("sha256:{}", "0".repeat(64)));
    let manifest = verifier_sdk::RunnerManifest::from_value(&manifest)
        .map_err(|e| AnchorError::Manifest(e.to_string()))?;
    let bodies: Vec<_> = [pass, fail]
        .into_iter()
        .map(|source| {
            let spec = worker_jobs::run::spec_for(
                &manifest,
                PathBuf::from(source),
                PathBuf::from(benchmark),
                "anchor".into(),
                false,
            );
            let want = worker_sandbox::plan_under(&spec, verifier_sdk::oci_runtime::RUNC)
                .map_err(|e| AnchorError::Manifest(e.to_string()))?;
            Ok(worker_docker::profile::create_body(
                image,
                &want,
                worker_sandbox::profile::environment(spec.request.test_seed, image_path.as_deref()),
                HashMap::from([("agent-bounties.engine-anchor".to_owned(), "1".to_owned())]),
            ))
        })
        .collect::<Result<_, AnchorError>>()?;
    let add = Add::from_env()?;
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicU64::new(1));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..in_flight {
        let (docker, bodies, next) = (docker.clone(), Arc::clone(&bodies), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            loop {
                let job = next.fetch_add(1, Ordering::Relaxed);
                if job > jobs {
                    return Ok::<(), AnchorError>(());
                }
                // Odd jobs on the passing source (cmp exits 0), even on the failing one (1),
                // as bench_feed lists them.
                let (body, want) = if job % 2 == 1 {
                    (&bodies[0], 0)
                } else {
                    (&bodies[1], 1)
                };
                let got = one(&docker, body.clone(), add).await?;
                if got != want {
                    return Err(AnchorError::Exit { job, got, want });
                }
            }
        }));
    }
    for worker in workers {
        worker
            .await
            .map_err(|e| AnchorError::Manifest(format!("a task failed: {e}")))??;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "jobs={jobs} in_flight={in_flight} seconds={seconds:.3} jobs_per_hour={:.0}",
        jobs as f64 * 3600.0 / seconds
    );
    Ok(())
}

/// The worker's calls `ANCHOR_ADD` puts around each container.
#[derive(Debug, Clone, Copy, Default)]
struct Add {
    inspect: bool,
    attach: bool,
    events: bool,
}

impl Add {
    fn from_env() -> Result<Self, AnchorError> {
        let mut add = Self::default();
        let wanted = std::env::var("ANCHOR_ADD").unwrap_or_default();
        for call in wanted.split(',').filter(|c| !c.is_empty()) {
            match call {
                "inspect" => add.inspect = true,
                "attach" => add.attach = true,
                "events" => add.events = true,
                other => {
                    return Err(AnchorError::Manifest(format!(
                        "ANCHOR_ADD: unknown call {other} (inspect, attach, events)"
                    )));
                }
            }
        }
        Ok(add)
    }
}

/// One job: create, start, wait for the exit, remove (with the calls `add` puts around
/// them); its exit code.
async fn one(
    docker: &Docker,
    body: bollard::models::ContainerCreateBody,
    add: Add,
) -> Result<i64, AnchorError> {
    let id = docker
        .create_container(None::<CreateContainerOptions>, body)
        .await?
        .id;
    let mut followers = Vec::new();
    if add.events {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs().saturating_sub(600));
        let filters = HashMap::from([
            ("container", vec![id.clone()]),
            ("type", vec!["container".to_owned()]),
        ]);
        let options = bollard::query_parameters::EventsOptionsBuilder::default()
            .since(&since.to_string())
            .filters(&filters)
            .build();
        let mut events = docker.events(Some(options));
        followers.push(tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                if event.action.as_deref() == Some("die") {
                    return;
                }
            }
        }));
    }
    if add.inspect {
        docker.inspect_container(&id, None).await?;
    }
    if add.attach {
        let options = worker_docker::client::attach_options();
        let mut attached = docker.attach_container(&id, Some(options)).await?;
        followers.push(tokio::spawn(async move {
            while let Some(Ok(_)) = attached.output.next().await {}
        }));
    }
    let ran = async {
        docker.start_container(&id, None).await?;
        let options = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        match docker.wait_container(&id, Some(options)).next().await {
            Some(Ok(exit)) => Ok(exit.status_code),
            Some(Err(Error::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(AnchorError::Engine(e)),
            None => Err(AnchorError::Manifest(
                "the wait ended without an answer".into(),
            )),
        }
    }
    .await;
    for follower in followers {
        let _ = follower.await;
    }
    if add.inspect {
        docker.inspect_container(&id, None).await?;
    }
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    docker.remove_container(&id, Some(options)).await?;
    ran
}
