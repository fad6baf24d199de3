//! The engine's address and an unreachable engine explained in the operator's terms: which
//! endpoint was tried, that nothing answered there (with the operating system's reason), and
//! how to point the worker at a daemon; or, when the socket refused this user, its permissions
//! and owner and the group that may use it. The client library's own message ("Error in the
//! hyper legacy client: client error (Connect)") names none of these.

/// The Engine API endpoint the client uses: `$DOCKER_HOST`, else the default local socket.
pub fn engine_endpoint() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => host,
        _ => "unix:///var/run/docker.sock".to_owned(),
    }
}

/// One line: the endpoint, the innermost cause, and what to do about it. A unix socket that
/// refused this user is said so ([`socket_denied_message`]): the daemon runs, and "start the
/// daemon" would send the operator the wrong way.
pub fn unreachable_message(error: &bollard::errors::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    let mut denied = is_permission_denied(cause);
    while let Some(inner) = cause.source() {
        cause = inner;
        denied |= is_permission_denied(cause);
    }
    let from_env = std::env::var_os("DOCKER_HOST").is_some_and(|h| !h.is_empty());
    let origin = if from_env {
        " (from DOCKER_HOST)"
    } else {
        " (the default; DOCKER_HOST is not set)"
    };
    let endpoint = engine_endpoint();
    if denied && let Some(path) = endpoint.strip_prefix("unix://") {
        return socket_denied_message(std::path::Path::new(path), origin);
    }
    format!(
        "the Docker daemon at {endpoint}{origin} is not answering: {cause}; start the daemon, or \
         set DOCKER_HOST to one that runs (for example unix:///var/run/docker.sock or \
         tcp://127.0.0.1:2375)"
    )
}

/// Whether `cause` is the operating system refusing this process (EACCES, EPERM).
fn is_permission_denied(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        || cause.to_string().contains("(os error 13)")
}

/// The start of [`socket_denied_message`], which `worker doctor` recognises.
pub use worker_doctor::SOCKET_DENIED;

/// A unix socket at `path` that refused this process: its permissions and owner, who this
/// process is, and what to do (the socket's group or root), with what that grant means.
pub fn socket_denied_message(path: &std::path::Path, origin: &str) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let me = this_process();
    let (socket, grant) = match std::fs::metadata(path) {
        Ok(m) => {
            let group =
                name_of("/etc/group", m.gid()).unwrap_or_else(|| format!("gid {}", m.gid()));
            let owner =
                name_of("/etc/passwd", m.uid()).unwrap_or_else(|| format!("uid {}", m.uid()));
            let socket = format!(
                "the socket is {} ({:04o}) owned by {owner}:{group}",
                mode_string(m.mode()),
                m.mode() & 0o7777
            );
            let grant = if m.gid() == 0 {
                "only root may use it: run the worker as root, or have the daemon hand the \
                 socket to a group (dockerd's `group` setting, `docker` in Docker's packages) \
                 and add the worker's user to it"
                    .to_owned()
            } else {
                format!(
                    "run the worker as a member of the socket's group `{group}` (`sudo usermod \
                     -aG {group} <user>`, then log in again) or as root"
                )
            };
            (socket, grant)
        }
        Err(e) => (
            format!("its permissions could not be read ({e})"),
            "run the worker as root or as a member of the socket's group (`docker` in Docker's \
             packages)"
                .to_owned(),
        ),
    };
    format!(
        "{SOCKET_DENIED} {}{origin}: {socket}, and this process runs as {me}; the daemon is \
         running, so do not restart it: {grant}. Membership of the group `docker` (of any \
         group that may use the socket) is root-equivalent: whoever may use the socket can \
         start a privileged container with the host's / mounted, so grant it only to the \
         account that runs the worker",
        path.display()
    )
}

/// `uid N (name), gid N, groups …` of this process, from `/proc/self/status`.
fn this_process() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let uid = field("Uid:").get(1).cloned().unwrap_or_else(|| "?".into());
    let gid = field("Gid:").get(1).cloned().unwrap_or_else(|| "?".into());
    let groups = field("Groups:");
    let named = |file: &str, id: &str| {
        id.parse()
            .ok()
            .and_then(|id| name_of(file, id))
            .map_or_else(|| id.to_owned(), |name| format!("{id} ({name})"))
    };
    let groups = if groups.is_empty() {
        "no supplementary groups".to_owned()
    } else {
        let listed: Vec<String> = groups.iter().map(|g| named("/etc/group", g)).collect();
        format!("supplementary groups {}", listed.join(", "))
    };
    format!(
        "uid {}, gid {}, {groups}",
        named("/etc/passwd", &uid),
        named("/etc/group", &gid)
    )
}

/// The name of `id` in a `name:x:id:…` database (`/etc/passwd`, `/etc/group`).
fn name_of(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.split(':');
        let name = parts.next()?;
        (parts.nth(1)?.parse::<u32>().ok()? == id).then(|| name.to_owned())
    })
}

/// `ls -l`'s form of a mode: `srw-rw----`.
fn mode_string(mode: u32) -> String {
    let kind = match mode & 0o170_000 {
        0o140_000 => 's',
        0o040_000 => 'd',
        0o120_000 => 'l',
        0o100_000 => '-',
        _ => '?',
    };
    let mut out = String::from(kind);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 0o7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    out
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

#[cfg(test)]
mod socket_denied_tests {
    use super::*;

    /// A real unix socket, mode 0660: the message names its `ls -l` mode, octal mode and
    /// owner, this process, and what membership of the socket's group means.
    #[test]
    fn a_denied_socket_is_described_by_its_permissions_owner_and_group() {
        let dir = std::env::temp_dir().join(format!("endpoint-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("docker.sock");
        let _ = std::fs::remove_file(&path);
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o660))
            .unwrap();
        let said = socket_denied_message(&path, " (from DOCKER_HOST)");
        assert!(said.starts_with(SOCKET_DENIED), "{said}");
        assert!(said.contains("srw-rw---- (0660)"), "{said}");
        assert!(said.contains(&path.display().to_string()), "{said}");
        assert!(said.contains("root-equivalent"), "{said}");
        assert!(said.contains("this process runs as uid "), "{said}");
        assert!(!said.contains("start the daemon"), "{said}");
        let missing = socket_denied_message(&dir.join("absent.sock"), "");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(missing.contains("could not be read"), "{missing}");
        assert_eq!(mode_string(0o140_660), "srw-rw----");
        assert_eq!(mode_string(0o100_755), "-rwxr-xr-x");
    }
}
