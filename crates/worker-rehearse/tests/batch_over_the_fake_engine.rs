//! `worker rehearse --batch` over worker-sandbox's scripted engine (its `fake-engine` feature):
//! the tasks of a batch run side by side under one limit on the containers alive at once (issue
//! #50 item 1), and the report is the one a sequential batch gives, in the file's order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;

use serde_json::Value;
use verifier_sdk::fixtures::sample_manifest;
use verifier_sdk::oci_runtime::RUNC;
use worker_rehearse::batch::{
    BatchDefaults, BatchReport, prepare_tasks, read_tasks, rehearse_batch,
};
use worker_sandbox::Executor;
use worker_sandbox::lifecycle::fake::{FreshEachRun, Script};

mod common;
use common::{FreshRuns, Plan};

/// The engine of a batch: a fresh container per run, scripted by the staged source tree's
/// `fake` file (`exit=N`, `hold=TURNS`, `name=TASK`; a tree without one, such as the base,
/// exits 1), waiting for `company` containers alive before a program may end.
async fn scripted(company: usize) -> FreshEachRun<FreshRuns> {
    FreshRuns::new(company, |spec| {
        let (exit_code, hold, name) = script_of(&spec.source_dir);
        Plan {
            script: Script {
                exit_code,
                ..Script::default()
            },
            hold,
            name,
        }
    })
    .await
}

/// What a source tree's `fake` file scripts: exit code, turns held, task name.
fn script_of(source: &Path) -> (i64, usize, String) {
    let text = std::fs::read_to_string(source.join("fake")).unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
    };
    (
        field("exit").map_or(1, |v| v.parse().unwrap()),
        field("hold").map_or(0, |v| v.parse().unwrap()),
        field("name").unwrap_or_else(|| "base".into()),
    )
}

/// One task of a test batch: its name, what its container does, and its own keys.
struct Task {
    name: &'static str,
    exit: i64,
    hold: usize,
    /// Extra keys of its entry in the tasks file (`"repeat": 2`, `"base": "base"`, …).
    keys: Value,
}

fn task(name: &'static str, exit: i64, hold: usize, keys: Value) -> Task {
    Task {
        name,
        exit,
        hold,
        keys,
    }
}

/// Writes the trees of `tasks` under `dir` (one benchmark, one manifest and one base shared by
/// all, a source of each task's own) and its tasks file; returns the file.
fn write_batch(dir: &Path, tasks: &[Task]) -> PathBuf {
    let benchmark = dir.join("benchmark");
    std::fs::create_dir_all(&benchmark).unwrap();
    std::fs::write(benchmark.join("test.py"), "import a\n").unwrap();
    let base = dir.join("base");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("a.py"), "def a():\n    return 0\n").unwrap();
    std::fs::create_dir_all(dir.join("staging")).unwrap();
    // The author's first rehearsal: the benchmark digest is filled in from the staged tree.
    let mut manifest = sample_manifest();
    manifest["benchmark_digest"] = format!("sha256:{}", "0".repeat(64)).into();
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let mut entries = Vec::new();
    for t in tasks {
        let source = dir.join(t.name);
        std::fs::create_dir_all(&source).unwrap();
        std::fs::write(
            source.join("fake"),
            format!("exit={}\nhold={}\nname={}\n", t.exit, t.hold, t.name),
        )
        .unwrap();
        std::fs::write(source.join("a.py"), "def a():\n    return 1\n").unwrap();
        let mut entry = serde_json::json!({
            "name": t.name,
            "source": t.name,
            "benchmark": "benchmark",
            "manifest": "manifest.json",
        });
        if let (Value::Object(entry), Value::Object(keys)) = (&mut entry, &t.keys) {
            entry.extend(keys.clone());
        }
        entries.push(entry);
    }
    let file = dir.join("tasks.json");
    std::fs::write(
        &file,
        serde_json::to_vec(&serde_json::json!({ "tasks": entries })).unwrap(),
    )
    .unwrap();
    file
}

fn defaults(dir: &Path) -> BatchDefaults {
    BatchDefaults {
        staging_root: dir.join("staging"),
        repeat: 1,
        adversarial: false,
        pull: false,
        worktree: true,
        quiet: true,
        oci_runtime: RUNC.into(),
        log_dir: None,
    }
}

/// Rehearses the batch of `file` at `capacity` over a [`scripted`] engine that waits for
/// `company` containers: the report, the most containers alive at once, and the order in which
/// the tasks' containers ended.
async fn batch_at(
    dir: &Path,
    file: &Path,
    capacity: usize,
    company: usize,
) -> (BatchReport, usize, Vec<String>) {
    let tasks = read_tasks(file, &defaults(dir)).unwrap();
    let prepared = prepare_tasks(tasks).unwrap();
    let scripted = scripted(company).await;
    let (most, ended) = (scripted.most.clone(), scripted.ended.clone());
    let executor = Executor::new(scripted);
    let capacity = NonZeroUsize::new(capacity).unwrap();
    let report = rehearse_batch(&executor, prepared, capacity).await.unwrap();
    let most = most.load(SeqCst);
    let ended = ended.lock().unwrap().clone();
    (report, most, ended)
}

/// The `--json` report without what differs between any two rehearsals of the same batch,
/// sequential ones too: each task's wall time, and each run's evidence address (the record
/// names its own run id).
fn comparable(report: &BatchReport) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("seconds");
                map.remove("evidence_path");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut json = report.to_json();
    strip(&mut json);
    json
}

fn names(report: &BatchReport) -> Vec<&str> {
    report.tasks.iter().map(|t| t.name.as_str()).collect()
}

/// #50 item 1: `--batch` ran its tasks one after another, one container at a time, however
/// many the host holds. Four tasks of three runs each (two repeats and the base): at capacity
/// 2 two containers are alive together, and never three, though the tasks side by side and the
/// runs inside each could each fill the capacity on their own (2 × 2).
#[tokio::test]
async fn a_batch_at_capacity_2_runs_two_containers_at_once_and_never_more() {
    let dir = tempfile::tempdir().unwrap();
    let keys = || serde_json::json!({ "repeat": 2, "base": "base" });
    let tasks = [
        task("t1", 0, 0, keys()),
        task("t2", 0, 0, keys()),
        task("t3", 1, 0, keys()),
        task("t4", 0, 0, keys()),
    ];
    let file = write_batch(dir.path(), &tasks);
    // The engine waits for four containers: more than the capacity, so any overshoot is seen.
    let (report, most, _) = batch_at(dir.path(), &file, 2, 4).await;
    assert_eq!(names(&report), ["t1", "t2", "t3", "t4"]);
    assert!(
        most > 1,
        "the batch ran one container at a time at capacity 2 (most alive at once: {most})"
    );
    assert!(
        most <= 2,
        "the batch had {most} containers alive at once at capacity 2"
    );
}

/// The report is in the tasks file's order even when the engine ends the tasks' containers in
/// the reverse order: the first task's container is held longest.
#[tokio::test]
async fn the_batch_report_is_in_the_files_order_when_the_tasks_end_in_reverse() {
    let dir = tempfile::tempdir().unwrap();
    let none = || serde_json::json!({});
    let tasks = [
        task("t1", 0, 6_000, none()),
        task("t2", 1, 4_000, none()),
        task("t3", 0, 2_000, none()),
        task("t4", 1, 0, none()),
    ];
    let file = write_batch(dir.path(), &tasks);
    let (report, most, ended) = batch_at(dir.path(), &file, 4, 4).await;
    assert_eq!(most, 4, "the four tasks did not run together");
    assert_eq!(ended, ["t4", "t3", "t2", "t1"], "the engine's order");
    assert_eq!(names(&report), ["t1", "t2", "t3", "t4"]);
    // Each row is its own task's: the exit codes alternate, so a row moved would show it.
    let verdicts: Vec<_> = report
        .to_json()
        .get("tasks")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|t| t["verdict"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(verdicts, ["passed", "failed", "passed", "failed"]);
    let human = report.human();
    let at = |name: &str| {
        human
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{human}"))
    };
    assert!(
        at("t1") < at("t2") && at("t2") < at("t3") && at("t3") < at("t4"),
        "{human}"
    );
    let junit = report.junit();
    let case = |name: &str| junit.find(&format!("name=\"{name}\"")).unwrap();
    assert!(
        case("t1") < case("t2") && case("t2") < case("t3") && case("t3") < case("t4"),
        "{junit}"
    );
}

/// A batch side by side reports what the same batch one container at a time reports, task for
/// task: repeats, a base, the stubs, a task that is not rehearsed and its neighbours.
#[tokio::test]
async fn a_batch_at_capacity_3_reports_what_it_reports_at_capacity_1() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = [
        task(
            "fit",
            0,
            500,
            serde_json::json!({ "repeat": 2, "base": "base" }),
        ),
        task("unsolved", 1, 0, serde_json::json!({ "base": "base" })),
        task("stubs", 0, 200, serde_json::json!({ "adversarial": true })),
        task("missing", 0, 0, serde_json::json!({ "source": "nowhere" })),
        task("plain", 1, 100, serde_json::json!({ "repeat": 3 })),
    ];
    let file = write_batch(dir.path(), &tasks);
    let (one, most_one, _) = batch_at(dir.path(), &file, 1, 1).await;
    assert_eq!(most_one, 1, "capacity 1 ran containers together");
    let (three, most_three, _) = batch_at(dir.path(), &file, 3, 3).await;
    assert!(
        (2..=3).contains(&most_three),
        "most alive at once: {most_three}"
    );
    assert_eq!(
        names(&one),
        ["fit", "unsolved", "stubs", "missing", "plain"]
    );
    let answers: Vec<_> = one.tasks.iter().map(|t| t.answer()).collect();
    assert!(
        answers.contains(&worker_rehearse::batch::TaskAnswer::NotRehearsed),
        "{answers:?}"
    );
    assert_eq!(comparable(&one), comparable(&three));
}
