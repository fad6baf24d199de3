//! The Engine API calls the run lifecycle makes, as one trait. [`bollard::Docker`] is the real
//! implementation (each method forwards to the client's own); the lifecycle tests implement it
//! with a scripted engine, so every path of the lifecycle (deadline, output cap, OOM, external
//! kill, an engine restart, removal confirmation) runs without a Docker daemon.
//!
//! The methods keep the client's names, arguments and types, so the lifecycle reads the same
//! over either.

use std::future::Future;
use std::pin::Pin;

use bollard::Docker;
use bollard::container::{AttachContainerResults, PathStatResponse};
use bollard::errors::Error;
use bollard::models::{
    ContainerCreateBody, ContainerCreateResponse, ContainerInspectResponse, ContainerStatsResponse,
    ContainerSummary, ContainerWaitResponse, CreateImageInfo, EventMessage, ImageInspect,
    SystemInfo,
};
use bollard::query_parameters::{
    AttachContainerOptions, ContainerArchiveInfoOptions, CreateContainerOptions,
    CreateImageOptions, DownloadFromContainerOptions, EventsOptions, InspectContainerOptions,
    KillContainerOptions, ListContainersOptions, RemoveContainerOptions, StartContainerOptions,
    StatsOptions, WaitContainerOptions,
};

/// A stream of engine answers, owned (it outlives the call that opened it).
pub type Answers<T> = Pin<Box<dyn futures_util::Stream<Item = Result<T, Error>> + Send>>;

/// The Engine API as the lifecycle uses it.
pub trait Api: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// `GET /info`.
    fn info(&self) -> impl Future<Output = Result<SystemInfo, Error>> + Send;
    /// `GET /containers/json`.
    fn list_containers(
        &self,
        options: Option<ListContainersOptions>,
    ) -> impl Future<Output = Result<Vec<ContainerSummary>, Error>> + Send;
    /// `GET /images/{name}/json`.
    fn inspect_image(&self, name: &str)
    -> impl Future<Output = Result<ImageInspect, Error>> + Send;
    /// `POST /images/create` (a pull), its progress as a stream.
    fn create_image(&self, options: Option<CreateImageOptions>) -> Answers<CreateImageInfo>;
    /// `POST /containers/create`.
    fn create_container(
        &self,
        options: Option<CreateContainerOptions>,
        body: ContainerCreateBody,
    ) -> impl Future<Output = Result<ContainerCreateResponse, Error>> + Send;
    /// `GET /containers/{id}/json`.
    fn inspect_container(
        &self,
        id: &str,
        options: Option<InspectContainerOptions>,
    ) -> impl Future<Output = Result<ContainerInspectResponse, Error>> + Send;
    /// `POST /containers/{id}/attach`.
    fn attach_container(
        &self,
        id: &str,
        options: Option<AttachContainerOptions>,
    ) -> impl Future<Output = Result<AttachContainerResults, Error>> + Send;
    /// `POST /containers/{id}/start`.
    fn start_container(
        &self,
        id: &str,
        options: Option<StartContainerOptions>,
    ) -> impl Future<Output = Result<(), Error>> + Send;
    /// `POST /containers/{id}/wait`.
    fn wait_container(
        &self,
        id: &str,
        options: Option<WaitContainerOptions>,
    ) -> Answers<ContainerWaitResponse>;
    /// `GET /events`.
    fn events(&self, options: Option<EventsOptions>) -> Answers<EventMessage>;
    /// `GET /containers/{id}/stats`.
    fn stats(&self, id: &str, options: Option<StatsOptions>) -> Answers<ContainerStatsResponse>;
    /// `POST /containers/{id}/kill`.
    fn kill_container(
        &self,
        id: &str,
        options: Option<KillContainerOptions>,
    ) -> impl Future<Output = Result<(), Error>> + Send;
    /// `DELETE /containers/{id}`.
    fn remove_container(
        &self,
        id: &str,
        options: Option<RemoveContainerOptions>,
    ) -> impl Future<Output = Result<(), Error>> + Send;
    /// `HEAD /containers/{id}/archive`.
    fn get_container_archive_info(
        &self,
        id: &str,
        options: Option<ContainerArchiveInfoOptions>,
    ) -> impl Future<Output = Result<PathStatResponse, Error>> + Send;
    /// `GET /containers/{id}/archive`.
    fn download_from_container(
        &self,
        id: &str,
        options: Option<DownloadFromContainerOptions>,
    ) -> Answers<bytes::Bytes>;
}

impl Api for Docker {
    fn info(&self) -> impl Future<Output = Result<SystemInfo, Error>> + Send {
        Docker::info(self)
    }
    fn list_containers(
        &self,
        options: Option<ListContainersOptions>,
    ) -> impl Future<Output = Result<Vec<ContainerSummary>, Error>> + Send {
        Docker::list_containers(self, options)
    }
    fn inspect_image(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<ImageInspect, Error>> + Send {
        Docker::inspect_image(self, name)
    }
    fn create_image(&self, options: Option<CreateImageOptions>) -> Answers<CreateImageInfo> {
        Box::pin(Docker::create_image(self, options, None, None))
    }
    fn create_container(
        &self,
        options: Option<CreateContainerOptions>,
        body: ContainerCreateBody,
    ) -> impl Future<Output = Result<ContainerCreateResponse, Error>> + Send {
        Docker::create_container(self, options, body)
    }
    fn inspect_container(
        &self,
        id: &str,
        options: Option<InspectContainerOptions>,
    ) -> impl Future<Output = Result<ContainerInspectResponse, Error>> + Send {
        Docker::inspect_container(self, id, options)
    }
    fn attach_container(
        &self,
        id: &str,
        options: Option<AttachContainerOptions>,
    ) -> impl Future<Output = Result<AttachContainerResults, Error>> + Send {
        Docker::attach_container(self, id, options)
    }
    fn start_container(
        &self,
        id: &str,
        options: Option<StartContainerOptions>,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        Docker::start_container(self, id, options)
    }
    fn wait_container(
        &self,
        id: &str,
        options: Option<WaitContainerOptions>,
    ) -> Answers<ContainerWaitResponse> {
        Box::pin(Docker::wait_container(self, id, options))
    }
    fn events(&self, options: Option<EventsOptions>) -> Answers<EventMessage> {
        Box::pin(Docker::events(self, options))
    }
    fn stats(&self, id: &str, options: Option<StatsOptions>) -> Answers<ContainerStatsResponse> {
        Box::pin(Docker::stats(self, id, options))
    }
    fn kill_container(
        &self,
        id: &str,
        options: Option<KillContainerOptions>,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        Docker::kill_container(self, id, options)
    }
    fn remove_container(
        &self,
        id: &str,
        options: Option<RemoveContainerOptions>,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        Docker::remove_container(self, id, options)
    }
    fn get_container_archive_info(
        &self,
        id: &str,
        options: Option<ContainerArchiveInfoOptions>,
    ) -> impl Future<Output = Result<PathStatResponse, Error>> + Send {
        Docker::get_container_archive_info(self, id, options)
    }
    fn download_from_container(
        &self,
        id: &str,
        options: Option<DownloadFromContainerOptions>,
    ) -> Answers<bytes::Bytes> {
        Box::pin(Docker::download_from_container(self, id, options))
    }
}
