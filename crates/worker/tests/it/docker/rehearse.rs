//! `worker rehearse` and `worker explain` through the real binary, on the real Docker daemon and
//! the repo's digest-pinned test images (`scripts/services.sh` builds them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ran::{Ran, fixture, manifest, ran, rehearse_command, write_card_checker};
use super::rehearse_support::{
    PYTHON_SHADOWS, assert_answer_pays_non_solution, assert_at, assert_contains, assert_exit,
    assert_held, assert_lacks,
};
use crate::support::workspace_root;
use serde_json::Value;
use verifier_sdk::RunnerManifest;

struct Rehearsal {
    dir: tempfile::TempDir,
}

impl Rehearsal {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// `manifests/<name>` with the locally built image (`key` in `.work/images.json`) pinned,
    /// then `edit` applied.
    fn manifest(&self, name: &str, key: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
        manifest(self.dir.path(), name, key, edit)
    }

    /// A benchmark tree holding one executable `#!/bin/sh` script `run.sh`.
    fn script_benchmark(&self, name: &str, body: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        fs::create_dir(&dir).unwrap();
        let script = dir.join("run.sh");
        fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    fn rehearse(&self, source: &Path, benchmark: &Path, manifest: &Path, extra: &[&str]) -> Ran {
        let store = self.dir.path().join("staging");
        let output = rehearse_command(&store, source, benchmark, manifest, extra).output();
        ran(&output.unwrap())
    }

    /// [`Self::rehearse`] of the bundled example's passing source and its benchmark.
    /// Asserts it exited `code`.
    fn rehearse_example(&self, manifest: &Path, extra: &[&str], code: i32) -> Ran {
        let ran = self.rehearse(
            &fixture("example/source-pass"),
            &fixture("example/benchmark"),
            manifest,
            extra,
        );
        assert_exit(&ran, code);
        ran
    }

    /// [`Self::rehearse`] of `fixtures/python-bounty/<solution>` against that bounty's
    /// benchmark, asserting it exited `code`.
    fn python_bounty(&self, solution: &str, manifest: &Path, extra: &[&str], code: i32) -> Ran {
        let ran = self.rehearse(
            &fixture(&format!("python-bounty/{solution}")),
            &fixture("python-bounty/benchmark"),
            manifest,
            extra,
        );
        assert_exit(&ran, code);
        ran
    }

    /// [`Self::rehearse`] of the example's passing source with the script benchmark `bench`
    /// ([`Self::script_benchmark`]) under a busybox manifest changed by `edit`; asserts it
    /// exited `code`.
    fn rehearse_script(
        &self,
        bench: &Path,
        edit: impl FnOnce(&mut Value),
        extra: &[&str],
        code: i32,
    ) -> Ran {
        let ran = self.rehearse(
            &fixture("example/source-pass"),
            bench,
            &self.busybox_script(edit),
            extra,
        );
        assert_exit(&ran, code);
        ran
    }

    /// [`on_a_terminal`] of `worker rehearse` of `source` and `benchmark` under `manifest`
    /// into this rehearsal's store, then `extra`.
    fn on_a_terminal(
        &self,
        source: &Path,
        benchmark: &Path,
        manifest: &Path,
        extra: &[&str],
    ) -> String {
        let store = self.dir.path().join("staging");
        let mut args = vec!["rehearse"];
        for (flag, path) in [
            ("--source", source),
            ("--benchmark", benchmark),
            ("--manifest", manifest),
            ("--staging-root", &store),
        ] {
            args.extend([flag, path.to_str().unwrap()]);
        }
        args.extend(extra);
        on_a_terminal(&args)
    }

    fn busybox_cmp(&self) -> PathBuf {
        self.manifest("busybox-cmp.json", "busybox", |_| {})
    }

    /// The busybox manifest with its image's digest made of `digit` repeated: one the engine
    /// and the local registry do not hold.
    fn busybox_with_absent_image(&self, digit: char) -> PathBuf {
        self.manifest("busybox-cmp.json", "busybox", |m| {
            let name = m["image"].as_str().unwrap().split('@').next().unwrap();
            m["image"] = format!("{name}@sha256:{}", digit.to_string().repeat(64)).into();
        })
    }

    /// A busybox manifest running `/benchmark/run.sh`.
    fn busybox_script(&self, edit: impl FnOnce(&mut Value)) -> PathBuf {
        self.manifest("busybox-cmp.json", "busybox", |m| {
            m["command"] = serde_json::json!(["/benchmark/run.sh"]);
            edit(m);
        })
    }
}

fn explain(args: &[&str]) -> Ran {
    ran(&Command::new(env!("CARGO_BIN_EXE_worker"))
        .arg("explain")
        .args(args)
        .output()
        .unwrap())
}

const EXAMPLE_SOURCE_DIGEST: &str =
    "sha256:a1a2e7e0e6a698d862c0820310b86655104e5866a45ef62b383ead4c5a3c5249";
const EXAMPLE_BENCHMARK_DIGEST: &str =
    "sha256:f6630a1c99d3a6f27f0505b6e04890a9bbe973a78b2e9c0ff89580dae2967849";

#[test]
fn the_bundled_example_passes_and_shows_what_to_commit() {
    let r = Rehearsal::new();
    let ran = r.rehearse_example(&r.busybox_cmp(), &[], 0);
    let out = &ran.stdout;
    assert_contains(
        out,
        &format!("source_snapshot_digest  {EXAMPLE_SOURCE_DIGEST}"),
    );
    assert_contains(out, EXAMPLE_BENCHMARK_DIGEST);
    assert_contains(out, "filled in: the manifest had the placeholder");
    assert_contains(out, "network                 none");
    assert_contains(out, "passed: the command exited 0");
    // `cmp` prints no test results, so the pass is warned about (#42 item 5), between the
    // verdict and the closing line.
    assert_contains(
        out,
        "verdict  passed\nwarning: the benchmark passed but printed no test results",
    );
    assert_contains(out, "\nok: passed");
}

#[test]
fn a_manifest_with_the_real_digest_is_used_as_is_and_a_wrong_one_is_refused() {
    let r = Rehearsal::new();
    let right = r.manifest("busybox-cmp.json", "busybox", |m| {
        m["benchmark_digest"] = EXAMPLE_BENCHMARK_DIGEST.into();
    });
    let ran = r.rehearse_example(&right, &["--json"], 0);
    let report = ran.json();
    assert_eq!(report["commit"]["benchmark_digest_filled_in"], false);
    // One run compares nothing: its stability is not checked, not "stable".
    assert_eq!(report["stability"], "not_checked");
    assert_eq!(
        report["schema_version"],
        "agent-bounties/regression-rehearsal-v1"
    );

    let wrong = r.manifest("busybox-cmp.json", "busybox", |m| {
        m["benchmark_digest"] = format!("sha256:{}", "1".repeat(64)).into();
    });
    let ran = r.rehearse_example(&wrong, &[], 4);
    assert_contains(&ran.stderr, "does not match the benchmark directory");
    assert_contains(&ran.stderr, EXAMPLE_BENCHMARK_DIGEST);

    // The example manifests' own placeholder image must never reach the engine.
    let placeholder = workspace_root().join("manifests/busybox-cmp.json");
    let ran = r.rehearse_example(&placeholder, &[], 4);
    assert_contains(&ran.stderr, "placeholder digest");

    // The same rules as a job's manifest: a shell as argv[0] is refused.
    let shell = r.manifest("busybox-cmp.json", "busybox", |m| {
        m["command"] = serde_json::json!(["/bin/sh", "-c", "true"]);
    });
    let ran = r.rehearse_example(&shell, &[], 4);
    assert_contains(&ran.stderr, "shell");
}

#[test]
fn repeated_runs_of_the_example_are_stable_and_discriminate_against_the_failing_tree() {
    let r = Rehearsal::new();
    let ran = r.rehearse_example(
        &r.busybox_cmp(),
        &[
            "--repeat",
            "3",
            "--base",
            fixture("example/source-fail").to_str().unwrap(),
            "--json",
        ],
        0,
    );
    let report = ran.json();
    assert_eq!(report["stability"], "stable");
    assert_eq!(report["runs"].as_array().unwrap().len(), 3);
    for run in report["runs"].as_array().unwrap() {
        assert_eq!(run["status"], "passed");
    }
    assert_eq!(report["base"]["status"], "failed");
    assert_eq!(report["base"]["exit_code"], 1);
    assert_eq!(report["discrimination"], "discriminates");
    assert_eq!(report["problems"], serde_json::json!([]));
}

#[test]
fn a_base_tree_that_passes_means_the_benchmark_does_not_discriminate() {
    let r = Rehearsal::new();
    // Another tree (its own digest) that the benchmark also passes: the source's own tree
    // would be "the same tree" instead.
    let base = r.dir.path().join("passing-base");
    fs::create_dir(&base).unwrap();
    fs::copy(
        fixture("example/source-pass/result.txt"),
        base.join("result.txt"),
    )
    .unwrap();
    fs::write(base.join("NOTES"), "unrelated\n").unwrap();
    let ran = r.rehearse_example(&r.busybox_cmp(), &["--base", base.to_str().unwrap()], 4);
    assert_contains(
        &ran.stdout,
        "problem: the benchmark passes on the base tree: it does not test the change",
    );
    assert_contains(&ran.stdout, "discrimination          does_not_discriminate");
}

#[test]
fn a_coin_flip_benchmark_is_reported_unstable() {
    let r = Rehearsal::new();
    // One random byte per fresh container: with 16 runs all agreeing has odds 2^-15.
    let bench = r.script_benchmark(
        "coin",
        "n=$(od -An -N1 -tu1 /dev/urandom)\necho \"byte $n\"\nexit $((n % 2))",
    );
    let ran = r.rehearse_script(
        &bench,
        |_| {},
        &[
            "--repeat",
            "16",
            "--base",
            fixture("example/source-fail").to_str().unwrap(),
            "--json",
        ],
        4,
    );
    let report = ran.json();
    assert_eq!(report["stability"], "unstable");
    assert_eq!(report["verdict"], "unstable");
    // Flaky is the finding; whatever the base tree's one coin flip gave, the benchmark is not
    // also called non-discriminating, and the fix is named.
    assert_eq!(report["discrimination"], "unknown");
    assert_eq!(report["problems"].as_array().unwrap().len(), 1, "{report}");
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("AGENT_BOUNTIES_TEST_SEED=1 (the manifest's test_seed)"),
        "{report}"
    );
    let statuses: Vec<&str> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert!(
        statuses.contains(&"passed") && statuses.contains(&"failed"),
        "{statuses:?}"
    );
    let problem = report["problems"][0].as_str().unwrap();
    assert_contains(problem, "unstable across fresh containers");
}

#[test]
fn a_timeout_is_explained_with_the_limit_and_the_elapsed_time() {
    let r = Rehearsal::new();
    let bench = r.script_benchmark("slow", "echo starting\nsleep 60");
    let ran = r.rehearse_script(&bench, |m| m["timeout_seconds"] = 2.into(), &[], 3);
    assert_contains(
        &ran.stdout,
        "no verdict: stopped by the 2 s timeout after 2.",
    );
    assert_contains(&ran.stdout, "| starting");
    assert_contains(&ran.stdout, "verdict  no_verdict");
    assert_contains(
        &ran.stdout,
        "limit: timeout_seconds = 2 in the runner manifest; only the bounty author can \
             change it (it is committed in runner_manifest_hash); the solver can make the tests \
             finish sooner",
    );
}

#[test]
fn the_output_cap_and_oom_are_explained() {
    let r = Rehearsal::new();
    let chatty = r.script_benchmark("chatty", "while :; do echo spam; done");
    let ran = r.rehearse_script(&chatty, |m| m["max_output_bytes"] = 1024.into(), &[], 3);
    assert_contains(
        &ran.stdout,
        "no verdict: killed: stdout+stderr passed the 1024-byte cap",
    );
    assert_contains(
        &ran.stdout,
        "limit: max_output_bytes = 1024 in the runner manifest (stdout and stderr together); \
             only the bounty author can change it",
    );

    let hog = r.script_benchmark(
        "hog",
        "head -c 400000000 /dev/zero | tail -c 400000000 > /dev/null; echo survived",
    );
    let ran = r.rehearse_script(&hog, |m| m["memory_bytes"] = (64u64 << 20).into(), &[], 3);
    assert_contains(&ran.stdout, "no verdict: out of memory at the 64 MiB limit");
    assert_contains(
        &ran.stdout,
        "limit: memory_bytes = 67108864 (64 MiB) in the runner manifest (no swap; files \
             written to the /tmp and /tmp/home tmpfs count against it too); only the bounty \
             author can change it (it is committed in runner_manifest_hash); the solver can use \
             less memory, or write less to /tmp",
    );
}

#[test]
fn explain_reproduces_the_explanation_of_a_real_run() {
    let r = Rehearsal::new();
    let bench = r.script_benchmark("fails", "echo 'test_add ... FAIL'\necho 'boom' >&2\nexit 7");
    let ran = r.rehearse_script(&bench, |_| {}, &["--json"], 4);
    let report = ran.json();
    let run = &report["runs"][0];
    assert_eq!(
        (run["status"].as_str(), run["exit_code"].as_i64()),
        (Some("failed"), Some(7))
    );
    let evidence = run["evidence_path"].as_str().unwrap();

    let human = explain(&[evidence]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human.stdout.starts_with("failed: the command exited 7 in "),
        "{}",
        human.stdout
    );
    assert_contains(&human.stdout, "| test_add ... FAIL");
    assert_contains(&human.stdout, "| boom");
    assert_contains(&human.stdout, run["headline"].as_str().unwrap());

    let json = explain(&["--json", evidence]).json();
    for key in [
        "status",
        "exit_code",
        "headline",
        "details",
        "stdout_tail",
        "stderr_tail",
    ] {
        assert_eq!(json["explanation"][key], run[key], "{key}");
    }
    assert_eq!(
        json["outcome"],
        serde_json::json!({"status": "completed", "exit_code": 7})
    );

    // Unreadable, foreign or malformed input is refused with exit 4 and a named reason.
    let other = r.dir.path().join("other.json");
    fs::write(
        &other,
        r#"{"schema_version": "agent-bounties/regression-rehearsal-v1"}"#,
    )
    .unwrap();
    let ran = explain(&[other.to_str().unwrap()]);
    assert_eq!(ran.code, 4);
    assert_contains(&ran.stderr, "schema_version");
    assert_contains(&ran.stderr, "regression-evidence-v1");
    fs::write(&other, "{").unwrap();
    assert_eq!(explain(&[other.to_str().unwrap()]).code, 4);
    assert_eq!(explain(&["/nonexistent/evidence.json"]).code, 4);
}

/// Terminal control characters other than newline and tab: C0, DEL, C1 (as UTF-8).
fn control_chars(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| {
            (c.is_control() && *c != '\n' && *c != '\t') || ('\u{80}'..='\u{9f}').contains(c)
        })
        .collect()
}

#[test]
fn solver_output_with_terminal_control_codes_cannot_repaint_a_failure_as_passed() {
    let r = Rehearsal::new();
    // Cursor up, erase line and carriage return would overwrite FAILED with PASSED on a
    // terminal; an OSC sets the window title; U+009B is a one-character C1 CSI.
    let bench = r.script_benchmark(
        "repaint",
        r"printf 'FAILED\n\033[1A\033[2K\rPASSED\n\033]0;passed\007\302\233A\n'
printf 'boom\rPASSED\n' >&2
exit 1",
    );
    let ran = r.rehearse_script(&bench, |_| {}, &[], 4);
    for text in [&ran.stdout, &ran.stderr] {
        assert!(
            !text.contains('\u{1b}'),
            "ESC reached the terminal: {text:?}"
        );
        assert!(
            !text.contains('\r'),
            "a bare CR reached the terminal: {text:?}"
        );
        assert_eq!(control_chars(text), Vec::<char>::new(), "{text:?}");
    }
    // The bytes are still shown, visibly.
    assert_contains(&ran.stdout, "| FAILED");
    assert_contains(&ran.stdout, r"\e[1A\e[2K\rPASSED");
    assert_contains(&ran.stdout, r"boom\rPASSED");
    assert_contains(&ran.stdout, "verdict  failed");

    let evidence = ran
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("evidence "))
        .unwrap_or_else(|| panic!("no evidence path in {}", ran.stdout));
    let human = explain(&[evidence]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human.stdout.starts_with("failed: the command exited 1"),
        "{}",
        human.stdout
    );
    assert!(!human.stdout.contains('\u{1b}'), "{:?}", human.stdout);
    assert!(!human.stdout.contains('\r'), "{:?}", human.stdout);
    assert_eq!(control_chars(&human.stdout), Vec::<char>::new());
    assert_contains(&human.stdout, r"\e[1A\e[2K\rPASSED");
    // JSON keeps the exact bytes (serde escapes them).
    let json = explain(&["--json", evidence]).json();
    assert!(
        json["explanation"]["stdout_tail"]
            .as_str()
            .unwrap()
            .contains("\u{1b}[1A\u{1b}[2K\rPASSED")
    );
}

#[test]
fn the_python_example_passes_fails_and_discriminates() {
    let r = Rehearsal::new();
    let unittest = r.manifest("python-unittest.json", "python", |_| {});
    let ran = r.rehearse(
        &fixture("python-example/source-pass"),
        &fixture("python-example/benchmark"),
        &unittest,
        &[
            "--base",
            fixture("python-example/source-fail").to_str().unwrap(),
        ],
    );
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_contains(&ran.stdout, "ok: passed, discriminating");

    let ran = r.rehearse(
        &fixture("python-example/source-fail"),
        &fixture("python-example/benchmark"),
        &unittest,
        &[],
    );
    assert_eq!(ran.code, 4, "{}{}", ran.stdout, ran.stderr);
    assert_contains(&ran.stdout, "failed: the command exited 1");
    assert_contains(&ran.stdout, "AssertionError");
    assert_contains(&ran.stdout, "problem: the solution fails the benchmark");
}

#[test]
fn every_bundled_manifest_validates_and_unbuilt_images_are_marked_example() {
    let dir = workspace_root().join("manifests");
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".json") {
            continue;
        }
        let value: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        let manifest = RunnerManifest::from_value(&value)
            .unwrap_or_else(|e| panic!("{name} does not validate: {e}"));
        let built_here = [
            "127.0.0.1:5000/verifier-busybox@",
            "127.0.0.1:5000/verifier-python@",
            "127.0.0.1:5000/verifier-rust@",
            "127.0.0.1:5000/verifier-node@",
        ]
        .iter()
        .any(|p| manifest.image().starts_with(p));
        assert_eq!(
            built_here,
            !name.ends_with(".example.json"),
            "{name}: images this repo does not build must be named *.example.json"
        );
        names.push(name);
    }
    names.sort();
    for stack in ["busybox", "python", "node", "rust", "go"] {
        assert!(
            names.iter().any(|n| n.starts_with(stack)),
            "no {stack} manifest in {names:?}"
        );
    }
}

#[test]
fn a_missing_image_is_no_verdict_with_a_hint_and_the_env_root_is_used() {
    let r = Rehearsal::new();
    let missing = r.busybox_with_absent_image('1');
    let root = r.dir.path().join("env-root");
    let output = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["rehearse", "--json", "--source"])
        .arg(fixture("example/source-pass"))
        .arg("--benchmark")
        .arg(fixture("example/benchmark"))
        .arg("--manifest")
        .arg(&missing)
        .env("REGRESSION_SANDBOX_STAGING_ROOT", &root)
        .output()
        .unwrap();
    let ran = ran(&output);
    assert_eq!(ran.code, 3, "{}{}", ran.stdout, ran.stderr);
    let report = ran.json();
    let run = &report["runs"][0];
    assert_eq!(run["reason"], "image_missing");
    assert!(
        run["headline"].as_str().unwrap().contains("--pull"),
        "{run}"
    );
    assert!(
        run["evidence_path"]
            .as_str()
            .unwrap()
            .starts_with(root.to_str().unwrap())
    );
    assert!(root.join("benchmarks/sha256").is_dir());
}

/// Non-solutions that end a bare `python3 -m unittest` run with status 0 (DESIGN §8): each is a
/// tree a solver could submit for the roman-numerals bounty without solving it.
fn stub_solutions(root: &Path) -> Vec<(&'static str, PathBuf)> {
    let bad = fs::read_to_string(fixture("python-bounty/solution-bad/roman.py")).unwrap();
    let stubs: [(&str, &[(&str, &str)]); 5] = [
        (
            "exit_0_on_import",
            &[("roman.py", "import os\nos._exit(0)\n")],
        ),
        (
            "unittest_shadowed_by_the_solution",
            &[
                ("roman.py", bad.as_str()),
                ("unittest.py", "import sys\nsys.exit(0)\n"),
            ],
        ),
        (
            "assertions_patched_to_no_ops",
            &[(
                "roman.py",
                "import contextlib, unittest\n\
                 unittest.TestCase.assertEqual = lambda *a, **k: None\n\
                 unittest.TestCase.assertRaises = \
                 lambda *a, **k: contextlib.suppress(Exception)\n\
                 def to_roman(n): return ''\n\
                 def from_roman(s): return 0\n",
            )],
        ),
        (
            "exit_256_wraps_to_0",
            &[("roman.py", "import sys\nsys.exit(256)\n")],
        ),
        ("empty_tree", &[]),
    ];
    stubs
        .iter()
        .map(|(name, files)| {
            let dir = root.join(name);
            fs::create_dir(&dir).unwrap();
            for (file, body) in *files {
                fs::write(dir.join(file), body).unwrap();
            }
            (*name, dir)
        })
        .collect()
}

#[test]
fn stub_solutions_that_pass_a_bare_unittest_run_fail_the_bounty_harness() {
    let r = Rehearsal::new();
    let stubs = stub_solutions(r.dir.path());
    let benchmark = fixture("python-bounty/benchmark");
    // The attack, reproduced: the manifest the e2e bounty shipped before, a bare unittest run.
    let bare = bare_unittest(&r);
    let bypassed: Vec<&str> = stubs
        .iter()
        .filter(|(_, dir)| r.rehearse(dir, &benchmark, &bare, &[]).code == 0)
        .map(|(name, _)| *name)
        .collect();
    assert!(
        bypassed.contains(&"exit_0_on_import")
            && bypassed.contains(&"assertions_patched_to_no_ops"),
        "a bare unittest run should be bypassable, or this test proves nothing: {bypassed:?}"
    );

    // The hardened command the bounty commits: isolated interpreter, harness in a child process.
    let harness = bounty_harness(&r);
    for (name, dir) in &stubs {
        let ran = r.rehearse(dir, &benchmark, &harness, &[]);
        assert_eq!(
            ran.code, 4,
            "stub {name} must fail: {}{}",
            ran.stdout, ran.stderr
        );
        assert!(
            ran.stdout.contains("harness: FAIL"),
            "stub {name}: {}",
            ran.stdout
        );
    }
    let good = r.rehearse(
        &fixture("python-bounty/solution-good"),
        &benchmark,
        &harness,
        &[
            "--base",
            fixture("python-bounty/solution-bad").to_str().unwrap(),
        ],
    );
    assert_eq!(good.code, 0, "{}{}", good.stdout, good.stderr);
    assert_contains(&good.stdout, "ok: passed, discriminating");
}

/// The manifest the e2e bounty shipped before the harness: a bare unittest run, which a module
/// exiting 0 on import or a `unittest.py` in the source ends with status 0.
fn bare_unittest(r: &Rehearsal) -> PathBuf {
    unittest_discover(r, &["-B"])
}

/// `python3 <flags> -m unittest discover` over `/benchmark`, with no harness around it.
fn unittest_discover(r: &Rehearsal, flags: &[&str]) -> PathBuf {
    r.manifest("python-unittest.json", "python", |m| {
        let mut command = vec!["python3"];
        command.extend_from_slice(flags);
        command.extend([
            "-m",
            "unittest",
            "discover",
            "-s",
            "/benchmark",
            "-t",
            "/benchmark",
        ]);
        m["command"] = serde_json::json!(command);
    })
}

fn bounty_harness(r: &Rehearsal) -> PathBuf {
    r.manifest("python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!(["python3", "-I", "-B", "/benchmark/run_tests.py", "6"]);
    })
}

#[test]
fn adversarial_rehearsal_finds_that_exit_stubs_and_a_shadow_unittest_pass_a_bare_unittest_run() {
    let r = Rehearsal::new();
    let ran = r.python_bounty("solution-good", &bare_unittest(&r), &["--adversarial"], 9);
    let out = &ran.stdout;
    // The solution itself passes: the rehearsal alone would have said ok.
    assert_contains(out, "verdict  passed\n");
    assert_lacks(out, "ok: passed");
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load (passed): replaced roman.py\n",
    );
    // Issue 42 item 1: the exit put first, roman.py's text kept below it.
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load_keep_text (passed): replaced roman.py\n",
    );
    // Issue 42 item 2: added to the solver's real tree (roman.py failing on load, its text
    // kept), and named with what it shadows.
    assert_contains(
        out,
        "  BYPASSABLE: shadow unittest.py (passed): shadows Python's unittest (python -m \
             unittest with /workspace first on the import path): replaced roman.py: added \
             unittest.py\n",
    );
    // Shadows a bare unittest run never imports, the control without a shadow, and the empty
    // tree, fail on the missing module.
    assert_held(
        out,
        &[
            "shadow conftest.py",
            "shadow pytest.py",
            "fail_on_load_keep_text",
            "empty_tree",
        ],
    );
    assert_contains(
        out,
        "adversarial  BYPASSABLE: exit_on_load, exit_on_load_keep_text, shadow unittest.py \
             passed: a bounty with this manifest would pay a non-solution\n",
    );
    // The problem comes after the stub lines it refers to, and names the defect; the last line
    // is the answer (exit 9).
    let problem = out
        .lines()
        .find(|l| l.starts_with("problem: a stub solution passes"))
        .unwrap_or_else(|| panic!("{out}"));
    assert_answer_pays_non_solution(out);
    assert!(
        problem.starts_with(
            "problem: a stub solution passes the benchmark (exit_on_load, \
             exit_on_load_keep_text, shadow unittest.py)"
        ),
        "{out}"
    );
    assert!(
        problem.contains("replaces the runner: run the tests isolated"),
        "{out}"
    );
}

#[test]
fn adversarial_stubs_fail_the_bounty_harness_which_still_discriminates() {
    let r = Rehearsal::new();
    let ran = r.python_bounty(
        "solution-good",
        &bounty_harness(&r),
        &[
            "--adversarial",
            "--base",
            fixture("python-bounty/solution-bad").to_str().unwrap(),
        ],
        0,
    );
    let out = &ran.stdout;
    assert_contains(out, "ok: passed, discriminating; not checked: stability");
    assert_lacks(out, "BYPASSABLE");
    // The harness names `run_tests.py` in its usage line and starts a process: over-included
    // as a candidate program, its referenced_programs stub is tried and fails too.
    assert_held(
        out,
        &[
            "exit_on_load",
            "exit_on_load_keep_text",
            "referenced_programs",
            "fail_on_load_keep_text",
            "empty_tree",
        ],
    );
    assert_held(out, &PYTHON_SHADOWS);
    assert!(
        out.ends_with(
            "adversarial  held: no stub passed (11 failed)\nok: passed, discriminating; not \
             checked: stability (--repeat 2 or more)\n"
        ),
        "{out}"
    );
}

#[test]
fn adversarial_json_names_each_stub_its_files_its_verdict_and_whether_it_held() {
    let r = Rehearsal::new();
    let ran = r.python_bounty(
        "solution-good",
        &bare_unittest(&r),
        &["--adversarial", "--json"],
        9,
    );
    // A stub passes: the benchmark pays a non-solution, exit 9 (#42 item 8).
    let report = ran.json();
    assert_eq!(report["answer"], "pays_non_solution");
    assert_eq!(report["verdict"], "passed");
    let adversarial = &report["adversarial"];
    assert_eq!(adversarial["bypassable"], true, "{adversarial}");
    let stubs = adversarial["stubs"].as_array().unwrap();
    let stub = |name: &str| {
        stubs
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no stub {name}: {adversarial}"))
    };
    let exit = stub("exit_on_load");
    assert_eq!(exit["replaced"], serde_json::json!(["roman.py"]));
    assert_eq!(exit["added"], serde_json::json!([]));
    assert_eq!(
        (&exit["status"], &exit["outcome"]),
        (&"passed".into(), &"bypassed".into())
    );
    let source = report["commit"]["source_snapshot_digest"].as_str().unwrap();
    let digest = exit["source_snapshot_digest"].as_str().unwrap();
    assert!(digest.starts_with("sha256:") && digest != source, "{exit}");
    // The evidence of a bypass is kept for `worker explain`.
    let evidence = exit["evidence_path"].as_str().unwrap();
    assert_eq!(explain(&[evidence]).code, 0);

    let shadow = stub("shadow unittest.py");
    assert_eq!(shadow["added"], serde_json::json!(["unittest.py"]));
    assert_eq!(shadow["outcome"], "bypassed");
    let conftest = stub("shadow conftest.py");
    assert_eq!(
        (&conftest["status"], &conftest["outcome"]),
        (&"failed".into(), &"held".into())
    );
    let empty = stub("empty_tree");
    assert_eq!(
        (&empty["status"], &empty["outcome"]),
        (&"failed".into(), &"held".into())
    );
    assert_eq!(empty["replaced"], serde_json::json!([]));
    assert!(
        report["problems"].as_array().unwrap().iter().any(|p| p
            .as_str()
            .unwrap()
            .contains("exit_on_load, exit_on_load_keep_text, shadow unittest.py")),
        "{}",
        report["problems"]
    );

    // Without the flag the report has no adversarial part at all.
    let plain = r.python_bounty("solution-good", &bare_unittest(&r), &["--json"], 0);
    assert_eq!(plain.json().get("adversarial"), Some(&Value::Null));
}

#[test]
fn adversarial_busybox_example_holds_and_a_benchmark_that_passes_anything_is_bypassable() {
    let r = Rehearsal::new();
    let ran = r.rehearse_example(&r.busybox_cmp(), &["--adversarial"], 0);
    let out = &ran.stdout;
    assert_contains(out, "  held: empty_tree (failed)\n");
    // The example's source is a data file: no exit stub applies, and it is not run as one.
    assert_contains(
        out,
        "  skipped: exit_on_load (no file in a language with an exit stub)\n",
    );
    assert_contains(out, "  held: shadow unittest.py (failed)\n");
    assert!(
        out.ends_with(
            "ok: passed; not checked: stability (--repeat 2 or more), discrimination (--base \
             <unsolved tree>)\n"
        ),
        "{out}"
    );

    // A benchmark whose command succeeds whatever the source: even the empty tree is paid.
    let anything = r.script_benchmark("anything", "exit 0");
    let ran = r.rehearse_script(&anything, |_| {}, &["--adversarial"], 9);
    let out = &ran.stdout;
    assert_contains(out, "  BYPASSABLE: empty_tree (passed)\n");
    assert_contains(out, "adversarial  BYPASSABLE: ");
}

/// #42 item 8: "the benchmark lets a non-solution pass" has an exit code of its own, 9, and a
/// line of its own at the very end of the output, apart from 4 (a path typo, a failing
/// solution, an unstable verdict); `--json` says it in `answer`.
#[test]
fn a_bypassable_benchmark_has_its_own_exit_code() {
    let r = Rehearsal::new();
    let anything = r.script_benchmark("anything", "exit 0");
    let ran = r.rehearse_script(&anything, |_| {}, &["--adversarial"], 9);
    let out = &ran.stdout;
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("BYPASSABLE: the benchmark lets a non-solution pass (shadow "),
        "{out}"
    );
    assert!(
        last.contains("empty_tree passed): a bounty with this manifest would pay it"),
        "{out}"
    );
    let json = r.rehearse_script(&anything, |_| {}, &["--adversarial", "--json"], 9);
    assert_eq!(
        json.json()["answer"],
        "pays_non_solution",
        "{}",
        json.stdout
    );
    // A failing solution without stubs stays 4.
    let failing = r.script_benchmark("failing", "exit 1");
    r.rehearse_script(&failing, |_| {}, &[], 4);
    // The one table of exit codes says the same.
    let reference = fs::read_to_string(workspace_root().join("docs/reference.md")).unwrap();
    let row = reference
        .lines()
        .find(|l| l.starts_with("| 9 |"))
        .expect("docs/reference.md has an exit-code row for 9");
    assert_contains(row, "the benchmark lets a non-solution pass");
}

/// #42 item 5 in a real container: a harness that prints only its own words passes with the
/// warning; one that prints its runner's summary does not get it.
#[test]
fn a_pass_that_printed_no_test_results_is_warned_about_in_a_real_run() {
    let r = Rehearsal::new();
    let hidden = r.script_benchmark("hidden", "echo 'all checks passed'");
    let ran = r.rehearse_script(&hidden, |_| {}, &["--json"], 0);
    let json = ran.json();
    let warnings = json["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().starts_with(
            "the benchmark passed but printed no test results; a harness that hides its \
             runner's output cannot be checked for tests that never ran"
        )),
        "{json}"
    );
    let shown = r.script_benchmark("shown", "echo 'Ran 3 tests in 0.004s'; echo; echo OK");
    let json = r.rehearse_script(&shown, |_| {}, &["--json"], 0).json();
    assert_eq!(json["warnings"], serde_json::json!([]), "{json}");
}

/// #42 item 8: in a batch every progress line names its task, so a line read alone (a CI log,
/// a terminal scrolled back) says which bounty it is about.
#[test]
fn batch_progress_lines_name_their_task() {
    let r = Rehearsal::new();
    let manifest = r.busybox_cmp();
    let tasks = r.dir.path().join("tasks.json");
    fs::write(
        &tasks,
        serde_json::to_vec(&serde_json::json!({"tasks": [
            {"name": "good", "source": fixture("example/source-pass"),
             "benchmark": fixture("example/benchmark"), "manifest": manifest},
            {"name": "bad", "source": fixture("example/source-fail"),
             "benchmark": fixture("example/benchmark"), "manifest": manifest},
        ]}))
        .unwrap(),
    )
    .unwrap();
    let staging = r.dir.path().join("staging");
    let shown = on_a_terminal(&[
        "rehearse",
        "--batch",
        tasks.to_str().unwrap(),
        "--staging-root",
        staging.to_str().unwrap(),
    ]);
    for line in [
        "rehearse: [task 1/2 good] run 1/1 of the solution",
        "rehearse: [task 2/2 bad] run 1/1 of the solution",
    ] {
        assert_contains(&shown, line);
    }
    assert_lacks(&shown, "rehearse: run 1/1");
}

/// A solution inside a git working copy with `.git/`, a `__pycache__/`, an untracked file and an
/// `export-ignore` path: rehearsal must tell the author the digest the feed will compute from
/// the exact-commit archive, not the digest of the working copy (a bounty committing that one
/// could never verify).
#[test]
fn a_git_working_copy_is_staged_as_its_exact_commit_archive_holds_it() {
    let r = Rehearsal::new();
    let repo = r.dir.path().join("repo");
    let sol = repo.join("sol");
    fs::create_dir_all(&sol).unwrap();
    let git = |args: &[&str]| git_in(&repo, args);
    git(&["init", "-q"]);
    fs::copy(
        fixture("example/source-pass/result.txt"),
        sol.join("result.txt"),
    )
    .unwrap();
    fs::write(repo.join(".gitattributes"), "sol/notes.txt export-ignore\n").unwrap();
    fs::write(sol.join("notes.txt"), "not in the archive\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "solution"]);
    fs::create_dir(sol.join("__pycache__")).unwrap();
    fs::write(sol.join("__pycache__/roman.cpython-311.pyc"), "cache").unwrap();
    fs::write(sol.join("scratch.txt"), "untracked").unwrap();

    let manifest = r.busybox_cmp();
    let bench = fixture("example/benchmark");
    let ran = r.rehearse(&sol, &bench, &manifest, &["--json"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let report = ran.json();
    let digest = report["commit"]["source_snapshot_digest"]
        .as_str()
        .unwrap()
        .to_owned();
    // Only result.txt is in the archive's `sol/`: the protocol's golden vector.
    assert_eq!(digest, EXAMPLE_SOURCE_DIGEST);
    let origin = &report["commit"]["trees"][1];
    assert_eq!(origin["tree"], "source", "{report:#}");
    assert_eq!(origin["origin"], "git");
    assert_eq!(origin["subdirectory"], "sol");
    assert_eq!(
        origin["worktree_differs"], true,
        "untracked files were left out"
    );

    // The same digest from a real `git archive` tarball through the feed's own extraction.
    let tarball = r.dir.path().join("archive.tar.gz");
    let bytes = git(&["archive", "--format=tar.gz", "--prefix=repo-abc/", "HEAD"]);
    fs::write(&tarball, bytes).unwrap();
    let value: Value = serde_json::from_str(&fs::read_to_string(&manifest).unwrap()).unwrap();
    let mut value = value;
    value["benchmark_digest"] = Value::String(EXAMPLE_BENCHMARK_DIGEST.into());
    let parsed = RunnerManifest::from_value(&value).unwrap();
    let extracted = r.dir.path().join("extracted");
    worker_jobs::feed::archive::extract_tar_gz(
        fs::File::open(&tarball).unwrap(),
        &extracted,
        &verifier_sdk::RelativeDir::parse("sol").unwrap(),
        &worker_jobs::feed::archive::ArchiveLimits::source(&parsed),
    )
    .unwrap();
    let limits = verifier_sdk::TreeLimits::new(1 << 20, 100).unwrap();
    let feed_digest = verifier_sdk::digest::digest_directory(&extracted, limits)
        .unwrap()
        .digest;
    assert_eq!(feed_digest.to_string(), digest);

    // --worktree keeps the old behaviour, explicitly: the working copy's own digest.
    let ran = r.rehearse(&sol, &bench, &manifest, &["--json", "--worktree"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert_ne!(
        ran.json()["commit"]["source_snapshot_digest"],
        digest.as_str()
    );
    assert_eq!(ran.json()["commit"]["trees"][1]["origin"], "worktree");
}

/// A benchmark whose discovery finds no test (wrong directory or pattern) passes every
/// solution: Python 3.11's unittest exits 0 after `Ran 0 tests`. Rehearsal must not call that
/// a pass a bounty can use.
#[test]
fn a_benchmark_that_runs_zero_tests_is_not_reported_as_a_usable_pass() {
    let r = Rehearsal::new();
    let benchmark = r.dir.path().join("no-tests");
    fs::create_dir(&benchmark).unwrap();
    fs::write(
        benchmark.join("tests_are_elsewhere.txt"),
        "nothing to discover\n",
    )
    .unwrap();
    let bare = unittest_discover(&r, &["-I", "-B"]);
    let ran = r.rehearse(
        &fixture("python-bounty/solution-good"),
        &benchmark,
        &bare,
        &["--worktree"],
    );
    assert_eq!(ran.code, 4, "{}{}", ran.stdout, ran.stderr);
    assert_contains(&ran.stdout, "verdict  passed");
    assert_contains(&ran.stdout, "no test ran (Ran 0 tests (unittest))");
}

#[test]
fn a_failed_pull_shows_the_engines_reason_not_advice_to_pull() {
    let r = Rehearsal::new();
    // A digest the local registry does not hold: the pull is refused by the registry.
    let absent = r.busybox_with_absent_image('2');
    let ran = r.rehearse_example(&absent, &["--pull"], 3);
    let line = ran
        .stdout
        .lines()
        .find(|l| l.contains("no verdict (image_missing)"))
        .unwrap_or_else(|| panic!("{}", ran.stdout));
    assert_contains(line, "pulling it by its digest failed:");
    // The engine's words follow (the registry's "manifest unknown" / "not found").
    let reason = line
        .split("pulling it by its digest failed:")
        .nth(1)
        .unwrap();
    assert!(reason.trim().len() > 5, "{line}");
    assert_lacks(line, "--pull");
}

#[test]
fn manifest_errors_name_the_field_suggest_the_closest_and_say_how_to_pin() {
    let r = Rehearsal::new();
    let run = |edit: fn(&mut Value)| {
        let manifest = r.manifest("busybox-cmp.json", "busybox", edit);
        r.rehearse_example(&manifest, &[], 4)
    };
    let typed = run(|m| m["timeout_seconds"] = "120".into());
    assert_contains(
        &typed.stderr,
        "timeout_seconds: invalid type: string \"120\", expected u64",
    );
    let unknown = run(|m| {
        let v = m["memory_bytes"].take();
        m.as_object_mut().unwrap().remove("memory_bytes");
        m["memory_byte"] = v;
    });
    assert_contains(
        &unknown.stderr,
        "unknown field \"memory_byte\"; did you mean \"memory_bytes\"?",
    );
    let tag = run(|m| m["image"] = "python:3.12-slim".into());
    assert_contains(&tag.stderr, "pin by digest: name@sha256:<64 hex>");
}

#[test]
fn a_tree_over_max_source_files_names_the_field_its_real_size_and_largest_directories() {
    let r = Rehearsal::new();
    let source = r.dir.path().join("big-source");
    fs::create_dir_all(source.join("vendor/lib")).unwrap();
    for i in 0..4 {
        fs::write(source.join(format!("vendor/lib/{i}.py")), "x = 1\n").unwrap();
    }
    fs::write(source.join("result.txt"), "42\n").unwrap();
    let manifest = r.manifest("busybox-cmp.json", "busybox", |m| {
        m["max_source_files"] = 3.into();
    });
    let ran = r.rehearse(&source, &fixture("example/benchmark"), &manifest, &[]);
    assert_eq!(ran.code, 4, "{}{}", ran.stdout, ran.stderr);
    assert_contains(
        &ran.stderr,
        "the source tree is over max_source_files = 3 in the runner manifest: it holds 5 \
             files, 27 bytes; largest directories: vendor/ (4 files, 24 bytes); only the bounty \
             author can change it",
    );
    assert_contains(&ran.stderr, "a solver can only submit a smaller tree");

    // The same tree committed in a git repository is refused while its archive is extracted,
    // with the same words (measured on the directory, `.git` left out).
    let git = |args: &[&str]| git_in(&source, args);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "big"]);
    let ran = r.rehearse(&source, &fixture("example/benchmark"), &manifest, &[]);
    assert_eq!(ran.code, 4, "{}{}", ran.stdout, ran.stderr);
    assert_contains(
        &ran.stderr,
        "the source tree is over max_source_files = 3 in the runner manifest: it holds 5 \
             files, 27 bytes; largest directories: vendor/ (4 files, 24 bytes)",
    );
}

/// `cmd` run on a pseudo-terminal (`script`), so the worker's stderr is a terminal; returns
/// what the terminal showed.
fn on_a_terminal(args: &[&str]) -> String {
    let mut line = String::from(env!("CARGO_BIN_EXE_worker"));
    for arg in args {
        assert!(
            arg.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-=".contains(c)),
            "{arg}"
        );
        line.push(' ');
        line.push_str(arg);
    }
    let output = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .env_remove("REGRESSION_SANDBOX_STAGING_ROOT")
        .output()
        .expect("util-linux `script` runs the worker on a pseudo-terminal");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn progress_shows_each_run_on_a_terminal_and_nothing_off_one_or_with_quiet() {
    let r = Rehearsal::new();
    let manifest = r.busybox_cmp();
    let base = fixture("example/source-fail");
    let args = ["--repeat", "2", "--base", base.to_str().unwrap()];
    let example = |extra: &[&str]| {
        r.on_a_terminal(
            &fixture("example/source-pass"),
            &fixture("example/benchmark"),
            &manifest,
            extra,
        )
    };
    let shown = example(&args);
    for line in [
        "rehearse: run 1/2 of the solution …",
        "rehearse: run 1/2 of the solution: passed in ",
        "rehearse: run 2/2 of the solution: passed in ",
        "rehearse: the base tree run …",
        "rehearse: the base tree run: failed in ",
    ] {
        assert_contains(&shown, line);
    }
    // The starting line comes before the result, and the report still follows.
    let start = shown.find("run 1/2 of the solution …").unwrap();
    let end = shown.find("run 1/2 of the solution: passed").unwrap();
    assert!(start < end, "{shown}");
    assert_contains(&shown, "ok: passed, stable, discriminating");

    let shown = example(&[&args[..], &["--quiet"]].concat());
    assert_contains(&shown, "ok: passed, stable, discriminating");
    assert_lacks(&shown, "rehearse: run");

    // Off a terminal (a pipe, as in CI), stderr carries no progress.
    let ran = r.rehearse_example(&manifest, &["--repeat", "2"], 0);
    assert_lacks(&ran.stderr, "rehearse: run");
}

#[test]
fn log_dir_keeps_every_runs_full_output_and_explain_shows_what_ran_and_a_passing_tail() {
    let r = Rehearsal::new();
    let bench = r.script_benchmark(
        "talky",
        "i=1; while [ $i -le 100 ]; do echo \"line $i\"; i=$((i+1)); done\necho oops >&2",
    );
    let logs = r.dir.path().join("logs");
    let ran = r.rehearse_script(
        &bench,
        |_| {},
        &["--log-dir", logs.to_str().unwrap(), "--json"],
        0,
    );
    let report = ran.json();
    let run = &report["runs"][0];
    assert_eq!(run["logs"], logs.join("rehearse-1").to_str().unwrap());
    let expected: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    assert_eq!(
        fs::read_to_string(logs.join("rehearse-1.stdout")).unwrap(),
        expected
    );
    assert_eq!(
        fs::read_to_string(logs.join("rehearse-1.stderr")).unwrap(),
        "oops\n"
    );
    let copy = fs::read(logs.join("rehearse-1.evidence.json")).unwrap();
    let evidence = run["evidence_path"].as_str().unwrap();
    assert_eq!(copy, fs::read(evidence).unwrap());

    // A passing run's explanation shows what ran and the end of its output.
    let shown = explain(&[evidence]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let out = &shown.stdout;
    assert!(out.starts_with("passed: the command exited 0 in "), "{out}");
    assert_contains(out, "| line 100\n");
    assert_contains(out, "| line 89\n");
    assert_lacks(out, "| line 88\n");
    assert_contains(out, "stderr (last lines):\n    | oops");
    for row in [
        "what ran\n",
        "  image     127.0.0.1:5000/verifier-busybox@sha256:",
        "  image id  sha256:",
        "  command   [\"/benchmark/run.sh\"]",
        "  source    sha256:",
        "  benchmark sha256:",
        "  started   ",
        "  finished  ",
        "  engine    ",
    ] {
        assert_contains(out, row);
    }
    for (row, digest) in [
        ("source   ", &report["commit"]["source_snapshot_digest"]),
        ("benchmark", &report["commit"]["benchmark_digest"]),
    ] {
        let line = format!("  {row} {} at ", digest.as_str().unwrap());
        assert_contains(out, &line);
    }
    let three = explain(&["--lines", "3", evidence]).stdout;

    assert_contains(&three, "| line 98\n");
    assert_lacks(&three, "| line 97\n");
    let full = explain(&["--full", evidence]).stdout;
    assert_contains(&full, "| line 1\n");
    assert_contains(&full, "| line 100\n");
    assert_eq!(explain(&["--full", "--lines", "3", evidence]).code, 2);

    // Output past the cap is kept up to the cap (the chunk that crossed it included), not
    // beyond.
    let chatty = r.script_benchmark("chatty-log", "while :; do echo spam; done");
    r.rehearse_script(
        &chatty,
        |m| m["max_output_bytes"] = 4096.into(),
        &["--log-dir", logs.to_str().unwrap()],
        3,
    );
    let kept = fs::metadata(logs.join("rehearse-1.stdout")).unwrap().len();
    assert!((4096..4096 + 65_536).contains(&kept), "{kept}");
}

/// Asserts that the one run of `ran` ended `status` with exactly one hit, `kind` at
/// `certainty`; returns the run's details, where the hit is explained.
fn the_one_hit(ran: &Ran, status: &str, kind: &str, certainty: &str) -> String {
    let report = ran.json();
    let run = &report["runs"][0];
    assert_eq!(run["status"], status);
    let hits: Vec<(&str, &str)> = run["hits"]
        .as_array()
        .map(|hits| {
            hits.iter()
                .map(|h| {
                    (
                        h["kind"].as_str().unwrap(),
                        h["certainty"].as_str().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let details = run["details"].to_string();
    assert_eq!(hits, [(kind, certainty)], "{details}");
    details
}

#[test]
fn a_benchmark_forking_past_pids_limit_is_named_from_the_cgroup_and_keeps_its_verdict() {
    let r = Rehearsal::new();
    // The subshell forks until refused (and dies of it); the sleeps it started keep the
    // container's process count at the limit while the main shell waits, then passes.
    let bench = r.script_benchmark(
        "forks",
        "( i=0; while [ $i -lt 64 ]; do sleep 3 & i=$((i+1)); done; wait )\nsleep 1\nexit 0",
    );
    // A hit is reported beside the verdict and never changes it.
    let ran = r.rehearse_script(&bench, |m| m["pids_limit"] = 16.into(), &["--json"], 0);
    let details = the_one_hit(&ran, "passed", "pids_limit", "observed");
    assert_contains(&details, "hit: the process limit refused");
    assert_contains(
        &details,
        "(cgroup pids.events): pids_limit = 16 in the runner manifest",
    );
}

#[test]
fn a_benchmark_filling_tmp_is_named_from_statfs_beside_the_failure() {
    let r = Rehearsal::new();
    let bench = r.script_benchmark(
        "fills",
        "head -c 100000000 /dev/zero > /tmp/fill\necho \"wrote $(wc -c < /tmp/fill)\"\nsleep 1\nexit 1",
    );
    let edit = |m: &mut Value| {
        m["tmpfs_bytes"] = (64u64 << 20).into();
        m["memory_bytes"] = (256u64 << 20).into();
    };
    let ran = r.rehearse_script(&bench, edit, &["--json"], 4);
    let details = the_one_hit(&ran, "failed", "tmpfs_full", "observed");
    assert_contains(
        &details,
        "hit: /tmp had no free space left (statfs): tmpfs_bytes = 67108864",
    );
    assert_contains(&details, "also counts against memory_bytes");
}

#[test]
fn a_write_to_a_read_only_path_is_named_as_likely_from_the_output() {
    let r = Rehearsal::new();
    let bench = r.script_benchmark("writes", "echo x > /workspace/new\nexit 1");
    let ran = r.rehearse_script(&bench, |_| {}, &["--json"], 4);
    let details = the_one_hit(&ran, "failed", "read_only_path", "likely");
    assert_contains(
        &details,
        "likely hit: the output says \\\"Read-only file system\\\"",
    );
}

#[test]
fn a_network_attempt_under_network_none_is_named_from_the_namespace_counters() {
    let r = Rehearsal::new();
    let bench = r.script_benchmark("dials", "nc 1.1.1.1 80 < /dev/null\nsleep 1\nexit 1");
    let ran = r.rehearse_script(&bench, |_| {}, &[], 4);
    assert_contains(
        &ran.stdout,
        "hit: the program tried to reach the network: 1 packet(s) had no route (the \
             namespace's OutNoRoutes counter)",
    );
    assert_contains(&ran.stdout, "failed: the command exited 1");
}

/// `git <args>` in `dir` with a fixed identity; panics with git's words on failure.
fn git_in(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=t@example.invalid", "-c", "user.name=t"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A new git repository at `dir` holding `fixtures/<tree>/result.txt`, nothing committed.
fn git_repository(dir: &Path, tree: &str) {
    fs::create_dir_all(dir).unwrap();
    git_in(dir, &["init", "-q"]);
    fs::copy(
        fixture(&format!("{tree}/result.txt")),
        dir.join("result.txt"),
    )
    .unwrap();
}

/// A shell command that creates `marker` (and exits 1, so a filter or hook it stands in for
/// fails loudly if it ever runs).
fn touches(marker: &Path) -> String {
    format!("touch '{}'; false", marker.display())
}

/// The solver's attack on the author's machine (issue 21 item 1): the files of a bare
/// repository (`HEAD`, `objects/`, `refs/`, a `config` with `core.worktree=..` and
/// `core.fsmonitor=<command>`) committed inside the directory the bounty points at, in an
/// ordinary clone. Git's discovery took that directory for a repository and `git status` ran
/// the command with the author's privileges. Rehearsal must find the clone's own `.git` itself,
/// stage the exact commit from it, and run nothing the tree names — for the source and the
/// benchmark tree alike.
#[test]
fn an_embedded_bare_repository_in_the_tree_cannot_run_a_command_on_the_host() {
    let r = Rehearsal::new();
    let repo = r.dir.path().join("clone");
    let (sol, bench) = (repo.join("sol"), repo.join("bench"));
    fs::create_dir_all(&sol).unwrap();
    git_in(&repo, &["init", "-q"]);
    fs::copy(
        fixture("example/source-pass/result.txt"),
        sol.join("result.txt"),
    )
    .unwrap();
    fs::create_dir_all(&bench).unwrap();
    fs::copy(
        fixture("example/benchmark/expected.txt"),
        bench.join("expected.txt"),
    )
    .unwrap();
    let markers: Vec<PathBuf> = ["source", "benchmark"]
        .iter()
        .map(|t| r.dir.path().join(format!("ran-from-{t}")))
        .collect();
    for (dir, marker) in [&sol, &bench].into_iter().zip(&markers) {
        fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        for sub in ["objects/info", "refs/heads"] {
            fs::create_dir_all(dir.join(sub)).unwrap();
            fs::write(dir.join(sub).join(".keep"), "").unwrap();
        }
        fs::write(
            dir.join("config"),
            format!(
                "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n\
                 \tfsmonitor = \"{}\"\n",
                touches(marker)
            ),
        )
        .unwrap();
    }
    git_in(&repo, &["add", "-A"]);
    git_in(
        &repo,
        &["commit", "-q", "-m", "a solution with a repository inside"],
    );
    // The control: git's own discovery in that directory runs the command.
    let control = r.dir.path().join("control");
    let out = Command::new("git")
        .arg("-C")
        .arg(&sol)
        .args(["-c", &format!("core.fsmonitor={}", touches(&control))])
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        control.exists(),
        "git no longer discovers the embedded repository: {out:?}"
    );

    let ran = r.rehearse(&sol, &bench, &r.busybox_cmp(), &["--json"]);
    for marker in &markers {
        assert!(
            !marker.exists(),
            "rehearse ran the solver's command ({}): {}{}",
            marker.display(),
            ran.stdout,
            ran.stderr
        );
    }
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let report = ran.json();
    let top = fs::canonicalize(&repo).unwrap();
    for (i, sub) in [(0, "bench"), (1, "sol")] {
        let origin = &report["commit"]["trees"][i];
        assert_eq!(origin["origin"], "git", "{report:#}");
        assert_eq!(
            origin["repository"],
            top.display().to_string(),
            "{report:#}"
        );
        assert_eq!(origin["subdirectory"], sub, "{report:#}");
    }
}

/// The same attack through a repository of the solver's own: a `.git` directory (or a `.git`
/// file naming a git directory elsewhere) inside the tree, as an unpacked download holds it,
/// whose config names `core.fsmonitor`, a `core.hooksPath` holding a `post-index-change` hook,
/// and a `filter` driver the tree's `.gitattributes` selects (`git archive` runs its smudge
/// command, `git status` its clean command). Rehearsal may stage that repository's commit,
/// but none of those commands may run.
#[test]
fn a_nested_git_directory_or_file_with_hostile_config_cannot_run_a_command_on_the_host() {
    for form in ["directory", "file"] {
        let r = Rehearsal::new();
        let sol = r.dir.path().join("download").join("sol");
        git_repository(&sol, "example/source-pass");
        fs::write(sol.join(".gitattributes"), "* filter=evil\n").unwrap();
        git_in(&sol, &["add", "-A"]);
        git_in(&sol, &["commit", "-q", "-m", "solution"]);
        let marker = |what: &str| r.dir.path().join(format!("ran-{what}"));
        let hooks = sol.join(".git").join("evil-hooks");
        fs::create_dir_all(&hooks).unwrap();
        let hook = hooks.join("post-index-change");
        fs::write(&hook, format!("#!/bin/sh\n{}\n", touches(&marker("hook")))).unwrap();
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
        let config = sol.join(".git").join("config");
        let mut text = fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[core]\n\tfsmonitor = \"{}\"\n\thooksPath = {}\n[filter \"evil\"]\n\
             \tsmudge = \"{}\"\n\tclean = \"{}\"\n\trequired = true\n",
            touches(&marker("fsmonitor")),
            hooks.display(),
            touches(&marker("smudge")),
            touches(&marker("clean")),
        ));
        fs::write(&config, text).unwrap();
        if form == "file" {
            let elsewhere = r.dir.path().join("download").join("elsewhere.git");
            fs::rename(sol.join(".git"), &elsewhere).unwrap();
            fs::write(sol.join(".git"), "gitdir: ../elsewhere.git\n").unwrap();
        }
        // Files whose index entries are stale, so `git status` re-reads them through the
        // clean filter and refreshes (writes) the index.
        fs::write(
            sol.join("result.txt"),
            fs::read(sol.join("result.txt")).unwrap(),
        )
        .unwrap();
        fs::write(sol.join("untracked.txt"), "x").unwrap();
        let out = Command::new("git")
            .arg("-C")
            .arg(&sol)
            .args(["archive", "HEAD"])
            .output()
            .unwrap();
        assert!(
            marker("smudge").exists(),
            "control: git archive no longer runs the smudge filter: {out:?}"
        );
        fs::remove_file(marker("smudge")).unwrap();

        let ran = r.rehearse(
            &sol,
            &fixture("example/benchmark"),
            &r.busybox_cmp(),
            &["--json"],
        );
        for what in ["fsmonitor", "hook", "smudge", "clean"] {
            assert!(
                !marker(what).exists(),
                "rehearse ran the solver's {what} command (.git {form}): {}{}",
                ran.stdout,
                ran.stderr
            );
        }
        assert_eq!(ran.code, 0, ".git {form}: {}{}", ran.stdout, ran.stderr);
        let origin = &ran.json()["commit"]["trees"][1];
        assert_eq!(origin["origin"], "git", ".git {form}: {origin:#}");
        assert_eq!(origin["subdirectory"], ".", ".git {form}: {origin:#}");
    }
}

/// Issue 21 item 8: a repository git refuses (here: owned by another user, "dubious
/// ownership"; and one of a format this git cannot read) was taken for "not in a git
/// repository" and the working copy — `.git/`, untracked files and all — staged without a
/// word. Rehearsal must refuse with git's reason and name `--worktree`.
#[test]
fn a_repository_git_refuses_is_refused_with_the_reason_not_staged_as_the_working_copy() {
    let r = Rehearsal::new();
    let owned = r.dir.path().join("owned-by-another");
    let future = r.dir.path().join("future-format");
    for sol in [&owned, &future] {
        git_repository(sol, "example/source-pass");
        git_in(sol, &["add", "-A"]);
        git_in(sol, &["commit", "-q", "-m", "solution"]);
    }
    // As root, or through `sudo -n` for GitHub's runner user (test_root).
    let status = test_root::as_root("chown")
        .args(["-R", "12345:12345"])
        .arg(&owned)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "this test needs root or password-less sudo to chown"
    );
    git_in(&future, &["config", "core.repositoryformatversion", "99"]);
    let manifest = r.busybox_cmp();
    for (sol, reason) in [(&owned, "dubious ownership"), (&future, "git repo version")] {
        let rehearse = |extra: &[&str], code: i32| {
            let ran = r.rehearse(sol, &fixture("example/benchmark"), &manifest, extra);
            assert_eq!(
                ran.code,
                code,
                "{}: {}{}",
                sol.display(),
                ran.stdout,
                ran.stderr
            );
            ran
        };
        let ran = rehearse(&["--json"], 4);
        assert_contains(&ran.stderr, reason);
        assert_contains(&ran.stderr, "--worktree");
        // The working copy is still rehearsed when asked for.
        rehearse(&["--json", "--worktree"], 0);
    }
    // Back to this test's user, so an unprivileged runner can remove its temporary directory.
    if let Some((uid, gid)) = test_root::effective_ids() {
        let _ = test_root::as_root("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(&owned)
            .status();
    }
}

/// The Python bounty through a wrapper that first prints the clock: what every test runner
/// that prints its durations does to the output (and so to the response hash).
fn timed_harness(r: &Rehearsal) -> PathBuf {
    r.manifest("python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!([
            "python3",
            "-I",
            "-B",
            "-c",
            "import runpy, sys, time; print('started at', time.time_ns(), flush=True); \
             sys.argv = ['run_tests.py', '6']; runpy.run_path('/benchmark/run_tests.py', run_name='__main__')"
        ]);
    })
}

#[test]
fn repeated_runs_that_print_timings_are_reported_output_differs_with_the_first_differing_line() {
    let r = Rehearsal::new();
    let ran = r.python_bounty(
        "solution-good",
        &timed_harness(&r),
        &["--repeat", "2", "--worktree"],
        0,
    );
    let out = &ran.stdout;
    // The verdict is stable and the bounty usable: only the output bytes differ.
    assert_contains(out, "  stability               stable\n");
    assert_contains(out, "output: differs between runs\n");
    assert_contains(out, "  run 1 vs 2: stdout line 1: \"started at ");
    assert_contains(out, "what follows: settlement works");
    let json = r.python_bounty(
        "solution-good",
        &timed_harness(&r),
        &["--repeat", "2", "--worktree", "--json"],
        0,
    );
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_at(&v, "/output/status", &"differs".into());
    let line = "/output/pairs/0/lines/0";
    assert_at(&v, &format!("{line}/stream"), &"stdout".into());
    let position = serde_json::json!({"from": "start", "line": 1});
    assert_at(&v, &format!("{line}/position"), &position);
    let line = &v["output"]["pairs"][0]["lines"][0];
    assert!(
        line["first"].as_str().unwrap().starts_with("started at "),
        "{v}"
    );
}

#[test]
fn the_shipped_harness_prints_the_same_bytes_every_run() {
    let r = Rehearsal::new();
    let ran = r.python_bounty(
        "solution-good",
        &bounty_harness(&r),
        &["--repeat", "3", "--worktree", "--json"],
        0,
    );
    let v: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(v["output"]["status"], "deterministic", "{v}");
}

// --- issue 26: rehearsal that never reassures falsely ---

/// A benchmark like two live bounties' `check.py`: it runs a checker program the solution
/// itself ships (`/workspace/tools/check_card.py`) and trusts its exit status. The unsolved tree
/// has no checker yet (the run fails); the solution's checker really checks `card.json`.
fn solver_checker_bounty(r: &Rehearsal) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let root = r.dir.path();
    let benchmark = root.join("checker-benchmark");
    fs::create_dir_all(&benchmark).unwrap();
    fs::write(
        benchmark.join("check.py"),
        "import subprocess, sys\n\
         sys.exit(subprocess.run([sys.executable, '-I', '-B', \
         '/workspace/tools/check_card.py']).returncode)\n",
    )
    .unwrap();
    let unsolved = root.join("checker-unsolved");
    fs::create_dir_all(&unsolved).unwrap();
    fs::write(unsolved.join("card.json"), "{}\n").unwrap();
    let solved = root.join("checker-solved");
    write_card_checker(&solved);
    fs::write(solved.join("helper.py"), "NAME = 'agent'\n").unwrap();
    (benchmark, unsolved, solved, check_py_manifest(r))
}

/// The python image running the benchmark's `check.py`, as the live bounties' command does.
fn check_py_manifest(r: &Rehearsal) -> PathBuf {
    r.manifest("python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!(["python3", "-I", "-B", "/benchmark/check.py"]);
    })
}

#[test]
fn adversarial_on_a_failing_source_is_not_judged_never_held() {
    let r = Rehearsal::new();
    // The bounty harness holds against every stub, but the source here is the bad solution:
    // stubs built from a tree that fails prove nothing.
    let ran = r.python_bounty("solution-bad", &bounty_harness(&r), &["--adversarial"], 4);
    let out = &ran.stdout;
    assert_lacks(out, "held");
    assert_contains(
        out,
        "adversarial  not judged: the source failed the benchmark, so stubs built from it \
             prove nothing; rehearse --adversarial with a --source that passes (the solution)",
    );
    let ran = r.python_bounty(
        "solution-bad",
        &bounty_harness(&r),
        &["--adversarial", "--json"],
        4,
    );
    let adversarial = &ran.json()["adversarial"];
    assert_eq!(adversarial["bypassable"], Value::Null, "{adversarial}");
    assert!(
        adversarial["not_judged"]
            .as_str()
            .unwrap_or_default()
            .contains("--source that passes"),
        "{adversarial}"
    );
    assert!(
        adversarial["stubs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["outcome"] != "held"),
        "{adversarial}"
    );
}

#[test]
fn a_benchmark_running_a_solver_shipped_checker_is_bypassable_on_the_unsolved_tree() {
    let r = Rehearsal::new();
    let (benchmark, unsolved, _, manifest) = solver_checker_bounty(&r);
    let ran = r.rehearse(&unsolved, &benchmark, &manifest, &["--adversarial"]);
    let out = &ran.stdout;
    assert_eq!(ran.code, 9, "{out}{}", ran.stderr);
    assert_contains(
        out,
        "  BYPASSABLE: referenced_programs (passed): added tools/check_card.py\n",
    );
    assert_lacks(out, "adversarial  held");
    assert_contains(
        out,
        "problem: the benchmark runs tools/check_card.py from /workspace, a file the solver \
             controls, and trusts its exit status",
    );
    assert_contains(out, "ship the checker in the benchmark");
}

#[test]
fn bypassable_names_the_file_the_benchmark_runs_first_and_the_real_defect() {
    let r = Rehearsal::new();
    let (benchmark, unsolved, solved, manifest) = solver_checker_bounty(&r);
    let ran = r.rehearse(
        &solved,
        &benchmark,
        &manifest,
        &["--adversarial", "--base", unsolved.to_str().unwrap()],
    );
    let out = &ran.stdout;
    assert_eq!(ran.code, 9, "{out}{}", ran.stderr);
    // helper.py sorts before tools/, but the benchmark runs tools/check_card.py: it comes first.
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load (passed): replaced tools/check_card.py, helper.py\n",
    );
    assert_contains(
        out,
        "problem: the benchmark runs tools/check_card.py from /workspace",
    );
    assert_lacks(out, "run_tests.py");
    // The problem follows the stub lines it refers to.
    let list = out.find("adversarial stubs").unwrap();
    let problem = out.find("problem: the benchmark runs").unwrap();
    assert!(list < problem, "{out}");
}

/// Issue #26 item 5: the BYPASSABLE line hid the culprit among many replaced files. Here the
/// benchmark builds the checker's path at run time (no `/workspace/…` text to find), and the
/// checker sorts after ten other modules: only an experiment finds it. The rehearsal bisects the
/// replaced files over real runs, within its budget, and names the checker first.
#[test]
fn bypassable_bisects_the_replaced_files_to_the_solver_shipped_checker() {
    let r = Rehearsal::new();
    let root = r.dir.path();
    let benchmark = root.join("hidden-checker-benchmark");
    fs::create_dir_all(&benchmark).unwrap();
    fs::write(
        benchmark.join("check.py"),
        "import os, subprocess, sys\n\
         checker = os.path.join('/work' + 'space', 'tools', 'check_' + 'card.py')\n\
         sys.exit(subprocess.run([sys.executable, '-I', '-B', checker]).returncode)\n",
    )
    .unwrap();
    let solved = root.join("hidden-checker-solved");
    write_card_checker(&solved);
    for i in 0..10 {
        fs::write(solved.join(format!("mod_{i:02}.py")), "NAME = 'agent'\n").unwrap();
    }
    let manifest = check_py_manifest(&r);
    let ran = r.rehearse(&solved, &benchmark, &manifest, &["--adversarial"]);
    let out = &ran.stdout;
    println!("{out}{}", ran.stderr);
    assert_eq!(ran.code, 9, "{out}{}", ran.stderr);
    assert_contains(
        out,
        "  BYPASSABLE: exit_on_load (passed): replaced tools/check_card.py, mod_00.py, \
             mod_01.py and 8 more\n",
    );
    let culprit = out
        .lines()
        .find(|l| l.starts_with("  culprit: "))
        .unwrap_or_else(|| panic!("no culprit line: {out}"));
    assert!(
        culprit.starts_with(
            "  culprit: tools/check_card.py: replacing it alone (the other 10 replaced files \
             left out) makes the benchmark pass (found in "
        ),
        "{culprit}"
    );
    let runs: u32 = culprit
        .rsplit("found in ")
        .next()
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{culprit}"));
    assert!((1..=8).contains(&runs), "{culprit}");
    assert_contains(
        out,
        "problem: the pass hinges on tools/check_card.py, a file the solver ships: replaced \
             alone by an immediate exit 0, it makes the benchmark pass",
    );
    assert_contains(out, "ship the checker in the benchmark");

    let json = r
        .rehearse(&solved, &benchmark, &manifest, &["--adversarial", "--json"])
        .json();
    let found = &json["adversarial"]["culprit"];
    assert_eq!(found["stub"], "exit_on_load", "{found}");
    assert_eq!(
        found["files"],
        serde_json::json!(["tools/check_card.py"]),
        "{found}"
    );
    assert_eq!(found["minimal"], true, "{found}");
    assert_eq!(found["kept_files_alone_pass"], false, "{found}");
    assert_eq!(found["budget"], 8, "{found}");
    // Deterministic: the same trials in the same order, so the same count.
    assert_eq!(found["runs"], runs, "{found}");
    let trials = found["trials"].as_array().unwrap();
    assert_eq!(trials.len() as u32, runs, "{found}");
    assert_eq!(trials[0]["replaced"], serde_json::json!([]), "{found}");
    assert_eq!(trials[0]["status"], "failed", "{found}");
}

/// The words of a plain rehearsal, its exit code and the exit-code table of docs/reference.md
/// must say the same thing: exit 0 with one run, no base and no stubs is a pass whose other
/// checks were not made, and the report names each with the flag that makes it.
#[test]
fn a_plain_rehearsal_names_what_it_did_not_check_and_its_exit_code_matches_the_readme() {
    let r = Rehearsal::new();
    let ran = r.rehearse_example(&r.busybox_cmp(), &[], 0);
    let last = ran.stdout.lines().last().unwrap();
    assert_eq!(
        last,
        "ok: passed; not checked: stability (--repeat 2 or more), discrimination (--base \
         <unsolved tree>), stub solutions (--adversarial)",
        "{}",
        ran.stdout
    );
    let json = r
        .rehearse(
            &fixture("example/source-pass"),
            &fixture("example/benchmark"),
            &r.busybox_cmp(),
            &["--json"],
        )
        .json();
    let checks: Vec<&str> = json["not_checked"]
        .as_array()
        .unwrap_or_else(|| panic!("no not_checked: {json}"))
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        checks,
        ["stability", "discrimination", "adversarial"],
        "{json}"
    );
    assert_eq!(json["not_checked"][0]["flag"], "--repeat 2 or more");
    // Present and null when not asked, like `base`.
    assert_eq!(json.get("adversarial"), Some(&Value::Null), "{json}");
    assert_eq!(json.get("base"), Some(&Value::Null), "{json}");

    // Everything checked: nothing is listed.
    let full = r.rehearse_example(
        &r.busybox_cmp(),
        &[
            "--repeat",
            "2",
            "--adversarial",
            "--base",
            fixture("example/source-fail").to_str().unwrap(),
            "--json",
        ],
        0,
    );
    assert_eq!(full.json()["not_checked"], serde_json::json!([]));

    // The reference's row for exit 0 says what a plain rehearsal's 0 means.
    let readme = fs::read_to_string(workspace_root().join("docs/reference.md")).unwrap();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| 0 |"))
        .expect("docs/reference.md has an exit-code row for 0");
    assert_contains(
        row,
        "`rehearse`: the solution passed and no check that ran found a problem; \
                      the last line names each check not asked for (`not checked: …`)",
    );
}

/// A repository `name` with one commit, the unsolved `result.txt` (the example's failing
/// source), and the solution's `result.txt` written over it, not committed. Returns the
/// repository.
fn repository_with_the_solution_uncommitted(r: &Rehearsal, name: &str) -> PathBuf {
    let repo = r.dir.path().join(name);
    git_repository(&repo, "example/source-fail");
    git_in(&repo, &["add", "-A"]);
    git_in(&repo, &["commit", "-q", "-m", "unsolved"]);
    fs::copy(
        fixture("example/source-pass/result.txt"),
        repo.join("result.txt"),
    )
    .unwrap();
    repo
}

/// One repository, two commits: the unsolved `result.txt` (the example's failing source), then
/// the solution. Returns the repository.
fn solved_repository(r: &Rehearsal) -> PathBuf {
    let repo = repository_with_the_solution_uncommitted(r, "one-repo");
    git_in(&repo, &["commit", "-q", "-am", "solved"]);
    repo
}

#[test]
fn base_rev_stages_the_base_at_its_own_revision_of_one_repository() {
    let r = Rehearsal::new();
    let repo = solved_repository(&r);
    let bench = fixture("example/benchmark");
    let manifest = r.busybox_cmp();
    let repo_arg = repo.to_str().unwrap();
    // --base-rev, and the DIR@REV form: the base is the parent commit, the source HEAD.
    for base in [
        vec!["--base", repo_arg, "--base-rev", "HEAD~1"],
        vec!["--base", &*format!("{repo_arg}@HEAD~1")],
    ] {
        let ran = r.rehearse(&repo, &bench, &manifest, &base);
        assert_eq!(ran.code, 0, "{base:?}: {}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stdout.contains("ok: passed, discriminating"),
            "{base:?}: {}",
            ran.stdout
        );
    }
    // --rev X applies to the source only: X = the unsolved commit fails, base HEAD is not X.
    let ran = r.rehearse(
        &repo,
        &bench,
        &manifest,
        &["--rev", "HEAD~1", "--base", repo_arg, "--json"],
    );
    let report = ran.json();
    assert_ne!(
        report["commit"]["source_snapshot_digest"], report["commit"]["base_snapshot_digest"],
        "{report:#}"
    );
    // An explicit --rev is what the author asked for: no advice to commit the working tree.
    let ran = r.rehearse(&repo, &bench, &manifest, &["--rev", "HEAD~1"]);
    assert_lacks(&ran.stdout, "commit it");
    assert_contains(&ran.stdout, "(--rev HEAD~1, not the working tree)");
}

#[test]
fn a_base_that_is_the_same_tree_as_the_source_is_named_not_blamed_on_the_benchmark() {
    let r = Rehearsal::new();
    let repo = solved_repository(&r);
    let ran = r.rehearse(
        &repo,
        &fixture("example/benchmark"),
        &r.busybox_cmp(),
        &["--base", repo.to_str().unwrap()],
    );
    let out = &ran.stdout;
    assert_eq!(ran.code, 4, "{out}{}", ran.stderr);
    assert_lacks(out, "does not test the change");
    assert_contains(
        out,
        "problem: base and source are the same tree (sha256:a1a2e7e0e6a698d862c0820310b86655104e5866a45ef62b383ead4c5a3c5249): \
             nothing was compared; pass the unsolved revision with --base-rev REV or --base DIR@REV",
    );
}

#[test]
fn uncommitted_work_is_warned_about_again_under_the_verdict() {
    let r = Rehearsal::new();
    // The solver's fix, written but not committed: the staged commit still fails.
    let repo = repository_with_the_solution_uncommitted(&r, "solver-repo");
    let ran = r.rehearse(&repo, &fixture("example/benchmark"), &r.busybox_cmp(), &[]);
    let out = &ran.stdout;
    assert_eq!(ran.code, 4, "{out}{}", ran.stderr);
    let verdict = out.find("verdict  failed").unwrap();
    let below = &out[verdict..];
    assert!(
        below.contains(
            "warning: the source's working tree differs from the staged commit: what ran is the \
             commit, not the files on disk (changed: result.txt); commit them, or pass --worktree"
        ),
        "{out}"
    );
}

/// The live platform's own command is `python`; Debian images have only `python3`. The
/// start-failed explanation says what the image has.
#[test]
fn a_missing_python_says_python3_is_on_the_images_path() {
    let r = Rehearsal::new();
    let manifest = r.manifest("python-unittest.json", "python", |m| {
        m["command"] = serde_json::json!(["python", "/benchmark/run_tests.py", "6"]);
    });
    let ran = r.python_bounty("solution-good", &manifest, &["--json"], 3);
    let run = &ran.json()["runs"][0];
    assert_eq!(run["reason"], "start_failed", "{run}");
    let headline = run["headline"].as_str().unwrap();
    assert_contains(
        headline,
        "executable python not found in the image; python3 is on its PATH \
             (/usr/bin/python3): name it in the manifest's command",
    );
}

/// Small words that misled: a passing stub's progress line said `passed` (it means
/// BYPASSABLE), stub log files were `rehearse-stub-N` without the stub's name, and a
/// `benchmark_digest` checked against the manifest was not marked as such.
#[test]
fn stub_progress_and_logs_name_the_stub_and_a_checked_digest_says_it_matches() {
    let r = Rehearsal::new();
    let logs = r.dir.path().join("stub-logs");
    let shown = r.on_a_terminal(
        &fixture("python-bounty/solution-good"),
        &fixture("python-bounty/benchmark"),
        &bare_unittest(&r),
        &["--adversarial", "--log-dir", logs.to_str().unwrap()],
    );
    assert_contains(&shown, "rehearse: stub exit_on_load: BYPASSABLE (passed");
    assert_contains(&shown, "rehearse: stub empty_tree: held (failed");
    for name in [
        "rehearse-stub-0-exit_on_load.stdout",
        "rehearse-stub-1-exit_on_load_keep_text.stdout",
        "rehearse-stub-2-referenced_programs.stdout",
        "rehearse-stub-3-fail_on_load_keep_text.stdout",
        "rehearse-stub-4-shadow-unittest.py.stdout",
        "rehearse-stub-10-empty_tree.evidence.json",
    ] {
        assert!(
            logs.join(name).is_file(),
            "{name} in {:?}",
            fs::read_dir(&logs).unwrap().collect::<Vec<_>>()
        );
    }

    let right = r.manifest("busybox-cmp.json", "busybox", |m| {
        m["benchmark_digest"] = EXAMPLE_BENCHMARK_DIGEST.into();
    });
    let ran = r.rehearse_example(&right, &[], 0);
    assert_contains(
        &ran.stdout,
        &format!("benchmark_digest        {EXAMPLE_BENCHMARK_DIGEST}  (matches the manifest)\n"),
    );
}

/// A run too short for the memory reading used to show no memory line at all; every run that
/// started now has one, measured or saying it was not.
#[test]
fn every_started_run_has_a_peak_memory_line_measured_or_not() {
    let r = Rehearsal::new();
    let ran = r.rehearse_example(&r.busybox_cmp(), &["--repeat", "6", "--json"], 0);
    for run in ran.json()["runs"].as_array().unwrap() {
        let details = run["details"].as_array().unwrap();
        assert!(
            details
                .iter()
                .any(|d| d.as_str().unwrap().starts_with("peak memory ")),
            "{run}"
        );
    }
}

#[test]
fn a_grown_rehearsal_store_gets_a_note_naming_worker_gc() {
    let r = Rehearsal::new();
    let staging = r.dir.path().join("staging");
    fs::create_dir_all(&staging).unwrap();
    // 250 MiB of apparent size without writing it (a sparse file).
    let junk = fs::File::create(staging.join("old-trees")).unwrap();
    junk.set_len(250 << 20).unwrap();
    let ran = r.rehearse_example(&r.busybox_cmp(), &[], 0);
    assert_contains(
        &ran.stderr,
        &format!(
            "note: the rehearsal store {} holds 250 MiB",
            staging.display()
        ),
    );
    assert_contains(&ran.stderr, "--older-than 7d");
}
