//! `keeper relay|resume --metrics-file`: the run's metrics as a Prometheus textfile for the
//! node exporter's textfile collector, which the alert rules in `deploy/prometheus/` read
//! (`VerifierKeeperBalanceLow`, `VerifierSettlementStuck`).
//!
//! Written at the end of every run, a failed one included. The keeper is a job, so
//! `keeper_settlements_total` carries over between runs by reading the previous file (see
//! `cli_support::textfile`); one writer at a time is assumed (the state directory's lock
//! already refuses a second concurrent run). The gauges are the state at the end of the run:
//! a gauge the run could not observe (no balance without a chain, no age without a readable
//! state directory) is left out rather than repeated from an older run.

use std::path::Path;

use cli_support::textfile::{self, Family, Kind, MetricsError};

use crate::report::{JobStatus, Report};

const SETTLEMENTS: &str = "keeper_settlements_total";
const RESULTS: [&str; 4] = ["confirmed", "pending", "refused", "failed"];

/// What one run observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Added to `keeper_settlements_total`, in the order of [`RESULTS`].
    pub settlements: [u128; 4],
    /// The gas key's balance at the end of the run, when the chain answered.
    pub balance_wei: Option<u128>,
    /// Seconds since the last write of the oldest open (planned or sent) settlement record,
    /// 0 when none is open; `None` when the state directory could not be read.
    pub pending_age_seconds: Option<u64>,
}

impl Observed {
    /// The run's settlements by result: `paid` and `rejected` are confirmed; `pending` is
    /// pending; `refused` and `invalid` refused; `reverted`, `unavailable` and `internal`
    /// failed. `done` (nothing was due) is not counted.
    pub fn from_report(report: &Report) -> Self {
        let mut settlements = [0u128; 4];
        for job in &report.jobs {
            let slot = match job.status {
                JobStatus::Paid | JobStatus::Rejected => 0,
                JobStatus::Pending => 1,
                JobStatus::Refused | JobStatus::Invalid => 2,
                JobStatus::Reverted | JobStatus::Unavailable | JobStatus::Internal => 3,
                JobStatus::Done => continue,
            };
            if let Some(n) = settlements.get_mut(slot) {
                *n = n.saturating_add(1);
            }
        }
        Self {
            settlements,
            ..Self::default()
        }
    }

    /// A run that stopped before handling its candidates (key, configuration, chain, inputs):
    /// one failed.
    pub fn failed_run() -> Self {
        Self {
            settlements: [0, 0, 0, 1],
            ..Self::default()
        }
    }
}

/// The oldest open record's age from a state directory's status, 0 when none is open.
pub fn pending_age(state_dir: &Path, now: u64) -> Option<u64> {
    let status = crate::status::status(state_dir, now).ok()?;
    Some(status.open.iter().map(|r| r.age_seconds).max().unwrap_or(0))
}

/// What a relay or resume run ending at `now` observed: its settlements (one failed when it
/// stopped early), the gas key's balance asked of the chain after a run that reached it, and
/// the state directory's oldest open record.
pub async fn observe(
    result: &Result<Report, crate::RunError>,
    rpc: &bounty_chain::RpcEndpoints,
    state_dir: &Path,
    now: u64,
) -> Observed {
    let mut observed = match result {
        Ok(report) => {
            let mut observed = Observed::from_report(report);
            if let Ok(chain) =
                crate::chain::SettlementRpc::with_failover(rpc, crate::REQUEST_TIMEOUT)
            {
                observed.balance_wei = chain
                    .balance(report.keeper)
                    .await
                    .ok()
                    .map(|wei| u128::try_from(wei).unwrap_or(u128::MAX));
            }
            observed
        }
        Err(_) => Observed::failed_run(),
    };
    observed.pending_age_seconds = pending_age(state_dir, now);
    observed
}

/// The exposition after a run ending at `now` (unix seconds), its counters added to those of
/// `previous` (the text of the file the last run wrote; empty when there is none).
pub fn exposition(previous: &str, observed: &Observed, now: u64) -> String {
    let samples = RESULTS
        .iter()
        .zip(observed.settlements)
        .map(|(result, add)| {
            (
                Some(("result", *result)),
                textfile::previous_counter(previous, SETTLEMENTS, Some(("result", result)))
                    .saturating_add(add),
            )
        })
        .collect();
    let mut families = vec![Family {
        name: SETTLEMENTS,
        help: "Settlements handled by keeper relay and resume, by result (confirmed, pending, refused, failed), over all runs.",
        kind: Kind::Counter,
        samples,
    }];
    if let Some(wei) = observed.balance_wei {
        families.push(Family {
            name: "keeper_balance_wei",
            help: "The keeper gas key's balance at the end of the last run, in wei.",
            kind: Kind::Gauge,
            samples: vec![(None, wei)],
        });
    }
    if let Some(age) = observed.pending_age_seconds {
        families.push(Family {
            name: "keeper_pending_settlement_age_seconds",
            help: "Seconds since the last write of the oldest settlement record not yet confirmed (0 when none), at the end of the last run.",
            kind: Kind::Gauge,
            samples: vec![(None, u128::from(age))],
        });
    }
    families.push(Family {
        name: "keeper_last_run_timestamp_seconds",
        help: "Unix time the last keeper relay or resume run ended, whatever its result.",
        kind: Kind::Gauge,
        samples: vec![(None, u128::from(now))],
    });
    families.push(textfile::build_info(
        "keeper_build_info",
        "The build (version and source commit) of the keeper that wrote this file.",
    ));
    textfile::render(&families)
}

/// Replaces the file at `path` with the exposition of this run (atomically: the collector
/// never reads half a file, and the temporary name does not end in `.prom`).
pub fn write(path: &Path, observed: &Observed, now: u64) -> Result<(), MetricsError> {
    textfile::write(path, |previous| exposition(previous, observed, now))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use verifier_sdk::Address;

    use super::*;
    use crate::report::JobReport;

    /// #51 item 3: every commit is version 0.1.0, so a metric without the commit could not say
    /// which build relayed after an upgrade.
    #[test]
    fn the_file_names_the_build_that_wrote_it() {
        let text = exposition("", &Observed::failed_run(), 1);
        let line = format!("keeper_build_info{{build=\"{}\"}} 1", cli_support::VERSION);
        assert!(text.lines().any(|l| l == line), "{text}");
    }

    #[test]
    fn settlements_are_counted_by_result_and_carry_over() {
        let jobs = [
            JobStatus::Paid,
            JobStatus::Rejected,
            JobStatus::Pending,
            JobStatus::Refused,
            JobStatus::Reverted,
            JobStatus::Done,
        ]
        .iter()
        .map(|s| JobReport::new("c", *s))
        .collect();
        let report = Report::new(8453, Address::from_bytes([1; 20]), jobs);
        let mut observed = Observed::from_report(&report);
        assert_eq!(observed.settlements, [2, 1, 1, 1]);
        observed.balance_wei = Some(u128::from(u64::MAX) * 4);
        observed.pending_age_seconds = Some(0);
        let first = exposition("", &observed, 10);
        let second = exposition(&first, &Observed::failed_run(), 20);
        assert!(second.contains("keeper_settlements_total{result=\"confirmed\"} 2\n"));
        assert!(second.contains("keeper_settlements_total{result=\"failed\"} 2\n"));
        // A failed run observed no balance and no age: neither is repeated from the last run.
        assert!(!second.contains("keeper_balance_wei"), "{second}");
        assert!(!second.contains("keeper_pending_settlement_age_seconds"));
        assert!(second.contains("keeper_last_run_timestamp_seconds 20\n"));
        assert!(first.contains(&format!(
            "keeper_balance_wei {}\n",
            u128::from(u64::MAX) * 4
        )));
        assert!(first.contains("keeper_pending_settlement_age_seconds 0\n"));
    }
}
