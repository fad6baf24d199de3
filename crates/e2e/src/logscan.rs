//! The log scan of issue #46 item 5, one for every route (the scenarios, the dedicated and
//! independent routes, the chaos driver): every binary this crate starts logs JSON
//! ([`JSON_LOG_ENV`]), and afterwards what it wrote is read back. Each stderr line must be one
//! JSON object with a string `timestamp`, `level`, `target` and `message`; no file, stdout or
//! stderr, may hold a secret the run handed a binary (a private key, as hex in either case, with
//! or without `0x`) or a bearer token; a line naming a job carries its id as a field. Each
//! route's test also requires a minimum of log lines per process, so a scan of empty files
//! cannot pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The environment every binary this crate starts gets: JSON logs, at debug level so that the
/// scan also reads what an operator sees only when debugging.
pub const JSON_LOG_ENV: [(&str, &str); 4] = [
    ("VERIFIER_LOG_FORMAT", "json"),
    ("WORKER_LOG", "debug"),
    ("SIGNER_LOG", "debug"),
    ("KEEPER_LOG", "debug"),
];

/// Lines that are no log object shown per file; the rest are counted.
const SHOWN_PER_FILE: usize = 3;

/// The keys every JSON log line carries, each a string.
pub const LOG_FIELDS: [&str; 4] = ["timestamp", "level", "target", "message"];

/// Why `line`, one line of a binary's stderr, is not a log object (`None` when it is one). A
/// line whose message names a job must also carry that job id as a field of the event or of a
/// span it happened in: a log shipper filters by field, not by reading messages.
pub fn log_line_problem(line: &str) -> Option<String> {
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
        return Some("not a JSON object".into());
    };
    if let Some(f) = LOG_FIELDS
        .iter()
        .find(|f| !object.get(**f).is_some_and(Value::is_string))
    {
        return Some(format!("no string {f}"));
    }
    let message = object.get("message").and_then(Value::as_str).unwrap_or("");
    let mut in_fields = String::new();
    collect_strings(object.get("fields"), &mut in_fields);
    if let Some(Value::Array(spans)) = object.get("spans") {
        for span in spans {
            collect_strings(span.get("fields"), &mut in_fields);
        }
    }
    job_ids_in(message)
        .into_iter()
        .find(|id| !in_fields.contains(id))
        .map(|id| format!("job {id} only in the message, in no field"))
}

/// Every string (and number) under `value`, appended to `out` one per line.
fn collect_strings(value: Option<&Value>, out: &mut String) {
    match value {
        Some(Value::String(s)) => {
            out.push_str(s);
            out.push('\n');
        }
        Some(Value::Object(map)) => map.values().for_each(|v| collect_strings(Some(v), out)),
        Some(Value::Array(items)) => items.iter().for_each(|v| collect_strings(Some(v), out)),
        Some(other @ Value::Number(_)) => {
            out.push_str(&other.to_string());
            out.push('\n');
        }
        _ => {}
    }
}

/// The job ids (`<network>:0x<40 hex>:<bounty index>`, PROTOCOL.md) named in `text`.
pub fn job_ids_in(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == ':' || c == '-' || c == '_'))
        .map(|t| t.trim_end_matches(':'))
        .filter(|t| {
            let mut parts = t.split(':');
            let (Some(net), Some(addr), Some(index), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return false;
            };
            !net.is_empty()
                && addr.len() == 42
                && addr.starts_with("0x")
                && addr[2..].bytes().all(|b| b.is_ascii_hexdigit())
                && !index.is_empty()
                && index.bytes().all(|b| b.is_ascii_digit())
        })
        .collect()
}

/// A secret a binary was given, as it could show up in text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    /// Who it belongs to, for the report (never the value).
    pub who: String,
    /// Lowercase, without `0x`: matched against the lowercased text.
    needle: String,
}

impl Secret {
    /// A private key handed to a binary (hex, either case, with or without `0x`). `None` for an
    /// empty value, which would match everything.
    pub fn key(who: impl Into<String>, hex: &str) -> Option<Self> {
        let needle = hex.trim().trim_start_matches("0x").to_ascii_lowercase();
        (!needle.is_empty()).then(|| Self {
            who: who.into(),
            needle,
        })
    }
}

/// Where a bearer token would show: `bearer ` followed by a token (RFC 6750's characters, at
/// least [`TOKEN_MIN`] of them, so that the word in a sentence is not one), in any case.
fn bearer_token(lower: &str) -> bool {
    lower.match_indices("bearer ").any(|(at, m)| {
        lower[at + m.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-._~+/=".contains(*c))
            .count()
            >= TOKEN_MIN
    })
}

/// The shortest run of token characters after `bearer ` taken for a token.
const TOKEN_MIN: usize = 16;

/// What one kept file held.
#[derive(Debug, Clone, Default)]
pub struct FileScan {
    /// The file's name.
    pub name: String,
    /// Whether it is a stderr log (its lines must be log objects).
    pub stderr: bool,
    /// Log objects it held (stderr only).
    pub log_lines: usize,
    /// Each problem: a line that is no log object, a secret, a bearer token.
    pub problems: Vec<String>,
    /// The file's last line when it is no log object and has no newline: a write cut short.
    /// A SIGKILL does that (the kernel stops a long write between pages once a fatal signal is
    /// pending), so it is no problem in the log of a process a fault killed, and one anywhere
    /// else.
    pub cut_short: Option<String>,
}

/// Asserts that `process`'s `stderr` is JSON logs (issue #46 item 5, the scan every e2e route
/// shares): every line a log object, at least one, no bearer token.
pub fn assert_json_logs(process: &str, stderr: &[u8]) {
    let scan = scan_bytes(process, stderr, true, &[]);
    assert!(scan.problems.is_empty(), "{}", scan.problems.join("\n"));
    assert!(scan.log_lines > 0, "{process} logged nothing");
}

/// Scans `bytes`, the file `name`; `stderr` says whether its lines must be log objects.
pub fn scan_bytes(name: &str, bytes: &[u8], stderr: bool, secrets: &[Secret]) -> FileScan {
    let text = String::from_utf8_lossy(bytes);
    let lower = text.to_ascii_lowercase();
    let mut scan = FileScan {
        name: name.to_owned(),
        stderr,
        ..FileScan::default()
    };
    for secret in secrets.iter().filter(|s| lower.contains(&s.needle)) {
        scan.problems
            .push(format!("{name} holds the {}", secret.who));
    }
    if bearer_token(&lower) {
        scan.problems.push(format!("{name} holds a bearer token"));
    }
    if stderr {
        let mut bad = Vec::new();
        let unterminated = !text.ends_with('\n');
        let mut lines = text.lines().filter(|l| !l.trim().is_empty()).peekable();
        while let Some(line) = lines.next() {
            match log_line_problem(line) {
                None => scan.log_lines += 1,
                Some(why) if unterminated && lines.peek().is_none() => {
                    scan.cut_short = Some(format!("{name}: {why}: {line}"));
                }
                Some(why) => bad.push(format!("{why}: {line}")),
            }
        }
        // The first few name the problem; a binary that logs text would list every line.
        let shown = bad.len().min(SHOWN_PER_FILE);
        for b in &bad[..shown] {
            scan.problems.push(format!("{name}: {b}"));
        }
        if bad.len() > shown {
            scan.problems.push(format!(
                "{name}: {} more line(s) that are no log object",
                bad.len() - shown
            ));
        }
    }
    scan
}

/// Every kept file of a directory, scanned.
#[derive(Debug, Clone, Default)]
pub struct LogScan {
    /// The directory.
    pub dir: PathBuf,
    /// Its files, by name.
    pub files: Vec<FileScan>,
}

/// Why a directory could not be scanned.
#[derive(Debug, thiserror::Error)]
#[error("could not scan the logs in {dir}: {source}", dir = dir.display())]
pub struct ScanError {
    /// The directory.
    pub dir: PathBuf,
    /// The OS error.
    pub source: std::io::Error,
}

impl LogScan {
    /// Scans every regular file directly in `dir`; `*.stderr` files are logs.
    pub fn dir(dir: &Path, secrets: &[Secret]) -> Result<Self, ScanError> {
        let fail = |source| ScanError {
            dir: dir.to_owned(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(fail)? {
            let path = entry.map_err(fail)?.path();
            if !std::fs::symlink_metadata(&path).map_err(fail)?.is_file() {
                continue;
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let bytes = std::fs::read(&path).map_err(fail)?;
            let stderr = path.extension().is_some_and(|e| e == "stderr");
            files.push(scan_bytes(&name, &bytes, stderr, secrets));
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Self {
            dir: dir.to_owned(),
            files,
        })
    }

    /// Log objects per binary (`worker`, `signer`, `keeper`), and the number of its processes.
    pub fn per_binary(&self) -> BTreeMap<String, (usize, usize)> {
        let mut out: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for f in self.files.iter().filter(|f| f.stderr) {
            let entry = out.entry(binary_of(&f.name).to_owned()).or_default();
            entry.0 += f.log_lines;
            entry.1 += 1;
        }
        out
    }

    /// Whether the process that wrote `name` was started again after it (`X.stderr` and
    /// `X-restart.stderr` of a chaos step whose fault fired, `X-N.stderr` and `X-N+1.stderr`
    /// of a supervised `worker serve`): a process killed early by its fault may have logged
    /// nothing, so the minimum does not hold for it.
    pub fn restarted(&self, name: &str) -> bool {
        let Some(stem) = name.strip_suffix(".stderr") else {
            return false;
        };
        let next = match stem.rsplit_once('-') {
            Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n
                .parse::<u64>()
                .map_or_else(|_| String::new(), |n| format!("{head}-{}.stderr", n + 1)),
            _ => format!("{stem}-restart.stderr"),
        };
        self.files.iter().any(|f| f.name == next)
    }

    /// Every problem found, and every process (stderr file) with fewer than `min_lines` log
    /// objects: a process whose log was not kept, or that logged nothing, scans clean
    /// vacuously.
    pub fn problems(&self, min_lines: usize) -> Vec<String> {
        self.problems_exempting(min_lines, |_| false)
    }

    /// [`Self::problems`] where a process may have been killed and started again
    /// ([`Self::restarted`]): the killed one may have logged nothing, or ended on a line its
    /// kill cut short ([`FileScan::cut_short`]).
    pub fn problems_of_killed_and_restarted(&self, min_lines: usize) -> Vec<String> {
        self.problems_exempting(min_lines, |name| self.restarted(name))
    }

    /// [`Self::problems`] of a chaos run: the minimum holds for every process not killed and
    /// restarted by a fault ([`Self::restarted`]), and each of `worker`, `signer` and `keeper`
    /// logged at least `min_lines` in all.
    pub fn problems_of_a_run_with_faults(&self, min_lines: usize) -> Vec<String> {
        let mut out = self.problems_of_killed_and_restarted(min_lines);
        let per = self.per_binary();
        for binary in ["worker", "signer", "keeper"] {
            let lines = per.get(binary).map_or(0, |(lines, _)| *lines);
            if lines < min_lines {
                out.push(format!("{binary}: {lines} log line(s) in the run"));
            }
        }
        out
    }

    fn problems_exempting(&self, min_lines: usize, exempt: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out: Vec<String> = self
            .files
            .iter()
            .flat_map(|f| {
                let cut = f.cut_short.iter().filter(|_| !exempt(&f.name));
                f.problems.iter().chain(cut).cloned()
            })
            .collect();
        for f in self
            .files
            .iter()
            .filter(|f| f.stderr && f.log_lines < min_lines && !exempt(&f.name))
        {
            out.push(format!(
                "{}: {} log line(s), fewer than {min_lines}",
                f.name, f.log_lines
            ));
        }
        out
    }
}

/// The binary a kept stderr file is of: the first of `worker`, `serve` (a `worker serve`),
/// `signer` and `keeper` among the dash-separated words of its name (`03-keeper-relay`,
/// `c1-pair-signer-2`, `c0-solo-serve-3`).
fn binary_of(name: &str) -> &'static str {
    name.split(['-', '.'])
        .find_map(|word| match word {
            "worker" | "serve" => Some("worker"),
            "signer" => Some("signer"),
            "keeper" => Some("keeper"),
            _ => None,
        })
        .unwrap_or("other")
}

/// What a chaos run's binaries wrote in `logs`: every stderr line a log object, no bearer
/// token, at least one log line from each process that was not restarted after a fault and
/// from each binary ([`LogScan::problems_of_a_run_with_faults`]). Keys are not looked for
/// here: the driver looks for them in every file of the run.
pub fn chaos_log_problems(logs: &Path) -> Vec<String> {
    match LogScan::dir(logs, &[]) {
        Ok(scan) => scan.problems_of_a_run_with_faults(1),
        Err(e) => vec![e.to_string()],
    }
}

/// Scans one binary's stderr log at `path`.
pub fn scan_stderr_file(path: &Path, secrets: &[Secret]) -> Result<FileScan, ScanError> {
    let bytes = std::fs::read(path).map_err(|source| ScanError {
        dir: path.to_owned(),
        source,
    })?;
    let name = path.display().to_string();
    Ok(scan_bytes(&name, &bytes, true, secrets))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str =
        r#"{"timestamp":"2026-01-01T00:00:00Z","level":"INFO","target":"keeper","message":"m"}"#;

    #[test]
    fn a_plain_text_line_or_one_without_a_field_is_no_log_object() {
        assert_eq!(log_line_problem(LINE), None);
        assert!(log_line_problem("keeper 0x90f7: 1 candidate(s)").is_some());
        assert!(log_line_problem("[1]").is_some());
        let no_target = r#"{"timestamp":"t","level":"INFO","message":"m"}"#;
        assert_eq!(
            log_line_problem(no_target).as_deref(),
            Some("no string target")
        );
    }

    #[test]
    fn a_job_named_only_in_the_message_is_a_problem_and_one_in_a_field_or_span_is_not() {
        let id = "base-mainnet:0x7ca7f29ac9022dbfd42c4b1ee491129386fbb662:1";
        assert_eq!(job_ids_in(&format!("  paid {id} [BountySettled]")), [id]);
        assert_eq!(job_ids_in(&format!("[1/6] {id}")), [id]);
        assert!(job_ids_in("signer 0x7ca7f29ac9022dbfd42c4b1ee491129386fbb662 on 8453").is_empty());
        let head = r#""timestamp":"t","level":"INFO","target":"keeper""#;
        let only_message = format!(r#"{{{head},"message":"  paid {id} [BountySettled]"}}"#);
        assert_eq!(
            log_line_problem(&only_message),
            Some(format!("job {id} only in the message, in no field"))
        );
        let field = format!(r#"{{{head},"message":"paid {id}","fields":{{"job_id":"{id}"}}}}"#);
        assert_eq!(log_line_problem(&field), None);
        let span = format!(
            r#"{{{head},"message":"[1/6] {id}","spans":[{{"name":"job","fields":"job_id={id}"}}]}}"#
        );
        assert_eq!(log_line_problem(&span), None);
    }

    #[test]
    fn a_key_in_any_case_or_a_bearer_token_is_found_and_an_empty_secret_matches_nothing() {
        let key = Secret::key("keeper key", "0xAbCd01").unwrap();
        assert!(Secret::key("empty", "0x").is_none());
        let leak = format!("{LINE}\n{{\"level\":\"DEBUG\",\"message\":\"0xABCD01\"}}\n");
        let scan = scan_bytes("03-keeper-relay.stderr", leak.as_bytes(), true, &[key]);
        assert_eq!(scan.log_lines, 1);
        assert_eq!(scan.problems.len(), 2, "{:?}", scan.problems);
        assert_eq!(
            scan.problems[0],
            "03-keeper-relay.stderr holds the keeper key"
        );
        let token = scan_bytes(
            "x.stdout",
            b"Authorization: Bearer abc.def-ghi_jkl~mno",
            false,
            &[],
        );
        assert_eq!(token.problems, ["x.stdout holds a bearer token"]);
        let word = scan_bytes("x.stdout", b"the bearer of this; bearer  ", false, &[]);
        assert!(word.problems.is_empty(), "{:?}", word.problems);
    }

    #[test]
    fn a_process_below_the_minimum_of_log_lines_is_a_problem() {
        let scan = LogScan {
            dir: PathBuf::new(),
            files: vec![
                scan_bytes("00-worker-serve.stderr", b"", true, &[]),
                scan_bytes("01-signer-sign.stderr", LINE.as_bytes(), true, &[]),
                scan_bytes("01-signer-sign.stdout", b"{}", false, &[]),
            ],
        };
        assert_eq!(
            scan.problems(1),
            ["00-worker-serve.stderr: 0 log line(s), fewer than 1"]
        );
        let per = scan.per_binary();
        assert_eq!(per.get("worker"), Some(&(0, 1)));
        assert_eq!(per.get("signer"), Some(&(1, 1)));
    }

    /// A SIGKILL can land inside the `write` of a long log line (the kernel stops a write to a
    /// file between pages when a fatal signal is pending): the killed process's file then ends
    /// in a cut line. That cut is the fault's, not the binary's, and only there, and only as the
    /// file's unterminated last line, is it no problem.
    #[test]
    fn a_log_line_cut_short_by_sigkill_is_the_faults_and_nowhere_else() {
        let cut = format!("{LINE}\n{}", &LINE[..40]);
        let file = |name: &str, text: &str| scan_bytes(name, text.as_bytes(), true, &[]);
        let scan = LogScan {
            dir: PathBuf::new(),
            files: vec![
                file("c1-pair-worker.stderr", &cut),
                file("c1-pair-worker-restart.stderr", LINE),
                file("c1-pair-signer-1.stderr", &cut),
                file(
                    "c1-pair-keeper.stderr",
                    &format!("{}\n{LINE}\n", &LINE[..40]),
                ),
                file("c1-pair-keeper-restart.stderr", LINE),
            ],
        };
        let problems = scan.problems_of_a_run_with_faults(1);
        let cut_at = &LINE[..40];
        assert_eq!(
            problems,
            [
                format!("c1-pair-signer-1.stderr: not a JSON object: {cut_at}"),
                format!("c1-pair-keeper.stderr: not a JSON object: {cut_at}"),
            ]
        );
        // Outside a run with faults no process was killed, so a cut line is a problem.
        assert_eq!(scan.problems(1).len(), 3, "{:?}", scan.problems(1));
        assert_eq!(scan.files[0].log_lines, 1);
    }

    #[test]
    fn a_chaos_process_restarted_after_its_fault_may_be_silent_and_others_may_not() {
        let file = |name: &str, text: &str| scan_bytes(name, text.as_bytes(), true, &[]);
        let scan = LogScan {
            dir: PathBuf::new(),
            files: vec![
                file("c0-pair-keeper.stderr", ""),
                file("c0-pair-keeper-restart.stderr", LINE),
                file("c0-pair-serve-1.stderr", ""),
                file("c0-pair-serve-2.stderr", ""),
                file("c0-pair-signer-1.stderr", ""),
            ],
        };
        assert!(scan.restarted("c0-pair-keeper.stderr"));
        assert!(scan.restarted("c0-pair-serve-1.stderr"));
        assert!(!scan.restarted("c0-pair-serve-2.stderr"));
        assert!(!scan.restarted("c0-pair-signer-1.stderr"));
        assert_eq!(
            scan.problems_of_a_run_with_faults(1),
            [
                "c0-pair-serve-2.stderr: 0 log line(s), fewer than 1",
                "c0-pair-signer-1.stderr: 0 log line(s), fewer than 1",
                "worker: 0 log line(s) in the run",
                "signer: 0 log line(s) in the run",
            ]
        );
        assert_eq!(binary_of("c1-solo-serve-3.stderr"), "worker");
        assert_eq!(binary_of("00-worker-reproduce.stderr"), "worker");
        assert_eq!(binary_of("03-keeper-relay.stderr"), "keeper");
    }
}
