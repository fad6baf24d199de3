//! The check over throwaway workspaces whose graph comes from a real `cargo metadata` (path
//! dependencies only, offline), and over this repository's own table.

use std::path::Path;

use super::*;

const HEADER: &str = "## The worker's crates\n\n\
                      | crate | may depend on | must never depend on |\n\
                      |---|---|---|\n";

fn table(rows: &str) -> String {
    format!("# Architecture\n\n{HEADER}{rows}\nProse after the table.\n")
}

/// A workspace of `(name, kind, normal deps, dev deps)` crates; `kind` is "lib" or "bin".
fn workspace(dir: &Path, crates: &[(&str, &str, &[&str], &[&str])]) {
    let members: Vec<String> = crates.iter().map(|(n, ..)| format!("\"{n}\"")).collect();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[workspace]\nresolver = \"2\"\nmembers = [{}]\n",
            members.join(", ")
        ),
    )
    .unwrap();
    for (name, kind, deps, dev) in crates {
        let src = dir.join(name).join("src");
        std::fs::create_dir_all(&src).unwrap();
        let dep_lines = |deps: &[&str]| {
            deps.iter()
                .map(|d| format!("{d} = {{ path = \"../{d}\" }}\n"))
                .collect::<String>()
        };
        std::fs::write(
            dir.join(name).join("Cargo.toml"),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\n{}\n[dev-dependencies]\n{}",
                dep_lines(deps),
                dep_lines(dev)
            ),
        )
        .unwrap();
        let file = if *kind == "bin" { "main.rs" } else { "lib.rs" };
        std::fs::write(src.join(file), "fn main() {}\n").unwrap();
    }
}

fn violations(architecture: &str, crates: &[(&str, &str, &[&str], &[&str])]) -> Vec<Violation> {
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path(), crates);
    let rules = parse_rules(architecture).unwrap();
    let metadata = metadata(&dir.path().join("Cargo.toml"), true).unwrap();
    check(&rules, &metadata).unwrap()
}

fn dependency(krate: &str, forbidden: &str, path: &[&str]) -> Violation {
    Violation::Dependency {
        krate: krate.into(),
        forbidden: forbidden.into(),
        path: path.iter().map(|s| s.to_string()).collect(),
    }
}

const WORKER_ROWS: &str = "\
| every library crate | — | bollard, clap, rusqlite |\n\
| `worker-docker` | `worker-sandbox`, bollard | `worker-jobs`, clap |\n\
| `worker-jobs` | `worker-sandbox` | bollard, `worker-docker`, clap |\n\
| `worker-sandbox` | — | bollard (or any engine client), `worker-docker` |\n";

#[test]
fn a_library_reaching_bollard_through_the_engine_crate_is_refused() {
    let found = violations(
        &table(WORKER_ROWS),
        &[
            ("bollard", "lib", &[], &[]),
            ("worker-sandbox", "lib", &[], &[]),
            ("worker-docker", "lib", &["bollard", "worker-sandbox"], &[]),
            (
                "worker-jobs",
                "lib",
                &["worker-sandbox", "worker-docker"],
                &[],
            ),
            ("clap", "lib", &[], &[]),
            ("rusqlite", "lib", &[], &[]),
        ],
    );
    assert_eq!(
        found,
        [
            dependency(
                "worker-jobs",
                "bollard",
                &["worker-jobs", "worker-docker", "bollard"]
            ),
            dependency(
                "worker-jobs",
                "worker-docker",
                &["worker-jobs", "worker-docker"]
            ),
        ]
    );
}

#[test]
fn every_library_row_forbids_clap_and_rusqlite_to_a_crate_without_a_row() {
    let found = violations(
        &table(WORKER_ROWS),
        &[
            ("bollard", "lib", &[], &[]),
            ("worker-sandbox", "lib", &[], &[]),
            ("worker-docker", "lib", &[], &[]),
            ("worker-jobs", "lib", &[], &[]),
            ("clap", "lib", &[], &[]),
            ("rusqlite", "lib", &[], &[]),
            ("verifier-sdk", "lib", &["clap", "rusqlite"], &[]),
        ],
    );
    assert_eq!(
        found,
        [
            dependency("verifier-sdk", "clap", &["verifier-sdk", "clap"]),
            dependency("verifier-sdk", "rusqlite", &["verifier-sdk", "rusqlite"]),
        ]
    );
}

#[test]
fn a_binary_may_reach_clap_and_bollard_and_a_dev_dependency_is_not_followed() {
    let found = violations(
        &table(WORKER_ROWS),
        &[
            ("bollard", "lib", &[], &[]),
            ("worker-sandbox", "lib", &[], &["bollard"]),
            ("worker-docker", "lib", &["bollard"], &[]),
            ("worker-jobs", "lib", &[], &["worker-docker", "clap"]),
            ("clap", "lib", &[], &[]),
            ("rusqlite", "lib", &[], &[]),
            ("worker", "bin", &["clap", "worker-docker", "rusqlite"], &[]),
        ],
    );
    assert_eq!(found, []);
}

#[test]
fn a_row_naming_no_package_of_the_graph_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path(), &[("worker-jobs", "lib", &[], &[])]);
    let rules = parse_rules(&table(
        "| every library crate | — | bolard |\n| `worker-jobs` | — | — |\n",
    ))
    .unwrap();
    let metadata = metadata(&dir.path().join("Cargo.toml"), true).unwrap();
    let error = check(&rules, &metadata).unwrap_err();
    assert!(
        matches!(&error, BoundaryError::UnknownPackage(name) if name == "bolard"),
        "{error}"
    );
}

#[test]
fn prose_in_a_rule_cell_is_refused_instead_of_matching_nothing() {
    let error = parse_rules(&table(
        "| every library crate | — | clap |\n| `worker-store` | — | tokio, an engine |\n",
    ))
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`an engine` is not a package name"),
        "{error}"
    );
}

#[test]
fn a_table_without_the_every_library_row_is_refused() {
    let error = parse_rules(&table("| `worker-store` | — | tokio |\n")).unwrap_err();
    assert!(
        error.to_string().contains("no row \"every library crate\""),
        "{error}"
    );
}

#[test]
fn process_exit_in_a_library_is_refused_but_not_in_a_literal_or_comment() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("nested")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "//! std::process::exit(1) in a doc comment\n\
         /* process::abort() /* nested */ still a comment */\n\
         pub fn stub(code: i32) -> String {\n\
         \x20   let _c = '\\'';\n\
         \x20   let _raw = r#\"std::process::exit(2) \"quoted\" \"#;\n\
         \x20   format!(\"std::process::exit({code})\\n\")\n\
         }\n\
         fn _lifetime<'a>(s: &'a str) -> &'a str { s }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("nested/exit.rs"),
        "use std::process::{self, ExitCode as Code};\n\
         pub fn quit() -> ! {\n\
         \x20   std::process\n\
         \x20       ::exit(3)\n\
         }\n",
    )
    .unwrap();
    let found = source::exits("worker-jobs", &src).unwrap();
    let file = src.join("nested/exit.rs");
    assert_eq!(
        found,
        [
            Violation::Exit {
                krate: "worker-jobs".into(),
                file: file.clone(),
                line: 1,
                found: "process::ExitCode",
            },
            Violation::Exit {
                krate: "worker-jobs".into(),
                file,
                line: 3,
                found: "process::exit",
            },
        ]
    );
}

#[test]
fn this_repository_states_the_rules_the_check_reads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let rules = parse_rules(&architecture).unwrap();
    let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // Issue #48's three at least; the table may forbid more to every library.
    assert!(
        rules
            .every_library
            .is_superset(&set(&["bollard", "clap", "rusqlite"])),
        "{:?}",
        rules.every_library
    );
    let docker = rules.crates.get("worker-docker").unwrap();
    assert!(docker.may.contains("bollard"));
    let serve = rules.crates.get("worker-serve").unwrap();
    assert!(serve.may.contains("rusqlite"));
    assert!(serve.never.contains("worker-docker"));
}
