//! Whether repeated runs print the same bytes, and so get the same response hash.
//!
//! The verdict is what settles a bounty; the response hash also commits to the SHA-256 of
//! stdout and stderr, so output that changes between runs (a test runner printing its
//! durations) gives every run its own response hash. Settlement still works (the contract
//! needs one verdict across the attestations, PROTOCOL §6), but an independent verifier or a
//! reproducer can then confirm the verdict and every commitment, not the output bytes. This
//! module says which it is and where the runs first differ, from each run's evidence record.

use serde::Serialize;
use verifier_sdk::EvidenceRecord;
use verifier_sdk::agreement::lines::{LineDifference, Stream, first_difference};
use verifier_sdk::evidence::Decision;

/// What follows from deterministic output.
pub const DETERMINISTIC_MEANS: &str = "every run printed the same bytes: a re-run by another \
     verifier or by `worker reproduce` gets the same response hash and confirms the run bit for \
     bit";
/// What follows from output that differs.
pub const DIFFERS_MEANS: &str = "settlement works (the contract needs one verdict, not one \
     response hash); independent verifiers and reproducers can confirm the verdict and every \
     commitment, not the output bytes. To have them confirm the output too, print no durations, \
     times, addresses or unseeded random values (manifests/README.md, \"Output that reproduces \
     bit for bit\")";

/// Two consecutive runs whose output differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunPairDifference {
    /// The earlier run's number.
    pub first_run: u32,
    /// The later run's.
    pub second_run: u32,
    /// The exit codes, when they differ (both failed: the verdict is the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_codes: Option<(i64, i64)>,
    /// The first differing line of each stream that differs.
    pub lines: Vec<LineDifference>,
}

/// The output comparison of a rehearsal's solution runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum OutputDeterminism {
    /// Fewer than two runs with a verdict (one run, no-verdict runs, an unstable verdict).
    NotChecked,
    /// Every run printed the same bytes and exited the same way.
    Deterministic {
        /// What follows.
        means: &'static str,
    },
    /// At least two consecutive runs differ.
    Differs {
        /// Each consecutive pair that differs.
        pairs: Vec<RunPairDifference>,
        /// What follows.
        means: &'static str,
    },
}

impl OutputDeterminism {
    /// `output: deterministic` / `output: differs between runs` and what follows, for the
    /// human report; `None` when not checked.
    pub fn human(&self) -> Option<String> {
        match self {
            Self::NotChecked => None,
            Self::Deterministic { means } => Some(format!("output: deterministic ({means})\n")),
            Self::Differs { pairs, means } => {
                let mut out = String::from("output: differs between runs\n");
                for p in pairs {
                    if let Some((a, b)) = p.exit_codes {
                        out.push_str(&format!(
                            "  run {} vs {}: exit code {a} vs {b}\n",
                            p.first_run, p.second_run
                        ));
                    }
                    for l in &p.lines {
                        out.push_str(&format!(
                            "  run {} vs {}: {}\n",
                            p.first_run,
                            p.second_run,
                            l.describe()
                        ));
                    }
                }
                out.push_str(&format!("  what follows: {means}\n"));
                Some(out)
            }
        }
    }
}

/// Compares the evidence records of consecutive runs (run number, record; `None` for a run
/// that ended without one). Only runs that completed on their own are compared, and only when
/// all of them did.
pub fn assess(runs: &[(u32, Option<EvidenceRecord>)]) -> OutputDeterminism {
    let mut completed = Vec::with_capacity(runs.len());
    for (run, record) in runs {
        match record {
            Some(r) => match r.outcome {
                Decision::Completed { exit_code } => completed.push((*run, exit_code, r)),
                Decision::NoVerdict { .. } => return OutputDeterminism::NotChecked,
            },
            None => return OutputDeterminism::NotChecked,
        }
    }
    if completed.len() < 2 {
        return OutputDeterminism::NotChecked;
    }
    let mut pairs = Vec::new();
    for w in completed.windows(2) {
        let [(ra, xa, a), (rb, xb, b)] = w else {
            continue;
        };
        let exit_codes = (xa != xb).then_some((*xa, *xb));
        let lines: Vec<LineDifference> = [
            first_difference(Stream::Stdout, &a.stdout, &b.stdout),
            first_difference(Stream::Stderr, &a.stderr, &b.stderr),
        ]
        .into_iter()
        .flatten()
        .collect();
        let streams_differ = a.stdout.sha256 != b.stdout.sha256
            || a.stdout.bytes != b.stdout.bytes
            || a.stderr.sha256 != b.stderr.sha256
            || a.stderr.bytes != b.stderr.bytes;
        if exit_codes.is_some() || streams_differ {
            pairs.push(RunPairDifference {
                first_run: *ra,
                second_run: *rb,
                exit_codes,
                lines,
            });
        }
    }
    if pairs.is_empty() {
        OutputDeterminism::Deterministic {
            means: DETERMINISTIC_MEANS,
        }
    } else {
        OutputDeterminism::Differs {
            pairs,
            means: DIFFERS_MEANS,
        }
    }
}
