//! Test-only: the Prometheus project's own `promtool check metrics` (Debian's `prometheus`
//! package, which `scripts/services.sh` installs) over a text exposition, so the metrics a
//! binary writes are held to what Prometheus itself accepts rather than to this project's
//! reading of the format. A missing promtool fails the calling test, never skips it.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// Runs `promtool check metrics` on `text` and panics (failing the calling test) unless it
/// succeeds and says nothing: no error, no lint (a missing `# HELP`, a counter without
/// `_total`, …). `context` names the text in the failure.
///
/// # Panics
///
/// When promtool cannot be started, exits non-zero or prints anything.
pub fn check_metrics(context: &str, text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "promtool could not be started ({e}): install Debian's `prometheus` package \
                 (scripts/services.sh installs it)"
            )
        });
    // promtool reads all of stdin before it answers; a write it cut short shows in its answer.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("promtool check metrics did not finish ({e})"));
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics on {context}: {}\n{}{}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(test)]
mod tests {
    use super::check_metrics;

    #[test]
    fn a_clean_exposition_passes() {
        check_metrics(
            "a clean counter",
            "# HELP demo_runs_total Runs.\n# TYPE demo_runs_total counter\ndemo_runs_total 3\n",
        );
    }

    /// A counter not named `_total` is one of promtool's lints: the check must not pass it.
    #[test]
    #[should_panic(expected = "promtool check metrics on a counter promtool lints")]
    fn a_linted_exposition_fails_the_test() {
        check_metrics(
            "a counter promtool lints",
            "# HELP demo_runs Runs.\n# TYPE demo_runs counter\ndemo_runs 3\n",
        );
    }
}
