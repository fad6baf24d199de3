//! Engine calls used by the run that decide nothing themselves: error helpers, the image
//! inspect (with its pull by digest), the wait for the stop, resource sampling and the event
//! subscription. What their answers mean is decided in the pure steps beside them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::api::Api;
use bollard::errors::Error as EngineError;
use bollard::models::ImageInspect;
use bollard::query_parameters::{
    CreateImageOptionsBuilder, EventsOptionsBuilder, StatsOptionsBuilder,
    WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::decision::{Decision, NoVerdictReason};
use super::events::EventLog;
use super::evidence::ResourceFacts;
use super::{PULL_FAILED, SandboxError, SandboxSpec};

/// How far back the event subscription replays the engine's buffer, so a `start` that happens
/// before the subscription is in place is still seen (the filter is the container's id, so
/// nothing older can match); generous for a daemon whose clock differs from ours.
const EVENTS_REPLAY: Duration = Duration::from_secs(600);

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(super) fn is_not_found(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

pub(super) fn engine_message(error: &EngineError) -> String {
    match error {
        EngineError::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

pub(super) fn enum_text<T: serde::Serialize>(value: Option<T>) -> String {
    match value.map(|v| serde_json::to_value(v)) {
        Some(Ok(serde_json::Value::String(s))) => s,
        _ => String::new(),
    }
}

/// Inspects the pinned image, pulling it by digest first when allowed and absent; an image
/// the engine answers about but cannot produce is a no-verdict, an engine that does not
/// answer is an error.
pub(super) async fn inspect_image(
    docker: &impl Api,
    spec: &SandboxSpec,
) -> Result<Result<ImageInspect, Decision>, SandboxError> {
    let mut inspected = docker.inspect_image(&spec.image).await;
    let mut pull_failed = None;
    if spec.pull && matches!(&inspected, Err(e) if is_not_found(e)) {
        // The reference is already checked to be digest-pinned, so this pulls by digest.
        let options = CreateImageOptionsBuilder::default()
            .from_image(&spec.image)
            .build();
        let mut pull = docker.create_image(Some(options));
        let mut pull_error = None;
        while let Some(item) = pull.next().await {
            if let Err(error) = item {
                pull_error = Some(engine_message(&error));
                break;
            }
        }
        if let Some(detail) = &pull_error {
            tracing::warn!(image = %spec.image, %detail, "pull by digest failed");
        }
        inspected = docker.inspect_image(&spec.image).await;
        pull_failed = pull_error;
    }
    match inspected {
        Ok(image) => Ok(Ok(image)),
        // The engine's reason is what the author can act on (no such digest in the registry,
        // an unreachable registry, denied), not a hint to pass --pull again.
        Err(error) if is_not_found(&error) => Ok(Err(Decision::no_verdict(
            NoVerdictReason::ImageMissing,
            match pull_failed {
                Some(reason) => format!(
                    "image {} is not present; {PULL_FAILED} {reason}",
                    spec.image
                ),
                None => format!("image {} is not present", spec.image),
            },
        ))),
        Err(error @ EngineError::DockerResponseServerError { .. }) => {
            Ok(Err(Decision::no_verdict(
                NoVerdictReason::ImageMissing,
                format!(
                    "image {} could not be inspected: {}",
                    spec.image,
                    engine_message(&error)
                ),
            )))
        }
        Err(error) => Err(crate::endpoint::unavailable(error)),
    }
}

/// Resolves once the engine reports the container not running.
///
/// A wait that fails (dropped connection, client timeout) is never taken as an exit: it is
/// checked with an inspect and re-issued.
pub(super) async fn wait_stopped(docker: impl Api, id: String) {
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

/// Follows the engine's events for container `id` into `log` until its first exit after start.
pub(super) async fn watch_events(docker: impl Api, id: String, log: Arc<Mutex<EventLog>>) {
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
                if log.died() {
                    return;
                }
                continue;
            }
            Some(Err(error)) => format!("the engine's event stream failed ({error})"),
            None => "the engine's event stream ended".to_string(),
        };
        if let Ok(mut log) = log.lock() {
            log.end(ended);
        }
        return;
    }
}

pub(super) async fn sample_stats(docker: impl Api, id: String, into: Arc<Mutex<ResourceFacts>>) {
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
