//! Prometheus text exposition for the node exporter's textfile collector, shared by the signer
//! and the keeper: they run as jobs (each run a new process), so their metrics are a file
//! that each run rewrites, not an endpoint.
//!
//! Counters persist across runs through the file itself: a run reads the counters the previous
//! run wrote ([`previous_counter`]) and writes them back increased. A file that is missing,
//! unreadable or not ours starts the counters at zero again, which Prometheus treats as a
//! counter reset (`increase()` and `rate()` handle it), never as a negative jump.
//!
//! [`write`] is the one file step both share: the previous file read back (bounded, never
//! through a symlink) and the new one put in place atomically, through `artifact-fs`.
//! Values are whole numbers (counts, unix seconds, wei), so no float formatting is involved.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Largest previous metrics file read back; ours are a few hundred bytes.
const MAX_PREVIOUS_BYTES: u64 = 64 * 1024;

/// The metrics file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("--metrics-file {path:?}: {source}")]
pub struct MetricsError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Replaces the file at `path` with `exposition(previous)`, where `previous` is the text the
/// last run wrote there (empty when it cannot be read: gone, a symlink, too large, not UTF-8,
/// which restarts the counters). Atomic: the collector never reads half a file, and the
/// temporary name does not end in `.prom`.
pub fn write(path: &Path, exposition: impl FnOnce(&str) -> String) -> Result<(), MetricsError> {
    let previous = artifact_fs::read_bounded(path, MAX_PREVIOUS_BYTES)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    artifact_fs::write_atomic(path, exposition(&previous).as_bytes()).map_err(|source| {
        MetricsError {
            path: path.to_owned(),
            source,
        }
    })
}

/// A metric family's type line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only ever increases (across runs too, see the module docs); the name ends in `_total`.
    Counter,
    /// A value as of the end of the run.
    Gauge,
}

/// One metric family: its samples share the name, the help text and the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The metric name (Prometheus conventions: unit suffix, `_total` for counters).
    pub name: &'static str,
    /// The `# HELP` text (one line).
    pub help: &'static str,
    /// The `# TYPE`.
    pub kind: Kind,
    /// Samples: an optional single label (name, value) and the value.
    pub samples: Vec<(Option<(&'static str, &'static str)>, u128)>,
}

/// `<name>` = 1 with the label `build` = [`crate::VERSION`] (version and source commit): every
/// commit is version 0.1.0, so a file without the commit could not tell two builds apart after
/// an upgrade. `name` ends in `_build_info`, as Prometheus' info-metric convention has it.
pub fn build_info(name: &'static str, help: &'static str) -> Family {
    Family {
        name,
        help,
        kind: Kind::Gauge,
        samples: vec![(Some(("build", crate::VERSION)), 1)],
    }
}

/// The exposition of `families`, in the given order, ending with a newline (the collector
/// refuses a last line without one).
pub fn render(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {kind}", f.name);
        for (label, value) in &f.samples {
            match label {
                Some((k, v)) => {
                    let _ = writeln!(out, "{}{{{k}=\"{v}\"}} {value}", f.name);
                }
                None => {
                    let _ = writeln!(out, "{} {value}", f.name);
                }
            }
        }
    }
    out
}

/// The value the previous run wrote for the series `name{label}` (exactly as [`render`]
/// writes it), or 0 when the text has no such line or its value is not a whole number.
pub fn previous_counter(text: &str, name: &str, label: Option<(&str, &str)>) -> u128 {
    let series = match label {
        Some((k, v)) => format!("{name}{{{k}=\"{v}\"}}"),
        None => name.to_owned(),
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .find(|(s, _)| *s == series)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(value: u128) -> Family {
        Family {
            name: "x_runs_total",
            help: "runs",
            kind: Kind::Counter,
            samples: vec![
                (Some(("result", "ok")), value),
                (Some(("result", "failed")), 2),
            ],
        }
    }

    #[test]
    fn a_rendered_counter_is_read_back_by_its_series_only() {
        let text = render(&[
            counter(7),
            Family {
                name: "x_age_seconds",
                help: "age",
                kind: Kind::Gauge,
                samples: vec![(None, 9)],
            },
        ]);
        assert!(text.ends_with('\n'));
        assert!(text.contains("# TYPE x_runs_total counter\n"));
        assert_eq!(
            previous_counter(&text, "x_runs_total", Some(("result", "ok"))),
            7
        );
        assert_eq!(
            previous_counter(&text, "x_runs_total", Some(("result", "failed"))),
            2
        );
        assert_eq!(previous_counter(&text, "x_age_seconds", None), 9);
        assert_eq!(
            previous_counter(&text, "x_runs_total", Some(("result", "other"))),
            0
        );
        assert_eq!(previous_counter(&text, "x_runs", None), 0);
    }

    #[test]
    fn a_file_that_is_not_ours_restarts_the_counters_at_zero() {
        for text in [
            "",
            "garbage",
            "x_runs_total{result=\"ok\"} -3",
            "x_runs_total{result=\"ok\"} 1.5",
        ] {
            assert_eq!(
                previous_counter(text, "x_runs_total", Some(("result", "ok"))),
                0,
                "{text:?}"
            );
        }
    }
}
