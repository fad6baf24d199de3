//! Turns an evidence record into a readable account of what happened: which limit stopped a
//! run and when, or what exit code and output a failure had. `worker rehearse` prints the same
//! explanation for each of its runs, and `worker explain` prints it for a stored record.
//!
//! The explanation reads only the record; it never re-decides the verdict (the record's own
//! `outcome` is the decision), so it cannot disagree with what a job run reported.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::evidence::EvidenceRecord;
use crate::hits::{Hit, Observed, hits};
use crate::{Decision, EVIDENCE_SCHEMA_VERSION, NoVerdictReason};
pub use worker_store::progress::terminal_safe;

/// Largest evidence file `explain` reads: two 32 KiB tails and the isolation profile fit many
/// times over, so only a wrong file gets near it.
pub const MAX_EVIDENCE_BYTES: u64 = 4 << 20;
/// Output lines of each stream shown for a failure.
pub const TAIL_LINES: usize = 12;
/// Bytes of each stream shown for a failure, whatever the line count.
pub const TAIL_BYTES: usize = 2048;
/// Per-test rows shown in an explanation (failing first; `--json` carries all).
pub const TESTS_SHOWN: usize = 20;

/// A readable summary of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// `passed`, `failed` or `no_verdict`.
    pub status: &'static str,
    /// The no-verdict reason's wire name, for a no-verdict run.
    pub reason: Option<&'static str>,
    /// The process's exit code, for a completed run.
    pub exit_code: Option<i64>,
    /// Wall time from start to observed stop, by our clock.
    pub duration_ms: Option<u64>,
    /// One sentence: what happened.
    pub headline: String,
    /// Supporting facts, one per line.
    pub details: Vec<String>,
    /// The end of stdout (at most [`TAIL_LINES`] lines), shown for failures and no-verdicts.
    pub stdout_tail: Option<String>,
    /// The end of stderr, likewise.
    pub stderr_tail: Option<String>,
    /// Limits the run met that the program saw only as an errno (pids, a full tmpfs, a
    /// read-only path, the network), observed or likely; beside the verdict, never changing it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<Hit>,
    /// Per-test outcomes the run's output printed (the record's `tests`), failing first;
    /// solver-controlled, beside the verdict and never changing it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<test_outcomes::TestReport>,
}

impl Explanation {
    /// The short word used in aligned tables.
    pub fn label(&self) -> String {
        match self.reason {
            Some(reason) => format!("no verdict ({reason})"),
            None => self.status.to_string(),
        }
    }

    /// Multi-line human text, each line prefixed with `indent`. Everything from the run is
    /// passed through [`terminal_safe`].
    pub fn render(&self, indent: &str) -> String {
        let mut out = format!("{indent}{}\n", terminal_safe(&self.headline));
        for line in &self.details {
            out.push_str(&format!("{indent}  {}\n", terminal_safe(line)));
        }
        self.tests_lines(indent, &mut out);
        for (name, tail) in [("stdout", &self.stdout_tail), ("stderr", &self.stderr_tail)] {
            if let Some(tail) = tail {
                out.push_str(&format!("{indent}  {name} (last lines):\n"));
                for line in tail.split('\n') {
                    out.push_str(&format!("{indent}    | {}\n", terminal_safe(line)));
                }
            }
        }
        out
    }

    /// The per-test lines, failing tests first (at most [`TESTS_SHOWN`] rows), placed before
    /// the tails by [`Explanation::render`].
    fn tests_lines(&self, indent: &str, out: &mut String) {
        if let Some(tests) = &self.tests {
            for line in test_outcomes::render::report_lines(tests, TESTS_SHOWN) {
                out.push_str(&format!("{indent}  {}\n", terminal_safe(&line)));
            }
        }
    }
}

/// `ms` in seconds with one decimal, rounded to the nearest tenth (495 ms is `0.5 s`, not the
/// `0.4 s` truncation gave).
pub fn seconds(ms: u64) -> String {
    let tenths = ms.saturating_add(50) / 100;
    format!("{}.{} s", tenths / 10, tenths % 10)
}

fn mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// How much of a run's output an explanation shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    /// Lines of each stream.
    pub lines: usize,
    /// Bytes of each stream, whatever the line count.
    pub bytes: usize,
    /// Show the output of a passing run too (`worker explain` does; a rehearsal report keeps
    /// passes short).
    pub passing: bool,
}

impl Default for Shown {
    fn default() -> Self {
        Self {
            lines: TAIL_LINES,
            bytes: TAIL_BYTES,
            passing: false,
        }
    }
}

impl Shown {
    /// `worker explain`: `lines` lines of each stream (all that the record holds with
    /// `None`), for every status.
    pub fn reading(lines: Option<usize>) -> Self {
        match lines {
            Some(lines) => Self {
                lines,
                bytes: lines
                    .saturating_mul(TAIL_BYTES / TAIL_LINES)
                    .max(TAIL_BYTES),
                passing: true,
            },
            None => Self {
                lines: usize::MAX,
                bytes: usize::MAX,
                passing: true,
            },
        }
    }
}

/// The last [`TAIL_LINES`] lines (and at most [`TAIL_BYTES`] bytes) of `text`, or `None` when
/// it is empty.
#[cfg(test)]
fn tail(text: &str, truncated: bool) -> Option<String> {
    tail_of(text, truncated, Shown::default())
}

/// The last `shown.lines` lines (and at most `shown.bytes` bytes) of `text`, or `None` when it
/// is empty.
fn tail_of(text: &str, truncated: bool, limit: Shown) -> Option<String> {
    let trimmed = text.trim_end_matches('\n');
    if trimmed.is_empty() {
        return None;
    }
    let lines: Vec<&str> = trimmed.lines().collect();
    let skip = lines.len().saturating_sub(limit.lines);
    let mut shown = lines
        .iter()
        .skip(skip)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if shown.len() > limit.bytes {
        let mut cut = shown.len() - limit.bytes;
        while !shown.is_char_boundary(cut) {
            cut += 1;
        }
        shown = shown.split_off(cut);
    }
    if truncated || skip > 0 {
        shown = format!("…\n{shown}");
    }
    Some(shown)
}

/// Explains one evidence record. Limit hits can only be read from its output here (`likely`);
/// a run that was watched passes what was observed to [`explain_observed`].
pub fn explain(evidence: &EvidenceRecord) -> Explanation {
    explain_observed(evidence, &Observed::default())
}

/// Explains one evidence record with what the kernel's counters showed while it ran.
pub fn explain_observed(evidence: &EvidenceRecord, observed: &Observed) -> Explanation {
    explain_shown(evidence, observed, Shown::default())
}

/// Explains one evidence record, showing as much output as `shown` asks for.
pub fn explain_shown(evidence: &EvidenceRecord, observed: &Observed, shown: Shown) -> Explanation {
    let request = &evidence.request;
    let found = if evidence.exit.started {
        let output = format!("{}\n{}", evidence.stdout.tail, evidence.stderr.tail);
        hits(observed, &output, request.pids_limit, request.tmpfs_bytes)
    } else {
        Vec::new()
    };
    let times = &evidence.timestamps;
    let duration_ms = match (times.start_ms, times.finish_ms) {
        (Some(start), Some(finish)) => Some(finish.saturating_sub(start)),
        _ => None,
    };
    let took = duration_ms
        .map(|ms| format!(" after {}", seconds(ms)))
        .unwrap_or_default();
    let output_bytes = evidence.stdout.bytes.saturating_add(evidence.stderr.bytes);
    let mut details = Vec::new();
    match evidence.resources.peak_memory_bytes {
        Some(peak) => details.push(format!(
            "peak memory {} of the {} limit",
            mib_rounded(peak),
            mib(request.memory_bytes)
        )),
        // The reading is taken while the container runs; a run over before the first reading
        // has none. Said, so that a missing line is not read as "no memory used".
        None if evidence.exit.started => {
            details.push(peak_not_measured(duration_ms, request.memory_bytes));
        }
        None => {}
    }
    // A run that never started has no output worth a line.
    if evidence.exit.started {
        details.push(format!(
            "output {} bytes (stdout {}, stderr {}) of the {}-byte cap",
            output_bytes, evidence.stdout.bytes, evidence.stderr.bytes, request.max_output_bytes
        ));
    }
    details.extend(found.iter().map(|h| h.message.clone()));
    let stdout_tail = tail_of(&evidence.stdout.tail, evidence.stdout.tail_truncated, shown);
    let stderr_tail = tail_of(&evidence.stderr.tail, evidence.stderr.tail_truncated, shown);
    let (pass_stdout, pass_stderr) = if shown.passing {
        (stdout_tail.clone(), stderr_tail.clone())
    } else {
        (None, None)
    };
    match &evidence.outcome {
        Decision::Completed { exit_code } if *exit_code == 0 => Explanation {
            status: "passed",
            reason: None,
            exit_code: Some(0),
            duration_ms,
            headline: format!(
                "passed: the command exited 0{}",
                duration_ms
                    .map(|ms| format!(" in {}", seconds(ms)))
                    .unwrap_or_default()
            ),
            details,
            stdout_tail: pass_stdout,
            stderr_tail: pass_stderr,
            hits: found,
            tests: evidence.tests.clone(),
        },
        Decision::Completed { exit_code } => Explanation {
            status: "failed",
            reason: None,
            exit_code: Some(*exit_code),
            duration_ms,
            headline: format!(
                "failed: the command exited {exit_code}{}{}",
                duration_ms
                    .map(|ms| format!(" in {}", seconds(ms)))
                    .unwrap_or_default(),
                exit_hint(*exit_code)
            ),
            details,
            stdout_tail,
            stderr_tail,
            hits: found,
            tests: evidence.tests.clone(),
        },
        Decision::NoVerdict { reason, detail } => {
            if let Some(line) = limit_line(*reason, request) {
                details.insert(0, line);
            }
            let headline = match reason {
                NoVerdictReason::Timeout => format!(
                    "no verdict: stopped by the {} timeout{took}",
                    seconds(request.timeout_ms).replace(".0 s", " s")
                ),
                NoVerdictReason::OutputLimit => format!(
                    "no verdict: killed: stdout+stderr passed the {}-byte cap{took} ({} bytes \
                     seen)",
                    request.max_output_bytes, output_bytes
                ),
                NoVerdictReason::Oom => format!(
                    "no verdict: out of memory at the {} limit{took}",
                    mib(request.memory_bytes)
                ),
                // A failed pull already carries the engine's reason; `--pull` again would not help.
                NoVerdictReason::ImageMissing if detail.contains(crate::PULL_FAILED) => {
                    format!("no verdict (image_missing): {detail}")
                }
                NoVerdictReason::ImageMissing => format!(
                    "no verdict (image_missing): {detail} (build or pull it; `worker rehearse \
                     --pull` fetches it by its pinned digest)"
                ),
                other => format!("no verdict ({}): {detail}", other.as_str()),
            };
            Explanation {
                status: "no_verdict",
                reason: Some(reason.as_str()),
                exit_code: None,
                duration_ms,
                headline,
                details,
                stdout_tail,
                stderr_tail,
                hits: found,
                tests: evidence.tests.clone(),
            }
        }
    }
}

pub use crate::hits::AUTHOR_SETS_IT;

/// The manifest field behind a sandbox limit that ended a run, its value, who can change it
/// and what the solver can do.
fn limit_line(reason: NoVerdictReason, request: &crate::evidence::RequestFacts) -> Option<String> {
    let (field, value, note, solver) = match reason {
        NoVerdictReason::Timeout => (
            "timeout_seconds",
            (request.timeout_ms / 1000).to_string(),
            "",
            "make the tests finish sooner",
        ),
        NoVerdictReason::OutputLimit => (
            "max_output_bytes",
            request.max_output_bytes.to_string(),
            " (stdout and stderr together)",
            "print less (no debug output, no dumps of large values)",
        ),
        NoVerdictReason::Oom => (
            "memory_bytes",
            format!("{} ({})", request.memory_bytes, mib(request.memory_bytes)),
            " (no swap; files written to the /tmp and /tmp/home tmpfs count against it too)",
            "use less memory, or write less to /tmp",
        ),
        _ => return None,
    };
    Some(limit_sentence(field, &value, note, solver))
}

/// `limit: field = value in the runner manifest…; only the bounty author…; the solver can …`.
pub fn limit_sentence(field: &str, value: &str, note: &str, solver: &str) -> String {
    format!(
        "limit: {field} = {value} in the runner manifest{note}; {AUTHOR_SETS_IT}; the solver can {solver}"
    )
}

fn mib_rounded(bytes: u64) -> String {
    let tenths = u128::from(bytes) * 10 / (1 << 20);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

/// A hint for exit codes that usually mean "the program could not run" rather than "a test
/// failed", so authors do not mistake a broken manifest for a failing solution.
fn exit_hint(code: i64) -> &'static str {
    match code {
        126 => " (126: the program exists but could not be executed — permissions or format?)",
        127 => " (127: the program was not found in the image)",
        137 => " (137: killed by SIGKILL from inside the container)",
        139 => " (139: segmentation fault)",
        _ => "",
    }
}

/// What ran, for `worker explain`: image and digests, command, the engine, the container and
/// the times, one `name  value` line each.
pub fn what_ran(evidence: &EvidenceRecord) -> Vec<String> {
    let mut rows: Vec<(&str, String)> = Vec::new();
    match &evidence.image {
        Some(image) => {
            rows.push(("image", image.reference.clone()));
            rows.push(("image id", image.id.clone()));
            rows.push(("platform", image.platform.clone()));
        }
        None => rows.push(("image", "(not resolved)".into())),
    }
    rows.push((
        "command",
        serde_json::to_string(&evidence.request.argv).unwrap_or_default(),
    ));
    if let Some(isolation) = &evidence.isolation {
        for mount in &isolation.requested.mounts {
            // Staged trees live at `<root>/<kind>/sha256/<hex>`: the path names the digest.
            let digest = std::path::Path::new(&mount.source)
                .file_name()
                .and_then(|hex| hex.to_str())
                .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .map(|hex| format!("sha256:{hex}"));
            let name = match mount.target.as_str() {
                "/workspace" => "source",
                "/benchmark" => "benchmark",
                _ => "mount",
            };
            rows.push((
                name,
                match digest {
                    Some(digest) => format!("{digest} at {} ({})", mount.target, mount.source),
                    None => format!("{} from {}", mount.target, mount.source),
                },
            ));
        }
    }
    rows.push((
        "engine",
        format!(
            "{} (API {}, cgroup v{} {}, kernel {})",
            evidence.engine.version,
            evidence.engine.api_version,
            evidence.engine.cgroup_version,
            evidence.engine.cgroup_driver,
            evidence.engine.kernel_version
        ),
    ));
    if let Some(container) = &evidence.container {
        rows.push((
            "container",
            format!("{} ({})", container.name, container.id),
        ));
    }
    let t = &evidence.timestamps;
    if let Some(started) = &t.engine_started {
        rows.push(("started", format!("{started} (engine)")));
    }
    if let Some(finished) = &t.engine_finished {
        rows.push(("finished", format!("{finished} (engine)")));
    }
    if let (Some(start), Some(finish)) = (t.start_ms, t.finish_ms) {
        rows.push(("wall time", seconds(finish.saturating_sub(start))));
    }
    rows.push(("run id", evidence.run_id.clone()));
    rows.push(("worker", evidence.worker_version.clone()));
    rows.into_iter()
        .map(|(name, value)| format!("{name:<10}{value}"))
        .collect()
}

/// Why `worker explain` could not read a record (exit code 4).
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The file could not be read.
    #[error("reading evidence {path:?}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_EVIDENCE_BYTES`].
    #[error("evidence file is larger than {MAX_EVIDENCE_BYTES} bytes")]
    TooLarge,
    /// The file is not JSON.
    #[error("evidence file is not valid json: {0}")]
    Json(#[source] serde_json::Error),
    /// `schema_version` is missing or names another schema.
    #[error("evidence schema_version is {found:?}, expected {EVIDENCE_SCHEMA_VERSION:?}")]
    Schema {
        /// What the file says (truncated), or `None` when absent.
        found: Option<String>,
    },
    /// The schema matches but the record's shape does not.
    #[error("evidence record does not match {EVIDENCE_SCHEMA_VERSION}: {0}")]
    Shape(#[source] serde_json::Error),
}

/// Why a run that started has no peak memory, in the words the report shows. A limitation of
/// reading, not a failure: the worker reads the container's cgroup files every 20 ms (or, where
/// this host cannot read them, Docker's stats stream, whose first sample can come up to a second
/// after it is asked), and once the container has exited its cgroup is removed with it, so there
/// is no counter left to read at exit. A run that ends before the first reading has none.
pub fn peak_not_measured(duration_ms: Option<u64>, memory_bytes: u64) -> String {
    let took = duration_ms
        .map(|ms| format!(" after {}", seconds(ms)))
        .unwrap_or_default();
    format!(
        "peak memory not measured (of the {} limit): the run ended{took}, before the first \
         reading of its memory counter (the container's cgroup, read every 20 ms, or the \
         engine's stats stream, about once a second; no counter is left once the container \
         has exited)",
        mib(memory_bytes)
    )
}

/// Reads and parses an evidence record, checking its schema first so a wrong file gets a
/// clear message rather than a field-level parse error.
pub fn read_evidence(path: &Path) -> Result<EvidenceRecord, ExplainError> {
    let io = |source| ExplainError::Io {
        path: path.to_owned(),
        source,
    };
    let bytes = artifact_fs::read_named(path, MAX_EVIDENCE_BYTES).map_err(|e| match e {
        artifact_fs::ReadError::TooLarge { .. } => ExplainError::TooLarge,
        e => io(e.into_io()),
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(ExplainError::Json)?;
    match value.get("schema_version").and_then(Value::as_str) {
        Some(EVIDENCE_SCHEMA_VERSION) => {}
        other => {
            return Err(ExplainError::Schema {
                found: other.map(|s| s.chars().take(80).collect()),
            });
        }
    }
    serde_json::from_value(value).map_err(ExplainError::Shape)
}

/// Schema id of the `worker explain --json` summary: its own, not the evidence record's, since
/// the summary is not a record (`explain` refuses it as input).
pub const EXPLAIN_SCHEMA_VERSION: &str = "agent-bounties/regression-explain-v1";

/// The normalized summary `worker explain --json` prints.
pub fn summary_json(evidence: &EvidenceRecord, explanation: &Explanation) -> Value {
    serde_json::json!({
        "schema_version": EXPLAIN_SCHEMA_VERSION,
        "run_id": evidence.run_id,
        "executor": evidence.executor,
        "image": evidence.image.as_ref().map(|i| &i.reference),
        "argv": evidence.request.argv,
        "response_hash": evidence.response_hash,
        "outcome": evidence.outcome,
        "explanation": explanation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_escapes_headline_details_and_tails() {
        let explanation = Explanation {
            status: "failed",
            reason: None,
            exit_code: Some(1),
            duration_ms: None,
            headline: "failed: \u{1b}[2K".into(),
            details: vec!["d\r".into()],
            stdout_tail: Some("FAILED\n\u{1b}[1A\rPASSED".into()),
            stderr_tail: Some("x\r\ny".into()),
            hits: vec![],
            tests: None,
        };
        let text = explanation.render("  ");
        assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text:?}");
        assert!(text.contains("| \\e[1A\\rPASSED"), "{text}");
        assert!(text.contains("| x\\r\n"), "{text}");
    }

    /// Real-bounty re-run (issue 26): a bare "not measured" on 0.1–0.3 s runs did not say
    /// that this is the engine's sampling, not the run.
    #[test]
    fn peak_memory_not_measured_says_why_it_cannot_be() {
        let text = peak_not_measured(Some(180), 256 << 20);
        assert!(
            text.starts_with("peak memory not measured (of the 256 MiB limit)"),
            "{text}"
        );
        assert!(
            text.contains("after 0.18 s") || text.contains("after 0.2 s"),
            "{text}"
        );
        assert!(text.contains("before the first reading"), "{text}");
        assert!(text.contains("exited"), "{text}");
    }

    #[test]
    fn tail_keeps_the_last_lines_and_marks_a_cut() {
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let shown = tail(&text, false).unwrap();
        assert!(shown.starts_with("…\nline 19\n"), "{shown}");
        assert!(shown.ends_with("line 30"));
        assert_eq!(tail("", false), None);
        assert_eq!(tail("\n\n", false), None);
        assert_eq!(tail("one\n", false).as_deref(), Some("one"));
        assert_eq!(tail("one\n", true).as_deref(), Some("…\none"));
    }

    #[test]
    fn tail_is_bounded_in_bytes_even_for_one_huge_line() {
        let line = "é".repeat(10_000);
        let shown = tail(&line, false).unwrap();
        assert!(
            shown.len() <= TAIL_BYTES + "…\n".len() + 1,
            "{}",
            shown.len()
        );
    }

    #[test]
    fn seconds_and_sizes_read_naturally() {
        assert_eq!(seconds(2_049), "2.0 s");
        assert_eq!(seconds(340), "0.3 s");
        assert_eq!(seconds(495), "0.5 s");
        assert_eq!(seconds(9_960), "10.0 s");
        assert_eq!(mib(64 << 20), "64 MiB");
        assert_eq!(mib(1000), "1000 bytes");
        assert_eq!(mib_rounded(3_670_016), "3.5 MiB");
        assert_eq!(mib_rounded(3_670_015), "3.4 MiB");
    }

    #[test]
    fn unknown_schema_and_garbage_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.json");
        std::fs::write(&path, r#"{"schema_version":"other/v9"}"#).unwrap();
        let err = read_evidence(&path).unwrap_err().to_string();
        assert!(
            err.contains("other/v9") && err.contains("expected"),
            "{err}"
        );
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(read_evidence(&path), Err(ExplainError::Json(_))));
        std::fs::write(
            &path,
            format!(r#"{{"schema_version":"{EVIDENCE_SCHEMA_VERSION}"}}"#),
        )
        .unwrap();
        assert!(matches!(read_evidence(&path), Err(ExplainError::Shape(_))));
        std::fs::write(&path, vec![b' '; MAX_EVIDENCE_BYTES as usize + 1]).unwrap();
        assert!(matches!(read_evidence(&path), Err(ExplainError::TooLarge)));
    }
}
