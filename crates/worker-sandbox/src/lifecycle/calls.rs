//! Engine calls used by the run that decide nothing themselves: the clock, the image
//! inspect (with its pull by digest), the wait for the stop, resource sampling and the event
//! subscription. What their answers mean is decided in the pure steps beside them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;

use super::events::EventLog;
use crate::decision::{Decision, NoVerdictReason};
use crate::engine::{CallError, ContainerEngine, ImageInspected};
use crate::evidence::ResourceFacts;
use crate::{PULL_FAILED, SandboxError, SandboxSpec};

/// How far back the event subscription replays the engine's buffer, so a `start` that happens
/// before the subscription is in place is still seen (the filter is the container's id, so
/// nothing older can match); generous for a daemon whose clock differs from ours.
const EVENTS_REPLAY: Duration = Duration::from_secs(600);

/// Inspects the pinned image, pulling it by digest first when allowed and absent; an image
/// the engine answers about but cannot produce is a no-verdict, an engine that does not
/// answer is an error.
pub(super) async fn inspect_image(
    engine: &impl ContainerEngine,
    spec: &SandboxSpec,
) -> Result<Result<ImageInspected, Decision>, SandboxError> {
    let mut inspected = engine.inspect_image(&spec.image).await;
    let mut pull_failed = None;
    if spec.pull && matches!(&inspected, Err(e) if e.is_not_found()) {
        // The reference is already checked to be digest-pinned, so this pulls by digest.
        let pull_error = engine
            .pull_image(&spec.image)
            .await
            .err()
            .map(|error| error.message());
        if let Some(detail) = &pull_error {
            tracing::warn!(image = %spec.image, %detail, "pull by digest failed");
        }
        inspected = engine.inspect_image(&spec.image).await;
        pull_failed = pull_error;
    }
    match inspected {
        Ok(image) => Ok(Ok(image)),
        // The engine's reason is what the author can act on (no such digest in the registry,
        // an unreachable registry, denied), not a hint to pass --pull again.
        Err(CallError::NotFound { .. }) => Ok(Err(Decision::no_verdict(
            NoVerdictReason::ImageMissing,
            match pull_failed {
                Some(reason) => format!(
                    "image {} is not present; {PULL_FAILED} {reason}",
                    spec.image
                ),
                None => format!("image {} is not present", spec.image),
            },
        ))),
        Err(error @ CallError::Refused { .. }) => Ok(Err(Decision::no_verdict(
            NoVerdictReason::ImageMissing,
            format!(
                "image {} could not be inspected: {}",
                spec.image,
                error.message()
            ),
        ))),
        Err(CallError::Unreachable(source)) => Err(engine.unreachable(source)),
    }
}

/// Resolves once the engine reports the container not running.
///
/// A wait that fails (dropped connection, client timeout) is never taken as an exit: it is
/// checked with an inspect and re-issued.
pub(super) async fn wait_stopped(engine: impl ContainerEngine, id: String) {
    loop {
        match engine.wait_stopped(&id).await {
            Ok(()) => return,
            Err(_) => {
                let running = engine
                    .inspect_container(&id)
                    .await
                    .ok()
                    .and_then(|i| i.state.running);
                if running != Some(true) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

/// Follows the engine's events for container `id` into `log` until its first exit after start;
/// `now_ms` is the lifecycle clock's time, from which the replay is counted back.
pub(super) async fn watch_events(
    engine: impl ContainerEngine,
    id: String,
    log: Arc<Mutex<EventLog>>,
    now_ms: u64,
) {
    let since = (now_ms / 1000).saturating_sub(EVENTS_REPLAY.as_secs());
    let mut stream = engine.events(&id, since);
    loop {
        let ended = match stream.next().await {
            Some(Ok(event)) => {
                if event.actor.as_deref() != Some(id.as_str()) {
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

pub(super) async fn sample_stats(
    engine: impl ContainerEngine,
    id: String,
    into: Arc<Mutex<ResourceFacts>>,
) {
    let mut stats = engine.stats(&id);
    while let Some(Ok(sample)) = stats.next().await {
        let peak = sample.peak_memory_bytes;
        let cpu = sample.cpu_time_ns;
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
