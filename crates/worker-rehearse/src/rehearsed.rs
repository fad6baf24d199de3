//! A rehearsal report joined with its stub runs: above the report, the stub runs, their
//! judgement and the checks not made, which it brings together.

use serde_json::Value;

use super::adversarial::Adversarial;
use super::report::{Answer, Report, answer};

/// A rehearsal report with, for `--adversarial`, its stub runs.
#[derive(Debug, Clone)]
pub struct Rehearsed {
    /// The rehearsal itself; a bypass is added to its problems.
    pub report: Report,
    /// The stub runs, when asked for.
    pub adversarial: Option<Adversarial>,
    /// The mutation score, with `--mutants` ([`Rehearsed::with_mutants`]).
    pub mutants: Option<super::mutants::Mutation>,
}

impl Rehearsed {
    /// Joins a report and its stub runs.
    pub fn new(mut report: Report, adversarial: Option<Adversarial>) -> Self {
        if let Some(adversarial) = &adversarial
            && adversarial.is_bypassable()
        {
            report.problems.push(super::judgement::bypass_problem(
                &adversarial.stubs,
                adversarial.culprit.as_ref(),
            ));
        }
        // A finding of its own (#42 item 3): unfit whether or not a stub got through.
        if let Some(tests) = adversarial.as_ref().and_then(|a| a.solver_tests.as_ref()) {
            report.problems.push(tests.problem());
        }
        Self {
            report,
            adversarial,
            mutants: None,
        }
    }

    /// Adds the mutation score (`--mutants`): a weak score is a finding, not a change of
    /// answer (the answer is about whether a bounty pays the solution and no stub).
    #[must_use]
    pub fn with_mutants(self, mutants: super::mutants::Mutation) -> Self {
        Self {
            mutants: Some(mutants),
            ..self
        }
    }

    /// The `--json` report, with an `adversarial` object (`null` when stubs were not run) and
    /// `not_checked`, the checks not made with the flag that makes each.
    pub fn to_json(&self) -> Value {
        let mut json = self.report.to_json();
        if let Value::Object(map) = &mut json {
            map.insert(
                "adversarial".into(),
                serde_json::to_value(&self.adversarial).unwrap_or(Value::Null),
            );
            map.insert(
                "mutants".into(),
                serde_json::to_value(&self.mutants).unwrap_or(Value::Null),
            );
            map.insert("answer".into(), Value::from(self.answer().as_str()));
            let missing = super::checks::not_checked(&self.report, self.adversarial.is_some());
            map.insert(
                "not_checked".into(),
                serde_json::to_value(missing).unwrap_or(Value::Null),
            );
        }
        json
    }

    /// [`answer`], except that a bypassable benchmark always pays a non-solution: what a stub
    /// can pass is not what a bounty needs, whatever the solution did, and it is the costliest
    /// answer, so it has its own (exit 9, #42 item 8).
    pub fn answer(&self) -> Answer {
        match &self.adversarial {
            Some(adversarial) if adversarial.is_bypassable() => Answer::PaysNonSolution,
            _ => answer(&self.report),
        }
    }

    /// The last line of a bypassable rehearsal's human report, apart from every other line so
    /// that it is what an author sees last: `None` unless a stub passed.
    pub fn bypass_line(&self) -> Option<String> {
        let adversarial = self.adversarial.as_ref().filter(|a| a.is_bypassable())?;
        Some(format!(
            "BYPASSABLE: the benchmark lets a non-solution pass ({} passed): a bounty with this \
             manifest would pay it; do not fund it until `rehearse --adversarial` exits 0",
            adversarial.bypassed().join(", ")
        ))
    }
}
