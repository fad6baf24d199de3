//! The job state machine of the ledger, as a pure step: the states a job row can be in, the
//! events that move it, and [`next`], the only place that says which moves are legal. The
//! ledger asks [`next`] before every write of a job's status, so a finished job never runs
//! again and a running job is not claimed twice whatever SQL a later change writes.
//!
//! The names are the strings the ledger has always stored (`jobs.status`); a ledger written
//! before this module existed reads back unchanged.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The status of a job row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Seen, not run yet (or to be retried).
    Pending,
    /// A run is in progress.
    Running,
    /// A verdict candidate was written; never run again.
    Completed,
    /// Refused by rule (invalid job, hostile archive, expired); never run again.
    Rejected,
    /// The last run ended without a verdict, the job's own fault; retried once its back-off
    /// ends, while its verification window is open.
    Retry,
    /// Given up: the verification window ended without a verdict; not run again unless
    /// `worker ledger --retry` puts it back.
    Exhausted,
    /// The last run was interrupted (shutdown or crash); retried.
    Interrupted,
    /// Listed with the id and round of a job already seen, and other content; never run.
    Conflicting,
}

impl JobState {
    /// Every state, for exhaustive checks.
    pub const ALL: [Self; 8] = [
        Self::Pending,
        Self::Running,
        Self::Completed,
        Self::Rejected,
        Self::Retry,
        Self::Exhausted,
        Self::Interrupted,
        Self::Conflicting,
    ];

    /// The name stored in the ledger and printed by `worker ledger`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Rejected => "rejected",
            Self::Retry => "retry",
            Self::Exhausted => "exhausted",
            Self::Interrupted => "interrupted",
            Self::Conflicting => "conflicting",
        }
    }

    /// The state of a job the first poll lists: pending, or conflicting when the ledger holds
    /// its id and round with other content.
    pub const fn first_seen(other_content: bool) -> Self {
        if other_content {
            Self::Conflicting
        } else {
            Self::Pending
        }
    }

    /// Whether a run may be started (before any back-off is considered).
    pub fn may_start(self) -> bool {
        next(self, JobEvent::Start).is_ok()
    }

    /// Whether the job still has to run (or is running): not finished, given up or
    /// conflicting.
    pub const fn is_unfinished(self) -> bool {
        matches!(
            self,
            Self::Pending | Self::Running | Self::Retry | Self::Interrupted
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status in the ledger that this worker does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job status {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// What happens to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEvent {
    /// A run is opened for it.
    Start,
    /// Its run wrote a verdict candidate.
    Complete,
    /// Its run was refused by rule.
    Reject,
    /// Its run ended without a verdict, its own fault (an attempt).
    OwnFailure,
    /// Its run ended without a verdict for a host cause (not an attempt); `attempted`: the job
    /// has failed on its own before, so it stays to be retried rather than pending.
    HostFailure {
        /// Whether the job has attempts already.
        attempted: bool,
    },
    /// Its run was cut short by a shutdown, or found open after a crash.
    Interrupt,
    /// Its verification window ended without a verdict.
    GiveUp,
    /// `worker ledger --retry`: put back to pending.
    Requeue,
}

impl JobEvent {
    /// Every event, for exhaustive checks.
    pub const ALL: [Self; 9] = [
        Self::Start,
        Self::Complete,
        Self::Reject,
        Self::OwnFailure,
        Self::HostFailure { attempted: false },
        Self::HostFailure { attempted: true },
        Self::Interrupt,
        Self::GiveUp,
        Self::Requeue,
    ];
}

/// A move the state machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("job in state {from} cannot take {event:?}")]
pub struct IllegalTransition {
    /// The job's state.
    pub from: JobState,
    /// What was asked.
    pub event: JobEvent,
}

/// The state after `event`, or why `event` is not allowed in `state`.
///
/// Only a job waiting to run starts (a running job is not claimed twice; completed, rejected,
/// given-up and conflicting jobs never run again); only a running job ends a run; only a job
/// still to run is given up; the operator may put back anything that has no verdict and is
/// neither running nor conflicting.
pub fn next(state: JobState, event: JobEvent) -> Result<JobState, IllegalTransition> {
    use JobEvent as E;
    use JobState as S;
    let to = match (state, event) {
        (S::Pending | S::Retry | S::Interrupted, E::Start) => S::Running,
        (S::Running, E::Complete) => S::Completed,
        (S::Running, E::Reject) => S::Rejected,
        (S::Running, E::OwnFailure) => S::Retry,
        (S::Running, E::HostFailure { attempted: false }) => S::Pending,
        (S::Running, E::HostFailure { attempted: true }) => S::Retry,
        (S::Running, E::Interrupt) => S::Interrupted,
        (S::Pending | S::Retry | S::Interrupted, E::GiveUp) => S::Exhausted,
        (S::Pending | S::Retry | S::Interrupted | S::Exhausted | S::Rejected, E::Requeue) => {
            S::Pending
        }
        (from, event) => return Err(IllegalTransition { from, event }),
    };
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobEvent as E;
    use JobState as S;

    /// The whole table, written out once by hand: every state × every event.
    fn expected(state: JobState, event: JobEvent) -> Option<JobState> {
        match (state, event) {
            (S::Pending, E::Start) => Some(S::Running),
            (S::Pending, E::GiveUp) => Some(S::Exhausted),
            (S::Pending, E::Requeue) => Some(S::Pending),
            (S::Pending, _) => None,

            (S::Running, E::Complete) => Some(S::Completed),
            (S::Running, E::Reject) => Some(S::Rejected),
            (S::Running, E::OwnFailure) => Some(S::Retry),
            (S::Running, E::HostFailure { attempted: false }) => Some(S::Pending),
            (S::Running, E::HostFailure { attempted: true }) => Some(S::Retry),
            (S::Running, E::Interrupt) => Some(S::Interrupted),
            (S::Running, E::Start | E::GiveUp | E::Requeue) => None,

            (S::Completed, _) => None,
            (S::Conflicting, _) => None,

            (S::Rejected, E::Requeue) => Some(S::Pending),
            (S::Rejected, _) => None,

            (S::Retry, E::Start) => Some(S::Running),
            (S::Retry, E::GiveUp) => Some(S::Exhausted),
            (S::Retry, E::Requeue) => Some(S::Pending),
            (S::Retry, _) => None,

            (S::Exhausted, E::Requeue) => Some(S::Pending),
            (S::Exhausted, _) => None,

            (S::Interrupted, E::Start) => Some(S::Running),
            (S::Interrupted, E::GiveUp) => Some(S::Exhausted),
            (S::Interrupted, E::Requeue) => Some(S::Pending),
            (S::Interrupted, _) => None,
        }
    }

    #[test]
    fn jobstate_every_state_and_event_follows_the_table() {
        let mut checked = 0;
        for state in S::ALL {
            for event in E::ALL {
                let got = next(state, event);
                match expected(state, event) {
                    Some(to) => assert_eq!(got, Ok(to), "{state} × {event:?}"),
                    None => assert_eq!(
                        got,
                        Err(IllegalTransition { from: state, event }),
                        "{state} × {event:?} must be refused"
                    ),
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 8 * 9);
    }

    #[test]
    fn jobstate_a_finished_job_never_runs_again() {
        for state in [S::Completed, S::Rejected, S::Exhausted, S::Conflicting] {
            assert!(!state.may_start(), "{state}");
            assert!(next(state, E::Start).is_err(), "{state}");
            assert!(!state.is_unfinished(), "{state}");
        }
        // The operator's requeue is the only way back, and never for a verdict or a conflict.
        assert!(next(S::Completed, E::Requeue).is_err());
        assert!(next(S::Conflicting, E::Requeue).is_err());
    }

    #[test]
    fn jobstate_a_claimed_job_is_not_claimed_twice() {
        let running = next(S::Pending, E::Start).unwrap();
        assert_eq!(running, S::Running);
        assert_eq!(
            next(running, E::Start),
            Err(IllegalTransition {
                from: S::Running,
                event: E::Start
            })
        );
        // Nor given up or requeued under a run that is still open.
        assert!(next(running, E::GiveUp).is_err());
        assert!(next(running, E::Requeue).is_err());
    }

    #[test]
    fn jobstate_only_a_running_job_ends_a_run() {
        let ends = [
            E::Complete,
            E::Reject,
            E::OwnFailure,
            E::HostFailure { attempted: false },
            E::HostFailure { attempted: true },
            E::Interrupt,
        ];
        for state in S::ALL {
            for event in ends {
                assert_eq!(
                    next(state, event).is_ok(),
                    state == S::Running,
                    "{state} × {event:?}"
                );
            }
        }
    }

    #[test]
    fn jobstate_names_are_the_strings_stored_by_earlier_ledgers() {
        let stored = [
            "pending",
            "running",
            "completed",
            "rejected",
            "retry",
            "exhausted",
            "interrupted",
            "conflicting",
        ];
        for (state, name) in S::ALL.into_iter().zip(stored) {
            assert_eq!(state.as_str(), name);
            assert_eq!(name.parse::<JobState>(), Ok(state));
            assert_eq!(serde_json::to_value(state).unwrap(), name);
        }
        assert_eq!(
            "Completed".parse::<JobState>(),
            Err(UnknownState("Completed".into()))
        );
        assert_eq!(S::first_seen(false), S::Pending);
        assert_eq!(S::first_seen(true), S::Conflicting);
    }
}
