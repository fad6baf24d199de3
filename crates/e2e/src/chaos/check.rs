//! The invariants, as a pure function of what the driver observed after the drain: the chain
//! (events, balances, the keeper's transactions), the worker's reports, Docker, and the bytes
//! of every log and artifact. Nothing here talks to a service, so each invariant is
//! unit-tested with an observation that breaks it.

use std::fmt;

use super::schedule::BountyKind;

/// What the chain and the reports say about one bounty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BountyObservation {
    /// Index in the schedule.
    pub index: usize,
    /// The submission.
    pub kind: BountyKind,
    /// `BountySettled` events the bounty emitted.
    pub settled_events: u32,
    /// `SubmissionRejected` events the bounty emitted.
    pub rejected_events: u32,
    /// Solver balance after minus before (wei; the solver is a fresh account).
    pub solver_gain: u128,
    /// The escrowed reward (wei).
    pub reward: u128,
    /// Every verdict a worker wrote for its job, over all cycles (`passed` / `failed`).
    pub verdicts: Vec<String>,
    /// The job's row status in the last (clean) cycle's feed report, if it was listed.
    pub last_status: Option<String>,
    /// Whether its verification window is still open.
    pub window_open: bool,
    /// In a serve lane: what the service's ledger says (`None` in a feed lane).
    pub ledger: Option<LedgerJob>,
    /// The block timestamp of its first `BountySettled` (`None`: not settled).
    pub settled_at: Option<u64>,
    /// The end of its verification window (unix s).
    pub expires_at: u64,
}

/// What a `worker serve` ledger says about one job at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LedgerJob {
    /// Its status (`None`: the ledger never saw it).
    pub status: Option<String>,
    /// Every verdict a run recorded (`passed` / `failed`), in run order.
    pub verdicts: Vec<String>,
    /// Runs with a verdict.
    pub verdict_runs: u32,
    /// Runs started after the first run with a verdict (run again after it was done).
    pub runs_after_verdict: u32,
    /// Candidate rows.
    pub candidates: u32,
}

/// Ledger statuses of a job the service will still run (`running`: a run the last stop did
/// not close; it is closed as `interrupted` at the next start).
const STILL_RETRYING: &[&str] = &["pending", "retry", "interrupted", "running"];

/// One transaction sent from the keeper's (fresh, single-use) account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperTx {
    /// Its hash.
    pub hash: String,
    /// Mined with status 1.
    pub succeeded: bool,
}

/// Everything the checker looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observations {
    /// Per bounty.
    pub bounties: Vec<BountyObservation>,
    /// Every mined transaction from the keeper's account.
    pub keeper_txs: Vec<KeeperTx>,
    /// Containers started by the run's workers still present (id and state).
    pub leftover_containers: Vec<String>,
    /// Files (relative to the work dir) holding a key's hex.
    pub key_leaks: Vec<String>,
    /// Logs that show a panic (file and the line).
    pub panics: Vec<String>,
    /// What the log scan found in the binaries' stderr logs (`e2e::logscan`): a line that is
    /// no JSON log object, a bearer token, a process or binary that logged nothing.
    pub log_problems: Vec<String>,
    /// Steps that did not exit within their deadline even when not faulted.
    pub hung_steps: Vec<String>,
    /// `worker serve` processes that exited 78 (systemd does not restart them) during the run.
    pub serve_stopped_for_good: Vec<String>,
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Short stable name of the invariant.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// Issue #43 item 5, liveness: a good bounty settled after its window, or whose window closed
/// with none, missed its settlement (the platform's worst failure: the solver unpaid, the bonds
/// returned by a timeout). Every good bounty here had a window that allowed one (an hour, a run
/// of seconds), so none may miss it: not for the order work was taken in, not for one RPC
/// endpoint failing.
fn missed_settlement(b: &BountyObservation, who: &str) -> Option<Violation> {
    let detail = match b.settled_at {
        Some(at) if at > b.expires_at => format!(
            "{who}: settled at {at}, {} s after its window ended at {}",
            at - b.expires_at,
            b.expires_at
        ),
        None if !b.window_open => format!(
            "{who}: its window ended at {} with no settlement (last feed status {:?})",
            b.expires_at, b.last_status
        ),
        _ => return None,
    };
    Some(Violation {
        invariant: "good_settled_in_window",
        detail,
    })
}

/// Every invariant the observations break (empty: all hold).
pub fn check(obs: &Observations) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |invariant, detail: String| out.push(Violation { invariant, detail });
    for b in &obs.bounties {
        let who = format!("bounty {} ({})", b.index, b.kind.name());
        if b.settled_events > 0 && b.rejected_events > 0 {
            v(
                "no_bounty_both",
                format!(
                    "{who}: {} settled and {} rejected events",
                    b.settled_events, b.rejected_events
                ),
            );
        }
        match b.kind {
            BountyKind::Good => {
                if b.settled_events != 1 {
                    v(
                        "good_settled_exactly_once",
                        format!(
                            "{who}: {} BountySettled events (last feed status {:?}, verdicts {:?})",
                            b.settled_events, b.last_status, b.verdicts
                        ),
                    );
                }
                if let Some(x) = missed_settlement(b, &who) {
                    v(x.invariant, x.detail);
                }
                if b.solver_gain != b.reward {
                    v(
                        "good_paid_exactly_reward",
                        format!(
                            "{who}: solver gained {} wei, reward {}",
                            b.solver_gain, b.reward
                        ),
                    );
                }
                if b.verdicts.iter().any(|x| x != "passed") {
                    v(
                        "good_never_failed",
                        format!(
                            "{who}: verdicts {:?} (a fault became a verdict against a passing solution)",
                            b.verdicts
                        ),
                    );
                }
            }
            BountyKind::Bad | BountyKind::WrongImage => {
                if b.settled_events != 0 || b.solver_gain != 0 {
                    v(
                        "bad_never_paid",
                        format!(
                            "{who}: {} BountySettled events, solver gained {} wei",
                            b.settled_events, b.solver_gain
                        ),
                    );
                }
                if b.kind == BountyKind::Bad && b.verdicts.iter().any(|x| x == "passed") {
                    v(
                        "bad_never_passed",
                        format!("{who}: verdicts {:?}", b.verdicts),
                    );
                }
                if b.kind == BountyKind::WrongImage
                    && (!b.verdicts.is_empty() || b.rejected_events != 0)
                {
                    v(
                        "wrong_image_no_verdict",
                        format!(
                            "{who}: verdicts {:?}, {} rejected events (no run can happen without its image)",
                            b.verdicts, b.rejected_events
                        ),
                    );
                }
            }
        }
        for x in retried_and_run_once(b, &who) {
            v(x.invariant, x.detail);
        }
    }
    for tx in obs.keeper_txs.iter().filter(|t| !t.succeeded) {
        v(
            "no_reverted_keeper_tx",
            format!(
                "keeper transaction {} reverted (a settlement sent twice)",
                tx.hash
            ),
        );
    }
    for c in &obs.leftover_containers {
        v(
            "no_container_left",
            format!("container {c} of a run's worker still exists"),
        );
    }
    for f in &obs.key_leaks {
        v("no_key_in_logs", format!("{f} holds a private key"));
    }
    for p in &obs.panics {
        v("no_panic", p.clone());
    }
    for p in &obs.log_problems {
        v("json_logs", p.clone());
    }
    for h in &obs.hung_steps {
        v("no_hang", h.clone());
    }
    for s in &obs.serve_stopped_for_good {
        v(
            "serve_not_stopped_for_good",
            format!("{s}: exit 78 under a transient fault; systemd leaves the service stopped"),
        );
    }
    out
}

/// `unfinished_job_still_retrying` and `no_job_run_twice` for one bounty.
fn retried_and_run_once(b: &BountyObservation, who: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |invariant, detail: String| out.push(Violation { invariant, detail });
    // A job with a verdict is done; one without must still be retried while its window is
    // open: listed by the last cycle as `no_verdict` or `error`, never dropped or refused.
    let done = !b.verdicts.is_empty() || b.settled_events + b.rejected_events > 0;
    if !done && b.window_open {
        match (&b.ledger, b.last_status.as_deref()) {
            // A service keeps the job in its ledger until its window ends.
            (Some(l), _)
                if l.status
                    .as_deref()
                    .is_some_and(|s| STILL_RETRYING.contains(&s)) => {}
            (Some(l), _) => v(
                "unfinished_job_still_retrying",
                format!(
                    "{who}: no verdict yet and the service's ledger has it as {:?} (given up or never seen while its window is open)",
                    l.status
                ),
            ),
            (None, Some("no_verdict" | "error")) => {}
            (None, other) => v(
                "unfinished_job_still_retrying",
                format!("{who}: no verdict yet and the last cycle reported it as {other:?}"),
            ),
        }
    }
    if let Some(l) = &b.ledger
        && (l.verdict_runs > 1 || l.runs_after_verdict > 0 || l.candidates > 1)
    {
        v(
            "no_job_run_twice",
            format!(
                "{who}: the service's ledger has {} runs with a verdict, {} runs after the first verdict, {} candidates",
                l.verdict_runs, l.runs_after_verdict, l.candidates
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good(index: usize) -> BountyObservation {
        BountyObservation {
            index,
            kind: BountyKind::Good,
            settled_events: 1,
            rejected_events: 0,
            solver_gain: 1000,
            reward: 1000,
            verdicts: vec!["passed".into()],
            last_status: Some("completed_passed".into()),
            window_open: true,
            ledger: None,
            settled_at: Some(100),
            expires_at: 3700,
        }
    }

    fn bad(index: usize) -> BountyObservation {
        BountyObservation {
            kind: BountyKind::Bad,
            settled_events: 0,
            rejected_events: 1,
            solver_gain: 0,
            verdicts: vec!["failed".into()],
            last_status: Some("completed_failed".into()),
            ..good(index)
        }
    }

    fn wrong_image(index: usize) -> BountyObservation {
        BountyObservation {
            kind: BountyKind::WrongImage,
            rejected_events: 0,
            verdicts: vec![],
            last_status: Some("no_verdict".into()),
            ..bad(index)
        }
    }

    fn healthy() -> Observations {
        Observations {
            bounties: vec![good(0), bad(1), wrong_image(2)],
            keeper_txs: vec![
                KeeperTx {
                    hash: "0x1".into(),
                    succeeded: true,
                },
                KeeperTx {
                    hash: "0x2".into(),
                    succeeded: true,
                },
            ],
            ..Observations::default()
        }
    }

    fn names(obs: &Observations) -> Vec<&'static str> {
        check(obs).into_iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn a_healthy_run_breaks_nothing() {
        assert_eq!(check(&healthy()), vec![]);
    }

    #[test]
    fn paid_twice_is_caught() {
        let mut o = healthy();
        o.bounties[0].solver_gain = 2000;
        o.keeper_txs.push(KeeperTx {
            hash: "0x3".into(),
            succeeded: false,
        });
        assert_eq!(
            names(&o),
            vec!["good_paid_exactly_reward", "no_reverted_keeper_tx"]
        );
    }

    #[test]
    fn good_never_settled_is_caught() {
        let mut o = healthy();
        o.bounties[0].settled_events = 0;
        o.bounties[0].solver_gain = 0;
        assert_eq!(
            names(&o),
            vec!["good_settled_exactly_once", "good_paid_exactly_reward"]
        );
    }

    #[test]
    fn a_kill_turned_into_a_failed_verdict_is_caught() {
        let mut o = healthy();
        o.bounties[0].verdicts.push("failed".into());
        assert_eq!(names(&o), vec!["good_never_failed"]);
    }

    #[test]
    fn bad_paid_or_both_is_caught() {
        let mut o = healthy();
        o.bounties[1].settled_events = 1;
        o.bounties[1].solver_gain = 1000;
        assert_eq!(names(&o), vec!["no_bounty_both", "bad_never_paid"]);
        let mut o = healthy();
        o.bounties[1].verdicts = vec!["passed".into()];
        assert_eq!(names(&o), vec!["bad_never_passed"]);
    }

    #[test]
    fn a_job_given_up_while_open_is_caught_and_a_closed_window_is_not() {
        let mut o = healthy();
        o.bounties[2].last_status = Some("rejected".into());
        assert_eq!(names(&o), vec!["unfinished_job_still_retrying"]);
        o.bounties[2].last_status = None;
        assert_eq!(names(&o), vec!["unfinished_job_still_retrying"]);
        o.bounties[2].window_open = false;
        assert_eq!(names(&o), Vec::<&str>::new());
        let mut o = healthy();
        o.bounties[2].verdicts = vec!["failed".into()];
        assert_eq!(names(&o), vec!["wrong_image_no_verdict"]);
    }

    #[test]
    fn leftovers_keys_panics_and_hangs_are_caught() {
        let mut o = healthy();
        o.leftover_containers.push("abc (running)".into());
        o.key_leaks.push("logs/c0-keeper.stderr".into());
        o.panics
            .push("logs/c1-worker.stderr: thread 'main' panicked".into());
        o.log_problems
            .push("c0-pair-worker.stderr: not a JSON object: INFO worker: x".into());
        o.hung_steps.push("cycle 3 keeper".into());
        assert_eq!(
            names(&o),
            vec![
                "no_container_left",
                "no_key_in_logs",
                "no_panic",
                "json_logs",
                "no_hang"
            ]
        );
    }

    #[test]
    fn a_serve_job_given_up_or_unseen_while_open_is_caught() {
        let mut o = healthy();
        let mut l = LedgerJob {
            status: Some("retry".into()),
            ..LedgerJob::default()
        };
        o.bounties[2].last_status = None;
        o.bounties[2].ledger = Some(l.clone());
        assert_eq!(names(&o), Vec::<&str>::new());
        for given_up in ["exhausted", "rejected", "conflicting"] {
            l.status = Some(given_up.into());
            o.bounties[2].ledger = Some(l.clone());
            assert_eq!(
                names(&o),
                vec!["unfinished_job_still_retrying"],
                "{given_up}"
            );
        }
        l.status = None;
        o.bounties[2].ledger = Some(l.clone());
        assert_eq!(names(&o), vec!["unfinished_job_still_retrying"]);
        o.bounties[2].window_open = false;
        assert_eq!(names(&o), Vec::<&str>::new());
    }

    #[test]
    fn a_serve_job_run_again_after_its_verdict_is_caught() {
        let mut o = healthy();
        let once = LedgerJob {
            status: Some("completed".into()),
            verdicts: vec!["passed".into()],
            verdict_runs: 1,
            runs_after_verdict: 0,
            candidates: 1,
        };
        o.bounties[0].ledger = Some(once.clone());
        assert_eq!(names(&o), Vec::<&str>::new());
        for twice in [
            LedgerJob {
                verdict_runs: 2,
                ..once.clone()
            },
            LedgerJob {
                runs_after_verdict: 1,
                ..once.clone()
            },
            LedgerJob {
                candidates: 2,
                ..once.clone()
            },
        ] {
            o.bounties[0].ledger = Some(twice);
            assert_eq!(names(&o), vec!["no_job_run_twice"]);
        }
    }

    #[test]
    fn a_service_stopped_for_good_is_caught() {
        let mut o = healthy();
        o.serve_stopped_for_good.push("c0-pair-serve-1".into());
        assert_eq!(names(&o), vec!["serve_not_stopped_for_good"]);
    }

    /// Issue #43 item 5: a good bounty settled after its window, or whose window closed with
    /// none, is a missed settlement; one settled in time, or still open and pending, is not.
    #[test]
    fn a_good_bounty_settled_after_its_window_or_never_breaks_good_settled_in_window() {
        let names = |b: BountyObservation| -> Vec<&'static str> {
            check(&Observations {
                bounties: vec![b],
                ..healthy()
            })
            .into_iter()
            .map(|x| x.invariant)
            .filter(|n| *n == "good_settled_in_window")
            .collect()
        };
        assert!(names(good(0)).is_empty());
        let late = BountyObservation {
            settled_at: Some(3701),
            ..good(0)
        };
        assert_eq!(names(late), vec!["good_settled_in_window"]);
        let missed = BountyObservation {
            settled_at: None,
            settled_events: 0,
            window_open: false,
            ..good(0)
        };
        assert_eq!(names(missed), vec!["good_settled_in_window"]);
        let pending = BountyObservation {
            settled_at: None,
            settled_events: 0,
            ..good(0)
        };
        assert!(names(pending).is_empty());
    }
}
