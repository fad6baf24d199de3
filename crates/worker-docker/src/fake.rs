//! A scripted engine for the lifecycle tests: it answers the [`Api`] calls the way the Docker
//! Engine does for one container, driven by a [`Script`] instead of a daemon. The created
//! container reads back exactly what was asked for, its events, wait and output follow what
//! the script says the program does, and every kill and removal is counted so a test can
//! check what the lifecycle asked the engine to do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bollard::container::{AttachContainerResults, LogOutput, PathStatResponse};
use bollard::errors::Error;
use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerCreateResponse, ContainerInspectResponse,
    ContainerState, ContainerStatsResponse, ContainerSummary, ContainerWaitResponse,
    CreateImageInfo, EventActor, EventMessage, ImageConfig, ImageInspect, MountPoint, SystemInfo,
};
use bollard::query_parameters::{
    AttachContainerOptions, ContainerArchiveInfoOptions, CreateContainerOptions,
    CreateImageOptions, DownloadFromContainerOptions, EventsOptions, InspectContainerOptions,
    KillContainerOptions, ListContainersOptions, RemoveContainerOptions, StartContainerOptions,
    StatsOptions, WaitContainerOptions,
};
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::api::{Answers, Api};

/// The one container id the fake hands out.
pub const ID: &str = "fakecontainer";
const NEVER: &str = "0001-01-01T00:00:00Z";

/// What the program in the container does, and how the engine misbehaves.
#[derive(Clone, Debug)]
pub struct Script {
    /// Written on stdout once started.
    pub stdout: Vec<u8>,
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
    /// The engine keeps answering an inspect of the container after removing it.
    pub removal_unconfirmed: bool,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            stdout: b"ok\n".to_vec(),
            exit_code: 0,
            runs_until_killed: false,
            oom_killed: false,
            external_kill: false,
            engine_restarts: false,
            removal_unconfirmed: false,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    body: Option<ContainerCreateBody>,
    started: bool,
    exit: Option<(i64, bool)>,
    removed: bool,
    kills: usize,
    removals: usize,
    waits: usize,
    events: Option<mpsc::UnboundedSender<Option<EventMessage>>>,
    pending_events: Option<mpsc::UnboundedReceiver<Option<EventMessage>>>,
}

/// The scripted engine (cheap to clone; clones share the one container).
#[derive(Clone, Debug)]
pub struct Fake {
    script: Script,
    state: Arc<Mutex<State>>,
    exited: Arc<watch::Sender<bool>>,
}

fn not_found() -> Error {
    Error::DockerResponseServerError {
        status_code: 404,
        message: "No such container: fakecontainer".into(),
    }
}

fn event(action: &str, signal: Option<&str>) -> EventMessage {
    let attributes = signal.map(|s| HashMap::from([("signal".to_string(), s.to_string())]));
    EventMessage {
        action: Some(action.into()),
        actor: Some(EventActor {
            id: Some(ID.into()),
            attributes,
        }),
        ..EventMessage::default()
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

    fn emit(&self, message: Option<EventMessage>) {
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

    /// Wait requests the lifecycle sent.
    pub fn waits(&self) -> usize {
        self.with(|s| s.waits)
    }

    async fn until_exited(exited: &mut watch::Receiver<bool>) {
        // The sender lives as long as the fake, which outlives the run.
        let _ = exited.wait_for(|e| *e).await;
    }

    fn inspect(&self) -> Result<ContainerInspectResponse, Error> {
        self.with(|s| {
            if s.removed && !self.script.removal_unconfirmed {
                return Err(not_found());
            }
            let body = s.body.clone().ok_or_else(not_found)?;
            let host = body.host_config.clone().unwrap_or_default();
            let mounts = host
                .mounts
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|m| MountPoint {
                    source: m.source,
                    destination: m.target,
                    rw: m.read_only.map(|ro| !ro),
                    ..MountPoint::default()
                })
                .collect();
            let (exit_code, oom) = s.exit.unwrap_or((0, false));
            Ok(ContainerInspectResponse {
                id: Some(ID.into()),
                created: Some("2026-12-01T00:00:00Z".into()),
                config: Some(ContainerConfig {
                    entrypoint: body.entrypoint.clone(),
                    cmd: body.cmd.clone(),
                    working_dir: body.working_dir.clone(),
                    user: body.user.clone(),
                    hostname: body.hostname.clone(),
                    env: body.env.clone(),
                    ..ContainerConfig::default()
                }),
                host_config: Some(host),
                mounts: Some(mounts),
                state: Some(ContainerState {
                    running: Some(s.started && s.exit.is_none()),
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
                    ..ContainerState::default()
                }),
                ..ContainerInspectResponse::default()
            })
        })
    }
}

impl Api for Fake {
    async fn info(&self) -> Result<SystemInfo, Error> {
        Ok(SystemInfo::default())
    }

    async fn list_containers(
        &self,
        _: Option<ListContainersOptions>,
    ) -> Result<Vec<ContainerSummary>, Error> {
        Ok(Vec::new())
    }

    async fn inspect_image(&self, name: &str) -> Result<ImageInspect, Error> {
        Ok(ImageInspect {
            id: Some("sha256:fakeimage".into()),
            repo_digests: Some(vec![name.to_string()]),
            os: Some("linux".into()),
            architecture: Some("amd64".into()),
            config: Some(ImageConfig {
                env: Some(vec!["PATH=/usr/bin:/bin".into()]),
                ..ImageConfig::default()
            }),
            ..ImageInspect::default()
        })
    }

    fn create_image(&self, _: Option<CreateImageOptions>) -> Answers<CreateImageInfo> {
        Box::pin(futures_util::stream::empty())
    }

    async fn create_container(
        &self,
        _: Option<CreateContainerOptions>,
        body: ContainerCreateBody,
    ) -> Result<ContainerCreateResponse, Error> {
        self.with(|s| s.body = Some(body));
        Ok(ContainerCreateResponse {
            id: ID.into(),
            warnings: Vec::new(),
        })
    }

    async fn inspect_container(
        &self,
        _: &str,
        _: Option<InspectContainerOptions>,
    ) -> Result<ContainerInspectResponse, Error> {
        self.inspect()
    }

    async fn attach_container(
        &self,
        _: &str,
        _: Option<AttachContainerOptions>,
    ) -> Result<AttachContainerResults, Error> {
        let mut started = self.exited.subscribe();
        let fake = self.clone();
        let stdout = bytes::Bytes::from(self.script.stdout.clone());
        // The output: what the program writes once started, then the end of the stream at
        // its exit (as the engine's attach does).
        let output = futures_util::stream::once(async move {
            while !fake.with(|s| s.started) {
                tokio::task::yield_now().await;
            }
            Ok(LogOutput::StdOut { message: stdout })
        })
        .chain(
            futures_util::stream::once(async move {
                Self::until_exited(&mut started).await;
            })
            .filter_map(|()| async { None }),
        );
        Ok(AttachContainerResults {
            output: Box::pin(output),
            input: Box::pin(tokio::io::sink()),
        })
    }

    async fn start_container(
        &self,
        _: &str,
        _: Option<StartContainerOptions>,
    ) -> Result<(), Error> {
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

    fn wait_container(
        &self,
        _: &str,
        _: Option<WaitContainerOptions>,
    ) -> Answers<ContainerWaitResponse> {
        let first = self.with(|s| {
            s.waits += 1;
            s.waits == 1
        });
        if first && self.script.engine_restarts {
            return Box::pin(futures_util::stream::once(async {
                Err(Error::RequestTimeoutError)
            }));
        }
        let mut exited = self.exited.subscribe();
        let fake = self.clone();
        Box::pin(futures_util::stream::once(async move {
            Self::until_exited(&mut exited).await;
            let status_code = fake.with(|s| s.exit.map_or(0, |(code, _)| code));
            Ok(ContainerWaitResponse {
                status_code,
                error: None,
            })
        }))
    }

    fn events(&self, _: Option<EventsOptions>) -> Answers<EventMessage> {
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

    fn stats(&self, _: &str, _: Option<StatsOptions>) -> Answers<ContainerStatsResponse> {
        Box::pin(futures_util::stream::empty())
    }

    async fn kill_container(&self, _: &str, _: Option<KillContainerOptions>) -> Result<(), Error> {
        let running = self.with(|s| {
            s.kills += 1;
            s.started && s.exit.is_none()
        });
        if !running {
            return Err(Error::DockerResponseServerError {
                status_code: 409,
                message: "container is not running".into(),
            });
        }
        self.emit(Some(event("kill", Some("9"))));
        self.end(137, false);
        Ok(())
    }

    async fn remove_container(
        &self,
        _: &str,
        _: Option<RemoveContainerOptions>,
    ) -> Result<(), Error> {
        self.with(|s| {
            s.removals += 1;
            s.removed = true;
        });
        // A forced removal kills a running program.
        self.end(137, false);
        Ok(())
    }

    async fn get_container_archive_info(
        &self,
        _: &str,
        options: Option<ContainerArchiveInfoOptions>,
    ) -> Result<PathStatResponse, Error> {
        // Every path asked for is an executable regular file.
        Ok(PathStatResponse {
            name: options.map(|o| o.path).unwrap_or_default(),
            size: 1,
            file_mode: 0o755,
            modification_time: None,
            link_target: String::new(),
        })
    }

    fn download_from_container(
        &self,
        _: &str,
        _: Option<DownloadFromContainerOptions>,
    ) -> Answers<bytes::Bytes> {
        Box::pin(futures_util::stream::empty())
    }
}
