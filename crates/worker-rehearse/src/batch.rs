//! `worker rehearse --batch tasks.json`: many bounties at once, one report over all of them (as
//! SWE-bench's report does), and optionally JUnit XML of it (as nextest writes it), so a
//! platform's whole set of bounties is re-checked by one command and read by any CI.
//!
//! Each task is rehearsed exactly as `worker rehearse` would rehearse it alone. Every task's
//! trees are staged first, in the file's order ([`prepare_tasks`]), then the tasks run side by
//! side ([`rehearse_batch`]): every container of every task is drawn from one limit, the host's
//! capacity the caller sizes as `worker serve` sizes a batch of jobs, and the rows come back in
//! the file's order. A task whose input is unusable (a missing tree, a bad manifest) is reported
//! as not rehearsed and the batch goes on; a fault of the machine (engine, staging root) ends
//! the batch, since every later task would meet it too.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verifier_sdk::RunnerManifest;

use super::exec::{Prepared, Slots};
use super::rehearsed::Rehearsed;
use super::report::{Answer, Verdict};
use super::run::rehearse_in;
use super::{RehearseError, RehearseOptions, revisions};
use worker_sandbox::Executor;

/// Schema of the `--batch --json` report; bump on any change of shape or meaning.
pub const BATCH_SCHEMA_VERSION: &str = "agent-bounties/regression-rehearsal-batch-v1";
/// Largest tasks file read.
pub const MAX_BATCH_BYTES: u64 = 1 << 20;
/// Most tasks one batch holds: a platform's funded bounties, not a benchmark corpus.
pub const MAX_TASKS: usize = 500;
/// Longest task name, in bytes (names head report rows and JUnit test cases).
pub const MAX_NAME_BYTES: usize = 128;

/// One task as the tasks file writes it; relative paths are read from the file's directory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSpec {
    name: String,
    source: PathBuf,
    benchmark: PathBuf,
    manifest: PathBuf,
    #[serde(default)]
    base: Option<PathBuf>,
    #[serde(default)]
    base_rev: Option<String>,
    #[serde(default)]
    rev: Option<String>,
    #[serde(default)]
    repeat: Option<u32>,
    #[serde(default)]
    adversarial: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    tasks: Vec<TaskSpec>,
}

/// Why a tasks file cannot be a batch (nothing is run).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The file could not be read.
    #[error("reading the tasks file {path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The path is a symbolic link, a FIFO, a device or a directory: nothing was read from it.
    #[error(
        "the tasks file {path:?} is not a regular file (a symbolic link, FIFO, device or \
         directory): name the file itself; its relative paths are read from its own directory"
    )]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_BATCH_BYTES`].
    #[error("the tasks file is larger than {MAX_BATCH_BYTES} bytes")]
    TooLarge,
    /// Not `{"tasks": [{name, source, benchmark, manifest, …}]}`.
    #[error(
        "the tasks file is not {{\"tasks\": [{{\"name\", \"source\", \"benchmark\", \"manifest\", \
         \"base\"?, \"base_rev\"?, \"rev\"?, \"repeat\"?, \"adversarial\"?}}]}}: {0}"
    )]
    Json(#[source] serde_json::Error),
    /// An empty list, or more than [`MAX_TASKS`].
    #[error("the tasks file has {0} tasks: give 1 to {MAX_TASKS} (no tasks is not a batch)")]
    Count(usize),
    /// A name that is empty, too long, has control characters, or is used twice.
    #[error("task name {name:?} {problem}")]
    Name {
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// Defaults from the command line, which every task's own keys override.
#[derive(Debug, Clone)]
pub struct BatchDefaults {
    /// Where every task is staged.
    pub staging_root: PathBuf,
    /// `--repeat`.
    pub repeat: u32,
    /// `--adversarial`.
    pub adversarial: bool,
    /// `--pull`.
    pub pull: bool,
    /// `--worktree`.
    pub worktree: bool,
    /// `--quiet`.
    pub quiet: bool,
    /// `--oci-runtime`: every task runs under the one runtime the executor was built for.
    pub oci_runtime: String,
    /// `--log-dir DIR`: each task writes its logs under `DIR/<task name>/`.
    pub log_dir: Option<PathBuf>,
}

/// One task ready to rehearse.
#[derive(Debug, Clone)]
pub struct BatchTask {
    /// Its name in the report.
    pub name: String,
    /// What `worker rehearse` would be given.
    pub options: RehearseOptions,
    /// Whether to run the stubs.
    pub adversarial: bool,
    /// A `--base DIR@REV` that does not parse, reported as the task's error.
    base_error: Option<String>,
}

/// Reads the tasks file: every task checked for shape and name before anything runs.
pub fn read_tasks(path: &Path, defaults: &BatchDefaults) -> Result<Vec<BatchTask>, BatchError> {
    // Opened without following a link (its relative paths are read from the directory the
    // path names, so a link would read them from elsewhere than its target's), without waiting
    // on a FIFO, judged on the open descriptor (a regular file) and read to at most the cap
    // (#41 item 6: a link to /dev/zero was read until memory ran out, and a FIFO hung).
    let bytes = artifact_fs::read_bounded(path, MAX_BATCH_BYTES).map_err(|e| match e {
        artifact_fs::ReadError::NotRegular(_) => BatchError::NotRegular {
            path: path.to_path_buf(),
        },
        artifact_fs::ReadError::TooLarge { .. } => BatchError::TooLarge,
        artifact_fs::ReadError::Io { source, .. } => BatchError::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let file: TaskFile = serde_json::from_slice(&bytes).map_err(BatchError::Json)?;
    if file.tasks.is_empty() || file.tasks.len() > MAX_TASKS {
        return Err(BatchError::Count(file.tasks.len()));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut names = BTreeSet::new();
    let count = file.tasks.len();
    let mut tasks = Vec::with_capacity(count);
    for (index, spec) in file.tasks.into_iter().enumerate() {
        let problem = if spec.name.is_empty() {
            Some("is empty")
        } else if spec.name.len() > MAX_NAME_BYTES {
            Some("is longer than 128 bytes")
        } else if spec.name.chars().any(char::is_control) {
            Some("has control characters")
        } else if !names.insert(spec.name.clone()) {
            Some("is used twice")
        } else if defaults.log_dir.is_some() && !is_one_component(&spec.name) {
            Some(
                "cannot name a directory under --log-dir: it holds a `/` or is `.` or `..` \
                 (rename the task, or leave out --log-dir)",
            )
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(BatchError::Name {
                name: spec.name,
                problem,
            });
        }
        let at = |p: &Path| dir.join(p);
        let (base, base_rev, base_error) = match &spec.base {
            Some(base) => match revisions::base_spec(&at(base), spec.base_rev.as_deref()) {
                Ok(b) => (Some(b.dir), b.rev, None),
                Err(e) => (None, None, Some(e.to_string())),
            },
            None => (None, None, None),
        };
        tasks.push(BatchTask {
            options: RehearseOptions {
                source: at(&spec.source),
                benchmark: at(&spec.benchmark),
                manifest: at(&spec.manifest),
                repeat: spec.repeat.unwrap_or(defaults.repeat),
                base,
                staging_root: defaults.staging_root.clone(),
                pull: defaults.pull,
                rev_explicit: spec.rev.is_some(),
                rev: spec.rev.unwrap_or_else(|| "HEAD".into()),
                base_rev,
                worktree: defaults.worktree,
                quiet: defaults.quiet,
                log_dir: defaults.log_dir.as_ref().map(|dir| dir.join(&spec.name)),
                oci_runtime: defaults.oci_runtime.clone(),
                task: Some(format!("task {}/{count} {}", index + 1, spec.name)),
            },
            adversarial: spec.adversarial.unwrap_or(defaults.adversarial),
            name: spec.name,
            base_error,
        });
    }
    Ok(tasks)
}

/// Whether `name` joined to a directory stays one level inside it: one normal path component,
/// so not `.`, `..`, absolute, or holding a `/` anywhere (`a/..` would leave by a later step).
fn is_one_component(name: &str) -> bool {
    use std::path::Component;
    let mut components = Path::new(name).components();
    !name.contains('/')
        && matches!(components.next(), Some(Component::Normal(c)) if c == name)
        && components.next().is_none()
}

/// What became of one task.
#[derive(Debug, Clone)]
pub enum TaskResult {
    /// It was rehearsed.
    Rehearsed(Box<Rehearsed>),
    /// Its input could not be rehearsed; the words say why.
    NotRehearsed(String),
}

/// One task's row in the batch.
#[derive(Debug, Clone)]
pub struct TaskEntry {
    /// The task's name.
    pub name: String,
    /// What became of it.
    pub result: TaskResult,
    /// The task's whole wall time: staging, every container (stubs included) and evidence,
    /// as JUnit's `time` means it; in a batch side by side, the waits for a free container
    /// slot too.
    pub elapsed: std::time::Duration,
}

/// The batch: every task's row, in the file's order.
#[derive(Debug, Clone)]
pub struct BatchReport {
    /// The rows.
    pub tasks: Vec<TaskEntry>,
}

/// One task staged and checked, before any container runs: its prepared manifest and trees,
/// or why its input cannot be rehearsed.
pub struct PreparedTask {
    task: BatchTask,
    prepared: Result<Prepared, String>,
    staging: std::time::Duration,
}

impl PreparedTask {
    /// The manifest its containers will run (what the batch's capacity is sized by); `None`
    /// for a task that will not be rehearsed.
    pub fn manifest(&self) -> Option<&RunnerManifest> {
        self.prepared.as_ref().ok().map(Prepared::manifest)
    }
}

/// Stages and checks every task, in the file's order. An input error is kept as the task's
/// row; any other error (staging root, store) ends the batch before any container runs.
pub fn prepare_tasks(tasks: Vec<BatchTask>) -> Result<Vec<PreparedTask>, RehearseError> {
    let mut prepared = Vec::with_capacity(tasks.len());
    for task in tasks {
        let started = std::time::Instant::now();
        let result = match &task.base_error {
            Some(error) => Err(error.clone()),
            None => match super::prepare(&task.options) {
                Ok(p) => Ok(p),
                Err(error) if error.is_input_error() => Err(error.to_string()),
                Err(error) => return Err(error),
            },
        };
        prepared.push(PreparedTask {
            task,
            prepared: result,
            staging: started.elapsed(),
        });
    }
    Ok(prepared)
}

/// Rehearses the prepared tasks side by side, every container of every task drawn from one
/// limit of `capacity` running at once (counted from start to stop; the tasks and the runs
/// inside each share it), up to `capacity` tasks started together. The rows are in the file's
/// order whatever order the tasks end in, and each is the one a sequential batch gives (at a
/// `capacity` of 1). An input error is the task's row; any other error (engine, staging root,
/// evidence) ends the batch with it: no task starts after it, the ones running are awaited
/// (no container is left to a dropped future), and the first such error in the file's order
/// is returned.
pub async fn rehearse_batch(
    executor: &Executor,
    tasks: Vec<PreparedTask>,
    capacity: NonZeroUsize,
) -> Result<BatchReport, RehearseError> {
    let slots = Slots::new(capacity);
    let stopped = AtomicBool::new(false);
    let count = tasks.len();
    // Unordered, so a long task holds up no later one; the rows are put back in order below.
    let mut done = futures_util::stream::iter(tasks.into_iter().enumerate())
        .map(|(i, task)| {
            let (slots, stopped) = (slots.clone(), &stopped);
            async move { (i, task_row(executor, task, capacity, slots, stopped).await) }
        })
        .buffer_unordered(capacity.get());
    let mut rows: Vec<Option<Result<Option<TaskEntry>, RehearseError>>> =
        std::iter::repeat_with(|| None).take(count).collect();
    while let Some((i, row)) = done.next().await {
        if let Some(slot) = rows.get_mut(i) {
            *slot = Some(row);
        }
    }
    let mut tasks = Vec::with_capacity(count);
    for row in rows.into_iter().flatten() {
        if let Some(entry) = row? {
            tasks.push(entry);
        }
    }
    Ok(BatchReport { tasks })
}

/// One task's row, or `None` when a fault of the machine stopped the batch before it started.
async fn task_row(
    executor: &Executor,
    task: PreparedTask,
    parallel: NonZeroUsize,
    slots: Slots,
    stopped: &AtomicBool,
) -> Result<Option<TaskEntry>, RehearseError> {
    if stopped.load(Ordering::SeqCst) {
        return Ok(None);
    }
    let started = std::time::Instant::now();
    let PreparedTask {
        task,
        prepared,
        staging,
    } = task;
    let result = match prepared {
        Err(error) => TaskResult::NotRehearsed(error),
        Ok(prepared) => {
            let options = &task.options;
            match rehearse_in(
                executor,
                prepared,
                options,
                task.adversarial,
                parallel,
                slots,
            )
            .await
            {
                Ok(rehearsed) => TaskResult::Rehearsed(Box::new(rehearsed)),
                Err(error) if error.is_input_error() => TaskResult::NotRehearsed(error.to_string()),
                Err(error) => {
                    stopped.store(true, Ordering::SeqCst);
                    return Err(error);
                }
            }
        }
    };
    Ok(Some(TaskEntry {
        name: task.name,
        result,
        elapsed: staging + started.elapsed(),
    }))
}

/// A task's answer as the batch words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskAnswer {
    /// What a bounty needs.
    Fit,
    /// A stub solution passed: a bounty on this benchmark would pay a non-solution.
    PaysNonSolution,
    /// The source fails the benchmark and no stub passed: there is no solution yet (an open
    /// bounty's unsolved tree), or the solution is wrong.
    NoSolutionYet,
    /// Answered, and not what a bounty needs (unstable, not discriminating, …).
    Unfit,
    /// No verdict: the question could not be answered.
    NoAnswer,
    /// The task's input could not be rehearsed.
    NotRehearsed,
}

/// A rehearsed task's answer: a failing source that no stub passed is "no solution yet",
/// apart from a benchmark that pays a non-solution and from other unfit answers.
pub fn task_answer(answer: Answer, verdict: Verdict) -> TaskAnswer {
    match answer {
        Answer::Fit => TaskAnswer::Fit,
        Answer::PaysNonSolution => TaskAnswer::PaysNonSolution,
        Answer::Unfit if verdict == Verdict::Failed => TaskAnswer::NoSolutionYet,
        Answer::Unfit => TaskAnswer::Unfit,
        Answer::NoAnswer => TaskAnswer::NoAnswer,
    }
}

/// The batch's answer, the worst of its tasks': any task that pays a non-solution makes it
/// [`Answer::PaysNonSolution`], else any unfit, unsolved or not rehearsed task
/// [`Answer::Unfit`], else any without an answer [`Answer::NoAnswer`], else [`Answer::Fit`].
impl BatchReport {
    /// See the impl's comment.
    pub fn answer(&self) -> Answer {
        let answers: Vec<TaskAnswer> = self.tasks.iter().map(TaskEntry::answer).collect();
        if answers.contains(&TaskAnswer::PaysNonSolution) {
            Answer::PaysNonSolution
        } else if answers.iter().any(|a| {
            matches!(
                a,
                TaskAnswer::Unfit | TaskAnswer::NoSolutionYet | TaskAnswer::NotRehearsed
            )
        }) {
            Answer::Unfit
        } else if answers.contains(&TaskAnswer::NoAnswer) {
            Answer::NoAnswer
        } else {
            Answer::Fit
        }
    }

    pub(super) fn count(&self, answer: TaskAnswer) -> usize {
        self.tasks.iter().filter(|t| t.answer() == answer).count()
    }

    /// The summary line: `batch: 5 tasks: 2 fit, 1 pay a non-solution, 1 no solution yet,
    /// 0 unfit, 0 no answer, 1 not rehearsed`.
    pub fn summary_line(&self) -> String {
        format!(
            "batch: {} tasks: {} fit, {} pay a non-solution, {} no solution yet, {} unfit, {} no \
             answer, {} not rehearsed",
            self.tasks.len(),
            self.count(TaskAnswer::Fit),
            self.count(TaskAnswer::PaysNonSolution),
            self.count(TaskAnswer::NoSolutionYet),
            self.count(TaskAnswer::Unfit),
            self.count(TaskAnswer::NoAnswer),
            self.count(TaskAnswer::NotRehearsed),
        )
    }

    /// The `--json` report ([`BATCH_SCHEMA_VERSION`]).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "schema_version": BATCH_SCHEMA_VERSION,
            "tasks": self.tasks.iter().map(TaskEntry::to_json).collect::<Vec<_>>(),
            "summary": {
                "tasks": self.tasks.len(),
                "fit": self.count(TaskAnswer::Fit),
                "pays_non_solution": self.count(TaskAnswer::PaysNonSolution),
                "no_solution_yet": self.count(TaskAnswer::NoSolutionYet),
                "unfit": self.count(TaskAnswer::Unfit),
                "no_answer": self.count(TaskAnswer::NoAnswer),
                "not_rehearsed": self.count(TaskAnswer::NotRehearsed),
            },
        })
    }
}

impl TaskEntry {
    /// This task's answer.
    pub fn answer(&self) -> TaskAnswer {
        match &self.result {
            TaskResult::NotRehearsed(_) => TaskAnswer::NotRehearsed,
            TaskResult::Rehearsed(r) => task_answer(r.answer(), r.report.verdict),
        }
    }

    /// `null`, `true` or `false`: whether a stub passed (`null` when stubs were not run or not
    /// judged).
    pub fn bypassable(&self) -> Option<bool> {
        match &self.result {
            TaskResult::Rehearsed(r) => r.adversarial.as_ref().and_then(|a| a.bypassable),
            TaskResult::NotRehearsed(_) => None,
        }
    }

    /// Seconds the whole task took, for JUnit's `time` (the sum of its containers' run times
    /// left out staging, the stubs and the evidence: a 5 s task showed 0.2 s).
    pub fn seconds(&self) -> f64 {
        self.elapsed.as_secs_f64()
    }

    fn to_json(&self) -> Value {
        match &self.result {
            TaskResult::NotRehearsed(error) => serde_json::json!({
                "name": self.name,
                "answer": self.answer(),
                "seconds": self.seconds(),
                "verdict": null,
                "stability": null,
                "discrimination": null,
                "bypassable": null,
                "adversarial": null,
                "commit": null,
                "not_checked": null,
                "problems": [],
                "error": error,
            }),
            TaskResult::Rehearsed(r) => {
                let report = &r.report;
                serde_json::json!({
                    "name": self.name,
                    "answer": self.answer(),
                    "seconds": self.seconds(),
                    "verdict": report.verdict,
                    "stability": report.stability,
                    "discrimination": report.discrimination,
                    "bypassable": self.bypassable(),
                    "adversarial": r.adversarial,
                    "commit": report.commit,
                    "not_checked": super::checks::not_checked(report, r.adversarial.is_some()),
                    "problems": report.problems,
                    "error": null,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{BatchDefaults, BatchError, MAX_BATCH_BYTES, is_one_component, read_tasks};
    use super::{TaskAnswer, task_answer};
    use crate::report::{Answer, Verdict};

    /// #42 item 8: a batch over a platform's bounties told "pays a non-solution" and "no
    /// solution yet" apart by nothing (both `UNFIT`, exit 4).
    #[test]
    fn the_batch_splits_pays_a_non_solution_from_no_solution_yet() {
        for (answer, verdict, task) in [
            (
                Answer::PaysNonSolution,
                Verdict::Failed,
                TaskAnswer::PaysNonSolution,
            ),
            (
                Answer::PaysNonSolution,
                Verdict::Passed,
                TaskAnswer::PaysNonSolution,
            ),
            (Answer::Unfit, Verdict::Failed, TaskAnswer::NoSolutionYet),
            (Answer::Unfit, Verdict::Unstable, TaskAnswer::Unfit),
            (Answer::Fit, Verdict::Passed, TaskAnswer::Fit),
        ] {
            assert_eq!(
                task_answer(answer, verdict),
                task,
                "{answer:?}, {verdict:?}"
            );
        }
    }
    use std::path::Path;
    use std::process::Command;

    fn defaults() -> BatchDefaults {
        BatchDefaults {
            staging_root: "/nonexistent-store".into(),
            repeat: 1,
            adversarial: false,
            pull: false,
            worktree: false,
            quiet: true,
            oci_runtime: "runc".into(),
            log_dir: None,
        }
    }

    fn refused(path: &Path) -> bool {
        matches!(
            read_tasks(path, &defaults()),
            Err(BatchError::NotRegular { .. })
        )
    }

    /// #41 item 6: a tasks file that is a link to `/dev/zero` was read until memory ran out
    /// (its size, 0, was checked on the path, then the read had no bound). The read happens in
    /// a child of this test under a 1 GiB address-space limit (`ulimit -v`), so an unbounded
    /// read ends there in a failed allocation, not in this machine running out of memory.
    #[test]
    fn rehearse_batch_refuses_a_tasks_file_linked_to_dev_zero() {
        test_child::read_dev_zero_link_in_child(
            "batch::tests::rehearse_batch_refuses_a_tasks_file_linked_to_dev_zero",
            "tasks.json",
            |link| {
                assert!(refused(link), "{:?}", read_tasks(link, &defaults()));
                // Named directly, the device is refused as well (judged on the open descriptor).
                assert!(refused(Path::new("/dev/zero")));
            },
        );
    }

    /// #41 item 6: a FIFO as the tasks file hung the command in `open` until something wrote
    /// to it. A writer is provided here so that today's code returns (with what it read)
    /// instead of hanging the test; the refusal must come from the file's type, before reading.
    #[test]
    fn a_fifo_tasks_file_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("tasks.json");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        // Unblocks a reader stuck in open (it opens the write end once a reader has opened the
        // read end, then closes it); never joined, since a refused FIFO has no reader to wait for.
        let writer_path = fifo.clone();
        std::thread::spawn(move || {
            let _ = std::fs::OpenOptions::new().write(true).open(writer_path);
        });
        let result = read_tasks(&fifo, &defaults());
        assert!(
            matches!(result, Err(BatchError::NotRegular { .. })),
            "the FIFO was opened and read (without the test's writer it would hang): {result:?}"
        );
    }

    /// A regular file over the cap is refused, by what the read gets as well as by its size.
    #[test]
    fn a_tasks_file_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = dir.path().join("tasks.json");
        std::fs::write(&tasks, vec![b' '; MAX_BATCH_BYTES as usize + 1]).unwrap();
        assert!(matches!(
            read_tasks(&tasks, &defaults()),
            Err(BatchError::TooLarge)
        ));
    }

    #[test]
    fn a_task_name_is_a_log_directory_only_when_it_is_one_component() {
        for ok in ["a", "example bad #2", "...", "a.b", "-x", ".hidden"] {
            assert!(is_one_component(ok), "{ok}");
        }
        for bad in [
            "", ".", "..", "/", "/abs", "a/b", "a/", "../x", "x/..", "./a",
        ] {
            assert!(!is_one_component(bad), "{bad}");
        }
    }
}
