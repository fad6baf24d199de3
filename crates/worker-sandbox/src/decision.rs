//! The verdict contract (DESIGN §3) as a pure function of what the engine reported.
//!
//! Nothing here talks to Docker: the executor gathers a [`RunObservation`] and this module alone
//! decides whether it is a verdict, so every branch of the contract is unit-tested.

use serde::{Deserialize, Serialize};

// The stop and decision types are part of the evidence record the sdk defines, so the record
// the worker writes and the one the signer reads are one type.
pub use verifier_sdk::evidence::{Decision, StoppedBy};

// The reasons are the protocol's (`verifier-sdk`), so the sandbox and the printed outcome
// can never disagree on a name.
pub use verifier_sdk::NoVerdictReason;

/// Result of re-checking the staged inputs against their digests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum InputCheck {
    /// Both trees still match their digests.
    Matched,
    /// A tree changed or went missing; `detail` says which.
    Mismatch {
        /// Human-readable description of what differed.
        detail: String,
    },
}

/// What the engine's event stream for the container showed between its start and its exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum EngineEvents {
    /// The stream showed the start and the exit, and nothing but the program and the
    /// sandbox's own kills acted on the container in between.
    Clean,
    /// Something the sandbox did not do acted on the running container (a kill or stop it did
    /// not send, a removal, pause, exec, copy into it, or the daemon going away).
    External {
        /// The events, as the engine named them.
        detail: String,
    },
    /// The stream did not show both the start and the exit, so it proves nothing.
    Unconfirmed {
        /// What was missing.
        detail: String,
    },
}

/// Everything the contract looks at, as observed after the container stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunObservation {
    /// The engine's container state shows the process started (`State.StartedAt` set).
    pub started: bool,
    /// `State.ExitCode` once the container stopped; `None` if it could not be read.
    pub exit_code: Option<i64>,
    /// `State.OOMKilled`.
    pub oom_killed: bool,
    /// Whether the sandbox killed the container.
    pub stopped_by: StoppedBy,
    /// The post-run input re-check.
    pub inputs: InputCheck,
    /// The engine's events for the container during the run.
    pub events: EngineEvents,
}

/// Applies the verdict contract.
///
/// The order matters only for which reason is reported when several apply; every path other
/// than the last yields no verdict. A kill by the sandbox wins over the exit code because 137
/// from our own kill is not the program's doing, while 137 with no kill by us, no kill by
/// anyone else (per the engine's events) and no OOM is.
pub fn decide(observation: &RunObservation) -> Decision {
    if !observation.started {
        return Decision::no_verdict(
            NoVerdictReason::StartFailed,
            "the engine never reported the container as started",
        );
    }
    if let InputCheck::Mismatch { detail } = &observation.inputs {
        return Decision::no_verdict(NoVerdictReason::InputMismatch, detail.clone());
    }
    // Before our own kills: an outside kill that beat our timeout kill still ended the program,
    // and whatever exit code it left (137, 143, or 0 from a SIGTERM handler) is not its own.
    if observation.stopped_by == StoppedBy::External
        || matches!(observation.events, EngineEvents::External { .. })
    {
        let detail = match &observation.events {
            EngineEvents::External { detail } => detail.as_str(),
            _ => "something other than the sandbox stopped the container",
        };
        return Decision::no_verdict(
            NoVerdictReason::ExternallyStopped,
            format!("the run was interfered with from outside the sandbox: {detail}"),
        );
    }
    match observation.stopped_by {
        StoppedBy::Timeout => {
            return Decision::no_verdict(
                NoVerdictReason::Timeout,
                "the command ran past its timeout and was killed",
            );
        }
        StoppedBy::OutputLimit => {
            return Decision::no_verdict(
                NoVerdictReason::OutputLimit,
                "combined stdout and stderr exceeded the output cap",
            );
        }
        StoppedBy::None | StoppedBy::External => {}
    }
    if let EngineEvents::Unconfirmed { detail } = &observation.events {
        return Decision::no_verdict(NoVerdictReason::InternalError, detail.clone());
    }
    if observation.oom_killed {
        return Decision::no_verdict(
            NoVerdictReason::Oom,
            "the engine reported an out-of-memory kill",
        );
    }
    match observation.exit_code {
        Some(exit_code) => Decision::Completed { exit_code },
        None => Decision::no_verdict(
            NoVerdictReason::InternalError,
            "the engine did not report an exit code",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(exit_code: i64) -> RunObservation {
        RunObservation {
            started: true,
            exit_code: Some(exit_code),
            oom_killed: false,
            stopped_by: StoppedBy::None,
            inputs: InputCheck::Matched,
            events: EngineEvents::Clean,
        }
    }

    fn reason(decision: &Decision) -> Option<NoVerdictReason> {
        match decision {
            Decision::NoVerdict { reason, .. } => Some(*reason),
            Decision::Completed { .. } => None,
        }
    }

    #[test]
    fn exit_zero_passes() {
        let decision = decide(&completed(0));
        assert_eq!(decision, Decision::Completed { exit_code: 0 });
        assert_eq!(decision.passed(), Some(true));
    }

    #[test]
    fn programs_own_nonzero_exits_fail_including_signal_codes() {
        for code in [1, 2, 126, 127, 137, 139, 255] {
            let decision = decide(&completed(code));
            assert_eq!(decision, Decision::Completed { exit_code: code });
            assert_eq!(decision.passed(), Some(false), "exit {code}");
        }
    }

    #[test]
    fn our_kill_is_never_a_verdict_even_with_exit_137() {
        let mut obs = completed(137);
        obs.stopped_by = StoppedBy::Timeout;
        assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::Timeout));
        obs.stopped_by = StoppedBy::OutputLimit;
        assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::OutputLimit));
        // A kill that raced a clean exit is still our kill: the run did not complete on its own.
        obs.exit_code = Some(0);
        assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::OutputLimit));
    }

    #[test]
    fn an_outside_kill_is_never_a_verdict_whatever_the_exit_code() {
        for code in [0, 1, 137, 143] {
            let mut obs = completed(code);
            obs.events = EngineEvents::External {
                detail: "kill (signal 15)".into(),
            };
            let decision = decide(&obs);
            assert_eq!(reason(&decision), Some(NoVerdictReason::ExternallyStopped));
            assert_eq!(decision.passed(), None);
            // Also when our own timeout kill came after it.
            obs.stopped_by = StoppedBy::Timeout;
            assert_eq!(
                reason(&decide(&obs)),
                Some(NoVerdictReason::ExternallyStopped)
            );
        }
        let mut obs = completed(137);
        obs.stopped_by = StoppedBy::External;
        assert_eq!(
            reason(&decide(&obs)),
            Some(NoVerdictReason::ExternallyStopped)
        );
    }

    #[test]
    fn unconfirmed_events_are_no_verdict() {
        for code in [0, 1] {
            let mut obs = completed(code);
            obs.events = EngineEvents::Unconfirmed {
                detail: "no die event".into(),
            };
            assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::InternalError));
        }
    }

    #[test]
    fn oom_is_no_verdict_whatever_the_exit_code() {
        for code in [0, 1, 137] {
            let mut obs = completed(code);
            obs.oom_killed = true;
            assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::Oom));
        }
    }

    #[test]
    fn never_started_is_start_failed_even_with_an_exit_code() {
        let mut obs = completed(0);
        obs.started = false;
        assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::StartFailed));
    }

    #[test]
    fn changed_inputs_void_a_pass() {
        let mut obs = completed(0);
        obs.inputs = InputCheck::Mismatch {
            detail: "benchmark digest changed".into(),
        };
        let decision = decide(&obs);
        assert_eq!(reason(&decision), Some(NoVerdictReason::InputMismatch));
        assert_eq!(decision.passed(), None);
    }

    #[test]
    fn missing_exit_code_is_internal_error() {
        let mut obs = completed(0);
        obs.exit_code = None;
        assert_eq!(reason(&decide(&obs)), Some(NoVerdictReason::InternalError));
    }

    #[test]
    fn reason_names_are_stable_and_match_serde() {
        for r in [
            NoVerdictReason::Timeout,
            NoVerdictReason::OutputLimit,
            NoVerdictReason::Oom,
            NoVerdictReason::InputMismatch,
            NoVerdictReason::ImageMissing,
            NoVerdictReason::ImagePlatformMismatch,
            NoVerdictReason::CreateFailed,
            NoVerdictReason::StartFailed,
            NoVerdictReason::IsolationMismatch,
            NoVerdictReason::ExternallyStopped,
            NoVerdictReason::InternalError,
        ] {
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(json, serde_json::Value::String(r.as_str().to_string()));
        }
    }
}
