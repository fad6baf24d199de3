//! Issue 42 items 1–3 on real containers: the keep-text stubs (an early success exit put first,
//! the solver's text kept below it, so phrase checks still match), the runner shadows added to
//! the solver's real tree, and the finding "the benchmark runs tests the solver writes", each on
//! a weak benchmark built like the live platform's (`fixtures/weak-benchmarks`) and, for the
//! same stubs, a strong one with independent tests in the benchmark tree.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::{Path, PathBuf};

use super::ran::{Ran, fixture, manifest, ran, rehearse_command};
use super::rehearse_support::{
    PYTHON_SHADOWS, assert_answer_pays_non_solution, assert_at, assert_contains, assert_exit,
    assert_held, assert_lacks,
};
use serde_json::{Value, json};

fn weak(path: &str) -> PathBuf {
    fixture(&format!("weak-benchmarks/{path}"))
}

fn rehearse(dir: &Path, source: &Path, benchmark: &Path, manifest: &Path, extra: &[&str]) -> Ran {
    let output =
        rehearse_command(&dir.join("staging"), source, benchmark, manifest, extra).output();
    ran(&output.unwrap())
}

/// `rehearse --adversarial` of `source` against `benchmark` under `manifest`: asserts it exited
/// `code` and returns its stdout.
fn adversarial(dir: &Path, source: &Path, benchmark: &Path, manifest: &Path, code: i32) -> String {
    let ran = rehearse(dir, source, benchmark, manifest, &["--adversarial"]);
    assert_exit(&ran, code);
    ran.stdout
}

/// `rehearse --adversarial` of `source` against `benchmark` under `manifests/<name>` (the local
/// `key` image, changed by `edit`) in a directory of its own: asserts exit 9, the benchmark pays
/// a non-solution, and returns stdout.
fn pays_non_solution(
    source: &Path,
    benchmark: &Path,
    name: &str,
    key: &str,
    edit: impl FnOnce(&mut Value),
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path(), name, key, edit);
    adversarial(dir.path(), source, benchmark, &manifest, 9)
}

/// [`pays_non_solution`] of the weak Node solution against `weak-benchmarks/node/<benchmark>`,
/// the node image running `command` (the manifest's own when empty).
fn node_pays(benchmark: &str, command: &[&str]) -> String {
    let edit = |m: &mut Value| {
        if !command.is_empty() {
            m["command"] = serde_json::json!(command);
        }
    };
    let benchmark = weak(&format!("node/{benchmark}"));
    pays_non_solution(
        &weak("node/solution"),
        &benchmark,
        "node-test.json",
        "node",
        edit,
    )
}

/// The python image running `/benchmark/check.py`, as the live bounties' command does.
fn check_py(dir: &Path) -> PathBuf {
    manifest(dir, "python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!(["python3", "/benchmark/check.py"]);
    })
}

/// [`adversarial`] of the weak Python solution against `weak-benchmarks/python/<benchmark>`
/// under [`check_py`]: asserts exit 9, the benchmark pays a non-solution.
fn python_pays(dir: &Path, benchmark: &str) -> String {
    let benchmark = weak(&format!("python/{benchmark}"));
    adversarial(dir, &weak("python/solution"), &benchmark, &check_py(dir), 9)
}

fn line_of<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?}: {out}"))
}

/// The platform's rpc-failover shape: phrases grepped in two solver files, then the solver's own
/// tests run with `python -m unittest` from `/workspace` (PYTHONPATH set to it, as such harnesses
/// do). Before items 1–3 every stub replaced whole files, the phrase check failed, and the
/// rehearsal said `held: no stub passed`, exit 0.
#[test]
fn keep_text_and_shadow_stubs_pass_a_phrase_grep_benchmark_running_the_solvers_unittest() {
    let dir = tempfile::tempdir().unwrap();
    let out = &python_pays(dir.path(), "benchmark");
    assert_contains(out, "verdict  passed\n");
    // Whole files replaced: the phrase check fails, as before.
    assert_contains(out, "  held: exit_on_load (failed)\n");
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load_keep_text (passed): replaced failover.py, \
             tests/test_failover.py, tests/__init__.py\n",
    );
    // The control (every code file fails on load, text kept) fails: the shadows' passes are
    // theirs.
    assert_contains(out, "  held: fail_on_load_keep_text (failed)\n");
    for (stub, shadows) in [
        ("shadow unittest.py", "Python's unittest"),
        (
            "shadow sitecustomize.py",
            "Python's start-up hook sitecustomize",
        ),
        (
            "shadow usercustomize.py",
            "Python's start-up hook usercustomize",
        ),
    ] {
        let line = line_of(out, &format!("  BYPASSABLE: {stub} (passed)"));
        assert_contains(line, shadows);
    }
    // Imported only by pytest, or from a site directory: held here.
    for held in [
        "shadow pytest.py",
        "shadow conftest.py",
        "shadow rehearse-shadow.pth",
    ] {
        assert_contains(out, &format!("  held: {held} ("));
    }
    let finding = line_of(out, "problem: the benchmark runs tests the solver writes");
    assert_contains(finding, "tests/test_failover.py");
    assert_contains(finding, "-m unittest");

    // The unsolved tree: failover.py without its fix, and none of the solver's tests yet.
    let base = dir.path().join("unsolved");
    fs::create_dir(&base).unwrap();
    fs::write(
        base.join("failover.py"),
        "def pick_endpoint(endpoints, failures, max_failures=3):\n    return endpoints[0]\n",
    )
    .unwrap();
    let json = rehearse(
        dir.path(),
        &weak("python/solution"),
        &weak("python/benchmark"),
        &check_py(dir.path()),
        &["--adversarial", "--json", "--base", base.to_str().unwrap()],
    );
    assert_eq!(json.code, 9, "{}", json.stderr);
    let report = json.json();
    assert_at(&report, "/discrimination", &json!("discriminates"));
    let adversarial = &report["adversarial"];
    let tests = json!(["tests/test_failover.py"]);
    assert_at(adversarial, "/solver_tests/files", &tests);
    // With a base, the finding says the solution adds these tests.
    assert_at(adversarial, "/solver_tests/changed_by_solution", &tests);
    assert!(
        report["problems"].as_array().unwrap().iter().any(|p| p
            .as_str()
            .unwrap()
            .contains("(the solution adds or changes tests/test_failover.py)")),
        "{}",
        report["problems"]
    );
    let stubs = adversarial["stubs"].as_array().unwrap();
    let shadow = stubs
        .iter()
        .find(|s| s["name"] == "shadow unittest.py")
        .unwrap();
    // Added to the solver's real tree, its code neutralised with its text kept.
    assert_at(shadow, "/added", &json!(["unittest.py"]));
    assert_at(shadow, "/kept_files", &json!(0));
    assert_at(
        shadow,
        "/replaced",
        &json!(["failover.py", "tests/test_failover.py", "tests/__init__.py"]),
    );
    assert!(
        shadow["shadows"].as_str().unwrap().contains("unittest"),
        "{shadow}"
    );
}

/// The same benchmark running `python -m pytest`: the image has no pytest, so the solution's run
/// fails, unless a `pytest.py` in the solver's tree stands in for the runner.
#[test]
fn a_pytest_py_in_the_solvers_tree_passes_a_benchmark_running_python_m_pytest() {
    let dir = tempfile::tempdir().unwrap();
    let out = &python_pays(dir.path(), "benchmark-pytest");
    let line = line_of(out, "  BYPASSABLE: shadow pytest.py (passed)");
    assert_contains(line, "pytest");
    let finding = line_of(out, "problem: the benchmark runs tests the solver writes");
    assert_contains(finding, "tests/test_failover.py");
}

/// Independent tests in the benchmark tree, run by `fixtures/python-bounty`'s isolated harness:
/// every new stub fails, and the tests are not the solver's.
#[test]
fn independent_tests_in_the_benchmark_hold_against_every_keep_text_and_shadow_stub() {
    let dir = tempfile::tempdir().unwrap();
    let benchmark = dir.path().join("strong");
    fs::create_dir(&benchmark).unwrap();
    fs::copy(
        fixture("python-bounty/benchmark/run_tests.py"),
        benchmark.join("run_tests.py"),
    )
    .unwrap();
    fs::copy(
        weak("python/strong-benchmark/test_failover.py"),
        benchmark.join("test_failover.py"),
    )
    .unwrap();
    let manifest = manifest(dir.path(), "python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!(["python3", "-I", "-B", "/benchmark/run_tests.py", "3"]);
    });
    let out = &adversarial(
        dir.path(),
        &weak("python/solution"),
        &benchmark,
        &manifest,
        0,
    );
    assert_lacks(out, "BYPASSABLE");
    assert_held(out, &["exit_on_load_keep_text", "fail_on_load_keep_text"]);
    assert_held(out, &PYTHON_SHADOWS);
    assert_contains(out, "adversarial  held: no stub passed");
    assert_lacks(out, "tests the solver writes");
}

/// The Rust cheat of issue 42 (strsim): a constructor that exits 0 when the test binary loads,
/// appended to the solver's code with the code kept. Before: `verdict passed`, `held: no stub
/// passed`, exit 0 (no Rust stub existed).
#[test]
fn a_rust_constructor_exiting_0_when_the_test_binary_loads_pays_a_non_solution() {
    let out = &pays_non_solution(
        &weak("rust/solution"),
        &weak("rust/benchmark"),
        "rust-cargo.json",
        "rust",
        |_| {},
    );
    assert_contains(out, "verdict  passed\n");
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load_keep_text (passed): replaced src/lib.rs\n",
    );
    assert_answer_pays_non_solution(out);
}

/// The Node cheat of issue 42: keep the module's export, then `process.exit(0)` — `node --test`
/// counts the test file's exit 0 as one passing test. Before: every stub held, exit 0
/// (`exit_on_load` dropped the export and the module failed to link).
#[test]
fn a_node_module_keeping_its_export_then_exiting_0_pays_a_non_solution() {
    let out = &node_pays("benchmark", &[]);
    assert_contains(out, "  held: exit_on_load (failed)\n");
    let line = line_of(
        out,
        "  BYPASSABLE: exit_on_load_keep_text (passed): replaced ",
    );
    assert_contains(line, "parse.mjs");
    // The benchmark's own tests, from /benchmark: not the solver's.
    assert_lacks(out, "tests the solver writes");
}

/// `npm test` runs what the solver's package.json says: a `scripts.test` of `exit 0` in the
/// solver's real tree (its code neutralised) passes, and the tests run are the solver's own.
#[test]
fn npm_test_is_bypassed_by_the_solvers_package_json_and_runs_tests_the_solver_writes() {
    let out = &node_pays("benchmark-npm", &["/benchmark/npm-test.sh"]);
    let line = line_of(
        out,
        "  BYPASSABLE: shadow package.json scripts.test (passed)",
    );
    assert_contains(line, "npm test");
    assert_contains(out, "  held: fail_on_load_keep_text (failed)\n");
    let finding = line_of(out, "problem: the benchmark runs tests the solver writes");
    assert_contains(finding, "test/parse.test.mjs");
}

/// The benchmark's own tests, but run by a runner the solver's tree vendors
/// (`node_modules/.bin/mocha`): the runner is the solver's, so a `mocha` that exits 0 passes.
#[test]
fn a_runner_the_solver_vendors_in_node_modules_bin_is_shadowed() {
    let out = &node_pays("benchmark-bin", &["/benchmark/run.sh"]);
    assert_contains(out, "verdict  passed\n");
    let line = line_of(out, "  BYPASSABLE: shadow node_modules/.bin (passed)");
    assert_contains(line, "node_modules/.bin/mocha");
    // The vendored runner is kept as it is by the keep-text stubs: node_modules is not the
    // solver's code, and the control fails on parse.mjs.
    assert_contains(out, "  held: fail_on_load_keep_text (failed)\n");
    // The tests are the benchmark's, run from /benchmark.
    assert_lacks(out, "tests the solver writes");
}

/// The repository's own Rust example (`fixtures/rust-bounty`, `cargo test` in the solver's
/// tree) has the strsim shape: its benchmark's tests link the solver's crate, and the solver's
/// Cargo.toml declares them. Both Rust stubs pass it, so it is reported as paying a
/// non-solution (manifests/README.md says so); a hardened Rust example would flip this test.
#[test]
fn the_rust_example_bounty_is_paid_by_the_constructor_and_the_cargo_toml_shadow() {
    let out = &pays_non_solution(
        &fixture("rust-bounty/solution-good"),
        &fixture("rust-bounty/benchmark"),
        "rust-cargo.json",
        "rust",
        |_| {},
    );
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load_keep_text (passed): replaced src/lib.rs\n",
    );
    let line = line_of(
        out,
        "  BYPASSABLE: shadow Cargo.toml harness = false (passed)",
    );
    assert_contains(line, "added Cargo.toml, rehearse_shadow_main.rs");
    // The vendored crate is kept (cargo checks it against its checksums), and its tests are not
    // the solver's.
    assert_lacks(out, "vendor/hex");
}
