//! `worker rehearse --mutants N`: how strong is the benchmark? The lines the solution changes
//! (against `--base`) are mutated one at a time ([`mutators`]: a deleted line, a flipped
//! comparison, a swapped `&&`/`||`, …), up to N mutants picked by a seeded shuffle, and each
//! mutant tree is staged and run exactly as the solution was. A benchmark that still passes
//! on a mutant let a plausible mistake through: the share it fails is its mutation score.
//!
//! Decided from each run's verdict alone, so the score does not depend on which run ends
//! first: `failed` is killed (listed apart as "did not build" when the output shows a compile
//! or syntax error), a limit reached (`timeout`, `oom`, `output_limit`) is killed too, a pass
//! survived, and any other run without a verdict is left out of the score.

pub mod diff;
pub mod mutators;

use std::fs;
use std::io::Write;
use std::num::NonZeroUsize;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use serde::Serialize;
use verifier_sdk::{Sha256Digest, TreeLimits};

use super::exec::{Prepared, RunResult, Runs, Slots, run_once};
use super::verdict::Verdict;
use super::{RehearseError, RehearseOptions};
use mutators::{Mutator, lang_of, mutate_line};
use worker_sandbox::Executor;
use worker_store::progress::NoProgress;
use worker_store::stage::{StageKind, stage_tree, verify_staged};

/// Most mutants `--mutants` accepts: each is a full sandbox run.
pub const MAX_MUTANTS: u32 = 200;
/// The seed of the mutant choice when `--mutants-seed` is not given.
pub const DEFAULT_SEED: u64 = 42;
/// A score under this share (in percent) is weak: most plausible mistakes pass.
pub const WEAK_BELOW_PERCENT: u32 = 50;
/// Largest source file read for mutation; a bigger one is not mutated.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// What `--mutants` asks for.
#[derive(Debug, Clone, Copy)]
pub struct MutantOptions {
    /// Most mutants run (1..=[`MAX_MUTANTS`]).
    pub count: u32,
    /// The seed of the choice among all candidates: the same seed, trees and count pick the
    /// same mutants.
    pub seed: u64,
    /// Runs at once (the host's capacity for this manifest, chosen by the caller).
    pub parallel: NonZeroUsize,
}

/// One mutant the mutators can make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The file, relative to the tree.
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// The mistake.
    pub mutator: Mutator,
    /// The line as the solution has it.
    pub original: String,
    /// The mutated line; `None`: deleted.
    pub mutated: Option<String>,
}

impl Candidate {
    /// The mutant as a unified diff of its line.
    pub fn unified_diff(&self) -> String {
        let mut out = format!("--- a/{0}\n+++ b/{0}\n", self.file);
        match &self.mutated {
            Some(new) => out.push_str(&format!(
                "@@ -{0} +{0} @@\n-{1}\n+{new}\n",
                self.line, self.original
            )),
            None => out.push_str(&format!(
                "@@ -{} +{},0 @@\n-{}\n",
                self.line,
                self.line - 1,
                self.original
            )),
        }
        out
    }
}

/// Whether a path looks like a test the solution carries: mutating a test the benchmark does
/// not run would only add survivors that say nothing about the benchmark.
fn is_test_path(rel: &str) -> bool {
    let mut parts = rel.split('/');
    let name = parts.next_back().unwrap_or("");
    let in_tests_dir = rel
        .split('/')
        .rev()
        .skip(1)
        .any(|d| matches!(d, "test" | "tests" | "__tests__" | "spec"));
    let stem = name.split('.').next().unwrap_or("");
    in_tests_dir
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || name.contains(".test.")
        || name.contains(".spec.")
}

/// A file's lines without their endings (`\n` or `\r\n`).
fn text_lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

/// Every mutant of the lines `new` changes against `base` (`None`: a file the base lacks), in
/// line order. Pure.
pub fn candidates_of_file(rel: &str, base: Option<&str>, new: &str) -> Vec<Candidate> {
    let Some(lang) = lang_of(rel) else {
        return Vec::new();
    };
    if is_test_path(rel) {
        return Vec::new();
    }
    let new_lines = text_lines(new);
    let base_lines = base.map(text_lines).unwrap_or_default();
    let changed = diff::changed_lines(&base_lines, &new_lines);
    let mut out = Vec::new();
    for index in changed {
        let Some(original) = new_lines.get(index) else {
            continue;
        };
        for m in mutate_line(original, lang) {
            out.push(Candidate {
                file: rel.to_owned(),
                line: index + 1,
                mutator: m.mutator,
                original: (*original).to_owned(),
                mutated: m.line,
            });
        }
    }
    out
}

/// SplitMix64: a tiny, fixed generator, so that a seed picks the same mutants on every
/// machine and every version of every dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Up to `count` of `all`, chosen by a Fisher-Yates shuffle seeded with `seed`, returned in
/// file and line order. Pure and reproducible.
pub fn select(mut all: Vec<Candidate>, count: usize, seed: u64) -> Vec<Candidate> {
    let mut rng = SplitMix64(seed);
    for i in (1..all.len()).rev() {
        let j = usize::try_from(rng.next() % (i as u64 + 1)).unwrap_or(0);
        all.swap(i, j);
    }
    all.truncate(count);
    all.sort_by(|a, b| (&a.file, a.line, a.mutator).cmp(&(&b.file, b.line, b.mutator)));
    all
}

/// What became of one mutant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// The benchmark failed on it (or it reached a limit: a loop that never ends).
    Killed,
    /// The benchmark failed because the mutant did not compile: killed, but it says little.
    DidNotBuild,
    /// The benchmark passed on it.
    Survived,
    /// The run ended without a verdict for a reason that is not the mutant's (left out of the
    /// score).
    NoVerdict,
}

/// What a failed run's output shows when the code under test did not compile or parse.
const BUILD_ERRORS: [&str; 9] = [
    "could not compile",
    "error[E",
    "error: expected",
    "SyntaxError:",
    "IndentationError:",
    "TabError:",
    "[build failed]",
    "[setup failed]",
    "syntax error",
];

/// A run's verdict as a mutant's fate. Pure.
pub fn fate_of(run: &RunResult) -> Fate {
    let e = &run.explanation;
    match (e.status, e.reason) {
        ("passed", _) => Fate::Survived,
        ("failed", _) => {
            let tails = [&e.stdout_tail, &e.stderr_tail];
            let no_build = tails
                .iter()
                .filter_map(|t| t.as_deref())
                .any(|t| BUILD_ERRORS.iter().any(|p| t.contains(p)));
            if no_build {
                Fate::DidNotBuild
            } else {
                Fate::Killed
            }
        }
        (_, Some("timeout" | "oom" | "output_limit")) => Fate::Killed,
        _ => Fate::NoVerdict,
    }
}

/// One mutant run.
#[derive(Debug, Clone, Serialize)]
pub struct MutantResult {
    /// 1-based, in file and line order.
    pub id: usize,
    /// The file mutated.
    pub file: String,
    /// Its 1-based line.
    pub line: usize,
    /// The mistake.
    pub mutator: Mutator,
    /// The mutant as a unified diff of its line.
    pub diff: String,
    /// What became of it.
    pub fate: Fate,
    /// The run's status and reason.
    pub status: &'static str,
    /// Why there was no verdict, if so.
    pub reason: Option<&'static str>,
    /// The mutant tree's digest.
    pub source_snapshot_digest: Sha256Digest,
    /// The run's evidence record.
    pub evidence_path: Option<PathBuf>,
}

/// The mutation part of a rehearsal.
#[derive(Debug, Clone, Serialize)]
pub struct Mutation {
    /// The seed the mutants were chosen with.
    pub seed: u64,
    /// `--mutants N`.
    pub asked: u32,
    /// Every mutant the mutators could make of the changed lines.
    pub candidates: usize,
    /// Lines the solution changes in files a mutator knows (tests left out).
    pub changed_lines: usize,
    /// Runs at once.
    pub parallel: usize,
    /// Why no mutant was run (the solution does not pass, no base, no changed line).
    pub not_judged: Option<String>,
    /// Every mutant run, in file and line order.
    pub mutants: Vec<MutantResult>,
    /// Killed by a failing test or a limit (did-not-build ones not counted here).
    pub killed: usize,
    /// Killed because they did not build.
    pub did_not_build: usize,
    /// Passed the benchmark.
    pub survived: usize,
    /// Left out of the score.
    pub no_verdict: usize,
    /// `100 * (killed + did_not_build) / (killed + did_not_build + survived)`, rounded down;
    /// `None` when no mutant was judged.
    pub score_percent: Option<u32>,
    /// The score is under [`WEAK_BELOW_PERCENT`]; `None` when there is no score.
    pub weak: Option<bool>,
}

impl Mutation {
    fn not_judged(seed: u64, options: &MutantOptions, why: String, candidates: usize) -> Self {
        Self {
            seed,
            asked: options.count,
            candidates,
            changed_lines: 0,
            parallel: options.parallel.get(),
            not_judged: Some(why),
            mutants: vec![],
            killed: 0,
            did_not_build: 0,
            survived: 0,
            no_verdict: 0,
            score_percent: None,
            weak: None,
        }
    }

    /// Counts the fates and scores them. Pure.
    pub fn scored(mut self) -> Self {
        let count = |fate| self.mutants.iter().filter(|m| m.fate == fate).count();
        self.killed = count(Fate::Killed);
        self.did_not_build = count(Fate::DidNotBuild);
        self.survived = count(Fate::Survived);
        self.no_verdict = count(Fate::NoVerdict);
        let dead = self.killed + self.did_not_build;
        let judged = dead + self.survived;
        self.score_percent =
            (judged > 0).then(|| u32::try_from(dead * 100 / judged).unwrap_or(100));
        self.weak = self.score_percent.map(|s| s < WEAK_BELOW_PERCENT);
        self
    }

    /// The mutants the benchmark let through.
    pub fn survivors(&self) -> impl Iterator<Item = &MutantResult> {
        self.mutants.iter().filter(|m| m.fate == Fate::Survived)
    }

    /// The human block: what was run, each survivor's diff, the mutants that did not build,
    /// and the score line (`WEAK` under [`WEAK_BELOW_PERCENT`] %).
    pub fn human(&self) -> String {
        let mut out = format!(
            "mutants ({} of {} candidate(s) on {} changed line(s), seed {}, {} at a time)\n",
            self.mutants.len(),
            self.candidates,
            self.changed_lines,
            self.seed,
            self.parallel
        );
        if let Some(why) = &self.not_judged {
            out.push_str(&format!("mutants  not judged: {why}\n"));
            return out;
        }
        for m in self.survivors() {
            out.push_str(&format!(
                "  SURVIVED: {}:{} {}\n",
                m.file,
                m.line,
                m.mutator.as_str()
            ));
            for line in m.diff.lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
        for m in self.mutants.iter().filter(|m| m.fate == Fate::DidNotBuild) {
            out.push_str(&format!(
                "  did not build: {}:{} {}\n",
                m.file,
                m.line,
                m.mutator.as_str()
            ));
        }
        for m in self.mutants.iter().filter(|m| m.fate == Fate::NoVerdict) {
            out.push_str(&format!(
                "  no verdict ({}): {}:{} {}\n",
                m.reason.unwrap_or("unknown"),
                m.file,
                m.line,
                m.mutator.as_str()
            ));
        }
        let dead = self.killed + self.did_not_build;
        let judged = dead + self.survived;
        match (self.score_percent, self.weak) {
            (Some(score), Some(true)) => out.push_str(&format!(
                "mutants  WEAK: the benchmark kills {dead} of {judged} mutants ({score} %, under \
                 {WEAK_BELOW_PERCENT} %; {} did not build): most of these mistakes in the \
                 solution would still be paid; add tests that fail on the survivors above\n",
                self.did_not_build
            )),
            (Some(score), _) => out.push_str(&format!(
                "mutants  score {score} %: the benchmark kills {dead} of {judged} mutants ({} did \
                 not build, {} survived)\n",
                self.did_not_build, self.survived
            )),
            (None, _) => out.push_str("mutants  no score: no mutant run got a verdict\n"),
        }
        worker_sandbox::explain::terminal_safe(&out)
    }
}

fn root_error(path: &Path, detail: impl std::fmt::Display) -> RehearseError {
    RehearseError::StagingRoot {
        path: path.to_owned(),
        detail: detail.to_string(),
    }
}

/// The text of a staged file, or `None` when it is too large or not UTF-8 (not mutated).
fn read_text(path: &Path) -> Result<Option<String>, RehearseError> {
    match artifact_fs::read_bounded(path, MAX_FILE_BYTES) {
        Ok(bytes) => Ok(String::from_utf8(bytes).ok()),
        Err(artifact_fs::ReadError::TooLarge { .. }) => Ok(None),
        Err(e) => Err(root_error(path, e.into_io())),
    }
}

/// Every candidate of the staged `source` against the staged `base`, and the number of
/// changed lines in files a mutator knows.
fn all_candidates(
    base: &Path,
    source: &Path,
    limits: TreeLimits,
) -> Result<(Vec<Candidate>, usize), RehearseError> {
    let (files, _) = verifier_sdk::digest::list_tree(source, limits)
        .map_err(|e| root_error(source, format!("listing the staged source: {e}")))?;
    let mut all = Vec::new();
    let mut changed = 0;
    for file in files {
        if lang_of(&file.rel_path).is_none() || is_test_path(&file.rel_path) {
            continue;
        }
        let Some(new) = read_text(&source.join(&file.rel_path))? else {
            continue;
        };
        let base_path = base.join(&file.rel_path);
        let old = match fs::symlink_metadata(&base_path) {
            Ok(meta) if meta.is_file() => match read_text(&base_path)? {
                Some(text) => Some(text),
                None => continue,
            },
            _ => None,
        };
        if old.as_deref() == Some(new.as_str()) {
            continue;
        }
        let (old_lines, new_lines) = (text_lines(old.as_deref().unwrap_or("")), text_lines(&new));
        changed += diff::changed_lines(&old_lines, &new_lines).len();
        all.extend(candidates_of_file(&file.rel_path, old.as_deref(), &new));
    }
    Ok((all, changed))
}

/// The staged source with one line of one file replaced (or removed); every other file a hard
/// link to the staged one, which is read-only and never rewritten.
fn build_tree(
    source: &Path,
    dest: &Path,
    limits: TreeLimits,
    mutant: &Candidate,
) -> Result<(), RehearseError> {
    let (files, dirs) = verifier_sdk::digest::list_tree(source, limits)
        .map_err(|e| root_error(source, format!("listing the staged source: {e}")))?;
    fs::create_dir(dest).map_err(|e| root_error(dest, e))?;
    for dir in &dirs {
        fs::create_dir(dest.join(dir)).map_err(|e| root_error(&dest.join(dir), e))?;
    }
    for file in &files {
        let from = source.join(&file.rel_path);
        let to = dest.join(&file.rel_path);
        if file.rel_path != mutant.file {
            if fs::hard_link(&from, &to).is_err() {
                fs::copy(&from, &to).map_err(|e| root_error(&to, e))?;
            }
            continue;
        }
        let text = read_text(&from)?
            .ok_or_else(|| root_error(&from, "the mutated file is no longer text"))?;
        let mut out = String::with_capacity(text.len());
        for (i, line) in text.split_inclusive('\n').enumerate() {
            if i + 1 != mutant.line {
                out.push_str(line);
                continue;
            }
            let ending = &line[line.trim_end_matches(['\r', '\n']).len()..];
            if let Some(new) = &mutant.mutated {
                out.push_str(new);
                out.push_str(ending);
            }
        }
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if file.executable { 0o755 } else { 0o644 })
            .open(&to)
            .and_then(|mut f| f.write_all(out.as_bytes()))
            .map_err(|e| root_error(&to, e))?;
    }
    Ok(())
}

/// Builds and stages each mutant's tree; the trees live in the returned directory, inside the
/// staging root (on its filesystem, so kept files are hard links), until it is dropped.
fn stage_mutants(
    source: &Path,
    root: &Path,
    limits: TreeLimits,
    chosen: &[Candidate],
) -> Result<(tempfile::TempDir, Vec<Sha256Digest>), RehearseError> {
    let work = tempfile::Builder::new()
        .prefix("mutants-")
        .tempdir_in(root)
        .map_err(|e| root_error(root, e))?;
    let mut trees = Vec::with_capacity(chosen.len());
    for (i, mutant) in chosen.iter().enumerate() {
        let dir = work.path().join(format!("mutant-{}", i + 1));
        build_tree(source, &dir, limits, mutant)?;
        let staged = stage_tree(StageKind::Source, &dir, root, limits, &mut NoProgress).map_err(
            |source| RehearseError::Stage {
                what: "mutant",
                source,
            },
        )?;
        trees.push(staged.snapshot.digest);
    }
    Ok((work, trees))
}

/// Picks, builds, stages and runs the mutants, up to `mutants.parallel` at once; `verdict` is
/// the rehearsal's verdict on the solution (a score only means something when it passes).
pub async fn run_mutants(
    executor: &Executor,
    prepared: &Prepared,
    options: &RehearseOptions,
    mutants: &MutantOptions,
    verdict: Verdict,
) -> Result<Mutation, RehearseError> {
    let seed = mutants.seed;
    if verdict != Verdict::Passed {
        let why = format!(
            "the solution's verdict is {}: a mutant failing says nothing until the solution \
             passes",
            verdict.as_str()
        );
        return Ok(Mutation::not_judged(seed, mutants, why, 0));
    }
    let Some(base_digest) = prepared.commit.base_snapshot_digest else {
        let why = "no --base: the changed lines are those of the solution against the base".into();
        return Ok(Mutation::not_judged(seed, mutants, why, 0));
    };
    let root = &options.staging_root;
    let limits = prepared.manifest.source_limits();
    let staged = |digest: &Sha256Digest, what: &str| {
        verify_staged(root, StageKind::Source, digest, limits)
            .map_err(|e| root_error(root, format!("the staged {what}: {e}")))
    };
    let source = staged(&prepared.commit.source_snapshot_digest, "source")?;
    let base = staged(&base_digest, "base")?;
    let (all, changed_lines) = all_candidates(&base, &source, limits)?;
    let candidates = all.len();
    let chosen = select(
        all,
        usize::try_from(mutants.count).unwrap_or(usize::MAX),
        seed,
    );
    if chosen.is_empty() {
        let why = "the solution changes no line a mutator applies to (code in a known language, \
                   tests left out)"
            .into();
        let mut none = Mutation::not_judged(seed, mutants, why, candidates);
        none.changed_lines = changed_lines;
        return Ok(none);
    }
    // Removed when dropped, after the runs.
    let (_work, trees) = stage_mutants(&source, root, limits, &chosen)?;
    let mut runs = Runs::new(options, Slots::new(mutants.parallel));
    let step = format!(
        "{} mutant(s), {} at a time",
        chosen.len(),
        mutants.parallel.get()
    );
    runs.steps.started(&step);
    let labels: Vec<String> = (1..=trees.len())
        .map(|i| format!("rehearse-mutant-{i}"))
        .collect();
    // `buffered` yields in the order given whatever order the runs end in, and each fate is
    // its own run's: the report does not depend on timing.
    let results: Vec<Result<RunResult, RehearseError>> = {
        let runs = &runs;
        futures_util::stream::iter(trees.iter().zip(&labels).enumerate())
            .map(|(i, (digest, label))| {
                let run = u32::try_from(i + 1).unwrap_or(u32::MAX);
                run_once(executor, prepared, runs, *digest, run, label)
            })
            .buffered(mutants.parallel.get())
            .collect()
            .await
    };
    let mut done = Vec::with_capacity(results.len());
    for ((i, mutant), (result, digest)) in chosen
        .iter()
        .enumerate()
        .zip(results.into_iter().zip(&trees))
    {
        let run = match result {
            Ok(run) => run,
            Err(error) => {
                runs.steps.finished(&step, &format!("error: {error}"));
                return Err(error);
            }
        };
        done.push(MutantResult {
            id: i + 1,
            file: mutant.file.clone(),
            line: mutant.line,
            mutator: mutant.mutator,
            diff: mutant.unified_diff(),
            fate: fate_of(&run),
            status: run.explanation.status,
            reason: run.explanation.reason,
            source_snapshot_digest: *digest,
            evidence_path: run.evidence_path,
        });
    }
    let mutation = Mutation {
        seed,
        asked: mutants.count,
        candidates,
        changed_lines,
        parallel: mutants.parallel.get(),
        not_judged: None,
        mutants: done,
        killed: 0,
        did_not_build: 0,
        survived: 0,
        no_verdict: 0,
        score_percent: None,
        weak: None,
    }
    .scored();
    let summary = match mutation.score_percent {
        Some(score) => format!("score {score} %, {} survived", mutation.survived),
        None => "no score".into(),
    };
    runs.steps.finished(&step, &summary);
    Ok(mutation)
}

#[cfg(test)]
mod tests;
