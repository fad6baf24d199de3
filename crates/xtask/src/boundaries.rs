//! `cargo xtask boundaries`: the dependency rules of ARCHITECTURE.md "The worker's crates",
//! checked against `cargo metadata` instead of trusted as prose (issue #48 item 4).
//!
//! The rules are read from that one table, so the document and the check cannot disagree: a
//! row's "must never depend on" names packages the crate must not reach through normal
//! dependencies, directly or through any other crate (build and dev dependencies are not shipped
//! and are not followed); the row "every library crate" names packages no library-only crate
//! (a package without a binary target) may reach unless its own row's "may depend on" names
//! them. Every name in the table must be a package of the graph, so a renamed or misspelt crate
//! fails the check instead of silently matching nothing.
//!
//! Library-only crates also never end the process or name an exit code (`process::exit`,
//! `process::abort`, `process::ExitCode`): only a binary maps results to exit codes. That part
//! reads the sources with comments and literals blanked (`source`), so a program text a library
//! writes for a container is not a call.
//!
//! It decides nothing about features: `cargo metadata` resolves the whole workspace with its
//! features unified, which can only add edges, so the check errs towards refusing.

mod source;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The heading whose first table holds the rules.
const SECTION: &str = "## The worker's crates";
/// The first cell of the row whose "must never depend on" applies to every library-only crate.
const EVERY_LIBRARY: &str = "every library crate";

/// Why the check could not be made (as opposed to a broken rule, which is a [`Violation`]).
#[derive(Debug, thiserror::Error)]
pub enum BoundaryError {
    /// ARCHITECTURE.md has no such section or its table is not in the expected shape.
    #[error("ARCHITECTURE.md: {0}")]
    Table(String),
    /// The table names a package that the dependency graph does not hold.
    #[error("ARCHITECTURE.md \"{SECTION}\" names `{0}`, which is no package of `cargo metadata`")]
    UnknownPackage(String),
    /// `cargo metadata` could not be run or did not exit successfully.
    #[error("cargo metadata: {0}")]
    Metadata(String),
    /// Its output is not the JSON this check reads.
    #[error("cargo metadata output: {0}")]
    MetadataJson(#[from] serde_json::Error),
    /// A source file of a library could not be read.
    #[error("{path}: {source}")]
    Source {
        /// The file or directory.
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// `krate` reaches `forbidden` through normal dependencies along `path` (crate first).
    Dependency {
        /// The crate whose rule is broken.
        krate: String,
        /// The package it must not reach.
        forbidden: String,
        /// The chain of packages from `krate` to `forbidden`.
        path: Vec<String>,
    },
    /// A library-only crate ends the process or names an exit code.
    Exit {
        /// The crate.
        krate: String,
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// What was found.
        found: &'static str,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Dependency {
                krate,
                forbidden,
                path,
            } => write!(
                f,
                "{krate} must never depend on {forbidden}, but reaches it: {}",
                path.join(" -> ")
            ),
            Violation::Exit {
                krate,
                file,
                line,
                found,
            } => write!(
                f,
                "{krate} is a library and must not name an exit: `{found}` at {}:{line}",
                file.display()
            ),
        }
    }
}

/// One row of the table.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Packages named in "may depend on" (only an exemption from the every-library row).
    pub may: BTreeSet<String>,
    /// Packages named in "must never depend on".
    pub never: BTreeSet<String>,
}

/// The table: one rule per crate, and the rule for every library-only crate.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Rows by crate name.
    pub crates: BTreeMap<String, Rule>,
    /// "must never depend on" of the every-library row.
    pub every_library: BTreeSet<String>,
}

/// Reads the rules from ARCHITECTURE.md's text.
pub fn parse_rules(architecture: &str) -> Result<Rules, BoundaryError> {
    let mut lines = architecture.lines();
    if !lines.any(|l| l.trim_end() == SECTION) {
        return Err(BoundaryError::Table(format!("no section \"{SECTION}\"")));
    }
    let table: Vec<&str> = lines
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let [header, separator, rows @ ..] = table.as_slice() else {
        return Err(BoundaryError::Table(format!(
            "no table under \"{SECTION}\""
        )));
    };
    if cells(header) != ["crate", "may depend on", "must never depend on"]
        || !cells(separator).iter().all(|c| c.starts_with("---"))
    {
        return Err(BoundaryError::Table(format!(
            "the table under \"{SECTION}\" must have the columns crate | may depend on | must never depend on, found {header}"
        )));
    }
    let mut rules = Rules::default();
    let mut every_library = None;
    for row in rows {
        let [krate, may, never] = cells(row)[..] else {
            return Err(BoundaryError::Table(format!("not three cells: {row}")));
        };
        if krate == EVERY_LIBRARY {
            if every_library.replace(names(never, row)?).is_some() {
                return Err(BoundaryError::Table(format!(
                    "two rows \"{EVERY_LIBRARY}\""
                )));
            }
            continue;
        }
        let name = single_name(krate, row)?;
        let rule = Rule {
            may: names(may, row)?,
            never: names(never, row)?,
        };
        if rules.crates.insert(name.clone(), rule).is_some() {
            return Err(BoundaryError::Table(format!("two rows for `{name}`")));
        }
    }
    rules.every_library =
        every_library.ok_or_else(|| BoundaryError::Table(format!("no row \"{EVERY_LIBRARY}\"")))?;
    Ok(rules)
}

fn cells(row: &str) -> Vec<&str> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(str::trim).collect()
}

/// A cell's package names: comma-separated, each a bare or backticked package name, with
/// parenthesised remarks dropped; "—" is none. Anything else is refused so that prose cannot
/// slip into a rule and match nothing.
fn names(cell: &str, row: &str) -> Result<BTreeSet<String>, BoundaryError> {
    let cell = without_remarks(cell);
    let cell = cell.trim();
    if cell == "—" {
        return Ok(BTreeSet::new());
    }
    cell.split(',')
        .map(|token| package_name(token, row))
        .collect()
}

fn single_name(cell: &str, row: &str) -> Result<String, BoundaryError> {
    package_name(&without_remarks(cell), row)
}

fn package_name(token: &str, row: &str) -> Result<String, BoundaryError> {
    let token = token.trim();
    let bare = token
        .strip_prefix('`')
        .and_then(|t| t.strip_suffix('`'))
        .unwrap_or(token);
    let valid = !bare.is_empty()
        && bare
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(bare.to_owned())
    } else {
        Err(BoundaryError::Table(format!(
            "`{token}` is not a package name (write prose below the table): {row}"
        )))
    }
}

fn without_remarks(cell: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in cell.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The part of `cargo metadata --format-version 1` this check reads.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
    resolve: Option<Resolve>,
}

#[derive(Debug, Deserialize)]
struct Package {
    id: String,
    name: String,
    manifest_path: PathBuf,
    targets: Vec<Target>,
}

#[derive(Debug, Deserialize)]
struct Target {
    kind: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    id: String,
    deps: Vec<NodeDep>,
}

#[derive(Debug, Deserialize)]
struct NodeDep {
    pkg: String,
    dep_kinds: Vec<DepKind>,
}

#[derive(Debug, Deserialize)]
struct DepKind {
    /// `null` for a normal dependency, `"dev"` or `"build"` otherwise.
    kind: Option<String>,
}

impl Package {
    fn is_library_only(&self) -> bool {
        !self
            .targets
            .iter()
            .any(|t| t.kind.iter().any(|k| k == "bin"))
    }
}

/// Runs `cargo metadata` on the workspace of `manifest_path` (`offline` for a graph of path
/// dependencies only, as the tests build).
pub fn metadata(manifest_path: &Path, offline: bool) -> Result<Metadata, BoundaryError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest_path);
    if offline {
        command.arg("--offline");
    }
    let output = command
        .output()
        .map_err(|e| BoundaryError::Metadata(e.to_string()))?;
    if !output.status.success() {
        return Err(BoundaryError::Metadata(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Every broken rule of `rules` in `metadata`'s graph and the library sources it points to.
pub fn check(rules: &Rules, metadata: &Metadata) -> Result<Vec<Violation>, BoundaryError> {
    let by_id: BTreeMap<&str, &Package> = metadata
        .packages
        .iter()
        .map(|p| (p.id.as_str(), p))
        .collect();
    let known: BTreeSet<&str> = metadata.packages.iter().map(|p| p.name.as_str()).collect();
    let named = rules
        .crates
        .iter()
        .flat_map(|(krate, rule)| std::iter::once(krate).chain(&rule.may).chain(&rule.never))
        .chain(&rules.every_library);
    for name in named {
        if !known.contains(name.as_str()) {
            return Err(BoundaryError::UnknownPackage(name.clone()));
        }
    }
    let resolve = metadata
        .resolve
        .as_ref()
        .ok_or_else(|| BoundaryError::Metadata("no resolve graph (--no-deps?)".into()))?;
    let normal: BTreeMap<&str, Vec<&str>> = resolve
        .nodes
        .iter()
        .map(|n| {
            let deps = n
                .deps
                .iter()
                .filter(|d| d.dep_kinds.iter().any(|k| k.kind.is_none()))
                .map(|d| d.pkg.as_str())
                .collect();
            (n.id.as_str(), deps)
        })
        .collect();

    let mut violations = Vec::new();
    for member in &metadata.workspace_members {
        let Some(package) = by_id.get(member.as_str()) else {
            return Err(BoundaryError::Metadata(format!(
                "workspace member {member} is not among the packages"
            )));
        };
        let rule = rules.crates.get(&package.name);
        let mut forbidden: BTreeSet<&str> = BTreeSet::new();
        if package.is_library_only() {
            let may = rule.map(|r| &r.may);
            forbidden.extend(
                rules
                    .every_library
                    .iter()
                    .filter(|n| !may.is_some_and(|may| may.contains(*n)))
                    .map(String::as_str),
            );
        }
        if let Some(rule) = rule {
            forbidden.extend(rule.never.iter().map(String::as_str));
        }
        for (name, path) in reachable(member, &normal, &by_id) {
            if forbidden.contains(name.as_str()) {
                violations.push(Violation::Dependency {
                    krate: package.name.clone(),
                    forbidden: name,
                    path,
                });
            }
        }
        if package.is_library_only() {
            let dir = package
                .manifest_path
                .parent()
                .map(|p| p.join("src"))
                .unwrap_or_default();
            violations.extend(source::exits(&package.name, &dir)?);
        }
    }
    Ok(violations)
}

/// Every package `from` reaches through normal dependencies, each with one shortest chain of
/// names leading to it.
fn reachable(
    from: &str,
    normal: &BTreeMap<&str, Vec<&str>>,
    by_id: &BTreeMap<&str, &Package>,
) -> BTreeMap<String, Vec<String>> {
    let name = |id: &str| {
        by_id
            .get(id)
            .map_or_else(|| id.to_owned(), |p| p.name.clone())
    };
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    let mut seen = BTreeSet::from([from]);
    while let Some(id) = queue.pop_front() {
        for &dep in normal.get(id).into_iter().flatten() {
            if seen.insert(dep) {
                parent.insert(dep, id);
                queue.push_back(dep);
            }
        }
    }
    let mut out = BTreeMap::new();
    for &id in parent.keys() {
        let mut chain = vec![name(id)];
        let mut at = id;
        while let Some(&up) = parent.get(at) {
            chain.push(name(up));
            at = up;
        }
        chain.reverse();
        // Two versions of one package keep the first chain found; either proves the edge.
        out.entry(name(id)).or_insert(chain);
    }
    out
}

/// `cargo xtask boundaries`: the check over this repository, its violations printed.
pub fn run(root: &Path) -> Result<Vec<Violation>, BoundaryError> {
    let path = root.join("ARCHITECTURE.md");
    let architecture =
        std::fs::read_to_string(&path).map_err(|source| BoundaryError::Source { path, source })?;
    let rules = parse_rules(&architecture)?;
    let metadata = metadata(&root.join("Cargo.toml"), false)?;
    check(&rules, &metadata)
}

#[cfg(test)]
mod tests;
