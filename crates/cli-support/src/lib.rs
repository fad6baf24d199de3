//! Start-up conventions shared by `worker`, `signer` and `keeper`, so the three behave alike for
//! the people who run them: `--version` names the git revision, logs are filtered by one
//! variable per binary and carry no colour codes into files or pipes, and a closed stdout ends
//! the process quietly instead of with a panic. Under `--log-format json` their log lines and
//! their summaries for people alike are one JSON object per stderr line ([`eprint_human`]); the
//! signer's and keeper's `--metrics-file` share one text exposition ([`textfile`]), and the
//! three share one exit-code numbering ([`exit`]), as does `verify-provenance`.
//!
//! The binaries still do not depend on each other; this crate knows nothing about any of them.

use std::io::IsTerminal;

pub mod exit;
#[cfg(feature = "testing")]
pub mod testing;

/// `--version` text: the package version and the git revision the binary was built from
/// (`-modified` when the checkout had uncommitted changes, `unknown` outside git).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("VERIFIER_GIT_REVISION"),
    ")"
);

/// Ends the process quietly when its stdout reader has gone (`worker … | head -1`), as the
/// default SIGPIPE action would, while every other broken pipe stays an error the code handles.
///
/// Restoring SIGPIPE's default action process-wide (what this replaced) also armed it for
/// sockets: hyper writes requests to Docker's Unix socket with writev(2), which takes no
/// MSG_NOSIGNAL, so a daemon or server that closed a pooled connection killed a whole
/// `worker serve` at its next request (a paused fleet host, woken up, died that way). SIGPIPE
/// stays ignored (Rust's default); only the panic of `print!` on a gone stdout is turned into
/// the death by SIGPIPE a shell expects (status 141 under `set -o pipefail`), with no message.
pub fn quiet_broken_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout")
            && message.ends_with(
                &std::io::Error::from_raw_os_error(rustix::io::Errno::PIPE.raw_os_error())
                    .to_string(),
            )
        {
            die_of_sigpipe();
        }
        default(info);
    }));
}

/// For a write to stdout that failed: when its reader has gone, ends the process as
/// [`quiet_broken_stdout`] does; any other error returns, for the caller to report.
pub fn end_if_stdout_gone(error: &std::io::Error) {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        die_of_sigpipe();
    }
}

/// Ends the process by SIGPIPE with its default action, as a tool whose reader went away
/// ends; the signal is delivered before `kill` returns (POSIX), so nothing after it runs.
fn die_of_sigpipe() {
    sigpipe::reset();
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::PIPE);
}

/// The variable that picks the log format of every binary (`json` or `text`), for a unit's
/// environment file; a binary's `--log-format` wins over it.
pub const LOG_FORMAT_VAR: &str = "VERIFIER_LOG_FORMAT";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// For people: tracing's compact text.
    #[default]
    Text,
    /// For log shippers: one JSON object per line (`timestamp`, `level`, `target`, `message`,
    /// and the event's other fields under `fields`, the job and bounty ids among them).
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("log format {other:?}: expected text or json")),
        }
    }
}

impl LogFormat {
    /// `flag` when given, else [`LOG_FORMAT_VAR`], else text. An unknown value of the variable
    /// is text, with a line saying so (logging must start whatever the environment holds).
    pub fn choose(flag: Option<Self>) -> Self {
        if let Some(flag) = flag {
            return flag;
        }
        match std::env::var(LOG_FORMAT_VAR) {
            Ok(value) if !value.is_empty() => value.parse().unwrap_or_else(|e| {
                eprintln!("{LOG_FORMAT_VAR}: {e}; logging as text");
                Self::Text
            }),
            _ => Self::Text,
        }
    }
}

/// Logs to stderr, filtered by the variable `env_var` (tracing's env-filter syntax, e.g.
/// `WORKER_LOG=debug`; `default_filter` when unset or invalid). Colour only on a terminal and
/// never when `NO_COLOR` is set (<https://no-color.org>). The format is
/// [`LogFormat::choose`] without a flag.
pub fn init_logging(env_var: &str, default_filter: &str) {
    init_logging_as(env_var, default_filter, LogFormat::choose(None));
}

/// The format [`init_logging_as`] chose for this process (text before it ran).
pub fn log_format() -> LogFormat {
    CHOSEN_FORMAT.get().copied().unwrap_or_default()
}

static CHOSEN_FORMAT: std::sync::OnceLock<LogFormat> = std::sync::OnceLock::new();

/// Writes `text`, a command's summary for people, on stderr whatever the log filter: as it is
/// in text format; in JSON format each non-empty line as one object with the log lines' keys
/// (`timestamp`, `level` INFO, `target`, `message`), so that stderr stays one JSON object per
/// line for a log shipper.
pub fn eprint_human(target: &str, text: &str) {
    eprint_as("INFO", target, text);
}

/// Under `--json` (`json`), a command's `value` (its `what`: report, status) pretty-printed on
/// stdout. A value that cannot be encoded is the binary's own fault: said on stderr, and `Err`
/// for the caller to exit with its internal-error code.
pub fn print_json(
    json: bool,
    value: &impl serde::Serialize,
    binary: &str,
    what: &str,
) -> Result<(), serde_json::Error> {
    if !json {
        return Ok(());
    }
    let text = serde_json::to_string_pretty(value).inspect_err(|e| {
        eprint_error(binary, &format!("{binary}: cannot encode the {what}: {e}"));
    })?;
    println!("{text}");
    Ok(())
}

/// [`eprint_human`] for a failure the command reports on stderr (`level` ERROR in JSON).
pub fn eprint_error(target: &str, text: &str) {
    eprint_as("ERROR", target, text);
}

fn eprint_as(level: &str, target: &str, text: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(human_lines(log_format(), level, target, text).as_bytes());
}

/// What [`eprint_human`] and [`eprint_error`] write.
fn human_lines(format: LogFormat, level: &str, target: &str, text: &str) -> String {
    match format {
        LogFormat::Text if text.is_empty() || text.ends_with('\n') => text.to_owned(),
        LogFormat::Text => format!("{text}\n"),
        LogFormat::Json => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let mut fields = serde_json::Map::new();
                fields.insert("message".into(), line.into());
                // A summary line is about a job when it names one (`  paid <job id> …`); the id
                // goes in a field too, so a shipper can select a job's lines without parsing.
                let ids = job_ids_in(line);
                match ids.as_slice() {
                    [] => {}
                    [one] => {
                        fields.insert("job_id".into(), (*one).into());
                    }
                    many => {
                        fields.insert("job_ids".into(), many.to_vec().into());
                    }
                }
                let object =
                    json_log::line(json_log::timestamp(), level, target, fields, Vec::new());
                format!("{object}\n")
            })
            .collect(),
    }
}

/// The job ids (`<network>:0x<40 hex>:<bounty index>`, PROTOCOL.md) a line of text names.
fn job_ids_in(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_')))
        .map(|t| t.trim_end_matches(':'))
        .filter(|t| {
            let mut parts = t.split(':');
            let (Some(network), Some(address), Some(index), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return false;
            };
            !network.is_empty()
                && address.strip_prefix("0x").is_some_and(|hex| {
                    hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit())
                })
                && !index.is_empty()
                && index.bytes().all(|b| b.is_ascii_digit())
        })
        .collect()
}

/// [`init_logging`] in the given format.
pub fn init_logging_as(env_var: &str, default_filter: &str, format: LogFormat) {
    let _ = CHOSEN_FORMAT.set(format);
    // Unset, empty or invalid: the default, as before.
    let filter = std::env::var(env_var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(filter_directives(&v)).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(filter_directives(default_filter)));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder
            .with_ansi(use_colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            ))
            .init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .event_format(json_log::JsonLines)
            .init(),
    }
}

/// The Postgres client's debug records name every statement with its parameters (job ids in
/// the message, in no field, and whatever a query carries): a fleet host under `debug` would
/// log each lease transaction that way. They stay at `info` unless the filter names the crate.
const QUIET_DEPENDENCIES: &str = "tokio_postgres=info";

/// The filter `asked` with [`QUIET_DEPENDENCIES`] added unless it names that crate.
fn filter_directives(asked: &str) -> String {
    let asked = asked.trim();
    if asked.contains("tokio_postgres") {
        return asked.to_owned();
    }
    format!("{asked},{QUIET_DEPENDENCIES}")
}

mod json_log;
pub mod textfile;
pub mod version;

/// Schema id of the error object the binaries print on stdout under `--json`.
pub const ERROR_SCHEMA: &str = "agent-bounties/cli-error-v1";

/// The error object printed on stdout under `--json` when a command fails, so a caller that
/// parses stdout gets a JSON value in every case:
/// `{"schema_version": ERROR_SCHEMA, "error": {"code", "exit_code", "message"}}`. `code` is a
/// stable snake_case name of the failure class (the exit code's name); the stderr line is
/// printed as well.
pub fn error_json(code: &str, exit_code: u8, message: &str) -> String {
    serde_json::json!({
        "schema_version": ERROR_SCHEMA,
        "error": {"code": code, "exit_code": exit_code, "message": message},
    })
    .to_string()
}

/// Prints [`error_json`] as one line on stdout; a closed stdout is ignored (the stderr line
/// already said what failed).
pub fn print_error_json(code: &str, exit_code: u8, message: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stdout().lock(),
        "{}",
        error_json(code, exit_code, message)
    );
}

/// Whether the raw command line asks for JSON (`--json` before any `--`): used when clap itself
/// refuses the command line, before any parsed value exists.
pub fn json_requested<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> bool {
    args.into_iter()
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

const fn use_colour(stderr_is_terminal: bool, no_color: bool) -> bool {
    stderr_is_terminal && !no_color
}

#[cfg(test)]
mod tests {

    /// The fleet lane (`bounty-e2e chaos --fleet 3`, seed 1) broke `json_logs` under
    /// `WORKER_LOG=debug`: tokio_postgres logged "executing statement s5 with parameters:
    /// [\"base-mainnet:0x2222…:1\", 1]", a job id in the message and in no field.
    #[test]
    fn a_debug_filter_does_not_log_postgres_statements_with_their_parameters() {
        assert_eq!(
            super::filter_directives("debug"),
            "debug,tokio_postgres=info"
        );
        assert_eq!(
            super::filter_directives(" warn,worker_serve=info "),
            "warn,worker_serve=info,tokio_postgres=info"
        );
        // Asked for by name, it is the operator's to see.
        assert_eq!(
            super::filter_directives("debug,tokio_postgres=debug"),
            "debug,tokio_postgres=debug"
        );
        let filter = tracing_subscriber::EnvFilter::try_new(super::filter_directives("debug"));
        assert!(filter.is_ok());
    }

    #[test]
    fn a_summary_line_naming_a_job_carries_its_id_as_a_field() {
        let id = "base-mainnet:0x7ca7f29ac9022dbfd42c4b1ee491129386fbb662:1";
        let text =
            format!("keeper 0x7ca7f29ac9022dbfd42c4b1ee491129386fbb662: 1\n  paid {id} [X]\n");
        let json = human_lines(LogFormat::Json, "INFO", "keeper", &text);
        let lines: Vec<serde_json::Value> = json
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(lines[0].get("fields").is_none(), "{json}");
        assert_eq!(lines[1]["fields"]["job_id"], id);
    }

    #[test]
    fn a_summary_under_json_logs_is_one_log_object_per_line() {
        let text = "keeper 0xab on chain 1: 1 candidate(s)\n  paid   job \"x\"\n\nexit code 0\n";
        let json = human_lines(LogFormat::Json, "INFO", "keeper", text);
        let lines: Vec<serde_json::Value> = json
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{json}");
        assert_eq!(lines[1]["message"], "  paid   job \"x\"");
        assert_eq!(lines[2]["level"], "INFO");
        assert_eq!(lines[2]["target"], "keeper");
        assert!(
            lines[0]["timestamp"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        );
        assert_eq!(human_lines(LogFormat::Text, "INFO", "keeper", text), text);
        assert_eq!(
            human_lines(LogFormat::Text, "ERROR", "k", "k: failed"),
            "k: failed\n"
        );
    }
    use super::*;

    #[test]
    fn error_object_has_schema_code_and_message() {
        let v: serde_json::Value =
            serde_json::from_str(&error_json("invalid_input", 4, "bad \"x\"")).unwrap();
        assert_eq!(v["schema_version"], ERROR_SCHEMA);
        assert_eq!(v["error"]["code"], "invalid_input");
        assert_eq!(v["error"]["exit_code"], 4);
        assert_eq!(v["error"]["message"], "bad \"x\"");
    }

    #[test]
    fn json_is_requested_only_before_a_double_dash() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert!(json_requested(args(&["feed", "--json"])));
        assert!(!json_requested(args(&["feed", "--", "--json"])));
        assert!(!json_requested(args(&["feed", "--jsonx"])));
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, false));
        assert!(!use_colour(false, false));
        assert!(!use_colour(true, true));
        assert!(!use_colour(false, true));
    }

    #[test]
    fn version_names_a_revision() {
        assert!(VERSION.starts_with(env!("CARGO_PKG_VERSION")));
        assert!(VERSION.ends_with(')'), "{VERSION}");
        assert!(
            VERSION.len() > env!("CARGO_PKG_VERSION").len() + 3,
            "{VERSION}"
        );
    }
}
