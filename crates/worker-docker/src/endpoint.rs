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

/// The free space of the engine's data root `root`, read on this host with `statvfs` only when
/// the engine is reached over a local socket (`unix://`): a daemon behind `tcp://` or `ssh://`
/// keeps its images on another machine, where a path of the same name here says nothing.
/// Unknown is an answer, not a guess: the caller decides (serve refuses to pull then).
pub fn data_root_free(endpoint: &str, root: Option<&str>) -> worker_sandbox::engine::FreeSpace {
    use worker_sandbox::engine::FreeSpace;
    if !endpoint.starts_with("unix://") {
        return FreeSpace::Unknown(format!(
            "the engine at {endpoint} is not on this host, so the free space of its data root cannot be read here"
        ));
    }
    let Some(root) = root.filter(|r| !r.is_empty()) else {
        return FreeSpace::Unknown("the engine's /info names no DockerRootDir".into());
    };
    match rustix::fs::statvfs(root) {
        Ok(stat) => FreeSpace::Known(stat.f_bavail.saturating_mul(stat.f_frsize)),
        // A daemon in a VM (Docker Desktop) or another mount namespace: its root is not ours.
        Err(error) => FreeSpace::Unknown(format!(
            "the engine's data root {root} cannot be read on this host ({error})"
        )),
    }
}

#[cfg(test)]
mod free_space_tests {
    use super::data_root_free;
    use worker_sandbox::engine::FreeSpace;

    #[test]
    fn a_remote_engine_or_an_unreadable_root_has_unknown_free_space() {
        assert!(matches!(
            data_root_free("tcp://10.0.0.1:2375", Some("/")),
            FreeSpace::Unknown(_)
        ));
        assert!(matches!(
            data_root_free("unix:///var/run/docker.sock", None),
            FreeSpace::Unknown(_)
        ));
        assert!(matches!(
            data_root_free("unix:///var/run/docker.sock", Some("/no/such/root")),
            FreeSpace::Unknown(_)
        ));
        assert!(matches!(
            data_root_free("unix:///var/run/docker.sock", Some("/")),
            FreeSpace::Known(n) if n > 0
        ));
    }
}
