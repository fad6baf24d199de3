//! The [`ContainerEngine`] contract as one suite (the `conformance` feature): what the trait's
//! documentation promises the lifecycle, asked of an engine call by call and checked against
//! the answers, so every engine (the scripted [`crate::lifecycle::fake`], the Docker Engine
//! under runc and under runsc, any engine added later) is held to the same words the lifecycle
//! was written against.
//!
//! The lifecycle's decisions rest on these answers being told apart correctly: a removal that
//! says `Ok` while the container lives, a `kill` that succeeds on a stopped container, or a
//! missing image that is not [`CallError::NotFound`] would turn into a wrong verdict or a leaked
//! container without any lifecycle test noticing, because those run over the fake.
//!
//! [`exercise`] returns the clauses it checked or the first [`Breach`]; it never panics. It
//! creates one container (labelled with the caller's unique label, never the worker's own
//! labels, so no worker's stale sweep takes it) and removes it on every path after create.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;

use crate::SandboxSpec;
use crate::engine::{CallError, ContainerEngine, CreateRequest, Output};
use crate::profile;

/// The engine's zero date: the `StartedAt` of a container that never started.
const NEVER: &str = "0001-01-01T00:00:00Z";
/// A bound on the whole exercise, so an engine that never answers fails the suite instead of
/// hanging it. The outcome never depends on it being reached.
const HANG: Duration = Duration::from_secs(600);

/// What the exercise runs, chosen by the caller so it holds on the engine under test.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The container to create: a digest-pinned image the engine holds, an `argv` that writes
    /// [`Setup::stdout`] and exits with [`Setup::exit_code`], trees it mounts.
    pub spec: SandboxSpec,
    /// The OCI runtime the engine must offer and the container is created under.
    pub oci_runtime: String,
    /// Exactly what the program writes on stdout.
    pub stdout: Vec<u8>,
    /// The program's exit status.
    pub exit_code: i64,
    /// An executable regular file in the image (not a symlink), as an absolute path.
    pub executable: String,
    /// A digest-pinned reference the engine does not hold.
    pub absent_image: String,
    /// `key=value`, unique to this exercise: the created container's only label.
    pub label: String,
}

/// A promise of the trait the engine did not keep.
#[derive(Debug, thiserror::Error)]
#[error("{clause}: {detail}")]
pub struct Breach {
    /// The clause, in the trait's words.
    pub clause: &'static str,
    /// What the engine answered instead.
    pub detail: String,
}

fn breach(clause: &'static str, detail: impl Into<String>) -> Breach {
    Breach {
        clause,
        detail: detail.into(),
    }
}

/// Holds `engine` to the [`ContainerEngine`] contract with `setup`; the clauses checked, in
/// order, or the first one broken.
pub async fn exercise<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
) -> Result<Vec<&'static str>, Breach> {
    tokio::time::timeout(HANG, exercise_unbounded(engine, setup))
        .await
        .map_err(|_| breach("every call answers", format!("no end within {HANG:?}")))?
}

async fn exercise_unbounded<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
) -> Result<Vec<&'static str>, Breach> {
    let mut checked = Vec::new();
    describe(engine, setup, &mut checked).await?;
    const LEASE: &str = "a sandbox uid can be leased for the container";
    // Held until the removal is confirmed, as the lifecycle holds it.
    let identity = crate::identity::lease().map_err(|e| breach(LEASE, e.to_string()))?;
    let request = request(engine, setup, identity.uid(), &mut checked).await?;

    const CREATE: &str = "create_container returns the id of a container the engine knows";
    let id = engine
        .create_container(&request)
        .await
        .map_err(|e| breach(CREATE, e.to_string()))?;
    checked.push(CREATE);
    let run = created(engine, setup, &request, &id, &mut checked).await;
    // Removed on every path, as the lifecycle does; a breach before this is the one reported.
    let removal = removed(engine, setup, &id, &mut checked).await;
    drop(identity);
    run?;
    removal?;
    Ok(checked)
}

/// The calls that need no container: the engine's own facts, runtimes and images.
async fn describe<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
    checked: &mut Vec<&'static str>,
) -> Result<(), Breach> {
    const FACTS: &str = "engine_facts names the engine's version and API version";
    let facts = engine
        .engine_facts()
        .await
        .map_err(|e| breach(FACTS, e.to_string()))?;
    if facts.version.is_empty() || facts.api_version.is_empty() {
        return Err(breach(FACTS, format!("{facts:?}")));
    }
    checked.push(FACTS);

    const OFFERED: &str = "oci_runtime describes a runtime the engine offers, with its facts";
    let runtime = engine
        .oci_runtime(&setup.oci_runtime)
        .await
        .map_err(|e| breach(OFFERED, e.to_string()))?;
    let named = runtime
        .facts
        .as_ref()
        .is_some_and(|f| f.name == setup.oci_runtime);
    if !named || !runtime.offered.contains(&setup.oci_runtime) {
        return Err(breach(OFFERED, format!("{runtime:?}")));
    }
    checked.push(OFFERED);

    const NOT_OFFERED: &str = "oci_runtime of a runtime the engine does not offer has no facts";
    let unknown = "conformance-no-such-runtime";
    let runtime = engine
        .oci_runtime(unknown)
        .await
        .map_err(|e| breach(NOT_OFFERED, e.to_string()))?;
    if runtime.facts.is_some() || runtime.offered.iter().any(|o| o == unknown) {
        return Err(breach(NOT_OFFERED, format!("{runtime:?}")));
    }
    checked.push(NOT_OFFERED);

    const ABSENT: &str = "inspect_image of an image the engine does not hold is NotFound";
    match engine.inspect_image(&setup.absent_image).await {
        Err(CallError::NotFound { .. }) => checked.push(ABSENT),
        other => return Err(breach(ABSENT, format!("{other:?}"))),
    }
    Ok(())
}

/// The create request the lifecycle would make for `setup.spec`, from the image's own answers.
async fn request<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
    sandbox_uid: u32,
    checked: &mut Vec<&'static str>,
) -> Result<CreateRequest, Breach> {
    const HELD: &str =
        "inspect_image of a held image gives its content address and the pinned reference";
    let image = engine
        .inspect_image(&setup.spec.image)
        .await
        .map_err(|e| breach(HELD, e.to_string()))?;
    let addressed = image
        .id
        .as_deref()
        .is_some_and(|id| id.starts_with("sha256:"));
    let pinned = image
        .repo_digests
        .as_ref()
        .is_some_and(|d| d.contains(&setup.spec.image));
    if !addressed || !pinned {
        return Err(breach(HELD, format!("{image:?}")));
    }
    checked.push(HELD);

    let image_path = image
        .env
        .iter()
        .flatten()
        .find_map(|e| e.strip_prefix("PATH="))
        .map(str::to_owned);
    let valid = crate::spec::validate(&setup.spec)
        .map_err(|e| breach("the setup's spec is valid", e.to_string()))?;
    let want = profile::requested(
        &setup.spec,
        valid.limits,
        image_path.as_deref(),
        &valid.source,
        &valid.benchmark,
        &setup.oci_runtime,
        sandbox_uid,
    );
    let (key, value) = setup
        .label
        .split_once('=')
        .ok_or_else(|| breach("the setup's label is key=value", setup.label.clone()))?;
    Ok(CreateRequest {
        name: format!("conformance-{}", setup.spec.run_id),
        image: setup.spec.image.clone(),
        profile: want,
        env: profile::environment(setup.spec.request.test_seed, image_path.as_deref()),
        labels: HashMap::from([(key.to_owned(), value.to_owned())]),
    })
}

/// From the created container to its exit.
async fn created<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
    request: &CreateRequest,
    id: &str,
    checked: &mut Vec<&'static str>,
) -> Result<(), Breach> {
    const READ_BACK: &str = "inspect_container of a created container reads back the requested \
                             profile, not running, never started";
    let inspected = engine
        .inspect_container(id)
        .await
        .map_err(|e| breach(READ_BACK, e.to_string()))?;
    let mismatches = request.profile.mismatches(&inspected.profile);
    let never_started = inspected
        .state
        .started_at
        .as_deref()
        .is_none_or(|s| s == NEVER);
    if !mismatches.is_empty() || inspected.state.running != Some(false) || !never_started {
        return Err(breach(
            READ_BACK,
            format!("differs in {mismatches:?}; state {:?}", inspected.state),
        ));
    }
    checked.push(READ_BACK);

    const LISTED: &str = "list_containers with a label lists the created container, stopped, \
                          with its labels";
    let listed = engine
        .list_containers(Some(&setup.label))
        .await
        .map_err(|e| breach(LISTED, e.to_string()))?;
    let found = matches!(listed.as_slice(), [one] if one.id.as_deref() == Some(id)
        && !one.running
        && one.labels == request.labels);
    if !found {
        return Err(breach(LISTED, format!("{listed:?}")));
    }
    checked.push(LISTED);

    const KILL_CREATED: &str = "kill of a container that is not running is refused";
    match engine.kill(id).await {
        Err(CallError::Refused { .. }) => checked.push(KILL_CREATED),
        other => return Err(breach(KILL_CREATED, format!("{other:?}"))),
    }

    const STAT: &str = "archive_stat gives an executable regular file's mode, unfollowed";
    let stat = engine
        .archive_stat(id, &setup.executable)
        .await
        .map_err(|e| breach(STAT, e.to_string()))?;
    // Go's os.FileMode: any type bit (directory, symlink, device, …) sits above the low 12.
    let regular = stat.file_mode & !0o7777 == 0;
    if !regular || stat.file_mode & 0o111 == 0 || !stat.link_target.is_empty() {
        return Err(breach(STAT, format!("{stat:?}")));
    }
    checked.push(STAT);

    const STAT_ABSENT: &str = "archive_stat of a path the container does not hold is NotFound";
    match engine.archive_stat(id, "/conformance/no/such/path").await {
        Err(CallError::NotFound { .. }) => checked.push(STAT_ABSENT),
        other => return Err(breach(STAT_ABSENT, format!("{other:?}"))),
    }

    ran(engine, setup, id, checked).await
}

/// Events and attach before start, the program's own exit and output after it.
async fn ran<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
    id: &str,
    checked: &mut Vec<&'static str>,
) -> Result<(), Breach> {
    const ATTACH: &str = "attach before start gives the program's whole stdout, ending at exit";
    const EVENTS: &str = "events subscribed before start show start, then die";
    const START: &str = "start starts the created container";
    const WAIT: &str = "wait_stopped resolves once it stopped, and again when already stopped";
    const EXIT: &str = "inspect_container after the exit gives the program's own exit status";

    // The engine replays its buffer from `since`: a minute back is well before this create.
    let since =
        worker_store::clock::unix_secs(&worker_store::clock::SystemClock::new()).saturating_sub(60);
    let mut events = engine.events(id, since);
    let output = engine
        .attach(id)
        .await
        .map_err(|e| breach(ATTACH, e.to_string()))?;
    let reader = tokio::spawn(output.collect::<Vec<_>>());
    engine
        .start(id)
        .await
        .map_err(|e| breach(START, e.to_string()))?;
    checked.push(START);
    engine
        .wait_stopped(id)
        .await
        .map_err(|e| breach(WAIT, e.to_string()))?;
    engine
        .wait_stopped(id)
        .await
        .map_err(|e| breach(WAIT, format!("the second wait: {e}")))?;
    checked.push(WAIT);

    let pieces = reader
        .await
        .map_err(|e| breach(ATTACH, format!("the reader ended: {e}")))?;
    let mut stdout = Vec::new();
    for piece in pieces {
        match piece.map_err(|e| breach(ATTACH, e.to_string()))? {
            Output::Stdout(bytes) => stdout.extend_from_slice(&bytes),
            Output::Stderr(_) | Output::Other => {}
        }
    }
    if stdout != setup.stdout {
        return Err(breach(
            ATTACH,
            format!("stdout {:?}", String::from_utf8_lossy(&stdout)),
        ));
    }
    checked.push(ATTACH);

    let mut actions = Vec::new();
    while !actions.iter().any(|a| a == "die") {
        match events.next().await {
            Some(Ok(event)) => {
                if event.actor.as_deref().is_none_or(|actor| actor == id) {
                    actions.push(event.action);
                }
            }
            Some(Err(e)) => return Err(breach(EVENTS, e.to_string())),
            None => return Err(breach(EVENTS, format!("ended after {actions:?}"))),
        }
    }
    let start = actions.iter().position(|a| a == "start");
    let die = actions.iter().position(|a| a == "die");
    if !matches!((start, die), (Some(s), Some(d)) if s < d) {
        return Err(breach(EVENTS, format!("{actions:?}")));
    }
    checked.push(EVENTS);

    let inspected = engine
        .inspect_container(id)
        .await
        .map_err(|e| breach(EXIT, e.to_string()))?;
    let state = &inspected.state;
    let started = state.started_at.as_deref().is_some_and(|s| s != NEVER);
    if state.running != Some(false)
        || state.exit_code != Some(setup.exit_code)
        || state.oom_killed != Some(false)
        || !started
    {
        return Err(breach(EXIT, format!("{state:?}")));
    }
    checked.push(EXIT);

    const KILL_STOPPED: &str = "kill of a stopped container is refused";
    match engine.kill(id).await {
        Err(CallError::Refused { .. }) => checked.push(KILL_STOPPED),
        other => return Err(breach(KILL_STOPPED, format!("{other:?}"))),
    }
    Ok(())
}

/// Removal, and what the engine says of the container afterwards.
async fn removed<E: ContainerEngine>(
    engine: &E,
    setup: &Setup,
    id: &str,
    checked: &mut Vec<&'static str>,
) -> Result<(), Breach> {
    const REMOVE: &str = "remove is Ok once the engine no longer knows the container";
    engine
        .remove(id)
        .await
        .map_err(|e| breach(REMOVE, e.to_string()))?;
    match engine.inspect_container(id).await {
        Err(CallError::NotFound { .. }) => {}
        other => return Err(breach(REMOVE, format!("inspect after it: {other:?}"))),
    }
    let listed = engine
        .list_containers(Some(&setup.label))
        .await
        .map_err(|e| breach(REMOVE, e.to_string()))?;
    if listed.iter().any(|c| c.id.as_deref() == Some(id)) {
        return Err(breach(REMOVE, format!("still listed: {listed:?}")));
    }
    checked.push(REMOVE);

    const REMOVE_UNKNOWN: &str = "remove of a container the engine does not know is NotFound";
    match engine.remove(id).await {
        Err(CallError::NotFound { .. }) => checked.push(REMOVE_UNKNOWN),
        other => return Err(breach(REMOVE_UNKNOWN, format!("{other:?}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests;
