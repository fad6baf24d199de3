//! A scripted engine for the lifecycle's tests and other crates' (the `fake-engine` feature,
//! as `verifier-sdk`'s `fixtures`): it answers the [`ContainerEngine`] calls the way the Docker
//! Engine does for one container, driven by a [`Script`] instead of a daemon. The created
//! container reads back what was asked for (or, scripted, with one field dropped or altered
//! as an engine that ignores part of a create request would), its events, wait and output follow what
//! the script says the program does, and every kill and removal is counted so a test can
//! check what the lifecycle asked the engine to do.
//!
//! Every no-verdict reason an engine can cause has a script: `runs_until_killed` (timeout, or
//! output_limit with enough stdout), `oom_killed`, `external_kill` and `engine_restarts`
//! (externally_stopped), `read_back` (isolation_mismatch), `executable_missing` and
//! `start_refused` (start_failed), `image_missing`, `image_platform`, `create_refused`,
//! `runtime_missing` (runtime_unavailable) and `removal_unconfirmed` (internal_error);
//! input_mismatch comes from the caller's hooks, invalid_job and expired from the job, never
//! from an engine. [`crate::conformance::exercise`] holds the fake to the trait's contract as
//! it holds the real engines.

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};

use verifier_sdk::oci_runtime::{OciRuntimeFacts, RUNC};

use crate::engine::{
    Answers, CallError, CgroupLayout, ContainerEngine, ContainerState, ContainerSummary,
    CreateRequest, Event, HostResources, ImageInspected, Inspected, OciRuntime, Output, PathStat,
    StatsSample,
};
use crate::evidence::EngineFacts;
use crate::profile::Isolation;

/// The one container id the fake hands out.
pub const ID: &str = "fakecontainer";
const NEVER: &str = "0001-01-01T00:00:00Z";

/// What the program in the container does, and how the engine misbehaves.
#[derive(Clone, Debug)]
pub struct Script {
    /// Written on stdout once started.
    pub stdout: Vec<u8>,
    /// Written on stderr once started, after stdout (nothing when empty).
    pub stderr: Vec<u8>,
    /// Exit status when the program ends by itself.
    pub exit_code: i64,
    /// The program never ends by itself: only a kill stops it.
    pub runs_until_killed: bool,
    /// The engine reports an out-of-memory kill as the exit.
    pub oom_killed: bool,
    /// Someone else SIGKILLs the container right after it starts.
    pub external_kill: bool,
    /// The engine restarts while the program runs: the first wait fails with a dropped
    /// connection and the event stream ends before the exit.
    pub engine_restarts: bool,
    /// The engine refuses every removal request (as a removal already in progress, 409) and
    /// keeps answering an inspect of the container.
    pub removal_unconfirmed: bool,
    /// The engine answers a removal request of a container it removed with "no such
    /// container" (404), as an engine whose removal raced another's does.
    pub removal_answers_not_found: bool,
    /// `argv[0]` is nowhere in the container: every archive stat answers "not found".
    pub executable_missing: bool,
    /// The engine creates something other than what was asked for: the inspected profile is
    /// the requested one passed through this (dropping or altering a field).
    pub read_back: Option<fn(&mut Isolation)>,
    /// The engine does not hold the image, and a pull by digest finds no such manifest.
    pub image_missing: bool,
    /// The image's `(os, architecture)` when it is not the `linux/amd64` the fake reports.
    pub image_platform: Option<(&'static str, &'static str)>,
    /// The engine refuses to create the container (as a daemon refusing the host config).
    pub create_refused: bool,
    /// The engine refuses to start the created container (as the OCI runtime failing).
    pub start_refused: bool,
    /// The engine registers no OCI runtime at all.
    pub runtime_missing: bool,
    /// The only image references the engine holds; `None`: every reference asked for.
    pub held_images: Option<Vec<String>>,
    /// The only paths in the container, each an executable regular file; `None`: every path
    /// asked for is one.
    pub files: Option<Vec<String>>,
    /// The engine refuses to list its images (as a daemon answering 500), so nothing that
    /// budgets images can tell what it holds.
    pub images_refused: bool,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            stdout: b"ok\n".to_vec(),
            stderr: Vec::new(),
            exit_code: 0,
            runs_until_killed: false,
            oom_killed: false,
            external_kill: false,
            engine_restarts: false,
            removal_unconfirmed: false,
            removal_answers_not_found: false,
            executable_missing: false,
            read_back: None,
            image_missing: false,
            image_platform: None,
            create_refused: false,
            start_refused: false,
            runtime_missing: false,
            held_images: None,
            files: None,
            images_refused: false,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    created: Option<CreateRequest>,
    started: bool,
    exit: Option<(i64, bool)>,
    removed: bool,
    kills: usize,
    removals: usize,
    waits: usize,
    /// Every call the lifecycle made, in the order they reached the engine.
    calls: Vec<&'static str>,
    events: Option<mpsc::UnboundedSender<Option<Event>>>,
    pending_events: Option<mpsc::UnboundedReceiver<Option<Event>>>,
}

/// The scripted engine (cheap to clone; clones share the one container).
#[derive(Clone, Debug)]
pub struct Fake {
    script: Script,
    state: Arc<Mutex<State>>,
    exited: Arc<watch::Sender<bool>>,
}

fn not_found() -> CallError {
    CallError::NotFound {
        message: "No such container: fakecontainer".into(),
    }
}

fn event(action: &str, signal: Option<&str>) -> Event {
    Event {
        action: action.into(),
        actor: Some(ID.into()),
        signal: signal.map(str::to_string),
    }
}

impl Fake {
    /// A fresh engine holding the image and no container.
    pub fn new(script: Script) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let state = State {
            events: Some(tx),
            pending_events: Some(rx),
            ..State::default()
        };
        Self {
            script,
            state: Arc::new(Mutex::new(state)),
            exited: Arc::new(watch::channel(false).0),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut state)
    }

    fn emit(&self, message: Option<Event>) {
        self.with(|s| {
            if let Some(tx) = &s.events {
                let _ = tx.send(message);
            }
        });
    }

    /// The program ends (`code`, `oom`), once; the engine then reports `die`.
    fn end(&self, code: i64, oom: bool) {
        let first = self.with(|s| {
            if s.exit.is_some() {
                return false;
            }
            s.exit = Some((code, oom));
            true
        });
        if first {
            self.emit(Some(event("die", None)));
            self.exited.send_replace(true);
        }
    }

    /// SIGKILLs the lifecycle sent.
    pub fn kills(&self) -> usize {
        self.with(|s| s.kills)
    }

    /// Removal requests the lifecycle sent.
    pub fn removals(&self) -> usize {
        self.with(|s| s.removals)
    }

    /// Whether the lifecycle started the container.
    pub fn started(&self) -> bool {
        self.with(|s| s.started)
    }

    /// Wait requests the lifecycle sent.
    pub fn waits(&self) -> usize {
        self.with(|s| s.waits)
    }

    /// Every call the lifecycle made, in the order they reached the engine.
    pub fn calls(&self) -> Vec<&'static str> {
        self.with(|s| s.calls.clone())
    }

    fn called(&self, call: &'static str) {
        self.with(|s| s.calls.push(call));
    }

    async fn until_exited(exited: &mut watch::Receiver<bool>) {
        // The sender lives as long as the fake, which outlives the run.
        let _ = exited.wait_for(|e| *e).await;
    }

    fn inspect(&self) -> Result<Inspected, CallError> {
        self.with(|s| {
            if s.removed {
                return Err(not_found());
            }
            let created = s.created.clone().ok_or_else(not_found)?;
            let (exit_code, oom) = s.exit.unwrap_or((0, false));
            // The engine made what was asked for, unless scripted to change it.
            let mut profile = created.profile;
            if let Some(change) = self.script.read_back {
                change(&mut profile);
            }
            Ok(Inspected {
                created: Some("2026-12-01T00:00:00Z".into()),
                profile,
                state: ContainerState {
                    running: Some(s.started && s.exit.is_none()),
                    // As the engine's: the main process while it runs (here a pid no process
                    // on this host has, as another host's would be), else 0.
                    pid: Some(if s.started && s.exit.is_none() {
                        i64::from(i32::MAX)
                    } else {
                        0
                    }),
                    started_at: Some(if s.started {
                        "2026-12-01T00:00:01Z".into()
                    } else {
                        NEVER.into()
                    }),
                    finished_at: Some(if s.exit.is_some() {
                        "2026-12-01T00:00:02Z".into()
                    } else {
                        NEVER.into()
                    }),
                    exit_code: Some(exit_code),
                    oom_killed: Some(oom),
                    error: None,
                },
            })
        })
    }
}

/// The executor the fake stamps its evidence with: not the Docker Engine's, so the sdk refuses
/// to sign what it produced.
pub const EXECUTOR: &str = "scripted-engine";

/// The facts the fake reports of itself: none of them a real engine's, so a record carrying
/// them can only have come from the fake.
// Fields added to `EngineFacts` later stay at their default here rather than break the fake.
#[allow(clippy::needless_update)]
pub fn facts() -> EngineFacts {
    EngineFacts {
        version: "fake-engine 0.0.1".into(),
        api_version: "0.0".into(),
        kernel_version: "fake-kernel".into(),
        cgroup_version: "2".into(),
        cgroup_driver: "fake".into(),
        platform: "linux/amd64".into(),
        ..EngineFacts::default()
    }
}

impl ContainerEngine for Fake {
    fn executor(&self) -> &'static str {
        EXECUTOR
    }

    fn cgroup_layout(&self, _: &EngineFacts) -> CgroupLayout {
        // A scripted container has no cgroup on any host: its main process and resources are
        // always the engine's answers.
        CgroupLayout::default()
    }

    async fn engine_facts(&self) -> Result<EngineFacts, CallError> {
        Ok(facts())
    }

    async fn oci_runtime(&self, name: &str) -> Result<OciRuntime, CallError> {
        // The fake registers runc only (or nothing, scripted).
        let registered = name == RUNC && !self.script.runtime_missing;
        Ok(OciRuntime {
            name: name.to_string(),
            facts: registered.then(|| OciRuntimeFacts {
                name: RUNC.to_string(),
                path: RUNC.to_string(),
                args: Vec::new(),
                version: "runc version test".to_string(),
            }),
            offered: if self.script.runtime_missing {
                Vec::new()
            } else {
                vec![RUNC.to_string()]
            },
        })
    }

    async fn host_resources(&self) -> Result<HostResources, CallError> {
        Ok(HostResources::default())
    }

    async fn list_containers(
        &self,
        label: Option<&str>,
    ) -> Result<Vec<ContainerSummary>, CallError> {
        let labelled = |labels: &std::collections::HashMap<String, String>| {
            label.is_none_or(|label| {
                let (key, value) = label.split_once('=').unwrap_or((label, ""));
                labels.get(key).is_some_and(|v| v == value)
            })
        };
        Ok(self.with(|s| match &s.created {
            Some(created) if !s.removed && labelled(&created.labels) => vec![ContainerSummary {
                id: Some(ID.into()),
                labels: created.labels.clone(),
                running: s.started && s.exit.is_none(),
                created: Some(1_796_083_200),
                mount_sources: Vec::new(),
            }],
            _ => Vec::new(),
        }))
    }

    async fn inspect_image(&self, reference: &str) -> Result<ImageInspected, CallError> {
        self.called("inspect_image");
        let held = self
            .script
            .held_images
            .as_ref()
            .is_none_or(|held| held.iter().any(|r| r == reference));
        if self.script.image_missing || !held {
            return Err(CallError::NotFound {
                message: format!("No such image: {reference}"),
            });
        }
        let (os, architecture) = self.script.image_platform.unwrap_or(("linux", "amd64"));
        Ok(ImageInspected {
            // A content address, as the engine's: an executable resolution may be cached by it.
            id: Some(format!("sha256:{}", "fa".repeat(32))),
            repo_digests: Some(vec![reference.to_string()]),
            os: Some(os.into()),
            architecture: Some(architecture.into()),
            variant: None,
            env: Some(vec!["PATH=/usr/bin:/bin".into()]),
        })
    }

    async fn pull_image(&self, reference: &str) -> Result<(), CallError> {
        self.called("pull");
        if self.script.image_missing {
            return Err(CallError::NotFound {
                message: format!("manifest for {reference} not found: manifest unknown"),
            });
        }
        Ok(())
    }

    async fn list_images(&self) -> Result<Vec<crate::engine::ImageSummary>, CallError> {
        if self.script.images_refused {
            return Err(CallError::Refused {
                status: 500,
                message: "scripted: image list refused".into(),
            });
        }
        Ok(Vec::new())
    }

    async fn remove_image(&self, id: &str) -> Result<(), CallError> {
        Err(CallError::NotFound {
            message: format!("No such image: {id}"),
        })
    }

    async fn image_free_space(&self) -> Result<crate::engine::FreeSpace, CallError> {
        Ok(crate::engine::FreeSpace::Unknown(
            "a scripted engine".into(),
        ))
    }

    async fn create_container(&self, request: &CreateRequest) -> Result<String, CallError> {
        self.called("create");
        if self.script.create_refused {
            return Err(CallError::Refused {
                status: 400,
                message: "invalid HostConfig: the scripted engine refuses to create".into(),
            });
        }
        self.with(|s| s.created = Some(request.clone()));
        Ok(ID.into())
    }

    async fn inspect_container(&self, _: &str) -> Result<Inspected, CallError> {
        self.called("inspect");
        self.inspect()
    }

    async fn attach(&self, _: &str) -> Result<Answers<Output>, CallError> {
        self.called("attach");
        let mut started = self.exited.subscribe();
        let fake = self.clone();
        let stdout = bytes::Bytes::from(self.script.stdout.clone());
        let stderr = (!self.script.stderr.is_empty()).then(|| {
            Ok(Output::Stderr(bytes::Bytes::from(
                self.script.stderr.clone(),
            )))
        });
        // The output: what the program writes once started, then the end of the stream at
        // its exit (as the engine's attach does).
        let output = futures_util::stream::once(async move {
            while !fake.with(|s| s.started) {
                tokio::task::yield_now().await;
            }
            Ok(Output::Stdout(stdout))
        })
        .chain(futures_util::stream::iter(stderr))
        .chain(
            futures_util::stream::once(async move {
                Self::until_exited(&mut started).await;
            })
            .filter_map(|()| async { None }),
        );
        Ok(Box::pin(output))
    }

    async fn start(&self, _: &str) -> Result<(), CallError> {
        self.called("start");
        if self.script.start_refused {
            return Err(CallError::Refused {
                status: 500,
                message: "OCI runtime create failed: the scripted engine refuses to start".into(),
            });
        }
        self.with(|s| s.started = true);
        self.emit(Some(event("start", None)));
        if self.script.engine_restarts {
            // The restarting engine drops the event stream; the program runs on.
            self.emit(None);
        }
        if self.script.external_kill {
            self.emit(Some(event("kill", Some("9"))));
            self.end(137, false);
        } else if !self.script.runs_until_killed {
            let fake = self.clone();
            tokio::spawn(async move {
                // Let the output reach the reader before the exit ends the stream.
                for _ in 0..16 {
                    tokio::task::yield_now().await;
                }
                // Across an engine restart the program outlives the failed first wait.
                while fake.script.engine_restarts && fake.waits() < 2 {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                let code = if fake.script.oom_killed {
                    137
                } else {
                    fake.script.exit_code
                };
                fake.end(code, fake.script.oom_killed);
            });
        }
        Ok(())
    }

    async fn wait_stopped(&self, _: &str) -> Result<(), CallError> {
        self.called("wait");
        let first = self.with(|s| {
            s.waits += 1;
            s.waits == 1
        });
        if first && self.script.engine_restarts {
            // The restarting engine drops the connection the wait was on.
            return Err(CallError::Unreachable("connection dropped".into()));
        }
        let mut exited = self.exited.subscribe();
        Self::until_exited(&mut exited).await;
        Ok(())
    }

    fn events(&self, _: &str, _: u64) -> Answers<Event> {
        self.called("events");
        let Some(rx) = self.with(|s| s.pending_events.take()) else {
            return Box::pin(futures_util::stream::empty());
        };
        Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Some(Some(message)) => Some((Ok(message), rx)),
                Some(None) | None => None,
            }
        }))
    }

    fn stats(&self, _: &str) -> Answers<StatsSample> {
        self.called("stats");
        Box::pin(futures_util::stream::empty())
    }

    async fn kill(&self, _: &str) -> Result<(), CallError> {
        self.called("kill");
        let running = self.with(|s| {
            s.kills += 1;
            s.started && s.exit.is_none()
        });
        if !running {
            return Err(CallError::Refused {
                status: 409,
                message: "container is not running".into(),
            });
        }
        self.emit(Some(event("kill", Some("9"))));
        self.end(137, false);
        Ok(())
    }

    async fn remove(&self, _: &str) -> Result<(), CallError> {
        self.called("remove");
        if self.script.removal_unconfirmed {
            self.with(|s| s.removals += 1);
            return Err(CallError::Refused {
                status: 409,
                message: "removal of container fakecontainer is already in progress".into(),
            });
        }
        let known = self.with(|s| {
            s.removals += 1;
            let known = s.created.is_some() && !s.removed;
            s.removed = true;
            known
        });
        if !known {
            return Err(not_found());
        }
        // A forced removal kills a running program.
        self.end(137, false);
        if self.script.removal_answers_not_found {
            return Err(not_found());
        }
        Ok(())
    }

    async fn archive_stat(&self, _: &str, path: &str) -> Result<PathStat, CallError> {
        self.called("archive_stat");
        let present = |path: &str| {
            self.script
                .files
                .as_ref()
                .is_none_or(|files| files.iter().any(|f| f == path))
        };
        if self.script.executable_missing || !present(path) {
            return Err(CallError::NotFound {
                message: "Could not find the file in container fakecontainer".into(),
            });
        }
        // Every path asked for is an executable regular file.
        Ok(PathStat {
            file_mode: 0o755,
            link_target: String::new(),
        })
    }

    fn archive_read(&self, _: &str, _: &str) -> Answers<bytes::Bytes> {
        self.called("archive_read");
        Box::pin(futures_util::stream::empty())
    }
}

/// What a [`FreshEachRun`] does for each run: the test's own, commonly a fresh
/// [`super::Lifecycle`] over a fresh [`Fake`] per run, since a fake holds one container.
#[async_trait::async_trait]
pub trait EachRun: Send + Sync + std::fmt::Debug {
    /// Runs `spec` as [`crate::RunLifecycle::run`] would.
    async fn run(
        &self,
        spec: &crate::SandboxSpec,
        hooks: &dyn crate::RunHooks,
    ) -> Result<crate::RunReport, crate::SandboxError>;
}

/// A [`crate::RunLifecycle`] whose runs are `each`'s, while the calls a batch makes once (facts,
/// cleanup, capacity, mounts, images) go to a lifecycle over a fake with the default script.
/// Derefs to `each`, so a test reads what its runs recorded through it.
#[derive(Debug)]
pub struct FreshEachRun<R> {
    template: super::Lifecycle<Fake>,
    each: R,
}

impl<R> FreshEachRun<R> {
    /// Runs by `each`, the batch's calls to a fresh default fake.
    pub async fn new(each: R) -> Result<Self, crate::SandboxError> {
        let template = super::Lifecycle::connect(Fake::new(Script::default()), RUNC).await?;
        Ok(Self { template, each })
    }
}

impl<R> std::ops::Deref for FreshEachRun<R> {
    type Target = R;
    fn deref(&self) -> &R {
        &self.each
    }
}

#[async_trait::async_trait]
impl<R: EachRun> crate::RunLifecycle for FreshEachRun<R> {
    fn facts(&self) -> &EngineFacts {
        self.template.facts()
    }

    async fn run(
        &self,
        spec: &crate::SandboxSpec,
        hooks: &dyn crate::RunHooks,
    ) -> Result<crate::RunReport, crate::SandboxError> {
        self.each.run(spec, hooks).await
    }

    async fn cleanup_stale(&self) -> Result<Vec<String>, crate::SandboxError> {
        self.template.cleanup_stale().await
    }

    async fn remove_own_containers(&self) -> Result<Vec<String>, crate::SandboxError> {
        self.template.remove_own_containers().await
    }

    async fn host_resources(&self) -> Result<HostResources, crate::SandboxError> {
        self.template.host_resources().await
    }

    async fn mounted_paths(
        &self,
    ) -> Result<std::collections::BTreeSet<std::path::PathBuf>, crate::SandboxError> {
        self.template.mounted_paths().await
    }

    fn images(&self) -> &dyn crate::images::ImageStore {
        self.template.images()
    }
}
