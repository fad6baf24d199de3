//! `cargo xtask boundaries`: ARCHITECTURE.md's dependency table and the libraries' exit rule
//! checked against `cargo metadata` and the sources (`boundaries`); CI runs it.
//!
//! `cargo xtask man [--check]`: writes the man pages of `worker`, `signer` and `keeper` (one page per
//! command and subcommand, `docs/man/<binary>[-<subcommand>].1`) from their clap definitions,
//! so the pages cannot drift from `--help`. `--check` regenerates them in memory and fails when
//! any page differs from, is missing from, or is extra in the checked-in directory (CI runs it).
//!
//! The pages carry the package version only, not the git revision `--version` prints, so an
//! unchanged command line gives byte-identical pages at every commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;

mod boundaries;

const USAGE: &str = "usage: cargo xtask man [--check] | cargo xtask boundaries";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args == ["boundaries"] {
        return check_boundaries();
    }
    let check = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["man"] => false,
        ["man", "--check"] => true,
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/man");
    let pages = match pages() {
        Ok(pages) => pages,
        Err(e) => {
            eprintln!("xtask: rendering the man pages: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if check {
        check_pages(&dir, &pages)
    } else {
        write_pages(&dir, &pages)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check_boundaries() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    match boundaries::run(&root) {
        Ok(violations) if violations.is_empty() => {
            println!(
                "boundaries: every crate keeps ARCHITECTURE.md's dependency table and no library names an exit"
            );
            ExitCode::SUCCESS
        }
        Ok(violations) => {
            for violation in &violations {
                eprintln!("xtask boundaries: {violation}");
            }
            eprintln!(
                "xtask boundaries: {} broken rule(s); the rules are ARCHITECTURE.md \"The worker's crates\"",
                violations.len()
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask boundaries: {e}");
            ExitCode::FAILURE
        }
    }
}

/// File name → page bytes for every command and subcommand of the three binaries.
fn pages() -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let mut pages = BTreeMap::new();
    let version = env!("CARGO_PKG_VERSION");
    for command in [
        worker::cli::Cli::command().version(version),
        signer::Cli::command().version(version),
        keeper::cli::Cli::command().version(version),
    ] {
        render(command, &mut pages)?;
    }
    Ok(pages)
}

fn render(command: clap::Command, pages: &mut BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    let mut command = command;
    command.build();
    let name = command.get_name().to_owned();
    let mut bytes = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut bytes)?;
    pages.insert(format!("{name}.1"), bytes);
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        // clap takes `&'static str` names without its `string` feature; a chore binary that
        // renders a handful of pages and exits can leak them.
        let full: &'static str = Box::leak(format!("{name}-{}", sub.get_name()).into_boxed_str());
        let sub = sub.clone().name(full).version(env!("CARGO_PKG_VERSION"));
        let mut bytes = Vec::new();
        clap_mangen::Man::new(sub).render(&mut bytes)?;
        pages.insert(format!("{full}.1"), bytes);
    }
    Ok(())
}

fn write_pages(dir: &Path, pages: &BTreeMap<String, Vec<u8>>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for stale in existing(dir)?.difference(&pages.keys().cloned().collect()) {
        std::fs::remove_file(dir.join(stale)).map_err(|e| format!("{stale}: {e}"))?;
    }
    for (name, bytes) in pages {
        std::fs::write(dir.join(name), bytes).map_err(|e| format!("{name}: {e}"))?;
        println!("wrote docs/man/{name}");
    }
    Ok(())
}

fn check_pages(dir: &Path, pages: &BTreeMap<String, Vec<u8>>) -> Result<(), String> {
    let mut problems = Vec::new();
    for extra in existing(dir)?.difference(&pages.keys().cloned().collect()) {
        problems.push(format!("docs/man/{extra} is not generated by any command"));
    }
    for (name, bytes) in pages {
        match std::fs::read(dir.join(name)) {
            Ok(found) if &found == bytes => {}
            Ok(_) => problems.push(format!("docs/man/{name} differs from the clap definition")),
            Err(e) => problems.push(format!("docs/man/{name}: {e}")),
        }
    }
    if problems.is_empty() {
        println!("docs/man: {} pages match the clap definitions", pages.len());
        Ok(())
    } else {
        Err(format!(
            "{}\nrun `cargo xtask man` and commit docs/man",
            problems.join("\n")
        ))
    }
}

fn existing(dir: &Path) -> Result<std::collections::BTreeSet<String>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    Ok(entries
        .flatten()
        .map(|e| PathBuf::from(e.file_name()))
        .filter_map(|p| p.to_str().map(str::to_owned))
        .filter(|name| name.ends_with(".1"))
        .collect())
}
