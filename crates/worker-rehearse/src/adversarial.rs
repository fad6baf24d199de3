//! `worker rehearse --adversarial`: after the rehearsal, the benchmark is run on trees that are
//! not solutions, each in a fresh sandbox through the same staging and run path, to show whether
//! the committed command pays someone who solved nothing.
//!
//! The verdict is the command's exit status, and the solution's code runs inside it (DESIGN §8):
//! a module that exits 0 when loaded, or a file shadowing the test runner, turns a bare test run
//! into `passed`. The stubs are the cheapest such trees a solver would try first:
//!
//! - `exit_on_load`: the solution with every file in a language we know replaced by an
//!   immediate successful exit (other files kept as they are);
//! - `exit_on_load_keep_text`: the solution with each code file's early success exit put where
//!   it runs first and its original text kept below it, so a benchmark that greps the solver's
//!   files for phrases still finds them ([`keep_text`]: Python, shell, JavaScript/TypeScript,
//!   Ruby, a Rust constructor, a Go `init`, `#!/bin/sh` for anything else the benchmark may run);
//! - `fail_on_load_keep_text`: the same with a failing exit: every code file fails as soon as it
//!   is loaded, its text kept. It is the base the runner shadows are added to, and run alone
//!   first: if it passes, the benchmark never runs the solver's code, and a shadow's pass would
//!   prove nothing more (they are skipped);
//! - `shadow <what>`: that base with files added that a test runner loads before the tests
//!   ([`shadow`]: `unittest.py`, `pytest.py`, `conftest.py`, `sitecustomize.py`,
//!   `usercustomize.py`, a `.pth`; for Node `node_modules/.bin/<runner>` and `package.json`'s
//!   `scripts.test`; for Cargo every test target a `main` that exits 0). The solution's real
//!   tree, so phrase checks match, but its code fails on load, so a sound benchmark fails and a
//!   pass is the shadow's. A tree without code to neutralise gets the shadow files alone;
//! - `referenced_programs`: only the programs the benchmark may run from `/workspace` (the
//!   program-like names of a benchmark file that starts processes), each an immediate
//!   successful exit; built from the benchmark alone, so it needs no solution
//!   ([`super::references`]), and only when the benchmark names one;
//! - `empty_tree`: nothing at all.
//!
//! Apart from the stubs, [`solver_tests`] says when the benchmark starts a test runner on
//! `/workspace` that finds the source's own test files: tests the solver writes.
//!
//! A stub that passes makes the benchmark bypassable. One that fails or gets no verdict held,
//! but only when the source passed: otherwise the benchmark is not judged
//! ([`super::judgement`]). Passing none proves nothing beyond these stubs: it is a rehearsal,
//! not a proof.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use verifier_sdk::{Sha256Digest, TreeLimits};

mod keep_text;
mod shadow;
mod solver_tests;

pub use keep_text::{Exit, Language, keep_text, language};
pub use shadow::{Shadow, ShadowFile};
pub use solver_tests::SolverTests;

use super::culprit::{CULPRIT_BUDGET, Culprit, Search};
use super::exec::{
    BASE_LABEL, BASE_STEP, Prepared, RunResult, Runs, progress_words, run_once, solution_run_names,
};
use super::judgement::{NOT_JUDGED, judge};
use super::references::{References, referenced_first, workspace_references};
use super::report::verdict_of;
pub use super::stub_files::{SHADOW_FILES, exit_stub};
pub use super::verdict::{
    EMPTY_TREE, EXIT_ON_LOAD, EXIT_ON_LOAD_KEEP_TEXT, FAIL_ON_LOAD_KEEP_TEXT, REFERENCED_PROGRAMS,
    StubResult,
};
use super::{RehearseError, RehearseOptions};
use futures_util::StreamExt;
use worker_sandbox::Executor;
use worker_store::progress::{NoProgress, NoSteps};
use worker_store::stage::{StageKind, stage_tree, verify_staged};

/// Directories of other projects a tree carries (vendored crates, installed packages): kept
/// as they are, since cargo checks a vendored crate's files against its checksums.
const NOT_THE_SOLVERS: [&str; 2] = ["vendor", "node_modules"];
/// A shebang longer than this is not kept (the kernel reads far less).
const MAX_SHEBANG_BYTES: usize = 4096;
/// File names listed per stub in the human report; `--json` lists them all.
const LISTED_FILES: usize = 3;

impl StubResult {
    /// A stub with no files and no run: only its name, status and outcome (what a stub that
    /// was not run starts from, and the tests' stubs).
    pub(crate) fn empty(name: String, status: &'static str, outcome: &'static str) -> Self {
        Self {
            name,
            replaced: vec![],
            added: vec![],
            shadows: None,
            run_by_benchmark: vec![],
            kept_files: 0,
            source_snapshot_digest: None,
            status,
            reason: None,
            exit_code: None,
            headline: String::new(),
            evidence_path: None,
            outcome,
        }
    }

    fn ran(stub: StubTree, digest: Sha256Digest, run: RunResult, references: &References) -> Self {
        let e = run.explanation;
        // A shadow's replaced files fail on load: its pass can only hinge on what it added.
        let replaced: &[String] = if stub.shadows.is_some() {
            &[]
        } else {
            &stub.replaced
        };
        let run_by_benchmark = replaced
            .iter()
            .chain(&stub.added)
            .filter(|f| references.may_run(f))
            .cloned()
            .collect();
        let outcome = if e.status == "passed" {
            "bypassed"
        } else {
            "held"
        };
        Self {
            name: stub.name,
            replaced: stub.replaced,
            added: stub.added,
            shadows: stub.shadows,
            run_by_benchmark,
            kept_files: stub.kept,
            source_snapshot_digest: Some(digest),
            status: e.status,
            reason: e.reason,
            exit_code: e.exit_code,
            headline: e.headline,
            evidence_path: run.evidence_path,
            outcome,
        }
    }

    fn label(&self) -> String {
        match (self.status, self.reason) {
            ("not_run", _) => self.headline.clone(),
            (_, Some(reason)) => format!("no verdict: {reason}"),
            (status, None) => status.to_string(),
        }
    }

    fn line(&self) -> String {
        let tag = match self.outcome {
            "bypassed" => "BYPASSABLE",
            NOT_JUDGED => "not judged",
            other => other,
        };
        let mut line = format!("  {tag}: {} ({})", printable(&self.name), self.label());
        if self.outcome == "bypassed" {
            if let Some(what) = self.shadows {
                line.push_str(&format!(": shadows {what}"));
            }
            for (verb, files) in [("replaced", &self.replaced), ("added", &self.added)] {
                if files.is_empty() {
                    continue;
                }
                let shown: Vec<String> = files
                    .iter()
                    .take(LISTED_FILES)
                    .map(|f| printable(f))
                    .collect();
                line.push_str(&format!(": {verb} {}", shown.join(", ")));
                if files.len() > LISTED_FILES {
                    line.push_str(&format!(" and {} more", files.len() - LISTED_FILES));
                }
            }
        }
        line.push('\n');
        line
    }
}

/// The adversarial part of a rehearsal.
#[derive(Debug, Clone, Serialize)]
pub struct Adversarial {
    /// Every stub, in the order run.
    pub stubs: Vec<StubResult>,
    /// True when any stub passed; false when none did and the source passed; `None` (not
    /// judged) when none did but the source did not pass either.
    pub bypassable: Option<bool>,
    /// Why the benchmark was not judged and what to pass instead, when `bypassable` is `None`.
    pub not_judged: Option<String>,
    /// When `exit_on_load` passed having replaced more than one file: the files the pass
    /// hinges on, found by bisecting them over real runs ([`super::culprit`]); else `None`.
    pub culprit: Option<Culprit>,
    /// When the benchmark starts a test runner on `/workspace` that finds the source's own
    /// test files ([`solver_tests`]): the tests the solver writes; else `None`.
    pub solver_tests: Option<SolverTests>,
}

impl Adversarial {
    /// Whether a stub passed.
    pub fn is_bypassable(&self) -> bool {
        self.bypassable == Some(true)
    }

    pub(super) fn bypassed(&self) -> Vec<&str> {
        self.stubs
            .iter()
            .filter(|s| s.outcome == "bypassed")
            .map(|s| s.name.as_str())
            .collect()
    }

    /// One line per stub, then the verdict line.
    pub fn human(&self) -> String {
        let mut out = format!("adversarial stubs ({})\n", self.stubs.len());
        if let Some(tests) = &self.solver_tests {
            let mut files = tests
                .files
                .iter()
                .take(LISTED_FILES)
                .map(|f| printable(f))
                .collect::<Vec<_>>()
                .join(", ");
            if tests.files.len() > LISTED_FILES {
                files.push_str(&format!(" and {} more", tests.files.len() - LISTED_FILES));
            }
            out.push_str(&format!(
                "  solver's tests: {} starts `{}` on /workspace: {files}\n",
                printable(&tests.started_in),
                printable(&tests.runner),
            ));
        }
        for stub in &self.stubs {
            out.push_str(&stub.line());
            if let Some(culprit) = self.culprit.as_ref().filter(|c| c.stub == stub.name) {
                out.push_str(&culprit.line(printable));
            }
        }
        let bypassed = self.bypassed();
        if let Some(why) = &self.not_judged {
            out.push_str(&format!("adversarial  not judged: {why}\n"));
        } else if self.is_bypassable() {
            let names: Vec<String> = bypassed.iter().map(|n| printable(n)).collect();
            out.push_str(&format!(
                "adversarial  BYPASSABLE: {} passed: a bounty with this manifest would pay a \
                 non-solution\n",
                names.join(", ")
            ));
        } else {
            let count = |status| self.stubs.iter().filter(|s| s.status == status).count();
            let mut parts = Vec::new();
            for (n, what) in [
                (count("failed"), "failed"),
                (count("no_verdict"), "without a verdict"),
                (count("not_run"), "skipped"),
            ] {
                if n > 0 {
                    parts.push(format!("{n} {what}"));
                }
            }
            out.push_str(&format!(
                "adversarial  held: no stub passed ({})\n",
                parts.join(", ")
            ));
        }
        out
    }
}

/// A stub tree built under the rehearsal's temp dir.
struct StubTree {
    name: String,
    dir: PathBuf,
    replaced: Vec<String>,
    added: Vec<String>,
    kept: usize,
    /// For a runner shadow, what it stands in for.
    shadows: Option<&'static str>,
}

/// One stub to run, in order.
enum Planned {
    /// A tree to run.
    Tree(StubTree),
    /// `exit_on_load` with nothing to replace.
    NotApplicable,
    /// A runner shadow, run only when `fail_on_load_keep_text` (its base) did not pass.
    Shadow(StubTree),
}

fn root_error(path: &Path, detail: impl std::fmt::Display) -> RehearseError {
    RehearseError::StagingRoot {
        path: path.to_owned(),
        detail: detail.to_string(),
    }
}

/// Runs the solution (`options.repeat` times), `base` (the base tree, when it is run) and
/// every stub, each once in a fresh container, as one pipeline drawing on the rehearsal's
/// slots: a stub waits for no other run (the solution's verdict only decides, afterwards,
/// whether the stubs that failed say anything), a runner shadow only for
/// `fail_on_load_keep_text`'s answer. Returns the solution's results in run order, the
/// base's, and the stubs' in the plan's order: what a sequential rehearsal gives.
pub(crate) async fn run_with_stubs(
    executor: &Executor,
    prepared: &Prepared,
    options: &RehearseOptions,
    runs: &mut Runs,
    base: Option<Sha256Digest>,
) -> Result<(Vec<RunResult>, Option<RunResult>, Adversarial), RehearseError> {
    let root = &options.staging_root;
    let manifest = &prepared.manifest;
    let limits = manifest.source_limits();
    // Derived from the staged copy, re-verified, so the stubs come from exactly the tree whose
    // digest the rehearsal reported.
    let source = verify_staged(
        root,
        StageKind::Source,
        &prepared.commit.source_snapshot_digest,
        limits,
    )
    .map_err(|e| root_error(root, format!("the staged source: {e}")))?;
    // Inside the staging root: private like it, and on its filesystem, so kept files can be
    // hard links rather than copies. Removed when dropped.
    let work = tempfile::Builder::new()
        .prefix("adversarial-")
        .tempdir_in(root)
        .map_err(|e| root_error(root, e))?;
    let benchmark = verify_staged(
        root,
        StageKind::Benchmark,
        &prepared.commit.benchmark_digest,
        manifest.benchmark_limits(),
    )
    .map_err(|e| root_error(root, format!("the staged benchmark: {e}")))?;
    let references = workspace_references(&benchmark, manifest.benchmark_limits());
    let mut solver_tests = solver_tests::solver_tests(
        manifest.command(),
        &benchmark,
        manifest.benchmark_limits(),
        &source,
        limits,
    );
    // With --base, which of those tests the solution adds or changes (the base was staged and
    // its digest reported; a base that can no longer be verified is left out of the words).
    if let (Some(tests), Some(digest)) = (&mut solver_tests, &prepared.commit.base_snapshot_digest)
        && let Ok(base) = verify_staged(root, StageKind::Source, digest, limits)
    {
        tests.compare_with_base(&source, &base);
    }
    let built = Built {
        source: &source,
        limits,
        references: &references,
    };
    let trees = plan(&built, work.path())?;
    let trials = Trials {
        executor,
        prepared,
        root,
        source: &source,
        work: work.path(),
        limits,
    };
    let ran = run_pipeline(&trials, runs, &references, trees, options.repeat, base).await?;
    let Ran {
        solution,
        base,
        mut stubs,
        culprit,
    } = ran;
    let (bypassable, not_judged) = judge(&stubs, verdict_of(&solution));
    if not_judged.is_some() {
        for stub in &mut stubs {
            if stub.outcome == "held" {
                stub.outcome = NOT_JUDGED;
            }
        }
    }
    let adversarial = Adversarial {
        stubs,
        bypassable,
        not_judged,
        culprit,
        solver_tests,
    };
    Ok((solution, base, adversarial))
}

/// Every stub tree to run, in order: built from the staged source under `work`.
fn plan(built: &Built<'_>, work: &Path) -> Result<Vec<Planned>, RehearseError> {
    let mut trees = Vec::new();
    trees.push(
        match exit_on_load(built.source, &work.join("exit_on_load"), built.limits)? {
            Some(mut t) => {
                t.replaced = referenced_first(std::mem::take(&mut t.replaced), built.references);
                Planned::Tree(t)
            }
            None => Planned::NotApplicable,
        },
    );
    if let Some(tree) = built.keep_text(
        EXIT_ON_LOAD_KEEP_TEXT,
        &work.join("keep-text"),
        Exit::Success,
        None,
    )? {
        trees.push(Planned::Tree(tree));
    }
    if let Some(tree) = referenced_programs(built.references, &work.join("referenced"))? {
        trees.push(Planned::Tree(tree));
    }
    let control = built.keep_text(
        FAIL_ON_LOAD_KEEP_TEXT,
        &work.join("fail-on-load"),
        Exit::Failure,
        None,
    )?;
    let neutral = control.is_some();
    if let Some(tree) = control {
        trees.push(Planned::Tree(tree));
    }
    for (i, shadow) in built.shadows()?.into_iter().enumerate() {
        let dest = work.join(format!("shadow-{i}"));
        let tree = if neutral {
            built.keep_text(&shadow.name, &dest, Exit::Failure, Some(&shadow))?
        } else {
            shadow_only(&shadow, &dest)?
        };
        if let Some(tree) = tree {
            trees.push(Planned::Shadow(tree));
        }
    }
    let empty = work.join("empty");
    make_dir(&empty)?;
    trees.push(Planned::Tree(StubTree {
        name: EMPTY_TREE.into(),
        dir: empty,
        replaced: vec![],
        added: vec![],
        kept: 0,
        shadows: None,
    }));

    Ok(trees)
}

/// What the keep-text stubs and the shadows are built from: the staged source, its limits, and
/// the benchmark's references (a file it may run gets the generic `#!/bin/sh` exit when no
/// language is known).
struct Built<'a> {
    source: &'a Path,
    limits: TreeLimits,
    references: &'a References,
}

impl Built<'_> {
    /// The source with every code file's early exit (`exit`) put first and its text kept, and
    /// `shadow`'s files written over it; `None` when nothing would differ from the source.
    fn keep_text(
        &self,
        name: &str,
        dest: &Path,
        exit: Exit,
        shadow: Option<&Shadow>,
    ) -> Result<Option<StubTree>, RehearseError> {
        let (mut files, dirs) = verifier_sdk::digest::list_tree(self.source, self.limits)
            .map_err(|e| root_error(self.source, format!("listing the staged source: {e}")))?;
        files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
        make_dir(dest)?;
        for dir in &dirs {
            make_dir(&dest.join(dir))?;
        }
        let written: &[ShadowFile] = shadow.map_or(&[], |s| &s.files);
        let mut replaced = Vec::new();
        let mut kept = 0;
        for file in &files {
            if written.iter().any(|w| w.rel_path == file.rel_path) {
                continue;
            }
            let from = self.source.join(&file.rel_path);
            let to = dest.join(&file.rel_path);
            match self.neutralised(file, &from, exit)? {
                Some(bytes) => {
                    write_file(&to, &bytes, file.executable)?;
                    replaced.push(file.rel_path.clone());
                }
                None => {
                    link_or_copy(&from, &to)?;
                    kept += 1;
                }
            }
        }
        let mut added = Vec::new();
        for file in written {
            let to = dest.join(&file.rel_path);
            // A path the source holds as a directory (or under a file) cannot take the shadow.
            let parent_ok = to.parent().is_none_or(|p| fs::create_dir_all(p).is_ok());
            if !parent_ok || to.exists() {
                continue;
            }
            write_file(&to, &file.body, file.executable)?;
            added.push(file.rel_path.clone());
        }
        if replaced.is_empty() && added.is_empty() {
            return Ok(None);
        }
        Ok(Some(StubTree {
            name: name.to_owned(),
            dir: dest.to_owned(),
            replaced: referenced_first(replaced, self.references),
            added,
            kept,
            shadows: shadow.map(|s| s.shadows),
        }))
    }

    /// `file` with its language's exit put first, or `None` to keep it as it is (not code, or
    /// another project's file).
    fn neutralised(
        &self,
        file: &verifier_sdk::digest::TreeEntry,
        from: &Path,
        exit: Exit,
    ) -> Result<Option<Vec<u8>>, RehearseError> {
        if file
            .rel_path
            .split('/')
            .any(|part| NOT_THE_SOLVERS.contains(&part))
        {
            return Ok(None);
        }
        let generic = file.executable || self.references.may_run(&file.rel_path);
        let head = read_head(from, MAX_SHEBANG_BYTES as u64)?;
        let Some(lang) = language(&file.rel_path, &head, generic) else {
            return Ok(None);
        };
        let original = fs::read(from).map_err(|e| root_error(from, e))?;
        let context = keep_text::Context {
            rust_2024: lang == Language::Rust && self.rust_2024(&file.rel_path),
        };
        Ok(keep_text(lang, &original, exit, context))
    }

    /// Whether the nearest `Cargo.toml` above `rel_path` says edition 2024.
    fn rust_2024(&self, rel_path: &str) -> bool {
        let mut dir = Path::new(rel_path).parent();
        while let Some(d) = dir {
            let manifest = self.source.join(d).join("Cargo.toml");
            if let Ok(head) = read_head(&manifest, 1 << 16)
                && !head.is_empty()
            {
                let text = String::from_utf8_lossy(&head);
                return text
                    .lines()
                    .any(|l| l.replace(' ', "").starts_with("edition=\"2024\""));
            }
            dir = d.parent();
        }
        false
    }

    /// The runner shadows for this source: Python's always, Node's when it has a
    /// `package.json` or JavaScript/TypeScript, Cargo's when it has a `Cargo.toml`.
    fn shadows(&self) -> Result<Vec<Shadow>, RehearseError> {
        let (files, _) = verifier_sdk::digest::list_tree(self.source, self.limits)
            .map_err(|e| root_error(self.source, format!("listing the staged source: {e}")))?;
        let theirs = |rel: &str| rel.split('/').any(|part| NOT_THE_SOLVERS.contains(&part));
        let mut out = shadow::python();
        let package_json = files.iter().any(|f| f.rel_path == "package.json");
        let scripts = files.iter().any(|f| {
            !theirs(&f.rel_path) && language(&f.rel_path, b"", false) == Some(Language::JavaScript)
        });
        if package_json || scripts {
            let text = if package_json {
                Some(read_head(&self.source.join("package.json"), 1 << 20)?)
            } else {
                None
            };
            out.extend(shadow::node(text.as_deref()));
        }
        let mut manifests = Vec::new();
        for f in &files {
            let is_manifest = f.rel_path == "Cargo.toml" || f.rel_path.ends_with("/Cargo.toml");
            if !is_manifest || theirs(&f.rel_path) {
                continue;
            }
            let dir = f.rel_path.strip_suffix("Cargo.toml").unwrap_or("");
            let lib = format!("{dir}src/lib.rs");
            let text = read_head(&self.source.join(&f.rel_path), 1 << 20)?;
            manifests.push((
                f.rel_path.clone(),
                String::from_utf8_lossy(&text).into_owned(),
                files.iter().any(|g| g.rel_path == lib),
            ));
        }
        out.extend(shadow::cargo(&manifests));
        Ok(out)
    }
}

/// A shadow's files alone, for a source with no code to make fail on load (its data kept
/// would make a sound benchmark pass, and the pass would not be the shadow's).
fn shadow_only(shadow: &Shadow, dest: &Path) -> Result<Option<StubTree>, RehearseError> {
    make_dir(dest)?;
    let mut added = Vec::new();
    for file in &shadow.files {
        let to = dest.join(&file.rel_path);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(|e| root_error(parent, e))?;
        }
        write_file(&to, &file.body, file.executable)?;
        added.push(file.rel_path.clone());
    }
    Ok(Some(StubTree {
        name: shadow.name.clone(),
        dir: dest.to_owned(),
        replaced: vec![],
        added,
        kept: 0,
        shadows: Some(shadow.shadows),
    }))
}

/// What the pipeline ran: the solution's results in run order, the base tree's, the stubs'
/// in the plan's order, and `exit_on_load`'s culprit when one was bisected.
struct Ran {
    solution: Vec<RunResult>,
    base: Option<RunResult>,
    stubs: Vec<StubResult>,
    culprit: Option<Culprit>,
}

/// Runs the solution `repeat` times, `base` and the planned stubs as one pipeline: every job
/// is started at once and waits only for a slot of the rehearsal (its capacity) and, for a
/// shadow, for `fail_on_load_keep_text`'s answer. Each stub's tree is staged by its own job,
/// before it waits for a slot, so staging overlaps the runs in flight (#50 item 1: waves
/// left a slot idle while a wave's trees were staged and its slowest run ended).
async fn run_pipeline(
    trials: &Trials<'_>,
    runs: &mut Runs,
    references: &References,
    trees: Vec<Planned>,
    repeat: u32,
    base: Option<Sha256Digest>,
) -> Result<Ran, RehearseError> {
    // The jobs in the order a sequential rehearsal runs them: the solution's runs, the base,
    // the stubs in the plan's order.
    let mut jobs: Vec<Job> = (1..=repeat)
        .map(|run| {
            let (label, step) = solution_run_names(run, repeat);
            Job::Solution { run, label, step }
        })
        .collect();
    jobs.extend(base.map(Job::Base));
    // A shadow runs only when `fail_on_load_keep_text` did not pass; with no such stub
    // planned (a source with no code to make fail on load), every shadow runs.
    let has_control = trees
        .iter()
        .any(|p| matches!(p, Planned::Tree(t) if t.name == FAIL_ON_LOAD_KEEP_TEXT));
    let (gate, _) = tokio::sync::watch::channel((!has_control).then_some(false));
    for (i, planned) in trees.into_iter().enumerate() {
        jobs.push(match planned {
            Planned::NotApplicable => Job::Ready(not_applicable()),
            Planned::Tree(tree) => Job::Stub { i, tree },
            Planned::Shadow(tree) => Job::Shadow { i, tree },
        });
    }
    let width = jobs.len().max(1);
    let mut solution = Vec::new();
    let mut base_run = None;
    let mut stubs: Vec<StubResult> = Vec::new();
    let mut culprit = None;
    // The runs end in any order; their progress lines are written here, in the plan's order,
    // as each run and every run before it has ended, so the lines (and the results' order)
    // are those of a sequential rehearsal.
    let mut steps = std::mem::replace(&mut runs.steps, Box::new(NoSteps));
    let mut failed = None;
    {
        let shared: &Runs = runs;
        let gate = &gate;
        // `buffered` yields in the order given whatever order the runs end in; its width
        // starts every job, and the rehearsal's slots bound the containers.
        let mut done = futures_util::stream::iter(jobs)
            .map(|job| pipeline_job(trials, shared, references, gate, job))
            .buffered(width);
        // Every run is awaited, even after an error, so no container is left to a dropped
        // future; the first error in the plan's order is the one returned.
        while let Some(finished) = done.next().await {
            if failed.is_some() {
                continue;
            }
            for (step, words) in &finished.lines {
                steps.started(step);
                steps.finished(step, words);
            }
            match finished.result {
                Ok(Done::Solution(run)) => solution.push(run),
                Ok(Done::Base(run)) => base_run = Some(run),
                Ok(Done::Stub(result, found)) => {
                    if found.is_some() {
                        culprit = found;
                    }
                    stubs.push(result);
                }
                Err(error) => failed = Some(error),
            }
        }
    }
    runs.steps = steps;
    if let Some(error) = failed {
        return Err(error);
    }
    Ok(Ran {
        solution,
        base: base_run,
        stubs,
        culprit,
    })
}

/// One job of the pipeline: already decided, a run of the solution or the base tree, or a
/// stub's tree to stage and run (a shadow after its gate opens).
enum Job {
    Ready(StubResult),
    Solution {
        run: u32,
        label: String,
        step: String,
    },
    Base(Sha256Digest),
    Stub {
        i: usize,
        tree: StubTree,
    },
    Shadow {
        i: usize,
        tree: StubTree,
    },
}

/// What a job gave: a run of the solution or the base tree, or a stub's result (with
/// `exit_on_load`'s culprit when one was bisected). One per run, moved once: the variants'
/// sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Done {
    Solution(RunResult),
    Base(RunResult),
    Stub(StubResult, Option<Culprit>),
}

/// A job's result and the progress lines its runs would have written, `(step, words)`, in the
/// order they ran.
struct Finished {
    lines: Vec<(String, String)>,
    result: Result<Done, RehearseError>,
}

impl Finished {
    fn of(lines: Vec<(String, String)>, result: Result<Done, RehearseError>) -> Self {
        Self { lines, result }
    }
}

/// `fail_on_load_keep_text`'s answer for the shadows: `Some(true)` when it passed (no shadow
/// runs), `Some(false)` when it did not, `None` until it is known.
type Gate = tokio::sync::watch::Sender<Option<bool>>;

/// Runs one job of the pipeline. `fail_on_load_keep_text`'s job opens the shadows' gate on
/// every path, an error included (the shadows are then skipped: the rehearsal fails anyway).
async fn pipeline_job(
    trials: &Trials<'_>,
    runs: &Runs,
    references: &References,
    gate: &Gate,
    job: Job,
) -> Finished {
    match job {
        Job::Ready(result) => Finished::of(vec![], Ok(Done::Stub(result, None))),
        Job::Solution { run, label, step } => {
            let source = trials.prepared.commit.source_snapshot_digest;
            let result =
                run_once(trials.executor, trials.prepared, runs, source, run, &label).await;
            Finished::of(
                vec![(step, progress_words(false, &result))],
                result.map(Done::Solution),
            )
        }
        Job::Base(digest) => {
            let run = run_once(
                trials.executor,
                trials.prepared,
                runs,
                digest,
                1,
                BASE_LABEL,
            )
            .await;
            Finished::of(
                vec![(BASE_STEP.into(), progress_words(false, &run))],
                run.map(Done::Base),
            )
        }
        Job::Stub { i, tree } => {
            let control = tree.name == FAIL_ON_LOAD_KEEP_TEXT;
            let finished = stub_job(trials, runs, references, i, tree).await;
            if control {
                let passed = match &finished.result {
                    Ok(Done::Stub(result, _)) => result.outcome == "bypassed",
                    _ => true,
                };
                gate.send_replace(Some(passed));
            }
            finished
        }
        Job::Shadow { i, tree } => {
            // The sender lives as long as the pipeline, and its control job always answers.
            let passed = gate
                .subscribe()
                .wait_for(Option::is_some)
                .await
                .map_or(Some(true), |answer| *answer);
            if passed == Some(true) {
                return Finished::of(vec![], Ok(Done::Stub(skipped_shadow(tree), None)));
            }
            stub_job(trials, runs, references, i, tree).await
        }
    }
}

/// Stages and runs one stub; a passing `exit_on_load` that replaced more than one file is
/// bisected here, trial after trial, while the other jobs run.
async fn stub_job(
    trials: &Trials<'_>,
    runs: &Runs,
    references: &References,
    i: usize,
    tree: StubTree,
) -> Finished {
    let digest = match trials.stage(&tree.dir, "adversarial stub") {
        Ok(digest) => digest,
        Err(error) => return Finished::of(vec![], Err(error)),
    };
    let label = format!("rehearse-stub-{i}-{}", label_part(&tree.name));
    let step = format!("stub {}", tree.name);
    let run = run_once(trials.executor, trials.prepared, runs, digest, 1, &label).await;
    let mut lines = vec![(step, progress_words(true, &run))];
    let run = match run {
        Ok(run) => run,
        Err(error) => return Finished::of(lines, Err(error)),
    };
    let mut result = StubResult::ran(tree, digest, run, references);
    let mut culprit = None;
    if result.name == EXIT_ON_LOAD && result.outcome == "bypassed" && result.replaced.len() > 1 {
        match find_culprit(trials, runs, &mut lines, &result).await {
            Ok(found) => {
                // The files the pass hinges on head the stub's line.
                let (first, rest): (Vec<String>, Vec<String>) =
                    std::mem::take(&mut result.replaced)
                        .into_iter()
                        .partition(|f| found.files.contains(f));
                result.replaced = first.into_iter().chain(rest).collect();
                culprit = Some(found);
            }
            Err(error) => return Finished::of(lines, Err(error)),
        }
    }
    Finished::of(lines, Ok(Done::Stub(result, culprit)))
}

/// A shadow not run because its base, `fail_on_load_keep_text`, passed without it.
fn skipped_shadow(tree: StubTree) -> StubResult {
    StubResult {
        replaced: tree.replaced,
        added: tree.added,
        shadows: tree.shadows,
        kept_files: tree.kept,
        headline: format!("not run: {FAIL_ON_LOAD_KEEP_TEXT} passed without a shadow"),
        ..StubResult::empty(tree.name, "not_run", "skipped")
    }
}

/// The first `max` bytes of `path`.
fn read_head(path: &Path, max: u64) -> Result<Vec<u8>, RehearseError> {
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(max).read_to_end(&mut head))
        .map_err(|e| root_error(path, e))?;
    Ok(head)
}

/// The staged file is read-only and never rewritten, so sharing its inode is safe.
fn link_or_copy(from: &Path, to: &Path) -> Result<(), RehearseError> {
    if fs::hard_link(from, to).is_err() {
        fs::copy(from, to).map_err(|e| root_error(to, e))?;
    }
    Ok(())
}

/// What a culprit trial needs: the engine, the rehearsal, the staged source the stub was built
/// from, and where trial trees are built.
struct Trials<'a> {
    executor: &'a Executor,
    prepared: &'a Prepared,
    root: &'a Path,
    source: &'a Path,
    work: &'a Path,
    limits: TreeLimits,
}

impl Trials<'_> {
    /// Stages `dir` as a source tree in the rehearsal's store, as every stub and trial is;
    /// `what` names it in an error.
    fn stage(&self, dir: &Path, what: &'static str) -> Result<Sha256Digest, RehearseError> {
        stage_tree(
            StageKind::Source,
            dir,
            self.root,
            self.limits,
            &mut NoProgress,
        )
        .map(|staged| staged.snapshot.digest)
        .map_err(|source| RehearseError::Stage { what, source })
    }
}

/// Bisects the files a passing `exit_on_load` replaced ([`super::culprit`]): each trial a tree
/// built, staged and run like a stub, at most [`CULPRIT_BUDGET`] of them.
async fn find_culprit(
    trials: &Trials<'_>,
    runs: &Runs,
    lines: &mut Vec<(String, String)>,
    stub: &StubResult,
) -> Result<Culprit, RehearseError> {
    let mut search = Search::new(
        stub.replaced.clone(),
        &stub.run_by_benchmark,
        CULPRIT_BUDGET,
    );
    let mut k = 0u32;
    while let Some(subset) = search.next() {
        k += 1;
        let dest = trials.work.join(format!("culprit-{k}"));
        let tree = exit_on_load_only(trials.source, &dest, trials.limits, Some(&subset))?
            .ok_or_else(|| root_error(&dest, "the culprit trial's tree was not built"))?;
        let digest = trials.stage(&tree.dir, "culprit trial")?;
        let label = format!("rehearse-culprit-{k}");
        let step = match subset.len() {
            1 => format!("culprit trial {k}: {} alone", printable(&subset[0])),
            n => format!("culprit trial {k}: {n} of {} files", stub.replaced.len()),
        };
        let run = run_once(trials.executor, trials.prepared, runs, digest, 1, &label).await;
        lines.push((step, progress_words(false, &run)));
        let run = run?;
        search.record(subset, run.explanation.status);
    }
    Ok(search.finish(EXIT_ON_LOAD))
}

/// Only the programs the benchmark runs from `/workspace` (a file in a language with an exit
/// stub, or one with no extension, run as a `#!/bin/sh` script), each an immediate successful
/// exit; `None` when it runs none. It needs no solution: it shows, on an unsolved tree too,
/// a benchmark that trusts a program the solver ships.
fn referenced_programs(
    references: &References,
    dest: &Path,
) -> Result<Option<StubTree>, RehearseError> {
    let programs: Vec<(&String, &[u8], bool)> = references
        .run
        .iter()
        .filter_map(|rel| match exit_stub(rel) {
            Some(body) => Some((rel, body.as_bytes(), false)),
            None if Path::new(rel).extension().is_none() => {
                Some((rel, b"#!/bin/sh\nexit 0\n".as_slice(), true))
            }
            None => None,
        })
        .collect();
    if programs.is_empty() {
        return Ok(None);
    }
    make_dir(dest)?;
    let mut added = Vec::new();
    for (rel, body, executable) in programs {
        let path = dest.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| root_error(parent, e))?;
        }
        // A name that is also a directory of another reference (`a` and `a/b.py`) is left out.
        if path.exists() {
            continue;
        }
        write_file(&path, body, executable)?;
        added.push(rel.clone());
    }
    Ok(Some(StubTree {
        name: REFERENCED_PROGRAMS.into(),
        dir: dest.to_owned(),
        replaced: vec![],
        added,
        kept: 0,
        shadows: None,
    }))
}

/// `exit_on_load` when the solution has no file we can stub: running it would only rerun the
/// solution, whose pass says nothing.
fn not_applicable() -> StubResult {
    StubResult {
        headline: "no file in a language with an exit stub".into(),
        ..StubResult::empty(EXIT_ON_LOAD.into(), "not_run", "skipped")
    }
}

/// The solution with every file in a known language replaced by its exit stub; `None` when
/// there is none.
fn exit_on_load(
    source: &Path,
    dest: &Path,
    limits: TreeLimits,
) -> Result<Option<StubTree>, RehearseError> {
    exit_on_load_only(source, dest, limits, None)
}

/// [`exit_on_load`], or with `only` a culprit trial's tree: only the files of `only` replaced
/// by their exit stubs, every other file an exit stub would replace left out, the rest kept.
fn exit_on_load_only(
    source: &Path,
    dest: &Path,
    limits: TreeLimits,
    only: Option<&[String]>,
) -> Result<Option<StubTree>, RehearseError> {
    let (files, dirs) = verifier_sdk::digest::list_tree(source, limits)
        .map_err(|e| root_error(source, format!("listing the staged source: {e}")))?;
    make_dir(dest)?;
    for dir in &dirs {
        make_dir(&dest.join(dir))?;
    }
    let mut replaced = Vec::new();
    let mut kept = 0;
    for file in &files {
        let from = source.join(&file.rel_path);
        let to = dest.join(&file.rel_path);
        match exit_stub(&file.rel_path) {
            Some(_) if only.is_some_and(|only| !only.contains(&file.rel_path)) => {}
            Some(body) => {
                let mut content = shebang(&from)?;
                content.extend_from_slice(body.as_bytes());
                write_file(&to, &content, file.executable)?;
                replaced.push(file.rel_path.clone());
            }
            None => {
                // The staged file is read-only and never rewritten, so sharing its inode is safe.
                if fs::hard_link(&from, &to).is_err() {
                    fs::copy(&from, &to).map_err(|e| root_error(&to, e))?;
                }
                kept += 1;
            }
        }
    }
    if replaced.is_empty() && only.is_none() {
        return Ok(None);
    }
    Ok(Some(StubTree {
        name: EXIT_ON_LOAD.into(),
        dir: dest.to_owned(),
        replaced,
        added: vec![],
        kept,
        shadows: None,
    }))
}

/// The file's `#!` line, kept so an executable stub still starts with its interpreter.
fn shebang(path: &Path) -> Result<Vec<u8>, RehearseError> {
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_SHEBANG_BYTES as u64).read_to_end(&mut head))
        .map_err(|e| root_error(path, e))?;
    if !head.starts_with(b"#!") {
        return Ok(Vec::new());
    }
    match head.iter().position(|&b| b == b'\n') {
        Some(end) => Ok(head[..=end].to_vec()),
        None => Ok(Vec::new()),
    }
}

fn make_dir(dir: &Path) -> Result<(), RehearseError> {
    fs::create_dir(dir).map_err(|e| root_error(dir, e))
}

fn write_file(path: &Path, content: &[u8], executable: bool) -> Result<(), RehearseError> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o755 } else { 0o644 })
        .open(path)
        .and_then(|mut f| f.write_all(content))
        .map_err(|e| root_error(path, e))
}

/// A stub's name as part of a container name and log file name (`shadow unittest.py` →
/// `shadow-unittest.py`): only the characters both allow.
fn label_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// File names come from the solver's tree: control characters are shown escaped, never sent
/// to the terminal.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stub_files::PYTHON_EXIT;
    use std::os::unix::fs::PermissionsExt;

    fn limits() -> TreeLimits {
        TreeLimits::new(1 << 20, 100).unwrap()
    }

    #[test]
    fn exit_stubs_cover_python_shell_javascript_typescript_and_ruby_only() {
        for (path, stub) in [
            ("a.py", Some(PYTHON_EXIT)),
            ("pkg/__init__.py", Some(PYTHON_EXIT)),
            ("run.sh", Some("exit 0\n")),
            ("x.js", Some("process.exit(0);\n")),
            ("x.mjs", Some("process.exit(0);\n")),
            ("x.cjs", Some("process.exit(0);\n")),
            ("src/x.ts", Some("process.exit(0);\n")),
            ("lib/x.rb", Some("exit!(0)\n")),
            ("result.txt", None),
            ("Makefile", None),
            ("dir.py/README", None),
            ("src/lib.rs", None),
        ] {
            assert_eq!(exit_stub(path), stub, "{path}");
        }
    }

    #[test]
    fn exit_on_load_replaces_code_keeps_data_shebangs_and_exec_bits() {
        let src = tempfile::tempdir().unwrap();
        let s = src.path();
        fs::create_dir(s.join("pkg")).unwrap();
        fs::write(s.join("pkg/mod.py"), "def f(): return 1\n").unwrap();
        fs::write(s.join("run.sh"), "#!/bin/sh\necho real\n").unwrap();
        fs::set_permissions(s.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(s.join("data.txt"), "keep me").unwrap();
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("stub");
        let tree = exit_on_load(s, &dest, limits()).unwrap().unwrap();
        assert_eq!(tree.replaced, ["pkg/mod.py", "run.sh"]);
        assert_eq!(tree.kept, 1);
        assert_eq!(
            fs::read_to_string(dest.join("pkg/mod.py")).unwrap(),
            PYTHON_EXIT
        );
        assert_eq!(
            fs::read_to_string(dest.join("run.sh")).unwrap(),
            "#!/bin/sh\nexit 0\n"
        );
        let mode = fs::metadata(dest.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
        assert_eq!(
            fs::read_to_string(dest.join("data.txt")).unwrap(),
            "keep me"
        );

        // Nothing to stub: the stub would be the solution itself, so it is not built.
        let data = tempfile::tempdir().unwrap();
        fs::write(data.path().join("result.txt"), "42").unwrap();
        let none = exit_on_load(data.path(), &out.path().join("none"), limits()).unwrap();
        assert!(none.is_none());
    }

    fn stub(name: &str, status: &'static str, outcome: &'static str) -> StubResult {
        StubResult::empty(name.into(), status, outcome)
    }

    #[test]
    fn lines_name_the_stub_its_files_and_escape_control_characters() {
        let mut bypass = stub("exit_on_load", "passed", "bypassed");
        bypass.replaced = vec![
            "a.py".into(),
            "b\x1b[2J.py".into(),
            "c.py".into(),
            "d.py".into(),
        ];
        assert_eq!(
            bypass.line(),
            "  BYPASSABLE: exit_on_load (passed): replaced a.py, b\\u{1b}[2J.py, c.py and 1 more\n"
        );
        let mut timeout = stub("empty_tree", "no_verdict", "held");
        timeout.reason = Some("timeout");
        assert_eq!(timeout.line(), "  held: empty_tree (no verdict: timeout)\n");
        let adversarial = Adversarial {
            stubs: vec![
                timeout,
                stub("shadow pytest.py", "failed", "held"),
                not_applicable(),
            ],
            bypassable: Some(false),
            not_judged: None,
            culprit: None,
            solver_tests: None,
        };
        assert!(
            adversarial.human().ends_with(
                "adversarial  held: no stub passed (1 failed, 1 without a verdict, 1 skipped)\n"
            ),
            "{}",
            adversarial.human()
        );
    }
}
