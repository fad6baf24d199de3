//! Rehearsals over worker-sandbox's scripted engine (its `fake-engine` feature): the whole
//! rehearse path (manifest, staging, the run step's spec, the lifecycle, the report) with no
//! daemon, so what a rehearsal reports for each way a run can end is tested in this crate
//! rather than only by the binary's serial Docker tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use verifier_sdk::oci_runtime::RUNC;
use worker_rehearse::verdict::Verdict;
use worker_rehearse::{Prepared, RehearseOptions, prepare, rehearse, rehearse_at};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::Lifecycle;
use worker_sandbox::lifecycle::fake::{Fake, FreshEachRun, Script};

/// The verdict a one-run rehearsal reports when its container does what `script` says.
async fn verdict_of(script: Script) -> (Verdict, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path());
    let prepared = prepare(&options).unwrap();
    let lifecycle = Lifecycle::connect(Fake::new(script), RUNC).await.unwrap();
    let executor = Executor::new(lifecycle);
    let rehearsed = rehearse(&executor, prepared, &options, false)
        .await
        .unwrap();
    (rehearsed.report.verdict, rehearsed.report.problems)
}

#[tokio::test]
async fn a_rehearsal_whose_run_exits_0_on_the_scripted_engine_is_passed() {
    let (verdict, problems) = verdict_of(Script::default()).await;
    assert_eq!(verdict, Verdict::Passed, "{problems:?}");
}

#[tokio::test]
async fn a_rehearsal_whose_run_exits_1_is_failed() {
    let (verdict, problems) = verdict_of(Script {
        exit_code: 1,
        ..Script::default()
    })
    .await;
    assert_eq!(verdict, Verdict::Failed, "{problems:?}");
}

#[tokio::test]
async fn a_rehearsal_whose_run_is_oom_killed_is_no_verdict_never_failed() {
    let (verdict, problems) = verdict_of(Script {
        oom_killed: true,
        ..Script::default()
    })
    .await;
    assert_eq!(verdict, Verdict::NoVerdict, "{problems:?}");
}

#[tokio::test]
async fn a_rehearsal_on_an_engine_without_the_image_is_no_verdict() {
    let (verdict, problems) = verdict_of(Script {
        image_missing: true,
        ..Script::default()
    })
    .await;
    assert_eq!(verdict, Verdict::NoVerdict, "{problems:?}");
}

mod common;
use common::{FreshRuns, Plan, options};

/// An adversarial rehearsal of a two-file Python solution at `parallel` runs at once: its
/// human report and the most runs that were in flight together.
async fn adversarial_at(script: Script, parallel: usize) -> (String, usize) {
    rehearsal_at(script, parallel, true, 1).await
}

/// A rehearsal of a two-file Python solution, `repeat` times against a base tree, with or
/// without its stubs, at `parallel` runs at once: its human report and the most runs that
/// were in flight together.
async fn rehearsal_at(
    script: Script,
    parallel: usize,
    adversarial: bool,
    repeat: u32,
) -> (String, usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path());
    options.repeat = repeat;
    let base = dir.path().join("base");
    std::fs::create_dir(&base).unwrap();
    std::fs::write(base.join("a.py"), "def a():\n    return 0\n").unwrap();
    options.base = Some(base);
    std::fs::remove_file(options.source.join("lib.rs")).unwrap();
    std::fs::write(options.source.join("a.py"), "def a():\n    return 1\n").unwrap();
    std::fs::write(options.source.join("b.py"), "def b():\n    return 2\n").unwrap();
    let prepared = prepare(&options).unwrap();
    // Each run waits for `parallel` runs in flight before its program may end.
    let counting = FreshRuns::new(parallel, move |_| Plan {
        script: script.clone(),
        hold: 0,
        name: String::new(),
    })
    .await;
    let most = counting.most.clone();
    let executor = Executor::new(counting);
    let parallel = std::num::NonZeroUsize::new(parallel).unwrap();
    let rehearsed = rehearse_at(&executor, prepared, &options, adversarial, parallel)
        .await
        .unwrap();
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    // Each run's evidence record names its own run id, so its address differs between any
    // two rehearsals, sequential ones too: the report is compared without it.
    let human = rehearsed
        .human()
        .lines()
        .map(|line| match line.trim_start().strip_prefix("evidence ") {
            Some(_) => "evidence <record>",
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    (human, most)
}

#[tokio::test]
async fn adversarial_stub_runs_at_capacity_2_overlap() {
    // Every stub passes: exit_on_load's culprit is bisected, the shadows are skipped.
    let (_, most) = adversarial_at(Script::default(), 2).await;
    assert!(
        most > 1,
        "the stub runs ran one at a time (most in flight: {most})"
    );
    // Every run fails: the shadows run too.
    let failing = Script {
        exit_code: 1,
        ..Script::default()
    };
    let (_, most) = adversarial_at(failing, 2).await;
    assert!(
        most > 1,
        "the stub runs ran one at a time (most in flight: {most})"
    );
}

#[tokio::test]
async fn adversarial_report_at_capacity_2_is_the_report_at_capacity_1() {
    for script in [
        Script::default(),
        Script {
            exit_code: 1,
            ..Script::default()
        },
    ] {
        let (one, _) = adversarial_at(script.clone(), 1).await;
        let (two, _) = adversarial_at(script, 2).await;
        assert!(one.contains("adversarial stubs"), "{one}");
        assert_eq!(one, two);
    }
}

#[tokio::test]
async fn adversarial_stub_runs_at_capacity_1_never_overlap() {
    for script in [
        Script::default(),
        Script {
            exit_code: 1,
            ..Script::default()
        },
    ] {
        let (_, most) = adversarial_at(script, 1).await;
        assert_eq!(most, 1);
    }
}

#[tokio::test]
async fn repeated_solution_runs_and_the_base_run_at_capacity_2_overlap() {
    let (_, most) = rehearsal_at(Script::default(), 2, false, 3).await;
    assert!(
        most > 1,
        "the solution's runs ran one at a time (most in flight: {most})"
    );
}

#[tokio::test]
async fn repeated_runs_report_at_capacity_2_is_the_report_at_capacity_1_and_1_never_overlaps() {
    for script in [
        Script::default(),
        Script {
            exit_code: 1,
            ..Script::default()
        },
    ] {
        let (one, most) = rehearsal_at(script.clone(), 1, false, 3).await;
        assert_eq!(most, 1);
        let (two, _) = rehearsal_at(script, 2, false, 3).await;
        assert!(one.contains("solution runs (3)"), "{one}");
        assert_eq!(one, two);
    }
}

/// The human report of an adversarial rehearsal over `runs` at `parallel` runs at once,
/// without its evidence lines (each names its own run id).
async fn adversarial_human(
    runs: FreshEachRun<FreshRuns>,
    prepared: Prepared,
    options: &RehearseOptions,
    parallel: usize,
) -> String {
    let executor = Executor::new(runs);
    let parallel = std::num::NonZeroUsize::new(parallel).unwrap();
    let rehearsed = rehearse_at(&executor, prepared, options, true, parallel)
        .await
        .unwrap();
    rehearsed
        .human()
        .lines()
        .filter(|line| !line.trim_start().starts_with("evidence "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `rehearse --adversarial --repeat 2 --base` at capacity 2 (#50 item 1): the base run needs
/// neither the stubs nor the source's verdict, so it takes a slot a stub leaves free. Run after
/// the two source runs and before the stubs, it had a wave of its own: one slot idle for a
/// whole run. Each run here waits for a second one in flight before it ends; the base must
/// never wait in vain. The solution passes, the base and every stub fail (a sound benchmark,
/// so the shadows run too), and the report is the one capacity 1 gives.
#[tokio::test]
async fn the_base_run_fills_a_free_slot_beside_the_stubs_not_a_wave_of_its_own() {
    async fn rehearsal(parallel: usize) -> (String, Vec<String>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut options = options(dir.path());
        options.repeat = 2;
        let base = dir.path().join("base");
        std::fs::create_dir(&base).unwrap();
        std::fs::write(base.join("a.py"), "def a():\n    return 0\n").unwrap();
        options.base = Some(base);
        std::fs::remove_file(options.source.join("lib.rs")).unwrap();
        std::fs::write(options.source.join("a.py"), "def a():\n    return 1\n").unwrap();
        std::fs::write(options.source.join("b.py"), "def b():\n    return 2\n").unwrap();
        let prepared = prepare(&options).unwrap();
        let runs = FreshRuns::new(parallel, |spec| {
            let a = std::fs::read_to_string(spec.source_dir.join("a.py")).unwrap_or_default();
            let (name, exit_code) = match a.as_str() {
                "def a():\n    return 1\n" => ("solution", 0),
                "def a():\n    return 0\n" => ("base", 1),
                _ => ("stub", 1),
            };
            Plan {
                script: Script {
                    exit_code,
                    ..Script::default()
                },
                hold: 0,
                name: name.into(),
            }
        })
        .await;
        let (alone, ended) = (runs.alone.clone(), runs.ended.clone());
        let human = adversarial_human(runs, prepared, &options, parallel).await;
        let alone = alone.lock().unwrap().clone();
        let runs = ended.lock().unwrap().len();
        (human, alone, runs)
    }
    let (two, alone, runs) = rehearsal(2).await;
    assert!(two.contains("discriminating"), "{two}");
    assert!(two.contains("adversarial  held"), "{two}");
    assert!(
        !alone.contains(&"base".to_owned()),
        "the base run had no company at capacity 2 (runs alone: {alone:?}, of {runs})"
    );
    let (one, _, _) = rehearsal(1).await;
    assert_eq!(one, two);
}

/// `rehearse --adversarial` at capacity 2 (#50 item 1): a stub needs only the staged source,
/// not the solution's verdict (which decides only whether its result is judged), and a runner
/// shadow needs only `fail_on_load_keep_text`'s answer. Run in waves, the solution's one run
/// had no company, and every shadow waited for the slowest stub of the wave before it, here
/// `exit_on_load`, held long. Neither may wait; at most 2 containers run at once, and the
/// report is the one capacity 1 gives.
#[tokio::test]
async fn stubs_start_beside_the_solutions_run_and_shadows_do_not_wait_for_the_slowest_stub() {
    async fn rehearsal(parallel: usize) -> (String, Vec<String>, Vec<String>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let options = options(dir.path());
        std::fs::remove_file(options.source.join("lib.rs")).unwrap();
        std::fs::write(options.source.join("a.py"), "def a():\n    return 1\n").unwrap();
        std::fs::write(options.source.join("b.py"), "def b():\n    return 2\n").unwrap();
        let prepared = prepare(&options).unwrap();
        let runs = FreshRuns::new(parallel, |spec| {
            let files: Vec<String> = std::fs::read_dir(&spec.source_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            let a = std::fs::read_to_string(spec.source_dir.join("a.py")).unwrap_or_default();
            let (name, exit_code, hold) = if files.iter().any(|f| f != "a.py" && f != "b.py") {
                ("shadow", 1, 0)
            } else if a == "def a():\n    return 1\n" {
                ("solution", 0, 0)
            } else if !a.is_empty() && !a.contains("return 1") {
                ("exit_on_load", 1, 200_000)
            } else {
                ("stub", 1, 0)
            };
            Plan {
                script: Script {
                    exit_code,
                    ..Script::default()
                },
                hold,
                name: name.into(),
            }
        })
        .await;
        let (alone, ended, most) = (runs.alone.clone(), runs.ended.clone(), runs.most.clone());
        let human = adversarial_human(runs, prepared, &options, parallel).await;
        let alone = alone.lock().unwrap().clone();
        let ended = ended.lock().unwrap().clone();
        (
            human,
            alone,
            ended,
            most.load(std::sync::atomic::Ordering::SeqCst),
        )
    }
    let (two, alone, ended, most) = rehearsal(2).await;
    assert!(two.contains("adversarial  held"), "{two}");
    assert_eq!(most, 2, "containers running at once at capacity 2");
    assert!(
        !alone.contains(&"solution".to_owned()),
        "the solution's run had no company at capacity 2 (runs alone: {alone:?}; ended: {ended:?})"
    );
    let slowest = ended.iter().position(|n| n == "exit_on_load").unwrap();
    let first_shadow = ended.iter().position(|n| n == "shadow").unwrap();
    assert!(
        first_shadow < slowest,
        "every shadow waited for the slowest stub before it (ended: {ended:?})"
    );
    let (one, _, _, most) = rehearsal(1).await;
    assert_eq!(most, 1);
    assert_eq!(one, two);
}
