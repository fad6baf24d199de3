//! The run lifecycle over a scripted engine ([`super::fake`]): every path of the lifecycle that
//! the real-Docker tests reach only with a daemon (and some, like an engine restart or an
//! unconfirmed removal, not at all) runs here in milliseconds, on tokio's paused clock, so
//! deadlines and grace periods are reached by the runtime advancing time when it is idle,
//! never by a sleep being long enough.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use verifier_sdk::oci_runtime::RUNC;

use super::Lifecycle;
use super::fake::{Fake, Script};
use crate::decision::{Decision, InputCheck, NoVerdictReason, StoppedBy};
use crate::{InputPhase, RunHooks, RunReport, SandboxSpec};

struct Unchanged;

impl RunHooks for Unchanged {
    fn check_inputs(&self, _: InputPhase) -> InputCheck {
        InputCheck::Matched
    }
}

fn spec(dir: &std::path::Path) -> SandboxSpec {
    let mut spec = crate::spec::sample_spec(dir, "linux/amd64");
    spec.request.timeout_ms = 5_000;
    spec.request.max_output_bytes = 1024;
    spec
}

/// Runs `spec` on a fresh scripted engine; a run that does not end within an hour of the
/// paused clock is a hung lifecycle, reported as such instead of hanging the test.
async fn run(script: Script, spec: &SandboxSpec) -> (RunReport, Fake) {
    run_with(script, spec, &Unchanged).await
}

/// [`run`] with `hooks`.
async fn run_with(script: Script, spec: &SandboxSpec, hooks: &dyn RunHooks) -> (RunReport, Fake) {
    run_with_fake(Fake::new(script), spec, hooks).await
}

/// [`run_with`] on `fake`.
async fn run_with_fake(fake: Fake, spec: &SandboxSpec, hooks: &dyn RunHooks) -> (RunReport, Fake) {
    let executor = Lifecycle::connect_owned_by(fake.clone(), RUNC, "owner".into())
        .await
        .expect("the scripted engine describes itself");
    let report = tokio::time::timeout(Duration::from_secs(3600), executor.run(spec, hooks))
        .await
        .expect("the lifecycle hung: the run never ended")
        .expect("the scripted engine is always reachable");
    (report, fake)
}

fn reason(decision: &Decision) -> Option<NoVerdictReason> {
    match decision {
        Decision::NoVerdict { reason, .. } => Some(*reason),
        Decision::Completed { .. } => None,
    }
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_program_exiting_0_completes_and_its_container_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (report, fake) = run(Script::default(), &spec(dir.path())).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(report.output.stdout, b"ok\n");
    assert!(report.evidence.exit.removed);
    assert_eq!(fake.kills(), 0);
    assert!(fake.removals() >= 1);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_the_evidence_records_the_facts_of_the_engine_it_ran_on() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = run(Script::default(), &spec(dir.path())).await;
    assert_eq!(report.evidence.engine, super::fake::facts());
    assert_eq!(
        report
            .evidence
            .oci_runtime
            .as_ref()
            .map(|r| r.version.as_str()),
        Some("runc version test")
    );
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_run_on_an_engine_other_than_docker_is_never_stamped_docker_engine() {
    // The stamp is what keeps a test double's candidate from ever being signed
    // (`EvidenceRecord::from_docker_value` refuses any other): the engine that ran the
    // container supplies it, never the lifecycle on every engine's behalf.
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = run(Script::default(), &spec(dir.path())).await;
    assert_ne!(
        report.evidence.executor,
        verifier_sdk::evidence::DOCKER_EXECUTOR
    );
    assert_eq!(report.evidence.executor, super::fake::EXECUTOR);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_deadline_kills_the_program_and_is_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        runs_until_killed: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::Timeout),
        "{report:?}"
    );
    assert_eq!(report.evidence.exit.stopped_by, StoppedBy::Timeout);
    assert_eq!(fake.kills(), 1, "the deadline sends exactly one SIGKILL");
    assert!(report.evidence.exit.removed);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_output_past_the_cap_kills_the_program_and_is_output_limit() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        stdout: vec![b'x'; 4096],
        runs_until_killed: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::OutputLimit),
        "{report:?}"
    );
    assert_eq!(report.evidence.exit.stopped_by, StoppedBy::OutputLimit);
    assert_eq!(fake.kills(), 1, "passing the cap sends exactly one SIGKILL");
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_oom_kill_is_oom_never_a_failed_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        oom_killed: true,
        ..Script::default()
    };
    let (report, _) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::Oom),
        "{report:?}"
    );
    assert!(report.evidence.exit.oom_killed);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_kill_from_outside_is_externally_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        external_kill: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::ExternallyStopped),
        "{report:?}"
    );
    assert_eq!(fake.kills(), 0, "the sandbox itself sent no kill");
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_engine_restart_mid_run_is_no_verdict_and_its_failed_wait_no_exit() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        engine_restarts: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        fake.waits(),
        2,
        "the wait that failed was re-issued, not taken as the exit"
    );
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::ExternallyStopped),
        "an event stream that ended before the exit leaves the run unjudged: {report:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_unconfirmed_removal_voids_a_passed_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        removal_unconfirmed: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::InternalError),
        "{report:?}"
    );
    assert!(!report.evidence.exit.removed);
    assert!(
        fake.removals() > 1,
        "removal is retried until its grace period ends"
    );
    let calls = fake.calls();
    assert!(
        calls[position(&calls, "remove")..].contains(&"inspect"),
        "a refused removal is checked with an inspect, which still finds the container: {calls:?}"
    );
}

/// An engine that changes the profile it was asked for (drops a limit, swaps the network or the
/// runtime) must not get a run: the read-back is compared before start, the run is no verdict,
/// nothing ran, and the container it created is removed.
async fn assert_changed_read_back_refused(change: fn(&mut crate::profile::Isolation), field: &str) {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        read_back: Some(change),
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::IsolationMismatch),
        "{report:?}"
    );
    let isolation = report
        .evidence
        .isolation
        .as_ref()
        .expect("read-back recorded");
    assert_eq!(isolation.mismatches, vec![field.to_string()]);
    assert!(
        !fake.started(),
        "a container that differs from the profile never starts"
    );
    assert!(!report.evidence.exit.started);
    assert!(fake.removals() >= 1, "the created container is removed");
    assert!(report.evidence.exit.removed);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_engine_that_drops_the_memory_limit_on_create_gives_no_verdict_and_runs_nothing()
 {
    assert_changed_read_back_refused(|p| p.memory = 0, "memory").await;
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_engine_that_puts_the_container_on_the_bridge_network_gives_no_verdict_and_runs_nothing()
 {
    assert_changed_read_back_refused(|p| p.network_mode = "bridge".into(), "network_mode").await;
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_engine_that_makes_the_root_writable_gives_no_verdict_and_runs_nothing() {
    assert_changed_read_back_refused(|p| p.readonly_rootfs = false, "readonly_rootfs").await;
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_engine_that_swaps_the_oci_runtime_gives_no_verdict_and_runs_nothing() {
    assert_changed_read_back_refused(|p| p.runtime = "runsc".into(), "runtime").await;
}

#[tokio::test(start_paused = true)]
async fn lifecycle_the_evidence_times_come_from_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    const AT: i64 = 1_000_000;
    let executor = Lifecycle::connect_owned_by(Fake::new(Script::default()), RUNC, "owner".into())
        .await
        .unwrap()
        .with_clock(std::sync::Arc::new(worker_store::clock::ManualClock::new(
            AT,
        )));
    let report = tokio::time::timeout(
        Duration::from_secs(3600),
        executor.run(&spec(dir.path()), &Unchanged),
    )
    .await
    .expect("the lifecycle hung")
    .unwrap();
    let at = AT.unsigned_abs();
    let times = &report.evidence.timestamps;
    assert_eq!(
        (
            times.begin_ms,
            times.create_ms,
            times.start_ms,
            times.finish_ms,
            times.remove_ms
        ),
        (at, Some(at), Some(at), Some(at), Some(at)),
        "every time the lifecycle records is read from its clock"
    );
}

/// Where `call` first reached the engine after the container was created.
fn position(calls: &[&str], call: &str) -> usize {
    calls
        .iter()
        .position(|c| *c == call)
        .unwrap_or_else(|| panic!("no {call} in {calls:?}"))
}

#[tokio::test(start_paused = true)]
async fn lifecycle_start_waits_for_the_read_back_and_the_executable_check_that_attach_overlaps() {
    let dir = tempfile::tempdir().unwrap();
    let (report, fake) = run(Script::default(), &spec(dir.path())).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    let calls = fake.calls();
    let start = position(&calls, "start");
    let read_back = position(&calls, "inspect");
    assert!(read_back > position(&calls, "create"), "{calls:?}");
    assert!(
        read_back < start,
        "the profile is read back before start: {calls:?}"
    );
    assert!(
        calls[..start].contains(&"archive_stat"),
        "argv[0] is resolved before start: {calls:?}"
    );
    assert!(
        position(&calls, "attach") < start,
        "attached before start, so no output is lost: {calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_missing_executable_never_starts_though_attach_was_made_beside_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        executable_missing: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::StartFailed),
        "{report:?}"
    );
    assert!(
        !fake.started(),
        "a command that cannot be found is never started"
    );
    assert!(report.evidence.exit.removed);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_removal_the_engine_answered_is_confirmed_by_that_answer() {
    let dir = tempfile::tempdir().unwrap();
    for removal_answers_not_found in [false, true] {
        let script = Script {
            removal_answers_not_found,
            ..Script::default()
        };
        let (report, fake) = run(script, &spec(dir.path())).await;
        assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
        assert!(report.evidence.exit.removed);
        assert!(report.evidence.timestamps.remove_ms.is_some());
        let calls = fake.calls();
        let remove = position(&calls, "remove");
        assert_eq!(
            &calls[remove..],
            ["remove"],
            "the removal's own answer (removed, or no such container) is the confirmation, \
             no inspect after it"
        );
    }
}

/// Hooks that remember `argv[0]`'s resolution in the directory given.
struct Caching(std::path::PathBuf);

impl RunHooks for Caching {
    fn check_inputs(&self, _: InputPhase) -> InputCheck {
        InputCheck::Matched
    }

    fn executable_cache(&self) -> Option<std::path::PathBuf> {
        Some(self.0.clone())
    }
}

/// A first run that probes `argv[0]` and caches it, then `script` on a fresh engine with the
/// same cache: the second run's calls before start hold no archive probe.
async fn after_a_cached_resolution(script: Script) -> (RunReport, Fake) {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let hooks = Caching(dir.path().join("executables"));
    let (first, fake) = run_with(Script::default(), &spec, &hooks).await;
    assert_eq!(first.decision, Decision::Completed { exit_code: 0 });
    assert!(
        fake.calls().contains(&"archive_stat"),
        "the first run probes"
    );
    let (report, fake) = run_with(script, &spec, &hooks).await;
    let calls = fake.calls();
    assert!(
        !calls[..position(&calls, "start")].contains(&"archive_stat"),
        "the second run took argv[0] from the cache: {calls:?}"
    );
    (report, fake)
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_cached_executable_never_turns_a_missing_executable_into_a_verdict() {
    // What the init (docker-init, tini) answers when it cannot execute the command: 0.19 and
    // later exit 127 (not found) or 126 (any other exec error), older ones 1, all with the
    // same line on stderr.
    let exec_failed = [
        (
            127,
            "[FATAL tini (7)] exec /usr/bin/true failed: No such file or directory\n",
        ),
        (
            126,
            "[FATAL tini (7)] exec /usr/bin/true failed: Permission denied\n",
        ),
        (
            1,
            "[FATAL tini (7)] exec /usr/bin/true failed: No such file or directory\n",
        ),
    ];
    for (exit_code, stderr) in exec_failed {
        let script = Script {
            executable_missing: true,
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
            exit_code,
            ..Script::default()
        };
        let (report, fake) = after_a_cached_resolution(script).await;
        assert_eq!(
            reason(&report.decision),
            Some(NoVerdictReason::StartFailed),
            "exit {exit_code}: {report:?}"
        );
        let calls = fake.calls();
        assert!(
            calls[position(&calls, "wait")..].contains(&"archive_stat"),
            "exit {exit_code}: re-resolved in the stopped container: {calls:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_cached_executable_is_not_probed_again_after_a_test_failure_exit() {
    // A failing test's exit: no init exec status, no init line on stderr. The command ran, so
    // the cached resolution held; probing again would only cost the engine two archive calls.
    for exit_code in [1, 2, 125, 128, 137] {
        let script = Script {
            stdout: b"FAIL: test_x\n".to_vec(),
            stderr: b"assertion failed: exec of the solver's tool failed\n".to_vec(),
            exit_code,
            ..Script::default()
        };
        let (report, fake) = after_a_cached_resolution(script).await;
        assert_eq!(
            report.decision,
            Decision::Completed { exit_code },
            "{report:?}"
        );
        let calls = fake.calls();
        assert!(
            !calls.contains(&"archive_stat") && !calls.contains(&"archive_read"),
            "exit {exit_code}: no archive call on a cached resolution: {calls:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn lifecycle_without_a_readable_cgroup_the_main_process_and_resources_come_from_the_engine() {
    // The scripted container has no cgroup on this host (nor a hex id), as a remote engine's:
    // the main process is asked of the engine and the resources follow its stats stream.
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        runs_until_killed: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(reason(&report.decision), Some(NoVerdictReason::Timeout));
    let calls = fake.calls();
    let after_start = &calls[position(&calls, "start")..];
    assert!(after_start.contains(&"stats"), "{calls:?}");
    assert_eq!(
        after_start.iter().filter(|c| **c == "inspect").count(),
        2,
        "the main process's inspect and the post-run one: {calls:?}"
    );
}

/// Runs `script` and returns the no-verdict reason with the calls the engine saw.
async fn no_verdict_of(script: Script) -> (Option<NoVerdictReason>, Vec<&'static str>) {
    let dir = tempfile::tempdir().unwrap();
    let (report, fake) = run(script, &spec(dir.path())).await;
    (reason(&report.decision), fake.calls())
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_image_the_engine_does_not_hold_is_image_missing_and_nothing_is_created() {
    let (reason, calls) = no_verdict_of(Script {
        image_missing: true,
        ..Script::default()
    })
    .await;
    assert_eq!(reason, Some(NoVerdictReason::ImageMissing));
    assert!(!calls.contains(&"create"), "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_failed_pull_by_digest_is_image_missing_with_the_engine_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(dir.path());
    spec.pull = true;
    let script = Script {
        image_missing: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::ImageMissing)
    );
    assert!(fake.calls().contains(&"pull"), "{:?}", fake.calls());
    assert!(
        format!("{:?}", report.decision).contains("manifest unknown"),
        "the engine's reason is kept: {report:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_image_for_another_platform_is_image_platform_mismatch() {
    let (reason, calls) = no_verdict_of(Script {
        image_platform: Some(("linux", "arm64")),
        ..Script::default()
    })
    .await;
    assert_eq!(reason, Some(NoVerdictReason::ImagePlatformMismatch));
    assert!(!calls.contains(&"create"), "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_refused_create_is_create_failed_and_nothing_is_started() {
    let (reason, calls) = no_verdict_of(Script {
        create_refused: true,
        ..Script::default()
    })
    .await;
    assert_eq!(reason, Some(NoVerdictReason::CreateFailed));
    assert!(!calls.contains(&"start"), "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn lifecycle_a_refused_start_is_start_failed_and_the_container_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script {
        start_refused: true,
        ..Script::default()
    };
    let (report, fake) = run(script, &spec(dir.path())).await;
    assert_eq!(reason(&report.decision), Some(NoVerdictReason::StartFailed));
    assert!(!fake.started());
    assert!(report.evidence.exit.removed);
}

#[tokio::test(start_paused = true)]
async fn lifecycle_an_engine_without_the_oci_runtime_is_runtime_unavailable_before_create() {
    let (reason, calls) = no_verdict_of(Script {
        runtime_missing: true,
        ..Script::default()
    })
    .await;
    assert_eq!(reason, Some(NoVerdictReason::RuntimeUnavailable));
    assert!(
        !calls.contains(&"create"),
        "never a run under another runtime: {calls:?}"
    );
}

/// Hooks whose inputs changed at `phase`.
struct ChangedAt(InputPhase);

impl RunHooks for ChangedAt {
    fn check_inputs(&self, phase: InputPhase) -> InputCheck {
        if phase == self.0 {
            InputCheck::Mismatch {
                detail: "source digest changed".into(),
            }
        } else {
            InputCheck::Matched
        }
    }
}

#[tokio::test(start_paused = true)]
async fn lifecycle_inputs_changed_after_the_run_void_a_passed_run_as_input_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = ChangedAt(InputPhase::AfterRun);
    let (report, fake) = run_with(Script::default(), &spec(dir.path()), &hooks).await;
    assert_eq!(
        reason(&report.decision),
        Some(NoVerdictReason::InputMismatch)
    );
    assert!(fake.started(), "the program ran; its exit is not judged");
    assert!(report.evidence.exit.removed);
}

/// Hooks that note the engine calls made by the time the run is admitted and by the time it
/// is said to have stopped.
struct Noting {
    fake: Fake,
    admitted: std::sync::Mutex<Vec<Vec<&'static str>>>,
    stopped: std::sync::Mutex<Vec<Vec<&'static str>>>,
}

impl RunHooks for Noting {
    fn check_inputs(&self, _: InputPhase) -> InputCheck {
        InputCheck::Matched
    }

    fn admit(&self) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.admitted.lock().unwrap().push(self.fake.calls());
        Box::pin(std::future::ready(()))
    }

    fn stopped(&self) {
        self.stopped.lock().unwrap().push(self.fake.calls());
    }
}

/// One run of `script` under [`Noting`] hooks.
async fn noted(script: Script) -> (RunReport, Noting) {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new(script);
    let hooks = Noting {
        fake: fake.clone(),
        admitted: Default::default(),
        stopped: Default::default(),
    };
    let (report, _) = run_with_fake(fake, &spec(dir.path()), &hooks).await;
    (report, hooks)
}

/// The capacity a rehearsal shares out counts a container from its start until it stopped
/// (#50 item 1): admitted once created and attached, before the start; said to have stopped
/// once the engine says so, before the removal. Once each.
#[tokio::test(start_paused = true)]
async fn a_run_is_admitted_after_its_create_before_its_start_and_stopped_before_its_removal() {
    let (report, hooks) = noted(Script::default()).await;
    assert!(
        matches!(report.decision, Decision::Completed { .. }),
        "{:?}",
        report.decision
    );
    let admitted = hooks.admitted.into_inner().unwrap();
    let stopped = hooks.stopped.into_inner().unwrap();
    assert_eq!(
        (admitted.len(), stopped.len()),
        (1, 1),
        "{admitted:?} {stopped:?}"
    );
    let (admitted, stopped) = (&admitted[0], &stopped[0]);
    assert!(
        admitted.contains(&"create") && admitted.contains(&"attach"),
        "{admitted:?}"
    );
    assert!(
        !admitted.contains(&"start"),
        "admitted after its start: {admitted:?}"
    );
    assert!(stopped.contains(&"start"), "{stopped:?}");
    assert!(
        !stopped.contains(&"remove"),
        "stopped only after its removal: {stopped:?}"
    );
    assert!(hooks.fake.calls().contains(&"remove"));
}

/// A container the engine will not start never ran: nothing says it stopped, and its
/// caller's count ends with the run.
#[tokio::test(start_paused = true)]
async fn a_container_that_never_started_is_never_said_to_have_stopped() {
    let (report, hooks) = noted(Script {
        start_refused: true,
        ..Script::default()
    })
    .await;
    assert_eq!(reason(&report.decision), Some(NoVerdictReason::StartFailed));
    assert!(hooks.stopped.into_inner().unwrap().is_empty());
}

/// Hooks offering a batch's image inspects ([`crate::ImageMemo`]).
struct Remembering(crate::ImageMemo);

impl RunHooks for Remembering {
    fn check_inputs(&self, _: InputPhase) -> InputCheck {
        InputCheck::Matched
    }

    fn image_memo(&self) -> Option<&crate::ImageMemo> {
        Some(&self.0)
    }
}

/// A kept answer is held to the run's spec as the engine's own would be: one whose repo
/// digests lack the pinned reference (kept for that reference by mistake, or an engine that
/// retagged) is refused before anything is created, never taken on trust.
#[tokio::test(start_paused = true)]
async fn lifecycle_a_remembered_image_inspect_is_still_checked_against_the_pinned_digest() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let memo = crate::ImageMemo::default();
    let (first, fake) = run_with(Script::default(), &spec, &Remembering(memo.clone())).await;
    assert_eq!(first.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(
        fake.calls()
            .iter()
            .filter(|c| **c == "inspect_image")
            .count(),
        1
    );
    let mut kept = memo.get(&spec.image).expect("a passing answer is kept");
    kept.repo_digests = Some(vec![format!("other@sha256:{}", "1".repeat(64))]);
    memo.put(&spec.image, kept);
    let (second, fake) = run_with(Script::default(), &spec, &Remembering(memo)).await;
    assert!(reason(&second.decision).is_some(), "{:?}", second.decision);
    assert!(
        !fake.calls().contains(&"inspect_image"),
        "{:?}",
        fake.calls()
    );
    assert!(!fake.calls().contains(&"create"), "{:?}", fake.calls());
}

/// The second run of a batch takes the first's answer (no inspect of its own); a create that
/// fails on a kept answer (the image removed meanwhile) forgets it, so the next run asks the
/// engine again (and may pull) instead of failing on the same stale answer.
#[tokio::test(start_paused = true)]
async fn lifecycle_a_failed_create_forgets_the_remembered_image_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let memo = crate::ImageMemo::default();
    run_with(Script::default(), &spec, &Remembering(memo.clone())).await;
    let (refused, fake) = run_with(
        Script {
            create_refused: true,
            ..Script::default()
        },
        &spec,
        &Remembering(memo.clone()),
    )
    .await;
    assert_eq!(
        reason(&refused.decision),
        Some(NoVerdictReason::CreateFailed)
    );
    assert!(
        !fake.calls().contains(&"inspect_image"),
        "{:?}",
        fake.calls()
    );
    assert!(memo.get(&spec.image).is_none());
    let (again, fake) = run_with(Script::default(), &spec, &Remembering(memo)).await;
    assert_eq!(again.decision, Decision::Completed { exit_code: 0 });
    assert!(
        fake.calls().contains(&"inspect_image"),
        "{:?}",
        fake.calls()
    );
}
