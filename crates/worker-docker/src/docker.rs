//! The real executor: connects to the Docker Engine, sweeps stale containers and drives the
//! run's lifecycle.
//!
//! Every run follows the same fixed sequence — check image, check inputs, create, read the
//! profile back, resolve the executable, attach, start, watch output and deadline, kill if
//! needed, wait, inspect, check inputs, remove, confirm removal — and every path after create
//! ends in removal. What each engine answer means is decided in pure steps ([`worker_sandbox::spec`],
//! [`crate::image`], [`crate::events`], [`crate::executable`]'s probe, [`decide`]); this
//! module only sequences them with the engine calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;

use crate::api::Api;
use crate::runtime::OciRuntime;
use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use verifier_sdk::oci_runtime::{RUNC, RUNSC};

use super::decision::{
    Decision, EngineEvents, InputCheck, NoVerdictReason, RunObservation, StoppedBy, decide,
};
use super::engine::{self, engine_message, enum_text, now_ms};
use super::events::EventLog;
use super::evidence::{
    ContainerFacts, DOCKER_EXECUTOR, EVIDENCE_SCHEMA_VERSION, EngineFacts, EvidenceRecord,
    ExitFacts, IsolationEvidence, RequestFacts, ResourceFacts, Timestamps,
};
use super::exec_cache::{Key, Volatile};
use super::output::{self, Drained, OutputStream};
use super::profile;
use super::streams::{FullOutput, OutputCapture};
use super::{
    InputPhase, LABEL_OWNER, LABEL_RUN_ID, LABEL_VERIFIER, LABEL_WORKER_VERSION, RunHooks,
    RunReport, SandboxError, SandboxSpec, executable, hits, image, owner, spec, teardown,
};

/// How long after the observed stop the engine's `die` event may take to arrive.
const EVENTS_GRACE: Duration = Duration::from_secs(10);

/// Runs sandboxed commands on a Docker Engine.
#[derive(Clone, Debug)]
pub struct DockerExecutor<A: Api = Docker> {
    docker: A,
    engine: EngineFacts,
    owner: String,
    runtime: OciRuntime,
}

struct Ctx<'a> {
    spec: &'a SandboxSpec,
    hooks: &'a dyn RunHooks,
    evidence: EvidenceRecord,
    observed: hits::Observed,
    output: FullOutput,
}

impl DockerExecutor<Docker> {
    /// Connects through `DOCKER_HOST` (or the default socket) and negotiates the API version;
    /// containers run under runc, asked for by name.
    pub async fn connect() -> Result<Self, SandboxError> {
        Self::connect_under(RUNC).await
    }

    /// [`Self::connect`], with containers under the OCI runtime `oci_runtime`.
    pub async fn connect_under(oci_runtime: &str) -> Result<Self, SandboxError> {
        let docker = Docker::connect_with_defaults().map_err(crate::endpoint::unavailable)?;
        // Three independent questions: asked at once they cost one round trip, not three
        // (about 7 ms each on an idle engine, on every run).
        let (docker, version, info) = tokio::try_join!(
            docker.clone().negotiate_version(),
            docker.version(),
            docker.info()
        )
        .map_err(crate::endpoint::unavailable)?;
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
        let runtime = OciRuntime::resolve(
            oci_runtime,
            info.runtimes.as_ref(),
            info.runc_commit.as_ref(),
        )
        .await;
        Ok(Self {
            docker,
            engine,
            owner: owner::current(),
            runtime,
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
}

impl<A: Api> DockerExecutor<A> {
    /// An executor over `api` (the lifecycle tests' scripted engine), with the facts its
    /// evidence records and the owner label its containers carry.
    #[cfg(test)]
    pub(crate) fn over(api: A, engine: EngineFacts, owner: String) -> Self {
        Self {
            docker: api,
            engine,
            owner,
            runtime: OciRuntime {
                name: RUNC.to_string(),
                facts: Some(verifier_sdk::oci_runtime::OciRuntimeFacts {
                    name: RUNC.to_string(),
                    path: RUNC.to_string(),
                    args: Vec::new(),
                    version: "runc version test".to_string(),
                }),
                offered: vec![RUNC.to_string()],
            },
        }
    }

    /// The OCI runtime this executor creates containers under, as the engine registers it.
    pub fn oci_runtime(&self) -> &OciRuntime {
        &self.runtime
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
                source: source.into(),
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
            if teardown::remove_and_confirm(&self.docker, &id)
                .await
                .is_none()
            {
                return Err(SandboxError::StaleNotRemoved { id });
            }
            removed.push(id);
        }
        Ok(removed)
    }

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
                        source: source.into(),
                    })?;
            let ids: Vec<String> = containers.into_iter().filter_map(|c| c.id).collect();
            if ids.is_empty() && Instant::now() >= settle {
                return Ok(removed);
            }
            for id in ids {
                if teardown::remove_and_confirm(&self.docker, &id)
                    .await
                    .is_none()
                {
                    return Err(SandboxError::StaleNotRemoved { id });
                }
                removed.push(id);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
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
            observed: hits::Observed::default(),
            output: FullOutput::default(),
        };
        let decision = self.run_phases(&mut ctx).await?;
        ctx.evidence.outcome = decision.clone();
        Ok(RunReport {
            decision,
            evidence: ctx.evidence,
            observed: ctx.observed,
            output: ctx.output,
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
            oci_runtime: self.runtime.facts.clone(),
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
            tests: None,
        }
    }

    async fn run_phases(&self, ctx: &mut Ctx<'_>) -> Result<Decision, SandboxError> {
        let spec = ctx.spec;
        // Before anything is created: never a silent fallback to another runtime.
        if let Some(detail) = self.runtime.unavailable() {
            return Ok(Decision::no_verdict(
                NoVerdictReason::RuntimeUnavailable,
                detail,
            ));
        }
        let valid = match spec::validate(spec) {
            Ok(valid) => valid,
            Err(error) => {
                return Ok(Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    error.to_string(),
                ));
            }
        };
        let inspect = match engine::inspect_image(&self.docker, spec).await? {
            Ok(inspect) => inspect,
            Err(decision) => return Ok(decision),
        };
        ctx.evidence.image = Some(image::describe(&inspect, spec));
        let image_path = match image::check_image(&inspect, spec) {
            Ok(facts) => facts.path,
            Err(decision) => return Ok(decision),
        };
        if let InputCheck::Mismatch { detail } = ctx.hooks.check_inputs(InputPhase::BeforeCreate) {
            return Ok(Decision::no_verdict(NoVerdictReason::InputMismatch, detail));
        }

        let want = profile::requested(
            spec,
            valid.limits,
            image_path.as_deref(),
            &valid.source,
            &valid.benchmark,
            &self.runtime.name,
        );
        let id = match self.create(ctx, &want, image_path.as_deref()).await {
            Ok(id) => id,
            Err(decision) => return Ok(decision),
        };
        let decision = self
            .run_created(ctx, &id, &want, image_path.as_deref())
            .await;
        // Removal happens on every path after create; an unconfirmed removal voids the run.
        let removed_at = teardown::remove_and_confirm(&self.docker, &id).await;
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

    /// Creates the labelled container for the requested profile; returns its id.
    async fn create(
        &self,
        ctx: &mut Ctx<'_>,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Result<String, Decision> {
        let spec = ctx.spec;
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
            want,
            profile::environment(spec.test_seed, image_path),
            labels,
        );
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|error| {
                Decision::no_verdict(
                    NoVerdictReason::CreateFailed,
                    format!(
                        "the engine refused to create the container: {}",
                        engine_message(&error)
                    ),
                )
            })?;
        ctx.evidence.timestamps.create_ms = Some(now_ms());
        ctx.evidence.container = Some(ContainerFacts {
            id: created.id.clone(),
            name,
        });
        Ok(created.id)
    }

    async fn run_created(
        &self,
        ctx: &mut Ctx<'_>,
        id: &str,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Decision {
        let settled = match self.check_created(ctx, id, want, image_path).await {
            Ok(settled) => settled,
            Err(decision) => return decision,
        };
        let attach_options = AttachContainerOptionsBuilder::default()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .stdin(false)
            .logs(false)
            .build();
        let output = match self.docker.attach_container(id, Some(attach_options)).await {
            Ok(attached) => attached.output,
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

        // Subscribed before start (and replaying the engine's recent buffer besides), so every
        // action on the container from its start to its exit is seen.
        let event_log = Arc::new(Mutex::new(EventLog::default()));
        let events_task = tokio::spawn(engine::watch_events(
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
            if let Some(state) = teardown::final_state(&self.docker, id).await {
                teardown::record_final_state(&mut ctx.evidence, state);
            }
            return decision;
        }
        let deadline = Instant::now() + ctx.spec.timeout;
        ctx.evidence.timestamps.start_ms = Some(now_ms());
        let watched = self
            .supervise(
                id,
                ctx.spec.max_output_bytes,
                deadline,
                output,
                events_task,
                &event_log,
            )
            .await;
        let decision = self.conclude(ctx, id, watched).await;
        if settled == executable::Settled::Cached
            && decision != (Decision::Completed { exit_code: 0 })
            && let Some(refused) = self.recheck_cached(ctx, id, want, image_path).await
        {
            return refused;
        }
        decision
    }

    /// The cache for this run's resolution, when the caller offers one.
    fn cache<'a>(
        ctx: &Ctx<'a>,
        image_id: &'a str,
        want: &profile::Isolation,
        image_path: Option<&'a str>,
    ) -> Option<executable::Cache<'a>> {
        let spec = ctx.spec;
        let dir = ctx.hooks.executable_cache()?;
        let argv0 = spec.argv.first().map(String::as_str).unwrap_or_default();
        Some(executable::Cache {
            dir,
            key: Key {
                image_id,
                argv0,
                path_env: image_path,
            },
            volatile: Volatile::new(
                want.mounts
                    .iter()
                    .map(|m| m.target.as_str())
                    .chain(want.tmpfs.keys().map(String::as_str)),
            ),
        })
    }

    /// A resolution taken from the cache skipped the pre-check, and only a run exiting 0 proves
    /// the init could execute the command (it exits non-zero when it cannot). For any other
    /// end, resolve in the stopped container — the same image and read-only mounts — and
    /// refuse exactly as the pre-check would have: the cache never changes a decision.
    async fn recheck_cached(
        &self,
        ctx: &Ctx<'_>,
        id: &str,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Option<Decision> {
        let spec = ctx.spec;
        let argv0 = spec.argv.first().map(String::as_str).unwrap_or_default();
        let detail = executable::resolve(&self.docker, id, argv0, image_path)
            .await
            .err()?;
        tracing::warn!(
            argv0,
            %detail,
            "a cached executable resolution did not hold; forgetting it"
        );
        let image_id = image_id(ctx);
        if let Some(cache) = Self::cache(ctx, &image_id, want, image_path) {
            super::exec_cache::forget(&cache.dir, &cache.key);
        }
        Some(Decision::no_verdict(NoVerdictReason::StartFailed, detail))
    }

    /// Reads the created container back against the requested profile and resolves the
    /// executable in it (or takes it from the cache); the error is the no-verdict.
    async fn check_created(
        &self,
        ctx: &mut Ctx<'_>,
        id: &str,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Result<executable::Settled, Decision> {
        let inspect = self
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|error| {
                Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    format!(
                        "inspecting the created container failed: {}",
                        engine_message(&error)
                    ),
                )
            })?;
        ctx.evidence.timestamps.engine_created = inspect.created.clone();
        let observed = profile::observed(&inspect);
        let mismatches = want.mismatches(&observed);
        ctx.evidence.isolation = Some(IsolationEvidence {
            requested: want.clone(),
            observed,
            mismatches: mismatches.clone(),
        });
        if !mismatches.is_empty() {
            return Err(Decision::no_verdict(
                NoVerdictReason::IsolationMismatch,
                format!("created container differs from the profile in {mismatches:?}"),
            ));
        }
        let argv0 = ctx
            .spec
            .argv
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let image_id = image_id(ctx);
        let cache = Self::cache(ctx, &image_id, want, image_path);
        executable::resolve_cached(&self.docker, id, argv0, image_path, cache.as_ref())
            .await
            .map_err(|detail| Decision::no_verdict(NoVerdictReason::StartFailed, detail))
    }

    /// Watches the started container until it exits, passes the output cap or the deadline
    /// (killing it for the last two), then drains its output and judges its events.
    async fn supervise(
        &self,
        id: &str,
        max_output_bytes: u64,
        deadline: Instant,
        output: OutputStream,
        mut events: JoinHandle<()>,
        event_log: &Mutex<EventLog>,
    ) -> Watched {
        // "not-running" also matches a container that stopped before the wait was sent.
        let mut wait = Box::pin(engine::wait_stopped(self.docker.clone(), id.to_string()));
        let resources = Arc::new(Mutex::new(ResourceFacts::default()));
        let sampler = tokio::spawn(engine::sample_stats(
            self.docker.clone(),
            id.to_string(),
            Arc::clone(&resources),
        ));
        let docker = self.docker.clone();
        let container = id.to_string();
        let main_pid = async move {
            let inspect = docker.inspect_container(&container, None).await.ok()?;
            inspect.state?.pid
        };
        let hit_watch = hits::Watch::start(main_pid, id.to_string());
        // The reader runs on its own and always reads to the end: if we stopped reading, the
        // engine's stream copier would block and with it the container's exit handling, so a
        // kill, wait or inspect would hang.
        let (over_cap_tx, mut over_cap) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(output::read_output(output, max_output_bytes, over_cap_tx));

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
                        own_kills += usize::from(teardown::kill(&self.docker, id).await);
                    }
                }
                () = &mut wait, if !exited => exited = true,
                () = tokio::time::sleep_until(deadline) => {
                    stopped_by = StoppedBy::Timeout;
                    own_kills += usize::from(teardown::kill(&self.docker, id).await);
                }
            }
        }
        let drain_until = Instant::now() + teardown::STOP_GRACE;
        if !exited {
            exited = tokio::time::timeout_at(drain_until, &mut wait)
                .await
                .is_ok();
        }
        let output = output::collect(reader, drain_until).await;
        // Output over the cap is a no-verdict even when the program exited before our kill.
        if stopped_by == StoppedBy::None && output.over_cap {
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
        let resources = resources.lock().map(|r| r.clone()).unwrap_or_default();
        Watched {
            stopped_by,
            events,
            output,
            resources,
            observed: hit_watch.stop(),
        }
    }

    /// Records what the watch saw and the final state, then decides.
    async fn conclude(&self, ctx: &mut Ctx<'_>, id: &str, watched: Watched) -> Decision {
        let Watched {
            stopped_by,
            events,
            output,
            resources,
            observed,
        } = watched;
        ctx.evidence.resources = resources;
        // Under gVisor the host's counters belong to the Sentry, not to the solver's processes:
        // the pids cgroup counts the Sentry's threads and ptrace stubs (and nproc refuses guest
        // forks inside it), and the guest's network and tmpfs live in the Sentry. Nothing read
        // there says which limit the program met, so no hit is `observed`; `explain` can only
        // call them `likely`, from the output.
        ctx.observed = if self.runtime.name == RUNSC {
            hits::Observed::default()
        } else {
            observed
        };
        let (stdout, stdout_full) = output.stdout.finish_keeping();
        let (stderr, stderr_full) = output.stderr.finish_keeping();
        ctx.evidence.stdout = stdout;
        ctx.evidence.stderr = stderr;
        // Bounded so a flood of long names cannot push the record past what explain and the
        // signer read.
        ctx.evidence.tests = Some(output.tests.finish().fit(test_outcomes::RECORD_BYTES));
        ctx.output = FullOutput {
            stdout: stdout_full,
            stderr: stderr_full,
        };
        ctx.evidence.exit.stopped_by = stopped_by;

        let running = match teardown::final_state(&self.docker, id).await {
            Some(state) => teardown::record_final_state(&mut ctx.evidence, state),
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
        };
        if running {
            // Never decide on a live container; removal below force-kills it.
            return Decision::no_verdict(
                NoVerdictReason::InternalError,
                "the container was still running after the stop grace period",
            );
        }
        if let Some(error) = output.error {
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
}

/// What [`DockerExecutor::supervise`] saw of the running container.
struct Watched {
    stopped_by: StoppedBy,
    events: EngineEvents,
    output: Drained,
    resources: ResourceFacts,
    observed: hits::Observed,
}

/// The inspected image's id (empty when the inspect gave none: never cached).
fn image_id(ctx: &Ctx<'_>) -> String {
    ctx.evidence
        .image
        .as_ref()
        .map(|image| image.id.clone())
        .unwrap_or_default()
}

fn container_name(run_id: &str) -> String {
    let safe: String = run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("agent-bounties-{safe}-{}-{nanos}", std::process::id())
}

#[async_trait::async_trait]
impl<A: Api> worker_sandbox::Engine for DockerExecutor<A> {
    fn facts(&self) -> &EngineFacts {
        &self.engine
    }

    async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        DockerExecutor::run(self, spec, hooks).await
    }

    async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError> {
        DockerExecutor::cleanup_stale(self).await
    }

    async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        DockerExecutor::remove_own_containers(self).await
    }

    async fn host_resources(&self) -> Result<worker_sandbox::HostResources, SandboxError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|source| SandboxError::Engine {
                context: "reading the engine's /info",
                source: source.into(),
            })?;
        Ok(worker_sandbox::HostResources {
            cpus: info.ncpu,
            memory_bytes: info.mem_total,
        })
    }

    async fn mounted_paths(
        &self,
    ) -> Result<std::collections::BTreeSet<std::path::PathBuf>, SandboxError> {
        let options = ListContainersOptionsBuilder::default().all(true).build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|source| SandboxError::Engine {
                context: "listing containers' mounts",
                source: source.into(),
            })?;
        Ok(containers
            .into_iter()
            .flat_map(|c| c.mounts.unwrap_or_default())
            .filter_map(|m| m.source)
            .map(std::path::PathBuf::from)
            .collect())
    }
}
