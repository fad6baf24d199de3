//! The run's lifecycle, written once over [`ContainerEngine`]: sweeping stale containers and
//! driving one run from image check to confirmed removal.
//!
//! Every run follows the same fixed sequence — check image, check inputs, create, read the
//! profile back and resolve the executable (attaching and subscribing to the events beside
//! them), start, watch output, deadline and the container's cgroup ([`resources`]), kill if
//! needed, wait, inspect, check inputs, remove, confirm removal — and every path after create ends in removal. What each engine answer means is decided in pure steps ([`crate::spec`],
//! [`image`], [`events`], [`executable`]'s probe, [`decide`]); this module only sequences them
//! with the engine calls.

mod alternatives;
mod calls;
mod events;
pub mod executable;
mod image;
mod output;
mod resources;
mod runtime;
mod teardown;

#[cfg(any(test, feature = "fake-engine"))]
pub mod fake;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use verifier_sdk::oci_runtime::RUNSC;
use worker_store::clock::{Clock, SystemClock};

use crate::decision::{
    Decision, EngineEvents, InputCheck, NoVerdictReason, RunObservation, StoppedBy, decide,
};
use crate::engine::{CgroupLayout, ContainerEngine, ContainerSummary, CreateRequest, OciRuntime};
use crate::evidence::{
    ContainerFacts, EVIDENCE_SCHEMA_VERSION, EngineFacts, EvidenceRecord, ExitFacts,
    IsolationEvidence, ResourceFacts, Timestamps,
};
use crate::exec_cache::{Key, Volatile};
use crate::streams::{FullOutput, OutputCapture};
use crate::{
    InputPhase, LABEL_OWNER, LABEL_RUN_ID, LABEL_VERIFIER, LABEL_WORKER_VERSION, RunHooks,
    RunReport, SandboxError, SandboxSpec, hits, identity, owner, profile, spec,
};
use events::EventLog;
use output::{Drained, OutputStream};

/// How long after the observed stop the engine's `die` event may take to arrive.
const EVENTS_GRACE: Duration = Duration::from_secs(10);

/// Runs sandboxed commands on the engine `E`.
#[derive(Clone, Debug)]
pub struct Lifecycle<E: ContainerEngine> {
    engine: E,
    facts: EngineFacts,
    /// Where `engine` puts its containers' cgroups on this host, as it says of itself.
    cgroups: CgroupLayout,
    owner: String,
    runtime: OciRuntime,
    /// The wall clock the evidence's times and a stale container's age are read from.
    clock: Arc<dyn Clock>,
}

/// `clock`'s wall time in unix milliseconds (zero before the epoch).
fn wall_ms(clock: &dyn Clock) -> u64 {
    u64::try_from(clock.wall_ms()).unwrap_or(0)
}

struct Ctx<'a> {
    spec: &'a SandboxSpec,
    hooks: &'a dyn RunHooks,
    evidence: EvidenceRecord,
    observed: hits::Observed,
    output: FullOutput,
}

impl<E: ContainerEngine> Lifecycle<E> {
    /// A lifecycle over `engine`, creating its containers under the OCI runtime `runtime` and
    /// labelling them with this process as their owner. The engine's facts and its
    /// registration of `runtime` are asked of the engine itself, at once, so what the evidence
    /// records is what the engine driven says of itself.
    pub async fn connect(engine: E, runtime: &str) -> Result<Self, SandboxError> {
        Self::connect_owned_by(engine, runtime, owner::current()).await
    }

    /// [`Self::connect`] with the owner label `owner` (the lifecycle tests').
    pub async fn connect_owned_by(
        engine: E,
        runtime: &str,
        owner: String,
    ) -> Result<Self, SandboxError> {
        let unreachable = |error: crate::engine::CallError| match error {
            crate::engine::CallError::Unreachable(source) => engine.unreachable(source),
            // An engine that answers but refuses to describe itself is no engine to run on.
            other => SandboxError::RuntimeUnavailable(Box::new(other)),
        };
        let (facts, runtime) = tokio::try_join!(engine.engine_facts(), engine.oci_runtime(runtime))
            .map_err(unreachable)?;
        Ok(Self {
            cgroups: engine.cgroup_layout(&facts),
            engine,
            facts,
            owner,
            runtime,
            clock: Arc::new(SystemClock::new()),
        })
    }

    /// The lifecycle reading its times from `clock` (the system's by default).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    fn now_ms(&self) -> u64 {
        wall_ms(self.clock.as_ref())
    }

    /// The engine the lifecycle drives.
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The engine, to reconfigure it (for example its request timeout).
    pub fn engine_mut(&mut self) -> &mut E {
        &mut self.engine
    }

    /// Engine and kernel facts recorded in every evidence record.
    pub fn facts(&self) -> &EngineFacts {
        &self.facts
    }

    /// The facts to record, for what the engine's connector learns beside the trait's calls
    /// (the host facts `worker doctor` examines).
    pub fn facts_mut(&mut self) -> &mut EngineFacts {
        &mut self.facts
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
        let label = format!("{LABEL_VERIFIER}=1");
        let containers = self
            .list_containers(Some(&label), "listing labelled containers")
            .await?;
        let mut removed = Vec::new();
        for container in containers {
            let Some(id) = container.id else { continue };
            let owner = container
                .labels
                .get(LABEL_OWNER)
                .map(String::as_str)
                .unwrap_or_default();
            let running = container.running;
            let age = container
                .created
                .and_then(|created| u64::try_from(created).ok())
                .map_or(Duration::ZERO, |created| {
                    Duration::from_secs((self.now_ms() / 1000).saturating_sub(created))
                });
            if !owner::is_removable(owner, running, age) {
                continue;
            }
            tracing::info!(container = %id, owner, "removing stale sandbox container");
            removed.push(self.remove_confirmed(id).await?);
        }
        Ok(removed)
    }

    /// The engine's containers, every one or those carrying `label`; `context` names the
    /// listing in the error when the engine fails.
    async fn list_containers(
        &self,
        label: Option<&str>,
        context: &'static str,
    ) -> Result<Vec<ContainerSummary>, SandboxError> {
        self.engine
            .list_containers(label)
            .await
            .map_err(|source| SandboxError::Engine {
                context,
                source: source.into(),
            })
    }

    /// Removes container `id` for a sweep and returns it once the engine confirms it gone; a
    /// container left behind fails the sweep.
    async fn remove_confirmed(&self, id: String) -> Result<String, SandboxError> {
        if teardown::remove_and_confirm(&self.engine, &id, self.clock.as_ref())
            .await
            .is_none()
        {
            return Err(SandboxError::StaleNotRemoved { id });
        }
        Ok(id)
    }

    /// Kills and removes every container this process created (by its owner label), each
    /// removal confirmed, and returns their ids; used after SIGINT/SIGTERM dropped a run
    /// mid-way. A create request dropped in flight may still complete in the engine, so the
    /// listing is repeated until one, made at least a second after the first, finds none.
    pub async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        let label = format!("{LABEL_OWNER}={}", self.owner);
        let settle = Instant::now() + Duration::from_secs(1);
        let mut removed = Vec::new();
        loop {
            let containers = self
                .list_containers(Some(&label), "listing this worker's containers")
                .await?;
            let ids: Vec<String> = containers.into_iter().filter_map(|c| c.id).collect();
            if ids.is_empty() && Instant::now() >= settle {
                return Ok(removed);
            }
            for id in ids {
                removed.push(self.remove_confirmed(id).await?);
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
            executor: self.engine.executor().to_string(),
            run_id: spec.run_id.clone(),
            response_hash: None,
            worker_version: verifier_sdk::build::identity().to_owned(),
            worker_binary_sha256: verifier_sdk::build::binary_sha256(),
            engine: self.facts.clone(),
            oci_runtime: self.runtime.facts.clone(),
            image: None,
            request: spec.request.clone(),
            isolation: None,
            container: None,
            timestamps: Timestamps {
                begin_ms: self.now_ms(),
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
        // A batch's answer for this exact pinned reference, else the engine's now; either is
        // held to this run's spec by the same check.
        let memo = ctx.hooks.image_memo();
        let remembered = memo.and_then(|m| m.get(&spec.image));
        let from_memo = remembered.is_some();
        let inspect = match remembered {
            Some(inspect) => inspect,
            None => match calls::inspect_image(&self.engine, spec).await? {
                Ok(inspect) => inspect,
                Err(decision) => return Ok(decision),
            },
        };
        ctx.evidence.image = Some(image::describe(&inspect, spec));
        let image_path = match image::check_image(&inspect, spec) {
            Ok(facts) => facts.path,
            Err(decision) => return Ok(decision),
        };
        if let Some(memo) = memo.filter(|_| !from_memo) {
            memo.put(&spec.image, inspect);
        }
        if let InputCheck::Mismatch { detail } = ctx.hooks.check_inputs(InputPhase::BeforeCreate) {
            return Ok(Decision::no_verdict(NoVerdictReason::InputMismatch, detail));
        }

        // The sandbox's own host uid, held from before create until the removal is confirmed,
        // so no other sandbox on the host shares its per-user kernel budgets (crate::identity).
        let identity = match identity::lease() {
            Ok(identity) => identity,
            Err(error) => {
                return Ok(Decision::no_verdict(
                    NoVerdictReason::RuntimeUnavailable,
                    error.to_string(),
                ));
            }
        };
        let want = profile::requested(
            spec,
            valid.limits,
            image_path.as_deref(),
            &valid.source,
            &valid.benchmark,
            &self.runtime.name,
            identity.uid(),
        );
        let id = match self.create(ctx, &want, image_path.as_deref()).await {
            Ok(id) => id,
            Err(decision) => {
                // The image may have gone since the answer was kept: the next run asks again.
                if let Some(memo) = memo {
                    memo.forget(&spec.image);
                }
                return Ok(decision);
            }
        };
        let decision = self
            .run_created(ctx, &id, &want, image_path.as_deref())
            .await;
        // Removal happens on every path after create; an unconfirmed removal voids the run.
        let removed_at = teardown::remove_and_confirm(&self.engine, &id, self.clock.as_ref()).await;
        ctx.evidence.exit.removed = removed_at.is_some();
        ctx.evidence.timestamps.remove_ms = removed_at;
        if removed_at.is_none() {
            // The container may still run as the uid: the lease stays held for the life of
            // this process rather than be handed to the next sandbox.
            std::mem::forget(identity);
            return Ok(Decision::no_verdict(
                NoVerdictReason::InternalError,
                format!("removal of container {id} could not be confirmed"),
            ));
        }
        drop(identity);
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
                verifier_sdk::build::identity().to_owned(),
            ),
            (LABEL_OWNER.to_string(), self.owner.clone()),
        ]);
        let request = CreateRequest {
            name: name.clone(),
            image: spec.image.clone(),
            profile: want.clone(),
            env: profile::environment(spec.request.test_seed, image_path),
            labels,
        };
        let id = self
            .engine
            .create_container(&request)
            .await
            .map_err(|error| {
                Decision::no_verdict(
                    NoVerdictReason::CreateFailed,
                    format!(
                        "the engine refused to create the container: {}",
                        error.message()
                    ),
                )
            })?;
        ctx.evidence.timestamps.create_ms = Some(self.now_ms());
        ctx.evidence.container = Some(ContainerFacts {
            id: id.clone(),
            name,
        });
        Ok(id)
    }

    async fn run_created(
        &self,
        ctx: &mut Ctx<'_>,
        id: &str,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Decision {
        // Subscribed before start (and replaying the engine's recent buffer besides), so every
        // action on the container from its start to its exit is seen.
        let event_log = Arc::new(Mutex::new(EventLog::default()));
        let events_task = tokio::spawn(calls::watch_events(
            self.engine.clone(),
            id.to_string(),
            Arc::clone(&event_log),
            self.now_ms(),
        ));
        // Attaching needs only the created container, not the checks' answers: made while the
        // profile is read back and argv[0] resolved, so the run waits for the slower of the
        // two, not their sum. The start still waits for every check to pass.
        let (settled, output) = tokio::join!(
            self.check_created(ctx, id, want, image_path),
            self.engine.attach(id)
        );
        let settled = match settled {
            Ok(settled) => settled,
            Err(decision) => {
                events_task.abort();
                return decision;
            }
        };
        let output = match output {
            Ok(output) => output,
            Err(error) => {
                events_task.abort();
                return Decision::no_verdict(
                    NoVerdictReason::InternalError,
                    format!("attaching to the container failed: {}", error.message()),
                );
            }
        };
        ctx.hooks.admit().await;
        if let Err(error) = self.engine.start(id).await {
            events_task.abort();
            let decision = Decision::no_verdict(
                NoVerdictReason::StartFailed,
                format!(
                    "the engine could not start the command: {}",
                    error.message()
                ),
            );
            if let Some(state) = teardown::final_state(&self.engine, id).await {
                teardown::record_final_state(&mut ctx.evidence, state, self.now_ms());
            }
            return decision;
        }
        let deadline = Instant::now() + ctx.spec.timeout();
        ctx.evidence.timestamps.start_ms = Some(self.now_ms());
        let watched = self
            .supervise(
                id,
                ctx.spec.request.max_output_bytes,
                deadline,
                output,
                events_task,
                &event_log,
            )
            .await;
        let decision = self.conclude(ctx, id, watched).await;
        if settled == executable::Settled::Cached
            && executable::init_may_have_failed_exec(&decision, &ctx.output.stderr)
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
        let argv0 = spec
            .request
            .argv
            .first()
            .map(String::as_str)
            .unwrap_or_default();
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

    /// A resolution taken from the cache skipped the pre-check. After a run whose end could be
    /// the init failing to execute the command ([`executable::init_may_have_failed_exec`]),
    /// resolve in the stopped container — the same image and read-only mounts — and refuse
    /// exactly as the pre-check would have: the cache never turns a command that could not be
    /// executed into a verdict.
    async fn recheck_cached(
        &self,
        ctx: &Ctx<'_>,
        id: &str,
        want: &profile::Isolation,
        image_path: Option<&str>,
    ) -> Option<Decision> {
        let spec = ctx.spec;
        let argv0 = spec
            .request
            .argv
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let detail = executable::resolve(&self.engine, id, argv0, image_path)
            .await
            .err()?;
        tracing::warn!(
            argv0,
            %detail,
            "a cached executable resolution did not hold; forgetting it"
        );
        let image_id = image_id(ctx);
        if let Some(cache) = Self::cache(ctx, &image_id, want, image_path) {
            crate::exec_cache::forget(&cache.dir, &cache.key);
        }
        Some(Decision::no_verdict(
            NoVerdictReason::StartFailed,
            detail.to_string(),
        ))
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
        let inspect = self.engine.inspect_container(id).await.map_err(|error| {
            Decision::no_verdict(
                NoVerdictReason::InternalError,
                format!(
                    "inspecting the created container failed: {}",
                    error.message()
                ),
            )
        })?;
        ctx.evidence.timestamps.engine_created = inspect.created.clone();
        let observed = inspect.profile;
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
            .request
            .argv
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let image_id = image_id(ctx);
        let cache = Self::cache(ctx, &image_id, want, image_path);
        executable::resolve_cached(&self.engine, id, argv0, image_path, cache.as_ref())
            .await
            .map_err(|detail| {
                Decision::no_verdict(NoVerdictReason::StartFailed, detail.to_string())
            })
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
        let mut wait = Box::pin(calls::wait_stopped(self.engine.clone(), id.to_string()));
        // The main process, looked up once (in the container's cgroup, else by an inspect),
        // for both watches: the limit hits and the resources read from the same cgroup.
        let main_pid = futures_util::FutureExt::shared(Box::pin(resources::main_pid(
            self.engine.clone(),
            PathBuf::from(resources::CGROUP_ROOT),
            PathBuf::from(resources::PROC_ROOT),
            id.to_string(),
            self.cgroups.clone(),
        )));
        let resources = Arc::new(Mutex::new(ResourceFacts::default()));
        let sampler = tokio::spawn(resources::watch(
            self.engine.clone(),
            main_pid.clone(),
            PathBuf::from(resources::CGROUP_ROOT),
            PathBuf::from(resources::PROC_ROOT),
            id.to_string(),
            Arc::clone(&resources),
        ));
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
                        own_kills += usize::from(teardown::kill(&self.engine, id).await);
                    }
                }
                () = &mut wait, if !exited => exited = true,
                () = tokio::time::sleep_until(deadline) => {
                    stopped_by = StoppedBy::Timeout;
                    own_kills += usize::from(teardown::kill(&self.engine, id).await);
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

        let running = match teardown::final_state(&self.engine, id).await {
            Some(state) => teardown::record_final_state(&mut ctx.evidence, state, self.now_ms()),
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
        ctx.hooks.stopped();
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

/// What [`Lifecycle::supervise`] saw of the running container.
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
    // A nonce, not a time (no clock is read here): `RandomState` differs on every call and is
    // keyed from the OS's randomness, so a retried run id never meets its old container.
    let nonce = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), run_id);
    format!("agent-bounties-{safe}-{}-{nonce}", std::process::id())
}

#[async_trait::async_trait]
impl<E: ContainerEngine> crate::RunLifecycle for Lifecycle<E> {
    fn facts(&self) -> &EngineFacts {
        &self.facts
    }

    async fn run(
        &self,
        spec: &SandboxSpec,
        hooks: &dyn RunHooks,
    ) -> Result<RunReport, SandboxError> {
        Lifecycle::run(self, spec, hooks).await
    }

    async fn cleanup_stale(&self) -> Result<Vec<String>, SandboxError> {
        Lifecycle::cleanup_stale(self).await
    }

    fn images(&self) -> &dyn crate::images::ImageStore {
        &self.engine
    }

    async fn remove_own_containers(&self) -> Result<Vec<String>, SandboxError> {
        Lifecycle::remove_own_containers(self).await
    }

    async fn host_resources(&self) -> Result<crate::HostResources, SandboxError> {
        self.engine
            .host_resources()
            .await
            .map_err(|source| SandboxError::Engine {
                context: "reading the engine's /info",
                source: source.into(),
            })
    }

    async fn mounted_paths(
        &self,
    ) -> Result<std::collections::BTreeSet<std::path::PathBuf>, SandboxError> {
        let containers = self
            .list_containers(None, "listing containers' mounts")
            .await?;
        Ok(containers
            .into_iter()
            .flat_map(|c| c.mount_sources)
            .map(std::path::PathBuf::from)
            .collect())
    }
}
