//! The engine's address and an unreachable engine explained in the operator's terms: which
//! endpoint was tried, that nothing answered there (with the operating system's reason), and
//! how to point the worker at a daemon. The client library's own message ("Error in the hyper
//! legacy client: client error (Connect)") names none of these.

/// The Engine API endpoint the client uses: `$DOCKER_HOST`, else the default local socket.
pub fn engine_endpoint() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => host,
        _ => "unix:///var/run/docker.sock".to_owned(),
    }
}

/// One line: the endpoint, the innermost cause, and what to do about it.
pub fn unreachable_message(error: &bollard::errors::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    let from_env = std::env::var_os("DOCKER_HOST").is_some_and(|h| !h.is_empty());
    let origin = if from_env {
        " (from DOCKER_HOST)"
    } else {
        " (the default; DOCKER_HOST is not set)"
    };
    format!(
        "the Docker daemon at {}{origin} is not answering: {cause}; start the daemon, or set \
         DOCKER_HOST to one that runs (for example unix:///var/run/docker.sock or \
         tcp://127.0.0.1:2375)",
        engine_endpoint()
    )
}

/// The engine could not be reached: shown as [`unreachable_message`], the client's error kept
/// as the source.
#[derive(Debug, thiserror::Error)]
#[error("{}", unreachable_message(.0))]
pub struct Unreachable(#[source] pub bollard::errors::Error);

/// `error` as the executor's "runtime unavailable".
pub fn unavailable(error: bollard::errors::Error) -> worker_sandbox::SandboxError {
    worker_sandbox::SandboxError::RuntimeUnavailable(Box::new(Unreachable(error)))
}
