//! The real executor: the only code that talks to the Docker Engine.
//!
//! Every run follows the same fixed sequence — check image, check inputs, create, read the
//! profile back, resolve the executable, attach, start, watch output and deadline, kill if
//! needed, wait, inspect, check inputs, remove, confirm removal — and every path after create
//! ends in removal.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as EngineError;
use bollard::models::{ContainerInspectResponse, ContainerSummaryStateEnum, EventMessage};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, ContainerArchiveInfoOptionsBuilder,
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, DownloadFromContainerOptionsBuilder,
    EventsOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StatsOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;
use tokio::time::Instant;

use super::decision::{
    Decision, EngineEvents, InputCheck, NoVerdictReason, RunObservation, StoppedBy, decide,
};
use super::evidence::{
    ContainerFacts, DOCKER_EXECUTOR, EVIDENCE_SCHEMA_VERSION, EngineFacts, EvidenceRecord,
    ExitFacts, ImageFacts, IsolationEvidence, RequestFacts, ResourceFacts, Timestamps,
};
use super::profile::{self, Limits};
use super::streams::OutputCapture;
use super::{
    InputPhase, LABEL_OWNER, LABEL_RUN_ID, LABEL_VERIFIER, LABEL_WORKER_VERSION, RunHooks,
    RunReport, SandboxError, SandboxSpec, owner,
};

/// How long to wait for a killed container to stop and for its output to drain.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long to keep retrying removal before giving up.
const REMOVE_GRACE: Duration = Duration::from_secs(20);
/// Bound on each kill, remove and inspect request during teardown, so a slow engine cannot
/// stall teardown for the client's default two minutes.
const TEARDOWN_CALL: Duration = Duration::from_secs(10);
/// Bytes of a file's archive read to find its `#!` line (tar headers plus the line).
const ARCHIVE_HEAD_BYTES: usize = 8 * 1024;
/// Symlink hops followed when resolving `argv[0]`.
const MAX_LINK_HOPS: usize = 8;
/// How long after the observed stop the engine's `die` event may take to arrive.
const EVENTS_GRACE: Duration = Duration::from_secs(10);
/// How far back the event subscription replays the engine's buffer, so a `start` that happens
/// before the subscription is in place is still seen (the filter is the container's id, so
/// nothing older can match); generous for a daemon whose clock differs from ours.
const EVENTS_REPLAY: Duration = Duration::from_secs(600);
/// Container actions that only something other than the program and this worker can cause
/// while it runs: each means the exit code may not be the program's own. `kill` is judged
/// separately against the sandbox's own kills; `exec_*` actions match by prefix.
const FOREIGN_ACTIONS: [&str; 7] = [
    "stop",
    "destroy",
    "pause",
    "unpause",
    "restart",
    "update",
    "extract-to-dir",
];
/// Engine value of `State.StartedAt` for a container that never started.
const NEVER: &str = "0001-01-01T00:00:00Z";

/// Runs sandboxed commands on a Docker Engine.
#[derive(Clone, Debug)]
pub struct DockerExecutor {
    docker: Docker,
    engine: EngineFacts,
    owner: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn is_not_found(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

fn engine_message(error: &EngineError) -> String {
    match error {
        EngineError::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn enum_text<T: serde::Serialize>(value: Option<T>) -> String {
    match value.map(|v| serde_json::to_value(v)) {
        Some(Ok(serde_json::Value::String(s))) => s,
        _ => String::new(),
    }
}

/// A pinned reference is `name@sha256:<64 lowercase hex>` and nothing else.
fn is_pinned(reference: &str) -> bool {
    match reference.rsplit_once("@sha256:") {
        Some((name, hex)) => {
            !name.is_empty()
                && hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        }
        None => false,
    }
}

/// Where `argv[0]` could live inside the container, in lookup order.
fn executable_candidates(argv0: &str, image_path: Option<&str>) -> Vec<String> {
    if argv0.starts_with('/') {
        vec![argv0.to_string()]
    } else if argv0.contains('/') {
        vec![format!("{}/{argv0}", profile::WORKDIR)]
    } else {
        image_path
            .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .split(':')
            .filter(|dir| dir.starts_with('/'))
            .map(|dir| format!("{}/{argv0}", dir.trim_end_matches('/')))
            .collect()
    }
}

// Go's os.FileMode type bits, as the engine reports them in archive stat.
const GO_MODE_DIR: u32 = 1 << 31;
const GO_MODE_SYMLINK: u32 = 1 << 27;
const GO_MODE_TYPE: u32 =
    GO_MODE_DIR | GO_MODE_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19);

struct Ctx<'a> {
    spec: &'a SandboxSpec,
    hooks: &'a dyn RunHooks,
    evidence: EvidenceRecord,
}

impl DockerExecutor {
    /// Connects through `DOCKER_HOST` (or the default socket) and negotiates the API version.
    pub async fn connect() -> Result<Self, SandboxError> {
        let docker = Docker::connect_with_defaults().map_err(SandboxError::RuntimeUnavailable)?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(SandboxError::RuntimeUnavailable)?;
        let version = docker
            .version()
            .await
            .map_err(SandboxError::RuntimeUnavailable)?;
        let info = docker
            .info()
            .await
            .map_err(SandboxError::RuntimeUnavailable)?;
        let engine = EngineFacts {
            version: version.version.unwrap_or_default(),
            api_version: version.api_version.unwrap_or_default(),
            kernel_version: info
                .kernel_version
                .or(version.kernel_version)
                .unwrap_or_default(),
            cgroup_version: enum_text(info.cgroup_version),
            cgroup_driver: enum_text(info.cgroup_driver),
            platform: format!(
                "{}/{}",
                version.os.unwrap_or_default(),
                version.arch.unwrap_or_default()
            ),
        };
        Ok(Self {
            docker,
            engine,
            owner: owner::current(),
        })
    }

    /// Sets the per-request timeout of the engine client (default two minutes). Runs longer than
    /// it are unaffected: waits and output streams are long-lived by design.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.docker = self.docker.with_timeout(timeout);
        self
    }

    /// Engine and kernel facts recorded in every evidence record.
    pub fn engine(&self) -> &EngineFacts {
        &self.engine
    }

    /// The underlying client, for callers that need read-only engine queries (tests).
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// Removes labelled containers whose owning worker process is provably gone (for example
    /// after a SIGKILL), left from before a reboot, or older than any run can last, and returns
    /// their ids. Anything else — a live owner, or one in another pid namespace this process
    /// cannot see — is left alone: removing a live run's container would end it from outside.
    pub async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError> {
        let filters = HashMap::from([("label", vec![format!("{LABEL_VERIFIER}=1")])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|source| SandboxError::Engine {
                context: "listing labelled containers",
                source,
            })?;
        let mut removed = Vec::new();
        for container in containers {
            let Some(id) = container.id else { continue };
            let owner = container
                .labels
                .as_ref()
                .and_then(|labels| labels.get(LABEL_OWNER))
                .map(String::as_str)
                .unwrap_or_default();
            let running = matches!(
                container.state,
                Some(
                    ContainerSummaryStateEnum::RUNNING
                        | ContainerSummaryStateEnum::PAUSED
                        | ContainerSummaryStateEnum::RESTARTING
                )
            );
            let age = container
                .created
                .and_then(|created| u64::try_from(created).ok())
                .map_or(Duration::ZERO, |created| {
                    Duration::from_secs((now_ms() / 1000).saturating_sub(created))
                });
            if !owner::is_removable(owner, running, age) {
                continue;
            }
            tracing::info!(container = %id, owner, "removing stale sandbox container");
            if self.remove_and_confirm(&id).await.is_none() {
                return Err(SandboxError::StaleNotRemoved { id });
            }
            removed.push(id);
        }
        Ok(removed)
    }

    /// Runs `spec` and decides its outcome. Every contract failure is a no-verdict report;
    /// `Err` only when the engine cannot be reached at all.
    pub async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        let mut ctx = Ctx {
            spec,
            hooks,
            evidence: self.blank_evidence(spec),
        };
        let decision = self.run_phases(&mut ctx).await?;
        ctx.evidence.outcome = decision.clone();
        Ok(RunReport {
            decision,
            evidence: ctx.evidence,
        })
    }

    fn blank_evidence(&self, spec: &SandboxSpec) -> EvidenceRecord {
        EvidenceRecord {
            schema_version: EVIDENCE_SCHEMA_VERSION.to_string(),
            executor: DOCKER_EXECUTOR.to_string(),
            run_id: spec.run_id.clone(),
            response_hash: None,
            worker_version: env!("CARGO_PKG_VERSION").to_string(),
            engine: self.engine.clone(),
            image: None,
            request: RequestFacts {
                argv: spec.argv.clone(),
                platform: spec.platform.clone(),
                timeout_ms: u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX),
                cpu_millis: spec.cpu_millis,
                memory_bytes: spec.memory_bytes,
                pids_limit: spec.pids_limit,
                max_output_bytes: spec.max_output_bytes,
                tmpfs_bytes: spec.tmpfs_bytes,
                test_seed: spec.test_seed,
            },
            isolation: None,
            container: None,
            timestamps: Timestamps {
                begin_ms: now_ms(),
                ..Timestamps::default()
            },
            exit: ExitFacts::default(),
            resources: ResourceFacts::default(),
            stdout: OutputCapture::new().finish(),
            stderr: OutputCapture::new().finish(),
            outcome: Decision::no_verdict(NoVerdictReason::InternalError, "run did not finish"),
        }
    }

    async fn run_phases(&self, ctx: &mut Ctx<'_>) -> Result<Decision, SandboxError> {
        let spec = ctx.spec;
        let (limits, source, benchmark) = match validate(spec) {
            Ok(v) => v,
            Err(detail) => return Ok(Decision::no_verdict(NoVerdictReason::InternalError, detail)),
        };
        let image_path = match self.resolve_image(ctx).await? {
            Ok(path) => path,
            Err(decision) => return Ok(decision),
        };
        if let InputCheck::Mismatch { detail } = ctx.hooks.check_inputs(InputPhase::BeforeCreate) {
            return Ok(Decision::no_verdict(NoVerdictReason::InputMismatch, detail));
        }

        let want = profile::requested(spec, limits, image_path.as_deref(), &source, &benchmark);
        let name = container_name(&spec.run_id);
        let labels = HashMap::from([
            (LABEL_VERIFIER.to_string(), "1".to_string()),
            (LABEL_RUN_ID.to_string(), spec.run_id.clone()),
            (
                LABEL_WORKER_VERSION.to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            ),
            (LABEL_OWNER.to_string(), self.owner.clone()),
        ]);
        let body = profile::create_body(
            &spec.image,
            &want,
            profile::environment(spec.test_seed, image_path.as_deref()),
            labels,
        );
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = match self.docker.create_container(Some(options), body).await {
            Ok(created) => created,
            Err(error) => {
                return Ok(Decision::no_verdict(
                    NoVerdictReason::CreateFailed,
                    format!(
                        "the engine refused to create the container: {}",
                        engine_message(&error)
                    ),
                ));
            }
        };
        let id = created.id;
        ctx.evidence.timestamps.create_ms = Some(now_ms());
        ctx.evidence.container = Some(ContainerFacts {
            id: id.clone(),
            name,
        });

        let decision = self
            .run_created(ctx, &id, &want, image_path.as_deref())
            .await;
        // Removal happens on every path after create; an unconfirmed removal voids the run.
        let removed_at = self.remove_and_confirm(&id).await;
        ctx.evidence.exit.removed = removed_at.is_some();
        ctx.evidence.timestamps.remove_ms = removed_at;
        if removed_at.is_none() {
            return Ok(Decision::no_verdict(
                NoVerdictReason::InternalError,
                format!("removal of container {id} could not be confirmed"),
            ));
        }
        Ok(decision)
    }

    /// Checks the image is present by its pinned digest and on the right platform; returns the
    /// image's `PATH`, or the no-verdict decision.
    async fn resolve_image(
        &self,
        ctx: &mut Ctx<'_>,
    ) -> Result<Result<Option<String>, Decision>, SandboxError> {
        let spec = ctx.spec;
        let mut inspected = self.docker.inspect_image(&spec.image).await;
        if spec.pull && matches!(&inspected, Err(e) if is_not_found(e)) {
            // The reference is already checked to be digest-pinned, so this pulls by digest.
            let options = CreateImageOptionsBuilder::default()
                .from_image(&spec.image)
                .build();
            let mut pull = self.docker.create_image(Some(options), None, None);
            let mut pull_error = None;
            while let Some(item) = pull.next().await {
                if let Err(error) = item {
                    pull_error = Some(engine_message(&error));
                    break;
                }
            }
            if let Some(detail) = pull_error {
                tracing::warn!(image = %spec.image, %detail, "pull by digest failed");
            }
            inspected = self.docker.inspect_image(&spec.image).await;
        }
        let image = match inspected {
            Ok(image) => image,
            Err(error) if is_not_found(&error) => {
                return Ok(Err(Decision::no_verdict(
                    NoVerdictReason::ImageMissing,
                    format!("image {} is not present", spec.image),
                )));
            }
            Err(error @ EngineError::DockerResponseServerError { .. }) => {
                return Ok(Err(Decision::no_verdict(
                    NoVerdictReason::ImageMissing,
                    format!(
                        "image {} could not be inspected: {}",
                        spec.image,
                        engine_message(&error)
                    ),
                )));
            }
            Err(error) => return Err(SandboxError::RuntimeUnavailable(error)),
        };
        let repo_digests = image.repo_digests.clone().unwrap_or_default();
        let mut platform = format!(
            "{}/{}",
            image.os.clone().unwrap_or_default(),
            image.architecture.clone().unwrap_or_default()
        );
        let requested_has_variant = spec.platform.split('/').count() > 2;
        if let Some(variant) = image.variant.clone().filter(|v| !v.is_empty())
            && requested_has_variant
        {
            platform = format!("{platform}/{variant}");
        }
        ctx.evidence.image = Some(ImageFacts {
            reference: spec.image.clone(),
            id: image.id.clone().unwrap_or_default(),
            repo_digest: repo_digests
                .iter()
                .find(|d| **d == spec.image)
                .cloned()
                .unwrap_or_default(),
            platform: platform.clone(),
        });
        if !repo_digests.contains(&spec.image) {
            return Ok(Err(Decision::no_verdict(
                NoVerdictReason::ImageMissing,
                format!(
                    "local image's repo digests {repo_digests:?} do not include {}",
                    spec.image
                ),
            )));
        }
        if platform != spec.platform {
            return Ok(Err(Decision::no_verdict(
                NoVerdictReason::ImagePlatformMismatch,
                format!("image platform {platform} is not {}", spec.platform),
            )));
        }
        let image_env = image.config.and_then(|c| c.env).unwrap_or_default();
        // The engine merges every image variable into the container and none can be removed,
        // so an image that sets anything but PATH cannot get the exact environment.
        let extra: Vec<&str> = image_env
            .iter()
            .map(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k))
            .filter(|k| *k != "PATH")
            .collect();
        if !extra.is_empty() {
            return Ok(Err(Decision::no_verdict(
                NoVerdictReason::IsolationMismatch,
                format!("image sets environment variables {extra:?} that would reach the command"),
            )));
        }
        Ok(Ok(image_env
            .iter()
            .find_map(|e| e.strip_prefix("PATH="))
            .map(str::to_string)))
    }

    async fn run_created(
        &self,
        ctx: &mut Ctx<'_>,
        id: &str,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Decision {
        let inspect = match self.docker.inspect_container(id, None).await {
            Ok(inspect) => inspect,
            Err(error) => {
                return Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    format!(
                        "inspecting the created container failed: {}",
                        engine_message(&error)
                    ),
                );
            }
        };
        ctx.evidence.timestamps.engine_created = inspect.created.clone();
        let observed = profile::observed(&inspect);
        let mismatches = want.mismatches(&observed);
        ctx.evidence.isolation = Some(IsolationEvidence {
            requested: want.clone(),
            observed,
            mismatches: mismatches.clone(),
        });
        if !mismatches.is_empty() {
            return Decision::no_verdict(
                NoVerdictReason::IsolationMismatch,
                format!("created container differs from the profile in {mismatches:?}"),
            );
        }

        let argv0 = ctx
            .spec
            .argv
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        if let Err(detail) = self.resolve_executable(id, argv0, image_path).await {
            return Decision::no_verdict(NoVerdictReason::StartFailed, detail);
        }

        let attach_options = AttachContainerOptionsBuilder::default()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .stdin(false)
            .logs(false)
            .build();
        let attached = match self.docker.attach_container(id, Some(attach_options)).await {
            Ok(attached) => attached,
            Err(error) => {
                return Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    format!(
                        "attaching to the container failed: {}",
                        engine_message(&error)
                    ),
                );
            }
        };
        let output = attached.output;

        // Subscribed before start (and replaying the engine's recent buffer besides), so every
        // action on the container from its start to its exit is seen.
        let event_log = Arc::new(Mutex::new(EventLog::default()));
        let events_task = tokio::spawn(watch_events(
            self.docker.clone(),
            id.to_string(),
            Arc::clone(&event_log),
        ));
        if let Err(error) = self.docker.start_container(id, None).await {
            events_task.abort();
            let decision = Decision::no_verdict(
                NoVerdictReason::StartFailed,
                format!(
                    "the engine could not start the command: {}",
                    engine_message(&error)
                ),
            );
            self.record_final_state(ctx, id).await;
            return decision;
        }
        let started = Instant::now();
        ctx.evidence.timestamps.start_ms = Some(now_ms());
        let mut events = events_task;
        let deadline = started + ctx.spec.timeout;
        // "not-running" also matches a container that stopped before the wait was sent.
        let mut wait = Box::pin(wait_stopped(self.docker.clone(), id.to_string()));

        let resources = Arc::new(Mutex::new(ResourceFacts::default()));
        let sampler = tokio::spawn(sample_stats(
            self.docker.clone(),
            id.to_string(),
            Arc::clone(&resources),
        ));

        // The reader runs on its own and always reads to the end: if we stopped reading, the
        // engine's stream copier would block and with it the container's exit handling, so a
        // kill, wait or inspect would hang.
        let (over_cap_tx, mut over_cap) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(read_output(output, ctx.spec.max_output_bytes, over_cap_tx));

        let mut stopped_by = StoppedBy::None;
        // Kills this worker sent (or may have: a timed-out request may still have landed).
        let mut own_kills = 0usize;
        let mut exited = false;
        let mut cap_signal_open = true;
        while !exited && stopped_by == StoppedBy::None {
            tokio::select! {
                biased;
                signal = &mut over_cap, if cap_signal_open => {
                    cap_signal_open = false;
                    if signal.is_ok() {
                        stopped_by = StoppedBy::OutputLimit;
                        own_kills += usize::from(self.kill(id).await);
                    }
                }
                () = &mut wait, if !exited => exited = true,
                () = tokio::time::sleep_until(deadline) => {
                    stopped_by = StoppedBy::Timeout;
                    own_kills += usize::from(self.kill(id).await);
                }
            }
        }
        let drain_until = Instant::now() + STOP_GRACE;
        if !exited {
            exited = tokio::time::timeout_at(drain_until, &mut wait)
                .await
                .is_ok();
        }
        let (stdout, stderr, over, stream_error) =
            match tokio::time::timeout_at(drain_until, reader).await {
                Ok(Ok(result)) => result,
                Ok(Err(join_error)) => (
                    OutputCapture::new(),
                    OutputCapture::new(),
                    false,
                    Some(format!("output reader failed: {join_error}")),
                ),
                Err(_) => (
                    OutputCapture::new(),
                    OutputCapture::new(),
                    false,
                    Some("output did not end after the container stopped".to_string()),
                ),
            };
        // Output over the cap is a no-verdict even when the program exited before our kill.
        if stopped_by == StoppedBy::None && over {
            stopped_by = StoppedBy::OutputLimit;
        }
        if !exited {
            tracing::warn!(container = %id, "container did not report stopping in time");
        }
        let events_until = drain_until.min(Instant::now() + EVENTS_GRACE);
        if tokio::time::timeout_at(events_until, &mut events)
            .await
            .is_err()
        {
            events.abort();
        }
        let events = event_log
            .lock()
            .map(|log| log.judge(own_kills))
            .unwrap_or_else(|_| EngineEvents::Unconfirmed {
                detail: "the event log was poisoned".into(),
            });
        if let EngineEvents::External { detail } = &events {
            tracing::warn!(container = %id, %detail, "the container was acted on from outside");
            if stopped_by == StoppedBy::None {
                stopped_by = StoppedBy::External;
            }
        }
        sampler.abort();
        ctx.evidence.resources = resources.lock().map(|r| r.clone()).unwrap_or_default();
        ctx.evidence.stdout = stdout.finish();
        ctx.evidence.stderr = stderr.finish();
        ctx.evidence.exit.stopped_by = stopped_by;

        match self.record_final_state(ctx, id).await {
            Some(false) => {}
            Some(true) => {
                // Never decide on a live container; removal below force-kills it.
                return Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    "the container was still running after the stop grace period",
                );
            }
            None => {
                // Removed from outside (another process's cleanup) is the likeliest cause.
                if let EngineEvents::External { detail } = &events {
                    return Decision::no_verdict(
                        NoVerdictReason::ExternallyStopped,
                        format!("the run was interfered with from outside the sandbox: {detail}"),
                    );
                }
                return Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    "inspecting the stopped container failed",
                );
            }
        }
        if let Some(error) = stream_error {
            tracing::warn!(container = %id, %error, "output stream ended with an error");
            if stopped_by == StoppedBy::None {
                return Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    format!("reading the container's output failed: {error}"),
                );
            }
        }

        let observation = RunObservation {
            started: ctx.evidence.exit.started,
            exit_code: ctx.evidence.exit.exit_code,
            oom_killed: ctx.evidence.exit.oom_killed,
            stopped_by,
            inputs: ctx.hooks.check_inputs(InputPhase::AfterRun),
            events,
        };
        decide(&observation)
    }

    /// Reads the final container state into the evidence; returns whether it is still running,
    /// or `None` when it could not be read.
    async fn record_final_state(&self, ctx: &mut Ctx<'_>, id: &str) -> Option<bool> {
        let inspect: ContainerInspectResponse =
            tokio::time::timeout(TEARDOWN_CALL, self.docker.inspect_container(id, None))
                .await
                .ok()?
                .ok()?;
        let state = inspect.state.unwrap_or_default();
        let started_at = state.started_at.filter(|s| !s.is_empty() && s != NEVER);
        ctx.evidence.exit.started = started_at.is_some();
        ctx.evidence.timestamps.engine_started = started_at;
        ctx.evidence.timestamps.engine_finished = state.finished_at.filter(|s| s != NEVER);
        ctx.evidence.timestamps.finish_ms = Some(now_ms());
        ctx.evidence.exit.exit_code = state.exit_code;
        ctx.evidence.exit.oom_killed = state.oom_killed.unwrap_or(false);
        ctx.evidence.exit.engine_error = state.error.filter(|e| !e.is_empty());
        Some(state.running.unwrap_or(false))
    }

    /// Confirms `argv[0]` names an executable regular file in the created container (image
    /// plus mounts) and, for a `#!` script, that its interpreter exists too. With `init: true`
    /// the engine starts the init, not the command, so a missing executable would otherwise
    /// surface only as the init's exit 127 — which the program itself could also produce.
    async fn resolve_executable(
        &self,
        id: &str,
        argv0: &str,
        image_path: Option<&str>,
    ) -> Result<(), String> {
        let path = self
            .find_executable(id, argv0, executable_candidates(argv0, image_path))
            .await?
            .ok_or_else(|| format!("executable {argv0} not found in the image"))?;
        if let Some(interpreter) = self.read_interpreter(id, &path).await {
            // The kernel does not search PATH for an interpreter; relative means the workdir.
            let candidates = if interpreter.starts_with('/') {
                vec![interpreter.clone()]
            } else {
                vec![format!("{}/{interpreter}", profile::WORKDIR)]
            };
            if self
                .find_executable(id, &interpreter, candidates)
                .await?
                .is_none()
            {
                return Err(format!(
                    "interpreter {interpreter} of {argv0} not found in the image"
                ));
            }
        }
        Ok(())
    }

    /// The first candidate that is (after following symlinks) an executable regular file.
    async fn find_executable(
        &self,
        id: &str,
        name: &str,
        candidates: Vec<String>,
    ) -> Result<Option<String>, String> {
        for candidate in candidates {
            let mut path = candidate;
            for _ in 0..MAX_LINK_HOPS {
                let options = ContainerArchiveInfoOptionsBuilder::default()
                    .path(&path)
                    .build();
                let stat = match self
                    .docker
                    .get_container_archive_info(id, Some(options))
                    .await
                {
                    Ok(stat) => stat,
                    Err(error) if is_not_found(&error) => break,
                    Err(error) => {
                        return Err(format!(
                            "resolving executable {name} failed: {}",
                            engine_message(&error)
                        ));
                    }
                };
                if stat.file_mode & GO_MODE_SYMLINK != 0 {
                    let target = stat.link_target;
                    path = if target.starts_with('/') {
                        target
                    } else {
                        let parent = Path::new(&path)
                            .parent()
                            .map(|p| p.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        format!("{parent}/{target}")
                    };
                    continue;
                }
                if stat.file_mode & GO_MODE_TYPE == 0 && stat.file_mode & 0o111 != 0 {
                    return Ok(Some(path));
                }
                return Err(format!(
                    "{name} resolves to {path}, which is not an executable file"
                ));
            }
        }
        Ok(None)
    }

    /// The `#!` interpreter of the file at `path`, read through the engine's archive API.
    /// Unreadable or non-script files yield `None`: the executable itself is already known to
    /// exist, so this only narrows what a 127 can mean.
    async fn read_interpreter(&self, id: &str, path: &str) -> Option<String> {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        let mut archive = self.docker.download_from_container(id, Some(options));
        let mut head = Vec::new();
        while head.len() < ARCHIVE_HEAD_BYTES {
            match archive.next().await {
                Some(Ok(chunk)) => head.extend_from_slice(&chunk),
                _ => break,
            }
        }
        drop(archive);
        let mut entries = tar::Archive::new(std::io::Cursor::new(head));
        let mut entry = entries.entries().ok()?.next()?.ok()?;
        let mut start = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut entry, 256), &mut start).ok()?;
        shebang_interpreter(&start)
    }

    /// Sends SIGKILL; returns whether the engine may have acted on it (accepted, or the
    /// request timed out), so the run can tell its own `kill` event from someone else's.
    async fn kill(&self, id: &str) -> bool {
        let options = KillContainerOptionsBuilder::default()
            .signal("KILL")
            .build();
        match tokio::time::timeout(TEARDOWN_CALL, self.docker.kill_container(id, Some(options)))
            .await
        {
            Ok(Ok(())) => true,
            // A container that already stopped answers 409 and emits no event; anything else
            // is worth a log line.
            Ok(Err(error)) => {
                tracing::debug!(container = %id, error = %engine_message(&error), "kill");
                false
            }
            Err(_) => {
                tracing::warn!(container = %id, "kill request timed out");
                true
            }
        }
    }

    /// Force-removes the container and confirms the engine no longer knows it; returns the
    /// confirmation time.
    /// Kills and removes every container this process created (by its owner label), each
    /// removal confirmed, and returns their ids; used after SIGINT/SIGTERM dropped a run
    /// mid-way. A create request dropped in flight may still complete in the engine, so the
    /// listing is repeated until one, made at least a second after the first, finds none.
    pub async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        let filters = HashMap::from([("label", vec![format!("{LABEL_OWNER}={}", self.owner)])]);
        let settle = Instant::now() + Duration::from_secs(1);
        let mut removed = Vec::new();
        loop {
            let options = ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build();
            let containers =
                self.docker
                    .list_containers(Some(options))
                    .await
                    .map_err(|source| SandboxError::Engine {
                        context: "listing this worker's containers",
                        source,
                    })?;
            let ids: Vec<String> = containers.into_iter().filter_map(|c| c.id).collect();
            if ids.is_empty() && Instant::now() >= settle {
                return Ok(removed);
            }
            for id in ids {
                if self.remove_and_confirm(&id).await.is_none() {
                    return Err(SandboxError::StaleNotRemoved { id });
                }
                removed.push(id);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn remove_and_confirm(&self, id: &str) -> Option<u64> {
        let give_up = Instant::now() + REMOVE_GRACE;
        loop {
            let options = RemoveContainerOptionsBuilder::default()
                .force(true)
                .v(true)
                .build();
            let removal = tokio::time::timeout(
                TEARDOWN_CALL,
                self.docker.remove_container(id, Some(options)),
            )
            .await;
            if let Ok(Err(error)) = &removal {
                tracing::debug!(container = %id, error = %engine_message(error), "remove");
            }
            let confirm =
                tokio::time::timeout(TEARDOWN_CALL, self.docker.inspect_container(id, None)).await;
            match confirm {
                Ok(Err(error)) if is_not_found(&error) => return Some(now_ms()),
                _ if Instant::now() >= give_up => {
                    tracing::error!(container = %id, "container removal could not be confirmed");
                    return None;
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

/// Resolves once the engine reports the container not running.
///
/// A wait that fails (dropped connection, client timeout) is never taken as an exit: it is
/// checked with an inspect and re-issued.
async fn wait_stopped(docker: Docker, id: String) {
    loop {
        let options = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        let first = docker.wait_container(&id, Some(options)).next().await;
        match first {
            // A non-zero exit arrives as this error variant; it is still an exit.
            Some(Ok(_)) | Some(Err(EngineError::DockerContainerWaitError { .. })) => return,
            _ => {
                let running = docker
                    .inspect_container(&id, None)
                    .await
                    .ok()
                    .and_then(|i| i.state)
                    .and_then(|s| s.running);
                if running != Some(true) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

/// The container's engine events up to its first exit after start.
#[derive(Debug, Default)]
struct EventLog {
    started: bool,
    died: bool,
    /// `kill` events before the exit, by signal.
    kills: Vec<String>,
    /// Other actions before the exit that only an outsider causes.
    foreign: Vec<String>,
    /// Why the stream ended before the exit, if it did.
    ended: Option<String>,
}

impl EventLog {
    fn record(&mut self, event: &EventMessage) {
        let action = event.action.as_deref().unwrap_or_default();
        if self.died {
            return;
        }
        // Foreign actions count from creation on (a copy into the container before start is
        // as much tampering as one during the run); the replayed `create` and `attach` and
        // this worker's own archive reads are not among them.
        match action {
            "start" if !self.started => self.started = true,
            "die" if self.started => self.died = true,
            "kill" => self.kills.push(
                event
                    .actor
                    .as_ref()
                    .and_then(|a| a.attributes.as_ref())
                    .and_then(|a| a.get("signal"))
                    .cloned()
                    .unwrap_or_default(),
            ),
            // The engine's own OOM handling, judged from the container state, not an outsider.
            "oom" => {}
            other
                if FOREIGN_ACTIONS.contains(&other)
                    || other.starts_with("exec_")
                    || other == "start" =>
            {
                self.foreign.push(other.chars().take(80).collect());
            }
            _ => {}
        }
    }

    /// Whether anything but the program and `own_kills` SIGKILLs acted on the container.
    fn judge(&self, own_kills: usize) -> EngineEvents {
        if !self.started {
            return EngineEvents::Unconfirmed {
                detail: "the engine's event stream did not show the container's start".into(),
            };
        }
        let mut outside = self.foreign.clone();
        // The sandbox only ever sends SIGKILL, at most `own_kills` times.
        let is_sigkill = |s: &&String| matches!(s.as_str(), "9" | "KILL" | "SIGKILL");
        let sigkills = self.kills.iter().filter(is_sigkill).count();
        for signal in self.kills.iter().filter(|s| !is_sigkill(s)) {
            outside.push(format!("kill (signal {signal})"));
        }
        for _ in 0..sigkills.saturating_sub(own_kills) {
            outside.push("kill (signal 9) not sent by the sandbox".into());
        }
        if !self.died
            && let Some(ended) = &self.ended
        {
            outside.push(format!("{ended} before the container exited"));
        }
        if !outside.is_empty() {
            return EngineEvents::External {
                detail: outside.join(", "),
            };
        }
        if !self.died {
            return EngineEvents::Unconfirmed {
                detail: "the engine's event stream did not show the container's exit".into(),
            };
        }
        EngineEvents::Clean
    }
}

/// Follows the engine's events for container `id` into `log` until its first exit after start.
async fn watch_events(docker: Docker, id: String, log: Arc<Mutex<EventLog>>) {
    let since = (now_ms() / 1000).saturating_sub(EVENTS_REPLAY.as_secs());
    let filters = HashMap::from([
        ("container", vec![id.clone()]),
        ("type", vec!["container".to_string()]),
    ]);
    let options = EventsOptionsBuilder::default()
        .since(&since.to_string())
        .filters(&filters)
        .build();
    let mut stream = docker.events(Some(options));
    loop {
        let ended = match stream.next().await {
            Some(Ok(event)) => {
                if event.actor.as_ref().and_then(|a| a.id.as_deref()) != Some(id.as_str()) {
                    continue;
                }
                let Ok(mut log) = log.lock() else { return };
                log.record(&event);
                if log.died {
                    return;
                }
                continue;
            }
            Some(Err(error)) => format!("the engine's event stream failed ({error})"),
            None => "the engine's event stream ended".to_string(),
        };
        if let Ok(mut log) = log.lock() {
            log.ended = Some(ended);
        }
        return;
    }
}

type OutputStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<LogOutput, EngineError>> + Send>>;

/// Reads the attached output to its end. Bytes are captured until the combined count passes
/// `cap` (the crossing chunk included), then discarded; passing the cap is signalled once.
/// Returns both captures, whether the cap was passed, and a stream error if one ended it.
async fn read_output(
    mut output: OutputStream,
    cap: u64,
    over_cap: tokio::sync::oneshot::Sender<()>,
) -> (OutputCapture, OutputCapture, bool, Option<String>) {
    let mut stdout = OutputCapture::new();
    let mut stderr = OutputCapture::new();
    let mut over_cap = Some(over_cap);
    let mut error = None;
    while let Some(item) = output.next().await {
        let (capture, message) = match item {
            Ok(LogOutput::StdOut { message }) => (&mut stdout, message),
            Ok(LogOutput::StdErr { message }) => (&mut stderr, message),
            Ok(_) => continue,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        if over_cap.is_some() {
            capture.push(&message);
            if stdout.bytes().saturating_add(stderr.bytes()) > cap
                && let Some(sender) = over_cap.take()
            {
                // The receiver is gone only when the run already ended; nothing to tell.
                let _ = sender.send(());
            }
        }
    }
    let over = over_cap.is_none();
    (stdout, stderr, over, error)
}

async fn sample_stats(docker: Docker, id: String, into: Arc<Mutex<ResourceFacts>>) {
    let options = StatsOptionsBuilder::default().stream(true).build();
    let mut stats = docker.stats(&id, Some(options));
    while let Some(Ok(sample)) = stats.next().await {
        let memory = sample.memory_stats.unwrap_or_default();
        let peak = memory.max_usage.or(memory.usage);
        let cpu = sample
            .cpu_stats
            .and_then(|c| c.cpu_usage)
            .and_then(|u| u.total_usage);
        if let Ok(mut facts) = into.lock() {
            if let Some(peak) = peak.filter(|p| *p > 0) {
                facts.peak_memory_bytes = Some(facts.peak_memory_bytes.unwrap_or(0).max(peak));
            }
            if let Some(cpu) = cpu.filter(|c| *c > 0) {
                facts.cpu_time_ns = Some(cpu);
            }
        }
    }
}

/// The interpreter named by a `#!` line at the start of `head`, as the kernel reads it: the
/// first word after `#!`, leading blanks skipped.
fn shebang_interpreter(head: &[u8]) -> Option<String> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let word = line
        .split(|b| *b == b' ' || *b == b'\t')
        .find(|w| !w.is_empty())?;
    std::str::from_utf8(word).ok().map(str::to_string)
}

fn container_name(run_id: &str) -> String {
    let safe: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("agent-bounties-{safe}-{}-{nanos}", std::process::id())
}

/// Checks the spec and converts its numbers to the engine's types; returns the limits and the
/// canonical mount sources.
fn validate(spec: &SandboxSpec) -> Result<(Limits, String, String), String> {
    if spec.argv.first().is_none_or(|a| a.is_empty()) {
        return Err("argv is empty".into());
    }
    if !is_pinned(&spec.image) {
        return Err(format!(
            "image {} is not pinned by sha256 digest",
            spec.image
        ));
    }
    let positive = |name: &str, value: u64| -> Result<i64, String> {
        match i64::try_from(value) {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("{name} {value} is out of range")),
        }
    };
    let nano_cpus = positive("cpu_millis", spec.cpu_millis)?
        .checked_mul(1_000_000)
        .ok_or("cpu_millis is out of range")?;
    let limits = Limits {
        nano_cpus,
        memory: positive("memory_bytes", spec.memory_bytes)?,
        pids: positive("pids_limit", spec.pids_limit)?,
    };
    positive("tmpfs_bytes", spec.tmpfs_bytes)?;
    if spec.timeout.is_zero() {
        return Err("timeout is zero".into());
    }
    let canonical = |what: &str, dir: &Path| -> Result<String, String> {
        let path = dir
            .canonicalize()
            .map_err(|e| format!("{what} directory {} is unusable: {e}", dir.display()))?;
        if !path.is_dir() {
            return Err(format!("{what} path {} is not a directory", path.display()));
        }
        path.to_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{what} path {} is not UTF-8", path.display()))
    };
    let source = canonical("source", &spec.source_dir)?;
    let benchmark = canonical("benchmark", &spec.benchmark_dir)?;
    Ok((limits, source, benchmark))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(action: &str, signal: Option<&str>) -> EventMessage {
        EventMessage {
            action: Some(action.into()),
            actor: Some(bollard::models::EventActor {
                id: Some("c".into()),
                attributes: signal.map(|s| HashMap::from([("signal".into(), s.into())])),
            }),
            ..EventMessage::default()
        }
    }

    fn log_of(events: &[(&str, Option<&str>)]) -> EventLog {
        let mut log = EventLog::default();
        for (action, signal) in events {
            log.record(&event(action, *signal));
        }
        log
    }

    #[test]
    fn a_run_with_only_its_own_events_is_clean() {
        let log = log_of(&[
            ("create", None),
            ("attach", None),
            ("archive-path", None),
            ("start", None),
            ("oom", None),
            ("die", None),
            // After the exit: our own removal.
            ("kill", Some("9")),
            ("destroy", None),
        ]);
        assert_eq!(log.judge(0), EngineEvents::Clean);
        // Our own timeout kill.
        let log = log_of(&[("start", None), ("kill", Some("9")), ("die", None)]);
        assert_eq!(log.judge(1), EngineEvents::Clean);
    }

    #[test]
    fn kills_stops_and_tampering_we_did_not_do_are_external() {
        for events in [
            vec![("start", None), ("kill", Some("9")), ("die", None)],
            vec![("start", None), ("kill", Some("15")), ("die", None)],
            vec![
                ("start", None),
                ("kill", Some("15")),
                ("kill", Some("9")),
                ("die", None),
                ("stop", None),
            ],
            vec![
                ("start", None),
                ("pause", None),
                ("unpause", None),
                ("die", None),
            ],
            vec![("start", None), ("exec_create: sh", None), ("die", None)],
            vec![("extract-to-dir", None), ("start", None), ("die", None)],
            vec![("start", None), ("update", None), ("die", None)],
        ] {
            let log = log_of(&events);
            assert!(
                matches!(log.judge(0), EngineEvents::External { .. }),
                "{events:?}"
            );
        }
        // Two SIGKILLs where we sent one.
        let log = log_of(&[
            ("start", None),
            ("kill", Some("9")),
            ("kill", Some("9")),
            ("die", None),
        ]);
        assert!(matches!(log.judge(1), EngineEvents::External { .. }));
    }

    #[test]
    fn a_stream_without_start_or_exit_proves_nothing() {
        let log = log_of(&[("create", None)]);
        assert!(matches!(log.judge(0), EngineEvents::Unconfirmed { .. }));
        let log = log_of(&[("start", None)]);
        assert!(matches!(log.judge(0), EngineEvents::Unconfirmed { .. }));
        // The daemon going away mid-run ends the stream before the exit.
        let mut log = log_of(&[("start", None)]);
        log.ended = Some("the engine's event stream ended".into());
        assert!(matches!(log.judge(0), EngineEvents::External { .. }));
    }

    #[test]
    fn only_full_sha256_pins_are_accepted() {
        let hex = "a".repeat(64);
        assert!(is_pinned(&format!("127.0.0.1:5000/x@sha256:{hex}")));
        assert!(!is_pinned("busybox:latest"));
        assert!(!is_pinned(&format!("@sha256:{hex}")));
        assert!(!is_pinned(&format!("x@sha256:{}", "A".repeat(64))));
        assert!(!is_pinned(&format!("x@sha256:{}", "a".repeat(63))));
    }

    #[test]
    fn shebang_interpreter_is_the_first_word() {
        assert_eq!(
            shebang_interpreter(b"#!/bin/sh\necho"),
            Some("/bin/sh".into())
        );
        assert_eq!(
            shebang_interpreter(b"#! \t/usr/bin/env python3 -u\n"),
            Some("/usr/bin/env".into())
        );
        assert_eq!(shebang_interpreter(b"\x7fELF..."), None);
        assert_eq!(shebang_interpreter(b"#!\n"), None);
        assert_eq!(shebang_interpreter(b""), None);
    }

    #[test]
    fn executable_candidates_follow_path_rules() {
        assert_eq!(executable_candidates("/bin/sh", Some("/x")), ["/bin/sh"]);
        assert_eq!(
            executable_candidates("./run.sh", None),
            ["/workspace/./run.sh"]
        );
        assert_eq!(
            executable_candidates("cat", Some("/usr/bin:/bin/:relative")),
            ["/usr/bin/cat", "/bin/cat"]
        );
    }
}
