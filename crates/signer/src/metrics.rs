//! `signer sign --metrics-file`: the run's metrics as a Prometheus textfile for the node
//! exporter's textfile collector, which the alert rules in `deploy/prometheus/` read
//! (`VerifierSignerRefusing`, `VerifierSignerFailing`).
//!
//! Written at the end of every run, a refused or failed one included, since a failure is what
//! the rules must see. The signer is a job, so `signer_signatures_total` carries over between
//! runs by reading the previous file (see `cli_support::textfile`); one writer at a time is
//! assumed (the signing history's lock already refuses a second concurrent `sign`).

use std::path::Path;

use cli_support::textfile::{self, Family, Kind, MetricsError};

use crate::sign::RunReport;

const SIGNATURES: &str = "signer_signatures_total";
const LAST_RUN: &str = "signer_last_run_timestamp_seconds";

/// What one run adds to `signer_signatures_total`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Attestations written.
    pub signed: u128,
    /// Candidates refused (a contradiction of the history included).
    pub refused: u128,
    /// Candidates that met an unavailable service, plus one for a run that stopped before
    /// handling its candidates (configuration, key, history, output).
    pub failed: u128,
}

impl Tally {
    /// The run's candidates by result; those not ours and those deferred are not counted (no
    /// signature was due).
    pub fn from_report(report: &RunReport) -> Self {
        let n = |v: usize| u128::try_from(v).unwrap_or(u128::MAX);
        Self {
            signed: n(report.signed),
            refused: n(report.refused),
            failed: n(report.unavailable),
        }
    }

    /// A run that ended without a report.
    pub const fn failed_run() -> Self {
        Self {
            signed: 0,
            refused: 0,
            failed: 1,
        }
    }
}

/// The exposition after a run ending at `now` (unix seconds), its counters added to those of
/// `previous` (the text of the file the last run wrote; empty when there is none).
pub fn exposition(previous: &str, tally: Tally, now: u64) -> String {
    let total = |result: &'static str, add: u128| {
        (
            Some(("result", result)),
            textfile::previous_counter(previous, SIGNATURES, Some(("result", result)))
                .saturating_add(add),
        )
    };
    textfile::render(&[
        Family {
            name: SIGNATURES,
            help: "Candidates handled by signer sign, by result (signed, refused, failed), over all runs.",
            kind: Kind::Counter,
            samples: vec![
                total("signed", tally.signed),
                total("refused", tally.refused),
                total("failed", tally.failed),
            ],
        },
        Family {
            name: LAST_RUN,
            help: "Unix time the last signer sign run ended, whatever its result.",
            kind: Kind::Gauge,
            samples: vec![(None, u128::from(now))],
        },
        textfile::build_info(
            "signer_build_info",
            "The build (version and source commit) of the signer that wrote this file.",
        ),
    ])
}

/// Replaces the file at `path` with the exposition of this run (atomically: the collector
/// never reads half a file, and the temporary name does not end in `.prom`).
pub fn write(path: &Path, tally: Tally, now: u64) -> Result<(), MetricsError> {
    textfile::write(path, |previous| exposition(previous, tally, now))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// #51 item 3: every commit is version 0.1.0, so a metric without the commit could not say
    /// which build signed (or refused) after an upgrade.
    #[test]
    fn the_file_names_the_build_that_wrote_it() {
        let text = exposition("", Tally::default(), 1);
        let line = format!("signer_build_info{{build=\"{}\"}} 1", cli_support::VERSION);
        assert!(text.lines().any(|l| l == line), "{text}");
    }

    #[test]
    fn counters_carry_over_from_the_previous_run_and_a_failed_run_counts() {
        let first = exposition(
            "",
            Tally {
                signed: 2,
                refused: 1,
                failed: 0,
            },
            100,
        );
        let second = exposition(&first, Tally::failed_run(), 200);
        assert!(second.contains("signer_signatures_total{result=\"signed\"} 2\n"));
        assert!(second.contains("signer_signatures_total{result=\"refused\"} 1\n"));
        assert!(second.contains("signer_signatures_total{result=\"failed\"} 1\n"));
        assert!(second.contains("signer_last_run_timestamp_seconds 200\n"));
    }

    #[test]
    fn a_metrics_file_write_replaces_a_symlink_instead_of_reading_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.prom");
        std::fs::write(
            &elsewhere,
            "signer_signatures_total{result=\"signed\"} 99\n",
        )
        .unwrap();
        let path = dir.path().join("signer.prom");
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        write(&path, Tally::default(), 5).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("signer_signatures_total{result=\"signed\"} 0\n"),
            "{text}"
        );
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert!(std::fs::read_to_string(&elsewhere).unwrap().contains("99"));
    }
}
