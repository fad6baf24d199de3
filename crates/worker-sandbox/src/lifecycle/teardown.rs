//! Stopping and removing a container, each request bounded so a slow engine cannot stall
//! teardown, and reading its final state into the evidence.

use std::time::Duration;

use tokio::time::Instant;

use worker_store::clock::Clock;

use super::wall_ms;
use crate::engine::{ContainerEngine, ContainerState};
use crate::evidence::EvidenceRecord;

/// How long to wait for a killed container to stop and for its output to drain.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long to keep retrying removal before giving up.
const REMOVE_GRACE: Duration = Duration::from_secs(20);
/// Bound on each kill, remove and inspect request during teardown, so a slow engine cannot
/// stall teardown for the client's default two minutes.
const TEARDOWN_CALL: Duration = Duration::from_secs(10);
/// Engine value of `State.StartedAt` for a container that never started.
const NEVER: &str = "0001-01-01T00:00:00Z";

/// Sends SIGKILL; returns whether the engine may have acted on it (accepted, or the
/// request timed out), so the run can tell its own `kill` event from someone else's.
pub(super) async fn kill(engine: &impl ContainerEngine, id: &str) -> bool {
    match tokio::time::timeout(TEARDOWN_CALL, engine.kill(id)).await {
        Ok(Ok(())) => true,
        // A container that already stopped answers 409 and emits no event; anything else
        // is worth a log line.
        Ok(Err(error)) => {
            tracing::debug!(container = %id, error = %error.message(), "kill");
            false
        }
        Err(_) => {
            tracing::warn!(container = %id, "kill request timed out");
            true
        }
    }
}

/// Force-removes the container and confirms the engine no longer knows it; returns the
/// confirmation time on `clock`.
///
/// The confirmation is the engine's own word either way: the removal's answer when it says
/// the container is gone (removed, or "no such container"), else an inspect answering "no
/// such container". Anything else — a refusal, an error, a request that timed out and may or
/// may not have landed — proves nothing, and the removal is retried until `REMOVE_GRACE`.
pub(super) async fn remove_and_confirm(
    engine: &impl ContainerEngine,
    id: &str,
    clock: &dyn Clock,
) -> Option<u64> {
    let give_up = Instant::now() + REMOVE_GRACE;
    loop {
        match tokio::time::timeout(TEARDOWN_CALL, engine.remove(id)).await {
            Ok(Ok(())) => return Some(wall_ms(clock)),
            Ok(Err(error)) if error.is_not_found() => return Some(wall_ms(clock)),
            Ok(Err(error)) => {
                tracing::debug!(container = %id, error = %error.message(), "remove");
            }
            Err(_) => tracing::debug!(container = %id, "remove request timed out"),
        }
        let confirm = tokio::time::timeout(TEARDOWN_CALL, engine.inspect_container(id)).await;
        match confirm {
            Ok(Err(error)) if error.is_not_found() => return Some(wall_ms(clock)),
            _ if Instant::now() >= give_up => {
                tracing::error!(container = %id, "container removal could not be confirmed");
                return None;
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The container's state as the engine reports it now, or `None` when it could not be read.
pub(super) async fn final_state(engine: &impl ContainerEngine, id: &str) -> Option<ContainerState> {
    let inspect = tokio::time::timeout(TEARDOWN_CALL, engine.inspect_container(id))
        .await
        .ok()?
        .ok()?;
    Some(inspect.state)
}

/// Records the final state, read at `now_ms`, in the evidence; returns whether the container
/// is still running.
pub(super) fn record_final_state(
    evidence: &mut EvidenceRecord,
    state: ContainerState,
    now_ms: u64,
) -> bool {
    let started_at = state.started_at.filter(|s| !s.is_empty() && s != NEVER);
    evidence.exit.started = started_at.is_some();
    evidence.timestamps.engine_started = started_at;
    evidence.timestamps.engine_finished = state.finished_at.filter(|s| s != NEVER);
    evidence.timestamps.finish_ms = Some(now_ms);
    evidence.exit.exit_code = state.exit_code;
    evidence.exit.oom_killed = state.oom_killed.unwrap_or(false);
    evidence.exit.engine_error = state.error.filter(|e| !e.is_empty());
    state.running.unwrap_or(false)
}
