//! [`ContainerEngine`] over the Docker Engine API: each call forwards to the `bollard` client
//! and turns its answer into the lifecycle's types, and its errors into [`CallError`] (404 is
//! "not found", any other status "refused", anything without a status "unreachable").

use std::collections::HashMap;
use std::future::Future;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error;
use bollard::models::{ContainerInspectResponse, ContainerSummaryStateEnum, EventMessage};
use bollard::query_parameters::{
    AttachContainerOptions, AttachContainerOptionsBuilder, ContainerArchiveInfoOptionsBuilder,
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, DownloadFromContainerOptionsBuilder,
    EventsOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListImagesOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
    StatsOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;
use worker_sandbox::SandboxError;
use worker_sandbox::engine::{
    Answers, CallError, CgroupLayout, ContainerEngine, ContainerState, ContainerSummary,
    CreateRequest, EngineError, Event, FreeSpace, HostResources, ImageInspected, ImageSummary,
    Inspected, OciRuntime, Output, PathStat, StatsSample,
};
use worker_sandbox::evidence::{DOCKER_EXECUTOR, EngineFacts};

use crate::profile;

/// The Docker Engine, reached through `bollard`.
#[derive(Clone, Debug)]
pub struct DockerEngine(pub Docker);

/// `error` as the lifecycle tells engine failures apart.
pub fn call_error(error: Error) -> CallError {
    match error {
        Error::DockerResponseServerError {
            status_code: 404,
            message,
        } => CallError::NotFound { message },
        Error::DockerResponseServerError {
            status_code,
            message,
        } => CallError::Refused {
            status: status_code,
            message,
        },
        other => CallError::Unreachable(Box::new(other)),
    }
}

/// A serialized enum's text (`"v2"`, `"systemd"`), or empty.
pub(crate) fn enum_text<T: serde::Serialize>(value: Option<T>) -> String {
    match value.map(|v| serde_json::to_value(v)) {
        Some(Ok(serde_json::Value::String(s))) => s,
        _ => String::new(),
    }
}

/// The inspect answer the lifecycle reads: creation time, the profile read back, the state.
pub fn inspected(inspect: &ContainerInspectResponse) -> Inspected {
    let state = inspect.state.clone().unwrap_or_default();
    Inspected {
        created: inspect.created.clone(),
        profile: profile::observed(inspect),
        state: ContainerState {
            running: state.running,
            pid: state.pid,
            started_at: state.started_at,
            finished_at: state.finished_at,
            exit_code: state.exit_code,
            oom_killed: state.oom_killed,
            error: state.error,
        },
    }
}

/// How the worker attaches to a container: its stdout and stderr streamed as written, attached
/// before the start so nothing is missed, no stdin and no replay of logs. Public for the engine
/// benchmark (`examples/engine_anchor.rs`), which attaches exactly as the worker does.
pub fn attach_options() -> AttachContainerOptions {
    AttachContainerOptionsBuilder::default()
        .stream(true)
        .stdout(true)
        .stderr(true)
        .stdin(false)
        .logs(false)
        .build()
}

fn event(message: EventMessage) -> Event {
    let actor = message.actor.unwrap_or_default();
    Event {
        action: message.action.unwrap_or_default(),
        signal: actor
            .attributes
            .as_ref()
            .and_then(|a| a.get("signal"))
            .cloned(),
        actor: actor.id,
    }
}

impl ContainerEngine for DockerEngine {
    fn executor(&self) -> &'static str {
        DOCKER_EXECUTOR
    }

    fn cgroup_layout(&self, facts: &EngineFacts) -> CgroupLayout {
        crate::cgroups::layout(facts)
    }

    async fn engine_facts(&self) -> Result<EngineFacts, CallError> {
        // Two independent questions: asked at once they cost one round trip, not two (about
        // 7 ms each on an idle engine, on every run). Any failure here is the engine not being
        // usable, kept as bollard's error so `unreachable` explains the endpoint.
        let (version, info) = tokio::try_join!(self.0.version(), self.0.info())
            .map_err(|error| CallError::Unreachable(Box::new(error)))?;
        Ok(EngineFacts {
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
            // Filled by the connector, which examines the same answers as `worker doctor`.
            host: None,
        })
    }

    async fn oci_runtime(&self, name: &str) -> Result<OciRuntime, CallError> {
        let info = self
            .0
            .info()
            .await
            .map_err(|error| CallError::Unreachable(Box::new(error)))?;
        Ok(crate::runtime::resolve(name, info.runtimes.as_ref(), info.runc_commit.as_ref()).await)
    }

    async fn host_resources(&self) -> Result<HostResources, CallError> {
        let info = self.0.info().await.map_err(call_error)?;
        Ok(HostResources {
            cpus: info.ncpu,
            memory_bytes: info.mem_total,
        })
    }

    async fn list_containers(
        &self,
        label: Option<&str>,
    ) -> Result<Vec<ContainerSummary>, CallError> {
        let filters: HashMap<&str, Vec<String>> = label
            .map(|label| HashMap::from([("label", vec![label.to_string()])]))
            .unwrap_or_default();
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .0
            .list_containers(Some(options))
            .await
            .map_err(call_error)?;
        Ok(containers
            .into_iter()
            .map(|c| ContainerSummary {
                id: c.id,
                labels: c.labels.unwrap_or_default(),
                running: matches!(
                    c.state,
                    Some(
                        ContainerSummaryStateEnum::RUNNING
                            | ContainerSummaryStateEnum::PAUSED
                            | ContainerSummaryStateEnum::RESTARTING
                    )
                ),
                created: c.created,
                mount_sources: c
                    .mounts
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|m| m.source)
                    .collect(),
            })
            .collect())
    }

    async fn inspect_image(&self, reference: &str) -> Result<ImageInspected, CallError> {
        let image = self.0.inspect_image(reference).await.map_err(call_error)?;
        Ok(ImageInspected {
            id: image.id,
            repo_digests: image.repo_digests,
            os: image.os,
            architecture: image.architecture,
            variant: image.variant,
            env: image.config.and_then(|c| c.env),
        })
    }

    async fn pull_image(&self, reference: &str) -> Result<(), CallError> {
        let options = CreateImageOptionsBuilder::default()
            .from_image(reference)
            .build();
        let mut pull = self.0.create_image(Some(options), None, None);
        while let Some(item) = pull.next().await {
            item.map_err(call_error)?;
        }
        Ok(())
    }

    async fn list_images(&self) -> Result<Vec<ImageSummary>, CallError> {
        let options = ListImagesOptionsBuilder::default().all(false).build();
        let images = self
            .0
            .list_images(Some(options))
            .await
            .map_err(call_error)?;
        Ok(images
            .into_iter()
            .map(|i| ImageSummary {
                id: i.id,
                repo_digests: i.repo_digests,
                repo_tags: i.repo_tags,
                size_bytes: u64::try_from(i.size).unwrap_or(0),
            })
            .collect())
    }

    async fn remove_image(&self, id: &str) -> Result<(), CallError> {
        // Never forced: an image a container (ours or anyone's) still uses stays, with the
        // engine's 409 as the reason.
        let options = RemoveImageOptionsBuilder::default()
            .force(false)
            .noprune(false)
            .build();
        self.0
            .remove_image(id, Some(options), None)
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn image_free_space(&self) -> Result<FreeSpace, CallError> {
        let info = self.0.info().await.map_err(call_error)?;
        Ok(crate::endpoint::data_root_free(
            &crate::endpoint::engine_endpoint(),
            info.docker_root_dir.as_deref(),
        ))
    }

    async fn create_container(&self, request: &CreateRequest) -> Result<String, CallError> {
        let body = profile::create_body(
            &request.image,
            &request.profile,
            request.env.clone(),
            request.labels.clone(),
        );
        let options = CreateContainerOptionsBuilder::default()
            .name(&request.name)
            .build();
        let created = self
            .0
            .create_container(Some(options), body)
            .await
            .map_err(call_error)?;
        Ok(created.id)
    }

    async fn inspect_container(&self, id: &str) -> Result<Inspected, CallError> {
        let inspect = self
            .0
            .inspect_container(id, None)
            .await
            .map_err(call_error)?;
        Ok(inspected(&inspect))
    }

    async fn attach(&self, id: &str) -> Result<Answers<Output>, CallError> {
        let attached = self
            .0
            .attach_container(id, Some(attach_options()))
            .await
            .map_err(call_error)?;
        Ok(Box::pin(attached.output.map(|item| {
            item.map(|output| match output {
                LogOutput::StdOut { message } => Output::Stdout(message),
                LogOutput::StdErr { message } => Output::Stderr(message),
                _ => Output::Other,
            })
            .map_err(call_error)
        })))
    }

    async fn start(&self, id: &str) -> Result<(), CallError> {
        self.0.start_container(id, None).await.map_err(call_error)
    }

    fn wait_stopped(&self, id: &str) -> impl Future<Output = Result<(), CallError>> + Send {
        let options = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        let mut wait = self.0.wait_container(id, Some(options));
        async move {
            match wait.next().await {
                // A non-zero exit arrives as this error variant; it is still an exit.
                Some(Ok(_) | Err(Error::DockerContainerWaitError { .. })) => Ok(()),
                Some(Err(error)) => Err(call_error(error)),
                None => Err(CallError::Unreachable(
                    "the engine's wait ended without an answer".into(),
                )),
            }
        }
    }

    fn events(&self, id: &str, since: u64) -> Answers<Event> {
        let filters = HashMap::from([
            ("container", vec![id.to_string()]),
            ("type", vec!["container".to_string()]),
        ]);
        let options = EventsOptionsBuilder::default()
            .since(&since.to_string())
            .filters(&filters)
            .build();
        Box::pin(
            self.0
                .events(Some(options))
                .map(|item| item.map(event).map_err(call_error)),
        )
    }

    fn stats(&self, id: &str) -> Answers<StatsSample> {
        let options = StatsOptionsBuilder::default().stream(true).build();
        Box::pin(self.0.stats(id, Some(options)).map(|item| {
            item.map(|sample| {
                let memory = sample.memory_stats.unwrap_or_default();
                StatsSample {
                    peak_memory_bytes: memory.max_usage.or(memory.usage),
                    cpu_time_ns: sample
                        .cpu_stats
                        .and_then(|c| c.cpu_usage)
                        .and_then(|u| u.total_usage),
                }
            })
            .map_err(call_error)
        }))
    }

    async fn kill(&self, id: &str) -> Result<(), CallError> {
        let options = KillContainerOptionsBuilder::default()
            .signal("KILL")
            .build();
        self.0
            .kill_container(id, Some(options))
            .await
            .map_err(call_error)
    }

    async fn remove(&self, id: &str) -> Result<(), CallError> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        self.0
            .remove_container(id, Some(options))
            .await
            .map_err(call_error)
    }

    async fn archive_stat(&self, id: &str, path: &str) -> Result<PathStat, CallError> {
        let options = ContainerArchiveInfoOptionsBuilder::default()
            .path(path)
            .build();
        let stat = self
            .0
            .get_container_archive_info(id, Some(options))
            .await
            .map_err(call_error)?;
        Ok(PathStat {
            file_mode: stat.file_mode,
            link_target: stat.link_target,
        })
    }

    fn archive_read(&self, id: &str, path: &str) -> Answers<bytes::Bytes> {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        Box::pin(
            self.0
                .download_from_container(id, Some(options))
                .map(|item| item.map_err(call_error)),
        )
    }

    fn unreachable(&self, source: EngineError) -> SandboxError {
        match source.downcast::<Error>() {
            Ok(error) => crate::endpoint::unavailable(*error),
            Err(other) => SandboxError::RuntimeUnavailable(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(status_code: u16) -> Error {
        Error::DockerResponseServerError {
            status_code,
            message: format!("status {status_code}"),
        }
    }

    /// The lifecycle confirms a removal only on "not found" and takes any answer without a
    /// status as an unreachable engine: a 409 or a dropped connection read as "not found"
    /// would confirm a removal that did not happen.
    #[test]
    fn only_a_404_is_not_found_and_only_a_missing_answer_is_unreachable() {
        assert!(
            matches!(call_error(server(404)), CallError::NotFound { message } if message == "status 404")
        );
        for status in [304, 409, 500] {
            assert!(
                matches!(call_error(server(status)), CallError::Refused { status: s, .. } if s == status),
                "{status}"
            );
        }
        assert!(matches!(
            call_error(Error::RequestTimeoutError),
            CallError::Unreachable(_)
        ));
        let engine = DockerEngine(
            Docker::connect_with_http("http://127.0.0.1:9", 1, bollard::API_DEFAULT_VERSION)
                .expect("a client needs no daemon to be built"),
        );
        assert!(matches!(
            engine.unreachable(Box::new(Error::RequestTimeoutError)),
            SandboxError::RuntimeUnavailable(source) if source.to_string().contains("is not answering")
        ));
    }
}
