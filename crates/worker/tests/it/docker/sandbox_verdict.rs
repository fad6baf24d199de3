//! The verdict contract end to end: the program's own exit codes are verdicts; image, start,
//! input and runtime problems are not.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use crate::support;

use std::fs;
use std::time::Duration;

use crate::support::{DigestHooks, Trees, containers_for, executor, no_verdict_reason, run, spec};
use worker_sandbox::{
    Decision, InputPhase, NoVerdictReason, RunReport, SandboxError, SandboxSpec, StoppedBy,
};

/// Runs `spec` and checks that it ends with no verdict, for `want`.
async fn run_to_no_verdict(spec: &SandboxSpec, trees: &Trees, want: NoVerdictReason) -> RunReport {
    let report = run(spec, trees).await;
    assert_eq!(
        no_verdict_reason(&report.decision),
        want,
        "{:?}",
        spec.request.argv
    );
    report
}

#[tokio::test]
async fn programs_own_exit_codes_are_failed_verdicts() {
    let trees = Trees::new();
    let cases = [
        ("exit 1", 1),
        ("exit 126", 126),
        ("exit 127", 127),
        ("kill -SEGV $$", 139),
        ("kill -KILL $$", 137),
    ];
    for (body, code) in cases {
        let script = trees.script(&format!("exit{code}.sh"), body);
        let report = run(&spec(&format!("exit{code}"), &[&script], &trees), &trees).await;
        assert_eq!(
            report.decision,
            Decision::Completed { exit_code: code },
            "{body}"
        );
        assert_eq!(report.decision.passed(), Some(false));
        assert!(!report.evidence.exit.oom_killed);
        assert_eq!(
            report.evidence.exit.stopped_by,
            worker_sandbox::StoppedBy::None
        );
    }
}

#[tokio::test]
async fn bare_name_resolves_through_the_image_path() {
    let trees = Trees::new();
    let report = run(&spec("path", &["cat", "/workspace/README"], &trees), &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
    assert_eq!(report.evidence.stdout.tail, "solver source\n");
}

#[tokio::test]
async fn missing_or_unusable_executable_is_start_failed() {
    let trees = Trees::new();
    fs::write(trees.benchmark.join("not-exec.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    trees.script("no-interp.sh", "");
    fs::write(
        trees.benchmark.join("no-interp.sh"),
        "#!/usr/bin/no-such-interpreter\nexit 0\n",
    )
    .unwrap();
    for argv0 in [
        "/benchmark/no-interp.sh",
        "/bin/no-such-program",
        "no-such-program",
        "/benchmark/not-exec.sh",
        "/benchmark",
        "./missing.sh",
    ] {
        let spec = spec("noexec", &[argv0], &trees);
        let report = run_to_no_verdict(&spec, &trees, NoVerdictReason::StartFailed).await;
        // The container was created and removed, but never started.
        assert!(report.evidence.container.is_some());
        assert!(!report.evidence.exit.started);
    }
}

#[tokio::test]
async fn image_not_present_is_image_missing_even_when_pull_is_allowed() {
    let trees = Trees::new();
    let busybox = support::busybox();
    let (name, _) = busybox.rsplit_once("@sha256:").unwrap();
    for pull in [false, true] {
        let mut spec = spec("missing-image", &["/bin/true"], &trees);
        spec.image = format!("{name}@sha256:{}", "0".repeat(64));
        spec.pull = pull;
        let report = run_to_no_verdict(&spec, &trees, NoVerdictReason::ImageMissing).await;
        assert!(report.evidence.container.is_none());
    }
}

#[tokio::test]
async fn wrong_platform_is_image_platform_mismatch() {
    let trees = Trees::new();
    let mut spec = spec("platform", &["/bin/true"], &trees);
    spec.request.platform = "linux/arm64".into();
    let report = run_to_no_verdict(&spec, &trees, NoVerdictReason::ImagePlatformMismatch).await;
    assert_eq!(report.evidence.image.unwrap().platform, "linux/amd64");
    assert!(report.evidence.container.is_none());
}

#[tokio::test]
async fn unpinned_reference_is_refused_before_the_engine() {
    let trees = Trees::new();
    let mut spec = spec("unpinned", &["/bin/true"], &trees);
    spec.image = "127.0.0.1:5000/verifier-busybox:latest".into();
    let report = run_to_no_verdict(&spec, &trees, NoVerdictReason::InternalError).await;
    assert!(report.evidence.image.is_none());
}

#[tokio::test]
async fn image_environment_beyond_path_fails_closed() {
    let trees = Trees::new();
    let mut spec = spec("image-env", &["/bin/env"], &trees);
    spec.image = support::derived_image("leaky-env", "ENV LEAKY_IMAGE_VAR=1");
    let report = run_to_no_verdict(&spec, &trees, NoVerdictReason::IsolationMismatch).await;
    assert!(report.evidence.container.is_none());
}

#[tokio::test]
async fn inputs_changed_before_create_are_input_mismatch() {
    let trees = Trees::new();
    let hooks = DigestHooks::new(&trees);
    fs::write(trees.benchmark.join("late.txt"), "changed").unwrap();
    let report = executor()
        .await
        .run(&spec("input-before", &["/bin/true"], &trees), &hooks)
        .await
        .unwrap();
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::InputMismatch
    );
    assert!(report.evidence.container.is_none());
    assert_eq!(*hooks.phases.lock().unwrap(), [InputPhase::BeforeCreate]);
}

#[tokio::test]
async fn inputs_changed_during_the_run_void_a_pass() {
    let trees = Trees::new();
    let script = trees.script("slow-pass.sh", "sleep 2; exit 0");
    let hooks = DigestHooks::new(&trees);
    let spec = spec("input-during", &[&script], &trees);
    let executor = executor().await;
    let tamper = async {
        // Change the benchmark tree once the container is running.
        for _ in 0..100 {
            if !support::containers_for(&executor, &spec.run_id)
                .await
                .is_empty()
            {
                tokio::time::sleep(Duration::from_millis(300)).await;
                fs::write(trees.benchmark.join("tampered.txt"), "x").unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("container never appeared");
    };
    let (report, ()) = tokio::join!(executor.run(&spec, &hooks), tamper);
    let report = report.unwrap();
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::InputMismatch
    );
    assert_eq!(report.evidence.exit.exit_code, Some(0));
    assert_eq!(
        *hooks.phases.lock().unwrap(),
        [InputPhase::BeforeCreate, InputPhase::AfterRun]
    );
}

/// Runs `sleep 30` and, once its container runs, has `docker kill -s <signal>` (the CLI, as an
/// operator or another tool on the host would) stop it from outside the worker: the run must
/// end externally stopped, with no verdict (neither passed nor failed).
async fn assert_killed_from_outside_is_externally_stopped(name: &str, signal: &str) {
    let trees = Trees::new();
    let mut spec = spec(name, &["/bin/sleep", "30"], &trees);
    spec.request.timeout_ms = 60_000;
    let run_id = spec.run_id.clone();
    let killer = async {
        let executor = executor().await;
        for _ in 0..300 {
            if let Some(id) = containers_for(&executor, &run_id).await.first() {
                let running = executor
                    .client()
                    .inspect_container(id, None)
                    .await
                    .ok()
                    .and_then(|c| c.state)
                    .and_then(|s| s.running);
                if running == Some(true) {
                    let status = tokio::process::Command::new("docker")
                        .args(["kill", "--signal", signal, id])
                        .stdout(std::process::Stdio::null())
                        .status()
                        .await
                        .unwrap();
                    assert!(status.success(), "docker kill failed");
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the run's container never ran");
    };
    let (report, ()) = tokio::join!(run(&spec, &trees), killer);
    assert_eq!(
        no_verdict_reason(&report.decision),
        NoVerdictReason::ExternallyStopped
    );
    assert_eq!(report.decision.passed(), None);
    assert_eq!(report.evidence.exit.stopped_by, StoppedBy::External);
}

#[tokio::test]
async fn docker_kill_sigkill_from_outside_is_externally_stopped_not_failed() {
    assert_killed_from_outside_is_externally_stopped("extkill", "KILL").await;
}

#[tokio::test]
async fn docker_kill_sigterm_from_outside_is_externally_stopped_not_failed() {
    assert_killed_from_outside_is_externally_stopped("extterm", "TERM").await;
}

#[tokio::test]
async fn unreachable_daemon_is_runtime_unavailable() {
    let child = support::spawn_child(
        module_path!(),
        "connect",
        &[("DOCKER_HOST", "unix:///nonexistent.sock")],
    )
    .wait_with_output()
    .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(out.contains("RESULT=runtime-unavailable"), "{out}");
}

#[tokio::test]
#[ignore = "entry point for child processes spawned by other tests"]
async fn child_process() {
    assert_eq!(support::child_mode(), "connect");
    match worker_docker::DockerExecutor::connect().await {
        Err(SandboxError::RuntimeUnavailable(error)) => {
            println!("RESULT=runtime-unavailable ({error})")
        }
        Err(other) => println!("RESULT=other-error ({other})"),
        Ok(_) => println!("RESULT=connected"),
    }
}

/// An image whose HEALTHCHECK runs every second: the engine would exec it inside the sandbox
/// while the benchmark runs, which is code nobody committed to and, for the external-stop
/// watch, interference that voids the verdict. Built from the busybox test image and pushed to
/// the local registry so it has a repo digest like any pinned image.
fn image_with_a_healthcheck() -> String {
    support::derived_image(
        "healthcheck",
        "HEALTHCHECK --interval=1s --timeout=1s CMD [\"/bin/true\"]",
    )
}

#[tokio::test]
async fn image_healthcheck_never_runs_inside_the_sandbox() {
    let trees = Trees::new();
    let script = trees.script("slow.sh", "sleep 4; exit 0");
    let mut spec = spec("healthcheck", &[&script], &trees);
    spec.image = image_with_a_healthcheck();
    let report = run(&spec, &trees).await;
    assert_eq!(report.decision, Decision::Completed { exit_code: 0 });
}
