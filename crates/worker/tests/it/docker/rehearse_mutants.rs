//! `worker rehearse --mutants` (#42 item 4) through the real binary on the real Docker daemon:
//! a benchmark that never exercises the solution's change lets its mutants survive, one that
//! tests it kills them. The expected figures follow from the fixture, worked out below, not
//! from a lucky run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (clippy.toml)

use std::fs;
use std::path::PathBuf;

use super::ran::{Ran, manifest, ran, rehearse_command};
use super::rehearse_support::assert_contains;
use serde_json::Value;

/// The unsolved tree: `is_adult` always answers `False`.
const BASE: &str = "def is_adult(age):\n    return False\n";
/// The solution. Against the base, the changed lines are 2, 3 and 5 to 8 (`return False` is
/// kept), and the mutators make exactly seven mutants of them:
///   line 2 `if age >= 18:`     — boundary (`age > 18`); a block opener is never deleted;
///   line 3 `return True`       — drop_return (`pass`), empty_return (`return None`),
///                                swap_boolean (`return False`);
///   line 8 `return age >= 65`  — drop_return (`pass`, which is also the deleted line),
///                                empty_return, boundary (`age > 65`).
/// Each of the seven changes the answer for 18 or for 65; those of line 3 also that for 40.
const SOLUTION: &str = "def is_adult(age):\n    if age >= 18:\n        return True\n    return False\n\
                        \n\ndef is_senior(age):\n    return age >= 65\n";
const MUTANTS: u64 = 7;
/// Asks about a child and a grown-up only: it fails on the base (the solution is needed) and
/// kills the three mutants of `return True`; the boundary of line 2 and the three mutants of
/// `is_senior`, never called, survive: 3 of 7 killed, a score of 42 % (rounded down).
const WEAK: &str = "import sys\nsys.path.append('/workspace')\nimport adult\n\
                    assert adult.is_adult(10) is False\nassert adult.is_adult(40) is True\n\
                    print('2 checks passed')\n";
/// Asks at the boundary and on both sides of it: every mutant fails one check.
const STRONG: &str = "import sys\nsys.path.append('/workspace')\nimport adult\n\
                      assert adult.is_adult(10) is False\nassert adult.is_adult(17) is False\n\
                      assert adult.is_adult(18) is True\nassert adult.is_adult(40) is True\n\
                      assert adult.is_senior(64) is False\nassert adult.is_senior(65) is True\n\
                      print('6 checks passed')\n";

struct Bounty {
    dir: tempfile::TempDir,
}

impl Bounty {
    fn new() -> Self {
        let bounty = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        bounty.tree("base", "adult.py", BASE);
        bounty.tree("solution", "adult.py", SOLUTION);
        bounty.tree("weak", "check.py", WEAK);
        bounty.tree("strong", "check.py", STRONG);
        bounty
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn tree(&self, name: &str, file: &str, body: &str) {
        fs::create_dir(self.path(name)).unwrap();
        fs::write(self.path(name).join(file), body).unwrap();
    }

    fn manifest(&self) -> PathBuf {
        manifest(self.dir.path(), "python-unittest.json", "python", |m| {
            m["command"] = serde_json::json!(["python3", "-I", "-B", "/benchmark/check.py"]);
        })
    }

    fn rehearse(&self, benchmark: &str, extra: &[&str]) -> Ran {
        let store = self.path("staging");
        let mut args = vec!["--worktree", "--quiet"];
        args.extend_from_slice(extra);
        let output = rehearse_command(
            &store,
            &self.path("solution"),
            &self.path(benchmark),
            &self.manifest(),
            &args,
        )
        .output()
        .unwrap();
        ran(&output)
    }
}

fn base_args(bounty: &Bounty) -> Vec<String> {
    vec![
        "--base".into(),
        bounty.path("base").display().to_string(),
        "--mutants".into(),
        "20".into(),
    ]
}

fn mutants_json(bounty: &Bounty, benchmark: &str) -> Value {
    let args = base_args(bounty);
    let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
    extra.push("--json");
    let ran = bounty.rehearse(benchmark, &extra);
    // A weak score is a warning: the answer (and exit code) is the rehearsal's own.
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let report = ran.json();
    assert_eq!(report["answer"], "fit", "{report}");
    report["mutants"].clone()
}

#[test]
fn a_weak_benchmark_lets_the_mutants_of_the_solution_survive() {
    let bounty = Bounty::new();
    let m = mutants_json(&bounty, "weak");
    assert_eq!(m["candidates"], MUTANTS, "{m}");
    assert_eq!(m["mutants"].as_array().unwrap().len() as u64, MUTANTS);
    assert_eq!(m["seed"], 42);
    assert_eq!(m["killed"], 3, "{m}");
    assert_eq!(m["survived"], MUTANTS - 3, "{m}");
    assert_eq!(m["score_percent"], 42, "{m}");
    assert_eq!(m["weak"], true);
    let fates: Vec<(u64, &str, &str)> = m["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let diff = x["diff"].as_str().unwrap();
            assert!(
                diff.starts_with("--- a/adult.py\n+++ b/adult.py\n@@ -"),
                "{diff}"
            );
            let line = x["line"].as_u64().unwrap();
            (
                line,
                diff.lines().last().unwrap(),
                x["fate"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        fates,
        [
            (2, "+    if age > 18:", "survived"),
            (3, "+        pass", "killed"),
            (3, "+        return None", "killed"),
            (3, "+        return False", "killed"),
            (8, "+    pass", "survived"),
            (8, "+    return None", "survived"),
            (8, "+    return age > 65", "survived"),
        ]
    );

    // The human report names the weakness last in its block and shows each survivor's diff.
    let args = base_args(&bounty);
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = bounty.rehearse("weak", &extra);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert_contains(
        &text.stdout,
        "mutants  WEAK: the benchmark kills 3 of 7 mutants (42 %, under 50 %",
    );
    assert_contains(
        &text.stdout,
        "  SURVIVED: adult.py:2 boundary\n    --- a/adult.py\n    +++ b/adult.py\n    \
             @@ -2 +2 @@\n    -    if age >= 18:\n    +    if age > 18:\n",
    );
}

#[test]
fn a_strong_benchmark_kills_every_mutant_of_the_solution() {
    let bounty = Bounty::new();
    let m = mutants_json(&bounty, "strong");
    assert_eq!(m["candidates"], MUTANTS, "{m}");
    // Each mutant changes is_adult(18) or is_senior(65), which the strong check asserts.
    assert_eq!(m["killed"], MUTANTS, "{m}");
    assert_eq!(m["survived"], 0, "{m}");
    assert_eq!(m["did_not_build"], 0, "{m}");
    assert_eq!(m["score_percent"], 100, "{m}");
    assert_eq!(m["weak"], false);
}

#[test]
fn fewer_mutants_than_candidates_are_picked_by_the_seed_reproducibly() {
    let bounty = Bounty::new();
    let picked = |seed: &str| {
        let base = bounty.path("base").display().to_string();
        let ran = bounty.rehearse(
            "strong",
            &[
                "--base",
                &base,
                "--mutants",
                "2",
                "--mutants-seed",
                seed,
                "--json",
            ],
        );
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let m = ran.json()["mutants"].clone();
        assert_eq!(m["seed"].to_string(), seed);
        m["mutants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["diff"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let first = picked("7");
    assert_eq!(first.len(), 2);
    assert_eq!(first, picked("7"));
}

#[test]
fn mutants_need_a_base_to_know_the_changed_lines() {
    let bounty = Bounty::new();
    let ran = bounty.rehearse("weak", &["--mutants", "5"]);
    assert_eq!(ran.code, 2, "{}{}", ran.stdout, ran.stderr);
    // Refused for the missing base, not as an unknown argument (which is also exit 2).
    assert_contains(
        &ran.stderr,
        "the following required arguments were not provided:\n  --base <BASE>",
    );
}
