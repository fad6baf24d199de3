//! What an author reads while writing a benchmark (issue #26): the test count a rehearsal saw,
//! the harness's one-line failure summary, `worker plan`'s human form and `rehearse --batch`.
//! Real containers on the repo's digest-pinned images (`scripts/services.sh` builds them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ran::{Ran, fixture, manifest, ran as read, rehearse_command};
use super::rehearse_support::{assert_contains, assert_exit, assert_lacks};
use serde_json::{Value, json};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

/// Runs `command` with no staging-root variable (each test names its store, or means the
/// default one).
fn ran(command: &mut Command) -> Ran {
    let output = command
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .output()
        .unwrap();
    read(&output)
}

/// `manifests/<name>` with the local `key` image pinned and `edit` applied, written as
/// `dir/<file>`: batch task files name their manifest by that file name.
fn pinned_manifest(
    dir: &Path,
    name: &str,
    key: &str,
    file: &str,
    edit: impl FnOnce(&mut Value),
) -> PathBuf {
    let path = dir.join(file);
    fs::rename(manifest(dir, name, key, edit), &path).unwrap();
    path
}

/// `manifests/busybox-cmp.json` with the local busybox image pinned, as `dir/busybox.json`.
fn busybox_manifest(dir: &Path) -> PathBuf {
    pinned_manifest(dir, "busybox-cmp.json", "busybox", "busybox.json", |_| {})
}

/// `manifests/python-unittest.json` with the local python image pinned and the harness told to
/// expect `count` tests.
fn harness_manifest(dir: &Path, count: u32) -> PathBuf {
    pinned_manifest(
        dir,
        "python-unittest.json",
        "python",
        &format!("manifest-{count}.json"),
        |m| m["command"][4] = json!(count.to_string()),
    )
}

fn rehearse(dir: &Path, source: &Path, benchmark: &Path, manifest: &Path, extra: &[&str]) -> Ran {
    ran(&mut rehearse_command(
        &dir.join("store"),
        source,
        benchmark,
        manifest,
        extra,
    ))
}

/// The walk-through's first step: the template expects 2 tests, the project has 7. The
/// rehearsal prints the count the run printed, ready to be committed.
#[test]
fn rehearse_prints_the_test_count_the_run_printed_for_the_author_to_commit() {
    let dir = tempfile::tempdir().unwrap();
    let project = fixture("python-project");
    let manifest = harness_manifest(dir.path(), 2);
    let human = rehearse(
        dir.path(),
        &project.join("solution"),
        &project.join("benchmark"),
        &manifest,
        &[],
    );
    println!("{}", human.stdout);
    assert_eq!(human.code, 4, "{}{}", human.stdout, human.stderr);
    let out = &human.stdout;
    let line = out
        .lines()
        .find(|l| l.starts_with("test count"))
        .unwrap_or_else(|| panic!("no test count line: {out}"));
    assert!(
        line.starts_with("test count  7 (unittest, as the solution run printed it: 7 passed"),
        "{line}"
    );
    assert_contains(line, "the number a harness that expects a count takes");
    let json = rehearse(
        dir.path(),
        &project.join("solution"),
        &project.join("benchmark"),
        &manifest,
        &["--json"],
    );
    let json: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        json["test_count"],
        json!({"count": 7, "runner": "unittest", "runs_agree": true,
               "source": "solver-controlled-output"}),
        "{json}"
    );
    // A run whose output no known runner printed has no count, and says nothing about one.
    let busybox = busybox_manifest(dir.path());
    let plain = rehearse(
        dir.path(),
        &fixture("example/source-pass"),
        &fixture("example/benchmark"),
        &busybox,
        &["--json"],
    );
    let plain: Value = serde_json::from_str(&plain.stdout).unwrap();
    assert_eq!(plain["test_count"], Value::Null, "{plain}");
}

/// A benchmark of `total` unittest tests, the first `errors` of which raise (an error, not a
/// failed assertion), with the bounty harness.
fn suite_benchmark(dir: &Path, total: usize, errors: usize) -> PathBuf {
    let bench = dir.join(format!("bench-{total}-{errors}"));
    fs::create_dir_all(&bench).unwrap();
    fs::copy(
        fixture("python-bounty/benchmark/run_tests.py"),
        bench.join("run_tests.py"),
    )
    .unwrap();
    let mut tests = String::from("import unittest\n\n\nclass Many(unittest.TestCase):\n");
    for i in 0..total {
        let body = if i < errors {
            "raise RuntimeError('not implemented')"
        } else {
            "self.assertEqual(1, 1)"
        };
        tests.push_str(&format!("    def test_{i:03}(self):\n        {body}\n\n"));
    }
    fs::write(bench.join("test_many.py"), tests).unwrap();
    bench
}

/// Issue #26's "Tests" paragraph: a 278-test suite with 9 errors ends with one short line that
/// counts what the author's tests did (no canary among them), and a passing log ends `OK`.
#[test]
fn a_278_test_suite_with_9_errors_ends_with_the_harness_summary_line_and_no_canary() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    fs::create_dir(&source).unwrap();
    fs::write(source.join("README"), "nothing to import\n").unwrap();
    // A rehearsal of the suite with `errors` of its tests raising, and its run's full log.
    let suite = |errors: usize, code: i32| {
        let logs = dir.path().join(format!("logs-{errors}"));
        let ran = rehearse(
            dir.path(),
            &source,
            &suite_benchmark(dir.path(), 278, errors),
            &harness_manifest(dir.path(), 278),
            &["--log-dir", logs.to_str().unwrap()],
        );
        assert_exit(&ran, code);
        (
            ran,
            fs::read_to_string(logs.join("rehearse-1.stdout")).unwrap(),
        )
    };
    let (failing, stdout) = suite(9, 4);
    let last = stdout.lines().last().unwrap();
    println!("{last}");
    assert_eq!(
        last,
        "harness: FAIL: 9 errors, 0 failures of 278 (first 5: test_many.Many.test_000, \
         test_many.Many.test_001, test_many.Many.test_002, test_many.Many.test_003, \
         test_many.Many.test_004)"
    );
    assert_lacks(&stdout, "harness_canary");
    assert_contains(&stdout, "\nRan 278 tests\n\nFAILED (errors=9)\n");
    // The rehearsal's own tests line counts the author's tests only.
    assert_contains(&failing.stdout, "269 passed, 0 failed, 9 error, 0 skipped");

    let (_, stdout) = suite(0, 0);
    assert!(
        stdout.ends_with("\nRan 278 tests\n\nOK\nharness: PASS: 278 tests ran and passed\n"),
        "{stdout}"
    );
    assert_lacks(&stdout, "FAILED");
}

/// Issue #26 item 9: after a rehearsal with no staging root named, `worker request --out` says
/// what it wrote and `worker plan` finds the trees in the store rehearse used, with no variable
/// set, and answers in rehearse's words (`--json` for the schema).
#[test]
fn plan_defaults_to_rehearses_store_and_reads_like_rehearses_sandbox_block() {
    let dir = tempfile::tempdir().unwrap();
    let busybox = busybox_manifest(dir.path());
    // No --staging-root and no variable: rehearse's own default store.
    let rehearsed = ran(Command::new(WORKER)
        .arg("rehearse")
        .arg("--source")
        .arg(fixture("example/source-pass"))
        .arg("--benchmark")
        .arg(fixture("example/benchmark"))
        .arg("--manifest")
        .arg(&busybox)
        .arg("--json"));
    assert_eq!(
        rehearsed.code, 0,
        "{}{}",
        rehearsed.stdout, rehearsed.stderr
    );
    let report: Value = serde_json::from_str(&rehearsed.stdout).unwrap();
    let committed = dir.path().join("committed.json");
    fs::write(&committed, serde_json::to_vec(&report["manifest"]).unwrap()).unwrap();
    let source = report["commit"]["source_snapshot_digest"].as_str().unwrap();
    let request = dir.path().join("request.json");
    let made = ran(Command::new(WORKER)
        .arg("request")
        .arg("--source-digest")
        .arg(source)
        .arg("--manifest")
        .arg(&committed)
        .arg("--out")
        .arg(&request));
    assert_eq!(made.code, 0, "{}", made.stderr);
    println!("{}", made.stderr);
    assert!(
        made.stderr
            .starts_with(&format!("wrote {}: job ", request.display())),
        "{}",
        made.stderr
    );
    assert_contains(&made.stderr, source);
    assert_contains(&made.stderr, &format!("worker plan {}", request.display()));

    let human = ran(Command::new(WORKER).arg("plan").arg(&request));
    println!("{}", human.stdout);
    assert_eq!(human.code, 0, "{}{}", human.stdout, human.stderr);
    let out = &human.stdout;
    assert!(out.starts_with("plan (nothing run)\n"), "{out}");
    assert_contains(
        out,
        &format!("  source                  {source}  staged\n"),
    );
    assert_contains(out, "  staging root            ");
    assert_contains(out, "(rehearse's default store");
    assert_contains(out, "--staging-root");
    for row in [
        "sandbox\n",
        "  image                   127.0.0.1:5000/verifier-busybox@sha256:",
        "  command                 [\"/bin/cmp\",",
        "  network                 none\n",
        "  mounts                  /benchmark ro, /workspace ro\n",
    ] {
        assert_contains(out, row);
    }
    // Every line is short: no 2,300-character JSON line, each mount once.
    assert!(out.lines().all(|l| l.len() < 200), "{out}");
    assert_eq!(out.matches("/workspace ro").count(), 1, "{out}");

    let json = ran(Command::new(WORKER).arg("plan").arg(&request).arg("--json"));
    assert_eq!(json.code, 0, "{}", json.stderr);
    let plan: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(plan["schema_version"], "agent-bounties/worker-plan-v2");
    assert_eq!(plan["source"]["staged"], true, "{plan}");
    assert_eq!(plan["benchmark"]["staged"], true, "{plan}");
}

/// Issue #26 item 8: many bounties at once. One report over every task (per task: verdict,
/// stability, discrimination, bypassable, digests and the commit staged), JUnit XML as nextest
/// writes it, a task that cannot be rehearsed reported rather than ending the batch, and the
/// exit code the worst task's.
#[test]
fn batch_rehearses_every_task_into_one_report_and_junit_xml() {
    let dir = tempfile::tempdir().unwrap();
    busybox_manifest(dir.path());
    let harness = harness_manifest(dir.path(), 6);
    // #42 item 8: a benchmark whose command passes whatever the source pays a non-solution.
    let anything = dir.path().join("anything");
    fs::create_dir(&anything).unwrap();
    fs::write(anything.join("run.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(
        anything.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    pinned_manifest(
        dir.path(),
        "busybox-cmp.json",
        "busybox",
        "anything.json",
        |m| {
            m["command"] = json!(["/benchmark/run.sh"]);
            m["benchmark_digest"] = json!(format!("sha256:{}", "0".repeat(64)));
        },
    );
    let tasks = dir.path().join("tasks.json");
    let example = fixture("example");
    let bounty = fixture("python-bounty");
    fs::write(
        &tasks,
        serde_json::to_vec_pretty(&json!({"tasks": [
            // Relative paths are read from the tasks file's directory.
            {"name": "example-good", "source": example.join("source-pass"),
             "benchmark": example.join("benchmark"), "manifest": "busybox.json",
             "base": example.join("source-fail"), "repeat": 2},
            {"name": "example-bad", "source": example.join("source-fail"),
             "benchmark": example.join("benchmark"), "manifest": "busybox.json"},
            {"name": "python-bounty", "source": bounty.join("solution-good"),
             "benchmark": bounty.join("benchmark"), "manifest": harness,
             "base": bounty.join("solution-bad"), "adversarial": true},
            {"name": "missing-tree", "source": dir.path().join("no-such-dir"),
             "benchmark": example.join("benchmark"), "manifest": "busybox.json"},
            {"name": "pays-anything", "source": example.join("source-pass"),
             "benchmark": anything, "manifest": "anything.json", "adversarial": true},
        ]}))
        .unwrap(),
    )
    .unwrap();
    let junit = dir.path().join("junit.xml");
    let batch = |extra: &[&str]| {
        ran(Command::new(WORKER)
            .arg("rehearse")
            .arg("--batch")
            .arg(&tasks)
            .arg("--staging-root")
            .arg(dir.path().join("store"))
            .args(extra))
    };
    let human = batch(&["--junit", junit.to_str().unwrap()]);
    println!("{}{}", human.stdout, human.stderr);
    // A task that pays a non-solution is the batch's answer (exit 9), apart from a task with no
    // solution yet (its source fails), which alone would be 4.
    assert_eq!(human.code, 9, "{}{}", human.stdout, human.stderr);
    let out = &human.stdout;
    for (name, row) in [
        ("example-good", "fit"),
        ("example-bad", "no solution yet"),
        ("python-bounty", "fit"),
        ("missing-tree", "NOT REHEARSED"),
        ("pays-anything", "PAYS A NON-SOLUTION"),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("  {name} ")))
            .unwrap_or_else(|| panic!("no row for {name}: {out}"));
        assert_contains(line, row);
        // Each task's time.
        assert_contains(line, " s  ");
    }
    assert!(
        out.lines().any(|l| l
            == "batch: 5 tasks: 2 fit, 1 pay a non-solution, 1 no solution yet, 0 unfit, 0 no \
                answer, 1 not rehearsed"),
        "{out}"
    );

    let json = batch(&["--json"]);
    assert_eq!(json.code, 9, "{}", json.stderr);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        report["schema_version"],
        "agent-bounties/regression-rehearsal-batch-v1"
    );
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 5, "{report}");
    let good = &tasks[0];
    assert_eq!(good["name"], "example-good");
    assert_eq!(good["answer"], "fit");
    assert_eq!(good["verdict"], "passed");
    assert_eq!(good["stability"], "stable");
    assert_eq!(good["discrimination"], "discriminates");
    // Not asked: present and null, like `discrimination` without a base.
    assert_eq!(good["bypassable"], Value::Null, "{good}");
    assert!(
        good.as_object().unwrap().contains_key("adversarial"),
        "{good}"
    );
    assert_eq!(good["adversarial"], Value::Null);
    assert!(
        good["commit"]["source_snapshot_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{good}"
    );
    assert!(good["commit"]["runner_manifest_hash"].is_string(), "{good}");
    // The commit the trees were staged from (this repository's HEAD).
    let trees = good["commit"]["trees"].as_array().unwrap();
    assert!(trees.iter().all(|t| t["origin"] == "git"), "{good}");
    assert_eq!(tasks[1]["answer"], "no_solution_yet");
    assert!(tasks[1]["seconds"].as_f64().unwrap() > 0.0, "{}", tasks[1]);
    assert_eq!(tasks[4]["answer"], "pays_non_solution");
    assert_eq!(tasks[4]["bypassable"], true, "{}", tasks[4]);
    assert_eq!(tasks[1]["verdict"], "failed");
    assert_eq!(tasks[1]["discrimination"], Value::Null);
    assert_eq!(tasks[2]["answer"], "fit");
    assert_eq!(tasks[2]["bypassable"], false, "{}", tasks[2]);
    assert!(tasks[2]["adversarial"]["stubs"].is_array());
    let missing = &tasks[3];
    assert_eq!(missing["answer"], "not_rehearsed");
    assert!(
        missing["error"].as_str().unwrap().contains("no-such-dir"),
        "{missing}"
    );
    assert_eq!(
        report["summary"],
        json!({"tasks": 5, "fit": 2, "pays_non_solution": 1, "no_solution_yet": 1, "unfit": 0,
               "no_answer": 0, "not_rehearsed": 1})
    );

    // JUnit XML: one testcase per task, a failure for the unfit one, an error for the one not
    // rehearsed; Python's own XML parser reads it.
    let xml = fs::read_to_string(&junit).unwrap();
    println!("{xml}");
    let check = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, xml.etree.ElementTree as ET\n\
             root = ET.parse(sys.argv[1]).getroot()\n\
             assert root.tag == 'testsuites', root.tag\n\
             suite = root.find('testsuite')\n\
             print(root.get('tests'), root.get('failures'), root.get('errors'))\n\
             for case in suite.findall('testcase'):\n\
             \x20   kids = [k.tag for k in case]\n\
             \x20   print(case.get('name'), ','.join(kids) or 'ok')\n",
        )
        .arg(&junit)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&check.stdout),
        "5 2 1\nexample-good ok\nexample-bad failure\npython-bounty ok\nmissing-tree error\n\
         pays-anything failure\n"
    );
}

/// A tasks file that is not what `--batch` reads is refused before anything runs, naming the
/// task and the field.
#[test]
fn a_batch_file_with_an_unknown_field_or_a_duplicate_name_is_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.json");
    for (body, words) in [
        (
            json!({"tasks": [{"name": "a", "source": "s", "benchmark": "b", "manifest": "m",
                              "sourec": "typo"}]}),
            "unknown field `sourec`",
        ),
        (
            json!({"tasks": [
                {"name": "a", "source": "s", "benchmark": "b", "manifest": "m"},
                {"name": "a", "source": "s", "benchmark": "b", "manifest": "m"}]}),
            "task name \"a\" is used twice",
        ),
        (json!({"tasks": []}), "no tasks"),
    ] {
        fs::write(&tasks, serde_json::to_vec(&body).unwrap()).unwrap();
        let out = ran(Command::new(WORKER)
            .arg("rehearse")
            .arg("--batch")
            .arg(&tasks)
            .arg("--staging-root")
            .arg(dir.path().join("store")));
        assert_eq!(out.code, 4, "{body}: {}{}", out.stdout, out.stderr);
        assert_contains(&out.stderr, words);
    }
}

/// A batch on the bundled example's trees under busybox, one task per name.
fn example_tasks(dir: &Path, names: &[(&str, &str, bool)]) -> PathBuf {
    busybox_manifest(dir);
    let example = fixture("example");
    let tasks: Vec<Value> = names
        .iter()
        .map(|(name, source, adversarial)| {
            json!({"name": name, "source": example.join(source),
                   "benchmark": example.join("benchmark"), "manifest": "busybox.json",
                   "adversarial": adversarial})
        })
        .collect();
    let path = dir.join("tasks.json");
    fs::write(
        &path,
        serde_json::to_vec(&json!({ "tasks": tasks })).unwrap(),
    )
    .unwrap();
    path
}

/// `worker rehearse --batch TASKS --log-dir LOGS`, staged in `dir/store`.
fn batch_with_logs(dir: &Path, tasks: &Path, logs: &Path) -> Ran {
    ran(Command::new(WORKER)
        .arg("rehearse")
        .arg("--batch")
        .arg(tasks)
        .arg("--staging-root")
        .arg(dir.join("store"))
        .arg("--log-dir")
        .arg(logs))
}

/// Issue #26: `--batch` with `--log-dir DIR` writes each task's logs under `DIR/<task name>/`
/// (with one rehearsal's file names there, stub files carrying the stub's name).
#[test]
fn batch_log_dir_writes_each_tasks_logs_under_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = example_tasks(
        dir.path(),
        &[
            ("example-good", "source-pass", true),
            ("example bad #2", "source-fail", false),
        ],
    );
    let logs = dir.path().join("logs");
    let out = batch_with_logs(dir.path(), &tasks, &logs);
    println!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 4, "{}{}", out.stdout, out.stderr);
    let listing = |sub: &str| -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(logs.join(sub))
            .unwrap_or_else(|e| panic!("{sub}: {e}"))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listing(""), ["example bad #2", "example-good"]);
    assert_eq!(
        listing("example bad #2"),
        [
            "rehearse-1.evidence.json",
            "rehearse-1.stderr",
            "rehearse-1.stdout"
        ]
    );
    let good = listing("example-good");
    for file in [
        "rehearse-1.stdout",
        "rehearse-1.stderr",
        "rehearse-1.evidence.json",
    ] {
        assert!(good.iter().any(|f| f == file), "{file} not in {good:?}");
    }
    for stub in ["-empty_tree.stdout", "-shadow-unittest.py.stdout"] {
        assert!(
            good.iter()
                .any(|f| f.starts_with("rehearse-stub-") && f.ends_with(stub)),
            "{stub} not in {good:?}"
        );
    }
    // Every stub's files carry its name after its number.
    for file in good.iter().filter(|f| f.starts_with("rehearse-stub-")) {
        let rest = file.trim_start_matches("rehearse-stub-");
        let (number, name) = rest.split_once('-').unwrap();
        assert!(number.parse::<u32>().is_ok(), "{file}");
        assert!(!name.starts_with("stdout") && name.contains('.'), "{file}");
    }
}

/// A task name is a directory under `--log-dir`: one that would leave it (`..`, a `/`, an
/// absolute path) or be it (`.`) is refused before anything runs, and nothing is written
/// outside the log dir.
#[test]
fn a_batch_task_name_cannot_put_its_logs_outside_the_log_dir() {
    for name in [
        "..",
        "../escaped",
        "a/b",
        "/tmp/abs",
        ".",
        "x/../../escaped",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let tasks = example_tasks(dir.path(), &[(name, "source-pass", false)]);
        let logs = dir.path().join("deep/logs");
        fs::create_dir_all(&logs).unwrap();
        let out = batch_with_logs(dir.path(), &tasks, &logs);
        assert_eq!(out.code, 4, "{name}: {}{}", out.stdout, out.stderr);
        assert_contains(
            &out.stderr,
            &format!("task name {name:?} cannot name a directory under --log-dir"),
        );
        // Nothing ran: no store, and nothing beside or under the log dir.
        assert!(!dir.path().join("store").exists(), "{name}: a run happened");
        assert_eq!(fs::read_dir(&logs).unwrap().count(), 0, "{name}");
        assert_eq!(
            fs::read_dir(dir.path().join("deep")).unwrap().count(),
            1,
            "{name}"
        );
        assert!(!dir.path().join("deep/escaped").exists(), "{name}");
        assert!(!dir.path().join("escaped").exists(), "{name}");
        assert!(!Path::new("/tmp/abs/rehearse-1.stdout").exists(), "{name}");
    }
}
