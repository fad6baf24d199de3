//! Per-test outcomes (#27) through the real binary and the real Docker daemon: SWE-bench's
//! lists from `rehearse --base` on the repo's Python bounty, flaky tests named by `--repeat`,
//! the in-toto statement of a run naming its tests, and a hostile benchmark printing a million
//! fake `test … ok` lines measured against the parser's memory bound.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

pub(super) use super::ran::{Ran, fixture, manifest, ran};
use crate::support::{image, workspace_root};

const WORKER: &str = env!("CARGO_BIN_EXE_worker");

/// The command the Python bounty commits: its harness, six tests.
fn bounty_harness(dir: &Path) -> PathBuf {
    manifest(dir, "python-unittest.json", "python", |m| {
        m["command"] = json!(["python3", "-I", "-B", "/benchmark/run_tests.py", "6"]);
    })
}

/// A benchmark of one executable `/bin/sh` script `run.sh` and a busybox manifest running it.
fn script(dir: &Path, name: &str, body: &str, edit: impl FnOnce(&mut Value)) -> (PathBuf, PathBuf) {
    let bench = dir.join(name);
    fs::create_dir(&bench).unwrap();
    let run = bench.join("run.sh");
    fs::write(&run, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o755)).unwrap();
    let manifest = manifest(dir, "busybox-cmp.json", "busybox", |m| {
        m["command"] = json!(["/benchmark/run.sh"]);
        edit(m);
    });
    (bench, manifest)
}

pub(super) fn rehearse(
    dir: &Path,
    source: &Path,
    benchmark: &Path,
    manifest: &Path,
    extra: &[&str],
) -> Command {
    super::ran::rehearse_command(&dir.join("staging"), source, benchmark, manifest, extra)
}

const RANGE_CHECK: &str = "test_solution.ToRoman.test_out_of_range_is_refused";
const CANARY: &str = "harness_canary.HarnessCanary.test_assertions_are_live";

#[test]
fn rehearsal_with_base_prints_the_range_check_as_fail_to_pass_and_no_regression() {
    let dir = tempfile::tempdir().unwrap();
    let harness = bounty_harness(dir.path());
    let bad = fixture("python-bounty/solution-bad");
    let args = ["--base", bad.to_str().unwrap()];
    let rehearse_good = |args: &[&str]| {
        ran(&rehearse(
            dir.path(),
            &fixture("python-bounty/solution-good"),
            &fixture("python-bounty/benchmark"),
            &harness,
            args,
        )
        .output()
        .unwrap())
    };
    let human = rehearse_good(&args);
    println!("{}", human.stdout);
    assert_eq!(human.code, 0, "{}{}", human.stdout, human.stderr);
    let out = &human.stdout;
    assert!(
        out.contains(&format!(
            "  FAIL_TO_PASS (1)\n    {RANGE_CHECK}\n  PASS_TO_FAIL (0)\n"
        )),
        "{out}"
    );
    assert!(out.contains("  PASS_TO_PASS (5)\n"), "{out}");
    // Each run lists its tests, failing first: none on the solution (the harness's canary runs
    // out of sight), the range check on the base tree.
    assert!(
        out.contains("tests (unittest, as printed by the run's own output; not part of the verdict): 6 passed, 0 failed"),
        "{out}"
    );
    assert!(!out.contains(CANARY), "{out}");
    assert!(!out.contains("warning: FAIL_TO_PASS is empty"), "{out}");

    let mut args = args.to_vec();
    args.push("--json");
    let json = rehearse_good(&args).json();
    let c = &json["tests"]["comparison"];
    assert_eq!(c["FAIL_TO_PASS"], json!([RANGE_CHECK]), "{json}");
    assert_eq!(c["PASS_TO_FAIL"], json!([]), "{json}");
    assert_eq!(c["PASS_TO_PASS"].as_array().unwrap().len(), 5, "{json}");
    assert_eq!(json["tests"]["warnings"], json!([]));
    let run = &json["runs"][0]["tests"];
    assert_eq!(run["source"], "solver-controlled-output");
    assert_eq!(run["runner"], "unittest");
    assert_eq!(
        run["counts"],
        json!({"passed": 6, "failed": 0, "skipped": 0, "error": 0})
    );
    let base = &json["base"]["tests"];
    assert_eq!(base["counts"]["failed"], 1, "{json}");
    assert_eq!(base["tests"][0]["name"], RANGE_CHECK, "{json}");
}

#[test]
fn a_base_tree_that_is_the_solution_warns_that_fail_to_pass_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let good = fixture("python-bounty/solution-good");
    // The solution plus a file no test reads: another tree (a base with the source's own
    // digest is not run at all: "base and source are the same tree"), the same test results.
    let base = dir.path().join("base-like-the-solution");
    copy_tree(&good, &base);
    fs::write(base.join("NOTES.txt"), "not read by any test\n").unwrap();
    let ran = ran(&rehearse(
        dir.path(),
        &good,
        &fixture("python-bounty/benchmark"),
        &bounty_harness(dir.path()),
        &["--base", base.to_str().unwrap()],
    )
    .output()
    .unwrap());
    assert!(
        ran.stdout.contains("  FAIL_TO_PASS (0)\n")
            && ran.stdout.contains("warning: FAIL_TO_PASS is empty"),
        "{}",
        ran.stdout
    );
}

#[test]
fn repeat_names_the_one_flaky_test_while_the_verdict_stays_stable() {
    let dir = tempfile::tempdir().unwrap();
    // One random byte per fresh container decides `wobbly`; with 16 runs all agreeing has odds
    // 2^-15. The command always exits 0: the verdict is stable, only the test flakes.
    let (bench, manifest) = script(
        dir.path(),
        "wobbly",
        "echo 'running 2 tests'\necho 'test steady ... ok'\n\
         n=$(od -An -N1 -tu1 /dev/urandom)\n\
         if [ $((n % 2)) -eq 0 ]; then echo 'test wobbly ... ok'; else echo 'test wobbly ... FAILED'; fi\n\
         exit 0",
        |_| {},
    );
    let ran = ran(&rehearse(
        dir.path(),
        &fixture("example/source-pass"),
        &bench,
        &manifest,
        &["--repeat", "16", "--json"],
    )
    .output()
    .unwrap());
    assert_eq!(
        ran.code, 0,
        "flaky tests warn, they never change the exit: {}",
        ran.stderr
    );
    let json = ran.json();
    assert_eq!(json["stability"], "stable");
    let flaky = json["tests"]["flaky"].as_array().unwrap();
    assert_eq!(flaky.len(), 1, "{json}");
    assert_eq!(flaky[0]["name"], "wobbly");
    let statuses: Vec<&str> = flaky[0]["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        statuses.contains(&"passed") && statuses.contains(&"failed"),
        "{statuses:?}"
    );
    assert_eq!(
        json["tests"]["warnings"],
        json!(["1 test(s) changed status across the 16 runs (flaky): wobbly"])
    );
}

/// awk printing `lines` result lines with three-character names (238 328 distinct, far past
/// the parser's 20 000), 16 bytes each: a million fit the protocol's 16 MiB output cap.
fn flood_script(header: bool, lines: u32) -> String {
    let header = if header {
        "echo 'running 1000000 tests'\n"
    } else {
        ""
    };
    format!(
        "{header}awk 'BEGIN {{ s = \"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\"; \
         for (i = 0; i < {lines}; i++) printf \"test %s%s%s ... ok\\n\", \
         substr(s, int(i / 3844) % 62 + 1, 1), substr(s, int(i / 62) % 62 + 1, 1), substr(s, i % 62 + 1, 1) }}'"
    )
}

/// Runs the worker under a Python parent that reports the child's peak resident set
/// (`getrusage(RUSAGE_CHILDREN).ru_maxrss`, KiB on Linux): the worker's own memory, measured
/// from outside it.
fn peak_rss_kib(command: &Command) -> (Ran, u64) {
    let mut wrapped = Command::new("python3");
    wrapped.arg("-c").arg(
        "import resource, subprocess, sys\n\
         r = subprocess.run(sys.argv[1:], capture_output=True)\n\
         sys.stdout.buffer.write(r.stdout)\n\
         sys.stderr.buffer.write(r.stderr)\n\
         sys.stderr.write('\\nPEAK_RSS_KIB %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
         sys.exit(r.returncode)",
    );
    wrapped.arg(command.get_program()).args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    let ran = ran(&wrapped.output().unwrap());
    let peak = ran
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("PEAK_RSS_KIB "))
        .unwrap()
        .parse()
        .unwrap();
    (ran, peak)
}

#[test]
fn a_million_fake_test_lines_stay_within_the_parsers_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cap = |m: &mut Value| {
        m["max_output_bytes"] = json!(16 << 20);
        m["timeout_seconds"] = json!(120);
    };
    // The same bytes twice: once after libtest's `running` line (a million result lines for
    // the parser), once without it (the parser never starts). The difference in the worker's
    // peak memory is what the parser held.
    let (flood, flood_manifest) = script(dir.path(), "flood", &flood_script(true, 1_000_000), cap);
    let (plain, plain_manifest) = script(dir.path(), "plain", &flood_script(false, 1_000_000), cap);
    let source = fixture("example/source-pass");
    let (flooded, flood_kib) = peak_rss_kib(&rehearse(
        dir.path(),
        &source,
        &flood,
        &flood_manifest,
        &["--json", "--quiet"],
    ));
    let (unparsed, plain_kib) = peak_rss_kib(&rehearse(
        dir.path(),
        &source,
        &plain,
        &plain_manifest,
        &["--json", "--quiet"],
    ));
    let json = flooded.json();
    assert_eq!(json["verdict"], "passed", "{}", flooded.stderr);
    let run = &json["runs"][0];
    assert_eq!(run["exit_code"], 0);
    let tests = &run["tests"];
    assert_eq!(tests["runner"], "libtest");
    assert_eq!(tests["truncated"], true);
    // The parser kept its 20 000 names; the record carries as many rows as fit its 1 MiB.
    assert_eq!(tests["counts"]["passed"], test_outcomes::MAX_TESTS);
    let rows = tests["tests"].as_array().unwrap().len();
    assert!(rows > 0 && rows <= test_outcomes::MAX_TESTS, "{rows}");
    assert!(
        serde_json::to_vec(tests).unwrap().len() <= test_outcomes::RECORD_BYTES,
        "the section fits the record budget"
    );
    assert_eq!(unparsed.json()["runs"][0]["tests"]["runner"], "unknown");
    let grown = flood_kib.saturating_sub(plain_kib) * 1024;
    println!(
        "worker peak RSS: {flood_kib} KiB with the flood parsed, {plain_kib} KiB without; \
         the parser's share {grown} bytes of the {} bound",
        test_outcomes::MEMORY_BOUND_BYTES
    );
    assert!(
        grown <= test_outcomes::MEMORY_BOUND_BYTES as u64,
        "{grown} bytes over the unparsed run"
    );
}

/// `--run-regression --in-toto` on the Python bounty's solution: the statement names the tests
/// the run printed (the harness's canary, which must fail, out of sight: no failed test), the
/// result is still the verdict, and the in-toto project's own bindings accept it.
#[test]
fn in_toto_statement_of_a_python_run_lists_its_real_test_names() {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("staging");
    fs::create_dir(&root).unwrap();
    let bounty = fixture("python-bounty");
    let benchmark = crate::support::stage_digest(&root, "benchmark", &bounty.join("benchmark"));
    let source = crate::support::stage_digest(&root, "source", &bounty.join("solution-good"));
    let mut manifest = verifier_sdk::fixtures::sample_manifest();
    manifest["image"] = json!(image("python"));
    manifest["command"] = json!(["python3", "-I", "-B", "/benchmark/run_tests.py", "6"]);
    manifest["benchmark_digest"] = json!(benchmark);
    manifest["timeout_seconds"] = json!(120);
    manifest["memory_bytes"] = json!(256 << 20);
    manifest["pids_limit"] = json!(64);
    let job = verifier_sdk::fixtures::job_value(&verifier_sdk::fixtures::JobParams {
        source_snapshot_digest: source,
        manifest,
        ..verifier_sdk::fixtures::JobParams::default()
    });
    let request = dir.path().join("request.json");
    fs::write(&request, serde_json::to_vec(&json!({"job": &job})).unwrap()).unwrap();
    let statement = dir.path().join("statement.intoto.json");
    let out = ran(&Command::new(WORKER)
        .arg("--run-regression")
        .arg(&request)
        .arg("--in-toto")
        .arg(&statement)
        .env("REGRESSION_SANDBOX_STAGING_ROOT", &root)
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let outcome: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(outcome["verdict"], "passed", "{}", out.stderr);
    let text = fs::read_to_string(&statement).unwrap();
    println!("{text}");
    let python = std::env::var_os("IN_TOTO_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".work/py-venv/bin/python"));
    let check = Command::new(&python)
        .arg(workspace_root().join("scripts/check-intoto.py"))
        .arg(&statement)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}: run scripts/python-deps.sh", python.display()));
    assert!(
        check.status.success(),
        "in-toto-attestation refused the statement: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let summary: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(summary["result"], "PASSED");
    assert_eq!(summary["failedTests"], json!([]));
    let passed = summary["passedTests"].as_array().unwrap();
    assert_eq!(passed.len(), 6, "{summary}");
    assert!(passed.contains(&json!(RANGE_CHECK)), "{summary}");
    assert_eq!(summary["responseHash"], outcome["response_hash"]);
    let statement: Value = serde_json::from_str(&text).unwrap();
    let notes = &statement["predicate"]["configuration"][2]["annotations"];
    assert_eq!(notes["testsSource"], "solver-controlled-output");
    assert_eq!(notes["testsRunner"], "unittest");
}

/// `worker explain` of a stored record lists the run's failing tests before the rest, and its
/// `--json` carries the whole section.
#[test]
fn explain_lists_the_failing_tests_of_a_stored_record_first() {
    let dir = tempfile::tempdir().unwrap();
    let json = ran(&rehearse(
        dir.path(),
        &fixture("python-bounty/solution-bad"),
        &fixture("python-bounty/benchmark"),
        &bounty_harness(dir.path()),
        &["--json"],
    )
    .output()
    .unwrap())
    .json();
    let evidence = json["runs"][0]["evidence_path"].as_str().unwrap();
    let human = ran(&Command::new(WORKER)
        .arg("explain")
        .arg(evidence)
        .output()
        .unwrap());
    assert_eq!(human.code, 0, "{}", human.stderr);
    println!("{}", human.stdout);
    let out = &human.stdout;
    let heading = out
        .find("tests (unittest, as printed by the run's own output; not part of the verdict): 5 passed, 1 failed")
        .unwrap_or_else(|| panic!("{out}"));
    let failing = out.find(&format!("FAILED   {RANGE_CHECK}")).unwrap();
    let passing = out
        .find("passed   test_solution.FromRoman.test_round_trip")
        .unwrap();
    assert!(heading < failing && failing < passing, "{out}");
    let explained = ran(&Command::new(WORKER)
        .args(["explain", "--json", evidence])
        .output()
        .unwrap())
    .json();
    let tests = &explained["explanation"]["tests"];
    assert_eq!(tests["runner"], "unittest");
    // The harness's canary fails out of sight: the range check is the one failure.
    assert_eq!(tests["counts"]["failed"], 1);
    assert_eq!(tests["tests"][0]["name"], RANGE_CHECK);
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}
